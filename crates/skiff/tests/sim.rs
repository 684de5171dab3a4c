//! `skiff sim` against a real `skiff server` (its own agent off): 100
//! simulated nodes register and become Ready with podCIDRs; pods the
//! scheduler places on them reach Running with an IP from their node's
//! range; a pod told to crash shows CrashLoopBackOff; a deleted pod goes
//! after its grace period; nodes lost all at once (`--stop-after`) or one
//! at a time (the admin endpoint) no longer renew their Leases while the
//! others do (those register with podCIDRs of their own,
//! `--pod-cidr-range`); and on SIGTERM the sim deletes its Nodes and
//! Leases only when told to (`--cleanup`). The controller manager over
//! them: a Deployment scaled to 1,000 replicas and back, and a lost node
//! marked, tainted and its pod evicted.

mod cluster;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cluster::{wait_for, Cluster, Options};

/// A `skiff sim` process, stopped with SIGTERM when dropped.
struct Sim {
    child: Child,
    data_dir: PathBuf,
}

impl Sim {
    /// Starts `skiff sim ARGS` with a data dir of its own (named by `tag`).
    fn start(c: &Cluster, tag: &str, args: &[&str]) -> Self {
        let data_dir = c.dir.path().join(format!("sim-{tag}"));
        let child = Command::new(env!("CARGO_BIN_EXE_skiff"))
            .arg("sim")
            .arg("--kubeconfig")
            .arg(&c.kubeconfig)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(args)
            .env("SKIFF_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self { child, data_dir }
    }

    /// SIGTERM, then waits (20 s at most) for the process to exit; whether
    /// it exited successfully.
    fn terminate(&mut self) -> bool {
        if let Ok(Some(status)) = self.child.try_wait() {
            return status.success();
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }

    /// The admin endpoint's address, once the sim has written it.
    fn admin_address(&self) -> String {
        let file = self.data_dir.join("admin-address");
        wait_for(
            "the admin endpoint's address",
            Duration::from_secs(30),
            || {
                std::fs::read_to_string(&file)
                    .ok()
                    .filter(|a| !a.is_empty())
            },
        )
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// One plain HTTP/1.0 request; the status code and the body.
fn http(addr: &str, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, body.to_string())
}

fn ready_nodes(c: &Cluster, selector: &str) -> usize {
    c.kubectl(&[
        "get",
        "nodes",
        "-l",
        selector,
        "-o",
        "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status} {.spec.podCIDR}{\"\\n\"}{end}",
    ])
    .lines()
    .filter(|l| l.starts_with("True 10."))
    .count()
}

#[test]
fn simulated_nodes_run_pods_through_the_real_agent() {
    let c = Cluster::start(Options {
        disable_agent: true,
        ..Options::default()
    });
    let _sim = Sim::start(&c, "run", &["--nodes", "100", "--name-prefix", "sim-"]);
    wait_for(
        "100 simulated nodes Ready",
        Duration::from_secs(120),
        || (ready_nodes(&c, "type=skiff-sim") == 100).then_some(()),
    );

    let mut yaml = String::new();
    for i in 0..20 {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers: [{{name: c, image: busybox}}]\n"
        ));
    }
    yaml.push_str(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: crasher\n  annotations: {skiff.dev/sim-exit: \"1\"}\nspec:\n  containers: [{name: c, image: busybox}]\n",
    );
    c.apply(&yaml);
    wait_for("20 pods Running", Duration::from_secs(90), || {
        let out = c.kubectl(&[
            "get",
            "pods",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.podIP} {.spec.nodeName}{\"\\n\"}{end}",
        ]);
        let running: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with('p') && l.contains(" Running 10."))
            .collect();
        (running.len() == 20).then_some(())
    });
    // Each pod's IP is in its node's podCIDR.
    let node = c.pod_field("p0", "{.spec.nodeName}");
    let ip = c.pod_field("p0", "{.status.podIP}");
    let cidr = c.kubectl(&["get", "node", &node, "-o", "jsonpath={.spec.podCIDR}"]);
    let prefix = cidr.rsplit_once('.').map(|(p, _)| p).unwrap_or_default();
    assert!(ip.starts_with(&format!("{prefix}.")), "{ip} not in {cidr}");
    assert!(node.starts_with("sim-"), "{node}");

    wait_for("the crash loop", Duration::from_secs(90), || {
        let row = c.kubectl(&["get", "pod", "crasher", "--no-headers"]);
        row.contains("CrashLoopBackOff").then_some(())
    });
    let restarts: u32 = c
        .pod_field("crasher", "{.status.containerStatuses[0].restartCount}")
        .parse()
        .unwrap_or(0);
    assert!(restarts >= 1, "restarted under the back-off");

    let started = Instant::now();
    c.kubectl(&["delete", "pod", "p0", "--timeout=60s"]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "deletion honoured the 2 s grace"
    );
}

#[test]
fn lost_nodes_stop_renewing_their_leases_and_cleanup_is_asked_for() {
    let c = Cluster::start(Options {
        disable_agent: true,
        ..Options::default()
    });
    // All three lost after 4 s; kept on exit.
    let lost = Sim::start(
        &c,
        "lost",
        &[
            "--nodes",
            "3",
            "--name-prefix",
            "lost-",
            "--stop-after",
            "4s",
            "--pod-cidr-range",
            "10.250.0.0/16",
        ],
    );
    // Lost one at a time through the admin endpoint; deleted on exit.
    let mut live = Sim::start(
        &c,
        "live",
        &[
            "--nodes",
            "2",
            "--name-prefix",
            "live-",
            "--admin-listen",
            "127.0.0.1:0",
            "--pod-cidr-range",
            "10.251.0.0/16",
            "--cleanup",
        ],
    );
    wait_for("5 nodes Ready", Duration::from_secs(60), || {
        (ready_nodes(&c, "type=skiff-sim") == 5).then_some(())
    });
    // They registered with their own blocks, outside the server's cluster
    // CIDR (10.244.0.0/16), so not the node IPAM controller's.
    let cidrs = c.kubectl(&[
        "get",
        "nodes",
        "-l",
        "type=skiff-sim",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.podCIDR} {end}",
    ]);
    assert_eq!(
        cidrs.trim(),
        "live-0=10.251.0.0/24 live-1=10.251.1.0/24 \
         lost-0=10.250.0.0/24 lost-1=10.250.1.0/24 lost-2=10.250.2.0/24"
    );

