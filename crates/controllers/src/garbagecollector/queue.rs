//! A work queue of uids as client-go's: an item queued twice is worked
//! once, and never by two workers at a time (queued again while being
//! worked, it is worked again after).
//!
//! This module owns only the queue; what a worker does is `worker`'s.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    order: VecDeque<String>,
    dirty: HashSet<String>,
    processing: HashSet<String>,
}

/// The queue.
#[derive(Debug, Default)]
pub struct Queue {
    inner: Mutex<Inner>,
    notify: Notify,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `uid` unless it already waits.
    pub fn add(&self, uid: String) {
        let mut q = self.lock();
        if !q.dirty.insert(uid.clone()) {
            return;
        }
        if !q.processing.contains(&uid) {
            q.order.push_back(uid);
            drop(q);
            self.notify.notify_one();
        }
    }

    /// The next uid to work on; call [`Queue::done`] after.
    pub async fn next(&self) -> String {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut q = self.lock();
                if let Some(uid) = q.order.pop_front() {
                    q.dirty.remove(&uid);
                    q.processing.insert(uid.clone());
                    if !q.order.is_empty() {
                        self.notify.notify_one();
                    }
                    return uid;
                }
            }
            notified.await;
        }
    }

    /// `uid` was worked on; queued meanwhile, it waits again.
    pub fn done(&self, uid: &str) {
        let mut q = self.lock();
        q.processing.remove(uid);
        if q.dirty.contains(uid) {
            q.order.push_back(uid.to_string());
            drop(q);
            self.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_item_is_worked_once_and_again_if_queued_while_worked() {
        let q = Queue::default();
        q.add("a".into());
        q.add("a".into());
        q.add("b".into());
        assert_eq!(q.next().await, "a");
        q.add("a".into());
        assert_eq!(q.next().await, "b");
        q.done("b");
        q.done("a");
        assert_eq!(q.next().await, "a");
        q.done("a");
        let empty = tokio::time::timeout(std::time::Duration::from_millis(20), q.next()).await;
        assert!(empty.is_err());
    }
}
