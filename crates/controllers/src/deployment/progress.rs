//! A Deployment's status and conditions, as upstream's
//! `calculateStatus` and `syncRolloutStatus` write them: counts summed
//! over its ReplicaSets; `Available` (MinimumReplicasAvailable /
//! MinimumReplicasUnavailable); `Progressing` with NewReplicaSetCreated,
//! FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
//! ProgressDeadlineExceeded, DeploymentPaused and DeploymentResumed;
//! `ReplicaFailure` carried over from a ReplicaSet. A condition whose
//! status does not change keeps its lastTransitionTime.
//!
//! Pure; the time is given. No I/O.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::sets::{self, Set};

pub const PROGRESSING: &str = "Progressing";
pub const AVAILABLE: &str = "Available";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";

/// A new condition stamped `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`.
pub fn get<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
}

/// Sets a condition as upstream's `SetDeploymentCondition`: the same
/// status and reason change nothing; the same status keeps the
/// transition time.
pub fn set(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(current) = get(status, &c.type_) {
        if current.status == c.status && current.reason == c.reason {
            return;
        }
        if current.status == c.status {
            c.last_transition_time = current.last_transition_time.clone();
        }
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|x| x.type_ != c.type_);
    conditions.push(c);
}

/// Removes the condition of `type_`.
pub fn remove(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
        if conditions.is_empty() {
            status.conditions = None;
        }
    }
}

/// spec.progressDeadlineSeconds, unless unset or "never".
pub fn deadline(d: &Deployment) -> Option<Duration> {
    let s = d.spec.as_ref()?.progress_deadline_seconds?;
    (s != i32::MAX && s >= 0).then(|| Duration::from_secs(s.unsigned_abs().into()))
}

fn replicas_field(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The counts and the Available condition (upstream's `calculateStatus`).
pub fn calculate(
    d: &Deployment,
    all: &[&Set],
    new: Option<&Set>,
    now: Timestamp,
) -> DeploymentStatus {
    let current = d.status.clone().unwrap_or_default();
    let available = sets::available_replicas(all);
    let total = sets::spec_replicas(all);
    let unavailable = (total - available).max(0);
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: replicas_field(sets::actual_replicas(all)),
        updated_replicas: replicas_field(new.map(|n| n.actual).unwrap_or(0)),
        ready_replicas: replicas_field(sets::ready_replicas(all)),
        available_replicas: replicas_field(available),
        unavailable_replicas: replicas_field(unavailable),
        collision_count: current.collision_count,
        conditions: current.conditions.clone(),
        terminating_replicas: None,
    };
    if available >= sets::replicas(d) - sets::max_unavailable(d) {
        set(
            &mut status,
            condition(
                AVAILABLE,
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            ),
        );
    } else {
        set(
            &mut status,
            condition(
                AVAILABLE,
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            ),
        );
    }
    status
}

/// Every replica updated and available, and this generation observed.
pub fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let desired = sets::replicas(d);
    status.updated_replicas.unwrap_or(0) == desired
        && status.replicas.unwrap_or(0) == desired
        && status.available_replicas.unwrap_or(0) == desired
        && status.observed_generation >= d.metadata.generation
}

/// Some progress since the status `d` has now.
fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = old.replicas.unwrap_or(0) - old.updated_replicas.unwrap_or(0);
    let new_old = new.replicas.unwrap_or(0) - new.updated_replicas.unwrap_or(0);
    new.updated_replicas.unwrap_or(0) > old.updated_replicas.unwrap_or(0)
        || new_old < old_old
        || new.ready_replicas.unwrap_or(0) > old.ready_replicas.unwrap_or(0)
        || new.available_replicas.unwrap_or(0) > old.available_replicas.unwrap_or(0)
}

fn timed_out(d: &Deployment, status: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(limit) = deadline(d) else {
        return false;
    };
    let Some(c) = get(status, PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + limit < now),
    }
}

/// The status after a rollout step (upstream's `syncRolloutStatus`).
pub fn rollout(
    d: &Deployment,
    all: &[&Set],
    new: Option<&Set>,
    now: Timestamp,
) -> DeploymentStatus {
    let mut status = calculate(d, all, new, now);
    if deadline(d).is_none() {
        remove(&mut status, PROGRESSING);
    }
    let current = d.status.as_ref().and_then(|s| get(s, PROGRESSING)).cloned();
    let was_complete = status.replicas == status.updated_replicas
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    let name = d.metadata.name.clone().unwrap_or_default();
    if deadline(d).is_some() && !was_complete {
        let subject = match new {
            Some(n) => format!("ReplicaSet {:?}", n.name),
            None => format!("Deployment {name:?}"),
        };
        if complete(d, &status) {
            set(
                &mut status,
                condition(
                    PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE,
                    &format!("{subject} has successfully progressed."),
                    now,
                ),
            );
        } else if progressing(d, &status) {
            let mut c = condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                &format!("{subject} is progressing."),
                now,
            );
            if let Some(current) = &current {
                if current.status == "True" {
                    c.last_transition_time = current.last_transition_time.clone();
                }
                remove(&mut status, PROGRESSING);
            }
            set(&mut status, c);
        } else if timed_out(d, &status, now) {
            set(
                &mut status,
                condition(
                    PROGRESSING,
                    "False",
                    TIMED_OUT,
                    &format!("{subject} has timed out progressing."),
                    now,
                ),
            );
        }
    }
    // A ReplicaSet's failure, the new one's first.
    let failure = new
        .into_iter()
        .chain(all.iter().copied())
        .find_map(|s| s.failure.clone());
    match failure {
        Some((st, reason, message)) => set(
            &mut status,
            condition(REPLICA_FAILURE, &st, &reason, &message, now),
        ),
        None => remove(&mut status, REPLICA_FAILURE),
    }
    status
}

