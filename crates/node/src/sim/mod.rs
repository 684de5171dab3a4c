//! Simulated nodes (`skiff sim`): many node agents in one process, each
//! running the real agent code (registration, heartbeat and Lease, the
//! pod dispatcher and pod workers, status reporting) over its own
//! [`FakeRuntime`], as kwok does with rules but with our kubelet's logic.
//!
//! What they share, so that thousands fit in one process: one kube
//! client, one watch of every bound pod (dispatched to the node it names)
//! and one watch of the simulated Nodes (for their podCIDRs). Each node
//! keeps its own registration loops, started at a spread offset so the
//! Leases are not renewed in the same instant.
//!
//! Nodes are lost (their Leases and status no longer renewed) all at once
//! after `stop_after`, or one at a time through the [`admin`] endpoint.
//!
//! It owns nothing on the host beyond a scratch dir for the workers' files.

pub mod admin;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::api::{ApiObjects, ApiPods};
use crate::agent::dispatch::{pod_watch, run_pods, PodEvents};
use crate::agent::pod_index::PodIndex;
use crate::pod_worker::sync::Context;
use crate::registration::{self, machine::Machine, Health, Registration};
use crate::runtime::fake::{FakeRuntime, Simulation};

/// The label every simulated Node carries (`type=skiff-sim`, as kwok's
/// `type=kwok`), which the shared Node watch selects on.
pub const SIM_LABEL: (&str, &str) = ("type", "skiff-sim");

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Config {
    /// How many nodes.
    pub nodes: usize,
    /// Node names are the prefix and a number from 0.
    pub name_prefix: String,
    /// How long a container takes to start.
    pub pod_start_delay: Duration,
    /// Capacity `pods`, cpu (cores) and memory (bytes) of each node.
    pub pods_per_node: u32,
    pub cpu: u32,
    pub memory_bytes: u64,
    /// After this long, the nodes stop renewing their Leases and
    /// patching their status (the pods keep running): node loss.
    pub stop_after: Option<Duration>,
    /// Delete the simulated Nodes and their Leases on shutdown.
    pub cleanup: bool,
    /// Scratch space for the workers' per-pod files.
    pub data_dir: PathBuf,
    /// The cluster DNS servers the simulated kubelets are configured
    /// with (a real cluster has one; without it every ClusterFirst pod
    /// gets a MissingClusterDNS warning event).
    pub cluster_dns: Vec<String>,
    /// When set, node `i` registers with the `i`-th /24 of this range as
    /// its spec.podCIDR ([`PodCidrRange::block`]); otherwise the cluster's
    /// node IPAM controller assigns one (a second write per node).
    pub pod_cidr_range: Option<PodCidrRange>,
}

/// What [`run`] serves besides the nodes.
#[derive(Debug, Default)]
pub struct Endpoints {
    /// The admin endpoint's listener ([`admin`]), bound by the caller so
    /// that an address in use fails before anything starts.
    pub admin: Option<tokio::net::TcpListener>,
}

/// An IPv4 range that simulated nodes take their /24 podCIDRs from, in
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCidrRange {
    base: u32,
    blocks: u32,
}

/// The size of each node's block (upstream's default node CIDR mask).
const NODE_MASK: u32 = 24;

impl PodCidrRange {
    /// Parses `a.b.c.d/p` (p at most 24) and checks that it holds
    /// `nodes` blocks.
    pub fn parse(text: &str, nodes: usize) -> Result<Self, String> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a CIDR (a.b.c.d/p)"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("{text:?}: {addr:?} is not an IPv4 address"))?;
        let prefix: u32 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= NODE_MASK)
            .ok_or_else(|| {
                format!("{text:?}: the prefix must be a number from 0 to {NODE_MASK}")
            })?;
        let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
        let base = u32::from(addr);
        if base & !mask != 0 {
            return Err(format!("{text:?} has host bits set"));
        }
        let blocks = 1u32 << (NODE_MASK - prefix);
        if nodes as u64 > u64::from(blocks) {
            return Err(format!(
                "{text:?} holds {blocks} /{NODE_MASK} blocks, fewer than the {nodes} nodes"
            ));
        }
        Ok(Self { base, blocks })
    }

    /// Node `i`'s block, `None` past the end of the range.
    pub fn block(&self, i: usize) -> Option<String> {
        let i = u32::try_from(i).ok().filter(|i| *i < self.blocks)?;
        let start = Ipv4Addr::from(self.base + (i << (32 - NODE_MASK)));
        Some(format!("{start}/{NODE_MASK}"))
    }
}

impl Config {
    /// The name of node `i`.
    pub fn node_name(&self, i: usize) -> String {
        format!("{}{i}", self.name_prefix)
    }
}

/// Node `i`'s InternalIP, from 100.64.0.0/10 (shared address space, so
/// never a real one here).
pub fn node_ip(i: usize) -> IpAddr {
    let base = u32::from(Ipv4Addr::new(100, 64, 0, 0));
    IpAddr::V4(Ipv4Addr::from(base.wrapping_add(1 + i as u32)))
}

