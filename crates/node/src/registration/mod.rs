//! The agent's Node: registering it, its status heartbeat, its Lease in
//! kube-node-lease, and following the podCIDR the IPAM controller gives it
//! (upstream's `kubelet_node_status.go`, `nodestatus` and `nodelease`).
//!
//! - [`machine`]: facts read from this machine (pure parsers + reading);
//! - [`node`]: the Node and its status as pure functions, and taint parsing;
//! - [`heartbeat`]: create/reconcile the Node, patch its status;
//! - [`lease`]: renew the Lease;
//! - [`events`]: the node's events (Starting, NodeReady, ...) in the
//!   kubelet's words;
//! - here: [`Config`], [`Health`] and [`Registration::run`], which ties
//!   them together and publishes spec.podCIDR.
//!
//! It talks only to the API server (a kube client) and owns only the
//! Node's labels it sets, its status fields and conditions, and its
//! Lease; it never writes the Node's spec, and it knows nothing of pods
//! or the container runtime beyond the [`Health`] the agent reports.

pub mod events;
pub mod heartbeat;
pub mod lease;
pub mod machine;
pub mod node;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use node::{parse_taint, parse_taints, DEFAULT_MAX_PODS, KUBELET_VERSION};

/// Why [`Registration::run`] gave up. Unreachable API servers are not
/// errors: they are retried until shutdown.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This machine's facts could not be read.
    #[error("reading this machine's facts")]
    Machine {
        /// Why.
        #[source]
        source: machine::Error,
    },
    /// The Node could not be registered (the API server refused it).
    #[error("registering node {name}")]
    Register {
        /// The node.
        name: String,
        /// Why.
        #[source]
        source: heartbeat::Error,
    },
}

/// The Node annotation naming the directory this node's local-path
/// volumes are made in (read by the local-path provisioner).
pub const LOCAL_PATH_DIR: &str = "skiff.dev/local-path-dir";

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How the agent registers.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Node's name (also its Hostname address and
    /// `kubernetes.io/hostname` label, as `--hostname-override` makes it).
    pub node_name: String,
    /// `--node-labels`: set at registration and kept on re-registration.
    pub labels: BTreeMap<String, String>,
    /// Annotations the agent owns on its Node (set at registration and
    /// kept on re-registration), e.g. [`LOCAL_PATH_DIR`].
    pub annotations: BTreeMap<String, String>,
    /// `--register-with-taints` (see [`parse_taints`]): set only when the
    /// Node is created, as kubelet does.
    pub taints: Vec<Taint>,
    /// The agent's HTTPS port (`daemonEndpoints.kubeletEndpoint.Port`).
    pub kubelet_port: u16,
    /// `--node-ip`; detected (default route) when `None`.
    pub node_ip: Option<IpAddr>,
    /// Capacity `pods`.
    pub max_pods: u32,
    /// The agent's state dir; its filesystem is ephemeral-storage.
    pub root_dir: PathBuf,
    /// How often the status is computed (kubelet's
    /// nodeStatusUpdateFrequency: 10 s); it is patched when it changed.
    pub status_update_frequency: Duration,
    /// How often an unchanged status is patched anyway, moving only the
    /// heartbeat times (kubelet's nodeStatusReportFrequency: 5 min; the
    /// Lease is the frequent heartbeat).
    pub status_report_frequency: Duration,
    /// The Lease's leaseDurationSeconds (kubelet: 40).
    pub lease_duration_seconds: i32,
    /// How often the Lease is renewed (kubelet: a quarter of the
    /// duration, 10 s).
    pub renew_interval: Duration,
    /// The machine to report instead of this one's (simulated nodes).
    pub machine: Option<machine::Machine>,
    /// A wait after registering before the heartbeat and Lease loops
    /// start, so that many nodes of one process do not renew in the same
    /// instant.
    pub start_jitter: Duration,
    /// Whether to watch the Node for spec.podCIDR ([`Registration::pod_cidr`]);
    /// simulated nodes share one watch instead.
    pub follow_pod_cidr: bool,
    /// spec.podCIDR to register with. kubelet leaves it to the node IPAM
    /// controller; simulated nodes can bring their own block, so that
    /// thousands of them need no second write each.
    pub pod_cidr: Option<String>,
}

impl Config {
    /// kubelet's defaults for node `node_name` with state in `root_dir`.
    pub fn new(node_name: impl Into<String>, root_dir: impl Into<PathBuf>) -> Self {
        Self {
            node_name: node_name.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            kubelet_port: 10250,
            node_ip: None,
            max_pods: DEFAULT_MAX_PODS,
            root_dir: root_dir.into(),
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(5 * 60),
            lease_duration_seconds: 40,
            renew_interval: Duration::from_secs(10),
            machine: None,
            start_jitter: Duration::ZERO,
            follow_pod_cidr: true,
            pod_cidr: None,
        }
    }
}

