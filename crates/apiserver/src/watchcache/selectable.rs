//! [`Selectable`]: what the watch cache keeps of each object for
//! selectors, and reads back. Making one from an object is
//! `crate::watchcache::filter`'s; routing events by it is
//! `crate::watchcache::watchers`'.

/// What selectors can read of one object: its name, namespace, labels and
/// the selectable fields of its resource, as field selectors compare them
/// (numbers and booleans as text). The watch cache keeps this for every
/// item instead of the parsed object; a few hundred bytes, where a tree of
/// the same paths cost a couple of kilobytes in map nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectable {
    /// The kept paths that are set to a scalar, in the order the view keeps them (`filter::view_paths`).
    fields: Box<[(&'static str, Box<str>)]>,
    /// `metadata.labels`, sorted by key.
    labels: Box<[(Box<str>, Box<str>)]>,
}

impl Selectable {
    /// The value of a kept field path (`metadata.name`, `spec.nodeName`…).
    pub fn field(&self, path: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, v)| &**v)
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .and_then(|i| self.labels.get(i))
            .map(|(_, v)| &**v)
    }

    pub(super) fn new(
        fields: Vec<(&'static str, Box<str>)>,
        mut labels: Vec<(Box<str>, Box<str>)>,
    ) -> Self {
        labels.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Selectable {
            fields: fields.into_boxed_slice(),
            labels: labels.into_boxed_slice(),
        }
    }
}
