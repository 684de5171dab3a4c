//! Several nodes on one machine (issue [multinode] deliverable 5): each
//! "host" is a network namespace on a test bridge (`cluster::hosts`) with
//! its own `skiff agent`, containerd, data dir and CNI bridge. The server
//! runs in the root namespace on the bridge's address; the agents join it
//! with the command it prints. Pods reach each other across nodes through
//! the built-in VXLAN overlay, without NAT, by pod IP, Service and DNS
//! name, and a NodePort answers on every node.

mod cluster;

use std::collections::BTreeSet;
use std::time::Duration;

use cluster::hosts::Env;
use cluster::{wait_for, Cluster, Options};

#[test]
fn a_server_and_two_agents_on_their_own_hosts_join_and_run_pods() {
    let mut env = Env::start(2, Options::default(), &[]);
    let gateway = env.underlay.gateway();
    let (underlay, c) = (&mut env.underlay, &env.c);
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
    // Each node published its overlay endpoint.
    for host in &underlay.hosts {
        let data = c.kubectl(&[
            "get",
            "node",
            &host.node_name,
            "-o",
            r#"jsonpath={.metadata.annotations.skiff\.dev/backend-data}"#,
        ]);
        assert!(data.contains("\"VtepMAC\""), "{data}");
    }

    // A Deployment with one pod per node; each answers with its own name
    // and the address the request came from (busybox httpd's CGI).
    c.apply(&with_who(WEB));
    c.wait("deployment/web", "condition=Available", 180);
    let pods: Vec<(String, String, String)> = c
        .kubectl(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName}{"\n"}{end}"#,
        ])
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[1].to_string(), f[2].to_string())
        })
        .collect();
    let nodes: BTreeSet<&str> = pods.iter().map(|p| p.2.as_str()).collect();
    assert_eq!(nodes.len(), 3, "one pod per node: {pods:?}");

    // Every pod reaches every other by pod IP, and sees its address
    // unchanged (routed through the overlay, not masqueraded).
    for (from, from_ip, from_node) in &pods {
        for (to, to_ip, to_node) in &pods {
            let answer = who(c, from, to_ip)
                .unwrap_or_else(|e| panic!("{from} on {from_node} to {to} on {to_node}: {e}"));
            assert!(
                answer.starts_with(&format!("{to} ")) && answer.contains(from_ip.as_str()),
                "{from} ({from_ip}) on {from_node} to {to} on {to_node}: {answer}"
            );
        }
    }

    // By ClusterIP, and by the DNS name the cluster DNS gives it, every
    // backend answers a pod.
    let cluster_ip = c.kubectl(&["get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let (client, _, _) = &pods[0];
    let lookup = c.kubectl(&[
        "exec",
        client,
        "--",
        "nslookup",
        "web.default.svc.cluster.local",
    ]);
    let named = lookup
        .split("Name:")
        .nth(1)
        .and_then(|answer| {
            answer
                .lines()
                .find_map(|l| l.trim().strip_prefix("Address:"))
        })
        .map(|a| a.trim().to_string());
    assert_eq!(named.as_deref(), Some(cluster_ip.as_str()), "{lookup}");
    let mut seen = BTreeSet::new();
    wait_for(
        "every backend through the ClusterIP",
        Duration::from_secs(60),
        || {
            if let Some(name) = who(c, client, &cluster_ip)
                .ok()
                .and_then(|a| a.split_whitespace().next().map(str::to_string))
            {
                seen.insert(name);
            }
            (seen.len() == pods.len()).then_some(())
        },
    );

    // The NodePort answers on every node's address, from a host.
    let node_port = c.kubectl(&[
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    let addresses: Vec<String> = std::iter::once(gateway.clone())
        .chain(underlay.hosts.iter().map(|h| h.ip.clone()))
        .collect();
    for address in &addresses {
        let last = std::sync::Mutex::new(String::new());
        cluster::wait_for_explained(
            &format!("the NodePort on {address}"),
            Duration::from_secs(30),
            || {
                // bash's /dev/tcp: the host's static busybox wget crashes.
                let out = underlay.hosts[0].exec(&[
                    "timeout",
                    "5",
                    "bash",
                    "-c",
                    &format!(
                        "exec 3<>/dev/tcp/{address}/{node_port} && printf 'GET /cgi-bin/who HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"
                    ),
                ]);
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                *last.lock().unwrap() = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
                (text.starts_with("HTTP/1.") && pods.iter().any(|p| text.contains(&p.0)))
                    .then_some(())
            },
            || last.lock().unwrap().clone(),
        );
    }

    // A pod's log comes through its host's agent.
    let (on_host, _, _) = pods
        .iter()
        .find(|p| p.2 == underlay.hosts[0].node_name)
        .unwrap();
    let log = c.kubectl(&["logs", on_host]);
    assert!(log.contains("serving"), "{log}");

    // A host reset leaves the pod network: the others drop its route
    // within a sync, and keep each other's.
    let gone_cidr = c.kubectl(&[
        "get",
        "node",
        &underlay.hosts[1].node_name,
        "-o",
        "jsonpath={.spec.podCIDR}",
    ]);
    let kept_cidr = c.kubectl(&[
        "get",
        "node",
        &underlay.hosts[0].node_name,
        "-o",
        "jsonpath={.spec.podCIDR}",
    ]);
    let routes = |host: &cluster::hosts::Host| {
        String::from_utf8_lossy(&host.exec(&["ip", "route"]).stdout).into_owned()
    };
    assert!(routes(&underlay.hosts[0]).contains(&gone_cidr));
    let out = underlay.hosts[1].reset();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = || {
        String::from_utf8_lossy(
            &std::process::Command::new("ip")
                .args(["route"])
                .output()
                .unwrap()
                .stdout,
        )
        .into_owned()
    };
    wait_for(
        "the reset host's routes to go",
        Duration::from_secs(60),
        || {
            (!routes(&underlay.hosts[0]).contains(&gone_cidr) && !root().contains(&gone_cidr))
                .then_some(())
        },
    );
    assert!(root().contains(&kept_cidr), "{}", root());
}

/// With `--flannel-backend host-gw` (nodes on one link), pods reach each
/// other across nodes through plain routes via the nodes' addresses.
#[test]
fn host_gw_routes_pod_traffic_via_the_nodes_addresses() {
    let mut env = Env::start(1, Options::default(), &["--flannel-backend", "host-gw"]);
    let gateway = env.underlay.gateway();
    let (underlay, c) = (&env.underlay, &env.c);
    let host = &underlay.hosts[0];
    let mut pods = vec![];
    for node in [c.node(), host.node_name.clone()] {
        let pod = format!("who-{node}");
        c.apply(
            &with_who(WHO_POD)
                .replace("NAME", &pod)
                .replace("NODE", &node),
        );
        pods.push(pod);
    }
    for pod in &pods {
        c.wait(&format!("pod/{pod}"), "condition=Ready", 90);
    }
    // The host routes the server node's podCIDR via the server's address
    // (no VXLAN device anywhere).
    let server_cidr = c.kubectl(&["get", "node", &c.node(), "-o", "jsonpath={.spec.podCIDR}"]);
    let routes = String::from_utf8_lossy(&host.exec(&["ip", "route"]).stdout).into_owned();
    assert!(
        routes
            .lines()
            .any(|l| l.starts_with(&format!("{server_cidr} via {gateway} "))
                && l.contains("proto 165")),
        "{routes}"
    );
    assert!(!routes.contains("vxlan"), "{routes}");
    for from in &pods {
        let from_ip = c.pod_field(from, "{.status.podIP}");
        for to in &pods {
            let to_ip = c.pod_field(to, "{.status.podIP}");
            let answer = who(c, from, &to_ip).unwrap_or_else(|e| panic!("{from} to {to}: {e}"));
            assert!(
                answer.starts_with(&format!("{to} ")) && answer.contains(&from_ip),
                "{from} ({from_ip}) to {to}: {answer}"
            );
        }
    }
    // A reset host keeps no route of the overlay's: host-gw's go via the
    // underlay, which stays, so reset removes them itself.
    let host = &mut env.underlay.hosts[0];
    let out = host.reset();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = String::from_utf8_lossy(&host.exec(&["ip", "route", "show", "proto", "165"]).stdout)
        .into_owned();
    assert!(left.trim().is_empty(), "routes left after reset: {left}");
}

/// `GET /cgi-bin/who` on `address:8080` from inside `pod` (busybox nc:
/// the static busybox's wget crashes in pods): the answer's last line.
fn who(c: &Cluster, pod: &str, address: &str) -> Result<String, String> {
    let out = c.kubectl_output(&[
        "exec",
        pod,
        "--",
        "sh",
        "-c",
        &format!("printf 'GET /cgi-bin/who HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {address} 8080"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || !text.starts_with("HTTP/1.") {
        return Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(text.lines().last().unwrap_or_default().trim().to_string())
}

/// The `who` server: on port 8080, `/cgi-bin/who` answers the pod's
/// name and the address the request came from (busybox httpd's CGI).
const WHO_SCRIPT: &str = r#"mkdir -p /www/cgi-bin && printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho "$(hostname) $REMOTE_ADDR"\n' > /www/cgi-bin/who && chmod +x /www/cgi-bin/who && echo serving && exec httpd -f -p 8080 -h /www"#;

/// `yaml` with its `SCRIPT` the `who` server's command.
fn with_who(yaml: &str) -> String {
    yaml.replace("SCRIPT", &serde_json::to_string(WHO_SCRIPT).unwrap())
}

/// One pod, NAME on node NODE, serving `who`.
const WHO_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  nodeName: NODE
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: [sh, -c, SCRIPT]
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
"#;

/// One pod per node (required anti-affinity) serving `who`, behind a
/// NodePort Service.
const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: web
        image: busybox
        imagePullPolicy: IfNotPresent
        command: [sh, -c, SCRIPT]
        readinessProbe:
          tcpSocket: {port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - {port: 8080, targetPort: 8080}
"#;
