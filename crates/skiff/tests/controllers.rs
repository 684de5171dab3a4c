//! End to end, as root, on real containerd, runc and CNI, driven with
//! the real kubectl: the controller manager inside `skiff server` ([#35]).
//! One cluster for the whole file; each scenario has its own namespace
//! and they run at once, each on its own thread:
//!
//! - a Deployment with a readiness probe rolled by `kubectl set env`,
//!   watched pod by pod (never more than replicas + maxSurge pods, never
//!   fewer than replicas − maxUnavailable ready), then `rollout history`,
//!   `undo`, `scale`, `restart`, `pause`/`resume`;
//! - a rollout whose image cannot be pulled, ending in
//!   ProgressDeadlineExceeded (`kubectl rollout status` says so);
//! - a StatefulSet whose deleted pod comes back under its name with its
//!   claim's data;
//! - a DaemonSet with its one pod on the node;
//! - Jobs: to Complete, Indexed, to Failed by backoffLimit and by a
//!   podFailurePolicy; a CronJob firing on its schedule and
//!   `kubectl create job --from=cronjob/...`;
//! - Endpoints and EndpointSlices following readiness;
//! - `kubectl delete deployment` taking its ReplicaSets and pods, and
//!   `--cascade=orphan` leaving them;
//! - a namespace deleted with its running pods;
//! - the Python `kubernetes` client creating, waiting for and rolling a
//!   Deployment, a DaemonSet and a Job (tests/python/workloads.py).

mod cluster;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{wait_for, Cluster, Options};

/// Runs every scenario on one cluster, each on a thread, and reports all
/// that failed.
#[test]
fn workloads_on_one_cluster() {
    let c = Cluster::start(Options::default());
    let scenarios: &[cluster::Scenario<Cluster>] = &[
        ("rolling update", rolling_update),
        ("progress deadline", progress_deadline),
        ("statefulset", statefulset),
        ("daemonset", daemonset),
        ("jobs", jobs),
        ("cronjob", cronjob),
        ("endpoints", endpoints),
        ("cascading deletion", cascade),
        ("namespace deletion", namespace_deletion),
        ("python client", python_client),
    ];
    cluster::run_scenarios(&c, scenarios);
    c.assert_no_component_refused();
}

/// `kubectl -n NS get WHAT -o jsonpath=PATH`.
fn field(c: &Cluster, ns: &str, what: &[&str], path: &str) -> String {
    let jsonpath = format!("jsonpath={path}");
    let mut args = vec!["-n", ns, "get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", &jsonpath]);
    c.kubectl(&args)
}

fn namespace(c: &Cluster, ns: &str) {
    c.kubectl(&["create", "namespace", ns]);
}

/// Pods of `ns` seen by a watch: (alive, ready and alive) per name, and
/// every moment the bounds were broken.
struct PodWatch {
    violations: Arc<Mutex<Vec<String>>>,
    stop: tokio_util::sync::CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PodWatch {
    fn start(c: &Cluster, ns: &str, selector: &str, max_pods: usize, min_ready: usize) -> Self {
        use futures::StreamExt as _;
        use k8s_openapi::api::core::v1::Pod;
        use kube::runtime::watcher;
        let violations: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = tokio_util::sync::CancellationToken::new();
        let (kubeconfig, ns, selector) =
            (c.kubeconfig.clone(), ns.to_string(), selector.to_string());
        let (v, s) = (violations.clone(), stop.clone());
        let (listed_tx, listed_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async move {
                let client = skiff_client::http::client(&kubeconfig).await.unwrap();
                let api: kube::Api<Pod> = kube::Api::namespaced(client, &ns);
                let mut events = watcher(api, watcher::Config::default().labels(&selector)).boxed();
                let mut pods: BTreeMap<String, (bool, bool)> = BTreeMap::new();
                let mut listed = false;
                loop {
                    let event = tokio::select! {
                        _ = s.cancelled() => return,
                        e = events.next() => e,
                    };
                    let Some(Ok(event)) = event else { continue };
                    match event {
                        watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                            let alive = p.metadata.deletion_timestamp.is_none();
                            let ready = p
                                .status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                });
                            pods.insert(
                                p.metadata.name.clone().unwrap_or_default(),
                                (alive, alive && ready),
                            );
                        }
                        watcher::Event::Delete(p) => {
                            pods.remove(&p.metadata.name.clone().unwrap_or_default());
                        }
                        watcher::Event::InitDone => {
                            listed = true;
                            let _ = listed_tx.send(());
                        }
                        watcher::Event::Init => {}
                    }
                    if listed {
                        let total = pods.values().filter(|(alive, _)| *alive).count();
                        let ready = pods.values().filter(|(_, ready)| *ready).count();
                        if total > max_pods || ready < min_ready {
                            v.lock()
                                .unwrap()
                                .push(format!("{total} pods, {ready} ready: {pods:?}"));
                        }
                    }
                }
            });
        });
        listed_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the pod watch never listed");
        Self {
            violations,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<String> {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.violations.lock().unwrap().clone()
    }
}

