//! Faults and membership on several hosts (issue [multinode]
//! deliverables 4 and 5), each host a network namespace on a test bridge
//! (`cluster::hosts`) with its own `skiff agent`:
//!
//! 1. a Deployment spread over the two agent hosts tolerates the
//!    `unreachable`/`not-ready` NoExecute taints for 5 s (kept as given,
//!    where DefaultTolerationSeconds gives others 300 s);
//! 2. one host's cable is pulled (until its agent's connections to the
//!    server are dropped): its Node goes Unknown with upstream's reason
//!    and message and is tainted `unreachable`; its pods are marked not
//!    Ready, the Deployment's are marked for deletion when their
//!    toleration runs out and stay Terminating (the node cannot
//!    confirm), while their replacements run on the other host;
//! 3. the cable is back: the Node is Ready and untainted, its agent
//!    finishes the evicted pods' deletion, and its pod with the default
//!    300 s is Ready again;
//! 4. `kubectl cordon`/`uncordon`, `kubectl drain` (evictions through the
//!    eviction subresource, held back by a PodDisruptionBudget allowing
//!    none, one at a time under one allowing one; the pods come back on
//!    the other host) and `kubectl delete node` of a running agent,
//!    which, as the kubelet, does not register it again until it
//!    restarts.
//!
//! One cluster for the steps, in order; the server's controller manager
//! runs with `--node-monitor-grace-period 20s` (upstream's default is
//! 50 s), the toleration is 5 s.

mod cluster;

use std::time::{Duration, Instant};

use cluster::hosts::Env;
use cluster::{wait_for, wait_for_explained, Cluster, Options};

const GRACE: &str = "20s";

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      # Two a host (the server's node is tainted control-plane): tainted
      # nodes are no spreading domains, so a lost or cordoned host's
      # share goes to the other.
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
        nodeTaintsPolicy: Honor
        labelSelector: {matchLabels: {app: web}}
      tolerations:
      - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 5}
      volumes: [{name: scratch, emptyDir: {}}]
      containers:
      - name: web
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "exec sleep 3600"]
        volumeMounts: [{name: scratch, mountPath: /scratch}]
"#;

/// A DaemonSet, for `drain --ignore-daemonsets` to leave alone.
const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agentd}
spec:
  selector: {matchLabels: {app: agentd}}
  template:
    metadata: {labels: {app: agentd}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: agentd
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [sh, -c, "exec sleep 3600"]
"#;

/// One pod of a listing.
#[derive(Debug, Clone, PartialEq)]
struct PodRow {
    name: String,
    node: String,
    phase: String,
    terminating: bool,
}

/// The pods labelled `selector`.
fn pods(c: &Cluster, selector: &str) -> Vec<PodRow> {
    let out = c.kubectl(&[
        "get",
        "pods",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase} \
         {.metadata.deletionTimestamp}{\"\\n\"}{end}",
    ]);
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            PodRow {
                name: f[0].to_string(),
                node: f.get(1).unwrap_or(&"").to_string(),
                phase: f.get(2).unwrap_or(&"").to_string(),
                terminating: f.get(3).is_some_and(|t| !t.is_empty()),
            }
        })
        .collect()
}

/// The live (not terminating) Running pods of `web` on `node`.
fn running_on(c: &Cluster, node: &str) -> usize {
    pods(c, "app=web")
        .iter()
        .filter(|p| p.node == node && p.phase == "Running" && !p.terminating)
        .count()
}