    // A node's Lease renewTime, None while it has no Lease.
    let renew_time = |node: &str| {
        let out = c.kubectl_output(&[
            "get",
            "lease",
            "-n",
            "kube-node-lease",
            node,
            "-o",
            "jsonpath={.spec.renewTime}",
        ]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // Each node's first renewal comes after its spread offset (live-1's
    // is 5 s in): wait for all three Leases before losing live-1.
    let leases = ["lost-0", "live-0", "live-1"];
    for n in leases {
        wait_for(&format!("{n}'s Lease"), Duration::from_secs(30), || {
            renew_time(n)
        });
    }
    let admin = live.admin_address();
    let (code, body) = http(&admin, "POST", "/nodes/live-1/stop");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, r#"{"name":"live-1","renewing":false}"#);
    let (code, body) = http(&admin, "POST", "/nodes/nobody/stop");
    assert_eq!(code, 404, "{body}");
    let (code, body) = http(&admin, "GET", "/nodes");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        r#"{"nodes":[{"name":"live-0","renewing":true},{"name":"live-1","renewing":false}]}"#
    );

    let first: Vec<_> = leases.iter().map(|n| renew_time(n)).collect();
    // The renew interval is 10 s: past the stop (4 s) and more than one
    // interval later, the lost nodes' renewal times must not have moved,
    // and the live one's must have. (This waits out a period on purpose:
    // it checks that something does not happen.)
    let deadline = Instant::now() + Duration::from_secs(14);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let later: Vec<_> = leases.iter().map(|n| renew_time(n)).collect();
    assert_eq!(
        later[0], first[0],
        "lost-0's Lease was renewed after --stop-after"
    );
    assert_ne!(later[1], first[1], "live-0's Lease was not renewed");
    assert_eq!(
        later[2], first[2],
        "live-1's Lease was renewed after its stop"
    );

    // SIGTERM: a clean exit; --cleanup deletes that sim's Nodes and Leases.
    assert!(live.terminate(), "skiff sim --cleanup exited with an error");
    let names = |what: &str, ns: &[&str]| {
        let mut args = vec!["get", what, "-o", "jsonpath={.items[*].metadata.name}"];
        args.extend_from_slice(ns);
        c.kubectl(&args)
    };
    assert_eq!(names("nodes", &[]), "lost-0 lost-1 lost-2");
    // (A node lost before its spread offset never made a Lease: lost-2's
    // first renewal was due 6.7 s in, after the stop at 4 s.)
    let leases = names("leases", &["-n", "kube-node-lease"]);
    assert!(
        leases.starts_with("lost-0") && !leases.contains("live-"),
        "{leases}"
    );
    // Without it, nothing is deleted.
    let mut lost = lost;
    assert!(lost.terminate(), "skiff sim exited with an error");
    assert_eq!(names("nodes", &[]), "lost-0 lost-1 lost-2");
}

/// Lines of `kubectl get ARGS -o name` (the objects that exist).
fn count(c: &Cluster, args: &[&str]) -> usize {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "name"]);
    c.kubectl(&all).lines().count()
}