fn rolling_update(c: &Cluster) {
    let ns = "roll";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: roll}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: c
        image: busybox
        imagePullPolicy: IfNotPresent
        env: [{name: V, value: "1"}]
        command: ["sh", "-c", "mkdir -p /www && echo v$V > /www/index.html && exec httpd -f -p 8080 -h /www"]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
"#,
    );
    let status = |args: &[&str]| {
        let mut all = vec!["-n", ns];
        all.extend_from_slice(args);
        c.kubectl(&all)
    };
    status(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    // The roll, watched: at most 3 + 1 pods, never fewer than 3 ready.
    let watch = PodWatch::start(c, ns, "app=web", 4, 3);
    status(&["set", "env", "deployment/web", "V=2"]);
    status(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let violations = watch.finish();
    assert!(
        violations.is_empty(),
        "bounds broken during the roll: {violations:?}"
    );
    let history = status(&["rollout", "history", "deployment/web"]);
    assert!(
        history.contains('1') && history.contains('2'),
        "history: {history}"
    );
    let sets = status(&[
        "get",
        "rs",
        "-o",
        "jsonpath={range .items[*]}{.spec.replicas} {end}",
    ]);
    assert_eq!(sets.split_whitespace().count(), 2, "replicasets: {sets}");

    // Undo: back to V=1, as revision 3.
    status(&["rollout", "undo", "deployment/web"]);
    status(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let env = status(&[
        "get",
        "deployment/web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].env[0].value}",
    ]);
    assert_eq!(env, "1");
    let revision = status(&[
        "get",
        "deployment/web",
        "-o",
        "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
    ]);
    assert_eq!(revision, "3");

    // Scale, restart, pause and resume.
    status(&["scale", "deployment/web", "--replicas=2"]);
    wait_for("2 ready replicas", Duration::from_secs(120), || {
        let r = status(&[
            "get",
            "deployment/web",
            "-o",
            "jsonpath={.status.readyReplicas}/{.status.replicas}",
        ]);
        (r == "2/2").then_some(())
    });
    status(&["rollout", "restart", "deployment/web"]);
    status(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    status(&["rollout", "pause", "deployment/web"]);
    status(&["set", "env", "deployment/web", "V=4"]);
    wait_for("the paused condition", Duration::from_secs(60), || {
        let reason = status(&[
            "get",
            "deployment/web",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}",
        ]);
        (reason == "DeploymentPaused").then_some(())
    });
    let before = status(&["get", "rs", "-o", "name"]).lines().count();
    status(&["rollout", "resume", "deployment/web"]);
    status(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let after = status(&["get", "rs", "-o", "name"]).lines().count();
    assert_eq!(after, before + 1, "resuming rolled out the paused change");
}

fn progress_deadline(c: &Cluster) {
    let ns = "deadline";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken, namespace: deadline}
spec:
  replicas: 1
  progressDeadlineSeconds: 5
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec:
      containers:
      - {name: c, image: "127.0.0.1:1/missing:1"}
"#,
    );
    let out = c.kubectl_output(&[
        "-n",
        ns,
        "rollout",
        "status",
        "deployment/broken",
        "--timeout=120s",
    ]);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "rollout status succeeded: {text}");
    assert!(text.contains("exceeded its progress deadline"), "{text}");
    let reason = field(
        c,
        ns,
        &["deployment/broken"],
        "{.status.conditions[?(@.type==\"Progressing\")].reason}",
    );
    assert_eq!(reason, "ProgressDeadlineExceeded");
}

