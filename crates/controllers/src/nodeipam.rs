//! The node IPAM controller: gives every Node a podCIDR from the cluster
//! CIDR (kube-controller-manager's nodeipam with the range allocator).
//!
//! This module owns spec.podCIDR and spec.podCIDRs of Nodes that have
//! none, and the in-memory record of which node holds which block
//! ([`cidr_set`]). It watches all Nodes (kube-runtime's watcher); once
//! the first list is complete it marks every existing podCIDR as used
//! (one outside the cluster CIDR is reported and left alone), then
//! patches the next free block onto each node without one. A deleted
//! node's block is freed. When the range is exhausted it records
//! upstream's `CIDRNotAvailable` event on the Node and retries later (at
//! once when a block frees up). State is rebuilt from the API on every
//! relist, so a restart keeps every assignment. It never changes a
//! podCIDR once set, nor writes anything else.
//!
//! Blocks are chosen one at a time by the task that owns the record;
//! the patches that write them run [`UPDATE_WORKERS`] at a time (upstream's
//! `cidrUpdateWorkers`), so 5,000 new nodes get theirs in a second or two
//! instead of one round trip after another.

pub mod cidr_set;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use cidr_set::{CidrSet, Ipv4Cidr};

use crate::events::NodeEvents;

/// The events' source component, as upstream's range allocator.
const COMPONENT: &str = "cidrAllocator";
/// upstream's `cidrUpdateRetries`.
const UPDATE_RETRIES: usize = 3;
/// Patches in flight at once (upstream's `cidrUpdateWorkers`).
pub const UPDATE_WORKERS: usize = 30;
/// The first retry of a node that got no CIDR; it doubles up to
/// [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(300);

/// What went wrong configuring or running the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cluster CIDR does not parse.
    #[error("invalid cluster CIDR")]
    ClusterCidr {
        /// Why.
        #[source]
        source: cidr_set::Error,
    },
    /// The node mask does not fit the cluster CIDR.
    #[error("invalid node CIDR mask size for cluster CIDR {cluster}")]
    NodeMask {
        /// The cluster CIDR.
        cluster: Ipv4Cidr,
        /// Why.
        #[source]
        source: cidr_set::Error,
    },
    /// Patching a node's podCIDR failed (logged; the node is retried).
    #[error("failed to patch node {node} CIDR {cidr}")]
    Patch {
        /// The node.
        node: String,
        /// The CIDR.
        cidr: Ipv4Cidr,
        /// Why (boxed: kube's errors are large).
        #[source]
        source: Box<kube::Error>,
    },
    /// Recording an event failed (logged).
    #[error("recording event {reason} for node {node}")]
    Event {
        /// The node.
        node: String,
        /// The event's reason.
        reason: &'static str,
        /// Why (boxed: kube's errors are large).
        #[source]
        source: Box<crate::events::Error>,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The node IPAM controller for one cluster CIDR.
#[derive(Debug, Clone)]
pub struct NodeIpam {
    empty: CidrSet,
}

impl NodeIpam {
    /// Allocates `/node_mask` blocks (kubelet-sized: 24) of `cluster_cidr`
    /// (`10.244.0.0/16`). IPv4 only for now.
    pub fn new(cluster_cidr: &str, node_mask: u8) -> Result<Self> {
        let cluster: Ipv4Cidr = cluster_cidr
            .parse()
            .map_err(|source| Error::ClusterCidr { source })?;
        let empty = CidrSet::new(cluster, node_mask)
            .map_err(|source| Error::NodeMask { cluster, source })?;
        Ok(Self { empty })
    }

    /// The cluster CIDR (host bits cleared).
    pub fn cluster_cidr(&self) -> Ipv4Cidr {
        self.empty.cluster()
    }

    /// The node mask size.
    pub fn node_mask(&self) -> u8 {
        self.empty.node_mask()
    }

    /// Runs until `shutdown`. API errors are logged and retried, never
    /// returned.
    pub async fn run(self, client: Client, shutdown: CancellationToken) -> Result<()> {
        let api: Api<Node> = Api::all(client.clone());
        tracing::info!(
            cluster_cidr = %self.cluster_cidr(),
            node_mask = self.node_mask(),
            "starting range CIDR allocator"
        );
        let mut state = Allocator {
            api: api.clone(),
            events: NodeEvents::new(client, COMPONENT),
            set: self.empty.clone(),
            empty: self.empty,
            assigned: HashMap::new(),
            pending: HashMap::new(),
            listing: Vec::new(),
            synced: false,
            queue: VecDeque::new(),
            in_flight: HashMap::new(),
            patches: FuturesUnordered::new(),
        };
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        loop {
            let retry_at = state.next_retry();
            let retry = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(done) = state.patches.next(), if !state.patches.is_empty() => {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = state.patched(done) => {}
                    }
                }
                // Events wait while every worker is busy (the queue holds
                // what a relist found).
                event = stream.next(), if state.patches.len() < UPDATE_WORKERS => match event {
                    Some(Ok(event)) => tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = state.on_event(event) => {}
                    },
                    Some(Err(e)) => tracing::warn!(error = %e, "watching nodes"),
                    None => break,
                },
                _ = retry => tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = state.retry_due() => {}
                },
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = state.start_queued() => {}
            }
        }
        tracing::info!("shutting down range CIDR allocator");
        Ok(())
    }
}

