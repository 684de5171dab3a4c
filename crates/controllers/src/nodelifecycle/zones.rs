//! Large disruptions: the state of a zone from its nodes' Ready
//! conditions, and the per-zone rate at which nodes may be tainted
//! NoExecute (upstream's zone states and `RateLimitedTimedQueue`,
//! simplified to one token bucket per zone, burst 1).
//!
//! Pure functions and a bucket that reads the time it is given
//! (unit-tested here). It must not read the API nor write.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;

/// Nodes with this label are left out of the zone counts (upstream's
/// `node.kubernetes.io/exclude-disruption`).
pub const EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";

/// A zone's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    /// Some nodes not Ready, under the threshold.
    Normal,
    /// At least the threshold share (and more than 2) not Ready.
    PartialDisruption,
    /// No node Ready.
    FullDisruption,
}

/// The zone key of a node (upstream's `GetZoneKey`): region and zone
/// labels joined; empty for a node with neither.
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let region = get("topology.kubernetes.io/region");
    let zone = get("topology.kubernetes.io/zone");
    if region.is_empty() && zone.is_empty() {
        return String::new();
    }
    format!("{region}:\u{0}:{zone}")
}

/// Whether the node counts in its zone's state.
pub fn counted(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_none_or(|l| !l.contains_key(EXCLUDE_DISRUPTION))
}

/// The state of a zone of `ready + not_ready` nodes (upstream's
/// ComputeZoneState).
pub fn zone_state(ready: usize, not_ready: usize, unhealthy_threshold: f32) -> ZoneState {
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f32 / (not_ready + ready) as f32 >= unhealthy_threshold
    {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

/// Tainting rates (nodes a second).
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// `--node-eviction-rate`.
    pub normal: f32,
    /// `--secondary-node-eviction-rate`.
    pub secondary: f32,
    /// `--large-cluster-size-threshold`.
    pub large_cluster: u32,
}

/// The rate of a zone of `size` nodes in `state`: normal when healthy or
/// fully disrupted (when only some zones are), the secondary rate for a
/// partly disrupted large zone, 0 for a partly disrupted small one
/// (upstream's HealthyQPSFunc / ReducedQPSFunc).
pub fn zone_rate(state: ZoneState, size: usize, rates: Rates) -> f32 {
    match state {
        ZoneState::Normal | ZoneState::FullDisruption => rates.normal,
        ZoneState::PartialDisruption if size > rates.large_cluster as usize => rates.secondary,
        ZoneState::PartialDisruption => 0.0,
    }
}

/// A token bucket of burst 1.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            tokens: 1.0,
            last: now,
        }
    }

    /// Takes a token at `now` at `rate` a second: `Ok` when one was
    /// there, else how long until one is (`None`: never, rate 0).
    pub fn take(&mut self, rate: f32, now: Instant) -> Result<(), Option<Duration>> {
        if rate <= 0.0 {
            return Err(None);
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now.max(self.last);
        self.tokens = (self.tokens + elapsed * f64::from(rate)).min(1.0);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Some(Duration::from_secs_f64(
            (1.0 - self.tokens) / f64::from(rate),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_states_as_upstream() {
        assert_eq!(zone_state(0, 1, 0.55), ZoneState::FullDisruption);
        assert_eq!(zone_state(3, 0, 0.55), ZoneState::Normal);
        // Two of three not Ready is over the share but not more than 2.
        assert_eq!(zone_state(1, 2, 0.55), ZoneState::Normal);
        assert_eq!(zone_state(2, 3, 0.55), ZoneState::PartialDisruption);
        assert_eq!(zone_state(5, 3, 0.55), ZoneState::Normal);
    }

    #[test]
    fn rates_by_state_and_size() {
        let r = Rates {
            normal: 0.1,
            secondary: 0.01,
            large_cluster: 50,
        };
        assert_eq!(zone_rate(ZoneState::Normal, 3, r), 0.1);
        assert_eq!(zone_rate(ZoneState::FullDisruption, 3, r), 0.1);
        assert_eq!(zone_rate(ZoneState::PartialDisruption, 51, r), 0.01);
        assert_eq!(zone_rate(ZoneState::PartialDisruption, 50, r), 0.0);
    }

    #[test]
    fn the_bucket_lets_one_through_then_one_per_period() {
        let t0 = Instant::now();
        let mut b = Bucket::new(t0);
        assert_eq!(b.take(0.1, t0), Ok(()));
        let wait = b.take(0.1, t0).expect_err("empty").expect("a wait");
        assert!((wait.as_secs_f64() - 10.0).abs() < 1e-3, "{wait:?}");
        let t1 = t0 + Duration::from_secs(4);
        let wait = b.take(0.1, t1).expect_err("no token yet").expect("a wait");
        assert!((wait.as_secs_f64() - 6.0).abs() < 1e-3, "{wait:?}");
        assert_eq!(b.take(0.1, t0 + Duration::from_secs(10)), Ok(()));
        assert_eq!(b.take(0.0, t0 + Duration::from_secs(100)), Err(None));
    }

    #[test]
    fn zone_keys_join_region_and_zone() {
        let mut n = Node::default();
        assert_eq!(zone_key(&n), "");
        n.metadata.labels = Some(
            [("topology.kubernetes.io/zone".to_string(), "a".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(zone_key(&n), ":\u{0}:a");
        assert!(counted(&n));
    }
}
