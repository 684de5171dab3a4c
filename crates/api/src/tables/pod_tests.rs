//! Table-driven tests of the pod summaries against hand-built pods, one per
//! status kubectl users know.

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use super::{pod_ready, pod_restarts, pod_status, row_cells, row_conditions};

fn now() -> DateTime<Utc> {
    "2024-05-01T12:00:00Z".parse().unwrap()
}

fn ago(d: Duration) -> String {
    (now() - d).to_rfc3339()
}

fn running() -> Value {
    json!({"running": {"startedAt": "2024-05-01T10:00:00Z"}})
}

fn waiting(reason: &str) -> Value {
    json!({"waiting": {"reason": reason}})
}

fn terminated(reason: &str, exit_code: i64) -> Value {
    json!({"terminated": {"reason": reason, "exitCode": exit_code}})
}

fn status(name: &str, state: Value, ready: bool) -> Value {
    json!({"name": name, "state": state, "ready": ready, "restartCount": 0})
}

/// A pod with containers `c0..cN` (and init containers `i0..iM`), the given
/// phase and statuses.
fn pod(phase: &str, inits: &[Value], containers: &[Value]) -> Value {
    let spec_inits: Vec<Value> = (0..inits.len())
        .map(|i| json!({"name": format!("i{i}"), "image": "busybox"}))
        .collect();
    let spec_containers: Vec<Value> = (0..containers.len().max(1))
        .map(|i| json!({"name": format!("c{i}"), "image": "nginx"}))
        .collect();
    json!({
        "metadata": {"name": "p", "creationTimestamp": ago(Duration::hours(1))},
        "spec": {"initContainers": spec_inits, "containers": spec_containers},
        "status": {"phase": phase, "initContainerStatuses": inits, "containerStatuses": containers},
    })
}

fn with(mut pod: Value, path: &[&str], value: Value) -> Value {
    let mut cur = &mut pod;
    for key in &path[..path.len() - 1] {
        cur = &mut cur[*key];
    }
    cur[path[path.len() - 1]] = value;
    pod
}

fn ready_condition(status: &str) -> Value {
    json!([{"type": "Ready", "status": status}])
}

