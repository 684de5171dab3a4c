//! One term of scheduling: watch, queue, schedule one pod at a time, bind
//! concurrently, report failures.
//!
//! This module owns [`SchedulerLoop`], the single task that owns the
//! [`SchedulingQueue`], the [`Cache`] and the [`Framework`]. It applies
//! watch events to them, starts scheduling only once every watcher (pods,
//! nodes, claims, volumes, classes) has listed (caches synced), runs the
//! framework on the cache's snapshot, assumes the chosen node and queues
//! the binding, with the PreBind work the plugins ask for, for the
//! [`Binder`]'s tasks; bind outcomes come back on a channel. Failures park the pod (or
//! back it off) and spawn a task that writes the PodScheduled condition
//! and a FailedScheduling event. It keeps the failures of each pod that
//! waited ([`SchedulingWait`]: when it was first queued, each message with
//! its count), and hands them to its binding, so the pod's startup
//! timeline can tell what it waited for; a pod bound at its first attempt
//! has no record.
//! Everything it spawned is aborted when the term ends.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher::Event;
use kube::Client;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::binder::{BindOutcome, Binder};
use crate::cache::Cache;
use crate::cluster_event::ClusterEvent;
use crate::config::Config;
use crate::framework::{pod_key, CycleState, Framework, ScheduleError};
use crate::plugins::default_registry_with_bind_timeout;
use crate::queue::{PoppedPod, SchedulingQueue};
use crate::report::{
    has_unschedulable_condition, report_unschedulable, REASON_SCHEDULER_ERROR, REASON_UNSCHEDULABLE,
};
use crate::watch::{inputs, Input, Relist};
use skiff_api::scheduling_wait::SchedulingWait;
use skiff_client::clock::SystemClock;
use skiff_client::recorder::{EventType, Recorder};

/// How often pods parked too long as unschedulable are retried anyway.
const LEFTOVER_FLUSH: Duration = Duration::from_secs(30);
/// How long the loop schedules back to back before yielding to other tasks.
const SCHEDULING_SLICE: Duration = Duration::from_millis(1);
/// Most watch events applied between two scheduling attempts.
const MAX_EVENTS_PER_ROUND: usize = 10_000;
/// How long stopping waits for queued events to be written.
const EVENT_FLUSH: Duration = Duration::from_secs(1);

/// What woke the loop up.
enum Wake {
    Shutdown,
    Input(Option<Box<Input>>),
    Outcome(Option<BindOutcome>),
    Timer,
}

/// The state of one scheduling term.
pub(crate) struct SchedulerLoop {
    client: Client,
    scheduler_name: String,
    recorder: Recorder,
    framework: Framework,
    queue: SchedulingQueue<SystemClock>,
    cache: Cache,
    tasks: JoinSet<()>,
    pods: Relist,
    nodes: Relist,
    claims: Relist,
    volumes: Relist,
    classes: Relist,
    /// Attempts, latencies and the queue's sizes (`crate::metrics`).
    metrics: crate::metrics::Recorder,
    /// The failed attempts of pending pods that had any, by key (with the
    /// pod's UID: a pod recreated under the name starts afresh).
    waits: HashMap<String, (Option<String>, SchedulingWait)>,
}

