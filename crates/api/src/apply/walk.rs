//! Walking a wire-form value along its [`Shape`]: what a value is (leaf,
//! granular map or granular list), the path element of a list item, the
//! fields a value sets (upstream `typed/tofieldset.go`) and removing items
//! (`typed/remove.go`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::path::{path_string, Path, PathElement};
use super::schema::{lookup, Key, KeyDefault, Schema, Shape};

/// How a value is walked.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Class {
    /// Compared, merged and owned whole.
    Leaf,
    /// Walked field by field.
    Map(Schema),
    /// Walked element by element.
    List(ListKind),
}

/// A granular list.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ListKind {
    Keyed(&'static [Key], &'static Shape),
    Set,
}

impl ListKind {
    /// The shape of one element.
    pub(crate) fn element(self) -> Shape {
        match self {
            ListKind::Keyed(_, shape) => *shape,
            ListKind::Set => Shape::Atomic,
        }
    }
}

/// The class of one value of `shape`. A value of the wrong type (a string
/// where a map belongs) is a leaf; `null` keeps the shape's class.
fn class_of(shape: Shape, value: &Value) -> Class {
    match (shape, value) {
        (Shape::Atomic, _) => Class::Leaf,
        (Shape::Deduced, Value::Object(_)) => Class::Map(&[]),
        (Shape::Deduced, _) => Class::Leaf,
        (Shape::Map(schema), Value::Object(_) | Value::Null) => Class::Map(schema),
        (Shape::Keyed(keys, element), Value::Array(_) | Value::Null) => {
            Class::List(ListKind::Keyed(keys, element))
        }
        (Shape::Set, Value::Array(_) | Value::Null) => Class::List(ListKind::Set),
        _ => Class::Leaf,
    }
}

/// The class two versions of a value are walked with; when they disagree
/// (a map replaced by a string) the value is a leaf.
pub(crate) fn class(shape: Shape, lhs: Option<&Value>, rhs: Option<&Value>) -> Class {
    let classes: Vec<Class> = [lhs, rhs]
        .into_iter()
        .flatten()
        .map(|v| class_of(shape, v))
        .collect();
    match classes.as_slice() {
        [Class::Map(s), Class::Map(_)] | [Class::Map(s)] => Class::Map(s),
        [Class::List(k), Class::List(_)] | [Class::List(k)] => Class::List(*k),
        _ => Class::Leaf,
    }
}

/// Whether a granular map or list is absent, null or empty (upstream then
/// compares and merges it as a leaf).
pub(crate) fn is_empty(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        _ => true,
    }
}