#[test]
fn pod_status_table() {
    let done = status("i0", terminated("Completed", 0), false);
    let two_inits = |second: Value| {
        let p = pod("Pending", &[done.clone(), status("i1", second, false)], &[]);
        with(
            p,
            &["spec", "initContainers"],
            json!([{"name": "i0"}, {"name": "i1"}]),
        )
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no status yet", pod("Pending", &[], &[]), "Pending"),
        (
            "image being pulled",
            pod(
                "Pending",
                &[],
                &[status("c0", waiting("ContainerCreating"), false)],
            ),
            "ContainerCreating",
        ),
        ("second init running", two_inits(running()), "Init:1/2"),
        (
            "init waiting to start",
            two_inits(waiting("PodInitializing")),
            "Init:1/2",
        ),
        (
            "init crash looping",
            two_inits(waiting("CrashLoopBackOff")),
            "Init:CrashLoopBackOff",
        ),
        (
            "init failed",
            two_inits(terminated("Error", 1)),
            "Init:Error",
        ),
        (
            "init exit code",
            two_inits(json!({"terminated": {"exitCode": 3}})),
            "Init:ExitCode:3",
        ),
        (
            "init signal",
            two_inits(json!({"terminated": {"exitCode": 137, "signal": 9}})),
            "Init:Signal:9",
        ),
        (
            "inits done, app starting",
            pod(
                "Pending",
                std::slice::from_ref(&done),
                &[status("c0", waiting("PodInitializing"), false)],
            ),
            "PodInitializing",
        ),
        (
            "running",
            pod("Running", &[], &[status("c0", running(), true)]),
            "Running",
        ),
        (
            "crash looping",
            pod(
                "Running",
                &[],
                &[status("c0", waiting("CrashLoopBackOff"), false)],
            ),
            "CrashLoopBackOff",
        ),
        (
            "pull failed",
            pod(
                "Pending",
                &[],
                &[status("c0", waiting("ErrImagePull"), false)],
            ),
            "ErrImagePull",
        ),
        (
            "pull backing off",
            pod(
                "Pending",
                &[],
                &[status("c0", waiting("ImagePullBackOff"), false)],
            ),
            "ImagePullBackOff",
        ),
        (
            "bad config",
            pod(
                "Pending",
                &[],
                &[status("c0", waiting("CreateContainerConfigError"), false)],
            ),
            "CreateContainerConfigError",
        ),
        (
            "completed",
            pod(
                "Succeeded",
                &[],
                &[status("c0", terminated("Completed", 0), false)],
            ),
            "Completed",
        ),
        (
            "failed",
            pod(
                "Failed",
                &[],
                &[status("c0", terminated("Error", 1), false)],
            ),
            "Error",
        ),
        (
            "oom killed",
            pod(
                "Running",
                &[],
                &[status("c0", terminated("OOMKilled", 137), false)],
            ),
            "OOMKilled",
        ),
        (
            "terminated without reason",
            pod(
                "Failed",
                &[],
                &[status("c0", json!({"terminated": {"exitCode": 2}}), false)],
            ),
            "ExitCode:2",
        ),
        (
            "killed by signal",
            pod(
                "Failed",
                &[],
                &[status("c0", json!({"terminated": {"signal": 15}}), false)],
            ),
            "Signal:15",
        ),
        (
            "first container's reason wins",
            pod(
                "Running",
                &[],
                &[
                    status("c0", waiting("CrashLoopBackOff"), false),
                    status("c1", waiting("ErrImagePull"), false),
                ],
            ),
            "CrashLoopBackOff",
        ),
        (
            "being deleted",
            with(
                pod("Running", &[], &[status("c0", running(), true)]),
                &["metadata", "deletionTimestamp"],
                json!("2024-05-01T11:59:00Z"),
            ),
            "Terminating",
        ),
        (
            "deleted after finishing",
            with(
                pod(
                    "Succeeded",
                    &[],
                    &[status("c0", terminated("Completed", 0), false)],
                ),
                &["metadata", "deletionTimestamp"],
                json!("2024-05-01T11:59:00Z"),
            ),
            "Completed",
        ),
        (
            "node lost",
            with(
                with(
                    pod("Running", &[], &[]),
                    &["status", "reason"],
                    json!("NodeLost"),
                ),
                &["metadata", "deletionTimestamp"],
                json!("2024-05-01T11:59:00Z"),
            ),
            "Unknown",
        ),
        (
            "status reason overrides phase",
            with(
                pod("Failed", &[], &[]),
                &["status", "reason"],
                json!("Evicted"),
            ),
            "Evicted",
        ),
        (
            "scheduling gated",
            with(
                pod("Pending", &[], &[]),
                &["status", "conditions"],
                json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
            ),
            "SchedulingGated",
        ),
    ];
    for (what, pod, want) in cases {
        assert_eq!(pod_status(&pod), want, "{what}");
    }
}

/// One container completed while another still runs: `Running` when the
/// pod is Ready, `NotReady` otherwise.
#[test]
fn completed_container_beside_running_one() {
    let p = pod(
        "Running",
        &[],
        &[
            status("c0", terminated("Completed", 0), false),
            status("c1", running(), true),
        ],
    );
    for (ready, want) in [("True", "Running"), ("False", "NotReady")] {
        let p = with(p.clone(), &["status", "conditions"], ready_condition(ready));
        assert_eq!(pod_status(&p), want, "Ready={ready}");
    }
    assert_eq!(pod_ready(&p), "1/2");
}

#[test]
fn sidecar_init_containers_count_as_containers() {
    let sidecar = |started: bool, ready: bool| {
        let s = json!({"name": "i0", "state": running(), "started": started, "ready": ready, "restartCount": 2,
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(Duration::minutes(5))}}});
        let p = pod("Running", &[s], &[status("c0", running(), true)]);
        with(
            p,
            &["spec", "initContainers"],
            json!([{"name": "i0", "restartPolicy": "Always"}]),
        )
    };
    let started = sidecar(true, true);
    assert_eq!(pod_status(&started), "Running");
    assert_eq!(pod_ready(&started), "2/2");
    assert_eq!(pod_restarts(&started, now()), "2 (5m ago)");
    let unready = sidecar(true, false);
    assert_eq!(pod_ready(&unready), "1/2");
    let not_started = sidecar(false, false);
    assert_eq!(pod_status(&not_started), "Init:0/1");
    assert_eq!(pod_ready(&not_started), "0/2");
}

