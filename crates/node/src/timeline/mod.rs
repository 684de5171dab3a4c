//! The startup timeline of one pod start (upstream's pod startup latency
//! tracker, in more detail): the instants the components that did the
//! work recorded, turned into phases once the pod is first Ready.
//!
//! - here: [`Timeline`], what the pod worker and the prober record while
//!   the pod starts: plain [`Instant`]s in a struct, nothing written
//!   anywhere until the end;
//! - [`compute`]: the pure function from those instants (and the pod's
//!   own times: creationTimestamp, the PodScheduled condition, the Ready
//!   condition) to a [`Finished`] timeline of phases and steps, the
//!   machine-readable form (JSON);
//! - [`message`]: the `StartupTimeline` event's text;
//! - [`store`]: the finished timelines of this node's pods, for readers in
//!   the process (the agent's endpoint, metrics).
//!
//! Where it is exposed: the `StartupTimeline` Normal event on the pod,
//! written once when the pod is first Ready (its message for `kubectl
//! describe pod`, [`message`]); the machine-readable form, the
//! [`Finished`] JSON (`apiVersion: skiff.dev/v1alpha1`, `kind:
//! PodStartupTimeline`), is that event's [`ANNOTATION`]
//! (`kubectl get events --field-selector
//! involvedObject.uid=UID,reason=StartupTimeline -o
//! jsonpath='{.items[0].metadata.annotations.skiff\.dev/startup-timeline}'`);
//! the histograms are the kubelet's (`kubelet_pod_start_sli_duration_seconds`,
//! `kubelet_pod_start_total_duration_seconds`, in `crate::metrics`).
//!
//! Who records what: the API server admits and creates the pod
//! (creationTimestamp: "created" and "admitted" are one instant); the
//! scheduler queues it and, for a pod whose attempts failed, keeps when it
//! first queued it and each FailedScheduling message with its count,
//! which its binding carries onto the pod as the
//! `skiff.dev/scheduling-wait` annotation (`skiff_api::scheduling_wait`;
//! a pod bound at its first attempt gets none, so the normal path costs
//! nothing: no event list, no extra write); the binding sets PodScheduled;
//! this agent records the rest, from seeing the pod to Ready.
//!
//! It never talks to the API or the runtime: the pod worker hands it what
//! it saw (see `pod_worker::sync`), and writes the one event.

pub mod compute;
pub mod message;
pub mod store;

use std::time::Instant;

use k8s_openapi::jiff::Timestamp;

pub use compute::{Finished, Phase, Step};
pub use store::Store;

/// The reason of the event written when a pod is first Ready.
pub const EVENT_REASON: &str = "StartupTimeline";

/// The annotation of that event that carries the [`Finished`] timeline
/// as JSON.
pub const ANNOTATION: &str = "skiff.dev/startup-timeline";

/// Why a timeline cannot be finished.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// This worker did not see the pod start (it was running before the
    /// agent started, or its sandbox was made by someone else).
    #[error("the start of pod {0} was not seen by this agent")]
    NotSeen(String),
    /// The pod has no creationTimestamp to measure from.
    #[error("pod {0} has no creationTimestamp")]
    NoCreation(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A call's start and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: Instant,
    pub end: Instant,
}

impl Span {
    pub fn new(start: Instant, end: Instant) -> Self {
        Self { start, end }
    }
}

/// How a container's image was made present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageOutcome {
    /// It was there already (no pull).
    Present,
    /// Pulled; the image's size in bytes as the runtime reports it.
    Pulled { bytes: u64 },
}

/// One container's image step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageStep {
    pub container: String,
    pub image: String,
    pub span: Span,
    pub outcome: ImageOutcome,
}

/// What was recorded of one container's start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerSteps {
    pub name: String,
    /// An init container (a sidecar too: see `sidecar`).
    pub init: bool,
    /// A restartable init container.
    pub sidecar: bool,
    /// CreateContainer.
    pub create: Option<Span>,
    /// StartContainer.
    pub start: Option<Span>,
    /// The postStart hook.
    pub post_start: Option<Span>,
}

/// What a pod worker records while its pod starts. Cheap: a handful of
/// instants per container, kept in the worker.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// When the agent first saw the pod...
    pub seen: Instant,
    /// ...and the wall clock then, to place every instant on it.
    pub seen_wall: Timestamp,
    /// RunPodSandbox (the last one, if it was retried).
    pub sandbox: Option<Span>,
    /// The sandbox's id, for its network step.
    pub sandbox_id: String,
    /// The sandbox's creation time as the runtime reports it (ns since
    /// the epoch): containerd creates the sandbox container, then its
    /// network.
    pub sandbox_created_ns: i64,
    /// When the CNI chain finished (ns since the epoch), if known.
    pub network_done_ns: Option<i64>,
    /// The pod's volumes made ready before its first container.
    pub volumes: Option<Span>,
    pub images: Vec<ImageStep>,
    pub containers: Vec<ContainerSteps>,
    /// Written once: the event went out.
    pub finished: bool,
}

