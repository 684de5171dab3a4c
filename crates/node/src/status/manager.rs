//! The status manager (upstream's `pkg/kubelet/status`): pod workers hand
//! it the status they computed and go on; it patches the API in the
//! background, at most one request per pod at a time and only the newest
//! status of each pod, so a status that is replaced before it is sent
//! (Pending, then Running a moment later) is never written. A failed
//! patch is retried after a second unless a newer status replaced it; a
//! pod that is gone (404) or was replaced (409 on its UID) is dropped.
//! Before a pod object is deleted, its pending status is written first.
//!
//! This module owns the queue and the sending task; what a status says
//! is [`super`]'s, and the HTTP calls are the wrapped [`PodApi`]'s.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::FuturesUnordered;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::api::PodApi;
use crate::api_error::ApiError;

/// Patches sent at once.
const CONCURRENCY: usize = 32;
/// How soon a failed patch is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// How long queued statuses are still sent after shutdown.
const FLUSH: Duration = Duration::from_secs(2);

/// A status waiting to be written.
#[derive(Debug, Clone)]
struct Pending {
    /// The pod's name, namespace and UID.
    pod: Pod,
    status: PodStatus,
}

#[derive(Debug, Default)]
struct Queue {
    /// By pod UID: the newest status not yet sent.
    pending: HashMap<String, Pending>,
    /// UIDs of pending statuses that may be sent now, oldest first (a
    /// pod with a patch in flight or waiting to retry is not here).
    ready: VecDeque<String>,
    /// UIDs with a patch in flight.
    in_flight: HashSet<String>,
    /// Failed patches and when they may go again.
    retries: Vec<(Instant, String)>,
}

impl Queue {
    fn is_waiting(&self, uid: &str) -> bool {
        self.in_flight.contains(uid) || self.retries.iter().any(|(_, u)| u == uid)
    }

    /// Moves retries that are due to `ready`; the next one's time.
    fn due(&mut self, now: Instant) -> Option<Instant> {
        let (due, later): (Vec<_>, Vec<_>) = self.retries.drain(..).partition(|(at, _)| *at <= now);
        self.retries = later;
        for (_, uid) in due {
            if self.pending.contains_key(&uid) && !self.in_flight.contains(&uid) {
                self.ready.push_back(uid);
            }
        }
        self.retries.iter().map(|(at, _)| *at).min()
    }
}

/// Writes pod statuses in the background (see the module doc). Cloned
/// handles share one queue and one sending task.
#[derive(Debug, Clone)]
pub struct StatusManager {
    api: Arc<dyn PodApi>,
    queue: Arc<Mutex<Queue>>,
    wake: Arc<Notify>,
    /// Set once the sending task has ended (shutdown): statuses are then
    /// written at once by the caller, as the agent stops its pods.
    closed: Arc<AtomicBool>,
}

impl StatusManager {
    /// A manager writing through `api`, sending until `shutdown`.
    pub fn start(api: Arc<dyn PodApi>, shutdown: CancellationToken) -> Self {
        let manager = Self::new(api);
        tokio::spawn(manager.clone().run(shutdown));
        manager
    }

    fn new(api: Arc<dyn PodApi>) -> Self {
        StatusManager {
            api,
            queue: Arc::default(),
            wake: Arc::new(Notify::new()),
            closed: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `status` for `pod`, replacing one not yet sent.
    fn set(&self, pod: &Pod, status: &PodStatus) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let key = Pod {
            metadata: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let mut q = self.lock();
        let queued = q.pending.contains_key(&uid);
        let waiting = q.is_waiting(&uid);
        q.pending.insert(
            uid.clone(),
            Pending {
                pod: key,
                status: status.clone(),
            },
        );
        if !queued && !waiting {
            q.ready.push_back(uid);
        }
        drop(q);
        self.wake.notify_one();
    }

    /// The next status to send, marked in flight.
    fn take(&self) -> Option<(String, Pending)> {
        let mut q = self.lock();
        while let Some(uid) = q.ready.pop_front() {
            if let Some(p) = q.pending.remove(&uid) {
                q.in_flight.insert(uid.clone());
                return Some((uid, p));
            }
        }
        None
    }

    /// Sends one patch; a failure that may mend is tried again after
    /// [`RETRY`] unless a newer status came meanwhile.
    async fn send(&self, uid: String, p: Pending) {
        let result = self.api.patch_status(&p.pod, &p.status).await;
        let mut q = self.lock();
        q.in_flight.remove(&uid);
        let newer = q.pending.contains_key(&uid);
        match result {
            Err(e) if !e.is_gone() && !newer => {
                tracing::warn!(uid, error = %e, "cannot update pod status, will retry");
                q.pending.insert(uid.clone(), p);
                q.retries.push((Instant::now() + RETRY, uid));
            }
            Err(e) if e.is_gone() => {
                tracing::debug!(uid, error = %e, "the pod is gone; its status is dropped");
                q.pending.remove(&uid);
            }
            _ if newer => q.ready.push_back(uid),
            _ => {}
        }
    }

    async fn run(self, shutdown: CancellationToken) {
        let mut flying = FuturesUnordered::new();
        loop {
            let next_retry = self.lock().due(Instant::now());
            while flying.len() < CONCURRENCY {
                let Some((uid, p)) = self.take() else { break };
                flying.push(self.send(uid, p));
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(()) = flying.next(), if !flying.is_empty() => {}
                _ = self.wake.notified() => {}
                _ = sleep_until(next_retry), if next_retry.is_some() => {}
            }
        }
        // What is queued is still written, for at most FLUSH.
        self.closed.store(true, Ordering::SeqCst);
        let flush = async {
            while let Some(()) = flying.next().await {}
            while let Some((uid, p)) = self.take() {
                self.send(uid, p).await;
            }
        };
        let _ = tokio::time::timeout(FLUSH, flush).await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at.into()).await;
    }
}

#[async_trait]
impl PodApi for StatusManager {
    async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), ApiError> {
        if self.closed.load(Ordering::SeqCst) {
            return self.api.patch_status(pod, status).await;
        }
        self.set(pod, status);
        Ok(())
    }

