//! End to end, as root, on real containerd: `skiff explain` against pods
//! driven into each culprit the troubleshooting guides list (the
//! control-plane taint, a nodeSelector or resources no node has, claims
//! missing or unbound, an image that cannot be pulled, a command that
//! exits on a missing variable, a liveness probe too strict for the
//! start time, an OOM kill, a missing ConfigMap as env and as volume, a
//! failing init container, running but not Ready behind a Service, a
//! probe that starts before the measured start time, a Deployment past
//! its progress deadline, a sandbox whose network cannot be set up) and
//! a healthy pod. Each run checks the stage named, the evidence and the
//! fix, and the exit status (0 healthy, 1 problem, 2 could not look).
//!
//! One cluster with the control-plane taint, shared by every scenario;
//! every pod but the taint scenario's tolerates it. The scenarios run in
//! parallel; the sandbox one, which breaks the node's CNI config for a
//! moment, runs after them.

mod cluster;

use std::process::Command;
use std::time::Duration;

use cluster::{run_scenarios, Cluster, Options, Scenario, SKIFF};
use serde_json::Value;
use skiff_testkit::Registry;

struct Env {
    c: Cluster,
    registry: Registry,
}

const TOLERATE: &str = "  tolerations:
  - key: node-role.kubernetes.io/control-plane
    operator: Exists
    effect: NoSchedule
";

/// A pod of busybox with `extra` (YAML under spec, after containers) and
/// the toleration.
fn pod(name: &str, container: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
{TOLERATE}{spec_extra}  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
{container}"
    )
}

/// `skiff explain ARGS` against the cluster: exit status and stdout.
fn explain(c: &Cluster, args: &[&str]) -> (i32, String) {
    let out = Command::new(SKIFF)
        .arg("explain")
        .args(args)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{stdout}{}",
            if stderr.is_empty() {
                String::new()
            } else {
                format!("\n[stderr] {stderr}")
            }
        ),
    )
}

/// Explains `target` until its report names `stage` and contains every
/// one of `wanted` (the pod may still be on its way there); the report.
fn explained(c: &Cluster, target: &str, stage: &str, wanted: &[&str]) -> String {
    let mut last = String::new();
    let found = wait_for_report(c, target, |code, text| {
        last = text.to_string();
        code == 1 && text.contains(&format!("[{stage}]")) && wanted.iter().all(|w| text.contains(w))
    });
    assert!(
        found,
        "{target}: wanted [{stage}] and {wanted:?}; last report:\n{last}"
    );
    last
}

