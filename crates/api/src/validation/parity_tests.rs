//! Table tests of per-kind validation against upstream's cases (named
//! after the cases of kube-apiserver 1.33's `pkg/apis/*/validation`
//! tests), with upstream's field paths and wording.

use serde_json::{json, Value};

use super::FieldError;

fn fields(errors: &[FieldError]) -> Vec<(String, String)> {
    errors
        .iter()
        .map(|e| (e.field.clone(), e.message.clone()))
        .collect()
}

/// Asserts `errors` holds `(field, message)`.
fn has(errors: &[FieldError], field: &str, message: &str) {
    assert!(
        errors
            .iter()
            .any(|e| e.field == field && e.message == message),
        "no `{field}: {message}` in {:#?}",
        fields(errors)
    );
}

fn template(restart: &str) -> Value {
    json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"restartPolicy": restart, "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "c", "image": "i"}]}})
}

fn deployment() -> Value {
    json!({"kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "a"}},
        "template": template("Always"),
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}})
}

fn with(mut obj: Value, pointer: &str, value: Value) -> Value {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let slot = obj.pointer_mut(parent).unwrap();
    slot[last] = value;
    obj
}

#[test]
fn validate_deployment_valid() {
    assert_eq!(fields(&super::deployment(&deployment())), vec![]);
    let recreate = with(deployment(), "/spec/strategy", json!({"type": "Recreate"}));
    assert_eq!(fields(&super::deployment(&recreate)), vec![]);
}

#[test]
fn validate_deployment_invalid_cases() {
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "validate_deployment_invalid_strategy_type",
            with(deployment(), "/spec/strategy", json!({"type": "randomType"})),
            "spec.strategy",
            "Unsupported value: apps.DeploymentStrategy{Type:\"randomType\", RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\"",
        ),
        (
            "validate_deployment_rolling_update_with_recreate",
            with(deployment(), "/spec/strategy/type", json!("Recreate")),
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            "validate_deployment_invalid_max_surge",
            with(deployment(), "/spec/strategy/rollingUpdate/maxSurge", json!("20Percent")),
            "spec.strategy.rollingUpdate.maxSurge",
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"20Percent\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        ),
        (
            "validate_deployment_max_unavailable_and_max_surge_zero",
            with(
                deployment(),
                "/spec/strategy/rollingUpdate",
                json!({"maxUnavailable": 0, "maxSurge": 0}),
            ),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
        ),
        (
            "validate_deployment_max_unavailable_over_100_percent",
            with(deployment(), "/spec/strategy/rollingUpdate/maxUnavailable", json!("110%")),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"110%\"}: must not be greater than 100%",
        ),
        (
            "validate_deployment_negative_max_unavailable",
            with(deployment(), "/spec/strategy/rollingUpdate/maxUnavailable", json!(-1)),
            "spec.strategy.rollingUpdate.maxUnavailable",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "validate_deployment_negative_revision_history_limit",
            with(deployment(), "/spec/revisionHistoryLimit", json!(-1)),
            "spec.revisionHistoryLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "validate_deployment_negative_min_ready_seconds",
            with(deployment(), "/spec/minReadySeconds", json!(-1)),
            "spec.minReadySeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "validate_deployment_negative_replicas",
            with(deployment(), "/spec/replicas", json!(-1)),
            "spec.replicas",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "validate_deployment_negative_progress_deadline_seconds",
            with(deployment(), "/spec/progressDeadlineSeconds", json!(-1)),
            "spec.progressDeadlineSeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "validate_deployment_progress_deadline_not_greater_than_min_ready",
            with(
                with(deployment(), "/spec/progressDeadlineSeconds", json!(10)),
                "/spec/minReadySeconds",
                json!(10),
            ),
            "spec.progressDeadlineSeconds",
            "Invalid value: 10: must be greater than minReadySeconds",
        ),
        (
            "validate_deployment_restart_policy_never",
            with(deployment(), "/spec/template/spec/restartPolicy", json!("Never")),
            "spec.template.spec.restartPolicy",
            "Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            "validate_deployment_active_deadline_seconds",
            with(deployment(), "/spec/template/spec/activeDeadlineSeconds", json!(10)),
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
        ),
    ];
    for (name, obj, field, message) in cases {
        let errors = super::deployment(&obj);
        assert!(
            errors
                .iter()
                .any(|e| e.field == field && e.message == message),
            "{name}: no `{field}: {message}` in {:#?}",
            fields(&errors)
        );
    }
}

