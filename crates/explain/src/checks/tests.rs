//! The checks against pods in each trouble, written as the API returns
//! them (statuses and events in upstream's words).

use serde_json::{json, Value};

use crate::facts::{Facts, ServiceFacts, Workload};
use crate::report::Stage;

fn pod(spec: Value, status: Value) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": status,
    }))
    .unwrap()
}

fn event(reason: &str, message: &str, count: i32) -> k8s_openapi::api::core::v1::Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web.{reason}"), "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u1"},
        "reason": reason, "message": message, "count": count,
    }))
    .unwrap()
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "c", "image": "busybox"});
    if let (Some(c), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    c
}

fn status(state: Value, extra: Value) -> Value {
    let mut s = json!({"name": "c", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0, "state": state});
    if let (Some(s), Some(e)) = (s.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    s
}

fn stages(f: &Facts) -> Vec<Stage> {
    super::all(f).iter().map(|x| x.stage).collect()
}

fn text(f: &Facts) -> String {
    super::all(f)
        .iter()
        .map(|x| {
            format!(
                "{}\n{}\n{}",
                x.problem,
                x.evidence.join("\n"),
                x.fix.join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[test]
fn control_plane_taint_gets_the_untaint_command_and_a_toleration() {
    let msg = "0/1 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    let f = Facts {
        pod: pod(
            json!({"containers": [container(json!({}))]}),
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]}),
        ),
        events: vec![event("FailedScheduling", msg, 4)],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Scheduling]);
    let t = text(&f);
    assert!(
        t.contains("kubectl taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule-"),
        "{t}"
    );
    assert!(
        t.contains("- key: node-role.kubernetes.io/control-plane"),
        "{t}"
    );
    assert!(t.contains("event FailedScheduling (x4)"), "{t}");
}

#[test]
fn node_selector_and_resources_name_what_no_node_has() {
    let msg = "0/1 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector.";
    let f = Facts {
        pod: pod(
            json!({"nodeSelector": {"disk": "ssd"}, "containers": [container(json!({"resources": {"requests": {"cpu": "64"}}}))]}),
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}]}),
        ),
        ..Facts::default()
    };
    let t = text(&f);
    assert!(t.contains("cpu requested: c=64"), "{t}");
    assert!(t.contains("kubectl label nodes NODE disk=ssd"), "{t}");
}

#[test]
fn a_missing_claim_and_an_unbound_one() {
    let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"}, "spec": {"storageClassName": "nope"}, "status": {"phase": "Pending"}
    }))
    .unwrap();
    let mut f = Facts {
        pod: pod(
            json!({"containers": [container(json!({}))]}),
            json!({"phase": "Pending"}),
        ),
        ..Facts::default()
    };
    f.claims.insert("data".into(), Some(pvc));
    f.claims.insert("gone".into(), None);
    let t = text(&f);
    assert!(
        t.contains("persistentvolumeclaim \"gone\" not found"),
        "{t}"
    );
    assert!(
        t.contains("persistentvolumeclaim data is Pending, not Bound"),
        "{t}"
    );
    assert!(t.contains("kubectl get storageclass nope"), "{t}");
}

#[test]
fn failed_mount_of_a_missing_configmap() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({}))]}),
            json!({"phase": "Pending", "containerStatuses": [status(json!({"waiting": {"reason": "ContainerCreating"}}), json!({}))]}),
        ),
        events: vec![event(
            "FailedMount",
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\" not found",
            5,
        )],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Volumes]);
    let t = text(&f);
    assert!(
        t.contains("kubectl create configmap app-config -n default"),
        "{t}"
    );
}

#[test]
fn image_that_does_not_exist() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"image": "busybox:nope"}))]}),
            json!({"phase": "Pending", "containerStatuses": [status(json!({"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"busybox:nope\": ErrImagePull: failed to resolve reference \"docker.io/library/busybox:nope\": docker.io/library/busybox:nope: not found"}}), json!({}))]}),
        ),
        events: vec![event(
            "Failed",
            "Failed to pull image \"busybox:nope\": not found",
            3,
        )],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Image]);
    let t = text(&f);
    assert!(t.contains("the registry has no busybox:nope"), "{t}");
    assert!(
        t.contains("kubectl set image pod/web c=REPOSITORY:TAG"),
        "{t}"
    );
}

#[test]
fn missing_configmap_key_reference_lists_the_keys_to_create() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}}]}))]}),
            json!({"phase": "Pending", "containerStatuses": [status(json!({"waiting": {"reason": "CreateContainerConfigError", "message": "configmap \"settings\" not found"}}), json!({}))]}),
        ),
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Config]);
    assert!(
        text(&f).contains("kubectl create configmap settings -n default --from-literal=mode=VALUE")
    );
}

#[test]
fn crash_on_a_missing_variable_shows_the_logs_and_the_env_fix() {
    let mut f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({}))]}),
            json!({"phase": "Running", "containerStatuses": [status(
                json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container=c pod=web_default(u1)"}}),
                json!({"restartCount": 3, "lastState": {"terminated": {"exitCode": 2, "reason": "Error"}}}))]}),
        ),
        workload: Some(Workload {
            kind: "deployment".into(),
            name: "web".into(),
            conditions: vec![],
        }),
        ..Facts::default()
    };
    f.previous_logs.insert(
        "c".into(),
        "booting\nsh: DATABASE_URL: parameter not set\n".into(),
    );
    assert_eq!(stages(&f), vec![Stage::Crash]);
    let t = text(&f);
    assert!(
        t.contains("exits with code 2 (Error), restarted 3 time(s)"),
        "{t}"
    );
    assert!(t.contains("sh: DATABASE_URL: parameter not set"), "{t}");
    assert!(
        t.contains("kubectl set env deployment/web -n default DATABASE_URL=VALUE"),
        "{t}"
    );
}