fn wait_for_report(c: &Cluster, target: &str, mut ok: impl FnMut(i32, &str) -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (code, text) = explain(c, &[target]);
        if ok(code, &text) {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn control_plane_taint(e: &Env) {
    let yaml = pod("untolerated", "    command: [sleep, '3600']\n", "").replace(TOLERATE, "");
    e.c.apply(&yaml);
    let text = explained(
        &e.c,
        "pod/untolerated",
        "scheduling",
        &[
            "untolerated taint {node-role.kubernetes.io/control-plane: }",
            "kubectl taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule-",
            "- key: node-role.kubernetes.io/control-plane",
            "event FailedScheduling",
        ],
    );
    assert!(!text.contains("[image]"), "{text}");
}

fn node_selector_and_resources(e: &Env) {
    e.c.apply(&pod(
        "picky",
        "    command: [sleep, '3600']\n",
        "  nodeSelector:\n    disk: ssd\n",
    ));
    explained(
        &e.c,
        "picky",
        "scheduling",
        &[
            "nodeSelector: disk=ssd",
            "kubectl label nodes NODE disk=ssd",
        ],
    );
    e.c.apply(&pod(
        "greedy",
        "    command: [sleep, '3600']\n    resources:\n      requests:\n        cpu: '1000'\n",
        "",
    ));
    explained(
        &e.c,
        "pod/greedy",
        "scheduling",
        &["Insufficient cpu", "cpu requested: c=1000", "lower"],
    );
}

fn claims(e: &Env) {
    e.c.apply(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: unbound
spec:
  storageClassName: no-such-class
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 1Gi
",
    );
    e.c.apply(&pod(
        "claims",
        "    command: [sleep, '3600']\n",
        "  volumes:\n  - name: a\n    persistentVolumeClaim:\n      claimName: unbound\n  - name: b\n    persistentVolumeClaim:\n      claimName: gone\n",
    ));
    explained(
        &e.c,
        "pod/claims",
        "volumes",
        &[
            "persistentvolumeclaim unbound is Pending, not Bound",
            "kubectl get storageclass no-such-class",
            "persistentvolumeclaim \"gone\" not found",
        ],
    );
}

fn image(e: &Env) {
    let image = format!("{}/explain/missing:v1", e.registry.addr());
    let yaml = pod("noimage", "    command: [sleep, '3600']\n", "")
        .replace("image: busybox", &format!("image: {image}"));
    e.c.apply(&yaml);
    explained(
        &e.c,
        "pod/noimage",
        "image",
        &[
            &format!("the image {image} of container c cannot be pulled"),
            "not found",
            "kubectl set image pod/noimage c=",
        ],
    );
}

fn missing_variable(e: &Env) {
    e.c.apply(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: envless
spec:
  replicas: 1
  selector:
    matchLabels:
      app: envless
  template:
    metadata:
      labels:
        app: envless
    spec:
      terminationGracePeriodSeconds: 1
      automountServiceAccountToken: false
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      containers:
      - name: app
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'echo connecting; set -u; echo $DATABASE_URL']
",
    );
    let text = explained(
        &e.c,
        "deploy/envless",
        "crash",
        &[
            "container app exits with code",
            "logs --previous",
            "DATABASE_URL: parameter not set",
            "kubectl set env deployment/envless -n default DATABASE_URL=VALUE",
        ],
    );
    assert!(text.contains("explaining pod envless-"), "{text}");
}

fn liveness_too_strict(e: &Env) {
    e.c.apply(&pod(
        "strict",
        "    command: [sh, -c, 'sleep 6; touch /tmp/up; sleep 3600']
    livenessProbe:
      exec:
        command: [cat, /tmp/up]
      initialDelaySeconds: 1
      periodSeconds: 1
      failureThreshold: 1
",
        "",
    ));
    let text = explained(
        &e.c,
        "pod/strict",
        "liveness probe",
        &[
            "failed liveness probe, will be restarted",
            "Liveness probe failed",
            "startupProbe:",
            "kills after about 2s",
        ],
    );
    assert!(!text.contains("[crash]"), "{text}");
}

fn out_of_memory(e: &Env) {
    e.c.apply(&pod(
        "hungry",
        "    command: [sh, -c, 'a=xxxxxxxxxxxxxxxx; while true; do a=$a$a; done']
    resources:
      limits:
        memory: 24Mi
",
        "",
    ));
    explained(
        &e.c,
        "pod/hungry",
        "out of memory",
        &["OOMKilled", "resources.limits.memory: 24Mi", "memory: 48Mi"],
    );
}

fn missing_config_map(e: &Env) {
    e.c.apply(&pod(
        "unconfigured",
        "    command: [sleep, '3600']
    env:
    - name: MODE
      valueFrom:
        configMapKeyRef:
          name: settings
          key: mode
",
        "",
    ));
    explained(
        &e.c,
        "pod/unconfigured",
        "config",
        &[
            "configmap \"settings\" not found",
            "kubectl create configmap settings -n default --from-literal=mode=VALUE",
        ],
    );
    e.c.apply(&pod(
        "unmounted",
        "    command: [sleep, '3600']\n    volumeMounts:\n    - name: cfg\n      mountPath: /cfg\n",
        "  volumes:\n  - name: cfg\n    configMap:\n      name: app-config\n",
    ));
    explained(
        &e.c,
        "pod/unmounted",
        "volumes",
        &[
            "event FailedMount",
            "configmap \"app-config\" not found",
            "kubectl create configmap app-config -n default",
        ],
    );
}

fn init_container(e: &Env) {
    let yaml = pod("initless", "    command: [sleep, '3600']\n", "  initContainers:\n  - name: wait-db\n    image: busybox\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'echo waiting for db; exit 3']\n");
    e.c.apply(&yaml);
    explained(
        &e.c,
        "pod/initless",
        "init containers",
        &["init container wait-db exits with code 3", "waiting for db"],
    );
}

fn not_ready_behind_a_service(e: &Env) {
    e.c.apply(&pod(
        "unready",
        "    command: [sleep, '3600']
    readinessProbe:
      exec:
        command: [sh, -c, 'echo backend unreachable; exit 1']
      periodSeconds: 1
",
        "",
    ));
    e.c.apply(
        "apiVersion: v1
kind: Service
metadata:
  name: unready
spec:
  selector:
    app: unready
  ports:
  - port: 80
",
    );
    explained(
        &e.c,
        "pod/unready",
        "readiness probe",
        &[
            "container c is running but not Ready",
            "fails with: backend unreachable",
            "[service] service unready has no ready endpoints",
        ],
    );
    explained(
        &e.c,
        "svc/unready",
        "readiness probe",
        &["explaining pod unready"],
    );
    e.c.apply(
        "apiVersion: v1
kind: Service
metadata:
  name: nobody
spec:
  selector:
    app: nobody-has-this
  ports:
  - port: 80
",
    );
    explained(
        &e.c,
        "svc/nobody",
        "service",
        &[
            "the selector of service nobody matches no pod",
            "selector: app=nobody-has-this",
        ],
    );
}

fn slow_start_and_healthy(e: &Env) {
    e.c.apply(&pod(
        "slow",
        "    command: [sh, -c, 'sleep 4; touch /tmp/ready; sleep 3600']
    readinessProbe:
      exec:
        command: [cat, /tmp/ready]
      periodSeconds: 1
",
        "",
    ));
    explained(
        &e.c,
        "pod/slow",
        "readiness probe",
        &[
            "starts at 0s, but the container took",
            "initialDelaySeconds near the measured start time",
        ],
    );
    e.c.apply(&pod("fine", "    command: [sleep, '3600']\n", ""));
    e.c.wait("pod/fine", "condition=Ready", 60);
    let (code, text) = explain(&e.c, &["pod", "fine"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("no problem found") && text.contains("Ready"),
        "{text}"
    );
    let (code, text) = explain(&e.c, &["pod/fine", "-o", "json"]);
    assert_eq!(code, 0, "{text}");
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["findings"], serde_json::json!([]), "{json}");
    let (code, text) = explain(&e.c, &["pod/no-such-pod"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("pods \"no-such-pod\" not found"), "{text}");
}

fn rollout_deadline(e: &Env) {
    let image = format!("{}/explain/never:v1", e.registry.addr());
    e.c.apply(&format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: stuck
spec:
  progressDeadlineSeconds: 5
  replicas: 1
  selector:
    matchLabels:
      app: stuck
  template:
    metadata:
      labels:
        app: stuck
    spec:
      automountServiceAccountToken: false
      tolerations:
      - key: node-role.kubernetes.io/control-plane
        operator: Exists
        effect: NoSchedule
      containers:
      - name: web
        image: {image}
"
    ));
    let (_, json) = {
        let mut last = String::new();
        let ok = wait_for_report(&e.c, "deploy/stuck", |code, text| {
            last = text.to_string();
            code == 1 && text.contains("[rollout]") && text.contains("[image]")
        });
        assert!(ok, "deploy/stuck: {last}");
        explain(&e.c, &["deploy/stuck", "-o", "json"])
    };
    let report: Value = serde_json::from_str(&json).unwrap();
    let stages: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["stage"].as_str())
        .collect();
    assert_eq!(stages.first(), Some(&"rollout"), "{report}");
    assert!(stages.contains(&"image"), "{report}");
    assert!(
        json.contains("ProgressDeadlineExceeded")
            && json.contains("kubectl rollout undo deployment/stuck"),
        "{json}"
    );
}

