//! Shared informers, as client-go's `SharedInformerFactory`: each kind is
//! watched once per process however many controllers follow it, into a
//! kube-runtime reflector [`Store`] that all of them read, and every
//! change is fanned out to subscribers as a stream that kube-runtime's
//! `Controller::for_stream`, `owns_stream` and `watches_stream` take.
//!
//! This module owns [`Informers`] (the per-process set, one watch task per
//! kind, started on first use) and [`Informer`] (a kind's store and its
//! change stream). Unlike kube-runtime's own shared streams, deletions are
//! delivered too (the last state of the deleted object), including
//! objects that vanished while the watch was down (found by comparing the
//! store before and after a relist), so an owner hears that its child is
//! gone. A subscriber that falls behind the fan-out buffer is given every
//! stored object again instead of the changes it missed, which costs a
//! resync and loses nothing that matters to level-based controllers.
//!
//! It must not know any controller's logic, and never writes.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt as _};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// How many changes wait for the slowest subscriber before it is resynced.
const FAN_OUT_BUFFER: usize = 4096;

/// What a kind's informer can hold.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// One change of a watched kind.
#[derive(Debug, Clone)]
pub enum Change<K> {
    /// Created or updated (or listed again).
    Applied(Arc<K>),
    /// Deleted: its last known state.
    Deleted(Arc<K>),
    /// The subscriber missed changes: read the whole store again.
    Resync,
}

/// The informers of one process (of one term of leadership), started on
/// first use and stopped with the token they were made with.
#[derive(Clone)]
pub struct Informers {
    client: Client,
    shutdown: CancellationToken,
    started: Arc<Mutex<HashMap<TypeId, Started>>>,
}

/// A started informer, typed and type-erased.
struct Started {
    informer: Box<dyn Any + Send + Sync>,
    ready: Box<dyn Ready>,
}

impl Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informers").finish_non_exhaustive()
    }
}

impl Informers {
    /// Informers that watch through `client` until `shutdown`.
    pub fn new(client: Client, shutdown: CancellationToken) -> Self {
        Self {
            client,
            shutdown,
            started: Arc::default(),
        }
    }

    /// The informer of `K` (all namespaces), started now if it was not.
    pub fn get<K: Watched>(&self) -> Informer<K> {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = started.get(&TypeId::of::<K>()) {
            if let Some(informer) = found.informer.downcast_ref::<Informer<K>>() {
                return informer.clone();
            }
        }
        let informer = Informer::start(Api::all(self.client.clone()), self.shutdown.clone());
        started.insert(
            TypeId::of::<K>(),
            Started {
                informer: Box::new(informer.clone()),
                ready: Box::new(informer.clone()),
            },
        );
        informer
    }

    /// Waits until every informer started so far has listed once.
    pub async fn wait_until_ready(&self) {
        let waits: Vec<_> = {
            let started = self.started.lock().unwrap_or_else(|e| e.into_inner());
            started.values().map(|s| s.ready.ready()).collect()
        };
        futures::future::join_all(waits).await;
    }
}

/// Something whose first list can be waited for (type-erased informers).
trait Ready: Send + Sync {
    fn ready(&self) -> futures::future::BoxFuture<'static, ()>;
}

/// One kind's shared store and change stream; cheap to clone.
pub struct Informer<K: Watched> {
    store: Store<K>,
    changes: broadcast::Sender<Change<K>>,
    /// True once the first list is in the store. (kube-runtime's own
    /// `Store::wait_until_ready` wakes only the last of several waiters.)
    listed: watch::Receiver<bool>,
}

impl<K: Watched> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            changes: self.changes.clone(),
            listed: self.listed.clone(),
        }
    }
}

impl<K: Watched> Debug for Informer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("kind", &K::kind(&()))
            .field("objects", &self.store.len())
            .finish()
    }
}

impl<K: Watched> Informer<K> {
    /// Watches `api` into a new store until `shutdown`.
    pub fn start(api: Api<K>, shutdown: CancellationToken) -> Self {
        let (store, mut writer) = reflector::store::<K>();
        let (changes, _) = broadcast::channel(FAN_OUT_BUFFER);
        let (listed_tx, listed) = watch::channel(false);
        let informer = Self {
            store: store.clone(),
            changes: changes.clone(),
            listed,
        };
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        tokio::spawn(async move {
            // What the store held when a relist began: whatever is not
            // listed again was deleted while the watch was down.
            let mut before: Option<HashMap<ObjectRef<K>, Arc<K>>> = None;
            loop {
                let event = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    event = events.next() => event,
                };
                let event = match event {
                    Some(Ok(event)) => event,
                    Some(Err(e)) => {
                        tracing::debug!(kind = %K::kind(&()), error = %e, "watch failed; retrying");
                        continue;
                    }
                    None => return,
                };
                if let watcher::Event::Init = event {
                    before = Some(
                        store
                            .state()
                            .into_iter()
                            .map(|o| (ObjectRef::from_obj(&*o), o))
                            .collect(),
                    );
                }
                writer.apply_watcher_event(&event);
                // Send errors only mean nobody subscribes yet.
                match event {
                    watcher::Event::Apply(obj) => {
                        let _ = changes.send(Change::Applied(Arc::new(obj)));
                    }
                    watcher::Event::Delete(obj) => {
                        let _ = changes.send(Change::Deleted(Arc::new(obj)));
                    }
                    watcher::Event::InitDone => {
                        listed_tx.send_replace(true);
                        let mut gone = before.take().unwrap_or_default();
                        for obj in store.state() {
                            gone.remove(&ObjectRef::from_obj(&*obj));
                            let _ = changes.send(Change::Applied(obj));
                        }
                        for (_, obj) in gone {
                            let _ = changes.send(Change::Deleted(obj));
                        }
                    }
                    watcher::Event::Init | watcher::Event::InitApply(_) => {}
                }
            }
        });
        informer
    }

    /// The shared store (empty until the first list is done: see
    /// [`Informer::ready`]).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Waits for the first list to be in the store.
    pub async fn ready(&self) {
        let mut listed = self.listed.clone();
        // An error means the informer stopped: nothing to wait for.
        let _ = listed.wait_for(|done| *done).await;
    }

    /// Every change from now on, after a [`Change::Resync`] for what the
    /// store already holds (a controller started after the first list
    /// hears of every object too).
    pub fn changes(&self) -> impl Stream<Item = Change<K>> + Send + 'static {
        let rx = self.changes.subscribe();
        let changes = futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(change) => Some((change, rx)),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(kind = %K::kind(&()), missed, "subscriber fell behind; resyncing");
                    Some((Change::Resync, rx))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        futures::stream::once(async { Change::Resync }).chain(changes)
    }

    /// Every applied or deleted object from now on (after a lag, every
    /// stored object), in the shape kube-runtime's `Controller` takes.
    pub fn objects(&self) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        let store = self.store.clone();
        self.changes().flat_map(move |change| {
            let objects: Vec<Result<K, watcher::Error>> = match change {
                Change::Applied(o) | Change::Deleted(o) => vec![Ok((*o).clone())],
                Change::Resync => store.state().iter().map(|o| Ok((**o).clone())).collect(),
            };
            futures::stream::iter(objects)
        })
    }
}

impl<K: Watched> Ready for Informer<K> {
    fn ready(&self) -> futures::future::BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.ready().await })
    }
}