/// `Ready status|reason|message` of a node.
fn ready(c: &Cluster, node: &str) -> String {
    c.kubectl(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}|\
         {.status.conditions[?(@.type==\"Ready\")].reason}|\
         {.status.conditions[?(@.type==\"Ready\")].message}",
    ])
}

/// A node's taints as `key:effect`.
fn taints(c: &Cluster, node: &str) -> Vec<String> {
    c.kubectl(&[
        "get",
        "node",
        node,
        "-o",
        "jsonpath={range .spec.taints[*]}{.key}:{.effect}{\"\\n\"}{end}",
    ])
    .lines()
    .map(String::from)
    .collect()
}

fn wait_ready(c: &Cluster, node: &str, timeout: Duration) {
    wait_for_explained(
        &format!("node {node} Ready"),
        timeout,
        || {
            let out = c.kubectl_output(&[
                "get",
                "node",
                node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
            ]);
            (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
        },
        || {
            format!(
                "\n{}\nits Lease renewed at {}\nnodes:\n{}",
                ready(c, node),
                c.kubectl(&[
                    "get",
                    "lease",
                    "-n",
                    "kube-node-lease",
                    node,
                    "-o",
                    "jsonpath={.spec.renewTime}"
                ]),
                c.kubectl(&["get", "nodes", "-o", "wide"])
            )
        },
    );
}

#[test]
fn a_lost_host_is_tainted_and_its_pods_replaced_and_nodes_are_drained_and_deleted() {
    let started = Instant::now();
    let mut env = Env::start(
        2,
        Options {
            taint_control_plane: true,
            extra: vec!["--node-monitor-grace-period".into(), GRACE.into()],
            ..Options::default()
        },
        &[],
    );
    let gateway = env.underlay.gateway();
    let (underlay, c) = (&mut env.underlay, &env.c);
    let (server, token) = c.printed_join();
    let lost = underlay.hosts[0].node_name.clone();
    let other = underlay.hosts[1].node_name.clone();

    // 1. DefaultTolerationSeconds: 300 s for a pod that says nothing,
    // the Deployment's own 5 s kept (and nothing added to them).
    let defaulted = c.kubectl(&[
        "run",
        "defaulted",
        "--image=busybox",
        "--dry-run=server",
        "-o",
        "jsonpath={range .spec.tolerations[*]}{.key}:{.effect}:{.tolerationSeconds}{\"\\n\"}{end}",
    ]);
    for key in ["not-ready", "unreachable"] {
        assert!(
            defaulted.contains(&format!("node.kubernetes.io/{key}:NoExecute:300")),
            "{defaulted}"
        );
    }
    c.apply(DEPLOYMENT);
    c.apply(DAEMONSET);
    // A pod with the default 300 s: it outlives the cut, and is Ready
    // again after it.
    c.kubectl(&[
        "run",
        "survivor",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--overrides",
        &format!(r#"{{"spec":{{"nodeName":"{lost}","terminationGracePeriodSeconds":2}}}}"#),
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/survivor", "condition=Ready", 90);
    wait_for_explained(
        "two web pods Running on each agent host",
        Duration::from_secs(120),
        || (running_on(c, &lost) == 2 && running_on(c, &other) == 2).then_some(()),
        || format!("\npods: {:?}", pods(c, "app=web")),
    );
    let victims: Vec<String> = pods(c, "app=web")
        .into_iter()
        .filter(|p| p.node == lost)
        .map(|p| p.name)
        .collect();
    let kept = c.kubectl(&[
        "get",
        "pod",
        &victims[0],
        "-o",
        "jsonpath={range .spec.tolerations[*]}{.key}:{.effect}:{.tolerationSeconds}{\"\\n\"}{end}",
    ]);
    assert_eq!(
        kept.lines().collect::<Vec<_>>(),
        [
            "node.kubernetes.io/unreachable:NoExecute:5",
            "node.kubernetes.io/not-ready:NoExecute:5"
        ],
        "{kept}"
    );
    eprintln!("[{:?}] deployment spread", started.elapsed());

    // 2. The lost host's cable is pulled.
    underlay.cut_link(0);
    let cut = Instant::now();
    let status = wait_for_explained(
        "the lost node Unknown",
        Duration::from_secs(90),
        || {
            let out = ready(c, &lost);
            out.starts_with("Unknown|").then_some(out)
        },
        || format!("\n{}", ready(c, &lost)),
    );
    assert_eq!(
        status,
        "Unknown|NodeStatusUnknown|Kubelet stopped posting node status."
    );
    eprintln!(
        "[{:?}] unknown after {:?}",
        started.elapsed(),
        cut.elapsed()
    );
    wait_for_explained(
        "the lost node tainted unreachable",
        Duration::from_secs(30),
        || {
            let t = taints(c, &lost);
            (t.contains(&"node.kubernetes.io/unreachable:NoExecute".to_string())
                && t.contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()))
            .then_some(())
        },
        || format!("\ntaints: {:?}", taints(c, &lost)),
    );
    // The node controller's events, on the node and on its pods.
    let message = c.wait_event(&lost, "NodeNotReady", 30);
    assert!(
        message.contains(&format!("Node {lost} status is now: NodeNotReady")),
        "{message}"
    );
    let message = c.wait_event(&victims[0], "NodeNotReady", 30);
    assert!(message.contains("Node is not ready"), "{message}");
    let survivor_ready = || {
        c.pod_field(
            "survivor",
            "{.status.conditions[?(@.type==\"Ready\")].status}",
        )
    };
    wait_for(
        "the survivor marked not Ready",
        Duration::from_secs(30),
        || (survivor_ready() == "False").then_some(()),
    );
    // Marked for deletion after their 5 s, by the taint eviction
    // controller, with upstream's event.
    for pod in &victims {
        wait_for_explained(
            "the lost host's pod marked for deletion",
            Duration::from_secs(60),
            || {
                pods(c, "app=web")
                    .iter()
                    .any(|p| &p.name == pod && p.terminating)
                    .then_some(())
            },
            || format!("\n{pod}: {:?}", pods(c, "app=web")),
        );
        let message = c.wait_event(pod, "TaintManagerEviction", 30);
        assert!(
            message.contains(&format!("Marking for deletion Pod default/{pod}")),
            "{message}"
        );
    }
    wait_for_explained(
        "the replacements Running on the other host",
        Duration::from_secs(90),
        || (running_on(c, &other) == 4).then_some(()),
        || format!("\npods: {:?}", pods(c, "app=web")),
    );
    // The evicted pods wait for their node: still there, Terminating.
    let all = pods(c, "app=web");
    for pod in &victims {
        assert!(
            all.iter().any(|p| &p.name == pod && p.terminating),
            "{pod} should stay Terminating while its node is cut off: {all:?}"
        );
    }
    eprintln!("[{:?}] replaced", started.elapsed());
    // The cut lasts until the agent's HTTP/2 health check (a ping after
    // 30 s without a frame, 15 s for its answer) has dropped its
    // connections to the server: a host lost for real, whose agent must
    // dial again and list its watches anew, not a blip TCP retransmits
    // over.
    let established = || {
        let out = underlay.hosts[0].exec(&["ss", "-Htn", "state", "established", "dst", &gateway]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    wait_for_explained(
        "the cut-off agent's connections to the server dropped",
        Duration::from_secs(90),
        || established().trim().is_empty().then_some(()),
        || format!("\nstill established:\n{}", established()),
    );
    eprintln!("[{:?}] connections dropped", started.elapsed());

    // 3. The cable is back.
    underlay.restore_link(0);
    let restored = Instant::now();
    wait_ready(c, &lost, Duration::from_secs(120));
    eprintln!(
        "[{:?}] ready again after {:?}",
        started.elapsed(),
        restored.elapsed()
    );
    wait_for_explained(
        "the unreachable taints gone",
        Duration::from_secs(30),
        || {
            let t = taints(c, &lost);
            (!t.iter()
                .any(|t| t.starts_with("node.kubernetes.io/unreachable:")))
            .then_some(())
        },
        || format!("\ntaints: {:?}", taints(c, &lost)),
    );
    wait_for_explained(
        "the evicted pods finished by their agent",
        Duration::from_secs(90),
        || {
            let all = pods(c, "app=web");
            (!all.iter().any(|p| victims.contains(&p.name))).then_some(())
        },
        || format!("\npods: {:?}", pods(c, "app=web")),
    );
    eprintln!("[{:?}] evicted pods gone", started.elapsed());
    // The pod that tolerated the cut is Ready again (its agent writes
    // its status over the node controller's), and was never evicted.
    wait_for_explained(
        "the survivor Ready again",
        Duration::from_secs(60),
        || (survivor_ready() == "True").then_some(()),
        || format!("\n{}", c.kubectl(&["get", "pod", "survivor", "-o", "yaml"])),
    );
    assert_eq!(c.pod_field("survivor", "{.metadata.deletionTimestamp}"), "");

    // 4. Cordon and uncordon: spec.unschedulable and its taint.
    c.kubectl(&["cordon", &other]);
    wait_for(
        "the cordoned node's unschedulable taint",
        Duration::from_secs(30),
        || {
            taints(c, &other)
                .contains(&"node.kubernetes.io/unschedulable:NoSchedule".to_string())
                .then_some(())
        },
    );
    c.kubectl(&["uncordon", &other]);
    wait_for(
        "the unschedulable taint gone",
        Duration::from_secs(30),
        || {
            (!taints(c, &other)
                .iter()
                .any(|t| t.contains("unschedulable")))
            .then_some(())
        },
    );
    assert_eq!(
        c.kubectl(&[
            "get",
            "node",
            &other,
            "-o",
            "jsonpath={.spec.unschedulable}"
        ]),
        ""
    );

    // Drain: the web pods are evicted (the eviction subresource: kubectl
    // says "evicted", not "deleted") and come back on the lost host; the
    // DaemonSet's pod stays.
    wait_for(
        "the DaemonSet's pod Running on the drained host",
        Duration::from_secs(90),
        || {
            pods(c, "app=agentd")
                .iter()
                .any(|p| p.node == other && p.phase == "Running")
                .then_some(())
        },
    );
    // A PodDisruptionBudget allowing no disruption holds the drain back
    // (each eviction is refused with upstream's message, kubectl retries
    // until its timeout) ...
    let budget = |spec: &str| {
        c.apply(&format!(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: web}}\n\
             spec: {{{spec}, selector: {{matchLabels: {{app: web}}}}}}\n"
        ));
    };
    let allowed = |want: &str| {
        wait_for_explained(
            "the budget's status",
            Duration::from_secs(30),
            || {
                let out = c.kubectl(&[
                    "get",
                    "pdb",
                    "web",
                    "-o",
                    "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}",
                ]);
                (out == want).then_some(())
            },
            || format!("\n{}", c.kubectl(&["get", "pdb", "web", "-o", "yaml"])),
        );
    };
    budget("minAvailable: 4");
    allowed("4/0");
    let held = c.kubectl_output(&[
        "drain",
        &other,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=8s",
    ]);
    let stderr = String::from_utf8_lossy(&held.stderr);
    assert!(!held.status.success(), "{stderr}");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    assert_eq!(running_on(c, &other), 4);
    // ... and lets it through one pod at a time once it allows one.
    budget("maxUnavailable: 1");
    allowed("4/1");
    let drained = c.kubectl(&[
        "drain",
        &other,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=120s",
    ]);
    assert_eq!(drained.matches(" evicted").count(), 4, "{drained}");
    assert!(
        drained.contains(&format!("node/{other} drained")),
        "{drained}"
    );
    assert!(
        pods(c, "app=agentd")
            .iter()
            .any(|p| p.node == other && !p.terminating),
        "the DaemonSet's pod was left"
    );
    wait_for_explained(
        "the drained pods Running on the other host",
        Duration::from_secs(90),
        || (running_on(c, &lost) == 4 && running_on(c, &other) == 0).then_some(()),
        || format!("\npods: {:?}", pods(c, "app=web")),
    );
    c.kubectl(&["uncordon", &other]);
    eprintln!("[{:?}] drained", started.elapsed());

    // Deleting the Node of a running agent: as the kubelet, it does not
    // register it again while it runs (its status updates fail) ...
    c.kubectl(&["delete", "node", &other]);
    // An observation window for an absence: three status periods (10 s)
    // and Lease renewals of the agent, polled throughout.
    let window = Instant::now();
    while window.elapsed() < Duration::from_secs(30) {
        let out = c.kubectl_output(&["get", "node", &other, "-o", "name"]);
        assert!(
            !out.status.success(),
            "the deleted node came back while its agent ran: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    // ... and does when restarted.
    underlay.stop_agent(1);
    underlay.join(1, &server, &token);
    wait_for("the node registered again", Duration::from_secs(60), || {
        c.kubectl_output(&["get", "node", &other])
            .status
            .success()
            .then_some(())
    });
    wait_ready(c, &other, Duration::from_secs(60));
    eprintln!("[{:?}] done", started.elapsed());
}
