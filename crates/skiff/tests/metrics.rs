//! Metrics end to end on a real `skiff server` (containerd, runc, CNI):
//! the API server's `/metrics` (with the scheduler's and the controller
//! manager's), the agent's `/metrics` and `/metrics/resource` each parse
//! line by line as the Prometheus text format; request counters grow with
//! the requests made, the pod-start histogram counts the pods started,
//! the running-pods gauge matches the pods running, the resource endpoint
//! has the pods' CPU and memory; and access is upstream's: `/metrics`
//! needs `get` on that URL (group `system:monitoring` has it, a user
//! without rights gets 403), the agent's are `nodes/metrics`. Standalone
//! `skiff scheduler` and `skiff controller-manager` serve theirs on their
//! own secure ports, for bearer tokens the API server reviews.

mod cluster;

use std::path::PathBuf;
use std::time::Duration;

use cluster::{cert_files, kubectl_as, wait_for, Cluster, Options};
use prometheus_parse::{LineInfo, Scrape, Value};

/// Parses `text` as the Prometheus text format, failing on any line the
/// parser does not read as a comment, a type, a help text or a sample.
fn parse(text: &str) -> Scrape {
    assert!(!text.is_empty(), "no metrics");
    for line in text.lines() {
        match LineInfo::parse(line) {
            LineInfo::Sample { value, .. } => assert!(
                value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
                "not a sample value: {line:?}"
            ),
            LineInfo::Ignored => assert!(
                line.starts_with("# ")
                    && !line.starts_with("# HELP")
                    && !line.starts_with("# TYPE"),
                "not the text format: {line:?}"
            ),
            LineInfo::Doc { .. } | LineInfo::Type { .. } | LineInfo::Empty => {}
        }
    }
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap()
}

fn value(v: &Value) -> f64 {
    match v {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(_) | Value::Summary(_) => f64::NAN,
    }
}

/// The sum of the samples of `metric` whose labels include `labels`.
fn sum(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| value(&s.value))
        .sum()
}

fn has(scrape: &Scrape, metric: &str) -> bool {
    scrape.samples.iter().any(|s| s.metric == metric)
}

fn api_metrics(c: &Cluster) -> Scrape {
    parse(&c.kubectl(&["get", "--raw", "/metrics"]))
}

fn agent_metrics(c: &Cluster, path: &str, admin: &(PathBuf, PathBuf)) -> Scrape {
    let (code, body) = c.agent_get(path, admin);
    assert_eq!(code, "200", "{path}: {body}");
    parse(&body)
}

const PODS: [&str; 2] = ["m1", "m2"];

fn pod_yaml(name: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.2; done"]
"#
    )
}

