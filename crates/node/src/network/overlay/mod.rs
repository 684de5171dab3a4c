//! The pod network across nodes, built in (issue [multinode]): flannel's
//! `vxlan` backend by default, `host-gw` for nodes on one link, or none.
//!
//! Each node publishes its backend, its public address and (vxlan) its
//! VTEP's MAC as annotations on its own Node; every node follows the Node
//! watch and keeps a route, an ARP and a forwarding entry per peer's
//! podCIDR ([`plan`]), removing those of nodes that left. The VXLAN device
//! is made only once a peer exists, so a single node changes nothing on
//! its host; its MTU is the underlay's less VXLAN's 50 bytes, which the
//! CNI config gives the pods too. Pod traffic between podCIDRs is routed,
//! not masqueraded: the sync hands the peers' podCIDRs to the CNI config's
//! masquerade rules.
//!
//! A node's claims are checked before they are routed (a node writes its
//! own Node, so a compromised one could claim another's podCIDR or MAC:
//! see [`plan::candidates`]), and a failing `ip` leaves the entries as
//! they are rather than remove them.
//!
//! This module owns the sync loop; [`plan`] decides, [`links`] touches the
//! kernel. It does not write the CNI config itself.

pub mod links;
pub mod plan;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use skiff_client::informer::Informer;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use links::{Links, Vxlan};
use plan::{Backend, Own};

/// Errors of the overlay's kernel side.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{command}` failed: {message}")]
    Command { command: String, message: String },
    #[error("no interface has the node's address {0}")]
    NoUnderlay(Ipv4Addr),
}

/// How this node takes part.
#[derive(Debug, Clone)]
pub struct Settings {
    pub backend: Backend,
    pub node_name: String,
    /// The address peers send this node's pod traffic to.
    pub public_ip: Ipv4Addr,
    pub device: String,
    pub vni: u32,
    pub port: u16,
    /// The pod network, if known: peers' podCIDRs must lie in it.
    pub cluster_cidr: Option<plan::Cidr>,
    /// How often the kernel's entries are checked without a Node change.
    pub resync: Duration,
}

/// What one sync found and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Synced {
    /// The annotations to merge into the own Node, if any differ.
    pub patch: Option<serde_json::Value>,
    /// The podCIDRs reached through the overlay (not masqueraded); `None`
    /// when this sync left the entries as they were (a step before them
    /// failed), so the last known set stands.
    pub peer_cidrs: Option<Vec<String>>,
    /// Steps that failed (logged; the next sync tries again).
    pub failed: Vec<String>,
}

/// The MTU pods should get, if the backend needs one: the underlay's
/// less the encapsulation (none on loopback, where no peer can be).
pub fn pod_mtu(settings: &Settings, links: &dyn Links) -> Option<u32> {
    if settings.backend != Backend::Vxlan {
        return None;
    }
    match links.underlay(settings.public_ip) {
        Ok(u) if !u.loopback => Some(plan::vxlan_mtu(u.mtu)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "cannot find the overlay's underlay");
            None
        }
    }
}

/// One pass: the device if a peer needs it, the entries, and what to
/// publish. Runs commands (call it off the async threads).
///
/// The entries are only changed when what they depend on is known: if
/// the underlay or the VXLAN device cannot be read or made, the sync
/// stops there (and is retried) rather than remove every peer's route.
pub fn sync_once(settings: &Settings, links: &dyn Links, nodes: &[Arc<Node>]) -> Synced {
    let mut out = Synced::default();
    let own = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(&settings.node_name))
        .map(|n| Own {
            pod_cidr: n
                .spec
                .as_ref()
                .and_then(|s| s.pod_cidr.as_deref())
                .and_then(plan::Cidr::parse),
            annotations: n.metadata.annotations.clone().unwrap_or_default(),
        });
    let me = plan::Me {
        name: &settings.node_name,
        ip: settings.public_ip,
        pod_cidr: own.as_ref().and_then(|o| o.pod_cidr),
        cluster_cidr: settings.cluster_cidr,
    };
    let all = || nodes.iter().map(|n| n.as_ref());
    let backend = settings.backend;
    let candidates = plan::candidates(all(), &me, backend);
    let underlay = match links.underlay(settings.public_ip) {
        Ok(u) => Some(u),
        Err(e) => {
            out.failed.push(e.to_string());
            None
        }
    };
    let mut mac = None;
    if let (Backend::Vxlan, false, Some(own), Some(underlay)) =
        (backend, candidates.is_empty(), &own, &underlay)
    {
        if let Some(cidr) = own.pod_cidr {
            let spec = Vxlan {
                device: settings.device.clone(),
                vni: settings.vni,
                port: settings.port,
                local: settings.public_ip,
                underlay: underlay.device.clone(),
                mtu: plan::vxlan_mtu(underlay.mtu),
                address: cidr.network,
            };
            match links.ensure_vxlan(&spec) {
                Ok(m) => mac = Some(m),
                Err(e) => out.failed.push(e.to_string()),
            }
        }
    }
    if let Some(own) = &own {
        if backend != Backend::None {
            let wanted =
                plan::own_annotations(backend, settings.public_ip, settings.vni, mac.as_deref());
            out.patch = plan::annotation_patch(own, &wanted);
        }
    }
    let peers = match backend {
        Backend::HostGw if own.is_some() => plan::peers(all(), &me, backend, None),
        Backend::Vxlan if mac.is_some() => plan::peers(all(), &me, backend, mac.as_deref()),
        // No candidate: whatever is left of earlier peers goes.
        Backend::Vxlan if candidates.is_empty() => vec![],
        // Peers but no device (it failed, or this node has no podCIDR
        // or underlay yet), or this node's own Node not seen: keep the
        // entries as they are.
        Backend::Vxlan | Backend::HostGw | Backend::None => return out,
    };
    let mut devices = vec![settings.device.as_str()];
    if let Some(u) = &underlay {
        devices.push(u.device.as_str());
    }
    match links.observe(&devices, &settings.device) {
        Ok(observed) => {
            for step in plan::steps(backend, &settings.device, &peers, &observed) {
                if let Err(e) = links.apply(&settings.device, &step) {
                    out.failed.push(format!("{step:?}: {e}"));
                }
            }
        }
        Err(e) => {
            out.failed.push(e.to_string());
            return out;
        }
    }
    out.peer_cidrs = Some(peers.iter().map(|p| p.pod_cidr.to_string()).collect());
    out
}