fn machine(config: &Config, name: &str) -> Machine {
    Machine {
        cpus: config.cpu,
        memory_bytes: config.memory_bytes,
        hugepages_2mi_bytes: 0,
        hugepages_1gi_bytes: 0,
        ephemeral_storage_bytes: 100 << 30,
        kernel_version: "skiff-sim".into(),
        os_image: "skiff simulated node".into(),
        architecture: registration::machine::go_arch(std::env::consts::ARCH).to_string(),
        hostname: name.to_string(),
        machine_id: format!("{:0>32}", name.len()),
        system_uuid: uuid::Uuid::new_v4().to_string(),
        boot_id: uuid::Uuid::new_v4().to_string(),
    }
}

/// What the shared pod watch gives each node's dispatcher.
type PodEvent = Result<watcher::Event<Pod>, watcher::Error>;

/// One simulated node's handles.
struct SimNode {
    runtime: Arc<FakeRuntime>,
    /// Boxed: a channel allocates room for 32 items up front, and a Pod
    /// is over 2 KiB inline (70 KiB a node unboxed).
    pods: mpsc::UnboundedSender<Box<PodEvent>>,
}

/// Runs the simulated nodes until `shutdown`.
pub async fn run(
    client: kube::Client,
    config: Config,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) {
    let mut nodes: HashMap<String, SimNode> = HashMap::new();
    let renewals = shutdown.child_token();
    let mut per_node = admin::Renewals::default();
    let (_health_tx, health) = tokio::sync::watch::channel(Health {
        runtime_version: Some("fake://0.1.0".into()),
        ..Health::default()
    });
    let mut tasks = Vec::new();
    // One status manager for every simulated node: statuses replaced
    // before they are sent are never written.
    let statuses = Arc::new(crate::status::manager::StatusManager::start(
        Arc::new(ApiPods(client.clone())),
        shutdown.clone(),
    ));
    for i in 0..config.nodes {
        let name = config.node_name(i);
        let pod_cidr = config.pod_cidr_range.and_then(|r| r.block(i));
        let runtime = Arc::new(FakeRuntime::simulated(Simulation {
            pod_cidr: pod_cidr.clone(),
            start_delay: config.pod_start_delay,
        }));
        let mut reg = registration::Config::new(&name, config.data_dir.join("nodes").join(&name));
        reg.labels
            .insert(SIM_LABEL.0.to_string(), SIM_LABEL.1.to_string());
        reg.node_ip = Some(node_ip(i));
        reg.max_pods = config.pods_per_node;
        reg.machine = Some(machine(&config, &name));
        reg.follow_pod_cidr = false;
        reg.pod_cidr = pod_cidr;
        // Spread over one renew interval.
        reg.start_jitter = reg
            .renew_interval
            .mul_f64(i as f64 / config.nodes.max(1) as f64);
        let registration = Registration::new(client.clone(), reg);
        let stop = renewals.child_token();
        per_node.add(&name, stop.clone());
        let h = health.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = registration.run(h, stop).await {
                tracing::warn!(error = %e, "a simulated node's registration stopped");
            }
        }));

        let recorder = skiff_client::recorder::Recorder::new(client.clone(), "kubelet", &name)
            .with_host(&name);
        let ctx = Arc::new(Context {
            runtime: runtime.clone(),
            events: Arc::new(recorder),
            api: statuses.clone(),
            node_ip: node_ip(i).to_string(),
            log_root: config.data_dir.join("logs").join(&name),
            network_ready: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            objects: Arc::new(ApiObjects(client.clone(), None, Arc::default())),
            node_name: name.clone(),
            node_cpu_milli: i64::from(config.cpu) * 1000,
            node_memory: config.memory_bytes as i64,
            volumes_root: config.data_dir.join("volumes").join(&name),
            cgroups: None,
            cluster_dns: config.cluster_dns.clone(),
            resolv_conf: crate::pod_worker::sync::NODE_RESOLV_CONF.into(),
            cluster_domain: crate::pod_worker::dns::CLUSTER_DOMAIN.into(),
            // Simulated pods start on a fake runtime: nothing to time.
            timelines: None,
        });
        let (tx, rx) = mpsc::unbounded_channel::<Box<PodEvent>>();
        let events: PodEvents =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|e| (*e, rx)) },
            )
            .boxed();
        tasks.push(tokio::spawn(run_pods(
            events,
            ctx,
            PodIndex::default(),
            shutdown.clone(),
        )));
        nodes.insert(name, SimNode { runtime, pods: tx });
    }
    let nodes = Arc::new(nodes);
    if let Some(listener) = endpoints.admin {
        tasks.push(tokio::spawn(admin::serve(
            listener,
            Arc::new(per_node),
            shutdown.clone(),
        )));
    }
    tasks.push(tokio::spawn(dispatch_pods(
        client.clone(),
        nodes.clone(),
        shutdown.clone(),
    )));
    tasks.push(tokio::spawn(follow_pod_cidrs(
        client.clone(),
        nodes.clone(),
        shutdown.clone(),
    )));
    tracing::info!(nodes = config.nodes, "simulated nodes started");
    match config.stop_after {
        Some(after) => {
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(after) => {
                    tracing::info!("the simulated nodes stop renewing their Leases");
                    renewals.cancel();
                    shutdown.cancelled().await;
                }
            }
        }
        None => shutdown.cancelled().await,
    }
    for t in tasks {
        let _ = t.await;
    }
    if config.cleanup {
        clean_up(&client, &config).await;
    }
}

