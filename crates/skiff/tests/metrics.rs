//! Metrics end to end on a real `skiff server` (containerd, runc, CNI):
//! the API server's `/metrics` (with the scheduler's and the controller
//! manager's), the agent's `/metrics` and `/metrics/resource` each parse
//! line by line as the Prometheus text format; request counters grow with
//! the requests made, the pod-start histogram counts the pods started,
//! the running-pods gauge matches the pods running, the resource endpoint
//! has the pods' CPU and memory; and access is upstream's: `/metrics`
//! needs `get` on that URL (group `system:monitoring` has it, a user
//! without rights gets 403), the agent's are `nodes/metrics`.

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
