//! A Job's `podFailurePolicy` (upstream's `matchPodFailurePolicy`): the
//! first rule that a failed pod matches, on its containers' exit codes or
//! its conditions, decides whether the pod fails the Job, is ignored, is
//! counted towards `backoffLimit`, or fails its index.
//!
//! Pure functions; no I/O.

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// What a policy says about one failed pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `Some(message)` when the pod fails the whole Job (action FailJob).
    pub fail_job: Option<String>,
    /// Whether the failure counts towards `backoffLimit` (not for Ignore).
    pub count: bool,
    /// The matching rule's action, if a rule matched.
    pub action: Option<String>,
}

impl Verdict {
    fn unmatched() -> Self {
        Self {
            fail_job: None,
            count: true,
            action: None,
        }
    }
}

/// Matches the failed `pod` against `policy`.
pub fn matches(policy: &PodFailurePolicy, pod: &Pod) -> Verdict {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched = if let Some(req) = &rule.on_exit_codes {
            matching_container(req, pod).map(|(container, code)| {
                format!(
                    "Container {container} for pod {namespace}/{name} failed with exit code {code} matching {} rule at index {index}",
                    rule.action
                )
            })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            let conditions = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .unwrap_or_default();
            patterns.iter().find_map(|p| {
                let want = if p.status.is_empty() { "True" } else { &p.status };
                conditions
                    .iter()
                    .any(|c| c.type_ == p.type_ && c.status == want)
                    .then(|| {
                        format!(
                            "Pod {namespace}/{name} has condition {} matching {} rule at index {index}",
                            p.type_, rule.action
                        )
                    })
            })
        } else {
            None
        };
        let Some(message) = matched else {
            continue;
        };
        return Verdict {
            fail_job: (rule.action == "FailJob").then_some(message),
            count: rule.action != "Ignore",
            action: Some(rule.action.clone()),
        };
    }
    Verdict::unmatched()
}

/// The first container (init containers first) that terminated with a
/// non-zero exit code the requirement matches.
fn matching_container(
    req: &PodFailurePolicyOnExitCodesRequirement,
    pod: &Pod,
) -> Option<(String, i32)> {
    let status = pod.status.as_ref()?;
    let all = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    all.filter(|c: &&ContainerStatus| req.container_name.as_ref().is_none_or(|n| *n == c.name))
        .find_map(|c| {
            let code = c.state.as_ref()?.terminated.as_ref()?.exit_code;
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            (code != 0 && hit).then(|| (c.name.clone(), code))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(rules: serde_json::Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).unwrap()
    }

    fn failed(exit: i32, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": {"phase": "Failed", "conditions": conditions,
                "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false,
                    "restartCount": 0, "state": {"terminated": {"exitCode": exit}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn exit_code_rules_decide_in_order() {
        let p = policy(json!([
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42, 3]}},
        ]));
        let v = matches(&p, &failed(42, json!([])));
        assert_eq!(
            v.fail_job.as_deref(),
            Some("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1")
        );
        let v = matches(&p, &failed(3, json!([])));
        assert_eq!((v.count, v.action.as_deref()), (false, Some("Ignore")));
        let v = matches(&p, &failed(1, json!([])));
        assert_eq!(
            (v.count, v.action.as_deref(), v.fail_job),
            (true, Some("Count"), None)
        );
        // Exit code 0 never matches, not even NotIn.
        let v = matches(&p, &failed(0, json!([])));
        assert_eq!(v, Verdict::unmatched());
    }

    #[test]
    fn pod_condition_rules_match_type_and_status() {
        let p = policy(json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]));
        let v = matches(
            &p,
            &failed(1, json!([{"type": "DisruptionTarget", "status": "True"}])),
        );
        assert!(!v.count);
        let v = matches(
            &p,
            &failed(1, json!([{"type": "DisruptionTarget", "status": "False"}])),
        );
        assert!(v.count && v.action.is_none());
    }
}