/// One watch of every bound pod, each event handed to the node it names;
/// the watch's (re)list markers go to every node, so each one's
/// dispatcher sees a consistent list of its own pods.
async fn dispatch_pods(
    client: kube::Client,
    nodes: Arc<HashMap<String, SimNode>>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut stream = pod_watch(client, config, "simulated nodes' pods");
    let to = |pod: &Pod| {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| nodes.get(n))
    };
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = stream.next() => e,
        };
        let Some(event) = event else { return };
        match event {
            Ok(watcher::Event::Init) => {
                for n in nodes.values() {
                    let _ = n.pods.send(Box::new(Ok(watcher::Event::Init)));
                }
            }
            Ok(watcher::Event::InitDone) => {
                for n in nodes.values() {
                    let _ = n.pods.send(Box::new(Ok(watcher::Event::InitDone)));
                }
            }
            Ok(watcher::Event::InitApply(pod)) => {
                if let Some(n) = to(&pod) {
                    let _ = n.pods.send(Box::new(Ok(watcher::Event::InitApply(pod))));
                }
            }
            Ok(watcher::Event::Apply(pod)) => {
                if let Some(n) = to(&pod) {
                    let _ = n.pods.send(Box::new(Ok(watcher::Event::Apply(pod))));
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                if let Some(n) = to(&pod) {
                    let _ = n.pods.send(Box::new(Ok(watcher::Event::Delete(pod))));
                }
            }
            Err(e) => tracing::warn!(error = %e, "the simulated nodes' pod watch failed; retrying"),
        }
    }
}

/// One watch of the simulated Nodes: each one's podCIDR reaches its fake
/// runtime, which hands out pod IPs from it.
async fn follow_pod_cidrs(
    client: kube::Client,
    nodes: Arc<HashMap<String, SimNode>>,
    shutdown: CancellationToken,
) {
    let api: Api<Node> = Api::all(client);
    let config = watcher::Config::default().labels(&format!("{}={}", SIM_LABEL.0, SIM_LABEL.1));
    let mut stream = watcher(api, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let node = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = stream.next() => n,
        };
        match node {
            Some(Ok(node)) => {
                let cidr = node.spec.as_ref().and_then(|s| s.pod_cidr.as_deref());
                let sim = node.metadata.name.as_deref().and_then(|n| nodes.get(n));
                if let (Some(cidr), Some(sim)) = (cidr, sim) {
                    sim.runtime.set_pod_cidr(cidr);
                }
            }
            Some(Err(e)) => tracing::debug!(error = %e, "simulated node watch"),
            None => return,
        }
    }
}

/// Deletes the simulated Nodes and their Leases.
async fn clean_up(client: &kube::Client, config: &Config) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for i in 0..config.nodes {
        let name = config.node_name(i);
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
        let _ = leases.delete(&name, &DeleteParams::default()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses() {
        let c = Config {
            nodes: 3,
            name_prefix: "sim-".into(),
            pod_start_delay: Duration::ZERO,
            pods_per_node: 110,
            cpu: 32,
            memory_bytes: 256 << 30,
            stop_after: None,
            cleanup: false,
            data_dir: "/tmp/x".into(),
            cluster_dns: vec!["10.43.0.10".into()],
            pod_cidr_range: None,
        };
        assert_eq!(c.node_name(2), "sim-2");
        assert_eq!(node_ip(0).to_string(), "100.64.0.1");
        assert_eq!(node_ip(300).to_string(), "100.64.1.45");
    }

    #[test]
    fn pod_cidr_blocks_in_order_and_bad_ranges_refused() {
        let r = PodCidrRange::parse("10.0.0.0/8", 5000).expect("range");
        assert_eq!(r.block(0).as_deref(), Some("10.0.0.0/24"));
        assert_eq!(r.block(300).as_deref(), Some("10.1.44.0/24"));
        assert_eq!(r.block(65535).as_deref(), Some("10.255.255.0/24"));
        assert_eq!(r.block(65536), None);
        let whole = PodCidrRange::parse("10.250.7.0/24", 1).expect("one block");
        assert_eq!(whole.block(0).as_deref(), Some("10.250.7.0/24"));
        assert_eq!(whole.block(1), None);
        for (text, nodes, says) in [
            (
                "10.244.0.0/16",
                300,
                "holds 256 /24 blocks, fewer than the 300 nodes",
            ),
            (
                "10.244.0.0/25",
                1,
                "the prefix must be a number from 0 to 24",
            ),
            ("10.244.1.0/16", 1, "has host bits set"),
            ("10.244.0.0", 1, "is not a CIDR"),
            ("fd00::/64", 1, "is not an IPv4 address"),
        ] {
            let err = PodCidrRange::parse(text, nodes).expect_err(text);
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