    async fn delete(&self, pod: &Pod) -> Result<(), ApiError> {
        if let Some(uid) = pod.metadata.uid.as_deref() {
            let pending = self.lock().pending.remove(uid);
            // (a patch in flight, if any, races the delete as upstream's)
            if let Some(p) = pending {
                let _ = self.api.patch_status(&p.pod, &p.status).await;
            }
        }
        self.api.delete(pod).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records calls; a patch waits for `gate` and answers from `fail`.
    #[derive(Debug)]
    struct Recording {
        calls: Mutex<Vec<String>>,
        gate: tokio::sync::Semaphore,
        fail: Mutex<Vec<ApiError>>,
    }

    impl Default for Recording {
        fn default() -> Self {
            Recording {
                calls: Mutex::default(),
                gate: tokio::sync::Semaphore::new(0),
                fail: Mutex::default(),
            }
        }
    }

    impl Recording {
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl PodApi for Recording {
        async fn patch_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), ApiError> {
            self.gate.acquire().await.unwrap().forget();
            let phase = status.phase.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.calls
                .lock()
                .unwrap()
                .push(format!("patch {name} {phase}"));
            match self.fail.lock().unwrap().pop() {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
        async fn delete(&self, pod: &Pod) -> Result<(), ApiError> {
            let name = pod.metadata.name.clone().unwrap_or_default();
            self.calls.lock().unwrap().push(format!("delete {name}"));
            Ok(())
        }
    }

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn status(phase: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }
    }

    async fn until(api: &Recording, n: usize) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while api.calls().len() < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("calls in time");
    }

    #[tokio::test]
    async fn statuses_replaced_before_they_are_sent_are_never_written() {
        let api = Arc::new(Recording::default());
        let stop = CancellationToken::new();
        let m = StatusManager::start(api.clone(), stop.clone());
        m.patch_status(&pod("a"), &status("Pending")).await.unwrap();
        // The first patch is in flight (held at the gate); two more come.
        tokio::task::yield_now().await;
        m.patch_status(&pod("a"), &status("Running")).await.unwrap();
        m.patch_status(&pod("a"), &status("Succeeded"))
            .await
            .unwrap();
        m.patch_status(&pod("b"), &status("Running")).await.unwrap();
        api.gate.add_permits(10);
        until(&api, 3).await;
        let mut calls = api.calls();
        calls.sort();
        assert_eq!(
            calls,
            ["patch a Pending", "patch a Succeeded", "patch b Running"]
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn failures_are_retried_and_gone_pods_dropped() {
        let api = Arc::new(Recording::default());
        api.gate.add_permits(10);
        // Answers are popped from the end: a 500 for a, then a 404 for b.
        *api.fail.lock().unwrap() = vec![
            ApiError::NotFound("pods \"b\" not found: NotFound".into()),
            ApiError::Transport("boom".into()),
        ];
        let stop = CancellationToken::new();
        let m = StatusManager::start(api.clone(), stop.clone());
        m.patch_status(&pod("a"), &status("Running")).await.unwrap();
        until(&api, 1).await;
        m.patch_status(&pod("b"), &status("Running")).await.unwrap();
        until(&api, 2).await;
        // a again, after its pause; b not again (a third patch of a
        // would come a pause after the second).
        until(&api, 3).await;
        m.patch_status(&pod("c"), &status("Running")).await.unwrap();
        until(&api, 4).await;
        assert_eq!(api.calls().pop().unwrap(), "patch c Running");
        assert_eq!(
            api.calls()[..3],
            ["patch a Running", "patch b Running", "patch a Running"]
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn a_pending_status_is_written_before_the_delete_and_at_once_after_shutdown() {
        let api = Arc::new(Recording::default());
        api.gate.add_permits(10);
        // Not started: the status waits in the queue.
        let m = StatusManager::new(api.clone());
        m.patch_status(&pod("a"), &status("Failed")).await.unwrap();
        m.delete(&pod("a")).await.unwrap();
        assert_eq!(api.calls(), ["patch a Failed", "delete a"]);

        let stop = CancellationToken::new();
        let m = StatusManager::start(api.clone(), stop.clone());
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), async {
            while !m.closed.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("closed in time");
        m.patch_status(&pod("b"), &status("Succeeded"))
            .await
            .unwrap();
        assert_eq!(api.calls().last().unwrap(), "patch b Succeeded");
    }
}
