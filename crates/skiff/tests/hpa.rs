//! The HorizontalPodAutoscaler end to end on a real `skiff server`
//! (containerd, runc, CNI), metrics.k8s.io scraped every 2 s, the
//! autoscalers synced every 2 s with a 10 s downscale stabilization
//! window (`--horizontal-pod-autoscaler-*`): `kubectl autoscale
//! deployment web --cpu-percent=50 --min=1 --max=3` on a Deployment whose
//! pod spins at its limit (100m, its request) scales it up with
//! upstream's SuccessfulRescale event and conditions; once the pods are
//! made idle (the command becomes `sleep`) it scales back down to the
//! minimum after the window.

mod cluster;

use std::time::Duration;

use cluster::{wait_for_explained, Cluster, Options};

/// A CPU-busy Deployment; its limit keeps each pod at 100m.
const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: spin
        image: busybox
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "while :; do :; done"]
        resources: {requests: {cpu: 100m}, limits: {cpu: 100m}}
"#;

fn replicas(c: &Cluster) -> i64 {
    c.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.replicas}",
    ])
    .trim()
    .parse()
    .unwrap_or(-1)
}

/// `reason=message` of the autoscaler's events, oldest first.
fn events(c: &Cluster) -> Vec<String> {
    c.kubectl(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.kind=HorizontalPodAutoscaler,involvedObject.name=web",
        "--sort-by=.metadata.creationTimestamp",
        "-o",
        "jsonpath={range .items[*]}{.reason}={.message}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// `type=status/reason` of each of the autoscaler's conditions.
fn conditions(c: &Cluster) -> Vec<String> {
    c.kubectl(&[
        "get",
        "horizontalpodautoscalers.v2.autoscaling",
        "web",
        "-o",
        "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}{\"\\n\"}{end}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

fn explain(c: &Cluster) -> String {
    let describe = c.kubectl_output(&["describe", "hpa", "web"]);
    let pods = c.kubectl_output(&["get", "pods", "-o", "wide"]);
    let top = c.kubectl_output(&["top", "pod"]);
    let log = c.log_text();
    let tail: Vec<&str> = log.lines().rev().take(60).collect();
    format!(
        "\n{}{}\n{}\n{}{}\nserver log (last lines):\n{}",
        String::from_utf8_lossy(&describe.stdout),
        String::from_utf8_lossy(&describe.stderr),
        String::from_utf8_lossy(&pods.stdout),
        String::from_utf8_lossy(&top.stdout),
        String::from_utf8_lossy(&top.stderr),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

#[test]
fn an_hpa_scales_a_busy_deployment_up_and_an_idle_one_down() {
    let c = Cluster::start(Options {
        extra: [
            "--metric-resolution",
            "2s",
            "--horizontal-pod-autoscaler-sync-period",
            "2s",
            "--horizontal-pod-autoscaler-downscale-stabilization",
            "10s",
        ]
        .map(String::from)
        .to_vec(),
        ..Options::default()
    });
    c.apply(WEB);
    c.wait("deployment/web", "condition=Available", 120);
    c.kubectl(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=3",
    ]);

    // Busy at 100 % of its request against a 50 % target: up.
    let rescaled = wait_for_explained(
        "the autoscaler to scale the busy deployment up",
        Duration::from_secs(90),
        || {
            events(&c)
                .into_iter()
                .find(|e| e.starts_with("SuccessfulRescale="))
                .filter(|_| replicas(&c) >= 2)
        },
        || explain(&c),
    );
    assert!(
        rescaled
            .ends_with("; reason: cpu resource utilization (percentage of request) above target")
            && rescaled.starts_with("SuccessfulRescale=New size: "),
        "{rescaled}"
    );
    // The status of that sync (written after the event is queued).
    let status = wait_for_explained(
        "the autoscaler's status to show a valid metric and the rescale",
        Duration::from_secs(30),
        || {
            let conditions = conditions(&c);
            let status = c.kubectl(&[
                "get",
                "horizontalpodautoscalers.v2.autoscaling",
                "web",
                "-o",
                "jsonpath={.status.currentMetrics[0].resource.name} {.status.currentMetrics[0].resource.current.averageUtilization} {.status.lastScaleTime}",
            ]);
            let ok = status.split_whitespace().count() == 3
                && conditions.contains(&"ScalingActive=True/ValidMetricFound".to_string())
                && conditions
                    .iter()
                    .any(|c| c.starts_with("AbleToScale=True/"))
                && conditions.iter().any(|c| c.starts_with("ScalingLimited="));
            ok.then_some(status)
        },
        || format!("{:?}{}", conditions(&c), explain(&c)),
    );
    let fields: Vec<&str> = status.split_whitespace().collect();
    assert_eq!(fields[0], "cpu", "{status}");
    assert!(fields[1].parse::<i64>().unwrap() > 55, "{status}");
    // autoscaling/v1 shows the same object with its figure.
    let v1 = c.kubectl(&[
        "get",
        "horizontalpodautoscalers.v1.autoscaling",
        "web",
        "-o",
        "jsonpath={.spec.targetCPUUtilizationPercentage} {.status.currentCPUUtilizationPercentage}",
    ]);
    assert!(
        v1.starts_with("50 "),
        "{v1:?}: {}",
        c.kubectl(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "json"
        ])
    );

    // Idle pods: down to the minimum once the window has passed.
    c.kubectl(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sleep","3600"]}]"#,
    ]);
    let down = wait_for_explained(
        "the autoscaler to scale the idle deployment down",
        Duration::from_secs(90),
        || {
            events(&c)
                .into_iter()
                .find(|e| e == "SuccessfulRescale=New size: 1; reason: All metrics below target")
                .filter(|_| replicas(&c) == 1)
        },
        || explain(&c),
    );
    assert!(!down.is_empty());
    wait_for_explained(
        "the autoscaler's status to say 1 replica is desired",
        Duration::from_secs(30),
        || {
            let desired = c.kubectl(&[
                "get",
                "horizontalpodautoscalers.v2.autoscaling",
                "web",
                "-o",
                "jsonpath={.status.desiredReplicas}",
            ]);
            (desired == "1").then_some(())
        },
        || explain(&c),
    );
    // kubectl's table: the target against the current figure.
    let table = c.kubectl(&["get", "hpa", "web"]);
    assert!(
        table.contains("Deployment/web") && table.contains("/50%"),
        "{table}"
    );
    c.assert_no_component_refused();
}