fn statefulset(c: &Cluster) {
    let ns = "sts";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: v1
kind: Service
metadata: {name: db, namespace: sts}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: sts}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "exec sleep 3600"]
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 16Mi}}
"#,
    );
    c.kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        "statefulset/db",
        "--timeout=180s",
    ]);
    let hostname = c.kubectl(&["-n", ns, "exec", "db-0", "--", "hostname"]);
    assert_eq!(hostname.trim(), "db-0");
    c.kubectl(&[
        "-n",
        ns,
        "exec",
        "db-0",
        "--",
        "sh",
        "-c",
        "echo kept > /data/file",
    ]);
    let uid = field(c, ns, &["pod", "db-0"], "{.metadata.uid}");
    c.kubectl(&["-n", ns, "delete", "pod", "db-0"]);
    wait_for("db-0 to come back", Duration::from_secs(120), || {
        let out = c.kubectl_output(&[
            "-n",
            ns,
            "get",
            "pod",
            "db-0",
            "-o",
            "jsonpath={.metadata.uid}",
        ]);
        let now = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success() && !now.is_empty() && now != uid).then_some(())
    });
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=Ready",
        "pod/db-0",
        "--timeout=120s",
    ]);
    let data = c.kubectl(&["-n", ns, "exec", "db-0", "--", "cat", "/data/file"]);
    assert_eq!(data.trim(), "kept");
    let claim = field(c, ns, &["pvc", "data-db-0"], "{.status.phase}");
    assert_eq!(claim, "Bound");
}

fn daemonset(c: &Cluster) {
    let ns = "ds";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: ds}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
"#,
    );
    c.kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        "daemonset/agent",
        "--timeout=180s",
    ]);
    let nodes = field(
        c,
        ns,
        &["pods", "-l", "app=agent"],
        "{.items[*].spec.nodeName}",
    );
    assert_eq!(nodes.split_whitespace().collect::<Vec<_>>(), [c.node()]);
    let status = field(
        c,
        ns,
        &["daemonset/agent"],
        "{.status.desiredNumberScheduled}/{.status.numberReady}",
    );
    assert_eq!(status, "1/1");
}

fn job_condition(c: &Cluster, ns: &str, job: &str, type_: &str) -> String {
    c.kubectl(&[
        "-n",
        ns,
        "get",
        &format!("job/{job}"),
        "-o",
        &format!("jsonpath={{.status.conditions[?(@.type==\"{type_}\")].reason}}"),
    ])
}

fn jobs(c: &Cluster) {
    let ns = "jobs";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: batch/v1
kind: Job
metadata: {name: ok, namespace: jobs}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo done"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: indexed, namespace: jobs}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo index=$JOB_COMPLETION_INDEX"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: flaky, namespace: jobs}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "exit 1"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: fatal, namespace: jobs}
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {containerName: c, operator: In, values: [42]}
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "exit 42"]}]
"#,
    );
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=complete",
        "job/ok",
        "--timeout=180s",
    ]);
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=complete",
        "job/indexed",
        "--timeout=180s",
    ]);
    let logs: Vec<String> = (0..3)
        .map(|i| {
            let pod = c.kubectl(&[
                "-n",
                ns,
                "get",
                "pods",
                "-l",
                &format!("batch.kubernetes.io/job-completion-index={i},job-name=indexed"),
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ]);
            c.kubectl(&["-n", ns, "logs", &pod]).trim().to_string()
        })
        .collect();
    assert_eq!(logs, ["index=0", "index=1", "index=2"]);
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=failed",
        "job/fatal",
        "--timeout=180s",
    ]);
    assert_eq!(job_condition(c, ns, "fatal", "Failed"), "PodFailurePolicy");
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=failed",
        "job/flaky",
        "--timeout=180s",
    ]);
    assert_eq!(
        job_condition(c, ns, "flaky", "Failed"),
        "BackoffLimitExceeded"
    );
    let failed = field(c, ns, &["job/flaky"], "{.status.failed}");
    assert_eq!(failed, "2");
}

fn cronjob(c: &Cluster) {
    let ns = "cron";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: batch/v1
kind: CronJob
metadata: {name: tick, namespace: cron}
spec:
  schedule: "* * * * *"
  successfulJobsHistoryLimit: 3
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "date"]}]
"#,
    );
    c.kubectl(&["-n", ns, "create", "job", "--from=cronjob/tick", "by-hand"]);
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=complete",
        "job/by-hand",
        "--timeout=180s",
    ]);
    // The next minute's run (at most a minute away).
    let job = wait_for("the cronjob to fire", Duration::from_secs(150), || {
        let names = field(c, ns, &["jobs"], "{.items[*].metadata.name}");
        names
            .split_whitespace()
            .find(|n| n.starts_with("tick-"))
            .map(String::from)
    });
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=complete",
        &format!("job/{job}"),
        "--timeout=180s",
    ]);
    let last = field(c, ns, &["cronjob/tick"], "{.status.lastScheduleTime}");
    assert!(!last.is_empty(), "no lastScheduleTime");
    wait_for("lastSuccessfulTime", Duration::from_secs(60), || {
        let t = field(c, ns, &["cronjob/tick"], "{.status.lastSuccessfulTime}");
        (!t.is_empty()).then_some(())
    });
}

