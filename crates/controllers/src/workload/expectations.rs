//! Expectations (upstream's `ControllerExpectations`): the objects an
//! owner created or deleted and its informer has not shown yet. While any
//! are outstanding the owner must not count its objects again to decide
//! on more creates or deletes, or a slow watch would make it act twice.
//!
//! Unlike upstream's counters, the pending objects are kept by name (and
//! uid for deletes) and checked against the informer's store, so there is
//! no event hook to keep in step: a create is seen once the store has the
//! name, a delete once the store no longer has that uid (or has it marked
//! for deletion). Expectations older than the timeout (upstream's 5 min)
//! are dropped, so a lost event only delays, never stops, an owner.
//!
//! This module owns that bookkeeping; it writes nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;

/// How long expectations are waited for (upstream's `ExpectationsTimeout`).
pub const TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Pending {
    creates: HashSet<String>,
    deletes: HashMap<String, String>,
    since: Instant,
}

/// Outstanding creates and deletes per owner key (`namespace/name`).
#[derive(Debug)]
pub struct Expectations {
    pending: Mutex<HashMap<String, Pending>>,
    timeout: Duration,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new(TIMEOUT)
    }
}

impl Expectations {
    /// Expectations dropped after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            pending: Mutex::default(),
            timeout,
        }
    }

    /// `owner` created objects named `created` and deleted `deleted`
    /// (name, uid) in `namespace`'s store.
    pub fn expect(
        &self,
        owner: &str,
        created: impl IntoIterator<Item = String>,
        deleted: impl IntoIterator<Item = (String, String)>,
    ) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        // An owner deleted with writes pending is never reconciled again:
        // its entry goes once timed out, when the next one is recorded.
        pending.retain(|_, p| p.since.elapsed() < self.timeout);
        let entry = pending.entry(owner.to_string()).or_insert_with(|| Pending {
            creates: HashSet::new(),
            deletes: HashMap::new(),
            since: Instant::now(),
        });
        entry.creates.extend(created);
        entry.deletes.extend(deleted);
        entry.since = Instant::now();
        if entry.creates.is_empty() && entry.deletes.is_empty() {
            pending.remove(owner);
        }
    }

    /// Whether everything `owner` expects in `namespace` is in `store`
    /// (or has timed out): then it may count its objects again.
    pub fn satisfied<T>(&self, owner: &str, namespace: &str, store: &Store<T>) -> bool
    where
        T: Resource<DynamicType = ()> + Clone + 'static,
    {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = pending.get_mut(owner) else {
            return true;
        };
        entry
            .creates
            .retain(|name| store.get(&ObjectRef::new(name).within(namespace)).is_none());
        entry.deletes.retain(|name, uid| {
            store
                .get(&ObjectRef::new(name).within(namespace))
                .is_some_and(|o| {
                    o.meta().uid.as_deref() == Some(uid.as_str())
                        && o.meta().deletion_timestamp.is_none()
                })
        });
        let done = entry.creates.is_empty() && entry.deletes.is_empty();
        if done || entry.since.elapsed() >= self.timeout {
            if !done {
                tracing::debug!(owner, "expectations timed out");
            }
            pending.remove(owner);
            return true;
        }
        false
    }

    /// Forgets `owner` (it was deleted).
    pub fn forget(&self, owner: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::store;
    use kube::runtime::watcher;

    use super::*;

    fn pod(name: &str, uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn creates_and_deletes_are_waited_for_until_the_store_shows_them() {
        let (reader, mut writer) = store::<Pod>();
        writer.apply_watcher_event(&watcher::Event::Apply(pod("old", "u-old")));
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs", "ns", &reader));
        e.expect(
            "ns/rs",
            ["new".to_string()],
            [("old".to_string(), "u-old".to_string())],
        );
        assert!(!e.satisfied("ns/rs", "ns", &reader));
        writer.apply_watcher_event(&watcher::Event::Apply(pod("new", "u-new")));
        assert!(
            !e.satisfied("ns/rs", "ns", &reader),
            "the delete is not seen yet"
        );
        writer.apply_watcher_event(&watcher::Event::Delete(pod("old", "u-old")));
        assert!(e.satisfied("ns/rs", "ns", &reader));
        // A pod of the same name with another uid is not the deleted one.
        writer.apply_watcher_event(&watcher::Event::Apply(pod("old", "u-again")));
        e.expect("ns/rs", [], [("new".to_string(), "u-new".to_string())]);
        assert!(!e.satisfied("ns/rs", "ns", &reader));
        writer.apply_watcher_event(&watcher::Event::Delete(pod("new", "u-new")));
        assert!(e.satisfied("ns/rs", "ns", &reader));
    }

    #[test]
    fn expectations_time_out() {
        let (reader, _writer) = store::<Pod>();
        let e = Expectations::new(Duration::ZERO);
        e.expect("ns/rs", ["never".to_string()], []);
        assert!(e.satisfied("ns/rs", "ns", &reader));
    }
}