#[test]
fn metrics_of_every_component_parse_count_and_are_guarded() {
    let c = Cluster::start(Options::default());
    let dir = tempfile::tempdir().unwrap();
    let admin = cert_files(&c.kubeconfig, dir.path());

    // The API server: request counters grow with the requests made (a
    // namespaced LIST of PodTemplates: no component of the cluster makes
    // one, so the count is exactly ours).
    let list_templates = [
        ("verb", "LIST"),
        ("group", ""),
        ("version", "v1"),
        ("resource", "podtemplates"),
        ("scope", "namespace"),
        ("code", "200"),
    ];
    let before = sum(&api_metrics(&c), "apiserver_request_total", &list_templates);
    for _ in 0..5 {
        c.kubectl(&["get", "podtemplates", "-n", "default"]);
    }
    let api = api_metrics(&c);
    let after = sum(&api, "apiserver_request_total", &list_templates);
    assert_eq!(
        after - before,
        5.0,
        "LIST podtemplates went from {before} to {after}"
    );
    let durations = api
        .samples
        .iter()
        .find(|s| {
            s.metric == "apiserver_request_duration_seconds"
                && s.labels.get("resource") == Some("podtemplates")
                && s.labels.get("verb") == Some("LIST")
        })
        .expect("apiserver_request_duration_seconds for LIST podtemplates");
    let Value::Histogram(buckets) = &durations.value else {
        panic!("not a histogram: {durations:?}")
    };
    let bounds: Vec<f64> = buckets.iter().map(|b| b.less_than).collect();
    assert_eq!(bounds.first(), Some(&0.005), "{bounds:?}");
    assert!(
        bounds.contains(&60.0) && bounds.len() == 24,
        "upstream's buckets and +Inf: {bounds:?}"
    );
    assert!(
        sum(
            &api,
            "apiserver_storage_objects",
            &[("resource", "namespaces")]
        ) >= 4.0
    );
    assert!(
        has(&api, "apiserver_watch_events_total"),
        "components watch"
    );
    assert!(sum(&api, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(
        has(&api, "process_cpu_seconds_total")
            && has(&api, "process_open_fds")
            && has(&api, "process_start_time_seconds")
    );
    // The controller manager's queues and the scheduler are served here too.
    assert!(
        sum(&api, "workqueue_adds_total", &[("name", "namespace")]) >= 1.0,
        "namespace controller's adds"
    );
    assert!(
        has(&api, "workqueue_depth")
            && has(&api, "workqueue_queue_duration_seconds_count")
            && has(&api, "workqueue_work_duration_seconds_count")
    );
    assert!(has(&api, "scheduler_pending_pods"));

    // Access: nonResourceURL get /metrics.
    let nobody = c.mint(dir.path(), "nobody", &[]);
    let out = kubectl_as(&nobody, &["get", "--raw", "/metrics"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("Forbidden"),
        "{stderr}"
    );
    let prometheus = c.mint(dir.path(), "prometheus", &["system:monitoring"]);
    let out = kubectl_as(&prometheus, &["get", "--raw", "/metrics"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&String::from_utf8_lossy(&out.stdout));

    // The agent: nodes/metrics.
    let nobody_cert = cert_files(&nobody, dir.path());
    for path in ["/metrics", "/metrics/resource"] {
        let (code, body) = c.agent_get(path, &nobody_cert);
        assert_eq!(code, "403", "{path}: {body}");
    }
    let starts = |s: &Scrape| sum(s, "kubelet_pod_start_sli_duration_seconds_count", &[]);
    let agent = agent_metrics(&c, "/metrics", &admin);
    let started_before = starts(&agent);
    assert_eq!(
        started_before,
        sum(
            &agent,
            "kubelet_pod_start_total_duration_seconds_count",
            &[]
        )
    );
    for pod in PODS {
        c.apply(&pod_yaml(pod));
    }
    for pod in PODS {
        c.wait(&format!("pod/{pod}"), "condition=Ready", 90);
    }
    // The pod-start histograms count each pod started, once.
    let agent = wait_for("the pod starts counted", Duration::from_secs(20), || {
        let s = agent_metrics(&c, "/metrics", &admin);
        (starts(&s) >= started_before + 2.0).then_some(s)
    });
    assert_eq!(starts(&agent), started_before + 2.0);
    assert_eq!(
        sum(
            &agent,
            "kubelet_pod_start_total_duration_seconds_count",
            &[]
        ),
        started_before + 2.0
    );
    assert!(sum(&agent, "kubelet_pod_start_total_duration_seconds_sum", &[]) > 0.0);
    assert!(
        sum(
            &agent,
            "kubelet_runtime_operations_total",
            &[("operation_type", "run_podsandbox")]
        ) >= 2.0
    );
    assert!(
        sum(
            &agent,
            "kubelet_runtime_operations_duration_seconds_count",
            &[("operation_type", "start_container")]
        ) >= 2.0
    );
    assert!(
        sum(
            &agent,
            "kubelet_pod_worker_duration_seconds_count",
            &[("operation_type", "create")]
        ) >= 2.0
    );
    assert!(sum(&agent, "process_resident_memory_bytes", &[]) > 0.0);
    // The running-pods gauge matches the pods running on the node (the
    // relist runs every second).
    let node = c.node();
    let running_pods = || {
        let out = c.kubectl(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            &format!("spec.nodeName={node},status.phase=Running"),
            "-o",
            "name",
        ]);
        out.lines().count() as f64
    };
    wait_for(
        "kubelet_running_pods to match",
        Duration::from_secs(20),
        || {
            let s = agent_metrics(&c, "/metrics", &admin);
            let gauge = sum(&s, "kubelet_running_pods", &[]);
            let running = sum(
                &s,
                "kubelet_running_containers",
                &[("container_state", "running")],
            );
            (gauge == running_pods() && gauge >= 2.0 && running >= 2.0).then_some(())
        },
    );

    // The resource endpoint: the node, each pod and its container.
    let resource = wait_for("the pods' CPU time", Duration::from_secs(20), || {
        let s = agent_metrics(&c, "/metrics/resource", &admin);
        PODS.iter()
            .all(|p| {
                sum(
                    &s,
                    "pod_cpu_usage_seconds_total",
                    &[("namespace", "default"), ("pod", p)],
                ) > 0.0
            })
            .then_some(s)
    });
    assert!(sum(&resource, "node_cpu_usage_seconds_total", &[]) > 0.0);
    assert!(sum(&resource, "node_memory_working_set_bytes", &[]) > 0.0);
    assert_eq!(sum(&resource, "resource_scrape_error", &[]), 0.0);
    let help = resource.docs.get("container_cpu_usage_seconds_total");
    assert_eq!(
        help.map(String::as_str),
        Some("[STABLE] Cumulative cpu time consumed by the container in core-seconds")
    );
    for pod in PODS {
        let labels = [
            ("container", "main"),
            ("namespace", "default"),
            ("pod", pod),
        ];
        assert!(
            sum(&resource, "container_cpu_usage_seconds_total", &labels) > 0.0,
            "{pod}"
        );
        assert!(
            sum(&resource, "container_memory_working_set_bytes", &labels) > 0.0,
            "{pod}"
        );
        assert!(
            sum(&resource, "pod_memory_working_set_bytes", &[("pod", pod)]) > 0.0,
            "{pod}"
        );
    }
    c.assert_no_component_refused();
}

/// A child process killed when the test ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `https://127.0.0.1:PORT/PATH` with a bearer token: (status, body).
fn secure_get(port: u16, path: &str, token: Option<&str>) -> (String, String) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sk", "--max-time", "20", "-w", "\n%{http_code}"]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_string(), body.to_string())
}

/// Standalone `skiff scheduler` and `skiff controller-manager` serve
/// their metrics on their own secure ports (kube-scheduler's 10259 and
/// kube-controller-manager's 10257; free ports here), HTTPS, for callers
/// the API server authenticates (TokenReview) and allows `get` on
/// `/metrics` (SubjectAccessReview): a service account bound to
/// `system:monitoring` reads them; one without gets 403, no token 401;
/// `/healthz` is open.
#[test]
fn standalone_scheduler_and_controller_manager_serve_metrics_on_secure_ports() {
    let c = Cluster::start(Options::default());
    let (scheduler_port, manager_port) = (cluster::free_port(), cluster::free_port());
    let spawn = |args: &[&str], port: u16| {
        Child(
            std::process::Command::new(cluster::SKIFF)
                .args(args)
                .arg("--kubeconfig")
                .arg(&c.kubeconfig)
                .args(["--bind-address", "127.0.0.1", "--secure-port"])
                .arg(port.to_string())
                .env("SKIFF_LOG", "warn")
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    // Standing by behind the server's own (leader election): still serving.
    let _scheduler = spawn(&["scheduler"], scheduler_port);
    let _manager = spawn(&["controller-manager"], manager_port);

    c.kubectl(&["create", "serviceaccount", "prom"]);
    c.kubectl(&["create", "serviceaccount", "nobody"]);
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "prom-monitoring",
        "--clusterrole=system:monitoring",
        "--serviceaccount=default:prom",
    ]);
    let prom = c.kubectl(&["create", "token", "prom"]);
    let nobody = c.kubectl(&["create", "token", "nobody"]);
    let (prom, nobody) = (prom.trim(), nobody.trim());

    for (port, metric) in [
        (scheduler_port, "scheduler_pending_pods"),
        (manager_port, "process_start_time_seconds"),
    ] {
        wait_for("the secure port", Duration::from_secs(30), || {
            (secure_get(port, "/healthz", None).0 == "200").then_some(())
        });
        assert_eq!(secure_get(port, "/metrics", None).0, "401");
        assert_eq!(secure_get(port, "/metrics", Some("not-a-token")).0, "401");
        assert_eq!(secure_get(port, "/metrics", Some(nobody)).0, "403");
        let (code, body) = secure_get(port, "/metrics", Some(prom));
        assert_eq!(code, "200", "{body}");
        let scrape = parse(&body);
        assert!(has(&scrape, metric), "{metric} on port {port}: {body}");
        assert!(sum(&scrape, "process_resident_memory_bytes", &[]) > 0.0);
    }
    // Each process its own registry (the controller manager stands by:
    // its work queues appear once it leads).
    let (_, body) = secure_get(manager_port, "/metrics", Some(prom));
    assert!(!has(&parse(&body), "scheduler_pending_pods"), "{body}");
}
