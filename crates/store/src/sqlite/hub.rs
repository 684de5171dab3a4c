//! Fans committed events out to live watchers. The writer calls
//! [`Hub::publish`] right after each commit; a new watcher registers under
//! the same lock, so it learns exactly which revision the live feed starts
//! after and reads everything before that from history.

use std::sync::Mutex;

use crate::watch::{channel, WatchReceiver, WatchSender};
use crate::Event;

#[derive(Debug)]
struct Watcher {
    prefix: String,
    sender: WatchSender,
}

#[derive(Debug)]
struct State {
    /// Revision of the last published (committed) write.
    published: i64,
    watchers: Vec<Watcher>,
}

/// The live-watcher registry of one store.
#[derive(Debug)]
pub(super) struct Hub {
    state: Mutex<State>,
    capacity: usize,
}

impl Hub {
    pub(super) fn new(published: i64, capacity: usize) -> Self {
        Hub {
            state: Mutex::new(State {
                published,
                watchers: Vec::new(),
            }),
            capacity,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The revision of the last committed write.
    pub(super) fn published(&self) -> i64 {
        self.lock().published
    }

    /// Registers a live watcher on `prefix`. Returns its queue and the
    /// revision after which the live feed starts.
    pub(super) fn subscribe(&self, prefix: &str) -> (WatchReceiver, i64) {
        let (sender, receiver) = channel(self.capacity);
        let mut state = self.lock();
        state.watchers.push(Watcher {
            prefix: prefix.to_string(),
            sender,
        });
        (receiver, state.published)
    }

    /// Delivers one committed batch (in revision order) and advances the
    /// published revision to `revision`.
    pub(super) fn publish(&self, events: &[Event], revision: i64) {
        let mut state = self.lock();
        state.published = revision;
        if events.is_empty() {
            state.watchers.retain(|w| !w.sender.is_closed());
            return;
        }
        state.watchers.retain(|w| {
            w.sender.push_all(
                events
                    .iter()
                    .filter(|e| e.kv.key.as_bytes().starts_with(w.prefix.as_bytes())),
            )
        });
    }
}
