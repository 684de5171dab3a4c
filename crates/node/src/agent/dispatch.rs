//! The node's pod dispatcher (upstream's pod workers): [`run_pods`] keeps
//! one [`PodWorker`] task per pod UID, hands it each new version of its
//! pod from the watch, cuts a long sync short when the pod is deleted, and
//! wakes a worker when the relist ([`super::relist`]) sees its runtime
//! objects change; runtime objects of a pod the API does not have get a
//! worker that tears them down.
//!
//! It only routes: what a worker does is [`crate::pod_worker`]'s, and it
//! writes nothing to the API itself.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt as _};
use skiff_client::trimmed::{untrim, Broken, Trimmed};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use super::pod_index::PodIndex;
use super::relist;
use crate::pod_worker::sync::{Context, Fingerprint, Outcome, PodWorker, Relisted};

/// A running worker's handles.
#[derive(Debug)]
struct Handle {
    pod: watch::Sender<Option<Arc<Pod>>>,
    /// What the relist saw of the pod, and the wake-up that says so (the
    /// worker syncs only if it is news to it).
    relisted: Arc<Relisted>,
    relist_wake: Arc<Notify>,
}

impl Handle {
    /// Hands the worker what a relist that began at `at` saw.
    fn relisted(&self, at: std::time::Instant, fingerprint: &Fingerprint) {
        self.relisted.set(at, fingerprint.clone());
        self.relist_wake.notify_one();
    }
}

/// Resolves once the pod changes in a way that must not wait for the
/// sync in progress: it is deleted, gone, or its grace period shrank.
///
/// It watches a clone of the worker's receiver, so changes it passes over
/// still wake the worker afterwards.
async fn more_urgent(mut rx: watch::Receiver<Option<Arc<Pod>>>, current: Option<&Pod>) {
    let deleting = current.is_some_and(|p| p.metadata.deletion_timestamp.is_some());
    let grace = current.and_then(|p| p.metadata.deletion_grace_period_seconds);
    loop {
        if rx.changed().await.is_err() {
            return;
        }
        let urgent = match rx.borrow().as_deref() {
            None => true,
            Some(p) => {
                let now_deleting = p.metadata.deletion_timestamp.is_some();
                let shorter = match (grace, p.metadata.deletion_grace_period_seconds) {
                    (Some(old), Some(new)) => new < old,
                    _ => false,
                };
                (now_deleting && !deleting) || shorter
            }
        };
        if urgent {
            return;
        }
    }
}

/// What a pass of a worker is, as upstream's pod workers name it in
/// `kubelet_pod_worker_duration_seconds`: the first (`create`), one for a
/// new version of the pod (`update`), one for the pod gone (`kill`), or
/// one woken by the runtime or a timer (`sync`).
fn pass_kind(first: bool, pod: Option<&Arc<Pod>>, last: Option<&Arc<Pod>>) -> &'static str {
    match (pod, last) {
        (None, _) => "kill",
        _ if first => "create",
        (Some(p), Some(l)) if Arc::ptr_eq(p, l) => "sync",
        _ => "update",
    }
}

/// Spawns a worker task for `uid`.
fn spawn_worker(
    ctx: Arc<Context>,
    uid: String,
    pod: Option<Arc<Pod>>,
    metrics: Option<Arc<crate::metrics::NodeMetrics>>,
    shutdown: CancellationToken,
) -> Handle {
    let (tx, mut rx) = watch::channel(pod);
    let notify = Arc::new(Notify::new());
    let relisted = Arc::new(Relisted::default());
    let relist_wake = Arc::new(Notify::new());
    let (seen, relist_woken) = (relisted.clone(), relist_wake.clone());
    tokio::spawn(async move {
        let mut worker = PodWorker::new(ctx, uid).with_wake(notify.clone());
        let mut gone = false;
        let mut last: Option<Arc<Pod>> = None;
        let mut first = true;
        loop {
            let pod = if gone {
                None
            } else {
                rx.borrow_and_update().clone()
            };
            let kind = pass_kind(first, pod.as_ref(), last.as_ref());
            first = false;
            last.clone_from(&pod);
            let started = Instant::now();
            // A deletion (or a shorter grace period) arriving during a
            // long sync (a pull, a stop) cuts it short: the next pass
            // acts on it, as upstream's pod workers cancel the sync.
            let outcome = tokio::select! {
                // Boxed: the sync's future (kilobytes) is then held only
                // while it runs, not by every idle worker.
                o = Box::pin(worker.sync(pod.as_deref())) => o,
                () = more_urgent(rx.clone(), pod.as_deref()), if !gone => Outcome::Continue(Some(Instant::now())),
                _ = shutdown.cancelled() => return,
            };
            if let Some(metrics) = &metrics {
                metrics.pod_synced(kind, started.elapsed());
            }
            let deadline = match outcome {
                Outcome::Done => return,
                Outcome::Continue(at) => {
                    at.unwrap_or_else(|| Instant::now() + Duration::from_secs(10))
                }
            };
            // Wait for a reason to sync again. The echo of the worker's own
            // status write is not one (it would cost a CRI read per write).
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = rx.changed(), if !gone => {
                        if r.is_err() {
                            gone = true;
                            break;
                        }
                        let echo = rx.borrow().as_deref().is_some_and(|p| worker.is_echo(p));
                        if !echo {
                            break;
                        }
                    }
                    _ = notify.notified() => break,
                    // A relist that saw only what this worker read last
                    // (its own sandbox and container, say) is no reason.
                    _ = relist_woken.notified() => {
                        if worker.relist_is_news(&seen) {
                            break;
                        }
                    }
                    _ = tokio::time::sleep_until(deadline.into()) => break,
                }
            }
        }
    });
    Handle {
        pod: tx,
        relisted,
        relist_wake,
    }
}

