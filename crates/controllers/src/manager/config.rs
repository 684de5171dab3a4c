//! What a [`crate::ControllerManager`] is told: the client-side rate
//! limit, leader election, which controllers run, and the settings of the
//! controllers that have any (kube-controller-manager's flags).
//!
//! This module owns only the settings and their defaults; it starts
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use skiff_client::clock::{Clock, SystemClock};
use skiff_client::leader::LeaderElectionConfig;

/// The controller manager's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Requests a second to the API server (`--kube-api-qps`); 0 = no limit.
    pub qps: f32,
    /// Requests allowed at once above the rate (`--kube-api-burst`).
    pub burst: u32,
    /// `None` runs without leader election.
    pub leader_election: Option<LeaderElectionConfig>,
    /// This candidate's identity in the Lease.
    pub identity: String,
    /// Which controllers run (`--controllers`): `*` for all that are on
    /// by default, a name to add one, `-name` to leave one out.
    pub controllers: Vec<String>,
    /// The cluster's pod CIDR (`--cluster-cidr`) for node IPAM; `None`
    /// leaves node IPAM off.
    pub cluster_cidr: Option<String>,
    /// The size of each node's pod CIDR (`--node-cidr-mask-size`, 24).
    pub node_cidr_mask_size: u8,
    /// The CA bundle published in every namespace as `kube-root-ca.crt`
    /// (`--root-ca-file`); `None` leaves the publisher off.
    pub root_ca: Option<String>,
    /// The key legacy service-account token Secrets are signed with
    /// (`--service-account-private-key-file`); `None` leaves the
    /// serviceaccount-token controller off.
    pub service_account_signer: Option<Arc<skiff_api::jwt::Signer>>,
    /// The CA the csrsigning controller signs certificate requests with
    /// (`--cluster-signing-cert-file`, `--cluster-signing-key-file`);
    /// `None` leaves it off.
    pub cluster_signing: Option<Arc<skiff_client::certificate::authority::Authority>>,
    /// The longest certificate it signs (`--cluster-signing-duration`,
    /// 8760h).
    pub cluster_signing_duration: Duration,
    /// The period of the controllers' full resyncs.
    pub resync: Duration,
    /// How long a node's Lease and status may stand still before the node
    /// lifecycle controller marks it Unknown
    /// (`--node-monitor-grace-period`, 50 s).
    pub node_monitor_grace_period: Duration,
    /// The same for a node that never posted its status
    /// (`--node-startup-grace-period`, 60 s).
    pub node_startup_grace_period: Duration,
    /// How soon the node lifecycle controller looks again at a zone whose
    /// eviction rate is 0 (`--node-monitor-period`, 5 s). A node's
    /// staleness needs no period: its deadline is a requeue.
    pub node_monitor_period: Duration,
    /// Nodes a second whose pods may be evicted (tainted NoExecute) per
    /// healthy zone (`--node-eviction-rate`, 0.1).
    pub node_eviction_rate: f32,
    /// The same for a partly disrupted zone larger than
    /// [`Config::large_cluster_size_threshold`]
    /// (`--secondary-node-eviction-rate`, 0.01).
    pub secondary_node_eviction_rate: f32,
    /// The share of not-Ready nodes (of at least 3) that makes a zone
    /// partly disrupted (`--unhealthy-zone-threshold`, 0.55).
    pub unhealthy_zone_threshold: f32,
    /// Zones with more nodes than this keep evicting at the secondary rate
    /// when partly disrupted; smaller ones stop
    /// (`--large-cluster-size-threshold`, 50).
    pub large_cluster_size_threshold: u32,
    /// The clock the controllers' own timers read (grace periods,
    /// tolerationSeconds); tests give a fake one.
    pub clock: Arc<dyn Clock>,
    /// The most endpoints in one EndpointSlice
    /// (`--max-endpoints-per-slice`, 100).
    pub max_endpoints_per_slice: usize,
    /// How often the garbage collector discovers the served resources
    /// again (upstream: 30 s), picking up custom resources.
    pub gc_rediscovery: Duration,
    /// Terminated pods kept before pod GC deletes the oldest
    /// (`--terminated-pod-gc-threshold`, 12,500); 0 or less keeps all.
    pub terminated_pod_gc_threshold: i32,
    /// How often pod GC looks (upstream: 20 s).
    pub pod_gc_period: Duration,
    /// How long a node pods are bound to must stay missing before pod GC
    /// deletes them (upstream: 40 s).
    pub pod_gc_quarantine: Duration,
    /// Wall-clock time as the time-driven controllers (Job deadlines,
    /// CronJob schedules, TTL after finished) read it; tests drive it.
    pub wall_clock: WallClock,
    /// The HorizontalPodAutoscaler controller's settings
    /// (`--horizontal-pod-autoscaler-*`).
    pub hpa: crate::podautoscaler::Settings,
}