fn deleting(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

impl SchedulerLoop {
    pub(crate) fn new(
        client: Client,
        config: &Config,
        metrics: Option<Arc<crate::metrics::SchedulerMetrics>>,
    ) -> Self {
        Self {
            metrics: crate::metrics::Recorder::new(metrics, &config.scheduler_name),
            recorder: Recorder::new(client.clone(), &config.scheduler_name, &config.identity),
            client,
            scheduler_name: config.scheduler_name.clone(),
            framework: Framework::new(default_registry_with_bind_timeout(config.bind_timeout))
                .with_percentage_of_nodes_to_score(config.percentage_of_nodes_to_score),
            queue: SchedulingQueue::new(SystemClock, config.queue),
            cache: Cache::new(),
            tasks: JoinSet::new(),
            pods: Relist::default(),
            nodes: Relist::default(),
            claims: Relist::default(),
            volumes: Relist::default(),
            classes: Relist::default(),
            waits: HashMap::new(),
        }
    }

    fn synced(&self) -> bool {
        self.pods.synced()
            && self.nodes.synced()
            && self.claims.synced()
            && self.volumes.synced()
            && self.classes.synced()
    }

    /// Runs until `stop` is cancelled.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut inputs = inputs(self.client.clone());
        let (outcomes_tx, mut outcomes) = mpsc::unbounded_channel();
        let binder = Binder::start(&mut self.tasks, &self.client, &self.recorder, &outcomes_tx);
        let mut leftover = tokio::time::interval(LEFTOVER_FLUSH);
        let mut was_synced = false;
        let mut slice_start = std::time::Instant::now();
        loop {
            for _ in 0..MAX_EVENTS_PER_ROUND {
                match inputs.next().now_or_never() {
                    Some(Some(input)) => self.handle_input(input),
                    Some(None) => return self.stop().await,
                    None => break,
                }
            }
            while let Ok(outcome) = outcomes.try_recv() {
                self.handle_outcome(outcome);
            }
            while self.tasks.try_join_next().is_some() {}
            if self.synced() {
                if !was_synced {
                    tracing::info!(
                        nodes = self.cache.snapshot().len(),
                        pods = self.cache.pod_count(),
                        pending = self.queue.len(),
                        "caches synced; scheduling"
                    );
                    was_synced = true;
                }
                self.queue.flush_backoff_completed();
                if let Some(popped) = self.queue.pop() {
                    self.schedule(popped, &binder);
                    // Yield to the bindings and watches now and then, not
                    // after every pod: consecutive cycles find the nodes'
                    // data still in the CPU caches.
                    if slice_start.elapsed() >= SCHEDULING_SLICE {
                        tokio::task::yield_now().await;
                        slice_start = std::time::Instant::now();
                    }
                    if stop.is_cancelled() {
                        return self.stop().await;
                    }
                    continue;
                }
            }
            self.metrics.pending(
                self.queue.active_len(),
                self.queue.backoff_len(),
                self.queue.unschedulable_len(),
            );
            let backoff = self.queue.next_backoff_expiry();
            let wake = tokio::select! {
                _ = stop.cancelled() => Wake::Shutdown,
                input = inputs.next() => Wake::Input(input.map(Box::new)),
                outcome = outcomes.recv() => Wake::Outcome(outcome),
                _ = sleep_until(backoff) => Wake::Timer,
                _ = leftover.tick() => {
                    self.queue.flush_unschedulable_leftover();
                    Wake::Timer
                }
            };
            match wake {
                Wake::Shutdown | Wake::Input(None) => return self.stop().await,
                Wake::Input(Some(input)) => self.handle_input(*input),
                Wake::Outcome(Some(outcome)) => self.handle_outcome(outcome),
                Wake::Outcome(None) | Wake::Timer => {}
            }
        }
    }

    /// Stops binding; gives the events already recorded a moment to be
    /// written (they happened), without holding up shutdown for long.
    async fn stop(mut self) {
        self.tasks.abort_all();
        if tokio::time::timeout(EVENT_FLUSH, self.recorder.flush())
            .await
            .is_err()
        {
            tracing::debug!("events still queued at stop");
        }
        tracing::info!("scheduling stopped");
    }

    fn on_event(&mut self, event: Option<ClusterEvent>) {
        if let Some(event) = event {
            let moved = self.queue.on_event(event);
            if moved > 0 {
                tracing::debug!(?event, moved, "unschedulable pods requeued");
            }
        }
    }

    fn handle_input(&mut self, input: Input) {
        match input {
            Input::Pod(event) => self.handle_pod(*event),
            Input::Node(event) => self.handle_node(*event),
            Input::Claim(event) => self.handle_claim(*event),
            Input::Volume(event) => self.handle_volume(*event),
            Input::Class(event) => self.handle_class(*event),
        }
    }

    fn handle_claim(&mut self, event: Event<PersistentVolumeClaim>) {
        let key = |c: &PersistentVolumeClaim| {
            format!(
                "{}/{}",
                c.metadata.namespace.as_deref().unwrap_or("default"),
                c.metadata.name.as_deref().unwrap_or_default()
            )
        };
        match event {
            Event::Init => self.claims.start(),
            Event::InitApply(c) | Event::Apply(c) => {
                self.claims.saw(key(&c));
                let event = self.cache.upsert_claim(c);
                self.on_event(event);
            }
            Event::Delete(c) => {
                let event = self.cache.remove_claim(&key(&c));
                self.on_event(event);
            }
            Event::InitDone => {
                let known = self.cache.snapshot().storage().claim_keys();
                for gone in self.claims.finish(known.iter().map(String::as_str)) {
                    self.cache.remove_claim(&gone);
                }
            }
        }
    }

    fn handle_volume(&mut self, event: Event<PersistentVolume>) {
        match event {
            Event::Init => self.volumes.start(),
            Event::InitApply(v) | Event::Apply(v) => {
                self.volumes
                    .saw(v.metadata.name.clone().unwrap_or_default());
                let event = self.cache.upsert_volume(v);
                self.on_event(event);
            }
            Event::Delete(v) => {
                let event = self
                    .cache
                    .remove_volume(v.metadata.name.as_deref().unwrap_or_default());
                self.on_event(event);
            }
            Event::InitDone => {
                let known = self.cache.snapshot().storage().volume_names();
                for gone in self.volumes.finish(known.iter().map(String::as_str)) {
                    self.cache.remove_volume(&gone);
                }
            }
        }
    }

    fn handle_class(&mut self, event: Event<StorageClass>) {
        match event {
            Event::Init => self.classes.start(),
            Event::InitApply(c) | Event::Apply(c) => {
                self.classes
                    .saw(c.metadata.name.clone().unwrap_or_default());
                let event = self.cache.upsert_class(c);
                self.on_event(event);
            }
            Event::Delete(c) => {
                let event = self
                    .cache
                    .remove_class(c.metadata.name.as_deref().unwrap_or_default());
                self.on_event(event);
            }
            Event::InitDone => {
                let known = self.cache.snapshot().storage().class_names();
                for gone in self.classes.finish(known.iter().map(String::as_str)) {
                    self.cache.remove_class(&gone);
                }
            }
        }
    }

    /// A pod with a node holds resources there (the cache); one without is
    /// ours to schedule if it names this scheduler (the queue).
    fn handle_pod(&mut self, event: Event<Pod>) {
        match event {
            Event::Init => self.pods.start(),
            Event::InitApply(pod) | Event::Apply(pod) => {
                let key = pod_key(&pod);
                self.pods.saw(key.clone());
                let assigned = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty());
                if assigned {
                    self.queue.delete(&key);
                    self.metrics.forget(&key);
                    self.waits.remove(&key);
                    let event = self.cache.add_or_update_pod(pod);
                    self.on_event(event);
                    return;
                }
                let ours = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref())
                    == Some(self.scheduler_name.as_str());
                if deleting(&pod) || !ours {
                    self.queue.delete(&key);
                    self.metrics.forget(&key);
                    self.waits.remove(&key);
                } else {
                    self.metrics.queued(&key);
                    self.queue.add(pod);
                }
            }
            Event::Delete(pod) => {
                let key = pod_key(&pod);
                self.queue.delete(&key);
                self.metrics.forget(&key);
                self.waits.remove(&key);
                let event = self.cache.remove_pod(&key);
                self.on_event(event);
            }
            Event::InitDone => {
                let mut known: Vec<String> = self.queue.keys().map(str::to_string).collect();
                known.extend(self.cache.confirmed_pods());
                let gone = self.pods.finish(known.iter().map(String::as_str));
                for key in gone {
                    self.queue.delete(&key);
                    self.waits.remove(&key);
                    let event = self.cache.remove_pod(&key);
                    self.on_event(event);
                }
            }
        }
    }

    fn handle_node(&mut self, event: Event<k8s_openapi::api::core::v1::Node>) {
        match event {
            Event::Init => self.nodes.start(),
            Event::InitApply(node) | Event::Apply(node) => {
                self.nodes
                    .saw(node.metadata.name.clone().unwrap_or_default());
                let event = self.cache.upsert_node(node);
                self.on_event(event);
            }
            Event::Delete(node) => {
                let event = self
                    .cache
                    .remove_node(node.metadata.name.as_deref().unwrap_or_default());
                self.on_event(event);
            }
            Event::InitDone => {
                let names = self.cache.node_names();
                let gone = self.nodes.finish(names.iter().map(String::as_str));
                for name in gone {
                    let event = self.cache.remove_node(&name);
                    self.on_event(event);
                }
            }
        }
    }

    fn handle_outcome(&mut self, outcome: BindOutcome) {
        match outcome.result {
            Ok(()) => {
                tracing::debug!(pod = %outcome.key, node = %outcome.node, "bound");
                self.queue.done(&outcome.key);
                self.metrics.bound(&outcome.key);
                self.waits.remove(&outcome.key);
            }
            Err(e) => {
                if let Some((pod, queued)) = self.queue.queued_pod(&outcome.key) {
                    self.note_wait(&pod, queued, &e.event_message());
                }
                // Its resources are free again for the pods that wanted them.
                if self.cache.forget(&outcome.key) {
                    self.on_event(Some(ClusterEvent::AssignedPodDelete));
                }
                self.queue.requeue_backoff(&outcome.key);
                self.metrics.bind_failed(&outcome.key);
            }
        }
    }

    fn schedule(&mut self, popped: PoppedPod, binder: &Binder) {
        let pod = popped.pod;
        let key = pod_key(&pod);
        // Assumed or already assigned: a stale pending event, not work.
        if self.cache.contains_pod(&key) {
            self.queue.done(&key);
            return;
        }
        let started = std::time::Instant::now();
        let mut state = CycleState::new();
        let result =
            self.framework
                .schedule_one_with_state(&mut state, &pod, self.cache.snapshot());
        match result {
            Ok(result) => {
                let node = result.node;
                let status = self.framework.run_reserve_plugins(&mut state, &pod, &node);
                if !status.is_success() {
                    self.queue.requeue_backoff(&key);
                    self.metrics.failed(&key, "error", started);
                    let message = format!("running Reserve plugin: {}", status.message());
                    self.report_failure(pod, popped.queued, REASON_SCHEDULER_ERROR, message);
                    return;
                }
                if let Err(e) = self.cache.assume(pod.clone(), &node) {
                    self.framework
                        .run_unreserve_plugins(&mut state, &pod, &node);
                    self.queue.requeue_backoff(&key);
                    self.metrics.failed(&key, "error", started);
                    self.report_failure(pod, popped.queued, REASON_SCHEDULER_ERROR, e.to_string());
                    return;
                }
                let pre_bind = match self.framework.run_pre_bind_plugins(&state, &pod, &node) {
                    Ok(work) => work,
                    Err(status) => {
                        self.framework
                            .run_unreserve_plugins(&mut state, &pod, &node);
                        self.cache.forget(&key);
                        self.queue.requeue_backoff(&key);
                        self.metrics.failed(&key, "error", started);
                        let message = format!(
                            "running PreBind plugin {:?}: {}",
                            status.plugin.unwrap_or_default(),
                            status.message()
                        );
                        self.report_failure(pod, popped.queued, REASON_SCHEDULER_ERROR, message);
                        return;
                    }
                };
                tracing::debug!(pod = %key, %node, attempts = popped.attempts, "assumed");
                self.metrics.binding(&key, started, popped.attempts);
                let wait = self
                    .waits
                    .get(&key)
                    .filter(|(uid, _)| *uid == pod.metadata.uid)
                    .map(|(_, w)| w.clone());
                binder.bind_after(pod, node, pre_bind, wait);
            }
            Err(ScheduleError::Unschedulable(fit)) => {
                let message = fit.to_string();
                tracing::debug!(pod = %key, %message, "unschedulable");
                self.queue
                    .requeue_unschedulable(&key, fit.diagnosis.unschedulable_plugins);
                self.metrics.failed(&key, "unschedulable", started);
                self.report_failure(pod, popped.queued, REASON_UNSCHEDULABLE, message);
            }
            Err(e @ ScheduleError::NoNodesAvailable) => {
                self.queue.requeue_unschedulable(&key, BTreeSet::new());
                self.metrics.failed(&key, "unschedulable", started);
                self.report_failure(pod, popped.queued, REASON_UNSCHEDULABLE, e.to_string());
            }
            Err(e @ ScheduleError::Plugin { .. }) => {
                tracing::warn!(pod = %key, error = %e, "scheduling error");
                self.queue.requeue_backoff(&key);
                self.metrics.failed(&key, "error", started);
                self.report_failure(pod, popped.queued, REASON_SCHEDULER_ERROR, e.to_string());
            }
        }
    }

    /// Notes a failed attempt of `pod`, first queued at `queued`.
    fn note_wait(&mut self, pod: &Pod, queued: Instant, message: &str) {
        let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
        let queued_ms = now - i64::try_from(queued.elapsed().as_millis()).unwrap_or(0);
        let uid = &pod.metadata.uid;
        let fresh = || (uid.clone(), SchedulingWait::new(queued_ms));
        let entry = self.waits.entry(pod_key(pod)).or_insert_with(fresh);
        if entry.0 != *uid {
            *entry = fresh();
        }
        entry.1.failed(message, now);
    }

    /// Notes the failure, spawns the condition write (if it changes) and
    /// the event.
    fn report_failure(
        &mut self,
        pod: Arc<Pod>,
        queued: Instant,
        reason: &'static str,
        message: String,
    ) {
        self.note_wait(&pod, queued, &message);
        let client = self.client.clone();
        let recorder = self.recorder.clone();
        self.tasks.spawn(async move {
            let key = pod_key(&pod);
            if !has_unschedulable_condition(&pod, reason, &message) {
                if let Err(e) = report_unschedulable(client, &pod, reason, &message).await {
                    tracing::warn!(pod = %key, error = %e, "setting PodScheduled=False");
                }
            }
            recorder.record(
                &pod,
                EventType::Warning,
                "FailedScheduling",
                "Scheduling",
                &message,
            );
        });
    }
}

async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => futures::future::pending().await,
    }
}
