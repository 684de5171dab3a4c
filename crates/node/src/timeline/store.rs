//! The finished startup timelines of this node's pods, shared in the
//! process: the pod workers put one in when their pod is first Ready;
//! readers (the agent's endpoint, metrics) look them up by pod or take
//! them all. Bounded: the oldest go first past [`MAX_KEPT`], and a pod's
//! is dropped when its worker ends.
//!
//! A cheap clone of one `Arc`; it never computes nor writes anything.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::compute::Finished;

/// How many timelines are kept (a node runs at most a few hundred pods).
pub const MAX_KEPT: usize = 1024;

/// Finished timelines, newest last.
#[derive(Debug, Clone, Default)]
pub struct Store {
    kept: Arc<Mutex<VecDeque<Arc<Finished>>>>,
}

impl Store {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Arc<Finished>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `finished`, in place of an earlier one of the same pod.
    pub fn put(&self, finished: Finished) {
        let mut kept = self.lock();
        kept.retain(|f| f.uid != finished.uid);
        kept.push_back(Arc::new(finished));
        while kept.len() > MAX_KEPT {
            kept.pop_front();
        }
    }

    /// The timeline of pod `namespace/name`, if it has one.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Finished>> {
        self.lock()
            .iter()
            .rev()
            .find(|f| f.namespace == namespace && f.name == name)
            .cloned()
    }

    /// Every timeline kept, oldest first.
    pub fn all(&self) -> Vec<Arc<Finished>> {
        self.lock().iter().cloned().collect()
    }

    /// Forgets pod `uid`'s timeline.
    pub fn remove(&self, uid: &str) {
        self.lock().retain(|f| f.uid != uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(name: &str, uid: &str) -> Finished {
        Finished {
            api_version: String::new(),
            kind: String::new(),
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
            node: "n1".into(),
            created_ms: 0,
            ready_ms: 0,
            total_ms: 0,
            ready_after: String::new(),
            init_containers: 0,
            phases: Vec::new(),
            steps: Vec::new(),
        }
    }

    #[test]
    fn put_get_replace_remove() {
        let s = Store::new();
        s.put(finished("a", "u1"));
        s.put(finished("b", "u2"));
        s.put(finished("a", "u3"));
        assert_eq!(s.get("default", "a").unwrap().uid, "u3");
        assert_eq!(s.all().len(), 3);
        s.remove("u3");
        assert_eq!(s.get("default", "a").unwrap().uid, "u1");
        assert!(s.get("other", "a").is_none());
        for i in 0..MAX_KEPT + 5 {
            s.put(finished("x", &format!("x{i}")));
        }
        assert_eq!(s.all().len(), MAX_KEPT);
    }
}