fn endpoints(c: &Cluster) {
    let ns = "eps";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: eps}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: eps}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        imagePullPolicy: IfNotPresent
        command: ["sleep", "3600"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          exec: {command: ["test", "-f", "/tmp/ready"]}
          periodSeconds: 1
"#,
    );
    let get = |path: &str| {
        c.kubectl(&[
            "-n",
            ns,
            "get",
            "endpoints/web",
            "-o",
            &format!("jsonpath={path}"),
        ])
    };
    wait_for("2 not-ready addresses", Duration::from_secs(120), || {
        (get("{.subsets[0].notReadyAddresses[*].ip}")
            .split_whitespace()
            .count()
            == 2)
            .then_some(())
    });
    assert_eq!(get("{.subsets[0].ports[0].port}"), "8080");
    let pods = field(
        c,
        ns,
        &["pods", "-l", "app=web"],
        "{.items[*].metadata.name}",
    );
    let first = pods.split_whitespace().next().unwrap().to_string();
    let ip = c.kubectl(&[
        "-n",
        ns,
        "get",
        "pod",
        &first,
        "-o",
        "jsonpath={.status.podIP}",
    ]);
    c.kubectl(&["-n", ns, "exec", &first, "--", "touch", "/tmp/ready"]);
    wait_for(
        "the ready pod in addresses",
        Duration::from_secs(60),
        || (get("{.subsets[0].addresses[*].ip}") == ip).then_some(()),
    );
    let slice_ready = c.kubectl(&[
        "-n",
        ns,
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
        "-o",
        &format!("jsonpath={{.items[0].endpoints[?(@.addresses[0]==\"{ip}\")].conditions.ready}}"),
    ]);
    assert_eq!(slice_ready, "true");
}

fn cascade(c: &Cluster) {
    let ns = "cascade";
    namespace(c, ns);
    for name in ["gone", "kept"] {
        c.apply(&format!(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: cascade}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}}]
"#
        ));
    }
    for name in ["gone", "kept"] {
        c.kubectl(&[
            "-n",
            ns,
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=180s",
        ]);
    }
    let count = |kind: &str, app: &str| {
        c.kubectl(&[
            "-n",
            ns,
            "get",
            kind,
            "-l",
            &format!("app={app}"),
            "-o",
            "name",
        ])
        .lines()
        .count()
    };
    c.kubectl(&["-n", ns, "delete", "deployment/gone", "--wait=true"]);
    wait_for(
        "the ReplicaSet and pods to go",
        Duration::from_secs(120),
        || (count("rs", "gone") == 0 && count("pods", "gone") == 0).then_some(()),
    );
    c.kubectl(&[
        "-n",
        ns,
        "delete",
        "deployment/kept",
        "--cascade=orphan",
        "--wait=true",
    ]);
    assert_eq!(count("rs", "kept"), 1);
    assert_eq!(count("pods", "kept"), 2);
    let owners = field(
        c,
        ns,
        &["rs", "-l", "app=kept"],
        "{.items[0].metadata.ownerReferences}",
    );
    assert!(
        owners.is_empty(),
        "orphaned ReplicaSet still owned: {owners}"
    );
}

fn namespace_deletion(c: &Cluster) {
    let ns = "doomed";
    namespace(c, ns);
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: doomed}
spec:
  terminationGracePeriodSeconds: 2
  containers: [{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}]
"#,
    );
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=Ready",
        "pod/sleeper",
        "--timeout=120s",
    ]);
    // kubectl waits for the namespace to be gone.
    c.kubectl(&["delete", "namespace", ns, "--timeout=180s"]);
    let out = c.kubectl_output(&["get", "namespace", ns]);
    assert!(!out.status.success(), "the namespace is still there");
}

fn python_client(c: &Cluster) {
    let ns = "python";
    namespace(c, ns);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("SKIFF_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/deps.sh",
        python.display()
    );
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/workloads.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .env("KUBECONFIG", &c.kubeconfig)
        .env("NAMESPACE", ns)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python workloads failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
