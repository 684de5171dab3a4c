//! When a pod on a node with NoExecute taints is to be deleted: at once
//! when it does not tolerate one of them, after the shortest
//! tolerationSeconds of the tolerations that match them otherwise, never
//! when those tolerate forever (upstream's GetMatchingTolerations and
//! getMinTolerationTime).
//!
//! Pure functions over taints, tolerations and instants (unit-tested
//! here). It must not read the API nor write.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};

use crate::nodelifecycle::taints::{tolerates, NO_EXECUTE};

/// A deletion planned for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    /// When the taints that started it were first seen on the pod's node.
    pub created: Instant,
    /// When the pod is deleted.
    pub fire: Instant,
}

/// What to do with a pod now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing due (and a planned deletion, if any, is cancelled).
    Cancel,
    /// Delete it now.
    Evict,
    /// Delete it at `fire` unless things change.
    Wait(Scheduled),
}

/// The node's NoExecute taints.
pub fn no_execute(node: &Node) -> Vec<Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| {
            t.iter()
                .filter(|t| t.effect == NO_EXECUTE)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// How long the pod may stay: `None` when some taint is not tolerated,
/// `Some(None)` forever, `Some(Some(d))` for `d` (the shortest
/// tolerationSeconds of the first toleration matching each taint; 0 or
/// less means at once).
pub fn toleration_time(taints: &[Taint], tolerations: &[Toleration]) -> Option<Option<Duration>> {
    let mut min: Option<Duration> = None;
    for taint in taints {
        let used = tolerations.iter().find(|t| tolerates(t, taint))?;
        if let Some(secs) = used.toleration_seconds {
            let d = Duration::from_secs(secs.max(0).unsigned_abs());
            min = Some(min.map_or(d, |m| m.min(d)));
        }
    }
    Some(min)
}

/// What to do with a pod whose node has `taints` (NoExecute only) at
/// `now`, given the deletion already planned for it.
pub fn decide(
    taints: &[Taint],
    tolerations: &[Toleration],
    planned: Option<Scheduled>,
    now: Instant,
) -> Decision {
    if taints.is_empty() {
        return Decision::Cancel;
    }
    match toleration_time(taints, tolerations) {
        None => Decision::Evict,
        Some(None) => Decision::Cancel,
        Some(Some(d)) => {
            let created = planned.map_or(now, |p| p.created);
            let fire = created + d;
            if fire <= now {
                Decision::Evict
            } else {
                Decision::Wait(Scheduled { created, fire })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodelifecycle::taints::{NOT_READY, UNREACHABLE};

    fn taint(key: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: NO_EXECUTE.into(),
            ..Default::default()
        }
    }

    fn tol(key: &str, seconds: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(NO_EXECUTE.into()),
            toleration_seconds: seconds,
            value: None,
        }
    }

    #[test]
    fn untolerated_taints_evict_at_once() {
        let now = Instant::now();
        assert_eq!(
            decide(&[taint(UNREACHABLE)], &[], None, now),
            Decision::Evict
        );
        assert_eq!(
            decide(&[taint(UNREACHABLE)], &[tol(NOT_READY, None)], None, now),
            Decision::Evict
        );
    }

    #[test]
    fn no_taints_or_forever_cancel() {
        let now = Instant::now();
        assert_eq!(decide(&[], &[], None, now), Decision::Cancel);
        assert_eq!(
            decide(&[taint(UNREACHABLE)], &[tol(UNREACHABLE, None)], None, now),
            Decision::Cancel
        );
    }

    #[test]
    fn toleration_seconds_set_the_deadline_from_first_sight() {
        let t0 = Instant::now();
        let taints = [taint(UNREACHABLE)];
        let tols = [tol(UNREACHABLE, Some(300)), tol("", Some(5))];
        // The first matching toleration counts: 300 s.
        let Decision::Wait(s) = decide(&taints, &tols, None, t0) else {
            panic!("wait");
        };
        assert_eq!(s.fire, t0 + Duration::from_secs(300));
        // Seen again later: the deadline does not move.
        let later = t0 + Duration::from_secs(100);
        assert_eq!(decide(&taints, &tols, Some(s), later), Decision::Wait(s));
        assert_eq!(
            decide(&taints, &tols, Some(s), t0 + Duration::from_secs(300)),
            Decision::Evict
        );
        // Zero or negative seconds: at once.
        assert_eq!(
            decide(&taints, &[tol(UNREACHABLE, Some(-1))], None, t0),
            Decision::Evict
        );
    }

    #[test]
    fn the_shortest_toleration_of_several_taints_wins() {
        let taints = [taint(UNREACHABLE), taint("custom")];
        let tols = [tol(UNREACHABLE, Some(300)), tol("custom", Some(5))];
        assert_eq!(
            toleration_time(&taints, &tols),
            Some(Some(Duration::from_secs(5)))
        );
        let forever_and_five = [tol(UNREACHABLE, None), tol("custom", Some(5))];
        assert_eq!(
            toleration_time(&taints, &forever_and_five),
            Some(Some(Duration::from_secs(5)))
        );
    }
}
