//! [`PodWorker::sync`]: one pass of a pod's worker. It reads what the
//! runtime has for the pod, then either tears it down (deleted, or gone
//! from the API) or carries out [`super::actions::compute_pod_actions`]
//! ([`start`]: sandbox, image, create and start each container under the
//! crash-loop back-off, with the kubelet's events); then reports the
//! status when it changed, and the first time it is Ready the pod's
//! startup timeline ([`timeline`]).
//!
//! It owns one pod's runtime objects and back-off state. It never lists
//! other pods' containers and never writes anything to the API but this
//! pod's status and, at the end, its deletion.

mod start;
mod timeline;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

use crate::backoff::Backoff;
use crate::events::{EventType, Events};
use crate::observed::{self, PodRuntime, State};
use crate::podspec::{grace_period, host_network, pod_ref};
use crate::runtime::{Result as RuntimeResult, Runtime};
use crate::status::api::PodApi;
use crate::status::{self, Waiting};

/// The status message and event of a pod past its activeDeadlineSeconds.
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// When the pod's activeDeadlineSeconds runs out, if it has one and has
/// started.
fn active_deadline(pod: &Pod) -> Option<Timestamp> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    let start = pod.status.as_ref()?.start_time.as_ref()?.0;
    start
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds))
        .ok()
}

/// How soon a pod whose sync failed is synced again: upstream's pod
/// workers requeue a failed sync after the kubelet's `backOffPeriod`
/// (`pod_workers.go` `completeWork`), 10 s.
const SYNC_ERROR_RETRY: Duration = Duration::from_secs(10);

/// How soon a container whose ConfigMap or Secret is missing is tried again.
const CONFIG_RETRY: Duration = Duration::from_secs(5);

/// The kubelet's floor for a kill it decides on itself (a changed
/// container, a dead sandbox).
const MIN_GRACE_SECONDS: i64 = 2;
/// The floor for a kill the API asked for (deletion): upstream's
/// calculateEffectiveGracePeriod always passes at least 1 s, as an
/// override that the 2 s floor does not apply to.
const MIN_DELETION_GRACE_SECONDS: i64 = 1;

/// What every worker shares.
#[derive(Debug, Clone)]
pub struct Context {
    pub runtime: Arc<dyn Runtime>,
    pub events: Arc<dyn Events>,
    pub api: Arc<dyn PodApi>,
    pub node_ip: String,
    pub log_root: PathBuf,
    /// Whether pod networking (CNI) is up; pods that need it wait.
    pub network_ready: Arc<std::sync::atomic::AtomicBool>,
    /// The ConfigMaps and Secrets containers' environments refer to.
    pub objects: Arc<dyn super::env::Objects>,
    pub node_name: String,
    /// Allocatable CPU (millicores) and memory (bytes), for
    /// `resourceFieldRef` of containers without limits.
    pub node_cpu_milli: i64,
    pub node_memory: i64,
    /// Where pods' emptyDir volumes live.
    pub volumes_root: PathBuf,
    /// The pods' cgroups, when the agent manages them (its own containerd,
    /// with the cgroupfs driver).
    pub cgroups: Option<super::qos::PodCgroups>,
    /// The cluster DNS servers ClusterFirst pods use (kubelet's
    /// clusterDNS); none: they fall back to Default with upstream's
    /// MissingClusterDNS warning.
    pub cluster_dns: Vec<String>,
    /// The node's resolv.conf (kubelet's --resolv-conf): Default pods'
    /// servers and every pod's extra search domains.
    pub resolv_conf: PathBuf,
    /// The cluster's DNS domain (kubelet's --cluster-domain).
    pub cluster_domain: String,
    /// Where finished startup timelines go; `None`: no timeline is
    /// recorded, and no `StartupTimeline` event written.
    pub timelines: Option<crate::timeline::Store>,
}

/// How a sync ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Sync again at the latest at this instant (a back-off ends), or
    /// on the next change.
    Continue(Option<Instant>),
    /// The pod is gone and everything of it removed: the worker ends.
    Done,
}

/// One pod's worker state.
#[derive(Debug)]
pub struct PodWorker {
    ctx: Arc<Context>,
    uid: String,
    crash: Backoff,
    pulls: super::images::Pulls,
    sandbox_backoff: Backoff,
    waiting: BTreeMap<String, Waiting>,
    last_reported: Option<PodStatus>,
    /// When `last_reported` was handed to the status manager.
    reported_at: Option<Instant>,
    /// The few statuses reported before the last one (newest last): their
    /// echoes come back after the worker has moved on (ContainerCreating,
    /// written while the sandbox was made, comes back after Running was
    /// reported), and are no reason to sync either.
    reported_before: std::collections::VecDeque<PodStatus>,
    /// The last pod seen, for tearing it down once it is gone.
    last_pod: Option<Pod>,
    prober: crate::prober::Prober,
    /// Wakes this worker's task (probe results).
    wake: Arc<tokio::sync::Notify>,
    /// The pod's startup timeline while it starts (when the context
    /// keeps timelines).
    timeline: Option<crate::timeline::Timeline>,
    /// The IP of each of the pod's ready sandboxes, once asked for
    /// ([`observe_known`]).
    sandbox_ips: HashMap<String, Option<String>>,
    /// When the worker last began to read the runtime, and the
    /// fingerprint of what it read: a relist that began earlier, or saw
    /// the same, is no news to it ([`PodWorker::relist_is_news`]).
    observed: Option<(Instant, Fingerprint)>,
}

/// The node's resolver config, the base of pods' resolv.conf (the
/// kubelet's `--resolv-conf` default).
pub(crate) const NODE_RESOLV_CONF: &str = "/etc/resolv.conf";
/// How many statuses before the last reported one [`PodWorker::is_echo`]
/// knows as the worker's own.
const REPORTS_KEPT: usize = 3;
/// How long after a report a pod whose conditions still show otherwise
/// is taken as written over by someone else rather than not echoed yet
/// (upstream's status manager reconciles with the API every 10 s).
const RECONCILE_AFTER: Duration = Duration::from_secs(10);

/// The node's hosts file, which hostNetwork pods see.
const NODE_HOSTS: &str = "/etc/hosts";

