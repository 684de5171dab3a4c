//! [`FieldSet`]: a set of field paths stored as a tree, after
//! structured-merge-diff's `fieldpath.Set`, with its `FieldsV1` encoding
//! (upstream `serialize.go`).
//!
//! A node holds its *members* (paths that end there) and its *children*
//! (paths that go on). A path can be both: a list element that is owned as
//! a whole and also has owned fields is written `{".":{}, "f:image":{}}`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::path::{Path, PathElement};
use super::ApplyError;

/// A set of field paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    /// Never holds an empty set.
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set has no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` (the empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is in the set.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether `element` (a path of length one below this node) is a member.
    pub(crate) fn has_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The paths below `element`, if any.
    pub(crate) fn child(&self, element: &PathElement) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// Every path, in upstream's iteration order: a node's members, then its
    /// children's paths.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(path);
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let both = child.intersection(other.children.get(element)?);
                (!both.is_empty()).then(|| (element.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` not in `other`. Exact paths only, as upstream: taking
    /// away `.spec` leaves `.spec.replicas`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| match other.children.get(element) {
                Some(theirs) => {
                    let rest = child.difference(theirs);
                    (!rest.is_empty()).then(|| (element.clone(), rest))
                }
                None => Some((element.clone(), child.clone())),
            })
            .collect();
        FieldSet { members, children }
    }

    /// Upstream `EnsureNamedFieldsAreMembers`: every map field that leads to
    /// other paths becomes a path of its own (so pruning can remove it).
    pub(crate) fn with_named_fields_as_members(&self) -> FieldSet {
        let mut members = self.members.clone();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            if matches!(element, PathElement::Field(_)) {
                members.insert(element.clone());
            }
            children.insert(element.clone(), child.with_named_fields_as_members());
        }
        FieldSet { members, children }
    }

    /// The `FieldsV1` JSON of the set (the `fieldsV1` of a managedFields
    /// entry).
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_map(false))
    }

    fn fields_v1_map(&self, include_self: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if include_self && !self.is_empty() {
            map.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for member in &self.members {
            if !self.children.contains_key(member) {
                map.insert(member.to_fields_v1_key(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let is_member = self.members.contains(element);
            map.insert(
                element.to_fields_v1_key(),
                Value::Object(child.fields_v1_map(is_member)),
            );
        }
        map
    }

    /// Reads a `FieldsV1` JSON value. Keys of unknown element types are
    /// skipped, as upstream; anything else malformed is an error.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, ApplyError> {
        read_fields_v1(value)
            .map(|(set, _)| set)
            .map_err(|e| ApplyError::Invalid(format!("error decoding set: {e}")))
    }
}

/// Upstream `readIterV1`: the set below a node and whether the node itself
/// is a member (it has `"."`, or nothing below it).
fn read_fields_v1(value: &Value) -> Result<(FieldSet, bool), String> {
    let Value::Object(map) = value else {
        return Err(format!("expected an object, found {value}"));
    };
    let mut set = FieldSet::new();
    let mut is_member = false;
    for (key, child) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(element) = PathElement::from_fields_v1_key(key)? else {
            continue;
        };
        let (below, child_is_member) = read_fields_v1(child)?;
        if child_is_member {
            set.members.insert(element.clone());
        }
        if !below.is_empty() {
            set.children.insert(element, below);
        }
    }
    let is_member = is_member || set.is_empty();
    Ok((set, is_member))
}
