//! What the runtime has for one pod, read from CRI's lists and statuses by
//! the labels the agent puts on everything it creates (upstream's
//! `kubecontainer.PodStatus`). Adoption after a restart works from these
//! labels alone.

use std::collections::BTreeMap;

use crate::runtime::api;

/// Label keys on sandboxes and containers (upstream's).
pub const POD_NAME: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const POD_UID: &str = crate::runtime::POD_UID_LABEL;
pub const CONTAINER_NAME: &str = crate::runtime::CONTAINER_NAME_LABEL;
/// Annotation keys on containers (upstream's).
pub const RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const CONTAINER_HASH: &str = "io.kubernetes.container.hash";
pub const GRACE_PERIOD: &str = "io.kubernetes.pod.terminationGracePeriod";

/// A sandbox of the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    pub id: String,
    pub ready: bool,
    pub attempt: u32,
    pub created_at: i64,
    pub ip: Option<String>,
}

/// CRI's container states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Running,
    Exited,
    Unknown,
}

impl State {
    pub fn from_cri(state: i32) -> Self {
        match api::ContainerState::try_from(state) {
            Ok(api::ContainerState::ContainerCreated) => State::Created,
            Ok(api::ContainerState::ContainerRunning) => State::Running,
            Ok(api::ContainerState::ContainerExited) => State::Exited,
            _ => State::Unknown,
        }
    }
}

/// One container instance (one run of a container of the spec).
#[derive(Debug, Clone, PartialEq)]
pub struct Container {
    pub id: String,
    pub name: String,
    pub sandbox_id: String,
    pub state: State,
    pub restart_count: u32,
    pub hash: String,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub image: String,
    pub image_ref: String,
    /// The pod's grace period when the container was created (its
    /// annotation): what an orphan is stopped with.
    pub grace_period: Option<i64>,
}

/// Everything the runtime has for one pod UID.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodRuntime {
    /// Newest first.
    pub sandboxes: Vec<Sandbox>,
    /// Newest first.
    pub containers: Vec<Container>,
}

impl PodRuntime {
    /// The newest sandbox, if ready.
    pub fn ready_sandbox(&self) -> Option<&Sandbox> {
        self.sandboxes.first().filter(|s| s.ready)
    }

    /// The newest instance of container `name`.
    pub fn latest(&self, name: &str) -> Option<&Container> {
        self.containers.iter().find(|c| c.name == name)
    }

    /// The instance before the newest one.
    pub fn previous(&self, name: &str) -> Option<&Container> {
        self.containers.iter().filter(|c| c.name == name).nth(1)
    }

    /// Every instance that is running.
    pub fn running(&self) -> impl Iterator<Item = &Container> {
        self.containers.iter().filter(|c| c.state == State::Running)
    }
}

/// The pod UID a sandbox or container belongs to.
pub fn pod_uid(labels: &std::collections::HashMap<String, String>) -> Option<&str> {
    labels.get(POD_UID).map(String::as_str)
}

/// A sandbox as [`Sandbox`].
pub fn sandbox(s: &api::PodSandbox, ip: Option<String>) -> Sandbox {
    Sandbox {
        id: s.id.clone(),
        ready: s.state == api::PodSandboxState::SandboxReady as i32,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        created_at: s.created_at,
        ip,
    }
}

/// A container status as [`Container`].
pub fn container(sandbox_id: &str, s: &api::ContainerStatus) -> Container {
    let name = s
        .labels
        .get(CONTAINER_NAME)
        .cloned()
        .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))
        .unwrap_or_default();
    Container {
        id: s.id.clone(),
        name,
        sandbox_id: sandbox_id.to_string(),
        state: State::from_cri(s.state),
        restart_count: s
            .annotations
            .get(RESTART_COUNT)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        hash: s
            .annotations
            .get(CONTAINER_HASH)
            .cloned()
            .unwrap_or_default(),
        created_at: s.created_at,
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        image: s
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: s.image_ref.clone(),
        grace_period: s.annotations.get(GRACE_PERIOD).and_then(|v| v.parse().ok()),
    }
}

/// Sorts newest first, as [`PodRuntime`] keeps them.
pub fn sort(pod: &mut PodRuntime) {
    pod.sandboxes
        .sort_by_key(|s| std::cmp::Reverse((s.created_at, s.attempt)));
    pod.containers
        .sort_by_key(|c| std::cmp::Reverse((c.restart_count, c.created_at)));
}

/// Groups a whole-node listing by pod UID: `(sandboxes, containers)` with
/// the containers' statuses already fetched.
pub fn group(
    sandboxes: &[api::PodSandbox],
    ips: &BTreeMap<String, String>,
    containers: &[(String, api::ContainerStatus)],
) -> BTreeMap<String, PodRuntime> {
    let mut pods: BTreeMap<String, PodRuntime> = BTreeMap::new();
    for s in sandboxes {
        if let Some(uid) = pod_uid(&s.labels) {
            pods.entry(uid.to_string())
                .or_default()
                .sandboxes
                .push(sandbox(s, ips.get(&s.id).cloned()));
        }
    }
    for (sandbox_id, c) in containers {
        if let Some(uid) = pod_uid(&c.labels) {
            pods.entry(uid.to_string())
                .or_default()
                .containers
                .push(container(sandbox_id, c));
        }
    }
    for pod in pods.values_mut() {
        sort(pod);
    }
    pods
}
