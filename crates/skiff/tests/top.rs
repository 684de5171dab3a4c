//! `kubectl top` end to end on a real `skiff server` (containerd, runc,
//! CNI), with metrics.k8s.io scraped every 2 s (`--metric-resolution`):
//! a CPU-busy pod (a shell loop limited to 200m) and an idle one; `top
//! node`, `top pod` and `top pod --containers` print the busy pod's CPU
//! (at least 50m) and memory for both; the APIService is Available; the
//! API answers list/get only; a user without rights gets kubectl's
//! Forbidden, one bound to `view` may run `top pod`.

mod cluster;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use cluster::{wait_for_explained, Cluster, Options, KUBECTL};

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: busy, labels: {app: busy}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: spin
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while :; do :; done"]
    resources: {limits: {cpu: 200m}}
---
apiVersion: v1
kind: Pod
metadata: {name: idle, labels: {app: idle}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: nap
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
"#;

fn kubectl_as(config: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(config)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .unwrap()
}

/// Millicores as kubectl top prints them (`199m`, `1`).
fn millicores(cell: &str) -> u64 {
    match cell.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => cell.parse::<u64>().map(|c| c * 1000).unwrap_or(0),
    }
}

/// The rows of a kubectl table (header dropped), split on whitespace.
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn kubectl_top_shows_a_busy_pods_cpu_and_is_guarded() {
    let c = Cluster::start(Options {
        extra: vec!["--metric-resolution".into(), "2s".into()],
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let admin = |args: &[&str]| kubectl_as(&c.kubeconfig, &cache, args);
    c.apply(PODS);
    c.wait("pod/busy", "condition=Ready", 120);
    c.wait("pod/idle", "condition=Ready", 120);

    // The group is discovered and its APIService becomes Available.
    let resources = c.kubectl(&["api-resources", "--api-group=metrics.k8s.io"]);
    assert!(
        resources.contains("PodMetrics") && resources.contains("NodeMetrics"),
        "{resources}"
    );
    wait_for_explained(
        "the metrics APIService to be Available",
        Duration::from_secs(60),
        || {
            let s = c.kubectl(&[
                "get",
                "apiservice",
                "v1beta1.metrics.k8s.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ]);
            (s == "True").then_some(())
        },
        || c.log_text(),
    );

    // top pod: the busy pod's CPU is its limit's worth; both have memory.
    let pods = wait_for_explained(
        "kubectl top pod to show the busy pod's CPU",
        Duration::from_secs(90),
        || {
            let out = admin(&["top", "pod"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let rows = rows(&text);
            let busy = rows.iter().find(|r| r[0] == "busy")?;
            rows.iter().find(|r| r[0] == "idle")?;
            (millicores(&busy[1]) >= 50).then_some(text)
        },
        || {
            let out = admin(&["top", "pod"]);
            format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                c.log_text()
            )
        },
    );
    for row in rows(&pods) {
        assert_eq!(row.len(), 3, "{pods}");
        assert!(row[2].ends_with("Mi"), "{pods}");
    }
    let busy = rows(&pods).into_iter().find(|r| r[0] == "busy").unwrap();
    assert!(millicores(&busy[1]) <= 260, "limited to 200m: {pods}");

    // The API's own figures: memory for both pods, CPU in nanocores.
    let raw = c.kubectl(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
    ]);
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["kind"], "PodMetricsList", "{raw}");
    for item in list["items"].as_array().unwrap() {
        let usage = &item["containers"][0]["usage"];
        let memory = usage["memory"].as_str().unwrap();
        assert!(memory != "0" && !memory.is_empty(), "{raw}");
        assert!(item["window"].as_str().unwrap().ends_with('s'), "{raw}");
        assert!(item["metadata"]["labels"]["app"].is_string(), "{raw}");
    }

    // --containers and a label selector.
    let out = admin(&["top", "pod", "--containers", "-l", "app=busy"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows_c = rows(&text);
    assert_eq!(
        rows_c.len(),
        1,
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (rows_c[0][0].as_str(), rows_c[0][1].as_str()),
        ("busy", "spin")
    );
    assert!(millicores(&rows_c[0][2]) >= 50, "{text}");

    // top node: the node's CPU includes the busy pod's.
    let out = admin(&["top", "node"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let node = rows(&text)
        .into_iter()
        .find(|r| r[0] == c.node())
        .unwrap_or_else(|| panic!("{text}{}", String::from_utf8_lossy(&out.stderr)));
    assert!(millicores(&node[1]) >= 50, "{text}");
    assert!(node[3].ends_with("Mi") && node[3] != "0Mi", "{text}");

    // Only get and list.
    let body = dir.path().join("pm.json");
    std::fs::write(&body, r#"{"kind":"PodMetrics","metadata":{"name":"x"}}"#).unwrap();
    let out = admin(&[
        "create",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
        "-f",
        body.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("MethodNotAllowed"),
        "{err}"
    );
    let out = admin(&[
        "get",
        "--raw",
        "/apis/metrics.k8s.io/v1beta1/pods?watch=true",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("MethodNotAllowed"),
        "{err}"
    );
    let out = admin(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/nope"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("NotFound"), "{err}");

    // Authorization: nobody is refused; a viewer may.
    let nobody = c.mint(dir.path(), "nobody", &[]);
    let out = kubectl_as(&nobody, &cache, &["top", "pod"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Forbidden") && err.contains("metrics.k8s.io"),
        "{err}"
    );
    c.kubectl(&[
        "create",
        "rolebinding",
        "viewer",
        "--clusterrole=view",
        "--user=viewer",
        "-n",
        "default",
    ]);
    let viewer = c.mint(dir.path(), "viewer", &[]);
    let out = wait_for_explained(
        "the viewer to run kubectl top pod",
        Duration::from_secs(30),
        || {
            let out = kubectl_as(&viewer, &cache, &["top", "pod"]);
            out.status.success().then_some(out)
        },
        || {
            let out = kubectl_as(&viewer, &cache, &["top", "pod"]);
            String::from_utf8_lossy(&out.stderr).into_owned()
        },
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("busy") && text.contains("idle"), "{text}");
    c.assert_no_component_refused();
}
