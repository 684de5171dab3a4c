//! A node's health as this controller observes it: when it last saw the
//! node's heartbeat move (its Lease's renewTime, or its Ready condition's
//! lastHeartbeatTime), by this controller's own clock, and what the node's
//! conditions become once that is longer ago than the grace period.
//!
//! Pure functions over [`Observed`] and the node (unit-tested here). As
//! upstream, staleness is judged by local observation times only, never by
//! comparing the kubelet's timestamps with this clock. It must not write.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};

/// The conditions marked Unknown when a node goes silent (not
/// NetworkUnavailable, which the control plane owns, as upstream).
pub const WATCHED_CONDITIONS: [&str; 4] =
    ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// upstream's reason for a condition the kubelet stopped posting.
pub const REASON_UNKNOWN: &str = "NodeStatusUnknown";
/// upstream's message for it.
pub const MESSAGE_UNKNOWN: &str = "Kubelet stopped posting node status.";
/// upstream's reason for a condition the kubelet never posted.
pub const REASON_NEVER: &str = "NodeStatusNeverUpdated";
/// upstream's message for it.
pub const MESSAGE_NEVER: &str = "Kubelet never posted node status.";

/// What the controller remembers of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// When this controller last saw the heartbeat move (its clock).
    pub probe: Instant,
    /// The Ready condition's lastHeartbeatTime when last seen; `None`
    /// while the node has no Ready condition.
    pub ready_heartbeat: Option<Option<Time>>,
    /// The Lease's renewTime when last seen.
    pub lease_renew: Option<MicroTime>,
}

