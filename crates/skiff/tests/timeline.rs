//! End to end, as root, on real containerd, runc, CNI and a local
//! registry: the node tells its own story ([diagnosis] #39, deliverables
//! 1 and 7). A pod with two init containers (one image present, one
//! pulled) and a readiness probe gets one `StartupTimeline` event when it
//! is first Ready, whose annotation is the machine-readable timeline;
//! a pod that waited for a node says why (the scheduler's messages, with
//! their counts); node events are the kubelet's; container events name
//! their container in `involvedObject.fieldPath`; `skiff logs agent`
//! prints the agent's log.
//!
//! How times are compared: creationTimestamp and the Ready condition's
//! lastTransitionTime are whole seconds in the API. The timeline's own
//! millisecond endpoints must fall in those very seconds (the agent takes
//! the Ready time from the condition it wrote), its phases must add up to
//! ready - created within 50 ms, and both endpoints must lie inside what
//! this test observed with its own clock (before the create was sent,
//! after `kubectl wait` saw Ready).

mod cluster;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cluster::{wait_for, Cluster, Options, SKIFF};
use skiff_node::timeline::{message, Finished};
use skiff_testkit::Registry;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// An RFC 3339 time of the API (`2026-01-01T10:00:00Z`) as unix seconds.
fn api_seconds(text: &str) -> i64 {
    let t: k8s_openapi::jiff::Timestamp = text
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{text:?}: {e}"));
    t.as_second()
}

/// Pushes the offline busybox image to `registry` as `name_tag`; the
/// full image name.
fn push_busybox(registry: &Registry, name_tag: &str) -> String {
    let archive = skiff_node::images::builtin::busybox_archive(Path::new("/bin/busybox"))
        .expect("building the busybox image (install busybox-static)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busybox.oci.tar");
    std::fs::write(&path, archive).unwrap();
    registry.push(&path, name_tag).unwrap();
    format!("{}/{name_tag}", registry.addr())
}

/// `jsonpath` over the events of `selector`, one line per event.
fn events(c: &Cluster, selector: &str, jsonpath: &str) -> Vec<String> {
    let out = c.kubectl(&[
        "get",
        "events",
        "--field-selector",
        selector,
        "-o",
        &format!("jsonpath={{range .items[*]}}{jsonpath}{{\"\\n\"}}{{end}}"),
    ]);
    out.lines().map(str::to_string).collect()
}

#[test]
fn a_pod_start_tells_its_timeline_and_the_node_its_story() {
    let registry = Registry::start();
    let pulled = push_busybox(&registry, "test/busybox:v1");
    let mut c = Cluster::start(Options::default());
    let node = c.node();

    // Node events, as the kubelet's.
    let node_events = wait_for("the node's events", Duration::from_secs(30), || {
        let ev = events(
            &c,
            &format!("involvedObject.kind=Node,involvedObject.name={node}"),
            "{.reason}{\"\\t\"}{.message}{\"\\t\"}{.source.component}",
        );
        ev.iter()
            .any(|l| l.starts_with("NodeReady\t"))
            .then_some(ev)
    });
    for (reason, message) in [
        ("Starting", "Starting kubelet.".to_string()),
        (
            "NodeHasSufficientMemory",
            format!("Node {node} status is now: NodeHasSufficientMemory"),
        ),
        (
            "NodeHasNoDiskPressure",
            format!("Node {node} status is now: NodeHasNoDiskPressure"),
        ),
        (
            "NodeHasSufficientPID",
            format!("Node {node} status is now: NodeHasSufficientPID"),
        ),
        ("NodeReady", format!("Node {node} status is now: NodeReady")),
    ] {
        let line = format!("{reason}\t{message}\tkubelet");
        assert!(
            node_events.contains(&line),
            "no {line:?} in the node's events: {node_events:#?}"
        );
    }

    // A pod with init containers (busybox present, the registry's pulled)
    // and a readiness probe that passes after half a second.
    let before_create = now_ms();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: tl}}
spec:
  terminationGracePeriodSeconds: 0
  initContainers:
  - name: i1
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "0.3"]
  - name: i2
    image: "{pulled}"
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: app
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 0.5; touch /tmp/ready; exec sleep 3600"]
    readinessProbe:
      exec: {{command: ["cat", "/tmp/ready"]}}
      periodSeconds: 1
