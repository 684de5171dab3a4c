//! The service proxy (kube-proxy's nftables mode) of one node: it follows
//! Services and EndpointSlices through the shared informers and keeps one
//! nftables table of its own in step, so that ClusterIPs, node ports,
//! load balancer and external IPs reach the Services' endpoints.
//!
//! [`model`] says what to route (upstream's endpoint categorization),
//! [`rules`] how, in nft syntax, [`sync`] what changed since the last
//! batch and [`nft`] applies batches. [`run`] wires them to the informers
//! until shutdown, then removes the table.
//!
//! Why `nft -f` batches rather than a netlink crate: a batch is one kernel
//! transaction (all or nothing, so a partial update is never live), nft
//! validates the text and reports errors in its own words, and it is what
//! upstream's knftables does; the netlink crates for nftables (rustables,
//! nftnl) are thin, little-used, or bind libnftnl through C.
//!
//! It must not write to the API.

pub mod model;
pub mod nft;
pub mod rules;
pub mod sync;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use skiff_client::informer::{Change, Informers};
use tokio_util::sync::CancellationToken;

pub use crate::nft::{Nft, NftCommand};
use crate::rules::Skeleton;
use crate::sync::Proxier;

/// How the proxy runs on a node.
#[derive(Debug, Clone)]
pub struct Config {
    pub node_name: String,
    /// The nftables table (family ip) this proxy owns.
    pub table: String,
    /// Where node ports and load balancer IPs answer (loopback is left
    /// out, as upstream's nftables mode).
    pub node_ips: Vec<Ipv4Addr>,
    /// The pod network; pod traffic to a ClusterIP is not masqueraded.
    pub cluster_cidr: Option<String>,
    /// The Service range; unallocated ClusterIPs are dropped.
    pub service_cidr: Option<String>,
}

impl Config {
    /// The table of the node whose pod bridge is `bridge`: `skiff` for
    /// the default bridge, `skiff-BRIDGE` for others (nodes sharing a
    /// host keep apart).
    pub fn table_for_bridge(bridge: &str) -> String {
        if bridge == "skiff0" {
            "skiff".into()
        } else {
            format!("skiff-{bridge}")
        }
    }

    fn skeleton(&self) -> Skeleton {
        Skeleton {
            table: self.table.clone(),
            node_ips: self
                .node_ips
                .iter()
                .copied()
                .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
                .collect(),
            cluster_cidr: self.cluster_cidr.clone(),
            service_cidr: self.service_cidr.clone(),
        }
    }
}

/// How long to wait before rebuilding after nft refused a batch, the
/// first time; doubled at each failure in a row, up to [`MAX_RETRY`].
const RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Programs the node until `shutdown`, then removes the table.
pub async fn run(
    config: Config,
    informers: Informers,
    nft: Arc<dyn Nft>,
    shutdown: CancellationToken,
) {
    let services = informers.get::<Service>();
    let slices = informers.get::<EndpointSlice>();
    tokio::select! {
        _ = shutdown.cancelled() => return,
        _ = async { services.ready().await; slices.ready().await } => {}
    }
    let mut proxier = Proxier::new(config.skeleton(), &config.node_name);
    let mut service_changes = Box::pin(services.changes());
    let mut slice_changes = Box::pin(slices.changes());
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut retry = RETRY;
    loop {
        // Take every change that is already waiting, then sync once.
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(c) = service_changes.next() => on_service(&mut proxier, &services, c),
            Some(c) = slice_changes.next() => on_slice(&mut proxier, &slices, c),
            _ = async {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => retry_at = None,
            // Flushed chains to delete.
            _ = async {
                match proxier.next_cleanup() {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
        loop {
            let mut more = false;
            if let Some(Some(c)) = service_changes.next().now_or_never() {
                on_service(&mut proxier, &services, c);
                more = true;
            }
            if let Some(Some(c)) = slice_changes.next().now_or_never() {
                on_slice(&mut proxier, &slices, c);
                more = true;
            }
            if !more {
                break;
            }
        }
        if retry_at.is_some() {
            continue;
        }
        if let Some(plan) = proxier.plan() {
            let started = Instant::now();
            let script = plan.script.clone();
            let nft2 = nft.clone();
            let applied = tokio::task::spawn_blocking(move || nft2.apply(&script)).await;
            match applied {
                Ok(Ok(())) => {
                    tracing::debug!(
                        table = %config.table,
                        services = plan.services,
                        elapsed = ?started.elapsed(),
                        "synced"
                    );
                    proxier.commit(plan);
                    retry = RETRY;
                }
                Ok(Err(e)) => {
                    tracing::warn!(table = %config.table, error = %e, "nft refused a sync; rebuilding the table");
                    tracing::debug!(script = %plan.script, "the refused batch");
                    proxier.fail();
                    retry_at = Some(tokio::time::Instant::now() + retry);
                    retry = (retry * 2).min(MAX_RETRY);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the nft task failed");
                    proxier.fail();
                    retry_at = Some(tokio::time::Instant::now() + retry);
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        }
    }
    let table = config.table.clone();
    let removed = tokio::task::spawn_blocking(move || nft.delete_table(&table)).await;
    if let Ok(Err(e)) = removed {
        tracing::warn!(table = %config.table, error = %e, "cannot remove the proxy's table");
    }
}

fn on_service(
    p: &mut Proxier,
    informer: &skiff_client::informer::Informer<Service>,
    c: Change<Service>,
) {
    match c {
        Change::Applied(s) => p.apply_service(s),
        Change::Deleted(s) => p.delete_service(&s),
        Change::Resync => p.replace_services(informer.store().state()),
    }
}

fn on_slice(
    p: &mut Proxier,
    informer: &skiff_client::informer::Informer<EndpointSlice>,
    c: Change<EndpointSlice>,
) {
    match c {
        Change::Applied(s) => p.apply_slice(s),
        Change::Deleted(s) => p.delete_slice(&s),
        Change::Resync => p.replace_slices(informer.store().state()),
    }
}
