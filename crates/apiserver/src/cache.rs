//! The watch cache: one per resource, in front of the store. It lists the
//! resource once, then follows one store watch, keeping every object
//! (already serialized, resourceVersion filled in) and a window of recent
//! events. Watches — and lists with `resourceVersion=0` — are served from
//! memory, so a thousand watchers cost the store one watch.
//!
//! A watcher gets a bounded queue; one that falls behind is dropped (its
//! stream ends, the client re-watches), as upstream's cacher does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use skiff_store::{EventKind, ListOptions, Store};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::object::with_revision;

/// Events kept for watchers that resume from a recent resourceVersion.
const HISTORY: usize = 10_000;
/// Events queued per watcher before it is dropped as too slow.
const WATCHER_QUEUE: usize = 10_000;

/// One object as the cache holds it.
#[derive(Debug)]
pub struct Cached {
    pub key: String,
    pub revision: i64,
    /// The object, resourceVersion included.
    pub object: Value,
    /// `object` serialized.
    pub json: Bytes,
}

/// One change, shared by every watcher.
#[derive(Debug, Clone)]
pub struct CachedEvent {
    pub kind: EventKind,
    pub revision: i64,
    pub item: Arc<Cached>,
    /// The object before this change (for MODIFIED), so a watch with a
    /// selector can tell an object entering or leaving it.
    pub prev: Option<Arc<Cached>>,
}

/// Why a watch cannot be served from the cache.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("too old resource version: {requested} ({oldest})")]
    TooOld { requested: i64, oldest: i64 },
    #[error("the watch cache is not ready yet")]
    NotReady,
}

#[derive(Debug, Default)]
struct State {
    ready: bool,
    revision: i64,
    objects: BTreeMap<String, Arc<Cached>>,
    history: VecDeque<CachedEvent>,
    /// Events after this revision are all in `history`.
    history_from: i64,
    watchers: Vec<(String, mpsc::Sender<CachedEvent>)>,
}

/// The cache of one resource (one storage prefix).
#[derive(Debug)]
pub struct WatchCache {
    prefix: String,
    state: RwLock<State>,
    ready: tokio::sync::watch::Sender<bool>,
}

fn decode(key: &str, value: &[u8], revision: i64) -> Option<Arc<Cached>> {
    let object: Value = serde_json::from_slice(value)
        .map_err(|e| tracing::warn!(key, error = %e, "stored object is not JSON"))
        .ok()?;
    let object = with_revision(object, revision);
    let json = Bytes::from(serde_json::to_vec(&object).ok()?);
    Some(Arc::new(Cached {
        key: key.to_string(),
        revision,
        object,
        json,
    }))
}

/// A watch served from the cache: the events to send first, then a queue.
#[derive(Debug)]
pub struct Subscription {
    pub initial: Vec<CachedEvent>,
    pub live: mpsc::Receiver<CachedEvent>,
    /// The cache's revision when the watch started: every later event
    /// comes through `live`.
    pub revision: i64,
}

impl WatchCache {
    pub fn new(prefix: String) -> Arc<Self> {
        Arc::new(WatchCache {
            prefix,
            state: RwLock::new(State::default()),
            ready: tokio::sync::watch::channel(false).0,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the first list has been loaded.
    pub async fn wait_ready(&self) {
        let mut rx = self.ready.subscribe();
        let _ = rx.wait_for(|ready| *ready).await;
    }

    /// The objects under `prefix` (which must be inside this cache's), in
    /// key order, with the cache's revision.
    pub fn list(&self, prefix: &str) -> Result<(i64, Vec<Arc<Cached>>), Error> {
        let state = self.read();
        if !state.ready {
            return Err(Error::NotReady);
        }
        let items = state
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect();
        Ok((state.revision, items))
    }

    /// Starts a watch on `prefix`: from `after` (events after that
    /// revision), or with `None` from the current state as ADDED events.
    pub fn subscribe(&self, prefix: &str, after: Option<i64>) -> Result<Subscription, Error> {
        let mut state = self.write();
        if !state.ready {
            return Err(Error::NotReady);
        }
        let initial: Vec<CachedEvent> = match after {
            None => state
                .objects
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, item)| CachedEvent {
                    kind: EventKind::Added,
                    revision: item.revision,
                    item: item.clone(),
                    prev: None,
                })
                .collect(),
            Some(after) if after < state.history_from => {
                return Err(Error::TooOld {
                    requested: after,
                    oldest: state.history_from,
                })
            }
            Some(after) => state
                .history
                .iter()
                .filter(|e| e.revision > after && e.item.key.starts_with(prefix))
                .cloned()
                .collect(),
        };
        let (tx, live) = mpsc::channel(WATCHER_QUEUE);
        state.watchers.push((prefix.to_string(), tx));
        Ok(Subscription {
            initial,
            live,
            revision: state.revision,
        })
    }

    /// Loads the resource and follows the store until `shutdown`.
    pub async fn run(self: Arc<Self>, store: Arc<dyn Store>, shutdown: CancellationToken) {
        let mut retry = Duration::from_millis(100);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                result = self.sync_once(store.as_ref()) => {
                    match result {
                        Ok(()) => retry = Duration::from_millis(100),
                        Err(e) => tracing::warn!(prefix = %self.prefix, error = %e, "watch cache lost its watch; relisting"),
                    }
                }
            }
            // Back off between relists when the store keeps failing.
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(Duration::from_secs(5));
        }
    }

    /// One list + watch cycle; returns when the watch ends.
    async fn sync_once(&self, store: &dyn Store) -> skiff_store::Result<()> {
        let page = store.list(&self.prefix, ListOptions::default()).await?;
        {
            let mut state = self.write();
            state.objects = page
                .items
                .iter()
                .filter_map(|kv| decode(&kv.key, &kv.value, kv.mod_revision))
                .map(|c| (c.key.clone(), c))
                .collect();
            state.revision = page.revision;
            state.history.clear();
            state.history_from = page.revision;
            // Watchers of the previous cycle may have missed events.
            state.watchers.clear();
            state.ready = true;
        }
        self.ready.send_replace(true);
        let mut watch = store.watch(&self.prefix, page.revision).await?;
        while let Some(event) = watch.next().await {
            let event = event?;
            let Some(item) = decode(&event.kv.key, &event.kv.value, event.revision) else {
                continue;
            };
            let mut state = self.write();
            let prev = match event.kind {
                EventKind::Deleted => state.objects.remove(&item.key),
                _ => state.objects.insert(item.key.clone(), item.clone()),
            };
            let cached = CachedEvent {
                kind: event.kind,
                revision: event.revision,
                item: item.clone(),
                prev,
            };
            state.revision = event.revision;
            if state.history.len() >= HISTORY {
                if let Some(old) = state.history.pop_front() {
                    state.history_from = old.revision;
                }
            }
            state.history.push_back(cached.clone());
            state.watchers.retain(|(prefix, tx)| {
                !tx.is_closed()
                    && (!item.key.starts_with(prefix.as_str())
                        || tx.try_send(cached.clone()).is_ok())
            });
        }
        Ok(())
    }
}
