//! The watch plumbing both backends share: a bounded per-watcher queue fed
//! without blocking by the write path (SQLite) or a forwarding task (etcd),
//! and the [`WatchStream`] handed to callers.
//!
//! A watcher that stops reading is cut off: once its queue holds `capacity`
//! events the queue is dropped and the next read returns
//! [`Error::WatcherTooSlow`]. The producer never waits on a consumer and
//! never buffers without bound.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::Stream;
use tokio::sync::Notify;

use crate::{Error, Event, Result};

/// Default bound on events buffered for one watcher.
pub const DEFAULT_WATCH_CAPACITY: usize = 10_000;

/// The stream of events (or one terminal error) of one watch.
pub struct WatchStream {
    inner: BoxStream<'static, Result<Event>>,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream").finish_non_exhaustive()
    }
}

impl WatchStream {
    pub fn new(inner: impl Stream<Item = Result<Event>> + Send + 'static) -> Self {
        WatchStream {
            inner: Box::pin(inner),
        }
    }
}

impl Stream for WatchStream {
    type Item = Result<Event>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

#[derive(Debug)]
struct State {
    queue: VecDeque<Event>,
    error: Option<Error>,
    sender_gone: bool,
    receiver_gone: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    notify: Notify,
    /// Wakes a producer waiting in [`WatchSender::closed`].
    reader_gone: Notify,
    capacity: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-push; the
        // queue itself is still a valid VecDeque.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Producer side of one watcher's queue.
#[derive(Debug)]
pub(crate) struct WatchSender {
    shared: Arc<Shared>,
}

/// Consumer side of one watcher's queue.
#[derive(Debug)]
pub(crate) struct WatchReceiver {
    shared: Arc<Shared>,
}

/// A bounded single-consumer queue for one watcher.
pub(crate) fn channel(capacity: usize) -> (WatchSender, WatchReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            error: None,
            sender_gone: false,
            receiver_gone: false,
        }),
        notify: Notify::new(),
        reader_gone: Notify::new(),
        capacity: capacity.max(1),
    });
    (
        WatchSender {
            shared: shared.clone(),
        },
        WatchReceiver { shared },
    )
}

impl WatchSender {
    /// Queues events. Returns false when this watcher is finished (its
    /// reader went away, or it just overflowed and was cut off): the
    /// producer should drop it.
    pub(crate) fn push_all<'a>(&self, events: impl IntoIterator<Item = &'a Event>) -> bool {
        let mut state = self.shared.lock();
        if state.receiver_gone || state.error.is_some() {
            return false;
        }
        let mut pushed = false;
        for event in events {
            if state.queue.len() >= self.shared.capacity {
                state.queue = VecDeque::new();
                state.error = Some(Error::WatcherTooSlow {
                    capacity: self.shared.capacity,
                });
                drop(state);
                self.shared.notify.notify_one();
                return false;
            }
            state.queue.push_back(event.clone());
            pushed = true;
        }
        drop(state);
        if pushed {
            self.shared.notify.notify_one();
        }
        true
    }

    /// Ends the watch with `error` after the events already queued.
    pub(crate) fn fail(&self, error: Error) {
        let mut state = self.shared.lock();
        if state.error.is_none() {
            state.error = Some(error);
        }
        drop(state);
        self.shared.notify.notify_one();
    }

    /// True once the reader has dropped its stream.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.lock().receiver_gone
    }

    /// Resolves once the reader has dropped its stream.
    pub(crate) async fn closed(&self) {
        while !self.is_closed() {
            self.shared.reader_gone.notified().await;
        }
    }
}

impl Drop for WatchSender {
    fn drop(&mut self) {
        self.shared.lock().sender_gone = true;
        self.shared.notify.notify_one();
    }
}

impl WatchReceiver {
    /// The next event, the terminal error, or `None` when the producer is gone.
    pub(crate) async fn recv(&mut self) -> Option<Result<Event>> {
        loop {
            {
                let mut state = self.shared.lock();
                if let Some(event) = state.queue.pop_front() {
                    return Some(Ok(event));
                }
                if let Some(error) = state.error.take() {
                    state.sender_gone = true;
                    return Some(Err(error));
                }
                if state.sender_gone {
                    return None;
                }
            }
            // Single consumer: a notify_one that raced ahead of this call has
            // left a permit, so no wake-up is lost.
            self.shared.notify.notified().await;
        }
    }

    /// The queue as a stream.
    pub(crate) fn into_stream(self) -> impl Stream<Item = Result<Event>> + Send + 'static {
        futures::stream::unfold(self, |mut rx| async move {
            let item = rx.recv().await?;
            Some((item, rx))
        })
    }
}

impl Drop for WatchReceiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.receiver_gone = true;
        state.queue.clear();
        drop(state);
        self.shared.reader_gone.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventKind, KeyValue};
    use futures::StreamExt;

    fn event(rev: i64) -> Event {
        Event {
            kind: EventKind::Added,
            revision: rev,
            kv: KeyValue {
                key: format!("/k/{rev}"),
                value: Default::default(),
                create_revision: rev,
                mod_revision: rev,
            },
        }
    }

    #[tokio::test]
    async fn delivers_in_order_then_ends() {
        let (tx, rx) = channel(10);
        let events: Vec<_> = (1..=3).map(event).collect();
        assert!(tx.push_all(&events));
        drop(tx);
        let got: Vec<_> = rx.into_stream().collect().await;
        let revs: Vec<_> = got.into_iter().map(|e| e.unwrap().revision).collect();
        assert_eq!(revs, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn overflow_cuts_the_watcher_off() {
        let (tx, mut rx) = channel(2);
        assert!(tx.push_all(&[event(1), event(2)]));
        assert!(!tx.push_all(&[event(3)]));
        assert!(!tx.push_all(&[event(4)]), "a cut-off watcher takes no more");
        match rx.recv().await {
            Some(Err(Error::WatcherTooSlow { capacity: 2 })) => {}
            other => panic!("expected WatcherTooSlow, got {other:?}"),
        }
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn dropped_reader_is_reported() {
        let (tx, rx) = channel(2);
        drop(rx);
        assert!(tx.is_closed());
        assert!(!tx.push_all(&[event(1)]));
    }
}
