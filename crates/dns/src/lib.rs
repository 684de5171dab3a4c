//! Skiff's cluster DNS, built into the node agent: CoreDNS's `kubernetes`
//! plugin (with `pods insecure`), `forward . /etc/resolv.conf` and
//! `cache 30` in one small server. Cluster names are answered from an
//! in-memory index that the Service and EndpointSlice informers keep up
//! to date (never an API call per query); other names go to the host's
//! resolvers.
//!
//! This file owns the configuration, the shared handle on the index and
//! [`run`], which ties informers, index and server together. The index is
//! [`Records`] (records.rs), the query path answer.rs and wire.rs, the
//! sockets server.rs, forwarding forward.rs, following the informers
//! follow.rs. Nothing here answers queries or touches sockets itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use skiff_client::informer::Informers;
use tokio_util::sync::CancellationToken;

mod answer;
mod external;
mod follow;
mod forward;
mod records;
mod server;
mod wire;

pub use records::{Lookup, Records};
pub use server::{bind, Bound, Error as ServerError};

/// Why [`run`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid cluster domain {domain:?}")]
    ClusterDomain {
        domain: String,
        #[source]
        source: hickory_proto::ProtoError,
    },
    #[error("cannot start the DNS server")]
    Server(#[from] server::Error),
}

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen, UDP and TCP on each (e.g. the node's pod-bridge
    /// gateway 10.42.0.1:53). Bound with IP_FREEBIND so the address may
    /// not exist yet (the bridge appears with the first pod). Port 0
    /// picks one ([`Bound::local_addrs`] tells which).
    pub listen: Vec<SocketAddr>,
    /// e.g. "cluster.local"
    pub cluster_domain: String,
    /// Resolvers for names outside the cluster domain (the host's
    /// resolv.conf nameservers, port 53); empty: such names are answered
    /// SERVFAIL.
    pub upstreams: Vec<SocketAddr>,
    /// Cap on cached forwarded answers' TTL (30 s as k3s's Corefile
    /// `cache 30`).
    pub cache_ttl: Duration,
    /// TTL of cluster records (5 s, as CoreDNS's kubernetes plugin
    /// default `ttl 5`).
    pub record_ttl: u32,
    /// UDP worker sockets (SO_REUSEPORT) per listen address; default 1.
    pub workers: usize,
}

impl Config {
    /// Listening on `listen` for `cluster_domain`, no upstreams, the
    /// default TTLs and one worker.
    pub fn new(listen: Vec<SocketAddr>, cluster_domain: &str) -> Self {
        Self {
            listen,
            cluster_domain: cluster_domain.to_owned(),
            upstreams: Vec::new(),
            cache_ttl: Duration::from_secs(30),
            record_ttl: 5,
            workers: 1,
        }
    }
}

/// Parses the host's resolv.conf `nameserver` lines into upstream
/// addresses (port 53), skipping those in `exclude` (our own listen IPs,
/// to avoid loops) and link-local IPv6 ones with a zone (`%eth0`), which
/// need an interface index.
pub fn upstreams_from_resolv_conf(text: &str, exclude: &[IpAddr]) -> Vec<SocketAddr> {
    let mut upstreams = Vec::new();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut words = line.split_whitespace();
        if words.next() != Some("nameserver") {
            continue;
        }
        let Some(Ok(ip)) = words.next().map(str::parse::<IpAddr>) else {
            continue;
        };
        let addr = SocketAddr::new(ip, 53);
        if !exclude.contains(&ip) && !upstreams.contains(&addr) {
            upstreams.push(addr);
        }
    }
    upstreams
}

/// The index shared by the informer task (writer) and the query loops
/// (readers). Readers hold the lock for one answer; writers for one
/// small batch of changes, and a resync builds a new index outside the
/// lock and swaps it in.
#[derive(Debug, Clone)]
pub struct SharedRecords {
    inner: Arc<RwLock<Records>>,
}

impl SharedRecords {
    pub fn new(records: Records) -> Self {
        Self {
            inner: Arc::new(RwLock::new(records)),
        }
    }

    /// Reads the index (do not hold it across an await).
    pub fn read(&self) -> RwLockReadGuard<'_, Records> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the index in place.
    pub fn write(&self) -> RwLockWriteGuard<'_, Records> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps in a whole new index; the old one is dropped after the lock
    /// is released.
    pub fn replace(&self, records: Records) {
        let old = std::mem::replace(&mut *self.write(), records);
        drop(old);
    }
}

/// Serves until `shutdown`: binds the listeners, follows the Service and
/// EndpointSlice informers into the index, answers queries (names in the
/// zone are SERVFAIL until both informers have listed; forwarding works
/// from the start). Returns an error if a listen address cannot be bound.
pub async fn run(
    config: Config,
    informers: Informers,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let mut records =
        Records::try_new(&config.cluster_domain, config.record_ttl).map_err(|source| {
            Error::ClusterDomain {
                domain: config.cluster_domain.clone(),
                source,
            }
        })?;
    records.set_ready(false);
    let bound = bind(&config).await?;
    let records = SharedRecords::new(records);
    let follower = tokio::spawn(follow::follow(
        informers,
        records.clone(),
        config.cluster_domain.clone(),
        config.record_ttl,
        shutdown.clone(),
    ));
    bound.serve(records, shutdown).await;
    if let Err(e) = follower.await {
        tracing::warn!(error = %e, "DNS informer task failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers_become_upstreams() {
        let text = "# generated\nsearch example.com\nnameserver 10.0.0.2\nnameserver 10.42.0.1 # ours\n\
                    nameserver fe80::1%eth0\nnameserver 2001:db8::53\nnameserver 10.0.0.2\noptions ndots:2\n";
        let ours: IpAddr = "10.42.0.1".parse().unwrap();
        assert_eq!(
            upstreams_from_resolv_conf(text, &[ours]),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[2001:db8::53]:53".parse().unwrap()
            ]
        );
    }

    #[test]
    fn config_defaults() {
        let config = Config::new(vec!["10.42.0.1:53".parse().unwrap()], "cluster.local");
        assert_eq!(config.cache_ttl, Duration::from_secs(30));
        assert_eq!(config.record_ttl, 5);
        assert_eq!(config.workers, 1);
        assert!(config.upstreams.is_empty());
    }
}
