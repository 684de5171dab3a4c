//! Which fields differ between two versions of an object, after
//! structured-merge-diff's `typed/compare.go`.
//!
//! Leaves (scalars, atomic values, empty maps and lists) are added, removed
//! or modified; a granular map or list element that appears or disappears
//! is added or removed itself as well as everything below it. A granular
//! value that only changes inside is not modified itself, so owning a list
//! element does not conflict with changes to its fields.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fieldset::FieldSet;
use super::path::{Path, PathElement};
use super::schema::{lookup, Shape};
use super::walk::{class, is_empty, item_element, items, Class, ListKind};

/// The differences between two versions of an object.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

impl Comparison {
    /// Fields added or modified.
    pub(crate) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Compares `old` and `new` (objects of `shape`).
pub(crate) fn compare(old: &Value, new: &Value, shape: Shape) -> Comparison {
    let mut walk = CompareWalk {
        cmp: Comparison::default(),
        path: Vec::new(),
    };
    walk.value(Some(old), Some(new), shape);
    walk.cmp
}

struct CompareWalk {
    cmp: Comparison,
    path: Path,
}

impl CompareWalk {
    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>) {
        match (lhs, rhs) {
            (None, _) => self.cmp.added.insert(&self.path),
            (_, None) => self.cmp.removed.insert(&self.path),
            (Some(l), Some(r)) if l != r => self.cmp.modified.insert(&self.path),
            _ => {}
        }
    }

    fn value(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, shape: Shape) {
        match class(shape, lhs, rhs) {
            Class::Leaf => return self.leaf(lhs, rhs),
            _ if is_empty(lhs) && is_empty(rhs) => return self.leaf(lhs, rhs),
            Class::Map(schema) => {
                let lmap = lhs.and_then(Value::as_object);
                let rmap = rhs.and_then(Value::as_object);
                let names: BTreeSet<&String> = lmap
                    .into_iter()
                    .chain(rmap)
                    .flat_map(|m| m.keys())
                    .collect();
                for name in names {
                    self.path.push(PathElement::Field(name.clone()));
                    let (l, r) = (
                        lmap.and_then(|m| m.get(name)),
                        rmap.and_then(|m| m.get(name)),
                    );
                    self.value(l, r, lookup(schema, name));
                    self.path.pop();
                }
            }
            Class::List(kind) => {
                self.list(items(lhs), items(rhs), kind);
            }
        }
        if lhs.is_none() {
            self.cmp.added.insert(&self.path);
        } else if rhs.is_none() {
            self.cmp.removed.insert(&self.path);
        }
    }

    /// Upstream `visitListItems`: elements are matched by path element;
    /// repeated elements are compared as a whole.
    fn list(&mut self, lhs: &[Value], rhs: &[Value], kind: ListKind) {
        let mut order: Vec<PathElement> = Vec::new();
        let mut lvalues: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
        let mut rvalues: BTreeMap<PathElement, Vec<&Value>> = BTreeMap::new();
        for item in lhs {
            let Ok(element) = item_element(kind, item) else {
                continue;
            };
            let entry = lvalues.entry(element.clone()).or_default();
            if entry.is_empty() {
                order.push(element);
            }
            entry.push(item);
        }
        for item in rhs {
            let Ok(element) = item_element(kind, item) else {
                continue;
            };
            let entry = rvalues.entry(element.clone()).or_default();
            if entry.is_empty() && !lvalues.contains_key(&element) {
                order.push(element);
            }
            entry.push(item);
        }
        for element in order {
            let l = lvalues.get(&element).map_or(&[][..], Vec::as_slice);
            let r = rvalues.get(&element).map_or(&[][..], Vec::as_slice);
            self.path.push(element);
            match (l.len(), r.len()) {
                (0..=1, 0..=1) => {
                    self.value(l.first().copied(), r.first().copied(), kind.element())
                }
                (2.., 2..) => {
                    if l != r {
                        self.cmp.modified.insert(&self.path);
                    }
                }
                (2.., _) => {
                    if let Some(first) = r.first() {
                        self.value(None, Some(first), kind.element());
                    }
                    self.cmp.removed.insert(&self.path);
                }
                _ => {
                    if let Some(first) = l.first() {
                        self.value(Some(first), None, kind.element());
                    }
                    self.cmp.added.insert(&self.path);
                }
            }
            self.path.pop();
        }
    }
}