impl Timeline {
    /// A timeline of a pod first seen at `seen` (wall clock `seen_wall`).
    pub fn new(seen: Instant, seen_wall: Timestamp) -> Self {
        Self {
            seen,
            seen_wall,
            sandbox: None,
            sandbox_id: String::new(),
            sandbox_created_ns: 0,
            network_done_ns: None,
            volumes: None,
            images: Vec::new(),
            containers: Vec::new(),
            finished: false,
        }
    }

    /// A timeline starting now.
    pub fn now() -> Self {
        Self::new(Instant::now(), Timestamp::now())
    }

    /// RunPodSandbox returned sandbox `id`.
    pub fn sandbox(&mut self, span: Span, id: &str) {
        self.sandbox = Some(span);
        self.sandbox_id = id.to_string();
        self.sandbox_created_ns = 0;
        self.network_done_ns = None;
    }

    /// The pod's volumes were prepared (kept: the first time).
    pub fn volumes(&mut self, span: Span) {
        if self.volumes.is_none() {
            self.volumes = Some(span);
        }
    }

    /// A container's image step (the last one per container).
    pub fn image(&mut self, step: ImageStep) {
        self.images.retain(|i| i.container != step.container);
        self.images.push(step);
    }

    /// The steps of container `name`, made on first use (always `Some`).
    pub fn container(
        &mut self,
        name: &str,
        init: bool,
        sidecar: bool,
    ) -> Option<&mut ContainerSteps> {
        if !self.containers.iter().any(|c| c.name == name) {
            self.containers.push(ContainerSteps {
                name: name.to_string(),
                init,
                sidecar,
                ..Default::default()
            });
        }
        self.containers.iter_mut().find(|c| c.name == name)
    }

    /// The wall-clock time of `at`.
    pub fn wall(&self, at: Instant) -> Timestamp {
        let offset = match at.checked_duration_since(self.seen) {
            Some(after) => k8s_openapi::jiff::SignedDuration::try_from(after).unwrap_or_default(),
            None => {
                -k8s_openapi::jiff::SignedDuration::try_from(self.seen - at).unwrap_or_default()
            }
        };
        self.seen_wall.checked_add(offset).unwrap_or(self.seen_wall)
    }
}

/// When libcni finished the sandbox's network: the modification time of
/// its cached result (`/var/lib/cni/results/<network>-<sandbox>-<ifname>`,
/// written once the whole chain has run). A directory read, done once
/// per pod when its timeline is finished.
pub fn network_done(sandbox_id: &str) -> Option<i64> {
    network_done_in(std::path::Path::new(CNI_RESULTS), sandbox_id)
}

/// libcni's result cache (containerd 1.6 cannot move it).
const CNI_RESULTS: &str = "/var/lib/cni/results";

fn network_done_in(dir: &std::path::Path, sandbox_id: &str) -> Option<i64> {
    if sandbox_id.is_empty() {
        return None;
    }
    // One result per network the sandbox joined (go-cni's loopback,
    // then the pod network): the last one written.
    let infix = format!("-{sandbox_id}-");
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(&infix))
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .max()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn instants_are_placed_on_the_wall_clock() {
        let seen = Instant::now();
        let wall: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let t = Timeline::new(seen, wall);
        assert_eq!(
            t.wall(seen + Duration::from_millis(1500)).to_string(),
            "2026-01-01T00:00:11.5Z"
        );
        if let Some(before) = seen.checked_sub(Duration::from_millis(250)) {
            assert_eq!(t.wall(before).to_string(), "2026-01-01T00:00:09.75Z");
        }
    }

    #[test]
    fn containers_are_recorded_once_each() {
        let mut t = Timeline::now();
        let at = Instant::now();
        t.container("a", true, false).unwrap().create = Some(Span::new(at, at));
        t.container("b", false, false);
        t.container("a", true, false).unwrap().start = Some(Span::new(at, at));
        assert_eq!(t.containers.len(), 2);
        assert!(t.containers[0].create.is_some() && t.containers[0].start.is_some());
    }

    #[test]
    fn the_network_ends_when_libcni_cached_its_result() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("skiff0-abc123-eth0"), b"{}").unwrap();
        assert!(network_done_in(dir.path(), "abc123").is_some());
        assert_eq!(network_done_in(dir.path(), "other"), None);
        assert_eq!(network_done_in(dir.path(), ""), None);
    }
}