/// "What time is it" for controllers that act on wall-clock times.
#[derive(Clone)]
pub struct WallClock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl WallClock {
    /// A clock that asks `now`.
    pub fn from_fn(now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// The current time.
    pub fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::from_fn(Timestamp::now)
    }
}

impl std::fmt::Debug for WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WallClock")
    }
}

/// The defaults, chosen by measurement (`skiff-bench controllers --qps Q
/// --burst B`: a 1,000-replica Deployment on 100 simulated nodes rolled
/// to a new image, on 2 cores): upstream's 20/30 took 193 s for the roll
/// and, each sync seeing a little more progress, wrote more per pod;
/// 100/200 took 21 s; 500/1000 takes 4 s (under a tenth of the 20/30
/// floor, 131 s) and lets a scale from nothing go at once; no limit took
/// 1.6 s but the controllers wrote ~70 % more per pod and nothing would
/// stop a runaway controller from flooding the server.
pub const DEFAULT_QPS: f32 = 500.0;
/// See [`DEFAULT_QPS`].
pub const DEFAULT_BURST: u32 = 1000;

impl Default for Config {
    fn default() -> Self {
        Self {
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            leader_election: Some(LeaderElectionConfig {
                name: "kube-controller-manager".into(),
                ..LeaderElectionConfig::default()
            }),
            identity: skiff_client::leader::default_identity(),
            controllers: vec!["*".into()],
            cluster_cidr: None,
            node_cidr_mask_size: 24,
            root_ca: None,
            service_account_signer: None,
            cluster_signing: None,
            cluster_signing_duration: crate::certificates::signing::DEFAULT_DURATION,
            resync: Duration::from_secs(30),
            node_monitor_grace_period: Duration::from_secs(50),
            node_startup_grace_period: Duration::from_secs(60),
            node_monitor_period: Duration::from_secs(5),
            node_eviction_rate: 0.1,
            secondary_node_eviction_rate: 0.01,
            unhealthy_zone_threshold: 0.55,
            large_cluster_size_threshold: 50,
            clock: Arc::new(SystemClock),
            max_endpoints_per_slice: 100,
            gc_rediscovery: Duration::from_secs(30),
            terminated_pod_gc_threshold: 12_500,
            pod_gc_period: Duration::from_secs(20),
            pod_gc_quarantine: Duration::from_secs(40),
            wall_clock: WallClock::default(),
            hpa: crate::podautoscaler::Settings::default(),
        }
    }
}

impl Config {
    /// Whether the controller `name` runs, given whether it is on by
    /// default: the last entry that names it wins, `*` turns on the
    /// default ones (as upstream's `--controllers`).
    pub fn enabled(&self, name: &str, on_by_default: bool) -> bool {
        let mut on = false;
        for entry in &self.controllers {
            if entry == "*" {
                on = on || on_by_default;
            } else if entry == name {
                on = true;
            } else if entry.strip_prefix('-') == Some(name) {
                on = false;
            }
        }
        on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(controllers: &[&str]) -> Config {
        Config {
            controllers: controllers.iter().map(|s| s.to_string()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn the_controllers_flag_reads_as_upstreams() {
        assert!(with(&["*"]).enabled("replicaset", true));
        assert!(!with(&["*"]).enabled("bootstrapsigner", false));
        assert!(with(&["*", "bootstrapsigner"]).enabled("bootstrapsigner", false));
        assert!(!with(&["*", "-replicaset"]).enabled("replicaset", true));
        assert!(with(&["replicaset"]).enabled("replicaset", true));
        assert!(!with(&["replicaset"]).enabled("deployment", true));
    }
}
