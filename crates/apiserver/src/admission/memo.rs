//! What admission plugins decode of the objects they read on every
//! request (the namespace of each create, the priority classes of each
//! pod), kept per object version so each version is decoded once rather
//! than once per request.
//!
//! This module owns [`Memo`] and [`Memos`] (one of each per server, in
//! [`crate::AppState`]: a revision names one version only within one
//! store). It reads nothing itself; plugins hand it the key, the revision
//! and how to decode.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::namespace_lifecycle::Lifecycle;
use super::priority::Class;

/// Versions a memo keeps before it starts over (a server with more
/// namespaces than this decodes a few of them again).
const MAX_ENTRIES: usize = 4096;

/// The memos of one server's plugins.
#[derive(Debug, Default)]
pub struct Memos {
    /// NamespaceLifecycle: what it reads of each namespace.
    pub(super) namespaces: Memo<Lifecycle>,
    /// Priority: what it reads of each PriorityClass.
    pub(super) priority_classes: Memo<Class>,
    /// ResourceQuota: one lock per namespace, held by a create in a
    /// namespace with quotas from its quota check until it is stored.
    pub(super) quota_locks: NamespaceLocks,
}

/// An async lock per namespace (kept for the server's life: one small
/// entry per namespace that ever had a quota).
#[derive(Debug, Default)]
pub struct NamespaceLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl NamespaceLocks {
    /// Waits for `namespace`'s lock.
    pub async fn lock(&self, namespace: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(namespace.to_string())
            .or_default()
            .clone();
        lock.lock_owned().await
    }
}

/// One decoded value per key, for the revision it was decoded from.
#[derive(Debug)]
pub struct Memo<T> {
    entries: Mutex<HashMap<String, (i64, Arc<T>)>>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo {
            entries: Mutex::default(),
        }
    }
}

impl<T> Memo<T> {
    /// The value decoded from `key` at `revision`, decoding it (outside
    /// the lock) when this version has not been seen.
    pub fn get_or_decode<E>(
        &self,
        key: &str,
        revision: i64,
        decode: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        if let Some((seen, value)) = self.lock().get(key) {
            if *seen == revision {
                return Ok(value.clone());
            }
        }
        let value = Arc::new(decode()?);
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(key) {
            entries.clear();
        }
        entries.insert(key.to_owned(), (revision, value.clone()));
        Ok(value)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (i64, Arc<T>)>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_decoded_once_and_a_new_revision_again() {
        let memo: Memo<String> = Memo::default();
        let decodes = std::cell::Cell::new(0);
        let get = |rev: i64, text: &str| {
            memo.get_or_decode("/k", rev, || {
                decodes.set(decodes.get() + 1);
                Ok::<_, ()>(text.to_owned())
            })
            .unwrap()
        };
        assert_eq!(*get(1, "one"), "one");
        assert_eq!(*get(1, "ignored"), "one");
        assert_eq!(*get(2, "two"), "two");
        assert_eq!(decodes.get(), 2);
    }

    #[test]
    fn a_failed_decode_is_not_kept() {
        let memo: Memo<String> = Memo::default();
        assert!(memo
            .get_or_decode("/k", 1, || Err::<String, _>("bad"))
            .is_err());
        let v = memo.get_or_decode("/k", 1, || Ok::<_, ()>("good".into()));
        assert_eq!(*v.unwrap(), "good");
    }

    #[test]
    fn it_starts_over_past_its_bound() {
        let memo: Memo<usize> = Memo::default();
        for i in 0..=MAX_ENTRIES {
            memo.get_or_decode(&format!("/k{i}"), 1, || Ok::<_, ()>(i))
                .unwrap();
        }
        assert!(memo.lock().len() <= MAX_ENTRIES);
    }
}