#[test]
fn validate_replica_set_invalid_cases() {
    let rs = with(deployment(), "/kind", json!("ReplicaSet"));
    has(
        &super::replica_set(&with(rs.clone(), "/spec/selector", json!({"matchLabels": {}}))),
        "spec.selector",
        "Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment",
    );
    has(
        &super::replica_set(&with(
            rs.clone(),
            "/spec/selector",
            json!({"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "k", "operator": "Near"}]}),
        )),
        "spec.selector.matchExpressions[0].operator",
        "Invalid value: \"Near\": not a valid selector operator",
    );
    has(
        &super::replica_set(&with(rs.clone(), "/spec/minReadySeconds", json!(-1))),
        "spec.minReadySeconds",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &super::replica_set(&with(
            rs,
            "/spec/template/spec/restartPolicy",
            json!("OnFailure"),
        )),
        "spec.template.spec.restartPolicy",
        "Unsupported value: \"OnFailure\": supported values: \"Always\"",
    );
}

fn sts() -> Value {
    json!({"kind": "StatefulSet", "spec": {"replicas": 1, "podManagementPolicy": "OrderedReady",
        "selector": {"matchLabels": {"app": "a"}}, "template": template("Always"),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "revisionHistoryLimit": 10}})
}

#[test]
fn validate_stateful_set_invalid_cases() {
    assert_eq!(fields(&super::stateful_set(&sts())), vec![]);
    has(
        &super::stateful_set(&with(sts(), "/spec/revisionHistoryLimit", json!(-1))),
        "spec.revisionHistoryLimit",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &super::stateful_set(&with(sts(), "/spec/replicas", json!(-1))),
        "spec.replicas",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &super::stateful_set(&with(
            sts(),
            "/spec/updateStrategy/rollingUpdate/partition",
            json!(-1),
        )),
        "spec.updateStrategy.rollingUpdate.partition",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &super::stateful_set(&with(
            sts(),
            "/spec/template/spec/activeDeadlineSeconds",
            json!(5),
        )),
        "spec.template.spec.activeDeadlineSeconds",
        "Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
    );
}

fn ds() -> Value {
    json!({"kind": "DaemonSet", "spec": {"selector": {"matchLabels": {"app": "a"}},
        "template": template("Always"), "revisionHistoryLimit": 10,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}})
}

#[test]
fn validate_daemon_set_invalid_cases() {
    assert_eq!(fields(&super::daemon_set(&ds())), vec![]);
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with(ds(), "/spec/revisionHistoryLimit", json!(-1)),
            "spec.revisionHistoryLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(ds(), "/spec/updateStrategy", json!({"type": "Foo"})),
            "spec.updateStrategy",
            "Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Foo\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\"",
        ),
        (
            with(ds(), "/spec/updateStrategy/rollingUpdate/maxSurge", json!("10%")),
            "spec.updateStrategy.rollingUpdate.maxSurge",
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"10%\"}: may not be set when maxUnavailable is non-zero",
        ),
        (
            with(ds(), "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("101%")),
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"101%\"}: must not be greater than 100%",
        ),
        (
            with(ds(), "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!(-1)),
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(ds(), "/spec/template/spec/activeDeadlineSeconds", json!(5)),
            "spec.template.spec.activeDeadlineSeconds",
            "Forbidden: activeDeadlineSeconds in DaemonSet is not Supported",
        ),
        (
            with(ds(), "/spec/minReadySeconds", json!(-1)),
            "spec.minReadySeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
    ];
    for (obj, field, message) in cases {
        has(&super::daemon_set(&obj), field, message);
    }
}

fn job() -> Value {
    json!({"kind": "Job", "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 6,
        "selector": {"matchLabels": {"app": "a"}}, "template": template("Never")}})
}

#[test]
fn validate_job_valid() {
    assert_eq!(fields(&super::job(&job())), vec![]);
    let indexed = with(job(), "/spec/completionMode", json!("Indexed"));
    let indexed = with(indexed, "/spec/backoffLimitPerIndex", json!(1));
    assert_eq!(fields(&super::job(&indexed)), vec![]);
}

#[test]
fn validate_job_invalid_cases() {
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with(job(), "/spec/parallelism", json!(-1)),
            "spec.parallelism",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(job(), "/spec/completions", json!(-1)),
            "spec.completions",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(job(), "/spec/activeDeadlineSeconds", json!(-1)),
            "spec.activeDeadlineSeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(job(), "/spec/backoffLimit", json!(-1)),
            "spec.backoffLimit",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(job(), "/spec/ttlSecondsAfterFinished", json!(-1)),
            "spec.ttlSecondsAfterFinished",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            with(job(), "/spec/completionMode", json!("Sometimes")),
            "spec.completionMode",
            "Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\"",
        ),
        (
            with(
                with(job(), "/spec/completionMode", json!("Indexed")),
                "/spec/completions",
                Value::Null,
            ),
            "spec.completions",
            "Required value: when completion mode is Indexed",
        ),
        (
            with(
                with(job(), "/spec/completionMode", json!("Indexed")),
                "/spec/parallelism",
                json!(100_001),
            ),
            "spec.parallelism",
            "Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
        ),
        (
            with(job(), "/spec/backoffLimitPerIndex", json!(1)),
            "spec.backoffLimitPerIndex",
            "Invalid value: 1: requires indexed completion mode",
        ),
        (
            with(job(), "/spec/maxFailedIndexes", json!(1)),
            "spec.backoffLimitPerIndex",
            "Required value: when maxFailedIndexes is specified",
        ),
        (
            with(job(), "/spec/podReplacementPolicy", json!("Sometimes")),
            "spec.podReplacementPolicy",
            "Unsupported value: \"Sometimes\": supported values: \"Failed\", \"TerminatingOrFailed\"",
        ),
        (
            with(job(), "/spec/template/spec/restartPolicy", json!("Always")),
            "spec.template.spec.restartPolicy",
            "Required value: valid values: \"OnFailure\", \"Never\"",
        ),
        (
            with(
                with(job(), "/spec/template/spec/restartPolicy", json!("OnFailure")),
                "/spec/podFailurePolicy",
                json!({"rules": []}),
            ),
            "spec.template.spec.restartPolicy",
            "Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified",
        ),
    ];
    for (obj, field, message) in cases {
        has(&super::job(&obj), field, message);
    }
}

