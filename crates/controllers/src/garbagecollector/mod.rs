//! The garbage collector (upstream's `garbage-collector-controller`):
//! deletes objects whose owners (ownerReferences) are all gone, deletes
//! the blocking dependents of an owner deleted in the foreground before
//! removing its `foregroundDeletion` finalizer, and removes the
//! references to an owner deleted with the `orphan` finalizer from its
//! dependents before removing that finalizer. It works for every kind
//! the API server serves, custom resources included: discovery finds
//! them (again every [`crate::Config::gc_rediscovery`], as CRDs come and
//! go) and each is watched as metadata only.
//!
//! - `discovery`: the served resources and their metadata watches;
//! - `graph`: the owner→dependents graph keyed by uid;
//! - `decide`: what attempt-to-delete does, as pure functions;
//! - `queue`: the work queues;
//! - `worker`: the requests (lookups of owners, deletes, patches).
//!
//! This module wires them: one task applies the watches' changes to the
//! graph and queues the work, workers drain the queues once the first
//! watches have listed everything. It must not reach into any kind's
//! semantics: everything goes by metadata.

mod decide;
mod discovery;
mod graph;
mod queue;
mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use skiff_client::recorder::Recorder;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::Failures;
use discovery::{Change, Resources};
use graph::{Graph, Work};
use queue::Queue;

/// Workers per queue (upstream's `--concurrent-gc-syncs`, 20).
const WORKERS: usize = 20;

/// What the workers share.
pub(crate) struct Shared {
    client: kube::Client,
    graph: Mutex<Graph>,
    resources: RwLock<Resources>,
    attempt_to_delete: Queue,
    attempt_to_orphan: Queue,
    /// Each queue's failures per uid, shared by its workers so a retry's
    /// back-off grows whichever worker takes it.
    delete_failures: Failures,
    orphan_failures: Failures,
    recorder: Recorder,
    /// How long workers wait for the first listing before going on
    /// without it (upstream proceeds after its sync period too).
    sync_timeout: std::time::Duration,
}

impl Shared {
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn resources(&self) -> std::sync::RwLockReadGuard<'_, Resources> {
        self.resources.read().unwrap_or_else(|e| e.into_inner())
    }

    fn queue(&self, work: Work) {
        for uid in work.attempt_to_delete {
            self.attempt_to_delete.add(uid);
        }
        for uid in work.attempt_to_orphan {
            self.attempt_to_orphan.add(uid);
        }
    }
}

/// Starts the garbage collector in a controller manager.
pub(crate) fn start(context: Context, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        tracing::info!(controller = "garbagecollector", "starting");
        let shared = Arc::new(Shared {
            client: context.client.clone(),
            graph: Mutex::new(Graph::default()),
            resources: RwLock::new(Resources::default()),
            attempt_to_delete: Queue::default(),
            attempt_to_orphan: Queue::default(),
            delete_failures: Failures::default(),
            orphan_failures: Failures::default(),
            recorder: context.recorder("garbage-collector-controller"),
            sync_timeout: context.config.gc_rediscovery,
        });
        let (changes_tx, changes_rx) = mpsc::unbounded_channel();
        let (synced_tx, synced_rx) = watch::channel(false);
        let pending = Arc::new(Mutex::new(None::<HashSet<String>>));
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(build(
            shared.clone(),
            changes_rx,
            pending.clone(),
            synced_tx,
        )));
        for _ in 0..WORKERS {
            tasks.push(tokio::spawn(worker::deleter(
                shared.clone(),
                synced_rx.clone(),
            )));
            tasks.push(tokio::spawn(worker::orphaner(
                shared.clone(),
                synced_rx.clone(),
            )));
        }
        let period = context.config.gc_rediscovery;
        let mut watches: HashMap<String, JoinHandle<()>> = HashMap::new();
        loop {
            match Resources::discover(&shared.client).await {
                Ok(found) => {
                    let keys: HashSet<String> = found.watched.iter().map(|s| s.key()).collect();
                    watches.retain(|key, task| {
                        let keep = keys.contains(key);
                        if !keep {
                            task.abort();
                        }
                        keep
                    });
                    {
                        let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                        if pending.is_none() {
                            *pending = Some(keys.clone());
                        }
                    }
                    for served in &found.watched {
                        watches.entry(served.key()).or_insert_with(|| {
                            tokio::spawn(discovery::watch(
                                shared.client.clone(),
                                served.clone(),
                                changes_tx.clone(),
                            ))
                        });
                    }
                    *shared.resources.write().unwrap_or_else(|e| e.into_inner()) = found;
                }
                Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed"),
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(period) => {}
            }
        }
        for task in watches.into_values().chain(tasks) {
            task.abort();
        }
        tracing::info!(controller = "garbagecollector", "stopped");
    })
}

/// Applies the watches' changes to the graph (one task, in order) and
/// queues what they call for; tells the workers once every resource of
/// the first discovery has been listed.
async fn build(
    shared: Arc<Shared>,
    mut changes: mpsc::UnboundedReceiver<Change>,
    pending: Arc<Mutex<Option<HashSet<String>>>>,
    synced: watch::Sender<bool>,
) {
    while let Some(change) = changes.recv().await {
        let work = match change {
            Change::Applied(identity, facts) => shared.graph().apply(identity, facts),
            Change::Deleted(uid) => shared.graph().delete(&uid),
            Change::Synced(key) => {
                let mut pending = pending.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(keys) = pending.as_mut() {
                    keys.remove(&key);
                    if keys.is_empty() && !*synced.borrow() {
                        tracing::info!(
                            nodes = shared.graph().len(),
                            "garbage collector: all resource monitors have synced"
                        );
                        let _ = synced.send(true);
                    }
                }
                Work::default()
            }
        };
        shared.queue(work);
    }
}