/// A node waiting for a CIDR.
#[derive(Debug)]
struct Retry {
    node: Node,
    /// When it first failed (retries go oldest first).
    since: Instant,
    at: Instant,
    delay: Duration,
}

/// A patch of a node's podCIDR, finished.
struct Patched {
    node: Node,
    cidr: Ipv4Cidr,
    outcome: Outcome,
}

enum Outcome {
    Written,
    /// The node was deleted meanwhile (404).
    Gone,
    /// Every try failed; the last error.
    Failed(Error),
}

/// Patches `cidr` onto `node`, up to [`UPDATE_RETRIES`] times.
async fn patch_cidr(api: Api<Node>, node: Node, cidr: Ipv4Cidr) -> Patched {
    let name = name_of(&node);
    let patch = serde_json::json!({
        "spec": { "podCIDR": cidr.to_string(), "podCIDRs": [cidr.to_string()] }
    });
    let mut last = None;
    for _ in 0..UPDATE_RETRIES {
        match api
            .patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => {
                return Patched {
                    node,
                    cidr,
                    outcome: Outcome::Written,
                }
            }
            Err(e) if skiff_client::is_not_found(&e) => {
                return Patched {
                    node,
                    cidr,
                    outcome: Outcome::Gone,
                }
            }
            Err(source) => {
                last = Some(Error::Patch {
                    node: name.clone(),
                    cidr,
                    source: Box::new(source),
                })
            }
        }
    }
    let outcome = match last {
        Some(e) => Outcome::Failed(e),
        None => Outcome::Gone,
    };
    Patched {
        node,
        cidr,
        outcome,
    }
}

/// The controller's state: one task owns it and handles events in
/// order; only the patches run beside it.
struct Allocator {
    api: Api<Node>,
    events: NodeEvents,
    empty: CidrSet,
    set: CidrSet,
    /// Which node holds which block (occupied on its behalf).
    assigned: HashMap<String, Ipv4Cidr>,
    /// Nodes without a CIDR that could not get one yet.
    pending: HashMap<String, Retry>,
    /// The nodes of a list in progress.
    listing: Vec<Node>,
    synced: bool,
    /// Nodes without a CIDR waiting for a free worker.
    queue: VecDeque<Node>,
    /// Nodes whose patch is in flight: the block chosen, and whether the
    /// node was deleted meanwhile.
    in_flight: HashMap<String, (Ipv4Cidr, bool)>,
    patches: FuturesUnordered<BoxFuture<'static, Patched>>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("assigned", &self.assigned.len())
            .field("pending", &self.pending.len())
            .field("queue", &self.queue.len())
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// The node's podCIDR: the first of spec.podCIDRs, else spec.podCIDR.
/// `Some(Err(text))` for one that does not parse.
fn pod_cidr(node: &Node) -> Option<Result<Ipv4Cidr, String>> {
    let spec = node.spec.as_ref()?;
    let text = spec
        .pod_cidrs
        .as_ref()
        .and_then(|c| c.first().cloned())
        .or_else(|| spec.pod_cidr.clone())
        .filter(|c| !c.is_empty())?;
    Some(text.parse().map_err(|_| text))
}

impl Allocator {
    async fn on_event(&mut self, event: watcher::Event<Node>) {
        match event {
            watcher::Event::Init => self.listing.clear(),
            watcher::Event::InitApply(node) => self.listing.push(node),
            watcher::Event::InitDone => self.resync().await,
            watcher::Event::Apply(node) if self.synced => self.sync_node(node).await,
            watcher::Event::Delete(node) if self.synced => self.deleted(&node),
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {}
        }
    }

