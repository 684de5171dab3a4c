//! The watchers of one watch cache, indexed by the field a watcher pins
//! exactly (`spec.nodeName=N` for every node agent, `metadata.name=X`,
//! `metadata.namespace=NS`), so an event is offered to the watchers that
//! can want it (O(matching)), not to every watcher of the resource. It
//! only finds candidates; the cache checks prefixes and interests and
//! queues events outside its lock.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::watchcache::selectable::Selectable;
use crate::watchcache::{CachedEvent, Interest};

/// The fields watchers are indexed by, in order of preference.
pub const INDEXED_FIELDS: &[&str] = &["spec.nodeName", "metadata.name", "metadata.namespace"];

/// An exact `field=value` a watcher's selector requires.
pub type IndexKey = (&'static str, Box<str>);

/// One watcher.
pub struct Watcher {
    pub prefix: String,
    pub interest: Option<Interest>,
    pub tx: mpsc::Sender<CachedEvent>,
    index: Option<IndexKey>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("prefix", &self.prefix)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// Every watcher, by id, with the index.
#[derive(Debug, Default)]
pub struct Watchers {
    next_id: u64,
    all: HashMap<u64, Arc<Watcher>>,
    by_field: HashMap<IndexKey, Vec<u64>>,
    unindexed: Vec<u64>,
}

impl Watchers {
    /// Adds a watcher; returns its id.
    pub fn add(
        &mut self,
        prefix: &str,
        interest: Option<Interest>,
        tx: mpsc::Sender<CachedEvent>,
        index: Option<IndexKey>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        match &index {
            Some(key) => self.by_field.entry(key.clone()).or_default().push(id),
            None => self.unindexed.push(id),
        }
        self.all.insert(
            id,
            Arc::new(Watcher {
                prefix: prefix.to_string(),
                interest,
                tx,
                index,
            }),
        );
        id
    }

    /// Removes watchers by id (gone or fallen behind).
    pub fn remove(&mut self, ids: &[u64]) {
        for id in ids {
            let Some(w) = self.all.remove(id) else {
                continue;
            };
            match &w.index {
                Some(key) => {
                    if let Some(list) = self.by_field.get_mut(key) {
                        list.retain(|x| x != id);
                        if list.is_empty() {
                            self.by_field.remove(key);
                        }
                    }
                }
                None => self.unindexed.retain(|x| x != id),
            }
        }
    }

    /// Drops watchers whose receiver is gone.
    pub fn remove_closed(&mut self) {
        let closed: Vec<u64> = self
            .all
            .iter()
            .filter(|(_, w)| w.tx.is_closed())
            .map(|(id, _)| *id)
            .collect();
        self.remove(&closed);
    }

    pub fn clear(&mut self) {
        *self = Watchers {
            next_id: self.next_id,
            ..Watchers::default()
        };
    }

    pub fn len(&self) -> usize {
        self.all.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// The watchers under whose prefix `key` lies that may want an event
    /// about an object that is `now` (and was `before`): the unindexed
    /// ones and those whose pinned field value either version has.
    pub fn candidates(
        &self,
        key: &str,
        now: &Selectable,
        before: Option<&Selectable>,
    ) -> Vec<(u64, Arc<Watcher>)> {
        let mut ids: Vec<u64> = self.unindexed.clone();
        if !self.by_field.is_empty() {
            for field in INDEXED_FIELDS {
                for view in std::iter::once(now).chain(before) {
                    let value = view.field(field).unwrap_or("");
                    if value.is_empty() {
                        continue;
                    }
                    let probe: IndexKey = (field, value.into());
                    if let Some(list) = self.by_field.get(&probe) {
                        ids.extend_from_slice(list);
                    }
                }
            }
            if before.is_some() {
                ids.sort_unstable();
                ids.dedup();
            }
        }
        ids.into_iter()
            .filter_map(|id| self.all.get(&id).map(|w| (id, w.clone())))
            .filter(|(_, w)| key.starts_with(w.prefix.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>) -> Selectable {
        let mut spec = json!({});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        crate::watchcache::filter::selectable_view(
            "pods",
            crate::resources::builtin().selectable_for_storage("pods"),
            &json!({"metadata": {"name": name, "namespace": "d"}, "spec": spec}),
        )
    }

    #[test]
    fn events_reach_only_the_watchers_that_can_want_them() {
        let mut w = Watchers::default();
        let mut rxs = Vec::new();
        let mut add = |w: &mut Watchers, prefix: &str, index: Option<IndexKey>| {
            let (tx, rx) = mpsc::channel(1);
            rxs.push(rx);
            w.add(prefix, None, tx, index)
        };
        let n1 = add(
            &mut w,
            "/registry/pods/",
            Some(("spec.nodeName", "n1".into())),
        );
        let n2 = add(
            &mut w,
            "/registry/pods/",
            Some(("spec.nodeName", "n2".into())),
        );
        let all = add(&mut w, "/registry/pods/", None);
        let other_ns = add(&mut w, "/registry/pods/e/", None);
        let named = add(
            &mut w,
            "/registry/pods/",
            Some(("metadata.name", "p".into())),
        );
        let ids = |c: Vec<(u64, Arc<Watcher>)>| {
            let mut v: Vec<u64> = c.into_iter().map(|(id, _)| id).collect();
            v.sort_unstable();
            v
        };
        let key = "/registry/pods/d/p";
        assert_eq!(
            ids(w.candidates(key, &pod("p", Some("n1")), None)),
            vec![n1, all, named]
        );
        assert_eq!(ids(w.candidates(key, &pod("q", None), None)), vec![all]);
        // Moving from n1 to n2 reaches both (one sees it leave).
        assert_eq!(
            ids(w.candidates(key, &pod("q", Some("n2")), Some(&pod("q", Some("n1"))))),
            vec![n1, n2, all]
        );
        w.remove(&[n1, other_ns]);
        assert_eq!(
            ids(w.candidates(key, &pod("p", Some("n1")), None)),
            vec![all, named]
        );
        assert_eq!(w.len(), 3);
        drop(rxs);
        w.remove_closed();
        assert!(w.is_empty());
    }
}