/// When to look again for a stuck rollout's deadline (upstream's
/// `requeueStuckDeployment`).
pub fn recheck_after(
    d: &Deployment,
    status: &DeploymentStatus,
    now: Timestamp,
) -> Option<Duration> {
    let limit = deadline(d)?;
    let current = d.status.as_ref().and_then(|s| get(s, PROGRESSING))?;
    if complete(d, status) || current.reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let from = current.last_update_time.as_ref()?.0;
    let after = (from + limit).duration_since(now);
    let after = Duration::try_from(after).unwrap_or(Duration::ZERO);
    Some(if after < Duration::from_secs(1) {
        Duration::from_secs(1)
    } else {
        after + Duration::from_secs(1)
    })
}

/// The Progressing condition for a pause or a resume, if it changes
/// (upstream's `checkPausedConditions`).
pub fn paused(d: &Deployment, now: Timestamp) -> Option<DeploymentStatus> {
    deadline(d)?;
    let mut status = d.status.clone().unwrap_or_default();
    let reason = get(&status, PROGRESSING).and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(TIMED_OUT) {
        return None;
    }
    let is_paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let has_paused = reason.as_deref() == Some(PAUSED);
    if is_paused && !has_paused {
        set(
            &mut status,
            condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now),
        );
        Some(status)
    } else if !is_paused && has_paused {
        set(
            &mut status,
            condition(
                PROGRESSING,
                "Unknown",
                RESUMED,
                "Deployment is resumed",
                now,
            ),
        );
        Some(status)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::DeploymentSpec;

    use super::*;

    fn d(replicas: i32) -> Deployment {
        Deployment {
            metadata: kube::api::ObjectMeta {
                name: Some("web".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                progress_deadline_seconds: Some(600),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn set_of(name: &str, replicas: i32, available: i32) -> Set {
        Set {
            name: name.into(),
            uid: name.into(),
            created: None,
            replicas,
            actual: replicas,
            ready: available,
            available,
            annotations: Default::default(),
            deleting: false,
            generation: 1,
            observed_generation: 1,
            failure: None,
        }
    }

    #[test]
    fn progressing_then_complete_then_timed_out() {
        let now = Timestamp::now();
        let mut dep = d(3);
        let new = set_of("web-1", 3, 1);
        let status = rollout(&dep, &[&new], Some(&new), now);
        let c = get(&status, PROGRESSING).unwrap();
        assert_eq!(c.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-1\" is progressing.")
        );
        assert_eq!(get(&status, AVAILABLE).unwrap().status, "False");

        // No progress for longer than the deadline: timed out.
        dep.status = Some(status);
        let later = now + Duration::from_secs(601);
        let stuck = rollout(&dep, &[&new], Some(&new), later);
        assert_eq!(
            get(&stuck, PROGRESSING).unwrap().reason.as_deref(),
            Some(TIMED_OUT)
        );
        assert_eq!(get(&stuck, PROGRESSING).unwrap().status, "False");

        // All available: complete, and Available.
        let done = set_of("web-1", 3, 3);
        let status = rollout(&dep, &[&done], Some(&done), later);
        assert_eq!(
            get(&status, PROGRESSING).unwrap().reason.as_deref(),
            Some(NEW_RS_AVAILABLE)
        );
        assert_eq!(
            get(&status, AVAILABLE).unwrap().reason.as_deref(),
            Some("MinimumReplicasAvailable")
        );
        assert!(complete(&dep, &status));
    }

    #[test]
    fn pause_and_resume_set_the_progressing_reason() {
        let now = Timestamp::now();
        let mut dep = d(1);
        dep.spec.as_mut().unwrap().paused = Some(true);
        let status = paused(&dep, now).unwrap();
        assert_eq!(
            get(&status, PROGRESSING).unwrap().reason.as_deref(),
            Some(PAUSED)
        );
        dep.status = Some(status);
        assert!(paused(&dep, now).is_none());
        dep.spec.as_mut().unwrap().paused = Some(false);
        let status = paused(&dep, now).unwrap();
        assert_eq!(
            get(&status, PROGRESSING).unwrap().reason.as_deref(),
            Some(RESUMED)
        );
    }
}