/// The items of a list (none for anything else).
pub(crate) fn items(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The path element of an element of a granular list (upstream
/// `listItemToPathElement`).
pub(crate) fn item_element(kind: ListKind, item: &Value) -> Result<PathElement, String> {
    match (kind, item) {
        (ListKind::Keyed(..), Value::Null) => {
            Err("associative list with keys may not have a null element".to_owned())
        }
        (ListKind::Keyed(keys, _), Value::Object(map)) => {
            let mut fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|key| {
                    let value = map.get(key.name).cloned().or(match key.default {
                        Some(KeyDefault::Str(s)) => Some(Value::from(s)),
                        Some(KeyDefault::Int(i)) => Some(Value::from(i)),
                        None => None,
                    })?;
                    Some((key.name.to_owned(), value))
                })
                .collect();
            if fields.is_empty() {
                let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields {} \
                     (and doesn't have default values for any key fields)",
                    Value::from(names)
                ));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
        (ListKind::Keyed(..), _) => {
            Err("associative list with keys may not have non-map elements".to_owned())
        }
        (ListKind::Set, Value::Object(_)) => {
            Err("associative list without keys has an element that's a map type".to_owned())
        }
        (ListKind::Set, Value::Array(_)) => {
            Err("not supported: associative list with lists as elements".to_owned())
        }
        (ListKind::Set, Value::Null) => {
            Err("associative list without keys has an element that's an explicit null".to_owned())
        }
        (ListKind::Set, value) => Ok(PathElement::Value(value.clone())),
    }
}

/// The fields `value` sets. Problems (elements without keys, and with
/// `!allow_duplicates` repeated keys) are appended to `errors` in
/// upstream's `<path>: <message>` form; such elements are skipped.
pub(crate) fn field_set(
    value: &Value,
    shape: Shape,
    allow_duplicates: bool,
    errors: &mut Vec<String>,
) -> FieldSet {
    let mut walk = SetWalk {
        set: FieldSet::new(),
        path: Vec::new(),
        allow_duplicates,
        errors,
    };
    walk.value(value, shape);
    walk.set
}

struct SetWalk<'a> {
    set: FieldSet,
    path: Path,
    allow_duplicates: bool,
    errors: &'a mut Vec<String>,
}

impl SetWalk<'_> {
    fn value(&mut self, value: &Value, shape: Shape) {
        match class_of(shape, value) {
            Class::Leaf => self.set.insert(&self.path),
            Class::Map(schema) => {
                for (name, child) in value.as_object().into_iter().flatten() {
                    self.path.push(PathElement::Field(name.clone()));
                    self.value(child, lookup(schema, name));
                    if child.is_null() || child.as_object().is_some_and(Map::is_empty) {
                        self.set.insert(&self.path);
                    }
                    self.path.pop();
                }
            }
            Class::List(kind) => self.list(value.as_array().map_or(&[], Vec::as_slice), kind),
        }
    }

    fn list(&mut self, items: &[Value], kind: ListKind) {
        let mut elements = Vec::with_capacity(items.len());
        let mut counts: BTreeMap<PathElement, usize> = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            match item_element(kind, item) {
                Ok(element) => {
                    *counts.entry(element.clone()).or_default() += 1;
                    elements.push(Some(element));
                }
                Err(message) => {
                    let at = path_string(&self.path);
                    self.errors
                        .push(format!("{at}: element {index}: {message}"));
                    elements.push(None);
                }
            }
        }
        for (element, count) in &counts {
            if *count > 1 {
                self.path.push(element.clone());
                self.set.insert(&self.path);
                self.path.pop();
                if !self.allow_duplicates {
                    let at = path_string(&self.path);
                    self.errors
                        .push(format!("{at}: duplicate entries for key {element}"));
                }
            }
        }
        for (item, element) in items.iter().zip(elements) {
            let Some(element) = element.filter(|e| counts.get(e) == Some(&1)) else {
                continue;
            };
            self.path.push(element);
            self.value(item, kind.element());
            self.set.insert(&self.path);
            self.path.pop();
        }
    }
}

/// Removes the items at the paths of `set` (with everything below them)
/// from `value`. A map or list emptied this way goes too, as upstream's
/// null does once the object is decoded.
pub(crate) fn remove_items(value: &mut Value, set: &FieldSet, shape: Shape) {
    remove(value, set, shape);
}

/// Returns whether `value` was emptied.
fn remove(value: &mut Value, set: &FieldSet, shape: Shape) -> bool {
    match class_of(shape, value) {
        Class::Leaf => false,
        Class::Map(schema) => {
            let Some(map) = value.as_object_mut().filter(|m| !m.is_empty()) else {
                return false;
            };
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let element = PathElement::Field(name.clone());
                let gone = set.has_member(&element)
                    || match (set.child(&element), map.get_mut(&name)) {
                        (Some(below), Some(child)) => remove(child, below, lookup(schema, &name)),
                        _ => false,
                    };
                if gone {
                    map.remove(&name);
                }
            }
            map.is_empty()
        }
        Class::List(kind) => {
            let Some(items) = value.as_array_mut().filter(|l| !l.is_empty()) else {
                return false;
            };
            items.retain_mut(|item| {
                let Ok(element) = item_element(kind, item) else {
                    return true;
                };
                if set.has_member(&element) {
                    return false;
                }
                if let Some(below) = set.child(&element) {
                    remove(item, below, kind.element());
                }
                true
            });
            items.is_empty()
        }
    }
}