#[test]
fn ready_counts_only_ready_running_containers() {
    let cases = [
        (
            vec![
                status("c0", running(), true),
                status("c1", running(), false),
            ],
            "1/2",
        ),
        (
            vec![status("c0", running(), true), status("c1", running(), true)],
            "2/2",
        ),
        (
            vec![status("c0", waiting("ContainerCreating"), false)],
            "0/1",
        ),
        (vec![], "0/1"),
    ];
    for (statuses, want) in cases {
        assert_eq!(pod_ready(&pod("Running", &[], &statuses)), want);
    }
}

#[test]
fn restarts_column() {
    let restarted = |count: i64, finished: Option<Duration>| {
        let mut s = status("c0", running(), true);
        s["restartCount"] = json!(count);
        if let Some(d) = finished {
            s["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": ago(d)}});
        }
        s
    };
    let cases = [
        (vec![restarted(0, None)], "0"),
        (vec![restarted(2, None)], "2"),
        (
            vec![restarted(3, Some(Duration::seconds(310)))],
            "3 (5m10s ago)",
        ),
        (
            vec![
                restarted(1, Some(Duration::hours(3))),
                restarted(4, Some(Duration::seconds(20))),
            ],
            "5 (20s ago)",
        ),
    ];
    for (statuses, want) in cases {
        assert_eq!(pod_restarts(&pod("Running", &[], &statuses), now()), want);
    }
    // While initializing, only init container restarts count.
    let mut init = status("i0", waiting("CrashLoopBackOff"), false);
    init["restartCount"] = json!(4);
    init["lastState"] =
        json!({"terminated": {"exitCode": 1, "finishedAt": ago(Duration::seconds(20))}});
    let p = pod("Pending", &[init], &[restarted(7, None)]);
    assert_eq!(pod_restarts(&p, now()), "4 (20s ago)");
    // Once initialized, finished init containers' restarts are dropped.
    let mut done = status("i0", terminated("Completed", 0), false);
    done["restartCount"] = json!(4);
    let p = pod("Running", &[done], &[restarted(1, None)]);
    assert_eq!(pod_restarts(&p, now()), "1");
}

#[test]
fn pod_cells_include_wide_columns() {
    let p = json!({
        "metadata": {"name": "web-0", "creationTimestamp": ago(Duration::seconds(45))},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c0"}],
            "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]},
        "status": {"phase": "Running", "podIPs": [{"ip": "10.1.0.7"}, {"ip": "fd00::7"}],
            "conditions": [{"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "False"}],
            "containerStatuses": [status("c0", running(), true)]},
    });
    assert_eq!(
        row_cells("Pod", &p, now()),
        vec![
            json!("web-0"),
            json!("1/1"),
            json!("Running"),
            json!("0"),
            json!("45s"),
            json!("10.1.0.7"),
            json!("node-a"),
            json!("<none>"),
            json!("1/2"),
        ]
    );
    let bare = json!({"metadata": {"name": "x"}, "status": {"podIP": "10.1.0.9"}});
    let cells = row_cells("Pod", &bare, now());
    assert_eq!(cells[4], json!("<unknown>"));
    assert_eq!(
        cells[5..],
        [
            json!("10.1.0.9"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
}

#[test]
fn finished_pods_get_a_completed_row_condition() {
    let done = pod("Succeeded", &[], &[]);
    assert_eq!(
        row_conditions("Pod", &done),
        vec![
            json!({"type": "Completed", "status": "True", "reason": "Succeeded",
            "message": "The pod has completed successfully."})
        ]
    );
    assert_eq!(
        row_conditions("Pod", &pod("Failed", &[], &[]))[0]["reason"],
        "Failed"
    );
    assert!(row_conditions("Pod", &pod("Running", &[], &[])).is_empty());
}