/// The controller manager inside `skiff server` over simulated nodes: a
/// Deployment scaled to 1,000 replicas and back to 10 (never more pods
/// than asked), and, meanwhile, a node lost with a short
/// `--node-monitor-grace-period` marked Unknown and tainted unreachable,
/// its pod made not Ready and evicted when its toleration runs out.
#[test]
fn a_thousand_replicas_scale_up_and_down_while_a_lost_node_is_handled() {
    let c = Cluster::start(Options {
        disable_agent: true,
        extra: ["--node-monitor-grace-period", "20s"]
            .map(String::from)
            .to_vec(),
        ..Options::default()
    });
    let _many = Sim::start(&c, "many", &["--nodes", "20", "--name-prefix", "sim-"]);
    let lost = Sim::start(
        &c,
        "lost",
        &[
            "--nodes",
            "1",
            "--name-prefix",
            "lost-",
            "--admin-listen",
            "127.0.0.1:0",
            "--pod-cidr-range",
            "10.250.0.0/16",
        ],
    );
    wait_for("21 simulated nodes Ready", Duration::from_secs(120), || {
        (ready_nodes(&c, "type=skiff-sim") == 21).then_some(())
    });
    // The Deployment's pods stay off the node that is about to be lost.
    c.kubectl(&["cordon", "lost-0"]);
    c.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: stranded}\nspec:\n  nodeName: lost-0\n  \
         terminationGracePeriodSeconds: 1\n  containers: [{name: c, image: busybox}]\n  \
         tolerations:\n  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 3}\n",
    );
    c.apply(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: many}\nspec:\n  replicas: 1000\n  \
         selector: {matchLabels: {app: many}}\n  template:\n    metadata: {labels: {app: many}}\n    \
         spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{name: c, image: busybox}]\n",
    );

    std::thread::scope(|s| {
        s.spawn(|| {
            wait_for("the stranded pod Running", Duration::from_secs(60), || {
                (c.pod_field("stranded", "{.status.phase}") == "Running").then_some(())
            });
            let (code, body) = http(&lost.admin_address(), "POST", "/nodes/lost-0/stop");
            assert_eq!(code, 200, "{body}");
            let path = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}|\
                        {.status.conditions[?(@.type==\"Ready\")].message}|{.spec.taints[*].key}";
            let node = wait_for("lost-0 marked Unknown", Duration::from_secs(90), || {
                let out = c.kubectl(&["get", "node", "lost-0", "-o", path]);
                out.starts_with("Unknown|").then_some(out)
            });
            assert!(
                node.contains("|Kubelet stopped posting node status.|"),
                "{node}"
            );
            // Its pod is marked not Ready (before its toleration runs out).
            wait_for(
                "the stranded pod not Ready",
                Duration::from_secs(30),
                || {
                    let ready = c.pod_field(
                        "stranded",
                        "{.status.conditions[?(@.type==\"Ready\")].status}",
                    );
                    (ready == "False").then_some(())
                },
            );
            wait_for(
                "lost-0 tainted unreachable",
                Duration::from_secs(30),
                || {
                    let out = c.kubectl(&["get", "node", "lost-0", "-o", path]);
                    out.contains("node.kubernetes.io/unreachable").then_some(())
                },
            );
            // Evicted 3 s later, with upstream's events. (The simulated
            // node still runs its pods' workers, so it may finish the
            // deletion.)
            wait_for("the stranded pod evicted", Duration::from_secs(60), || {
                let out = c.kubectl_output(&[
                    "get",
                    "pod",
                    "stranded",
                    "-o",
                    "jsonpath={.metadata.deletionTimestamp}",
                ]);
                (!out.status.success() || !out.stdout.is_empty()).then_some(())
            });
            let events = c.kubectl(&[
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=stranded",
                "-o",
                "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
            ]);
            assert!(
                events.contains("NodeNotReady: Node is not ready")
                    && events.contains(
                        "TaintManagerEviction: Marking for deletion Pod default/stranded"
                    ),
                "{events}"
            );
        });

        let status = |c: &Cluster| {
            c.kubectl(&[
                "get",
                "deployment",
                "many",
                "-o",
                "jsonpath={.status.replicas} {.status.readyReplicas} {.status.availableReplicas}",
            ])
        };
        wait_for("1,000 replicas available", Duration::from_secs(600), || {
            (status(&c) == "1000 1000 1000").then_some(())
        });
        assert_eq!(count(&c, &["pods", "-l", "app=many"]), 1000);
        let unscheduled = c.kubectl(&[
            "get",
            "pods",
            "-l",
            "app=many",
            "--field-selector",
            "spec.nodeName=lost-0",
            "-o",
            "name",
        ]);
        assert_eq!(unscheduled, "", "a pod went to the cordoned node");

        c.kubectl(&["scale", "deployment", "many", "--replicas=10"]);
        wait_for("scaled down to 10", Duration::from_secs(300), || {
            (status(&c) == "10 10 10" && count(&c, &["pods", "-l", "app=many"]) == 10).then_some(())
        });
        assert_eq!(count(&c, &["replicasets", "-l", "app=many"]), 1);
    });
}
