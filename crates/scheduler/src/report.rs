//! The PodScheduled condition of pods that could not be scheduled.
//!
//! This module owns writing `PodScheduled=False` with a reason
//! (`Unschedulable`, or `SchedulerError` for internal errors) and the
//! FailedScheduling message onto `status.conditions`, through PUT
//! pods/NAME/status with a read-and-retry loop on 409 (there is no PATCH).
//! It writes only when the condition changes, and never onto a pod that
//! got a node or was replaced meanwhile. Events are the recorder's job.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

use crate::framework::pod_key;
use skiff_client::{is_conflict, is_not_found};

/// Condition reason when no node fits.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";
/// Condition reason for internal errors.
pub const REASON_SCHEDULER_ERROR: &str = "SchedulerError";
/// The condition type.
pub const POD_SCHEDULED: &str = "PodScheduled";

/// How many times a conflicting status write is retried.
const MAX_TRIES: usize = 5;

/// Errors writing the condition.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Re-reading the pod after a conflict failed.
    #[error("reading pod {pod}")]
    Get {
        /// `namespace/name`.
        pod: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The PUT failed.
    #[error("updating the status of pod {pod}")]
    Update {
        /// `namespace/name`.
        pod: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Every try conflicted.
    #[error("updating the status of pod {pod}: still conflicting after {MAX_TRIES} tries")]
    Conflicts {
        /// `namespace/name`.
        pod: String,
    },
}

/// `Result` with [`ReportError`].
pub type Result<T, E = ReportError> = std::result::Result<T, E>;

fn scheduled_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == POD_SCHEDULED)
}

/// Whether `pod` already has `PodScheduled=False` with this reason and
/// message.
pub fn has_unschedulable_condition(pod: &Pod, reason: &str, message: &str) -> bool {
    scheduled_condition(pod).is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    })
}

/// Sets `PodScheduled=False` on `pod`; `lastTransitionTime` moves only
/// when the status flips.
pub fn set_unschedulable_condition(pod: &mut Pod, reason: &str, message: &str, now: Time) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let new = |transition: Time| PodCondition {
        type_: POD_SCHEDULED.into(),
        status: "False".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(transition),
        last_probe_time: None,
        observed_generation: None,
    };
    match conditions.iter_mut().find(|c| c.type_ == POD_SCHEDULED) {
        Some(c) => {
            let transition = match (&c.status[..], &c.last_transition_time) {
                ("False", Some(t)) => t.clone(),
                _ => now,
            };
            *c = new(transition);
        }
        None => conditions.push(new(now)),
    }
}

fn assigned(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Writes `PodScheduled=False` onto the pod, starting from `pod` (the last
/// copy seen) and re-reading it on conflicts. Returns whether it wrote.
pub async fn report_unschedulable(
    client: Client,
    pod: &Pod,
    reason: &str,
    message: &str,
) -> Result<bool> {
    let key = pod_key(pod);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client, namespace);
    let mut current = pod.clone();
    for _ in 0..MAX_TRIES {
        if assigned(&current)
            || current.metadata.uid != pod.metadata.uid
            || has_unschedulable_condition(&current, reason, message)
        {
            return Ok(false);
        }
        set_unschedulable_condition(&mut current, reason, message, Time(Timestamp::now()));
        match api
            .replace_status(name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => return Ok(true),
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(e) if is_conflict(&e) => {}
            Err(source) => return Err(ReportError::Update { pod: key, source }),
        }
        current = match api.get(name).await {
            Ok(p) => p,
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(source) => return Err(ReportError::Get { pod: key, source }),
        };
    }
    Err(ReportError::Conflicts { pod: key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::pod;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).expect("timestamp"))
    }

    #[test]
    fn condition_is_set_and_transition_time_kept() {
        let mut p = pod("p").build();
        assert!(!has_unschedulable_condition(&p, REASON_UNSCHEDULABLE, "m1"));
        set_unschedulable_condition(&mut p, REASON_UNSCHEDULABLE, "m1", at(10));
        assert!(has_unschedulable_condition(&p, REASON_UNSCHEDULABLE, "m1"));
        assert!(!has_unschedulable_condition(&p, REASON_UNSCHEDULABLE, "m2"));
        set_unschedulable_condition(&mut p, REASON_UNSCHEDULABLE, "m2", at(20));
        let c = scheduled_condition(&p).expect("condition");
        assert_eq!(c.message.as_deref(), Some("m2"));
        assert_eq!(c.last_transition_time, Some(at(10)), "still False");
        assert_eq!(
            p.status.and_then(|s| s.conditions).map(|c| c.len()),
            Some(1)
        );
    }

    #[test]
    fn flipping_from_true_moves_the_transition_time() {
        let mut p = pod("p").build();
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![PodCondition {
                type_: POD_SCHEDULED.into(),
                status: "True".into(),
                last_transition_time: Some(at(1)),
                ..Default::default()
            }]),
            ..Default::default()
        });
        set_unschedulable_condition(&mut p, REASON_SCHEDULER_ERROR, "boom", at(5));
        let c = scheduled_condition(&p).expect("condition");
        assert_eq!(
            (c.status.as_str(), c.last_transition_time.clone()),
            ("False", Some(at(5)))
        );
    }
}