    /// A complete list: rebuilds the record from the nodes as they are,
    /// then serves the nodes without a CIDR.
    async fn resync(&mut self) {
        let listed = std::mem::take(&mut self.listing);
        self.set = self.empty.clone();
        self.assigned.clear();
        self.pending.clear();
        self.queue.clear();
        // Blocks being written are taken whatever the list says.
        for (cidr, _) in self.in_flight.values() {
            if let Err(e) = self.set.occupy(cidr) {
                tracing::warn!(pod_cidr = %cidr, error = %e, "error when occupying CIDR");
            }
        }
        let mut without = Vec::new();
        for node in listed {
            match pod_cidr(&node) {
                Some(Ok(cidr)) => self.occupy(&name_of(&node), cidr),
                Some(Err(text)) => {
                    tracing::warn!(node = %name_of(&node), pod_cidr = %text, "node has a podCIDR that does not parse; left alone")
                }
                None if node.metadata.deletion_timestamp.is_none() => without.push(node),
                None => {}
            }
        }
        self.synced = true;
        tracing::info!(
            in_use = self.assigned.len(),
            free = self.set.free(),
            waiting = without.len(),
            "node CIDRs synced"
        );
        self.queue.extend(without);
    }

    /// Starts patches for queued nodes while a worker is free.
    async fn start_queued(&mut self) {
        while self.patches.len() < UPDATE_WORKERS {
            let Some(node) = self.queue.pop_front() else {
                return;
            };
            self.allocate(node).await;
        }
    }

    /// A node was deleted: its block is freed (once its patch, if one is
    /// in flight, has finished).
    fn deleted(&mut self, node: &Node) {
        let name = name_of(node);
        self.queue
            .retain(|n| n.metadata.name.as_deref() != Some(name.as_str()));
        if let Some((_, gone)) = self.in_flight.get_mut(&name) {
            *gone = true;
        }
        if self.release(node) {
            self.retry_all_now();
        }
    }

    /// Marks `cidr` as `node`'s; one outside the cluster CIDR is left alone.
    fn occupy(&mut self, node: &str, cidr: Ipv4Cidr) {
        match self.set.occupy(&cidr) {
            Ok(()) => {
                if let Some(other) = self
                    .assigned
                    .iter()
                    .find(|(n, c)| n.as_str() != node && **c == cidr)
                    .map(|(n, _)| n.clone())
                {
                    tracing::warn!(node, other = %other, pod_cidr = %cidr, "two nodes hold the same podCIDR");
                }
                self.assigned.insert(node.to_string(), cidr);
            }
            Err(e) => tracing::warn!(
                node,
                pod_cidr = %cidr,
                error = %e,
                "node podCIDR is outside the cluster CIDR; left alone"
            ),
        }
    }

    async fn sync_node(&mut self, node: Node) {
        let name = name_of(&node);
        if node.metadata.deletion_timestamp.is_some() {
            if self.release(&node) {
                self.retry_all_now();
            }
            return;
        }
        match pod_cidr(&node) {
            Some(Ok(cidr)) => {
                self.pending.remove(&name);
                match self.assigned.get(&name).copied() {
                    Some(held) if held == cidr => {}
                    Some(held) => {
                        tracing::warn!(node = %name, was = %held, now = %cidr, "node podCIDR changed");
                        self.release_block(&name, held);
                        self.occupy(&name, cidr);
                    }
                    None => self.occupy(&name, cidr),
                }
            }
            Some(Err(text)) => {
                tracing::warn!(node = %name, pod_cidr = %text, "node has a podCIDR that does not parse; left alone")
            }
            None => {
                if self.assigned.contains_key(&name) || self.in_flight.contains_key(&name) {
                    // An event from before our own patch.
                    return;
                }
                if let Some(waiting) = self.pending.get_mut(&name) {
                    waiting.node = node;
                    return;
                }
                self.queue.push_back(node);
            }
        }
    }

