//! Tests of the workload printers: Deployment, ReplicaSet, Job,
//! StatefulSet, DaemonSet and CronJob.

use chrono::Duration;
use serde_json::{json, Value};

use super::row_cells;
use super::tests::{ago, meta, now};

fn workload(spec: Value, status: Value) -> Value {
    let mut spec = spec;
    spec["template"] = json!({"spec": {"containers": [{"name": "web", "image": "nginx:1"}, {"name": "log", "image": "busybox"}]}});
    json!({"metadata": meta("w"), "spec": spec, "status": status})
}

#[test]
fn deployment_and_replica_set_cells() {
    let selector = json!({"matchLabels": {"app": "web"}, "matchExpressions": [
        {"key": "legacy", "operator": "DoesNotExist"}, {"key": "env", "operator": "In", "values": ["prod", "dev"]}]});
    let d = workload(
        json!({"replicas": 3, "selector": selector}),
        json!({"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}),
    );
    assert_eq!(
        row_cells("Deployment", &d, now()),
        [
            json!("w"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("3d"),
            json!("web,log"),
            json!("nginx:1,busybox"),
            json!("app=web,env in (dev,prod),!legacy")
        ]
    );
    let bad = workload(
        json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}),
        json!({}),
    );
    assert_eq!(row_cells("Deployment", &bad, now())[7], "<invalid>");
    assert_eq!(
        row_cells("Deployment", &workload(json!({}), json!({})), now())[1..3],
        [json!("0/1"), json!(0)]
    );
    let rs = workload(
        json!({"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}}}),
        json!({"replicas": 2, "readyReplicas": 1}),
    );
    assert_eq!(
        row_cells("ReplicaSet", &rs, now()),
        [
            json!("w"),
            json!(2),
            json!(2),
            json!(1),
            json!("3d"),
            json!("web,log"),
            json!("nginx:1,busybox"),
            json!("app=web,pod-template-hash=abc")
        ]
    );
    assert_eq!(
        row_cells("ReplicaSet", &workload(json!({}), json!({})), now())[7],
        "<none>"
    );
    let bad = workload(
        json!({"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
        json!({}),
    );
    assert_eq!(row_cells("ReplicaSet", &bad, now())[7], "<error>");
}

#[test]
fn job_cells() {
    let cond = |ty: &str| json!([{"type": ty, "status": "True"}]);
    let start = ago(Duration::minutes(20));
    let cases = [
        (
            json!({"completions": 1}),
            json!({"succeeded": 1, "conditions": cond("Complete"), "startTime": start,
            "completionTime": ago(Duration::minutes(15))}),
            false,
            "Complete",
            "1/1",
            "5m",
        ),
        (
            json!({"completions": 5}),
            json!({"succeeded": 2, "conditions": cond("Failed")}),
            false,
            "Failed",
            "2/5",
            "",
        ),
        (
            json!({"parallelism": 3}),
            json!({"startTime": start}),
            false,
            "Running",
            "0/1 of 3",
            "20m",
        ),
        (
            json!({}),
            json!({"conditions": cond("Suspended")}),
            false,
            "Suspended",
            "0/1",
            "",
        ),
        (
            json!({}),
            json!({"conditions": cond("FailureTarget")}),
            false,
            "FailureTarget",
            "0/1",
            "",
        ),
        (
            json!({}),
            json!({"conditions": cond("Suspended")}),
            true,
            "Terminating",
            "0/1",
            "",
        ),
        (
            json!({}),
            json!({"conditions": [{"type": "Complete", "status": "False"}]}),
            false,
            "Running",
            "0/1",
            "",
        ),
    ];
    for (spec, status, deleting, want_status, want_completions, want_duration) in cases {
        let mut job = workload(spec, status);
        job["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u1"}});
        if deleting {
            job["metadata"]["deletionTimestamp"] = json!(ago(Duration::seconds(1)));
        }
        let cells = row_cells("Job", &job, now());
        assert_eq!(
            cells[1..4],
            [
                json!(want_status),
                json!(want_completions),
                json!(want_duration)
            ]
        );
        assert_eq!(cells[7], "batch.kubernetes.io/controller-uid=u1");
    }
}

#[test]
fn other_workloads() {
    let sts = workload(json!({"replicas": 3}), json!({"readyReplicas": 3}));
    assert_eq!(
        row_cells("StatefulSet", &sts, now())[..3],
        [json!("w"), json!("3/3"), json!("3d")]
    );
    let mut ds = workload(
        json!({"selector": {"matchLabels": {"app": "agent"}}}),
        json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}),
    );
    ds["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    assert_eq!(
        row_cells("DaemonSet", &ds, now())[1..8],
        [
            json!(3),
            json!(3),
            json!(2),
            json!(3),
            json!(2),
            json!("kubernetes.io/os=linux"),
            json!("3d")
        ]
    );
    let cj = json!({"metadata": meta("nightly"),
        "spec": {"schedule": "0 3 * * *", "suspend": false, "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "backup"}]}}}}},
        "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": ago(Duration::hours(9))}});
    assert_eq!(
        row_cells("CronJob", &cj, now()),
        [
            json!("nightly"),
            json!("0 3 * * *"),
            json!("<none>"),
            json!("False"),
            json!(1),
            json!("9h"),
            json!("3d"),
            json!("b"),
            json!("backup"),
            json!("<none>")
        ]
    );
}