#[test]
fn validate_cron_job_template_counters() {
    let cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *",
        "concurrencyPolicy": "Allow", "startingDeadlineSeconds": -1,
        "jobTemplate": {"spec": {"backoffLimit": -1, "template": template("Never")}}}});
    let errors = super::cron_job(&cj);
    has(
        &errors,
        "spec.startingDeadlineSeconds",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &errors,
        "spec.jobTemplate.spec.backoffLimit",
        "Invalid value: -1: must be greater than or equal to 0",
    );
}

fn node(spec: Value) -> Value {
    json!({"kind": "Node", "metadata": {"name": "n"}, "spec": spec})
}

#[test]
fn validate_node_pod_cidrs() {
    let ok = node(json!({"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24", "fd00::/64"]}));
    assert_eq!(fields(&super::node(&ok)), vec![]);
    let cases: Vec<(&str, Value, &str, &str)> = vec![
        (
            "invalid-pod-cidr",
            node(json!({"podCIDR": "192.168.0.0"})),
            "spec.podCIDRs[0]",
            "Invalid value: \"192.168.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ),
        (
            "invalid-pod-cidrs-entry",
            node(json!({"podCIDRs": ["10.0.0.0/24", "x"]})),
            "spec.podCIDRs[1]",
            "Invalid value: \"x\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ),
        (
            "duplicate-pod-cidr",
            node(json!({"podCIDRs": ["10.0.0.0/24", "10.0.0.0/24"]})),
            "spec.podCIDRs[1]",
            "Duplicate value: \"10.0.0.0/24\"",
        ),
        (
            "multi-pod-cidr-same-family",
            node(json!({"podCIDRs": ["10.0.0.0/24", "10.1.0.0/24"]})),
            "spec.podCIDRs",
            "Invalid value: []string{\"10.0.0.0/24\", \"10.1.0.0/24\"}: may specify no more than one CIDR for each IP family",
        ),
        (
            "multi-pod-cidr-three",
            node(json!({"podCIDRs": ["10.0.0.0/24", "fd00::/64", "10.1.0.0/24"]})),
            "spec.podCIDRs",
            "Invalid value: []string{\"10.0.0.0/24\", \"fd00::/64\", \"10.1.0.0/24\"}: may specify no more than one CIDR for each IP family",
        ),
        (
            "invalid-taint-effect",
            node(json!({"taints": [{"key": "k", "effect": "Bogus"}]})),
            "metadata.taints[0].effect",
            "Unsupported value: \"Bogus\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
        ),
        (
            "duplicated-taints-with-same-key-effect",
            node(json!({"taints": [{"key": "k", "value": "a", "effect": "NoSchedule"},
                {"key": "k", "value": "b", "effect": "NoSchedule"}]})),
            "metadata.taints[1]",
            "Duplicate value: core.Taint{Key:\"k\", Value:\"b\", Effect:\"NoSchedule\", TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair",
        ),
    ];
    for (name, obj, field, message) in cases {
        let errors = super::node(&obj);
        assert!(
            errors
                .iter()
                .any(|e| e.field == field && e.message == message),
            "{name}: no `{field}: {message}` in {:#?}",
            fields(&errors)
        );
    }
    // podCIDR wins over a differing podCIDRs[0] (v1 conversion).
    assert_eq!(
        super::node_pod_cidrs(&node(json!({"podCIDR": "10.2.0.0/24", "podCIDRs": ["x"]}))),
        vec!["10.2.0.0/24"]
    );
}

#[test]
fn validate_node_update_pod_cidrs_and_provider_id() {
    let old = node(json!({"podCIDR": "10.0.0.0/24", "providerID": "p1"}));
    assert_eq!(fields(&super::node_update(&old, &old)), vec![]);
    let unset = node(json!({}));
    assert_eq!(fields(&super::node_update(&unset, &old)), vec![]);
    let changed = node(json!({"podCIDR": "10.1.0.0/24", "providerID": "p2"}));
    assert_eq!(
        fields(&super::node_update(&old, &changed)),
        vec![
            (
                "spec.podCIDRs".to_string(),
                "Forbidden: node updates may not change podCIDR except from \"\" to valid"
                    .to_string()
            ),
            (
                "spec.providerID".to_string(),
                "Forbidden: node updates may not change providerID except from \"\" to valid"
                    .to_string()
            ),
        ]
    );
    let added = node(json!({"podCIDRs": ["10.0.0.0/24", "fd00::/64"], "providerID": "p1"}));
    has(
        &super::node_update(&old, &added),
        "spec.podCIDRs",
        "Forbidden: node updates may not change podCIDR except from \"\" to valid",
    );
    let mut dup = old.clone();
    dup["status"] = json!({"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "InternalIP", "address": "10.0.0.1"}]});
    has(
        &super::node_update(&old, &dup),
        "status.addresses[1]",
        "Duplicate value: core.NodeAddress{Type:\"InternalIP\", Address:\"10.0.0.1\"}",
    );
}

fn pod(spec: Value) -> Value {
    let mut p = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "containers": [{"name": "c", "image": "i"}]}});
    for (k, v) in spec.as_object().unwrap() {
        p["spec"][k] = v.clone();
    }
    p
}