/// What the agent knows about its own health; the registration loop
/// patches the Node's conditions from it. No problems means Ready.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// `<runtime>://<version>` for nodeInfo.containerRuntimeVersion, e.g.
    /// `containerd://1.6.20`; the last one reported stays when `None`.
    pub runtime_version: Option<String>,
    /// Why the container runtime is not usable, in kubelet's words:
    /// [`RUNTIME_DOWN`], [`runtime_not_ready`].
    pub runtime_problem: Option<String>,
    /// Why pod networking is not usable: [`network_not_ready`].
    pub network_problem: Option<String>,
    /// Anything else keeping the node from Ready.
    pub host_problems: Vec<String>,
}

/// kubelet's Ready message when the runtime's status check has not
/// answered within its threshold.
pub const RUNTIME_DOWN: &str = "container runtime is down";

/// kubelet's Ready message before the first runtime status check.
pub const RUNTIME_NOT_CHECKED: &str = "container runtime status check may not have completed yet";

/// A CRI runtime condition as kubelet prints it:
/// `RuntimeReady=false reason:R message:M`.
pub fn runtime_condition(type_: &str, status: bool, reason: &str, message: &str) -> String {
    format!("{type_}={status} reason:{reason} message:{message}")
}

/// kubelet's problem when CRI reports RuntimeReady=false.
pub fn runtime_not_ready(reason: &str, message: &str) -> String {
    format!(
        "container runtime not ready: {}",
        runtime_condition("RuntimeReady", false, reason, message)
    )
}

/// kubelet's problem when CRI reports NetworkReady=false, e.g.
/// `container runtime network not ready: NetworkReady=false
/// reason:NetworkPluginNotReady message:Network plugin returns error: cni
/// plugin not initialized`.
pub fn network_not_ready(reason: &str, message: &str) -> String {
    format!(
        "container runtime network not ready: {}",
        runtime_condition("NetworkReady", false, reason, message)
    )
}

/// Registers this node and keeps it alive in the API.
pub struct Registration {
    client: kube::Client,
    config: Config,
    pod_cidr: watch::Sender<Option<String>>,
    events: Option<events::NodeEvents>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("config", &self.config)
            .field("pod_cidr", &*self.pod_cidr.borrow())
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// Registration of `config.node_name` through `client`.
    pub fn new(client: kube::Client, config: Config) -> Self {
        Self {
            client,
            config,
            pod_cidr: watch::channel(None).0,
            events: None,
        }
    }

    /// Records the node's status events (NodeHasSufficientMemory,
    /// NodeReady, ...) through `recorder`.
    pub fn with_events(mut self, recorder: skiff_client::recorder::Recorder) -> Self {
        self.events = Some(events::NodeEvents::new(recorder, &self.config.node_name));
        self
    }

    /// Follows spec.podCIDR of this node (None until the IPAM controller
    /// assigns one).
    pub fn pod_cidr(&self) -> watch::Receiver<Option<String>> {
        self.pod_cidr.subscribe()
    }

    /// Reads the machine's facts, registers the Node (retrying while the
    /// API is unreachable), then until `shutdown`: patches its status
    /// when it changed (looked at every `status_update_frequency`), when
    /// `health` changes and every `status_report_frequency` regardless,
    /// renews its Lease every `renew_interval`, and publishes its
    /// spec.podCIDR. Returns `Ok` on shutdown.
    pub async fn run(
        self,
        mut health: watch::Receiver<Health>,
        shutdown: CancellationToken,
    ) -> Result<()> {
        let config = &self.config;
        let facts = facts(config).map_err(|source| Error::Machine { source })?;
        let nodes: Api<Node> = Api::all(self.client.clone());
        let first_health = health.borrow_and_update().clone();
        let registered = heartbeat::register(
            &nodes,
            &facts,
            &config.labels,
            &config.taints,
            &first_health,
            &shutdown,
        )
        .await
        .map_err(|source| Error::Register {
            name: config.node_name.clone(),
            source,
        })?;
        let Some(node) = registered else {
            return Ok(());
        };
        if let Some(ev) = &self.events {
            // The conditions as the agent built its node anew.
            let initial = node::desired_status(
                &facts,
                &first_health,
                None,
                k8s_openapi::jiff::Timestamp::now(),
            );
            ev.conditions(None, initial.conditions.as_deref().unwrap_or_default());
        }
        publish(&self.pod_cidr, pod_cidr_of(&node));
        let mut renewer = lease::Renewer::new(
            self.client.clone(),
            &config.node_name,
            config.lease_duration_seconds,
            node.metadata.uid.as_deref(),
        );
        if !config.start_jitter.is_zero() {
            // The Lease is had (got or created) at once, as the kubelet's
            // lease controller does when it starts; only the renewals
            // wait for their spread slot. A failure here is retried there.
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                result = renewer.sync() => if let Err(e) = result {
                    tracing::warn!(error = %heartbeat::error_chain(&e), "failed to get or create the node lease, will retry");
                },
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(config.start_jitter) => {}
            }
        }
        // The Node's conditions as the watch last saw them on the server.
        let (seen, seen_rx) = watch::channel(None);
        let follow = async {
            if config.follow_pod_cidr {
                follow_pod_cidr(
                    nodes.clone(),
                    &config.node_name,
                    &self.pod_cidr,
                    &seen,
                    shutdown.clone(),
                )
                .await;
            }
        };
        tokio::join!(
            heartbeat::run(
                nodes.clone(),
                &facts,
                health,
                seen_rx,
                heartbeat::Every {
                    update: config.status_update_frequency,
                    report: config.status_report_frequency,
                },
                node,
                self.events.clone(),
                shutdown.clone(),
            ),
            renewer.run(config.renew_interval, shutdown.clone()),
            follow,
        );
        Ok(())
    }
}