/// Breaks the node's CNI config (a plugin that does not exist), so a new
/// pod's sandbox cannot get its network; restores it after.
fn sandbox_network(e: &Env) {
    let conflist = e.c.data_dir.join("node/cni/net.d/10-skiff.conflist");
    let good = std::fs::read_to_string(&conflist).unwrap();
    let mut broken: Value = serde_json::from_str(&good).unwrap();
    broken["plugins"][0]["type"] = "skiff-no-such-plugin".into();
    let tmp = conflist.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_string(&broken).unwrap()).unwrap();
    std::fs::rename(&tmp, &conflist).unwrap();
    e.c.apply(&pod("netless", "    command: [sleep, '3600']\n", ""));
    let result = std::panic::catch_unwind(|| {
        explained(
            &e.c,
            "pod/netless",
            "sandbox",
            &[
                "network cannot be set up",
                "event FailedCreatePodSandBox",
                "skiff-no-such-plugin",
            ],
        )
    });
    std::fs::write(&tmp, &good).unwrap();
    std::fs::rename(&tmp, &conflist).unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    // With the config back the agent's retry makes it.
    e.c.wait("pod/netless", "condition=Ready", 120);
    let (code, text) = explain(&e.c, &["pod/netless"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn explain_names_each_culprit_its_evidence_and_fix() {
    let registry = Registry::start();
    let c = Cluster::start(Options {
        taint_control_plane: true,
        ..Options::default()
    });
    let env = Env { c, registry };
    let scenarios: &[Scenario<Env>] = &[
        ("control-plane taint", control_plane_taint),
        ("nodeSelector and resources", node_selector_and_resources),
        ("claims", claims),
        ("image", image),
        ("missing variable", missing_variable),
        ("liveness too strict", liveness_too_strict),
        ("out of memory", out_of_memory),
        ("missing ConfigMap", missing_config_map),
        ("init container", init_container),
        ("not ready behind a Service", not_ready_behind_a_service),
        ("slow start and healthy", slow_start_and_healthy),
        ("rollout deadline", rollout_deadline),
    ];
    run_scenarios(&env, scenarios);
    run_scenarios(&env, &[("sandbox network", sandbox_network)]);
    env.c.assert_no_component_refused();
}
