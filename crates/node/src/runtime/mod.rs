//! The container runtime boundary: [`Runtime`], the CRI v1 calls the agent
//! makes, with the real client ([`cri::CriRuntime`], tonic over containerd's
//! unix socket) and a fake ([`fake::FakeRuntime`]) beside it, and the
//! supervisor of the agent's own containerd ([`containerd`]).
//!
//! Requests and answers are CRI's own messages (as upstream's
//! `RuntimeService`/`ImageManagerService` interfaces); nothing here knows
//! about pods as the API sees them.

pub mod containerd;
pub mod cri;
pub mod fake;

use async_trait::async_trait;
pub use k8s_cri::v1 as api;

/// A CRI call that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime's socket could not be reached.
    #[error("cannot connect to the container runtime at {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    /// The runtime answered with an error.
    #[error("{message}")]
    Status { code: tonic::Code, message: String },
}

impl Error {
    /// The gRPC code of a runtime error (Unavailable when unreachable).
    pub fn code(&self) -> tonic::Code {
        match self {
            Error::Connect { .. } => tonic::Code::Unavailable,
            Error::Status { code, .. } => *code,
        }
    }

    /// The runtime's message alone.
    pub fn message(&self) -> String {
        match self {
            Error::Connect { .. } => self.to_string(),
            Error::Status { message, .. } => message.clone(),
        }
    }

    /// The error as the kubelet prints a gRPC error from the runtime
    /// (Go's `status.Error` text): `rpc error: code = NotFound desc = ...`.
    pub fn go_text(&self) -> String {
        match self {
            Error::Connect { .. } => {
                format!("rpc error: code = Unavailable desc = {self}")
            }
            Error::Status { code, message } => {
                format!("rpc error: code = {} desc = {message}", go_code(*code))
            }
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == tonic::Code::NotFound
    }
}

/// gRPC codes by the names Go's codes package prints.
pub fn go_code(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Error::Status {
            code: s.code(),
            message: s.message().to_string(),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The label every sandbox and container of a pod carries (upstream's).
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// The label naming a container's container in its pod (upstream's).
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";

/// A sandbox or container as the PLEG's relist compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its [`POD_UID_LABEL`].
    pub pod_uid: Option<String>,
    pub id: String,
    /// The CRI state (a `PodSandboxState` or `ContainerState`).
    pub state: i32,
    /// A container's [`CONTAINER_NAME_LABEL`] (none for sandboxes).
    pub container_name: Option<String>,
}

/// Everything in the runtime, as a relist sees it.
#[derive(Debug, Clone, Default)]
pub struct Relisted {
    pub sandboxes: Vec<Listed>,
    pub containers: Vec<Listed>,
}

/// The CRI calls the agent makes (RuntimeService and ImageService).
#[async_trait]
pub trait Runtime: Send + Sync + std::fmt::Debug {
    /// For a runtime that knows when its sandboxes and containers change
    /// (upstream's evented PLEG, where CRI streams container events): a
    /// number that differs after every change a [`Runtime::relist`] could
    /// see, so the agent skips relists while it stays the same. `None`
    /// (containerd here): relist every period.
    fn generation(&self) -> Option<u64> {
        None
    }

    async fn version(&self) -> Result<api::VersionResponse>;
    async fn status(&self) -> Result<api::StatusResponse>;

    async fn run_pod_sandbox(
        &self,
        config: api::PodSandboxConfig,
        runtime_handler: String,
    ) -> Result<String>;
    async fn stop_pod_sandbox(&self, id: &str) -> Result<()>;
    async fn remove_pod_sandbox(&self, id: &str) -> Result<()>;
    async fn pod_sandbox_status(&self, id: &str) -> Result<api::PodSandboxStatus>;
    async fn list_pod_sandboxes(&self) -> Result<Vec<api::PodSandbox>>;
    /// The sandboxes of one pod (by its UID label); runtimes filter
    /// server-side where they can.
    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<api::PodSandbox>> {
        Ok(self
            .list_pod_sandboxes()
            .await?
            .into_iter()
            .filter(|s| s.labels.get(POD_UID_LABEL).map(String::as_str) == Some(pod_uid))
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: api::ContainerConfig,
        sandbox_config: api::PodSandboxConfig,
    ) -> Result<String>;
    async fn start_container(&self, id: &str) -> Result<()>;
    async fn stop_container(&self, id: &str, timeout_seconds: i64) -> Result<()>;
    async fn remove_container(&self, id: &str) -> Result<()>;
    async fn list_containers(&self) -> Result<Vec<api::Container>>;
    /// The containers of one pod (by its UID label).
    async fn list_containers_of(&self, pod_uid: &str) -> Result<Vec<api::Container>> {
        Ok(self
            .list_containers()
            .await?
            .into_iter()
            .filter(|c| c.labels.get(POD_UID_LABEL).map(String::as_str) == Some(pod_uid))
            .collect())
    }
    async fn container_status(&self, id: &str) -> Result<api::ContainerStatus>;
    /// The host PID of a container's process, when the runtime tells it
    /// (containerd: the `pid` of ContainerStatus's verbose info; 0 or
    /// absent: none).
    async fn container_pid(&self, _id: &str) -> Result<Option<u32>> {
        Ok(None)
    }
    /// The host PID of a sandbox's process (the pause container), as
    /// [`Runtime::container_pid`].
    async fn sandbox_pid(&self, _id: &str) -> Result<Option<u32>> {
        Ok(None)
    }
    /// Every sandbox and container, reduced to what a relist compares
    /// (upstream's GenericPLEG lists both each second). The default reads
    /// the full lists; a runtime that can answer without building them
    /// does (the fake one, where copying every label of every container
    /// of 5,000 simulated nodes each second was most of a relist).
    async fn relist(&self) -> Result<Relisted> {
        let label = |labels: &std::collections::HashMap<String, String>, name: &str| {
            labels.get(name).cloned()
        };
        let sandboxes = self
            .list_pod_sandboxes()
            .await?
            .into_iter()
            .map(|s| Listed {
                pod_uid: label(&s.labels, POD_UID_LABEL),
                id: s.id,
                state: s.state,
                container_name: None,
            })
            .collect();
        let containers = self
            .list_containers()
            .await?
            .into_iter()
            .map(|c| Listed {
                pod_uid: label(&c.labels, POD_UID_LABEL),
                container_name: label(&c.labels, CONTAINER_NAME_LABEL),
                id: c.id,
                state: c.state,
            })
            .collect();
        Ok(Relisted {
            sandboxes,
            containers,
        })
    }

    /// Runs `cmd` in a running container and waits at most `timeout_s`
    /// (CRI ExecSync): (exit code, stdout, stderr).
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        timeout_s: i64,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)>;

    /// Prepares an exec on the runtime's streaming server (CRI Exec):
    /// the URL a client upgrades at (once, within the runtime's token
    /// lifetime, a minute for containerd).
    async fn exec(&self, req: api::ExecRequest) -> Result<String>;
    /// Prepares an attach to a running container (CRI Attach): its URL.
    async fn attach(&self, req: api::AttachRequest) -> Result<String>;
    /// Prepares a port-forward into a pod sandbox (CRI PortForward): its
    /// URL. WebSocket clients get channels for `req.port` only.
    async fn port_forward(&self, req: api::PortForwardRequest) -> Result<String>;

    /// The image's status, `None` when it is not present.
    async fn image_status(&self, image: &str) -> Result<Option<api::Image>>;
    /// Pulls `image`; returns its image reference (ID).
    async fn pull_image(
        &self,
        image: &str,
        sandbox_config: Option<api::PodSandboxConfig>,
    ) -> Result<String>;
}
