//! Merging an applied configuration into the live object, after
//! structured-merge-diff's `typed/merge.go` with its "keep the right-hand
//! side" rule: leaves and atomic values of the configuration replace the
//! live ones, granular maps merge field by field and granular lists element
//! by element (by key, or by value for sets).
//!
//! Order of a merged list, as upstream: live elements the configuration
//! doesn't name keep their place; those it names come in its order.
//! A `null` leaf in the configuration clears the field.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{path_string, Path, PathElement};
use super::schema::{lookup, Shape};
use super::walk::{class, is_empty, item_element, items, Class, ListKind};

/// Stands for a live element whose key appears more than once.
static NULL: Value = Value::Null;

/// Merges `config` into `live` (objects of `shape`). Errors are upstream's
/// `<path>: <message>` lines (elements without keys, repeated keys in the
/// configuration).
pub(crate) fn merge(live: &Value, config: &Value, shape: Shape) -> Result<Value, Vec<String>> {
    let mut walk = MergeWalk {
        path: Vec::new(),
        errors: Vec::new(),
    };
    let merged = walk.value(Some(live), Some(config), shape);
    if walk.errors.is_empty() {
        Ok(merged.unwrap_or(Value::Null))
    } else {
        Err(walk.errors)
    }
}

struct MergeWalk {
    path: Path,
    errors: Vec<String>,
}

impl MergeWalk {
    fn value(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, shape: Shape) -> Option<Value> {
        match class(shape, lhs, rhs) {
            Class::Leaf => rhs.or(lhs).cloned(),
            _ if is_empty(lhs) && is_empty(rhs) => rhs.or(lhs).cloned(),
            Class::Map(schema) => {
                let lmap = lhs.and_then(Value::as_object);
                let rmap = rhs.and_then(Value::as_object);
                let names: BTreeSet<&String> = lmap
                    .into_iter()
                    .chain(rmap)
                    .flat_map(|m| m.keys())
                    .collect();
                let mut out = Map::new();
                for name in names {
                    let l = lmap.and_then(|m| m.get(name));
                    let r = rmap.and_then(|m| m.get(name));
                    self.path.push(PathElement::Field(name.clone()));
                    let merged = self.value(l, r, lookup(schema, name));
                    self.path.pop();
                    match merged {
                        Some(Value::Null) if r.is_some_and(Value::is_null) => {}
                        Some(value) => {
                            out.insert(name.clone(), value);
                        }
                        None => {}
                    }
                }
                Some(Value::Object(out))
            }
            Class::List(kind) => Some(Value::Array(self.list(items(lhs), items(rhs), kind))),
        }
    }

    /// Path elements of a list's items; repeated keys are an error unless
    /// `allow_duplicates` (live objects), where they map to `null`.
    fn index<'v>(
        &mut self,
        items: &'v [Value],
        kind: ListKind,
        allow_duplicates: bool,
    ) -> (
        Vec<(PathElement, &'v Value)>,
        BTreeMap<PathElement, &'v Value>,
    ) {
        let mut elements = Vec::with_capacity(items.len());
        let mut observed = BTreeMap::new();
        for (index, item) in items.iter().enumerate() {
            let element = match item_element(kind, item) {
                Ok(element) => element,
                Err(message) => {
                    let at = path_string(&self.path);
                    self.errors
                        .push(format!("{at}: element {index}: {message}"));
                    continue;
                }
            };
            if observed.contains_key(&element) {
                if !allow_duplicates {
                    let at = path_string(&self.path);
                    self.errors
                        .push(format!("{at}: duplicate entries for key {element}"));
                    continue;
                }
                observed.insert(element.clone(), &NULL);
            } else {
                observed.insert(element.clone(), item);
            }
            elements.push((element, item));
        }
        (elements, observed)
    }

    fn item(
        &mut self,
        element: &PathElement,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        kind: ListKind,
        out: &mut Vec<Value>,
    ) {
        self.path.push(element.clone());
        out.extend(self.value(lhs, rhs, kind.element()));
        self.path.pop();
    }

    /// Upstream `visitListItems` of the merging walker.
    #[expect(
        clippy::indexing_slicing,
        reason = "li and ri are checked against the lengths before each use"
    )]
    fn list(&mut self, lhs: &[Value], rhs: &[Value], kind: ListKind) -> Vec<Value> {
        let (rhs, rhs_observed) = self.index(rhs, kind, false);
        let (lhs, lhs_observed) = self.index(lhs, kind, true);
        let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
        if !self.errors.is_empty() {
            return out;
        }
        let mut shared = rhs
            .iter()
            .map(|(element, _)| element)
            .filter(|element| lhs_observed.contains_key(*element));
        let mut next_shared = shared.next();
        let mut merged_rhs: BTreeSet<&PathElement> = BTreeSet::new();
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if li < lhs.len() && ri < rhs.len() {
                let element = &lhs[li].0;
                if *element == rhs[ri].0 {
                    merged_rhs.insert(element);
                    let (l, r) = (lhs_observed.get(element), rhs_observed.get(element));
                    self.item(element, l.copied(), r.copied(), kind, &mut out);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if rhs_observed.contains_key(element) && next_shared.is_some_and(|n| n != element) {
                    li += 1;
                    continue;
                }
            }
            if li < lhs.len() {
                let (element, item) = &lhs[li];
                if !rhs_observed.contains_key(element) {
                    self.item(element, Some(item), None, kind, &mut out);
                    li += 1;
                    continue;
                } else if merged_rhs.contains(element) {
                    li += 1;
                }
            }
            if ri < rhs.len() {
                let element = &rhs[ri].0;
                merged_rhs.insert(element);
                let (l, r) = (lhs_observed.get(element), rhs_observed.get(element));
                self.item(element, l.copied(), r.copied(), kind, &mut out);
                ri += 1;
                if next_shared == Some(element) {
                    next_shared = shared.next();
                }
            }
        }
        out
    }
}