/// The node's Ready condition.
pub fn ready(node: &Node) -> Option<&NodeCondition> {
    condition(node, "Ready")
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Updates what is remembered of `node` seen at `now` with its Lease's
/// `renew`: the probe time moves to `now` when the node is new to the
/// controller, when its Ready condition appears or goes, when the Ready
/// condition's heartbeat changed, or when the Lease was renewed later
/// than last seen.
pub fn observe(
    before: Option<&Observed>,
    node: &Node,
    renew: Option<&MicroTime>,
    now: Instant,
) -> Observed {
    let heartbeat = ready(node).map(|c| c.last_heartbeat_time.clone());
    let mut probe = match before {
        None => now,
        Some(b) if b.ready_heartbeat != heartbeat => now,
        Some(b) => b.probe,
    };
    let before_renew = before.and_then(|b| b.lease_renew.as_ref());
    if let Some(r) = renew {
        if before_renew.is_none_or(|b| b.0 < r.0) {
            probe = now;
        }
    }
    Observed {
        probe,
        ready_heartbeat: heartbeat,
        lease_renew: renew.cloned().or_else(|| before_renew.cloned()),
    }
}

/// The grace period the node is entitled to: the startup one until it
/// has posted a Ready condition.
pub fn grace(node: &Node, monitor: Duration, startup: Duration) -> Duration {
    if ready(node).is_some() {
        monitor
    } else {
        startup
    }
}

/// When the node goes stale if nothing moves.
pub fn deadline(observed: &Observed, grace: Duration) -> Instant {
    observed.probe + grace
}

/// Whether the node is stale at `now` (strictly after the deadline, as
/// upstream).
pub fn stale(observed: &Observed, grace: Duration, now: Instant) -> bool {
    now > deadline(observed, grace)
}

/// The node's conditions after it went stale, or `None` when its Ready
/// condition would not change (already Unknown): every watched condition
/// it reported becomes Unknown with upstream's reason and message, and
/// every one it never reported is added as Unknown with the "never
/// posted" reason (heartbeat = the node's creation). Transition times are
/// `now`.
pub fn stale_conditions(node: &Node, now: &Time) -> Option<Vec<NodeCondition>> {
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let before = ready(node).cloned();
    for type_ in WATCHED_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => conditions.push(NodeCondition {
                type_: type_.to_string(),
                status: "Unknown".into(),
                reason: Some(REASON_NEVER.into()),
                message: Some(MESSAGE_NEVER.into()),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: Some(now.clone()),
            }),
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some(REASON_UNKNOWN.into());
                c.message = Some(MESSAGE_UNKNOWN.into());
                c.last_transition_time = Some(now.clone());
            }
            Some(_) => {}
        }
    }
    let after = conditions.iter().find(|c| c.type_ == "Ready");
    (after != before.as_ref()).then_some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(1_700_000_000 + secs).expect("time"))
    }

    fn micro(secs: i64) -> MicroTime {
        MicroTime(Timestamp::from_second(1_700_000_000 + secs).expect("time"))
    }

    fn node(conditions: &[(&str, &str, i64)]) -> Node {
        let mut n = Node::default();
        n.metadata.creation_timestamp = Some(at(-100));
        n.status = Some(NodeStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, s, hb)| NodeCondition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        reason: Some("KubeletReady".into()),
                        last_heartbeat_time: Some(at(*hb)),
                        last_transition_time: Some(at(0)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        n
    }

    const MONITOR: Duration = Duration::from_secs(50);
    const STARTUP: Duration = Duration::from_secs(60);

    #[test]
    fn first_sight_starts_the_clock() {
        let t0 = Instant::now();
        let n = node(&[("Ready", "True", 0)]);
        let o = observe(None, &n, None, t0);
        assert_eq!(o.probe, t0);
        assert!(!stale(&o, MONITOR, t0 + MONITOR));
        assert!(stale(&o, MONITOR, t0 + MONITOR + Duration::from_millis(1)));
    }

    #[test]
    fn a_moving_lease_or_heartbeat_keeps_the_node_fresh() {
        let t0 = Instant::now();
        let n = node(&[("Ready", "True", 0)]);
        let o = observe(None, &n, Some(&micro(0)), t0);
        // Same heartbeat, same lease: the probe stays.
        let t1 = t0 + Duration::from_secs(30);
        let same = observe(Some(&o), &n, Some(&micro(0)), t1);
        assert_eq!(same.probe, t0);
        // The lease renewed: the probe moves to when it was seen.
        let renewed = observe(Some(&same), &n, Some(&micro(10)), t1);
        assert_eq!(renewed.probe, t1);
        // The status heartbeat moved: the same.
        let t2 = t1 + Duration::from_secs(40);
        let beat = observe(
            Some(&renewed),
            &node(&[("Ready", "True", 40)]),
            Some(&micro(10)),
            t2,
        );
        assert_eq!(beat.probe, t2);
        // An older lease (clock skew, a stale cache) does not count.
        let older = observe(
            Some(&beat),
            &node(&[("Ready", "True", 40)]),
            Some(&micro(5)),
            t2 + MONITOR,
        );
        assert_eq!(older.probe, t2);
    }

    #[test]
    fn a_node_that_never_reported_gets_the_startup_grace() {
        let mut n = node(&[]);
        n.status = None;
        assert_eq!(grace(&n, MONITOR, STARTUP), STARTUP);
        assert_eq!(
            grace(&node(&[("Ready", "True", 0)]), MONITOR, STARTUP),
            MONITOR
        );
        let got = stale_conditions(&n, &at(100)).expect("conditions added");
        assert_eq!(got.len(), 4);
        for c in &got {
            assert_eq!(c.status, "Unknown");
            assert_eq!(c.reason.as_deref(), Some(REASON_NEVER));
            assert_eq!(c.message.as_deref(), Some(MESSAGE_NEVER));
            assert_eq!(c.last_heartbeat_time, Some(at(-100)));
            assert_eq!(c.last_transition_time, Some(at(100)));
        }
    }

    #[test]
    fn stale_conditions_become_unknown_with_upstreams_words() {
        let n = node(&[
            ("Ready", "True", 0),
            ("MemoryPressure", "False", 0),
            ("NetworkUnavailable", "False", 0),
        ]);
        let got = stale_conditions(&n, &at(100)).expect("Ready changed");
        let by = |t: &str| got.iter().find(|c| c.type_ == t).expect(t).clone();
        for t in ["Ready", "MemoryPressure"] {
            let c = by(t);
            assert_eq!(c.status, "Unknown");
            assert_eq!(c.reason.as_deref(), Some(REASON_UNKNOWN));
            assert_eq!(c.message.as_deref(), Some(MESSAGE_UNKNOWN));
            assert_eq!(c.last_heartbeat_time, Some(at(0)), "heartbeat kept");
            assert_eq!(c.last_transition_time, Some(at(100)));
        }
        for t in ["DiskPressure", "PIDPressure"] {
            assert_eq!(by(t).reason.as_deref(), Some(REASON_NEVER));
        }
        assert_eq!(by("NetworkUnavailable").status, "False");
        // Already Unknown: nothing to write.
        let mut again = n.clone();
        again.status.as_mut().expect("status").conditions = Some(got);
        assert_eq!(stale_conditions(&again, &at(200)), None);
    }
}