#[test]
fn validate_pod_spec_invalid_cases() {
    assert_eq!(fields(&super::pod(&pod(json!({})))), vec![]);
    let sidecar = pod(
        json!({"initContainers": [{"name": "s", "image": "i", "restartPolicy": "Always",
        "readinessProbe": {"exec": {"command": ["true"]}}}]}),
    );
    assert_eq!(fields(&super::pod(&sidecar)), vec![]);
    let c = |extra: Value| {
        let mut c = json!({"name": "c", "image": "i"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        json!({"containers": [c]})
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"activeDeadlineSeconds": 0}),
            "spec.activeDeadlineSeconds",
            "Invalid value: 0: must be between 1 and 2147483647, inclusive",
        ),
        (
            json!({"hostname": "Bad_Host"}),
            "spec.hostname",
            "Invalid value: \"Bad_Host\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        (
            json!({"serviceAccountName": "Bad_SA"}),
            "spec.serviceAccountName",
            "Invalid value: \"Bad_SA\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            json!({"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]}),
            "spec.volumes[1].name",
            "Duplicate value: \"v\"",
        ),
        (
            c(json!({"volumeMounts": [{"name": "missing", "mountPath": "/a"}]})),
            "spec.containers[0].volumeMounts[0].name",
            "Not found: \"missing\"",
        ),
        (
            c(json!({"livenessProbe": {"exec": {"command": ["true"]}, "successThreshold": 2}})),
            "spec.containers[0].livenessProbe.successThreshold",
            "Invalid value: 2: must be 1",
        ),
        (
            c(json!({"readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": -1}})),
            "spec.containers[0].readinessProbe.periodSeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            c(json!({"readinessProbe": {"periodSeconds": 1}})),
            "spec.containers[0].readinessProbe",
            "Required value: must specify a handler type",
        ),
        (
            c(json!({"readinessProbe": {"httpGet": {"port": 0}}})),
            "spec.containers[0].readinessProbe.httpGet.port",
            "Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (
            c(json!({"restartPolicy": "Always"})),
            "spec.containers[0].restartPolicy",
            "Forbidden: may not be set for non-init containers",
        ),
        (
            json!({"initContainers": [{"name": "i", "image": "i", "restartPolicy": "Never"}]}),
            "spec.initContainers[0].restartPolicy",
            "Unsupported value: \"Never\": supported values: \"Always\"",
        ),
        (
            json!({"initContainers": [{"name": "i", "image": "i",
                "livenessProbe": {"exec": {"command": ["true"]}}}]}),
            "spec.initContainers[0].livenessProbe",
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        (
            json!({"hostNetwork": true, "containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80, "hostPort": 8080}]}]}),
            "spec.containers[0].ports[0].hostPort",
            "Invalid value: 8080: must match `containerPort` when `hostNetwork` is true",
        ),
        (
            json!({"securityContext": {"runAsUser": -1}}),
            "spec.securityContext.runAsUser",
            "Invalid value: -1: must be between 0 and 2147483647, inclusive",
        ),
        (
            json!({"tolerations": [{"operator": "Equal", "value": "v"}]}),
            "spec.tolerations[0].operator",
            "Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
            "spec.tolerations[0].operator",
            "Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'",
        ),
        (
            json!({"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]}),
            "spec.tolerations[0].effect",
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            json!({"dnsPolicy": "None"}),
            "spec.dnsConfig",
            "Required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
        (
            json!({"dnsPolicy": "None", "dnsConfig": {"searches": ["a"]}}),
            "spec.dnsConfig.nameservers",
            "Required value: must provide at least one DNS nameserver when `dnsPolicy` is None",
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule"}]}),
            "spec.topologySpreadConstraints[0].maxSkew",
            "Invalid value: 0: must be greater than zero",
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "Never"}]}),
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
            "Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
        ),
        (
            json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]}),
            "spec.topologySpreadConstraints[0].minDomains",
            "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
        ),
        (
            c(json!({"ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}]})),
            "spec.containers[0].ports[1].name",
            "Duplicate value: \"http\"",
        ),
        (
            c(json!({"env": [{"value": "x"}]})),
            "spec.containers[0].env[0].name",
            "Required value",
        ),
        (
            json!({"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}]}),
            "spec.volumes[0].hostPath",
            "Forbidden: may not specify more than 1 volume type",
        ),
        (
            json!({"volumes": [{"name": "v", "hostPath": {"path": "/x", "type": "Dir"}}]}),
            "spec.volumes[0].hostPath.type",
            "Unsupported value: \"Dir\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\"",
        ),
        (
            json!({"volumes": [{"name": "v", "configMap": {"defaultMode": 1000}}]}),
            "spec.volumes[0].configMap.defaultMode",
            "Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
        ),
        (
            json!({"volumes": [{"name": "v", "secret": {}}]}),
            "spec.volumes[0].secret.secretName",
            "Required value",
        ),
        (
            json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": ""}}]}),
            "spec.volumes[0].persistentVolumeClaim.claimName",
            "Required value",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}}),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
            "Invalid value: \"Near\": not a valid selector operator",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": []}}}}),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            "Required value: must have at least one node selector term",
        ),
        (
            json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}}),
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "Invalid value: 0: must be in the range 1-100",
        ),
        (
            json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}}]}}}),
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
            "Required value: can not be empty",
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Default"}}}),
            "spec.securityContext.seccompProfile.type",
            "Unsupported value: \"Default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
        ),
        (
            c(json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}})),
            "spec.containers[0].securityContext.seccompProfile.localhostProfile",
            "Required value: must be set when seccomp type is Localhost",
        ),
        (
            c(json!({"lifecycle": {"preStop": {}}})),
            "spec.containers[0].lifecycle.preStop",
            "Required value: must specify a handler type",
        ),
    ];
    for (spec, field, message) in cases {
        has(&super::pod(&pod(spec)), field, message);
    }
    // Templates get the same checks at their paths, and no ephemeral containers.
    let mut d = deployment();
    d["spec"]["template"]["spec"]["ephemeralContainers"] = json!([{"name": "e", "image": "i"}]);
    has(
        &super::deployment(&d),
        "spec.template.spec.ephemeralContainers",
        "Forbidden: ephemeral containers not allowed in pod template",
    );
    let mut d = deployment();
    d["spec"]["template"]["spec"]["volumes"] = json!([{"name": "Bad"}]);
    has(
        &super::deployment(&d),
        "spec.template.spec.volumes[0].name",
        "Invalid value: \"Bad\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    );
}