/// The instant a wall-clock time (ns since the epoch) corresponds to.
fn instant_of(nanos: i64, now: Instant) -> Instant {
    if nanos <= 0 {
        // No time recorded: long ago, not now.
        return now.checked_sub(Duration::from_secs(3600)).unwrap_or(now);
    }
    let wall = Timestamp::now().as_nanosecond() as i64;
    let ago = Duration::from_nanos(wall.saturating_sub(nanos).max(0) as u64);
    now.checked_sub(ago).unwrap_or(now)
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The termination message of an exited container, as the kubelet reads
/// it: the file mounted at its terminationMessagePath (at most 4096
/// bytes), or, under FallbackToLogsOnError and a failure, the end of its
/// log (at most 80 lines, 2048 bytes).
fn termination_message(status: &crate::runtime::api::ContainerStatus, exit_code: i32) -> String {
    let path = status
        .annotations
        .get(super::config::TERMINATION_MESSAGE_PATH)
        .cloned()
        .unwrap_or_default();
    let from_file = status
        .mounts
        .iter()
        .find(|m| !path.is_empty() && m.container_path == path)
        .and_then(|m| std::fs::read(&m.host_path).ok())
        .map(|b| String::from_utf8_lossy(b.get(..4096).unwrap_or(&b)).into_owned())
        .unwrap_or_default();
    if !from_file.is_empty() {
        return from_file;
    }
    let fallback = status
        .annotations
        .get(super::config::TERMINATION_MESSAGE_POLICY)
        .is_some_and(|p| p == "FallbackToLogsOnError");
    if !fallback || exit_code == 0 || status.log_path.is_empty() {
        return String::new();
    }
    let Ok(raw) = std::fs::read(&status.log_path) else {
        return String::new();
    };
    let mut text: Vec<u8> = vec![];
    for line in raw.split(|b| *b == b'\n') {
        if let Ok(l) = crate::logs::format::parse_line(line) {
            text.extend_from_slice(l.content);
            if !l.partial && !l.content.ends_with(b"\n") {
                text.push(b'\n');
            }
        }
    }
    let lines: Vec<&[u8]> = text.split_inclusive(|b| *b == b'\n').collect();
    let tail = lines.len().saturating_sub(80);
    let joined: Vec<u8> = lines.get(tail..).unwrap_or_default().concat();
    let start = joined.len().saturating_sub(2048);
    String::from_utf8_lossy(joined.get(start..).unwrap_or_default()).into_owned()
}

/// A condition this worker reported that the pod it was given does not
/// show yet (its echo has not come back) keeps the transition time it
/// was reported with, instead of a new one per report: the Ready time a
/// startup timeline is measured to is the one the API ends up with.
fn keep_reported_transitions(
    status: &mut PodStatus,
    reported: Option<&PodStatus>,
    current: Option<&PodStatus>,
) {
    // The start time first reported stays (the pod given may not show
    // it yet), as upstream's status manager keeps the cached one.
    if current.and_then(|c| c.start_time.as_ref()).is_none() {
        if let Some(t) = reported.and_then(|r| r.start_time.clone()) {
            status.start_time = Some(t);
        }
    }
    let Some(reported) = reported.and_then(|r| r.conditions.as_ref()) else {
        return;
    };
    let shows = |type_: &str, value: &str| {
        current
            .and_then(|c| c.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == value))
    };
    for c in status.conditions.iter_mut().flatten() {
        if shows(&c.type_, &c.status) {
            continue;
        }
        if let Some(r) = reported
            .iter()
            .find(|r| r.type_ == c.type_ && r.status == c.status)
        {
            c.last_transition_time = r.last_transition_time.clone();
        }
    }
}

/// Whether a condition of `status` has another status (or is missing)
/// in `current`, the pod's status on the API.
fn conditions_differ(status: &PodStatus, current: Option<&PodStatus>) -> bool {
    let shown = current
        .and_then(|c| c.conditions.as_deref())
        .unwrap_or_default();
    status.conditions.iter().flatten().any(|c| {
        !shown
            .iter()
            .any(|s| s.type_ == c.type_ && s.status == c.status)
    })
}

/// A pod's runtime objects as the relist fingerprints them: each
/// sandbox's (ID, CRI state) and each container's (ID, CRI state + 10),
/// sorted.
pub type Fingerprint = Vec<(String, i32)>;

/// What the relist last saw of one pod, handed from the dispatcher to
/// the pod's worker: when that relist began and its fingerprint.
#[derive(Debug, Default)]
pub struct Relisted {
    seen: std::sync::Mutex<Option<(Instant, Fingerprint)>>,
}

impl Relisted {
    /// Keeps what a relist that began at `at` saw.
    pub fn set(&self, at: Instant, fingerprint: Fingerprint) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, fingerprint));
    }

    fn take(&self) -> Option<(Instant, Fingerprint)> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// `status` as the API stores it: its times at whole seconds (what a
/// `Time` is on the wire), as upstream's status manager normalises a
/// status before comparing and writing it. The echo of the write then
/// compares equal, and a status that differs only below the second is
/// not written again.
fn as_stored(status: &PodStatus) -> PodStatus {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_else(|| status.clone())
}

/// Everything the runtime has for pod `uid`.
pub async fn observe(runtime: &dyn Runtime, uid: &str) -> RuntimeResult<PodRuntime> {
    observe_known(runtime, uid, &HashMap::new())
        .await
        .map(|(rt, _)| rt)
}