/// Whether the loop syncs now: when what the overlay reads of the Nodes
/// changed since the last sync (`last`), or when `due` (the resync, or
/// the retry after a failure).
pub fn sync_needed(last: Option<u64>, now: u64, due: bool) -> bool {
    due || last != Some(now)
}

/// Follows the Node watch until `shutdown`, syncing when a field the
/// overlay reads changed ([`plan::fingerprint`]: not on the status
/// updates every node makes) and every [`Settings::resync`]; the peers'
/// podCIDRs go to `peer_cidrs`.
pub async fn run(
    settings: Settings,
    links: Arc<dyn Links>,
    nodes: Informer<Node>,
    api: Api<Node>,
    peer_cidrs: watch::Sender<Vec<String>>,
    shutdown: CancellationToken,
) {
    if settings.backend == Backend::None {
        return;
    }
    let mut changes = Box::pin(nodes.changes());
    tokio::select! {
        _ = shutdown.cancelled() => return,
        _ = nodes.ready() => {}
    }
    // What the Nodes looked like at the last sync, and when the next is
    // due regardless: every Node update (each node's status, its
    // conditions, images) wakes the loop, and only one that changed a
    // field the overlay reads costs a sync.
    let mut last: Option<u64> = None;
    let mut due = tokio::time::Instant::now();
    loop {
        let state = nodes.store().state();
        let fingerprint = plan::fingerprint(state.iter().map(|n| n.as_ref()));
        if sync_needed(last, fingerprint, tokio::time::Instant::now() >= due) {
            last = Some(fingerprint);
            let (s, l) = (settings.clone(), links.clone());
            let synced = match tokio::task::spawn_blocking(move || {
                sync_once(&s, l.as_ref(), &state)
            })
            .await
            {
                Ok(synced) => synced,
                Err(e) => {
                    tracing::warn!(error = %e, "the overlay sync stopped");
                    Synced {
                        failed: vec![e.to_string()],
                        ..Synced::default()
                    }
                }
            };
            for failure in &synced.failed {
                tracing::warn!(error = %failure, "overlay entry not synced");
            }
            if let Some(patch) = &synced.patch {
                if let Err(e) = api
                    .patch(
                        &settings.node_name,
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                {
                    tracing::warn!(error = %e, "cannot publish the node's overlay annotations");
                }
            }
            if let Some(cidrs) = synced.peer_cidrs {
                peer_cidrs.send_if_modified(|old| {
                    let changed = *old != cidrs;
                    if changed {
                        tracing::info!(peers = ?cidrs, "overlay peers");
                        *old = cidrs;
                    }
                    changed
                });
            }
            // A failed step is retried soon; otherwise at the resync.
            let wait = if synced.failed.is_empty() && synced.patch.is_none() {
                settings.resync
            } else {
                settings.resync.min(Duration::from_secs(2))
            };
            due = tokio::time::Instant::now() + wait;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            change = changes.next() => if change.is_none() { return },
            _ = tokio::time::sleep_until(due) => {}
        }
        // Changes arriving together are one look.
        while let Some(Some(_)) = futures::FutureExt::now_or_never(changes.next()) {}
    }
}

#[cfg(test)]
mod tests;