#[test]
fn validate_deployment_and_replica_set_status_update() {
    let old = json!({"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "collisionCount": 1}});
    assert_eq!(fields(&super::deployment_status(&old, &old)), vec![]);
    let new = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 2,
        "updatedReplicas": -1, "collisionCount": 0}});
    let errors = super::deployment_status(&old, &new);
    has(
        &errors,
        "status.updatedReplicas",
        "Invalid value: -1: must be greater than or equal to 0",
    );
    has(
        &errors,
        "status.availableReplicas",
        "Invalid value: 2: cannot be greater than status.replicas",
    );
    has(
        &errors,
        "status.availableReplicas",
        "Invalid value: 2: cannot be greater than readyReplicas",
    );
    has(
        &errors,
        "status.collisionCount",
        "Invalid value: 0: cannot be decremented",
    );
    has(
        &super::replica_set_status(&json!({"status": {"replicas": 1, "fullyLabeledReplicas": 3}})),
        "status.fullyLabeledReplicas",
        "Invalid value: 3: cannot be greater than status.replicas",
    );
}

#[test]
fn validate_job_update_completions() {
    let old = with(job(), "/spec/completions", json!(2));
    let new = with(job(), "/spec/completions", json!(3));
    has(
        &super::job_update(&old, &new),
        "spec.completions",
        "Invalid value: 3: field is immutable",
    );
    let indexed = |c: i64, p: i64| {
        let j = with(job(), "/spec/completionMode", json!("Indexed"));
        let j = with(j, "/spec/completions", json!(c));
        with(j, "/spec/parallelism", json!(p))
    };
    assert_eq!(
        fields(&super::job_update(&indexed(2, 2), &indexed(4, 4))),
        vec![]
    );
    has(
        &super::job_update(&indexed(2, 2), &indexed(4, 2)),
        "spec.completions",
        "Invalid value: 4: can only be modified in tandem with spec.parallelism",
    );
}
