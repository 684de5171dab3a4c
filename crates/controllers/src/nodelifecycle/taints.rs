//! Which taints the node lifecycle controller wants on a node, computed
//! from the node alone (pure functions, unit-tested here).
//!
//! It owns two sets of taints and nothing else on the node:
//! - NoSchedule taints that mirror conditions (upstream's
//!   TaintNodesByCondition): Ready False → `not-ready`, Ready Unknown →
//!   `unreachable`, MemoryPressure/DiskPressure/PIDPressure/
//!   NetworkUnavailable True → their pressure taint, spec.unschedulable →
//!   `unschedulable`;
//! - the NoExecute `not-ready` / `unreachable` taints that make the taint
//!   eviction controller evict pods (mutually exclusive, as upstream).
//!
//! Every other taint of the node is kept as it is, in place. It must not
//! decide when a node is unhealthy (that is `health`'s) nor write.

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// `node.kubernetes.io/not-ready`.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// `node.kubernetes.io/unreachable`.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// `node.kubernetes.io/unschedulable`.
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// `node.kubernetes.io/memory-pressure`.
pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// `node.kubernetes.io/disk-pressure`.
pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// `node.kubernetes.io/pid-pressure`.
pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// `node.kubernetes.io/network-unavailable`.
pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// `NoSchedule`.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// `NoExecute`.
pub const NO_EXECUTE: &str = "NoExecute";

/// (condition type, status) → the NoSchedule taint key it brings.
const CONDITION_TAINTS: &[(&str, &str, &str)] = &[
    ("Ready", "False", NOT_READY),
    ("Ready", "Unknown", UNREACHABLE),
    ("MemoryPressure", "True", MEMORY_PRESSURE),
    ("DiskPressure", "True", DISK_PRESSURE),
    ("NetworkUnavailable", "True", NETWORK_UNAVAILABLE),
    ("PIDPressure", "True", PID_PRESSURE),
];

/// What to do with the NoExecute `not-ready`/`unreachable` taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoExecute {
    /// Leave them as they are (no Ready condition yet, or waiting for the
    /// zone's rate limiter).
    Leave,
    /// Have this key (and not the other one).
    Set(&'static str),
    /// Have neither (the node is Ready, or the cluster is fully disrupted).
    Clear,
}

/// The NoExecute key a Ready status asks for: False → `not-ready`,
/// Unknown → `unreachable`, True → none ([`NoExecute::Clear`]); no Ready
/// condition leaves the taints alone.
pub fn no_execute_for(ready: Option<&str>) -> NoExecute {
    match ready {
        Some("False") => NoExecute::Set(NOT_READY),
        Some("Unknown") => NoExecute::Set(UNREACHABLE),
        Some(_) => NoExecute::Clear,
        None => NoExecute::Leave,
    }
}

/// The other NoExecute key of the pair.
pub fn opposite(key: &str) -> &'static str {
    if key == NOT_READY {
        UNREACHABLE
    } else {
        NOT_READY
    }
}

/// Whether the node has a taint with this key and effect.
pub fn has(node: &Node, key: &str, effect: &str) -> bool {
    taints(node)
        .iter()
        .any(|t| t.key == key && t.effect == effect)
}

fn taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// The NoSchedule taint keys the node's conditions and spec ask for.
pub fn no_schedule_keys(node: &Node) -> Vec<&'static str> {
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut keys: Vec<&'static str> = CONDITION_TAINTS
        .iter()
        .filter(|(type_, status, _)| {
            conditions
                .iter()
                .any(|c| c.type_ == *type_ && c.status == *status)
        })
        .map(|(_, _, key)| *key)
        .collect();
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        keys.push(UNSCHEDULABLE);
    }
    keys
}

fn managed_no_schedule(t: &Taint) -> bool {
    t.effect == NO_SCHEDULE
        && (t.key == UNSCHEDULABLE || CONDITION_TAINTS.iter().any(|(_, _, k)| *k == t.key))
}

fn managed_no_execute(t: &Taint) -> bool {
    t.effect == NO_EXECUTE && (t.key == NOT_READY || t.key == UNREACHABLE)
}

/// The node's taints as they should be, or `None` when they already are:
/// the NoSchedule taints from [`no_schedule_keys`], the NoExecute pair as
/// `no_execute` says, every other taint kept. Added taints get
/// timeAdded = `now`; kept ones keep theirs.
pub fn desired(node: &Node, no_execute: NoExecute, now: &Time) -> Option<Vec<Taint>> {
    let current = taints(node);
    let wanted_ns = no_schedule_keys(node);
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !managed_no_schedule(t) || wanted_ns.contains(&t.key.as_str()))
        .filter(|t| match no_execute {
            NoExecute::Leave => true,
            NoExecute::Set(key) => !(managed_no_execute(t) && t.key != key),
            NoExecute::Clear => !managed_no_execute(t),
        })
        .cloned()
        .collect();
    let add = |key: &str, effect: &str, out: &mut Vec<Taint>| {
        if !out.iter().any(|t| t.key == key && t.effect == effect) {
            out.push(Taint {
                key: key.to_string(),
                effect: effect.to_string(),
                value: None,
                time_added: Some(now.clone()),
            });
        }
    };
    for key in wanted_ns {
        add(key, NO_SCHEDULE, &mut out);
    }
    if let NoExecute::Set(key) = no_execute {
        add(key, NO_EXECUTE, &mut out);
    }
    (out.as_slice() != current).then_some(out)
}

