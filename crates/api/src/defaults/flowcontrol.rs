//! flowcontrol.apiserver.k8s.io/v1 defaults (upstream `SetDefaults_*` in
//! pkg/apis/flowcontrol/v1) and the configuration objects the API server
//! creates (upstream's apis/flowcontrol/bootstrap, 1.33): the mandatory
//! `exempt` and `catch-all` priority levels and flow schemas, and the
//! suggested ones (`system`, `workload-high`, `global-default`, ...).

use serde_json::{json, Map, Value};

/// The annotation marking a configuration object the server keeps up to date.
pub const AUTO_UPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

fn set_default(obj: &mut Map<String, Value>, field: &str, value: Value) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj.insert(field.to_string(), value);
    }
}

/// A FlowSchema: matchingPrecedence 1000 when unset or 0.
pub fn flow_schema(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec
        .get("matchingPrecedence")
        .is_none_or(|p| p.is_null() || p.as_i64() == Some(0))
    {
        spec.insert("matchingPrecedence".into(), json!(1000));
    }
}

/// A PriorityLevelConfiguration: a limited level's shares (30), lendable
/// percent (0) and queuing (64 queues, hand size 8, 50 long); an exempt
/// level's shares and lendable percent (0).
pub fn priority_level_configuration(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(limited) = spec.get_mut("limited").and_then(Value::as_object_mut) {
        set_default(limited, "nominalConcurrencyShares", json!(30));
        set_default(limited, "lendablePercent", json!(0));
        if let Some(queuing) = limited
            .get_mut("limitResponse")
            .and_then(|r| r.get_mut("queuing"))
            .and_then(Value::as_object_mut)
        {
            for (field, value) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
                if queuing
                    .get(field)
                    .is_none_or(|v| v.is_null() || v.as_i64() == Some(0))
                {
                    queuing.insert(field.into(), json!(value));
                }
            }
        }
    }
    if let Some(exempt) = spec.get_mut("exempt").and_then(Value::as_object_mut) {
        set_default(exempt, "nominalConcurrencyShares", json!(0));
        set_default(exempt, "lendablePercent", json!(0));
    }
}

/// The spec of the mandatory priority level `name`, if it is one.
pub fn mandatory_priority_level_spec(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({
            "type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0},
        })),
        "catch-all" => Some(json!({
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 5,
                "lendablePercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        })),
        _ => None,
    }
}

fn everything() -> (Value, Value) {
    (
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}]),
        json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]),
    )
}

/// The spec of the mandatory flow schema `name`, if it is one.
pub fn mandatory_flow_schema_spec(name: &str) -> Option<Value> {
    let (resource_rules, non_resource_rules) = everything();
    match name {
        "exempt" => Some(json!({
            "priorityLevelConfiguration": {"name": "exempt"},
            "matchingPrecedence": 1,
            "rules": [{
                "subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
            }],
        })),
        "catch-all" => Some(json!({
            "priorityLevelConfiguration": {"name": "catch-all"},
            "matchingPrecedence": 10000,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [
                    {"kind": "Group", "group": {"name": "system:unauthenticated"}},
                    {"kind": "Group", "group": {"name": "system:authenticated"}},
                ],
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
            }],
        })),
        _ => None,
    }
}

fn limited(shares: i64, lendable: i64, queues: i64, hand: i64) -> Value {
    json!({"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares,
        "lendablePercent": lendable,
        "limitResponse": {"type": "Queue", "queuing":
            {"queues": queues, "handSize": hand, "queueLengthLimit": 50}},
    }})
}

/// The suggested priority levels upstream creates (apis/flowcontrol/
/// bootstrap, 1.33): (name, spec).
pub fn suggested_priority_levels() -> Vec<(&'static str, Value)> {
    vec![
        ("system", limited(30, 33, 64, 6)),
        ("node-high", limited(40, 25, 64, 6)),
        ("leader-election", limited(10, 0, 16, 4)),
        ("workload-high", limited(40, 50, 128, 6)),
        ("workload-low", limited(100, 90, 128, 6)),
        ("global-default", limited(20, 50, 128, 6)),
    ]
}

fn subjects(kind: &str, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| match kind {
            "Group" => json!({"kind": "Group", "group": {"name": n}}),
            "User" => json!({"kind": "User", "user": {"name": n}}),
            _ => json!({"kind": "ServiceAccount",
                "serviceAccount": {"name": n, "namespace": "kube-system"}}),
        })
        .collect()
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str], cluster: bool) -> Value {
    let mut r = json!({"verbs": verbs, "apiGroups": groups, "resources": resources,
        "namespaces": ["*"]});
    if cluster {
        if let Some(m) = r.as_object_mut() {
            m.insert("clusterScope".into(), json!(true));
        }
    }
    r
}