    /// upstream's `AllocateOrOccupyCIDR` for a node without a CIDR.
    async fn allocate(&mut self, node: Node) {
        let name = name_of(&node);
        if self.assigned.contains_key(&name) || self.in_flight.contains_key(&name) {
            return;
        }
        let cidr = match self.set.allocate_next() {
            Ok(cidr) => cidr,
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "no CIDR for node");
                self.record(&node, "CIDRNotAvailable").await;
                self.retry_later(node);
                return;
            }
        };
        self.in_flight.insert(name, (cidr, false));
        self.patches
            .push(Box::pin(patch_cidr(self.api.clone(), node, cidr)));
    }

    /// A patch finished: the block is the node's, or free again.
    async fn patched(&mut self, done: Patched) {
        let Patched {
            node,
            cidr,
            outcome,
        } = done;
        let name = name_of(&node);
        let gone = self.in_flight.remove(&name).is_some_and(|(_, gone)| gone);
        match outcome {
            Outcome::Written if !gone => {
                tracing::info!(node = %name, pod_cidrs = %cidr, "set node PodCIDR");
                self.assigned.insert(name.clone(), cidr);
                self.pending.remove(&name);
            }
            Outcome::Written | Outcome::Gone => {
                // Deleted meanwhile.
                self.free_unless_held(cidr);
                self.pending.remove(&name);
                if gone {
                    self.retry_all_now();
                }
            }
            Outcome::Failed(e) => {
                tracing::warn!(error = %error_chain(&e), "failed to update node PodCIDR after multiple attempts");
                self.free_unless_held(cidr);
                self.record(&node, "CIDRAssignmentFailed").await;
                self.retry_later(node);
            }
        }
    }

    /// upstream's `RecordNodeStatusChange`: a Warning about the node.
    async fn record(&mut self, node: &Node, reason: &'static str) {
        let name = name_of(node);
        let message = format!("Node {name} status is now: {reason}");
        if let Err(source) = self.events.record(node, "Warning", reason, &message).await {
            let e = Error::Event {
                node: name,
                reason,
                source: Box::new(source),
            };
            tracing::warn!(error = %error_chain(&e), "event not recorded");
        }
    }

    /// Frees the block `node` held; `true` when one was freed.
    fn release(&mut self, node: &Node) -> bool {
        let name = name_of(node);
        self.pending.remove(&name);
        match self.assigned.remove(&name) {
            Some(cidr) => {
                self.release_block(&name, cidr);
                true
            }
            None => false,
        }
    }

    /// Frees `cidr`, once `node` no longer holds it, unless another node
    /// holds it too.
    fn release_block(&mut self, node: &str, cidr: Ipv4Cidr) {
        self.assigned.remove(node);
        if self.assigned.values().any(|c| *c == cidr) {
            return;
        }
        self.release_unassigned(cidr);
        tracing::info!(node, pod_cidr = %cidr, "released node CIDR");
    }

    fn release_unassigned(&mut self, cidr: Ipv4Cidr) {
        if let Err(e) = self.set.release(&cidr) {
            tracing::warn!(pod_cidr = %cidr, error = %e, "error when releasing CIDR");
        }
    }

    /// Frees `cidr` unless a node holds it (a node's watch event can come
    /// before the answer to the patch that wrote it).
    fn free_unless_held(&mut self, cidr: Ipv4Cidr) {
        let held = self.assigned.values().any(|c| *c == cidr)
            || self.in_flight.values().any(|(c, _)| *c == cidr);
        if !held {
            self.release_unassigned(cidr);
        }
    }

    fn retry_later(&mut self, node: Node) {
        let name = name_of(&node);
        let now = Instant::now();
        let (since, delay) = match self.pending.get(&name) {
            Some(r) => (r.since, (r.delay * 2).min(MAX_RETRY)),
            None => (now, FIRST_RETRY),
        };
        self.pending.insert(
            name,
            Retry {
                node,
                since,
                at: now + delay,
                delay,
            },
        );
    }

    /// A block was freed: every waiting node may try now.
    fn retry_all_now(&mut self) {
        let now = Instant::now();
        for r in self.pending.values_mut() {
            r.at = now;
        }
    }

    /// The next retry of a waiting node whose patch is not in flight.
    fn next_retry(&self) -> Option<Instant> {
        self.pending
            .iter()
            .filter(|(name, _)| !self.in_flight.contains_key(*name))
            .map(|(_, r)| r.at)
            .min()
    }

    /// Tries the waiting nodes that are due, oldest first.
    async fn retry_due(&mut self) {
        let now = Instant::now();
        let mut due: Vec<(Instant, String)> = self
            .pending
            .iter()
            .filter(|(name, r)| r.at <= now && !self.in_flight.contains_key(*name))
            .map(|(name, r)| (r.since, name.clone()))
            .collect();
        due.sort();
        for (_, name) in due {
            if let Some(node) = self.pending.get(&name).map(|r| r.node.clone()) {
                self.allocate(node).await;
            }
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Starts node IPAM in a controller manager (off without a cluster CIDR).
pub(crate) fn start(
    ctx: crate::context::Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let Some(cidr) = ctx.config.cluster_cidr.clone() else {
            return;
        };
        match NodeIpam::new(&cidr, ctx.config.node_cidr_mask_size) {
            Ok(ipam) => {
                if let Err(e) = ipam.run(ctx.client, shutdown).await {
                    tracing::warn!(error = %e, "node IPAM stopped with an error");
                }
            }
            Err(e) => tracing::error!(error = %e, cidr, "node IPAM: unusable --cluster-cidr"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    #[test]
    fn new_checks_the_cidr_and_mask() {
        let ipam = NodeIpam::new("10.244.0.0/16", 24).expect("ipam");
        assert_eq!(ipam.cluster_cidr().to_string(), "10.244.0.0/16");
        assert_eq!(ipam.node_mask(), 24);
        let chain = |r: Result<NodeIpam>| r.map_err(|e| error_chain(&e)).err();
        assert_eq!(
            chain(NodeIpam::new("10.244.0.0", 24)).as_deref(),
            Some(
                "invalid cluster CIDR: invalid CIDR \"10.244.0.0\": expected an IPv4 address \
                 and a prefix length, like 10.244.0.0/16"
            )
        );
        assert_eq!(
            chain(NodeIpam::new("10.244.0.0/16", 8)).as_deref(),
            Some(
                "invalid node CIDR mask size for cluster CIDR 10.244.0.0/16: node CIDR mask size 8 \
                 is smaller than the mask size of the cluster CIDR 10.244.0.0/16 (the node mask \
                 size must be at least 16)"
            )
        );
    }

    #[test]
    fn pod_cidr_prefers_the_list() {
        let mut node = Node::default();
        assert_eq!(pod_cidr(&node), None);
        node.spec = Some(NodeSpec {
            pod_cidr: Some("10.0.1.0/24".into()),
            ..Default::default()
        });
        assert_eq!(
            pod_cidr(&node),
            Some(Ok("10.0.1.0/24".parse().expect("cidr")))
        );
        node.spec = Some(NodeSpec {
            pod_cidr: Some("10.0.1.0/24".into()),
            pod_cidrs: Some(vec!["10.0.2.0/24".into()]),
            ..Default::default()
        });
        assert_eq!(
            pod_cidr(&node),
            Some(Ok("10.0.2.0/24".parse().expect("cidr")))
        );
        node.spec = Some(NodeSpec {
            pod_cidr: Some("garbage".into()),
            ..Default::default()
        });
        assert_eq!(pod_cidr(&node), Some(Err("garbage".into())));
    }
}