/// As [`observe`], with the IPs of sandboxes already asked for (by
/// sandbox ID): a sandbox keeps its IP for its life, so only a ready
/// sandbox not in `known` costs a PodSandboxStatus. The two lists go
/// out together, then the status reads together. Also the lists'
/// [`Fingerprint`], as the relist would take it.
pub async fn observe_known(
    runtime: &dyn Runtime,
    uid: &str,
    known: &HashMap<String, Option<String>>,
) -> RuntimeResult<(PodRuntime, Fingerprint)> {
    let (sandboxes, containers) = futures::future::join(
        runtime.list_pod_sandboxes_of(uid),
        runtime.list_containers_of(uid),
    )
    .await;
    let sandboxes: Vec<_> = sandboxes?
        .into_iter()
        .filter(|s| observed::pod_uid(&s.labels) == Some(uid))
        .collect();
    let containers: Vec<_> = containers?
        .into_iter()
        .filter(|c| observed::pod_uid(&c.labels) == Some(uid))
        .collect();
    let mut fingerprint: Fingerprint = sandboxes
        .iter()
        .map(|s| (s.id.clone(), s.state))
        .chain(containers.iter().map(|c| (c.id.clone(), c.state + 10)))
        .collect();
    fingerprint.sort();
    let ips = sandboxes.iter().map(|s| async move {
        if s.state != crate::runtime::api::PodSandboxState::SandboxReady as i32 {
            return None;
        }
        if let Some(ip) = known.get(&s.id) {
            return ip.clone();
        }
        runtime
            .pod_sandbox_status(&s.id)
            .await
            .ok()
            .and_then(|st| st.network)
            .map(|n| n.ip)
            .filter(|ip| !ip.is_empty())
    });
    let statuses = containers.iter().map(|c| runtime.container_status(&c.id));
    let (ips, statuses) = futures::future::join(
        futures::future::join_all(ips),
        futures::future::join_all(statuses),
    )
    .await;
    let mut pod = PodRuntime::default();
    for (s, ip) in sandboxes.iter().zip(ips) {
        pod.sandboxes.push(observed::sandbox(s, ip));
    }
    for (c, status) in containers.iter().zip(statuses) {
        match status {
            Ok(status) => {
                let mut container = observed::container(&c.pod_sandbox_id, &status);
                if container.state == State::Exited && container.message.is_empty() {
                    container.message = termination_message(&status, container.exit_code);
                }
                pod.containers.push(container);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    observed::sort(&mut pod);
    Ok((pod, fingerprint))
}

/// Removes the log dirs of pod `uid` (`<ns>_<name>_<uid>`) once nothing
/// of it is left in the runtime.
fn remove_log_dirs(log_root: &std::path::Path, uid: &str) {
    let suffix = format!("_{uid}");
    let Ok(entries) = std::fs::read_dir(log_root) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().ends_with(&suffix) {
            if let Err(err) = std::fs::remove_dir_all(e.path()) {
                tracing::warn!(dir = %e.path().display(), error = %err, "cannot remove the pod's logs");
            }
        }
    }
}

impl PodWorker {
    /// The pod's IP: the node's for hostNetwork pods, else the ready
    /// sandbox's as last observed.
    fn pod_ip(&self, pod: &Pod, rt: &PodRuntime) -> Option<String> {
        if host_network(pod) {
            Some(self.ctx.node_ip.clone())
        } else {
            rt.ready_sandbox().and_then(|s| s.ip.clone())
        }
    }

    /// Records why container `name` cannot start: its waiting reason, and
    /// upstream's `Failed` event `Error: MESSAGE`.
    fn fail(&mut self, pod: &Pod, name: &str, reason: &str, message: String) {
        self.ctx.events.container_event(
            pod,
            name,
            EventType::Warning,
            "Failed",
            &format!("Error: {message}"),
        );
        self.waiting
            .insert(name.to_string(), Waiting::new(reason, message));
    }

    pub fn new(ctx: Arc<Context>, uid: String) -> Self {
        Self {
            uid,
            crash: Backoff::default(),
            pulls: super::images::Pulls::default(),
            sandbox_backoff: Backoff::new(
                Duration::from_secs(1),
                Duration::from_secs(30),
                Duration::from_secs(300),
            ),
            waiting: BTreeMap::new(),
            last_reported: None,
            reported_at: None,
            reported_before: std::collections::VecDeque::new(),
            last_pod: None,
            prober: crate::prober::Prober::default(),
            wake: Arc::new(tokio::sync::Notify::new()),
            timeline: ctx.timelines.is_some().then(crate::timeline::Timeline::now),
            sandbox_ips: HashMap::new(),
            observed: None,
            ctx,
        }
    }

    /// The worker's task is woken through `wake` (probe results).
    pub fn with_wake(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.wake = wake;
        self
    }

    /// The pod's containers the prober watches: the main ones and the
    /// sidecars (restartable init containers), as upstream's prober
    /// manager adds both.
    fn probed_specs(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::Container> {
        pod.spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or(&[])
            .iter()
            .chain(
                crate::podspec::init_containers(pod)
                    .iter()
                    .filter(|c| crate::podspec::is_sidecar(c)),
            )
    }

    /// Starts and stops probe tasks for the pod's running containers.
    fn sync_probes(&mut self, pod: &Pod, rt: &PodRuntime) {
        let pod_ip = self.pod_ip(pod, rt);
        let running: Vec<_> = Self::probed_specs(pod)
            .filter_map(|c| {
                let l = rt.latest(&c.name).filter(|l| l.state == State::Running)?;
                Some((
                    c.clone(),
                    crate::prober::Target {
                        container_id: l.id.clone(),
                        pod_ip: pod_ip.clone(),
                    },
                ))
            })
            .collect();
        self.prober.sync(
            pod,
            &running,
            self.ctx.runtime.clone(),
            self.ctx.events.clone(),
            self.wake.clone(),
        );
    }

    /// What the runtime has for the pod ([`observe_known`] with the
    /// sandbox IPs asked for before); the IPs of sandboxes that are gone
    /// or not ready are forgotten.
    async fn observe(&mut self) -> RuntimeResult<PodRuntime> {
        let began = Instant::now();
        let (rt, fingerprint) =
            observe_known(self.ctx.runtime.as_ref(), &self.uid, &self.sandbox_ips).await?;
        self.observed = Some((began, fingerprint));
        self.sandbox_ips = rt
            .sandboxes
            .iter()
            .filter(|s| s.ready)
            .map(|s| (s.id.clone(), s.ip.clone()))
            .collect();
        Ok(rt)
    }

    /// Whether what the relist last saw of the pod (`relisted`, taken)
    /// is news to this worker: it began after the worker's last read of
    /// the runtime and saw something else. A relist that ran while the
    /// worker was acting saw an older state than the worker's own read
    /// after acting, and its wake-up is dropped (upstream's pod workers
    /// sync again on every PLEG event).
    pub fn relist_is_news(&self, relisted: &Relisted) -> bool {
        let Some((at, fingerprint)) = relisted.take() else {
            return false;
        };
        match &self.observed {
            Some((began, seen)) => at > *began && fingerprint != *seen,
            None => true,
        }
    }

    /// The pod's UID.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// Whether `pod` is only the echo of this worker's own status write:
    /// the spec and deletion fields are those last synced and the status is
    /// one it reported (the last one, or one of the few before it). Such an
    /// update needs no sync (upstream's kubelet does not sync a pod whose
    /// status alone changed either).
    pub fn is_echo(&self, pod: &Pod) -> bool {
        let (Some(last), Some(reported)) = (self.last_pod.as_ref(), self.last_reported.as_ref())
        else {
            return false;
        };
        let ours = pod
            .status
            .as_ref()
            .is_some_and(|s| s == reported || self.reported_before.contains(s));
        ours && pod.spec == last.spec
            && pod.metadata.deletion_timestamp == last.metadata.deletion_timestamp
            && pod.metadata.deletion_grace_period_seconds
                == last.metadata.deletion_grace_period_seconds
            && pod.metadata.uid == last.metadata.uid
    }

    /// One pass. `pod` is the API's current pod, or `None` once it is
    /// gone from the API.
    pub async fn sync(&mut self, pod: Option<&Pod>) -> Outcome {
        let rt = match self.observe().await {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(uid = %self.uid, error = %e, "cannot read the pod's containers from the runtime");
                return Outcome::Continue(Some(Instant::now() + Duration::from_secs(1)));
            }
        };
        let Some(pod) = pod else {
            let grace = match self.last_pod.as_ref() {
                Some(pod) => grace_period(pod),
                // An orphan: the grace period its containers were made with.
                None => rt
                    .containers
                    .iter()
                    .filter_map(|c| c.grace_period)
                    .max()
                    .unwrap_or(30),
            };
            let last = self.last_pod.clone();
            return match self.tear_down(last.as_ref(), &rt, grace).await {
                Ok(()) => Outcome::Done,
                Err(()) => Outcome::Continue(Some(Instant::now() + Duration::from_secs(1))),
            };
        };
        self.last_pod = Some(pod.clone());
        if pod.metadata.deletion_timestamp.is_some() {
            return self.terminate(pod, &rt).await;
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            // Finished: keep the containers (and their logs), stop the sandbox.
            for s in rt.sandboxes.iter().filter(|s| s.ready) {
                let _ = self.ctx.runtime.stop_pod_sandbox(&s.id).await;
            }
            return Outcome::Continue(None);
        }
        // activeDeadlineSeconds, counted from startTime (upstream's active
        // deadline handler): past it the pod is stopped and Failed.
        let deadline = active_deadline(pod);
        if deadline.is_some_and(|d| Timestamp::now() >= d) {
            self.ctx
                .events
                .event(pod, EventType::Normal, "DeadlineExceeded", DEADLINE_MESSAGE);
            self.stop_pod(pod, &rt).await;
            let stopped = observe(self.ctx.runtime.as_ref(), &self.uid)
                .await
                .unwrap_or(rt);
            let inputs = status::Inputs {
                waiting: &self.waiting,
                node_ip: &self.ctx.node_ip,
                now: Timestamp::now(),
                probes: Some(&self.prober),
            };
            let mut status = status::pod_status(pod, &stopped, &inputs);
            status.phase = Some("Failed".into());
            status.reason = Some("DeadlineExceeded".into());
            status.message = Some(DEADLINE_MESSAGE.into());
            if let Err(e) = self.ctx.api.patch_status(pod, &status).await {
                tracing::warn!(pod = %pod_ref(pod), error = %e, "cannot report the deadline");
            }
            return Outcome::Continue(None);
        }
        // What is known before acting is reported first (upstream sets the
        // status before SyncPod): a slow pull shows ContainerCreating.
        self.report(pod, &rt).await;
        let mut next = self.run_actions(pod, &rt).await;
        if let Some(d) = deadline {
            let left =
                Duration::from_secs(d.duration_since(Timestamp::now()).as_secs().max(0) as u64);
            next = earliest(next, Some(Instant::now() + left));
        }
        let rt = match self.observe().await {
            Ok(rt) => rt,
            Err(_) => rt,
        };
        self.sync_probes(pod, &rt);
        self.report(pod, &rt).await;
        Outcome::Continue(next)
    }

    /// Stops `running` with `grace` seconds (already floored by the caller).
    /// Stops the whole pod: its running containers within its grace period
    /// (at least [`MIN_GRACE_SECONDS`]), then its ready sandboxes.
    pub(super) async fn stop_pod(&self, pod: &Pod, rt: &PodRuntime) {
        self.stop_containers(
            pod,
            rt.running().collect(),
            grace_period(pod).max(MIN_GRACE_SECONDS),
        )
        .await;
        for s in rt.sandboxes.iter().filter(|s| s.ready) {
            if let Err(e) = self.ctx.runtime.stop_pod_sandbox(&s.id).await {
                tracing::warn!(uid = %self.uid, error = %e, "cannot stop sandbox");
            }
        }
    }

    /// Stops the running containers within `grace`: the main ones
    /// together, then the sidecars one by one in reverse order (upstream's
    /// termination ordering), each with what is left of the grace period.
    async fn stop_containers(&self, pod: &Pod, running: Vec<&observed::Container>, grace: i64) {
        let sidecars: Vec<String> = crate::podspec::init_containers(pod)
            .iter()
            .filter(|c| crate::podspec::is_sidecar(c))
            .map(|c| c.name.clone())
            .collect();
        let (side, main): (Vec<_>, Vec<_>) = running
            .into_iter()
            .partition(|c| sidecars.contains(&c.name));
        let start = Instant::now();
        let stops = main.into_iter().map(|c| {
            self.ctx.events.container_event(
                pod,
                &c.name,
                EventType::Normal,
                "Killing",
                &format!("Stopping container {}", c.name),
            );
            self.stop_one(pod, &c.id, &c.name, grace)
        });
        futures::future::join_all(stops).await;
        for name in sidecars.iter().rev() {
            for c in side.iter().filter(|c| &c.name == name) {
                self.ctx.events.container_event(
                    pod,
                    &c.name,
                    EventType::Normal,
                    "Killing",
                    &format!("Stopping container {}", c.name),
                );
                let left = grace - start.elapsed().as_secs() as i64;
                self.stop_one(pod, &c.id, &c.name, left.max(MIN_GRACE_SECONDS))
                    .await;
            }
        }
    }

    /// Runs the container's preStop hook inside `grace`, then stops it
    /// with what is left (at least 1 s).
    async fn stop_one(&self, pod: &Pod, id: &str, name: &str, grace: i64) {
        let spec = pod.spec.as_ref().and_then(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
                .find(|c| c.name == name)
        });
        let mut grace = grace;
        if let Some((c, hook)) =
            spec.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)))
        {
            let started = Instant::now();
            let budget = Duration::from_secs(grace.max(1) as u64);
            let pod_ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
            let run = super::hooks::run(
                hook,
                pod,
                c,
                id,
                pod_ip.as_deref(),
                self.ctx.runtime.as_ref(),
                Some(budget),
            );
            match tokio::time::timeout(budget, run).await {
                Ok(Ok(())) => {}
                Ok(Err(msg)) => self.ctx.events.container_event(
                    pod,
                    name,
                    EventType::Warning,
                    "FailedPreStopHook",
                    &msg,
                ),
                Err(_) => {}
            }
            grace = (grace - started.elapsed().as_secs() as i64).max(1);
        }
        if let Err(e) = self.ctx.runtime.stop_container(id, grace).await {
            tracing::warn!(container = %id, error = %e, "cannot stop container");
        }
    }

    /// Stops and removes everything the pod has in the runtime.
    async fn tear_down(&self, pod: Option<&Pod>, rt: &PodRuntime, grace: i64) -> Result<(), ()> {
        let running: Vec<&observed::Container> = rt.running().collect();
        match pod {
            Some(pod) => {
                self.stop_containers(pod, running, grace.max(MIN_DELETION_GRACE_SECONDS))
                    .await
            }
            None => {
                for c in running {
                    let _ = self
                        .ctx
                        .runtime
                        .stop_container(&c.id, grace.max(MIN_DELETION_GRACE_SECONDS))
                        .await;
                }
            }
        }
        let mut ok = true;
        for s in &rt.sandboxes {
            if let Err(e) = self.ctx.runtime.stop_pod_sandbox(&s.id).await {
                if !e.is_not_found() {
                    tracing::warn!(sandbox = %s.id, error = %e, "cannot stop sandbox");
                    ok = false;
                }
            }
        }
        for c in &rt.containers {
            if let Err(e) = self.ctx.runtime.remove_container(&c.id).await {
                if !e.is_not_found() {
                    ok = false;
                }
            }
        }
        for s in &rt.sandboxes {
            if let Err(e) = self.ctx.runtime.remove_pod_sandbox(&s.id).await {
                if !e.is_not_found() {
                    tracing::warn!(sandbox = %s.id, error = %e, "cannot remove sandbox");
                    ok = false;
                }
            }
        }
        if ok {
            remove_log_dirs(&self.ctx.log_root, &self.uid);
            super::volumes::remove(&self.ctx.volumes_root, &self.uid);
            self.ctx.objects.forget_pod(&self.uid);
            if let Some(cg) = &self.ctx.cgroups {
                cg.remove(&self.uid);
            }
            Ok(())
        } else {
            Err(())
        }
    }

    async fn terminate(&mut self, pod: &Pod, rt: &PodRuntime) -> Outcome {
        let grace = grace_period(pod);
        // No probing of containers being stopped (upstream stops the probe
        // workers of a terminating pod): execs against exited containers
        // would only load the runtime.
        self.prober.sync(
            pod,
            &[],
            self.ctx.runtime.clone(),
            self.ctx.events.clone(),
            self.wake.clone(),
        );
        // Stop first and report what the containers ended with, then
        // remove them and the object (a finalizer may keep it: it then
        // shows how the pod ended).
        self.stop_containers(
            pod,
            rt.running().collect(),
            grace.max(MIN_DELETION_GRACE_SECONDS),
        )
        .await;
        if let Ok(stopped) = self.observe().await {
            let inputs = status::Inputs {
                waiting: &BTreeMap::new(),
                node_ip: &self.ctx.node_ip,
                now: Timestamp::now(),
                probes: Some(&self.prober),
            };
            let status = status::terminal_status(pod, &stopped, &inputs);
            if pod.status.as_ref() != Some(&status) {
                if let Err(e) = self.ctx.api.patch_status(pod, &status).await {
                    tracing::debug!(pod = %pod_ref(pod), error = %e, "cannot report the final status");
                }
            }
        }
        let rt = match self.observe().await {
            Ok(rt) => rt,
            Err(_) => rt.clone(),
        };
        let rt = &rt;
        if self.tear_down(Some(pod), rt, grace).await.is_err() {
            return Outcome::Continue(Some(Instant::now() + Duration::from_secs(1)));
        }
        match self.ctx.api.delete(pod).await {
            Ok(()) => Outcome::Done,
            Err(e) => {
                tracing::warn!(pod = %pod_ref(pod), error = %e, "cannot delete the pod object");
                Outcome::Continue(Some(Instant::now() + Duration::from_secs(1)))
            }
        }
    }

    async fn report(&mut self, pod: &Pod, rt: &PodRuntime) {
        let inputs_now = Timestamp::now();
        let inputs = status::Inputs {
            waiting: &self.waiting,
            node_ip: &self.ctx.node_ip,
            now: inputs_now,
            probes: Some(&self.prober),
        };
        let mut computed = status::pod_status(pod, rt, &inputs);
        keep_reported_transitions(
            &mut computed,
            self.last_reported.as_ref(),
            pod.status.as_ref(),
        );
        let status = as_stored(&computed);
        if pod.status.as_ref() == Some(&status) {
            return;
        }
        // Reported already: its echo is on its way, unless the pod's
        // conditions still say otherwise well after the report, as when
        // the node lifecycle controller made it not Ready while the node
        // was cut off; then it is written again.
        let written_over = self
            .reported_at
            .is_some_and(|at| at.elapsed() >= RECONCILE_AFTER)
            && conditions_differ(&status, pod.status.as_ref());
        if self.last_reported.as_ref() == Some(&status) && !written_over {
            return;
        }
        match self.ctx.api.patch_status(pod, &status).await {
            Ok(()) => {
                self.reported_at = Some(Instant::now());
                // The timeline reads the Ready time to the nanosecond.
                self.finish_timeline(pod, rt, &computed, inputs_now);
                if let Some(previous) = self.last_reported.replace(status) {
                    if self.reported_before.len() == REPORTS_KEPT {
                        self.reported_before.pop_front();
                    }
                    self.reported_before.push_back(previous);
                }
            }
            Err(e) => tracing::warn!(pod = %pod_ref(pod), error = %e, "cannot update pod status"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_error::ApiError;
    use crate::events::Recorded;
    use crate::runtime::fake::FakeRuntime;
    use async_trait::async_trait;

    #[derive(Debug)]
    struct NoObjects;

    #[async_trait]
    impl super::super::env::Objects for NoObjects {
        async fn config_map(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<std::collections::BTreeMap<String, String>>, ApiError> {
            Ok(None)
        }
        async fn secret(
            &self,
            _: &str,
            _: &str,
        ) -> Result<Option<std::collections::BTreeMap<String, Vec<u8>>>, ApiError> {
            Ok(None)
        }
    }

    #[derive(Debug, Default)]
    struct FakeApi {
        statuses: std::sync::Mutex<Vec<PodStatus>>,
        deleted: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl PodApi for FakeApi {
        async fn patch_status(&self, _pod: &Pod, status: &PodStatus) -> Result<(), ApiError> {
            self.statuses.lock().unwrap().push(status.clone());
            Ok(())
        }
        async fn delete(&self, _pod: &Pod) -> Result<(), ApiError> {
            self.deleted
                .store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
    }

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "busybox:1", "imagePullPolicy": "IfNotPresent"}]}
        }))
        .unwrap()
    }

    /// The worker's log and volume directories live in the returned
    /// `TempDir`, removed when the test drops it.
    fn setup() -> (
        Arc<FakeRuntime>,
        Arc<Recorded>,
        Arc<FakeApi>,
        PodWorker,
        tempfile::TempDir,
    ) {
        let runtime = Arc::new(FakeRuntime::new());
        let events = Arc::new(Recorded::default());
        let api = Arc::new(FakeApi::default());
        let tmp = tempfile::Builder::new()
            .prefix("skiff-worker-test-")
            .tempdir()
            .expect("a temporary directory");
        let ctx = Arc::new(Context {
            runtime: runtime.clone(),
            events: events.clone(),
            api: api.clone(),
            node_ip: "192.168.0.2".into(),
            log_root: tmp.path().join("logs"),
            network_ready: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            objects: Arc::new(NoObjects),
            node_name: "n1".into(),
            node_cpu_milli: 2000,
            node_memory: 1 << 30,
            volumes_root: tmp.path().join("volumes"),
            cgroups: None,
            cluster_dns: Vec::new(),
            resolv_conf: NODE_RESOLV_CONF.into(),
            cluster_domain: crate::pod_worker::dns::CLUSTER_DOMAIN.into(),
            timelines: None,
        });
        let worker = PodWorker::new(ctx, "u1".into());
        (runtime, events, api, worker, tmp)
    }

    #[tokio::test]
    async fn a_pod_starts_and_reports_running() {
        let (runtime, events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let p = pod("Always");
        assert!(matches!(worker.sync(Some(&p)).await, Outcome::Continue(_)));
        // No cluster DNS yet: upstream's fallback warning comes first.
        assert_eq!(
            events.reasons(),
            ["MissingClusterDNS", "Pulled", "Created", "Started"]
        );
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.88.0.2"));
    }

    /// A pod's volumes are written while its sandbox is made, except one
    /// naming the pod's IP, which waits for the sandbox's answer.
    #[tokio::test]
    async fn volumes_are_written_beside_the_sandbox_unless_they_need_its_ip() {
        let (runtime, events, _api, mut worker, tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        p.spec.as_mut().unwrap().volumes = Some(
            serde_json::from_value(serde_json::json!([
                {"name": "me", "downwardAPI": {"items": [
                    {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}
                ]}}
            ]))
            .unwrap(),
        );
        assert!(matches!(worker.sync(Some(&p)).await, Outcome::Continue(_)));
        let dir = crate::pod_worker::volume_files::object_dir(
            &tmp.path().join("volumes"),
            "u1",
            "downward-api",
            "me",
        );
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("ip"), "10.88.0.2");
        assert_eq!(read("name"), "p");
        assert!(events.reasons().contains(&"Started".to_string()));
    }

    /// A sandbox that cannot be made is the event, not the volume it made
    /// no use of: a missing ConfigMap says FailedMount only once a sandbox
    /// exists, as before volumes were written beside it.
    #[tokio::test]
    async fn a_failed_sandbox_hides_the_missing_config_map() {
        let (runtime, events, _api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        p.spec.as_mut().unwrap().volumes = Some(
            serde_json::from_value(serde_json::json!([
                {"name": "cfg", "configMap": {"name": "missing"}}
            ]))
            .unwrap(),
        );
        runtime.fail_next(
            "run_pod_sandbox",
            crate::runtime::Error::Status {
                code: tonic::Code::Unknown,
                message: "no sandbox today".into(),
            },
        );
        assert!(matches!(worker.sync(Some(&p)).await, Outcome::Continue(_)));
        let reasons = events.reasons();
        assert!(
            reasons.contains(&"FailedCreatePodSandBox".to_string()),
            "{reasons:?}"
        );
        assert!(!reasons.contains(&"FailedMount".to_string()), "{reasons:?}");
    }

    /// The runtime calls of a pod's start, and of a resync that finds
    /// nothing changed, by operation.
    #[tokio::test]
    async fn a_start_reads_the_image_and_the_new_sandboxs_ip_once() {
        let (runtime, _events, _api, worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let metrics = Arc::new(crate::metrics::NodeMetrics::new());
        let mut ctx = (*worker.ctx).clone();
        ctx.runtime = Arc::new(crate::metrics::runtime::Metered::new(
            runtime.clone(),
            metrics.clone(),
        ));
        let mut worker = PodWorker::new(Arc::new(ctx), "u1".into());
        let p = pod("Always");
        worker.sync(Some(&p)).await;
        worker.sync(Some(&p)).await;
        let text = metrics.registry().encode();
        let count = |op: &str| {
            let prefix = format!("kubelet_runtime_operations_total{{operation_type=\"{op}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .map_or(0, |n| n.parse::<u32>().unwrap())
        };
        // Looked up while the sandbox was made, and not again for
        // runAsNonRoot.
        assert_eq!(count("image_status"), 1);
        // Asked of the new sandbox once; the reads after it know it.
        assert_eq!(count("podsandbox_status"), 1);
        assert_eq!(count("container_status"), 3);
        assert_eq!(count("list_podsandbox"), 4);
        assert_eq!(count("run_podsandbox"), 1);
        assert_eq!(count("start_container"), 1);
    }

    /// What a relist saw wakes the worker only when it is newer than the
    /// worker's own last read and differs from it.
    #[tokio::test]
    async fn a_relist_that_saw_what_the_worker_read_is_no_news() {
        let (runtime, _events, _api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let relisted = Relisted::default();
        assert!(!worker.relist_is_news(&relisted), "nothing relisted");
        relisted.set(Instant::now(), vec![]);
        assert!(
            worker.relist_is_news(&relisted),
            "the worker read nothing yet"
        );
        let before = Instant::now();
        worker.sync(Some(&pod("Always"))).await;
        let (_, read) = worker.observed.clone().unwrap();
        assert_eq!(read.len(), 2, "{read:?}");
        // A relist that began while the worker was acting saw less.
        relisted.set(before, vec![read[0].clone()]);
        assert!(!worker.relist_is_news(&relisted));
        // One after the worker's read that saw the same.
        relisted.set(Instant::now(), read.clone());
        assert!(!worker.relist_is_news(&relisted));
        // One that saw the container exit.
        let id = observe(runtime.as_ref(), "u1").await.unwrap().containers[0]
            .id
            .clone();
        runtime.exit(&id, 1, "Error");
        let (_, changed) = observe_known(runtime.as_ref(), "u1", &HashMap::new())
            .await
            .unwrap();
        relisted.set(Instant::now(), changed);
        assert!(worker.relist_is_news(&relisted));
        assert!(!worker.relist_is_news(&relisted), "taken once");
    }

    /// The echo of a status reported before the last one (the pod's
    /// ContainerCreating, reported before its Running) is no reason to
    /// sync; a status someone else wrote is.
    #[tokio::test]
    async fn echoes_of_earlier_reports_are_echoes() {
        let (runtime, _events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let p = pod("Always");
        worker.sync(Some(&p)).await;
        let reported = api.statuses.lock().unwrap().clone();
        assert_eq!(reported.len(), 2, "ContainerCreating, then Running");
        let echo = |status: &PodStatus| {
            let mut echoed = p.clone();
            echoed.status = Some(status.clone());
            worker.is_echo(&echoed)
        };
        assert!(echo(&reported[0]));
        assert!(echo(&reported[1]));
        let mut foreign = reported[1].clone();
        foreign.message = Some("written by someone else".into());
        assert!(!echo(&foreign));
    }

    /// A reported status written over on the API (the node lifecycle
    /// controller's Ready=False while the node was cut off) is written
    /// again once its echo would have come back, not while it may still
    /// be on its way.
    #[tokio::test]
    async fn conditions_written_over_are_reported_again() {
        let (runtime, _events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        worker.sync(Some(&p)).await;
        let running = api.statuses.lock().unwrap().last().cloned().unwrap();
        let ready = |s: &PodStatus| {
            s.conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.clone())
        };
        assert_eq!(ready(&running).as_deref(), Some("True"));
        let reports = || api.statuses.lock().unwrap().len();
        let before = reports();
        let mut over = running.clone();
        for c in over.conditions.iter_mut().flatten() {
            if c.type_ == "Ready" {
                c.status = "False".into();
            }
        }
        p.status = Some(over);
        worker.sync(Some(&p)).await;
        assert_eq!(reports(), before, "just reported: the echo may lag");
        worker.reported_at = Some(Instant::now() - RECONCILE_AFTER);
        worker.sync(Some(&p)).await;
        assert_eq!(reports(), before + 1);
        let again = api.statuses.lock().unwrap().last().cloned().unwrap();
        assert_eq!(ready(&again).as_deref(), Some("True"));
        // Its echo is the end of it.
        p.status = Some(again);
        worker.sync(Some(&p)).await;
        assert_eq!(reports(), before + 1);
    }

    /// The echo of the last report, as the API stores it (its times at
    /// whole seconds), is an echo: no sync, and the status is not written
    /// again.
    #[tokio::test]
    async fn the_stored_form_of_a_report_is_its_echo() {
        let (runtime, _events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let p = pod("Always");
        worker.sync(Some(&p)).await;
        let sent = api.statuses.lock().unwrap().last().cloned().unwrap();
        let stored: PodStatus =
            serde_json::from_str(&serde_json::to_string(&sent).unwrap()).unwrap();
        let mut echoed = p.clone();
        echoed.status = Some(stored);
        assert!(worker.is_echo(&echoed));
        let writes = api.statuses.lock().unwrap().len();
        worker.sync(Some(&echoed)).await;
        assert_eq!(
            api.statuses.lock().unwrap().len(),
            writes,
            "nothing new to write"
        );
    }

    /// The start time first reported stays when the pod given does not
    /// show it yet.
    #[test]
    fn the_first_reported_start_time_stays() {
        let first = PodStatus {
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(100).unwrap(),
            )),
            ..PodStatus::default()
        };
        let mut later = PodStatus {
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(200).unwrap(),
            )),
            ..PodStatus::default()
        };
        keep_reported_transitions(&mut later, Some(&first), Some(&PodStatus::default()));
        assert_eq!(later.start_time, first.start_time);
    }

    #[tokio::test]
    async fn a_crash_restarts_at_once_then_backs_off() {
        let (runtime, events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let p = pod("Always");
        worker.sync(Some(&p)).await;
        let first = observe(runtime.as_ref(), "u1").await.unwrap().containers[0]
            .id
            .clone();
        runtime.exit(&first, 1, "Error");
        worker.sync(Some(&p)).await;
        let rt = observe(runtime.as_ref(), "u1").await.unwrap();
        assert_eq!(
            rt.containers[0].restart_count, 1,
            "the first restart is at once"
        );
        runtime.exit(&rt.containers[0].id, 1, "Error");
        let next = worker.sync(Some(&p)).await;
        assert!(matches!(next, Outcome::Continue(Some(_))), "{next:?}");
        assert!(events.reasons().contains(&"BackOff".to_string()));
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        let c = &status.container_statuses.unwrap()[0];
        let waiting = c.state.as_ref().unwrap().waiting.clone().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
        assert!(waiting
            .message
            .unwrap()
            .starts_with("back-off 10s restarting failed container=c pod=p_default(u1)"));
        assert_eq!(c.restart_count, 1);
    }

    #[tokio::test]
    async fn a_missing_image_is_err_image_pull() {
        let (_runtime, events, api, mut worker, _tmp) = setup();
        let p = pod("Always");
        worker.sync(Some(&p)).await;
        assert_eq!(
            events.reasons(),
            ["MissingClusterDNS", "Pulling", "Failed", "Failed"]
        );
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        let w = status.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
        assert!(w
            .message
            .unwrap()
            .starts_with("rpc error: code = NotFound desc = failed to pull and unpack image"));
        // The next sync is inside the back-off.
        worker.sync(Some(&p)).await;
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        let w = status.container_statuses.unwrap()[0]
            .state
            .clone()
            .unwrap()
            .waiting
            .unwrap();
        assert_eq!(w.reason.as_deref(), Some("ImagePullBackOff"));
        assert!(w.message.unwrap().starts_with(
            "Back-off pulling image \"busybox:1\": ErrImagePull: rpc error: code = NotFound"
        ));
    }

    /// After a second failed pull (a 20 s back-off) the worker comes back
    /// after the pod worker's 10 s, inside the back-off, and reports
    /// ImagePullBackOff then; it does not sleep until the next pull.
    #[tokio::test]
    async fn a_longer_pull_back_off_is_reported_before_the_next_pull() {
        let (_runtime, _events, api, mut worker, _tmp) = setup();
        let p = pod("Always");
        let key = "u1/busybox:1";
        // A first failure, 11 s ago: its 10 s back-off is over.
        let now = Instant::now();
        let earlier = now
            .checked_sub(Duration::from_secs(11))
            .expect("an instant 11 s ago");
        worker.pulls.backoff.next(key, earlier);
        let Outcome::Continue(Some(next)) = worker.sync(Some(&p)).await else {
            panic!("no next sync after a failed pull");
        };
        let reason = |api: &FakeApi| {
            let status = api.statuses.lock().unwrap().last().cloned().unwrap();
            status.container_statuses.unwrap()[0]
                .state
                .clone()
                .unwrap()
                .waiting
                .unwrap()
                .reason
                .unwrap()
        };
        assert_eq!(reason(&api), "ErrImagePull", "it pulled again");
        let until = worker.pulls.until(key).expect("backing off");
        assert!(until >= now + Duration::from_secs(20), "a 20 s back-off");
        assert!(
            next < until && next <= Instant::now() + SYNC_ERROR_RETRY,
            "the next sync is inside the back-off, after at most {SYNC_ERROR_RETRY:?}"
        );
        // That sync: still backing off.
        worker.sync(Some(&p)).await;
        assert_eq!(reason(&api), "ImagePullBackOff");
    }

    /// The names of pod u1's containers in the runtime, sorted.
    async fn container_names(runtime: &FakeRuntime) -> Vec<String> {
        let rt = observe(runtime, "u1").await.unwrap();
        let mut n: Vec<String> = rt.containers.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    }

    /// A sidecar's startupProbe is run (the prober watches restartable
    /// init containers too); the main container starts once it passed,
    /// and the sidecar reads started.
    #[tokio::test]
    async fn a_sidecars_startup_probe_gates_the_main_container() {
        let (runtime, _events, api, worker, _tmp) = setup();
        let wake = Arc::new(tokio::sync::Notify::new());
        let mut worker = worker.with_wake(wake.clone());
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        p.spec.as_mut().unwrap().init_containers =
            Some(vec![serde_json::from_value(serde_json::json!({
                "name": "side", "image": "busybox:1", "imagePullPolicy": "IfNotPresent",
                "restartPolicy": "Always",
                "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}
            }))
            .unwrap()]);
        worker.sync(Some(&p)).await;
        assert_eq!(
            container_names(runtime.as_ref()).await,
            ["side"],
            "the main container waits for the sidecar's startup probe"
        );
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        assert_eq!(
            status.init_container_statuses.unwrap()[0].started,
            Some(false)
        );
        // The probe passes and wakes the worker.
        tokio::time::timeout(Duration::from_secs(10), wake.notified())
            .await
            .expect("the startup probe's verdict wakes the worker");
        worker.sync(Some(&p)).await;
        assert_eq!(container_names(runtime.as_ref()).await, ["c", "side"]);
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        let side = &status.init_container_statuses.unwrap()[0];
        assert_eq!((side.started, side.ready), (Some(true), true));
        assert_eq!(status.phase.as_deref(), Some("Running"));
    }

    #[tokio::test]
    async fn deletion_stops_removes_and_deletes_the_object() {
        let (runtime, events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        worker.sync(Some(&p)).await;
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        ));
        p.metadata.deletion_grace_period_seconds = Some(5);
        assert_eq!(worker.sync(Some(&p)).await, Outcome::Done);
        assert!(events.reasons().contains(&"Killing".to_string()));
        assert!(api.deleted.load(std::sync::atomic::Ordering::SeqCst));
        let rt = observe(runtime.as_ref(), "u1").await.unwrap();
        assert!(
            rt.sandboxes.is_empty() && rt.containers.is_empty(),
            "{rt:?}"
        );
    }

    #[tokio::test]
    async fn never_keeps_the_finished_pod() {
        let (runtime, _events, api, mut worker, _tmp) = setup();
        runtime.add_image("busybox:1", 100);
        let p = pod("Never");
        worker.sync(Some(&p)).await;
        let id = observe(runtime.as_ref(), "u1").await.unwrap().containers[0]
            .id
            .clone();
        runtime.exit(&id, 3, "Error");
        worker.sync(Some(&p)).await;
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        let rt = observe(runtime.as_ref(), "u1").await.unwrap();
        assert_eq!(rt.containers.len(), 1, "the container stays for its logs");
        assert!(!rt.sandboxes[0].ready, "the sandbox is stopped");
    }

    /// A pod that becomes Ready gets one StartupTimeline event, whose
    /// phases add up from its creation to its Ready condition's time, and
    /// its timeline is kept in the store; later syncs write no other.
    #[tokio::test]
    async fn a_pod_first_ready_gets_one_startup_timeline() {
        let (runtime, events, api, worker, _tmp) = setup();
        let store = crate::timeline::Store::new();
        let ctx = Arc::new(Context {
            timelines: Some(store.clone()),
            ..(*worker.ctx).clone()
        });
        let mut worker = PodWorker::new(ctx, "u1".into());
        runtime.add_image("busybox:1", 100);
        let mut p = pod("Always");
        p.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::now(),
        ));
        worker.sync(Some(&p)).await;
        assert_eq!(
            events.messages("StartupTimeline").len(),
            1,
            "{:?}",
            events.reasons()
        );
        let message = &events.messages("StartupTimeline")[0];
        assert!(message.starts_with("Started in "), "{message}");
        assert!(
            message.contains(", image busybox:1 present, start "),
            "{message}"
        );
        assert!(message.ends_with("(no probe)"), "{message}");
        let status = api.statuses.lock().unwrap().last().cloned().unwrap();
        let ready = status
            .conditions
            .clone()
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "True");
        let t = store.get("default", "p").expect("the timeline is kept");
        // The status is written as the API stores it, to the second.
        assert_eq!(
            t.ready_ms.div_euclid(1000),
            ready.last_transition_time.unwrap().0.as_second(),
            "measured to the Ready condition's time"
        );
        let sum: i64 = t.phases.iter().map(|p| p.duration_ms).sum();
        assert_eq!(sum, t.ready_ms - t.created_ms);
        // The echo of that status, then more syncs: no second event.
        p.status = Some(status);
        worker.sync(Some(&p)).await;
        worker.sync(Some(&p)).await;
        assert_eq!(events.messages("StartupTimeline").len(), 1);
    }

    /// A condition reported but not yet echoed keeps its transition time
    /// on the next report.
    #[test]
    fn reported_transitions_are_kept_until_echoed() {
        use k8s_openapi::api::core::v1::PodCondition;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let at = |s: i64| Some(Time(Timestamp::from_second(s).unwrap()));
        let cond = |status: &str, t: i64| PodCondition {
            type_: "Ready".into(),
            status: status.into(),
            last_transition_time: at(t),
            ..Default::default()
        };
        let status_of = |c: PodCondition| PodStatus {
            conditions: Some(vec![c]),
            ..Default::default()
        };
        let reported = status_of(cond("True", 100));
        let stale = status_of(cond("False", 50));
        let mut next = status_of(cond("True", 101));
        keep_reported_transitions(&mut next, Some(&reported), Some(&stale));
        assert_eq!(next, reported);
        // Once the API shows it, the status's own computation stands.
        let mut next = status_of(cond("True", 100));
        keep_reported_transitions(&mut next, Some(&reported), Some(&reported));
        assert_eq!(next, reported);
        // Another value is a new transition.
        let mut next = status_of(cond("False", 102));
        keep_reported_transitions(&mut next, Some(&reported), Some(&stale));
        assert_eq!(next, status_of(cond("False", 102)));
    }
}
