//! The lease endpoint reconciler (kube-apiserver's
//! `--endpoint-reconciler-type=lease`, its default): every API server of
//! the cluster keeps a lease key in the store, `/registry/masterleases/
//! <ip>:<port>`, refreshed every [`REFRESH_EVERY`] and live for
//! [`LEASE_TTL`]; each refresh rewrites the `kubernetes` Endpoints in
//! `default` (and its EndpointSlices) from the set of live leases, so it
//! lists every live server, not the last one that wrote it. A server
//! removes its own lease on a clean stop and rewrites the endpoints
//! without itself; one that dies drops out when its lease expires.
//!
//! Differences from upstream, on purpose: the store has no TTL keys, so a
//! lease's value carries its expiry time (wall clock, milliseconds since
//! the epoch; servers' clocks are assumed close, as they are for every
//! timestamp) and expired leases are treated as gone and deleted by
//! whichever server sees them. Leases are keyed by address *and* port,
//! because servers on one machine (the tests) share an address; servers
//! with different ports go into different subsets (an Endpoints subset
//! has one port list) and different EndpointSlices (`kubernetes` for the
//! first port, `kubernetes-<port>` for the others).
//!
//! This module owns the leases and those objects' `subsets`/`endpoints`;
//! the `kubernetes` Service itself is [`super::services`]'.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use skiff_store::{ListOptions, Store};
use tokio_util::sync::CancellationToken;

use crate::object;
use crate::resources;

/// Where the leases live (upstream's `/registry/masterleases/`).
pub const LEASE_PREFIX: &str = "/registry/masterleases/";
/// How long a lease lives without a refresh (upstream: 15 s).
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often a server refreshes its lease (upstream: 10 s).
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// How long a stopping server tries to remove its lease.
const REMOVE_WITHIN: Duration = Duration::from_secs(5);

/// The Endpoints' and the slices' port name.
const PORT_NAME: &str = "https";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the API server lease {key}")]
    Lease {
        key: String,
        #[source]
        source: skiff_store::Error,
    },
    #[error("removing the API server lease {key} took more than {after:?}")]
    RemoveTimedOut { key: String, after: Duration },
    #[error("listing the API server leases")]
    List {
        #[source]
        source: skiff_store::Error,
    },
    #[error("the kubernetes {what}")]
    Endpoints {
        what: String,
        #[source]
        source: skiff_store::Error,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

/// One API server: the address and port clients reach it at.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Member {
    pub ip: String,
    pub port: u16,
}

impl Member {
    /// From `host:port` (the advertised address); 6443 when no port.
    pub fn parse(advertise: &str) -> Self {
        let (ip, port) = super::services::split_advertise(advertise);
        Self { ip, port }
    }

    pub fn key(&self) -> String {
        format!("{LEASE_PREFIX}{}:{}", self.ip, self.port)
    }
}

/// A lease's value.
#[derive(Debug, Serialize, Deserialize)]
struct Lease {
    #[serde(flatten)]
    member: Member,
    /// Milliseconds since the epoch after which the lease is gone.
    #[serde(rename = "expiresMs")]
    expires_ms: i64,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The members of the live leases among `leases` (key, revision, value)
/// at `now_ms`, sorted, and the expired ones (key, revision) to delete.
fn partition(leases: &[(String, i64, Vec<u8>)], now_ms: i64) -> (Vec<Member>, Vec<(String, i64)>) {
    let mut live = Vec::new();
    let mut expired = Vec::new();
    for (key, revision, value) in leases {
        match serde_json::from_slice::<Lease>(value) {
            Ok(lease) if lease.expires_ms > now_ms => live.push(lease.member),
            // Expired, or not a lease we can read: gone.
            _ => expired.push((key.clone(), *revision)),
        }
    }
    live.sort();
    live.dedup();
    (live, expired)
}

/// The servers grouped by port, ports ascending, addresses sorted.
fn by_port(members: &[Member]) -> BTreeMap<u16, Vec<String>> {
    let mut out: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for m in members {
        out.entry(m.port).or_default().push(m.ip.clone());
    }
    for ips in out.values_mut() {
        ips.sort();
        ips.dedup();
    }
    out
}

fn ports(port: u16) -> Value {
    json!([{"name": PORT_NAME, "port": port, "protocol": "TCP"}])
}

/// The Endpoints' subsets for `members`: one per distinct port.
pub fn subsets(members: &[Member]) -> Value {
    Value::Array(
        by_port(members)
            .into_iter()
            .map(|(port, ips)| {
                let addresses: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
                json!({"addresses": addresses, "ports": ports(port)})
            })
            .collect(),
    )
}

/// The EndpointSlices for `members` (name, endpoints, ports): one per
/// distinct port, `kubernetes` first.
fn slices(members: &[Member]) -> Vec<(String, Value, Value)> {
    by_port(members)
        .into_iter()
        .enumerate()
        .map(|(i, (port, ips))| {
            let name = if i == 0 {
                "kubernetes".to_string()
            } else {
                format!("kubernetes-{port}")
            };
            let endpoints: Vec<Value> = ips
                .iter()
                .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
                .collect();
            (name, Value::Array(endpoints), ports(port))
        })
        .collect()
}

/// Keeps this server's lease and the `kubernetes` endpoints.
#[derive(Clone)]
pub struct EndpointReconciler {
    store: Arc<dyn Store>,
    me: Member,
    ttl: Duration,
    every: Duration,
}

impl std::fmt::Debug for EndpointReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointReconciler")
            .field("me", &self.me)
            .field("ttl", &self.ttl)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

impl EndpointReconciler {
    pub fn new(store: Arc<dyn Store>, me: Member) -> Self {
        Self {
            store,
            me,
            ttl: LEASE_TTL,
            every: REFRESH_EVERY,
        }
    }