/// The watch events of one node's pods (from its own watch, or from a
/// watch shared by simulated nodes).
pub(crate) type PodEvents =
    futures::stream::BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>;

/// The node's pods from the API: a watch of `spec.nodeName=NODE`.
pub(super) fn node_pod_events(client: kube::Client, node: &str) -> PodEvents {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    pod_watch(client, config, "pods")
}

/// Pods from a watch, decoded without managedFields ([`Trimmed`]): no pod
/// worker reads them, and they were the larger part of each decoded pod.
/// A change that does not decode as a Pod is skipped with a warning, and
/// the version last seen is kept (a pod the agent cannot read is not a
/// pod to stop).
pub(crate) fn pod_watch(
    client: kube::Client,
    config: watcher::Config,
    what: &'static str,
) -> PodEvents {
    let api: Api<Trimmed<Pod>> = Api::all(client);
    watcher(api, config)
        .default_backoff()
        .filter_map(move |r| async move {
            match r {
                Ok(e) => untrim(e, what, Broken::Keep).map(Ok),
                Err(e) => Some(Err(e)),
            }
        })
        .boxed()
}

/// Runs a worker per pod of `stream` until `shutdown`: the node's pod
/// dispatcher (upstream's pod workers plus the PLEG relist).
///
/// A worker keeps its handle until its task ends, so a UID never has two
/// workers; a pod gone from the API is told so (`None`) and tears itself
/// down. The relist runs in its own task: a runtime that hangs delays
/// only the relist, never the watch.
pub(crate) async fn run_pods(
    mut stream: PodEvents,
    ctx: Arc<Context>,
    index: PodIndex,
    shutdown: CancellationToken,
) {
    let mut workers: HashMap<String, Handle> = HashMap::new();
    // UIDs seen in the current (re)list, between Init and InitDone.
    let mut listing: Option<HashSet<String>> = None;
    let mut synced = false;
    let (relist_task, mut relists) = relist::spawn(ctx.runtime.clone(), shutdown.clone());
    let mut fingerprints = relist::Fingerprints::new();
    let mut swept = tokio::time::Instant::now();
    loop {
        // Workers whose task ended (their pod is gone, or torn down).
        workers.retain(|_, h| !h.pod.is_closed());
        tokio::select! {
            _ = shutdown.cancelled() => break,
            event = stream.next() => {
                let Some(event) = event else { break };
                match event {
                    Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                        let Some(uid) = pod.metadata.uid.clone() else { continue };
                        index.set(&pod);
                        if let Some(metrics) = index.metrics() {
                            metrics.pod_observed(&pod);
                        }
                        if let Some(seen) = listing.as_mut() {
                            seen.insert(uid.clone());
                        }
                        let pod = Arc::new(pod);
                        match workers.get(&uid) {
                            Some(h) if !h.pod.is_closed() => { h.pod.send_replace(Some(pod)); }
                            _ => {
                                let h = spawn_worker(ctx.clone(), uid.clone(), Some(pod), index.metrics().cloned(), shutdown.clone());
                                workers.insert(uid, h);
                            }
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        index.remove(&pod);
                        if let (Some(metrics), Some(uid)) = (index.metrics(), pod.metadata.uid.as_deref()) {
                            metrics.pod_gone(uid);
                        }
                        if let Some(h) = pod.metadata.uid.as_deref().and_then(|uid| workers.get(uid)) {
                            h.pod.send_replace(None);
                        }
                    }
                    Ok(watcher::Event::Init) => {
                        listing = Some(HashSet::new());
                    }
                    Ok(watcher::Event::InitDone) => {
                        // Pods that vanished while the watch was away.
                        if let Some(seen) = listing.take() {
                            for (uid, h) in &workers {
                                if !seen.contains(uid) {
                                    h.pod.send_replace(None);
                                }
                            }
                        }
                        synced = true;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "pod watch failed; retrying");
                    }
                }
            }
            Some((now, running, began)) = relists.recv() => {
                index.set_running(running);
                if let Some(metrics) = index.metrics() {
                    let (ready, states) = relist::runtime_counts(&now);
                    metrics.relisted(ready, states.into_iter());
                }
                for (uid, fp) in &now {
                    match workers.get(uid) {
                        Some(h) if fingerprints.get(uid) != Some(fp) => h.relisted(began, fp),
                        Some(_) => {}
                        // Runtime objects of a pod the API does not have
                        // (deleted while the agent was away, say).
                        None if synced => {
                            tracing::info!(%uid, "removing containers of a pod that is not in the API");
                            let h = spawn_worker(ctx.clone(), uid.clone(), None, index.metrics().cloned(), shutdown.clone());
                            workers.insert(uid.clone(), h);
                        }
                        None => {}
                    }
                }
                fingerprints = now;
                if synced && swept.elapsed() >= relist::LOG_SWEEP_PERIOD {
                    swept = tokio::time::Instant::now();
                    relist::remove_stale_log_dirs(&ctx.log_root, |uid| {
                        workers.contains_key(uid) || fingerprints.contains_key(uid)
                    });
                }
            }
        }
    }
    relist_task.abort();
}