/// Whether `toleration` tolerates `taint` (upstream's ToleratesTaint):
/// the effect matches (or is empty), the key matches (an empty key with
/// `Exists` matches every key), and the value is equal unless the
/// operator is `Exists`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::jiff::Timestamp;

    fn node(conditions: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: k.to_string(),
                            effect: e.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn keys(taints: &[Taint]) -> Vec<(String, String)> {
        taints
            .iter()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect()
    }

    fn now() -> Time {
        Time(Timestamp::now())
    }

    #[test]
    fn ready_status_picks_the_no_execute_taint() {
        assert_eq!(no_execute_for(Some("False")), NoExecute::Set(NOT_READY));
        assert_eq!(no_execute_for(Some("Unknown")), NoExecute::Set(UNREACHABLE));
        assert_eq!(no_execute_for(Some("True")), NoExecute::Clear);
        assert_eq!(no_execute_for(None), NoExecute::Leave);
    }

    #[test]
    fn an_unknown_node_gets_unreachable_no_schedule_and_no_execute() {
        let n = node(&[("Ready", "Unknown")], &[("dedicated", NO_SCHEDULE)]);
        let got = desired(&n, NoExecute::Set(UNREACHABLE), &now()).expect("a change");
        assert_eq!(
            keys(&got),
            [
                ("dedicated".into(), NO_SCHEDULE.into()),
                (UNREACHABLE.into(), NO_SCHEDULE.into()),
                (UNREACHABLE.into(), NO_EXECUTE.into()),
            ]
        );
        assert!(got.iter().skip(1).all(|t| t.time_added.is_some()));
    }

    #[test]
    fn not_ready_replaces_unreachable() {
        let n = node(
            &[("Ready", "False")],
            &[(UNREACHABLE, NO_SCHEDULE), (UNREACHABLE, NO_EXECUTE)],
        );
        let got = desired(&n, NoExecute::Set(NOT_READY), &now()).expect("a change");
        assert_eq!(
            keys(&got),
            [
                (NOT_READY.into(), NO_SCHEDULE.into()),
                (NOT_READY.into(), NO_EXECUTE.into()),
            ]
        );
    }

    #[test]
    fn a_ready_node_loses_the_controllers_taints_only() {
        let n = node(
            &[("Ready", "True"), ("DiskPressure", "True")],
            &[
                (UNREACHABLE, NO_SCHEDULE),
                (UNREACHABLE, NO_EXECUTE),
                ("other", NO_EXECUTE),
            ],
        );
        let got = desired(&n, NoExecute::Clear, &now()).expect("a change");
        assert_eq!(
            keys(&got),
            [
                ("other".into(), NO_EXECUTE.into()),
                (DISK_PRESSURE.into(), NO_SCHEDULE.into()),
            ]
        );
    }

    #[test]
    fn leave_keeps_no_execute_and_nothing_to_do_is_none() {
        let n = node(
            &[("Ready", "Unknown")],
            &[(UNREACHABLE, NO_SCHEDULE), (NOT_READY, NO_EXECUTE)],
        );
        assert_eq!(desired(&n, NoExecute::Leave, &now()), None);
        let mut cordoned = node(&[("Ready", "True")], &[]);
        cordoned
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        let got = desired(&cordoned, NoExecute::Clear, &now()).expect("a change");
        assert_eq!(keys(&got), [(UNSCHEDULABLE.into(), NO_SCHEDULE.into())]);
    }

    #[test]
    fn tolerations_match_as_upstream() {
        let taint = Taint {
            key: UNREACHABLE.into(),
            effect: NO_EXECUTE.into(),
            ..Default::default()
        };
        let tol =
            |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
                Toleration {
                    key: key.map(Into::into),
                    operator: op.map(Into::into),
                    value: value.map(Into::into),
                    effect: effect.map(Into::into),
                    toleration_seconds: None,
                }
            };
        assert!(tolerates(
            &tol(Some(UNREACHABLE), Some("Exists"), None, Some(NO_EXECUTE)),
            &taint
        ));
        assert!(tolerates(&tol(None, Some("Exists"), None, None), &taint));
        assert!(tolerates(&tol(Some(UNREACHABLE), None, None, None), &taint));
        assert!(!tolerates(
            &tol(Some(UNREACHABLE), Some("Equal"), Some("x"), None),
            &taint
        ));
        assert!(!tolerates(
            &tol(Some(NOT_READY), Some("Exists"), None, None),
            &taint
        ));
        assert!(!tolerates(
            &tol(Some(UNREACHABLE), Some("Exists"), None, Some(NO_SCHEDULE)),
            &taint
        ));
    }
}