    /// Another TTL and refresh period (tests).
    pub fn with_timing(mut self, ttl: Duration, every: Duration) -> Self {
        self.ttl = ttl;
        self.every = every;
        self
    }

    /// Refreshes this server's lease, then rewrites the endpoints from
    /// the live leases (upstream's `ReconcileAPIServerEndpoints`).
    pub async fn reconcile(&self) -> Result<Vec<Member>> {
        self.update_lease().await?;
        self.reconcile_endpoints().await
    }

    /// Removes this server's lease and rewrites the endpoints without it
    /// (upstream's `RemoveEndpoints`, on a clean stop).
    pub async fn remove(&self) -> Result<Vec<Member>> {
        let key = self.me.key();
        match self.store.delete(&key, None).await {
            Ok(_) | Err(skiff_store::Error::NotFound { .. }) => {}
            Err(source) => return Err(Error::Lease { key, source }),
        }
        self.reconcile_endpoints().await
    }

    /// Reconciles every period until `shutdown`, then removes the lease.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "reconciling the kubernetes endpoints; retrying");
            }
        }
        // A store that cannot be reached does not hold the stop up: the
        // lease then expires.
        let removed = tokio::time::timeout(REMOVE_WITHIN, self.remove()).await;
        match removed.unwrap_or_else(|_| {
            Err(Error::RemoveTimedOut {
                key: self.me.key(),
                after: REMOVE_WITHIN,
            })
        }) {
            Ok(left) => {
                tracing::info!(server = %format!("{}:{}", self.me.ip, self.me.port), remaining = left.len(), "removed this API server from the kubernetes endpoints")
            }
            Err(e) => {
                tracing::warn!(error = %e, source = ?std::error::Error::source(&e), "removing this API server's lease")
            }
        }
    }

    async fn update_lease(&self) -> Result<()> {
        let key = self.me.key();
        let lease = Lease {
            member: self.me.clone(),
            expires_ms: now_ms() + i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX / 2),
        };
        let bytes: bytes::Bytes = serde_json::to_vec(&lease).unwrap_or_default().into();
        let failed = |source| Error::Lease {
            key: key.clone(),
            source,
        };
        match self.store.get(&key).await {
            Ok(kv) => match self.store.update(&key, bytes, kv.mod_revision).await {
                // Someone else (a restarted process on the same address)
                // refreshed it meanwhile: it is fresh either way.
                Ok(_) | Err(skiff_store::Error::Conflict { .. }) => Ok(()),
                Err(e) => Err(failed(e)),
            },
            Err(skiff_store::Error::NotFound { .. }) => {
                match self.store.create(&key, bytes).await {
                    Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => Ok(()),
                    Err(e) => Err(failed(e)),
                }
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// The live members, with the expired leases deleted.
    pub async fn live(&self) -> Result<Vec<Member>> {
        let mut leases = Vec::new();
        let mut opts = ListOptions::default();
        loop {
            let page = self
                .store
                .list(LEASE_PREFIX, opts.clone())
                .await
                .map_err(|source| Error::List { source })?;
            leases.extend(
                page.items
                    .into_iter()
                    .map(|kv| (kv.key, kv.mod_revision, kv.value.to_vec())),
            );
            match page.continue_token {
                Some(token) => {
                    opts.continue_token = Some(token);
                    opts.revision = Some(page.revision);
                }
                None => break,
            }
        }
        let (live, expired) = partition(&leases, now_ms());
        for (key, revision) in expired {
            // Only the expired version: a refresh meanwhile wins.
            match self.store.delete(&key, Some(revision)).await {
                Ok(_) => tracing::info!(lease = %key, "an API server's lease expired"),
                Err(skiff_store::Error::NotFound { .. } | skiff_store::Error::Conflict { .. }) => {}
                Err(source) => return Err(Error::Lease { key, source }),
            }
        }
        Ok(live)
    }

    async fn reconcile_endpoints(&self) -> Result<Vec<Member>> {
        let live = self.live().await?;
        if live.is_empty() {
            // As upstream: never erase every endpoint (the last server
            // stopping leaves itself listed).
            return Ok(live);
        }
        self.write_endpoints(&live).await?;
        self.write_slices(&live).await?;
        Ok(live)
    }

    async fn write_endpoints(&self, live: &[Member]) -> Result<()> {
        let Some(r) = resources::find_builtin("", "v1", "endpoints") else {
            return Ok(());
        };
        let want = subsets(live);
        let body = json!({
            "kind": "Endpoints",
            "apiVersion": "v1",
            "metadata": super::services::meta("kubernetes", Some("default"),
                json!({"endpointslice.kubernetes.io/skip-mirror": "true"})),
            "subsets": want.clone(),
        });
        super::services::ensure(
            self.store.as_ref(),
            &object::key(r, Some("default"), "kubernetes"),
            body,
            |cur| cur.get("subsets") != Some(&want),
        )
        .await
        .map_err(|source| Error::Endpoints {
            what: "Endpoints".into(),
            source,
        })
    }

    async fn write_slices(&self, live: &[Member]) -> Result<()> {
        let Some(r) = resources::find_builtin("discovery.k8s.io", "v1", "endpointslices") else {
            return Ok(());
        };
        let failed = |name: &str, source| Error::Endpoints {
            what: format!("EndpointSlice {name}"),
            source,
        };
        let wanted = slices(live);
        for (name, endpoints, ports) in &wanted {
            let body = json!({
                "kind": "EndpointSlice",
                "apiVersion": "discovery.k8s.io/v1",
                "metadata": super::services::meta(name, Some("default"),
                    json!({"kubernetes.io/service-name": "kubernetes"})),
                "addressType": "IPv4",
                "endpoints": endpoints.clone(),
                "ports": ports.clone(),
            });
            super::services::ensure(
                self.store.as_ref(),
                &object::key(r, Some("default"), name),
                body,
                |cur| cur.get("endpoints") != Some(endpoints) || cur.get("ports") != Some(ports),
            )
            .await
            .map_err(|e| failed(name, e))?;
        }
        // The extra slices of ports no live server has any more.
        let page = self
            .store
            .list(&object::prefix(r, Some("default")), ListOptions::default())
            .await
            .map_err(|e| failed("list", e))?;
        for kv in page.items {
            let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let name = object::name_of(&obj).unwrap_or_default();
            let ours = name.starts_with("kubernetes-")
                && obj
                    .pointer("/metadata/labels/kubernetes.io~1service-name")
                    .and_then(Value::as_str)
                    == Some("kubernetes")
                && obj
                    .pointer("/metadata/labels/endpointslice.kubernetes.io~1managed-by")
                    .is_none();
            if ours && !wanted.iter().any(|(n, _, _)| n == name) {
                match self.store.delete(&kv.key, Some(kv.mod_revision)).await {
                    Ok(_)
                    | Err(
                        skiff_store::Error::NotFound { .. } | skiff_store::Error::Conflict { .. },
                    ) => {}
                    Err(e) => return Err(failed(name, e)),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ip: &str, port: u16) -> Member {
        Member {
            ip: ip.into(),
            port,
        }
    }

    fn lease(member: Member, expires_ms: i64) -> Vec<u8> {
        serde_json::to_vec(&Lease { member, expires_ms }).unwrap()
    }

    #[test]
    fn expired_and_unreadable_leases_are_gone() {
        let leases = vec![
            ("a".into(), 1, lease(m("10.0.0.2", 6443), 2_000)),
            ("b".into(), 2, lease(m("10.0.0.1", 6443), 1_000)),
            ("c".into(), 3, b"junk".to_vec()),
            ("d".into(), 4, lease(m("10.0.0.3", 6443), 5_000)),
        ];
        let (live, expired) = partition(&leases, 1_500);
        assert_eq!(live, [m("10.0.0.2", 6443), m("10.0.0.3", 6443)]);
        assert_eq!(expired, [("b".to_string(), 2), ("c".to_string(), 3)]);
    }

    #[test]
    fn one_subset_per_port_addresses_sorted() {
        let members = [
            m("10.0.0.2", 6443),
            m("127.0.0.1", 7001),
            m("10.0.0.1", 6443),
            m("127.0.0.1", 7000),
        ];
        assert_eq!(
            subsets(&members),
            json!([
                {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                 "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]},
                {"addresses": [{"ip": "127.0.0.1"}],
                 "ports": [{"name": "https", "port": 7000, "protocol": "TCP"}]},
                {"addresses": [{"ip": "127.0.0.1"}],
                 "ports": [{"name": "https", "port": 7001, "protocol": "TCP"}]},
            ])
        );
        let names: Vec<String> = slices(&members).into_iter().map(|(n, _, _)| n).collect();
        assert_eq!(names, ["kubernetes", "kubernetes-7000", "kubernetes-7001"]);
    }

    #[test]
    fn member_parses_the_advertised_address() {
        assert_eq!(Member::parse("127.0.0.1:7000"), m("127.0.0.1", 7000));
        assert_eq!(Member::parse("10.0.0.1"), m("10.0.0.1", 6443));
        assert_eq!(
            m("10.0.0.1", 6443).key(),
            "/registry/masterleases/10.0.0.1:6443"
        );
    }

    async fn endpoints(store: &dyn Store) -> Value {
        let r = resources::find_builtin("", "v1", "endpoints").unwrap();
        let kv = store
            .get(&object::key(r, Some("default"), "kubernetes"))
            .await
            .unwrap();
        serde_json::from_slice::<Value>(&kv.value).unwrap()["subsets"].clone()
    }

    #[tokio::test]
    async fn servers_join_the_endpoints_and_leave_on_stop_or_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            skiff_store::sqlite::SqliteStore::open(
                dir.path().join("s.db"),
                skiff_store::sqlite::Config::default(),
            )
            .unwrap(),
        );
        let one = EndpointReconciler::new(store.clone(), m("127.0.0.1", 7000));
        let two = EndpointReconciler::new(store.clone(), m("127.0.0.1", 7001));
        // A short-lived third that dies without removing its lease.
        let three = EndpointReconciler::new(store.clone(), m("10.0.0.9", 7000))
            .with_timing(Duration::from_millis(1), Duration::from_secs(10));
        one.reconcile().await.unwrap();
        two.reconcile().await.unwrap();
        assert_eq!(endpoints(store.as_ref()).await.as_array().unwrap().len(), 2);
        three.reconcile().await.unwrap_or_default();
        // Its lease lived 1 ms: the next refresh of another drops it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let live = one.reconcile().await.unwrap();
            if live == [m("127.0.0.1", 7000), m("127.0.0.1", 7001)] {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{live:?}");
            tokio::task::yield_now().await;
        }
        assert_eq!(
            endpoints(store.as_ref()).await,
            subsets(&[m("127.0.0.1", 7000), m("127.0.0.1", 7001)])
        );
        assert!(store.get(&m("10.0.0.9", 7000).key()).await.is_err());
        // The second stops cleanly.
        assert_eq!(two.remove().await.unwrap(), [m("127.0.0.1", 7000)]);
        assert_eq!(
            endpoints(store.as_ref()).await,
            subsets(&[m("127.0.0.1", 7000)])
        );
        let slices_r = resources::find_builtin("discovery.k8s.io", "v1", "endpointslices").unwrap();
        assert!(store
            .get(&object::key(slices_r, Some("default"), "kubernetes-7001"))
            .await
            .is_err());
        // The last one stopping leaves itself listed.
        one.remove().await.unwrap();
        assert_eq!(
            endpoints(store.as_ref()).await,
            subsets(&[m("127.0.0.1", 7000)])
        );
    }
}