/// The facts the status reports, from this machine and `config`.
fn facts(config: &Config) -> machine::Result<node::Facts> {
    let machine = match &config.machine {
        Some(m) => m.clone(),
        None => machine::Machine::gather(&config.root_dir)?,
    };
    let node_ip = match config.node_ip {
        Some(ip) => ip,
        None => machine::node_ip()?,
    };
    Ok(node::Facts {
        node_name: config.node_name.clone(),
        machine,
        node_ip,
        max_pods: config.max_pods,
        kubelet_port: config.kubelet_port,
        annotations: config.annotations.clone(),
        pod_cidr: config.pod_cidr.clone(),
    })
}

/// spec.podCIDR, or the first of spec.podCIDRs.
fn pod_cidr_of(node: &Node) -> Option<String> {
    let spec = node.spec.as_ref()?;
    spec.pod_cidr
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| spec.pod_cidrs.as_ref().and_then(|c| c.first().cloned()))
}

fn publish(tx: &watch::Sender<Option<String>>, cidr: Option<String>) {
    tx.send_if_modified(|current| {
        // A Node seen without one (a stale event) does not take a
        // published podCIDR back: it never changes once set.
        if cidr.is_some() && *current != cidr {
            tracing::info!(pod_cidr = ?cidr, "node podCIDR assigned");
            *current = cidr;
            true
        } else {
            false
        }
    });
}

/// Watches this Node (field selector metadata.name) and publishes its
/// spec.podCIDR, and its status conditions to `seen`, until `shutdown`.
async fn follow_pod_cidr(
    api: Api<Node>,
    name: &str,
    tx: &watch::Sender<Option<String>>,
    seen: &watch::Sender<Option<Vec<NodeCondition>>>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            Some(Ok(watcher::Event::Apply(node) | watcher::Event::InitApply(node))) => {
                publish(tx, pod_cidr_of(&node));
                seen.send_replace(node.status.and_then(|s| s.conditions));
            }
            Some(Ok(watcher::Event::Delete(_))) => {
                tracing::warn!(node = name, "this node's Node object was deleted");
            }
            Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %heartbeat::error_chain(&e), "watching this node");
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    #[test]
    fn runtime_messages_are_kubelets() {
        assert_eq!(
            runtime_not_ready("ContainerdNotReady", "down"),
            "container runtime not ready: RuntimeReady=false reason:ContainerdNotReady message:down"
        );
        assert_eq!(
            network_not_ready("NetworkPluginNotReady", "cni plugin not initialized"),
            "container runtime network not ready: NetworkReady=false \
             reason:NetworkPluginNotReady message:cni plugin not initialized"
        );
    }

    #[test]
    fn pod_cidr_is_published_once_set() {
        let (tx, rx) = watch::channel(None);
        let mut node = Node::default();
        publish(&tx, pod_cidr_of(&node));
        assert_eq!(*rx.borrow(), None);
        node.spec = Some(NodeSpec {
            pod_cidrs: Some(vec!["10.244.1.0/24".into()]),
            ..Default::default()
        });
        publish(&tx, pod_cidr_of(&node));
        assert_eq!(rx.borrow().as_deref(), Some("10.244.1.0/24"));
        publish(&tx, None);
        assert_eq!(rx.borrow().as_deref(), Some("10.244.1.0/24"));
    }
}
