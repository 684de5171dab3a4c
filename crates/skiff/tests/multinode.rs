//! Several nodes on one machine (issue [multinode] deliverable 5): each
//! "host" is a network namespace on a test bridge (`cluster::hosts`) with
//! its own `skiff agent`, containerd, data dir and CNI bridge. The server
//! runs in the root namespace on the bridge's address; the agents join it
//! with the command it prints.

mod cluster;

use std::time::Duration;

use cluster::hosts::Underlay;
use cluster::{wait_for, CidrLease, Cluster, Options};

/// The hosts and the server: the hosts are torn down first, while the
/// server still holds the test's network lease (fields drop in order).
struct Env {
    underlay: Underlay,
    c: Cluster,
}

#[test]
fn a_server_and_two_agents_on_their_own_hosts_join_and_run_pods() {
    let cidr = CidrLease::take();
    let dir = tempfile::tempdir().unwrap();
    let underlay = Underlay::new(&cidr, 2, dir.path());
    let gateway = underlay.gateway();
    let c = Cluster::start_with(
        Options {
            bind_address: Some(gateway.clone()),
            node_ip: Some(gateway.clone()),
            ..Options::default()
        },
        cidr,
    );
    let mut env = Env { underlay, c };
    let (underlay, c) = (&mut env.underlay, &env.c);
    let (server, token) = c.printed_join();
    assert!(
        server.starts_with(&format!("https://{gateway}:")),
        "{server}"
    );
    underlay.join(0, &server, &token);
    underlay.join(1, &server, &token);
    for host in &underlay.hosts {
        let node = format!("node/{}", host.node_name);
        wait_for("the host's node", Duration::from_secs(90), || {
            c.kubectl_output(&["get", &node])
                .status
                .success()
                .then_some(())
        });
        c.wait(&node, "condition=Ready", 90);
    }
    let nodes = c.kubectl(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    // Each node's InternalIP is its host's address on the underlay.
    for host in &underlay.hosts {
        let address = c.kubectl(&[
            "get",
            "node",
            &host.node_name,
            "-o",
            "jsonpath={.status.addresses[?(@.type==\"InternalIP\")].address}",
        ]);
        assert_eq!(address, host.ip);
    }
    // A pod on each host runs, answers on its pod IP from its host, and
    // its log comes through that host's agent.
    for host in &underlay.hosts {
        let pod = format!("web-{}", host.node_name);
        c.kubectl(&[
            "run",
            &pod,
            "--image=busybox",
            "--image-pull-policy=IfNotPresent",
            "--overrides",
            &format!(r#"{{"spec":{{"nodeName":"{}"}}}}"#, host.node_name),
            "--",
            "sh",
            "-c",
            "echo serving && httpd -f -p 8080",
        ]);
        c.wait(&format!("pod/{pod}"), "condition=Ready", 90);
        let pod_ip = c.pod_field(&pod, "{.status.podIP}");
        let url = format!("http://{pod_ip}:8080/");
        let last = std::sync::Mutex::new(String::new());
        cluster::wait_for_explained(
            "the pod's answer on its host",
            Duration::from_secs(30),
            || {
                // bash's /dev/tcp: the host's static busybox wget crashes.
                let out = host.exec(&[
                    "timeout",
                    "3",
                    "bash",
                    "-c",
                    &format!(
                        "exec 3<>/dev/tcp/{pod_ip}/8080 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && head -1 <&3"
                    ),
                ]);
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                *last.lock().unwrap() = stderr.clone();
                String::from_utf8_lossy(&out.stdout)
                    .starts_with("HTTP/1.")
                    .then_some(())
            },
            || {
                format!(
                    "{url} on {}: {}\nroutes: {}\niptables: {}",
                    host.netns,
                    last.lock().unwrap(),
                    String::from_utf8_lossy(&host.exec(&["ip", "route"]).stdout),
                    String::from_utf8_lossy(&host.exec(&["iptables-save"]).stdout)
                )
            },
        );
        let log = c.kubectl(&["logs", &pod]);
        assert!(log.contains("serving"), "{log}");
    }
}