"#
    ));
    c.wait("pod/tl", "condition=Ready", 90);
    let after_ready = now_ms();

    let message = c.wait_event("tl", "StartupTimeline", 30);
    let annotation = events(
        &c,
        "involvedObject.name=tl,reason=StartupTimeline",
        r#"{.metadata.annotations.skiff\.dev/startup-timeline}"#,
    );
    assert_eq!(annotation.len(), 1, "one timeline event: {annotation:#?}");
    let t: Finished = serde_json::from_str(&annotation[0])
        .unwrap_or_else(|e| panic!("the timeline's JSON: {e}: {}", annotation[0]));
    eprintln!(
        "timeline: {message}\n{}",
        serde_json::to_string_pretty(&t).unwrap()
    );

    // The machine-readable form.
    assert_eq!(
        (t.api_version.as_str(), t.kind.as_str()),
        ("skiff.dev/v1alpha1", "PodStartupTimeline")
    );
    assert_eq!(
        (t.namespace.as_str(), t.name.as_str(), t.node.as_str()),
        ("default", "tl", node.as_str())
    );
    assert_eq!(t.uid, c.pod_field("tl", "{.metadata.uid}"));
    let names: Vec<&str> = t.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["scheduling", "node", "sandbox", "init", "start", "ready"]
    );
    let sum: i64 = t.phases.iter().map(|p| p.duration_ms).sum();
    assert!(
        (sum - (t.ready_ms - t.created_ms)).abs() <= 50,
        "phases add up to {sum} ms, created -> ready is {} ms",
        t.ready_ms - t.created_ms
    );
    assert_eq!(t.total_ms, t.ready_ms - t.created_ms);
    for w in t.phases.windows(2) {
        assert_eq!(
            w[0].start_ms + w[0].duration_ms,
            w[1].start_ms,
            "{:?}",
            t.phases
        );
    }
    // The endpoints are the API's, to the second...
    let created = api_seconds(&c.pod_field("tl", "{.metadata.creationTimestamp}"));
    let ready = api_seconds(&c.pod_field(
        "tl",
        r#"{.status.conditions[?(@.type=="Ready")].lastTransitionTime}"#,
    ));
    assert_eq!(t.created_ms.div_euclid(1000), created, "created");
    assert_eq!(
        t.ready_ms.div_euclid(1000),
        ready,
        "Ready's lastTransitionTime"
    );
    // ...and inside what this test saw.
    assert!(
        t.created_ms >= before_create / 1000 * 1000 && t.created_ms <= after_ready,
        "created {} outside [{before_create}, {after_ready}]",
        t.created_ms
    );
    assert!(
        t.ready_ms >= before_create && t.ready_ms <= after_ready + 50,
        "ready {} outside [{before_create}, {after_ready}]",
        t.ready_ms
    );
    // What happened inside the phases.
    let step = |name: &str, container: &str| {
        t.steps
            .iter()
            .find(|s| s.name == name && s.container.as_deref() == Some(container))
            .unwrap_or_else(|| panic!("no {name} step of {container}: {:#?}", t.steps))
    };
    assert_eq!(step("image", "i1").present, Some(true));
    let pull = step("image", "i2");
    assert_eq!(pull.present, Some(false), "{pull:?}");
    assert!(pull.bytes.unwrap_or(0) > 100_000, "{pull:?}");
    // From StartContainer returning (the process runs by then) to its exit.
    assert!(step("run", "i1").duration_ms >= 200, "i1 sleeps 0.3 s");
    let probe = step("readinessProbe", "app");
    assert!(
        probe.duration_ms >= 400,
        "the file appears after 0.5 s: {probe:?}"
    );
    assert!(t.steps.iter().any(|s| s.name == "sandbox"));
    assert_eq!(t.ready_after, "readiness probe");
    assert_eq!(t.init_containers, 2);

    // The event's words.
    assert!(
        message.starts_with(&format!(
            "Started in {}: scheduling ",
            message::duration(t.total_ms)
        )),
        "{message}"
    );
    for part in [
        ", sandbox ".to_string(),
        ", image busybox present".to_string(),
        format!(", image {pulled} pulled in "),
        " (2 containers), start ".to_string(),
        "(readiness probe)".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message:?}");
    }
    let described = c.kubectl(&["describe", "pod", "tl"]);
    assert!(described.contains("StartupTimeline"), "{described}");
    let listed = c.kubectl(&["events", "--for", "pod/tl"]);
    assert!(listed.contains("StartupTimeline"), "{listed}");
    let listed = c.kubectl(&["events", "--for", &format!("node/{node}")]);
    assert!(listed.contains("NodeReady"), "{listed}");

    // Container events name their container, as the kubelet's.
    let started = events(
        &c,
        "involvedObject.name=tl,reason=Started",
        "{.involvedObject.fieldPath}",
    );
    for path in [
        "spec.initContainers{i1}",
        "spec.initContainers{i2}",
        "spec.containers{app}",
    ] {
        assert!(
            started.iter().any(|p| p == path),
            "{path} not in {started:?}"
        );
    }
    let pulling = events(
        &c,
        "involvedObject.name=tl,reason=Pulling",
        "{.involvedObject.fieldPath}",
    );
    assert_eq!(pulling, ["spec.initContainers{i2}"]);
    // `kubectl get events -o wide` shows it as SUBOBJECT.
    let wide = c.kubectl(&[
        "get",
        "events",
        "-o",
        "wide",
        "--field-selector",
        "involvedObject.name=tl,reason=Created",
    ]);
    assert!(wide.contains("spec.containers{app}"), "{wide}");
    let timeline_path = events(
        &c,
        "involvedObject.name=tl,reason=StartupTimeline",
        "{.involvedObject.fieldPath}",
    );
    assert_eq!(timeline_path, [""], "the timeline is about the pod");

    // Once: the probe keeps passing, nothing more is written.
    std::thread::sleep(Duration::from_secs(3));
    let counts = events(
        &c,
        "involvedObject.name=tl,reason=StartupTimeline",
        "{.count}",
    );
    assert_eq!(counts, ["1"], "one StartupTimeline event, written once");

    // The agent's log, as `journalctl -u kubelet` would show it.
    let out = Command::new(SKIFF)
        .args(["logs", "agent", "--tail", "500"])
        .arg("--data-dir")
        .arg(&c.data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("Observed pod startup duration"), "{log}");
    assert!(log.contains("pod=tl_default("), "{log}");
    let others: Vec<&str> = log
        .lines()
        .filter(|l| {
            [" INFO ", " WARN "].iter().any(|level| l.contains(level))
                && !["skiff_node", "skiff_proxy", "skiff_dns"]
                    .iter()
                    .any(|t| l.contains(t))
        })
        .collect();
    assert!(others.is_empty(), "not the agent's lines: {others:#?}");

    // A pod that waits for a node: its timeline says what it waited for
    // (the scheduler's messages, through its binding), and still adds up.
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: waiter}
spec:
  terminationGracePeriodSeconds: 0
  nodeSelector: {skiff.dev/timeline-test: "yes"}
  containers:
  - name: app
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
"#,
    );
    let unschedulable = c.wait_event("waiter", "FailedScheduling", 30);
    assert!(
        unschedulable.contains("didn't match Pod's node affinity/selector"),
        "{unschedulable}"
    );
    // Kept waiting a while on purpose, so the scheduling phase is long
    // enough to tell from the others (this makes the wait, it does not
    // wait for anything).
    std::thread::sleep(Duration::from_millis(1500));
    c.kubectl(&["label", "node", &node, "skiff.dev/timeline-test=yes"]);
    c.wait("pod/waiter", "condition=Ready", 60);
    let message = c.wait_event("waiter", "StartupTimeline", 30);
    let annotation = events(
        &c,
        "involvedObject.name=waiter,reason=StartupTimeline",
        r#"{.metadata.annotations.skiff\.dev/startup-timeline}"#,
    );
    let w: Finished = serde_json::from_str(&annotation[0])
        .unwrap_or_else(|e| panic!("the timeline's JSON: {e}: {}", annotation[0]));
    eprintln!(
        "timeline: {message}\n{}",
        serde_json::to_string_pretty(&w).unwrap()
    );
    assert!(
        message.contains(&format!(
            "scheduling {} (waited: {unschedulable}",
            message::duration(w.phases[0].duration_ms)
        )),
        "{message}"
    );
    let sum: i64 = w.phases.iter().map(|p| p.duration_ms).sum();
    assert!(
        (sum - (w.ready_ms - w.created_ms)).abs() <= 50,
        "phases add up to {sum} ms, created -> ready is {} ms",
        w.ready_ms - w.created_ms
    );
    let scheduling = w.phase("scheduling").expect("a scheduling phase");
    assert!(
        scheduling.duration_ms >= 1000,
        "it waited 1.5 s: {scheduling:?}"
    );
    let queued = w.steps.iter().find(|s| s.name == "queued").expect("queued");
    assert!(queued.count.unwrap_or(0) >= 2, "{queued:?}");
    let why = w
        .steps
        .iter()
        .find(|s| s.name == "unschedulable")
        .expect("an unschedulable step");
    assert_eq!(why.message.as_deref(), Some(unschedulable.as_str()));
    assert!(why.count.unwrap_or(0) >= 1, "{why:?}");
    assert!(
        why.start_ms >= w.created_ms
            && why.start_ms <= scheduling.start_ms + scheduling.duration_ms,
        "{why:?} inside {scheduling:?}"
    );

    // A restarted agent adopts the Ready pod: it has seen no start, so it
    // writes no second timeline; the node says Starting again.
    c.stop();
    c.spawn();
    c.wait_node_ready();
    wait_for("a second Starting", Duration::from_secs(30), || {
        let starts = events(
            &c,
            &format!("involvedObject.kind=Node,involvedObject.name={node},reason=Starting"),
            "{.count}",
        );
        (starts
            .iter()
            .map(|n| n.parse::<u32>().unwrap_or(1))
            .sum::<u32>()
            >= 2)
            .then_some(())
    });
    c.wait("pod/tl", "condition=Ready", 60);
    // An observation window for an absence (no second event is written),
    // not a wait for a condition.
    std::thread::sleep(Duration::from_secs(2));
    let counts = events(
        &c,
        "involvedObject.name=tl,reason=StartupTimeline",
        "{.count}",
    );
    assert_eq!(counts, ["1"], "no timeline for a start not seen");
}