fn schema(level: &str, precedence: i64, by: Option<&str>, rule: Value) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if let (Some(by), Some(m)) = (by, spec.as_object_mut()) {
        m.insert("distinguisherMethod".into(), json!({"type": by}));
    }
    spec
}

/// A rule over every resource and URL for `subjects`.
fn everything_for(subjects: Vec<Value>) -> Value {
    let (resource_rules, non_resource_rules) = everything();
    json!({"subjects": subjects, "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules})
}

/// The suggested flow schemas upstream creates, in its order: (name, spec).
pub fn suggested_flow_schemas() -> Vec<(&'static str, Value)> {
    const KCM: &str = "system:kube-controller-manager";
    const SCHED: &str = "system:kube-scheduler";
    const RW: &[&str] = &["get", "create", "update"];
    let mut leader_subjects = subjects("User", &[KCM, SCHED]);
    leader_subjects.extend(subjects("ServiceAccount", &["*"]));
    let mut endpoint_subjects = subjects("User", &[KCM]);
    endpoint_subjects.extend(subjects(
        "ServiceAccount",
        &["endpoint-controller", "endpointslicemirroring-controller"],
    ));
    vec![
        (
            "system-nodes",
            schema(
                "system",
                500,
                Some("ByUser"),
                everything_for(subjects("Group", &["system:nodes"])),
            ),
        ),
        (
            "system-node-high",
            schema(
                "node-high",
                400,
                Some("ByUser"),
                json!({
                    "subjects": subjects("Group", &["system:nodes"]),
                    "resourceRules": [
                        resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true),
                        resource_rule(&["*"], &["coordination.k8s.io"], &["leases"], false),
                    ],
                }),
            ),
        ),
        (
            "probes",
            schema(
                "exempt",
                2,
                None,
                json!({
                    "subjects": subjects("Group", &["system:unauthenticated", "system:authenticated"]),
                    "nonResourceRules": [{"verbs": ["get"],
                        "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}],
                }),
            ),
        ),
        (
            "system-leader-election",
            schema(
                "leader-election",
                100,
                Some("ByUser"),
                json!({
                    "subjects": leader_subjects,
                    "resourceRules": [resource_rule(RW, &["coordination.k8s.io"], &["leases"], false)],
                }),
            ),
        ),
        (
            "workload-leader-election",
            schema(
                "leader-election",
                200,
                Some("ByUser"),
                json!({
                    "subjects": subjects("ServiceAccount", &["*"]),
                    "resourceRules": [
                        resource_rule(RW, &[""], &["endpoints", "configmaps"], false),
                        resource_rule(RW, &["coordination.k8s.io"], &["leases"], false),
                    ],
                }),
            ),
        ),
        (
            "endpoint-controller",
            schema(
                "workload-high",
                150,
                Some("ByUser"),
                json!({
                    "subjects": endpoint_subjects,
                    "resourceRules": [resource_rule(RW, &[""], &["endpoints"], false)],
                }),
            ),
        ),
        (
            "kube-controller-manager",
            schema(
                "workload-high",
                800,
                Some("ByNamespace"),
                everything_for(subjects("User", &[KCM])),
            ),
        ),
        (
            "kube-scheduler",
            schema(
                "workload-high",
                800,
                Some("ByNamespace"),
                everything_for(subjects("User", &[SCHED])),
            ),
        ),
        (
            "kube-system-service-accounts",
            schema(
                "workload-high",
                900,
                Some("ByNamespace"),
                everything_for(subjects("ServiceAccount", &["*"])),
            ),
        ),
        (
            "service-accounts",
            schema(
                "workload-low",
                9000,
                Some("ByUser"),
                everything_for(subjects("Group", &["system:serviceaccounts"])),
            ),
        ),
        (
            "global-default",
            schema(
                "global-default",
                9900,
                Some("ByUser"),
                everything_for(subjects(
                    "Group",
                    &["system:unauthenticated", "system:authenticated"],
                )),
            ),
        ),
    ]
}

/// The mandatory objects' names, in the order upstream creates them.
pub const MANDATORY_NAMES: &[&str] = &["exempt", "catch-all"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limited_levels_get_queuing_defaults() {
        let mut pl = json!({"spec": {"type": "Limited", "limited": {"limitResponse":
            {"type": "Queue", "queuing": {}}}}});
        priority_level_configuration(&mut pl);
        assert_eq!(
            pl["spec"]["limited"],
            json!({"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse":
                {"type": "Queue", "queuing": {"handSize": 8, "queues": 64, "queueLengthLimit": 50}}})
        );
        let mut fs = json!({"spec": {}});
        flow_schema(&mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        assert!(mandatory_flow_schema_spec("exempt").is_some());
        assert!(mandatory_priority_level_spec("global-default").is_none());
        assert_eq!(suggested_priority_levels().len(), 6);
        assert_eq!(suggested_flow_schemas().len(), 11);
    }
}