#[test]
fn oom_kill_suggests_a_higher_limit() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"resources": {"limits": {"memory": "32Mi"}}}))]}),
            json!({"phase": "Running", "containerStatuses": [status(
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                json!({"restartCount": 2, "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}))]}),
        ),
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::OutOfMemory]);
    assert!(text(&f).contains("memory: 64Mi"));
}

#[test]
fn liveness_kills_are_the_probe_not_a_crash() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"livenessProbe": {"exec": {"command": ["cat", "/tmp/up"]}, "initialDelaySeconds": 1, "periodSeconds": 1, "failureThreshold": 1}}))]}),
            json!({"phase": "Running", "containerStatuses": [status(
                json!({"waiting": {"reason": "CrashLoopBackOff"}}),
                json!({"restartCount": 2, "lastState": {"terminated": {"exitCode": 137, "reason": "Error"}}}))]}),
        ),
        events: vec![
            event(
                "Unhealthy",
                "Liveness probe failed: cat: can't open '/tmp/up': No such file or directory",
                3,
            ),
            event(
                "Killing",
                "Container c failed liveness probe, will be restarted",
                3,
            ),
        ],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Liveness]);
    let t = text(&f);
    assert!(t.contains("startupProbe:"), "{t}");
    assert!(t.contains("failureThreshold: 60"), "{t}");
    assert!(t.contains("kills after about 2s"), "{t}");
}

#[test]
fn running_not_ready_shows_the_probe_output_and_the_service() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}}))]}),
            json!({"phase": "Running", "containerStatuses": [status(json!({"running": {"startedAt": "2026-01-01T00:00:01Z"}}), json!({"started": true}))]}),
        ),
        events: vec![event(
            "Unhealthy",
            "Readiness probe failed: HTTP probe failed with statuscode: 503",
            9,
        )],
        services: vec![ServiceFacts {
            name: "web".into(),
            ready: 0,
            not_ready: 1,
        }],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Readiness, Stage::Service]);
    let t = text(&f);
    assert!(
        t.contains("fails with: HTTP probe failed with statuscode: 503"),
        "{t}"
    );
    assert!(t.contains("service web has no ready endpoints"), "{t}");
}

#[test]
fn a_probe_that_starts_before_the_measured_start_time() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}))]}),
            json!({"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"}],
                   "containerStatuses": [status(json!({"running": {"startedAt": "2026-01-01T00:00:01Z"}}), json!({"ready": true, "started": true}))]}),
        ),
        events: vec![event("Unhealthy", "Readiness probe failed: not yet", 7)],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Readiness]);
    let t = text(&f);
    assert!(t.contains("took 8.0s to become Ready"), "{t}");
    assert!(
        t.contains("initialDelaySeconds near the measured start time (8s)"),
        "{t}"
    );
}

#[test]
fn a_healthy_pod_has_no_findings() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"readinessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 2}}))]}),
            json!({"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:03Z"}],
                   "containerStatuses": [status(json!({"running": {"startedAt": "2026-01-01T00:00:01Z"}}), json!({"ready": true, "started": true}))]}),
        ),
        services: vec![ServiceFacts {
            name: "web".into(),
            ready: 1,
            not_ready: 0,
        }],
        ..Facts::default()
    };
    assert!(super::all(&f).is_empty(), "{}", text(&f));
}

#[test]
fn a_stuck_rollout_and_a_failed_job() {
    let f = Facts {
        workload: Some(Workload {
            kind: "deployment".into(),
            name: "web".into(),
            conditions: vec![(
                "Progressing".into(),
                "False".into(),
                "ProgressDeadlineExceeded".into(),
                "ReplicaSet \"web-1\" has timed out progressing.".into(),
            )],
        }),
        ..Facts::default()
    };
    assert!(text(&f).contains("kubectl rollout undo deployment/web"));
    let f = Facts {
        workload: Some(Workload {
            kind: "job".into(),
            name: "once".into(),
            conditions: vec![(
                "Failed".into(),
                "True".into(),
                "BackoffLimitExceeded".into(),
                "Job has reached the specified backoff limit".into(),
            )],
        }),
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Rollout]);
}

#[test]
fn sandbox_failures_point_at_the_node() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({}))]}),
            json!({"phase": "Pending", "containerStatuses": [status(json!({"waiting": {"reason": "ContainerCreating"}}), json!({}))]}),
        ),
        events: vec![event("FailedCreatePodSandBox", "Failed to create pod sandbox: plugin type=\"bridge\" failed (add): failed to allocate for range 0: no IP addresses available in range set", 6)],
        ..Facts::default()
    };
    assert_eq!(stages(&f), vec![Stage::Sandbox]);
    assert!(text(&f).contains("network cannot be set up"));
}

#[test]
fn the_nodes_timeline_measures_the_start_to_the_millisecond() {
    let f = Facts {
        pod: pod(
            json!({"nodeName": "n1", "containers": [container(json!({"readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}}))]}),
            json!({"phase": "Running",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"}],
                   "containerStatuses": [status(json!({"running": {"startedAt": "2026-01-01T00:00:01Z"}}), json!({"ready": true, "started": true}))]}),
        ),
        events: vec![event("Unhealthy", "Readiness probe failed: not yet", 4)],
        timeline: Some(
            json!({"phases": [{"name": "start", "durationMs": 30}, {"name": "ready", "durationMs": 4200}]}),
        ),
        ..Facts::default()
    };
    let t = text(&f);
    assert!(t.contains("took 4.2s to become Ready"), "{t}");
    assert!(t.contains("measured start time (5s)"), "{t}");
}
