//! End to end, as root, on real containerd, runc, CNI and nftables, driven
//! with the real kubectl: Service traffic and cluster DNS ([#36]). One
//! cluster for the file, its node address on a veth whose other end is a
//! "client host" network namespace the test makes (traffic only to that
//! namespace and to the cluster's own addresses); its DNS forwards names
//! outside the cluster to a dnsmasq the test runs on a loopback address
//! of its own. Scenarios run at once, each in its namespace:
//!
//! - 3 web pods behind a ClusterIP: 300 requests reach all three; a pod
//!   failing readiness drops out of rotation and comes back;
//! - a rolling update under a steady request loop: no request fails;
//! - NodePort from the host and from the client host, externalTrafficPolicy
//!   Local keeping the client's address, ClientIP affinity, hairpin, a
//!   Service without endpoints refused, a LoadBalancer on the node address;
//! - DNS from a busybox pod: short, namespaced and full names, a headless
//!   Service's per-pod names, SRV, ExternalName, a name outside the cluster;
//!   service environment variables;
//! - the Python client in a pod reaching https://kubernetes.default.svc;
//!
//! and last, on the same cluster: the server restarted under an open
//! connection through a ClusterIP, which survives, and the rules come back.

mod cluster;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cluster::{wait_for, wait_for_explained, CidrLease, Cluster, Options};

/// The "client host": a network namespace with a veth to the host, whose
/// host end carries the node's address.
struct ClientHost {
    netns: String,
    host_if: String,
    node_ip: String,
    client_ip: String,
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl ClientHost {
    fn new(octet: u8) -> Self {
        let h = Self {
            netns: format!("skc{octet}"),
            host_if: format!("skh{octet}"),
            node_ip: format!("10.{octet}.254.1"),
            client_ip: format!("10.{octet}.254.2"),
        };
        h.remove();
        let peer = format!("skp{octet}");
        run("ip", &["netns", "add", &h.netns]);
        run(
            "ip",
            &[
                "link", "add", &h.host_if, "type", "veth", "peer", "name", &peer, "netns", &h.netns,
            ],
        );
        run(
            "ip",
            &[
                "addr",
                "add",
                &format!("{}/24", h.node_ip),
                "dev",
                &h.host_if,
            ],
        );
        run("ip", &["link", "set", &h.host_if, "up"]);
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &h.netns];
            all.extend_from_slice(args);
            run("ip", &all);
        };
        exec(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", h.client_ip),
            "dev",
            &peer,
        ]);
        exec(&["ip", "link", "set", &peer, "up"]);
        exec(&["ip", "link", "set", "lo", "up"]);
        exec(&["ip", "route", "add", "default", "via", &h.node_ip]);
        h
    }

    /// `curl` from the client host: the body, or the error.
    fn curl(&self, url: &str) -> Result<String, String> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.netns,
                "curl",
                "-sS",
                "--max-time",
                "5",
                url,
            ])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn remove(&self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .output();
    }
}

impl Drop for ClientHost {
    fn drop(&mut self) {
        self.remove();
    }
}

/// A dnsmasq answering `outside.test` on a loopback address of the test's.
struct Upstream {
    child: Child,
    addr: String,
}

impl Upstream {
    fn start(octet: u8) -> Self {
        let addr = format!("127.{octet}.0.53");
        let child = Command::new("dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--user=root",
                "--pid-file",
                &format!("--listen-address={addr}"),
                "--address=/outside.test/192.0.2.44",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq (Debian dnsmasq-base; scripts/deps.sh installs it)");
        let up = Self { child, addr };
        wait_for("dnsmasq to answer", Duration::from_secs(20), || {
            let out = Command::new("busybox")
                .args(["nslookup", "outside.test", &up.addr])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains("192.0.2.44")
                .then_some(())
        });
        up
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the scenarios share.
struct Env {
    c: Cluster,
    client: ClientHost,
    octet: u8,
}

#[test]
fn services_and_dns_on_one_cluster() {
    let lease = CidrLease::take();
    let octet = lease.octet;
    let client = ClientHost::new(octet);
    let upstream = Upstream::start(octet);
    let dir = tempfile::tempdir().unwrap();
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(
        &resolv,
        format!("nameserver {}\nsearch example.test\n", upstream.addr),
    )
    .unwrap();
    let c = Cluster::start_with(
        Options {
            node_ip: Some(client.node_ip.clone()),
            bind_address: Some("0.0.0.0".into()),
            extra: vec!["--resolv-conf".into(), resolv.display().to_string()],
            ..Options::default()
        },
        lease,
    );
    let mut env = Env { c, client, octet };
    let scenarios: &[cluster::Scenario<Env>] = &[
        ("cluster ip and readiness", cluster_ip_and_readiness),
        ("rolling update under load", rolling_update_under_load),
        ("node ports and policies", node_ports_and_policies),
        ("dns", dns),
        ("python client in a pod", python_in_pod),
    ];
    cluster::run_scenarios(&env, scenarios);
    restart_keeps_connections(&mut env);
    env.c.assert_no_component_refused();
    let table = format!("skiff-{}", env.c.bridge);
    drop(env);
    // The cluster's reset removed the proxy's table.
    let listed = Command::new("nft")
        .args(["list", "table", "ip", &table])
        .output()
        .unwrap();
    assert!(!listed.status.success(), "table {table} left behind");
    drop(upstream);
}

fn namespace(c: &Cluster, ns: &str) {
    c.kubectl(&["create", "namespace", ns]);
    // The ServiceAccount the admission plugin needs.
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || {
            c.kubectl_output(&["-n", ns, "get", "serviceaccount", "default"])
                .status
                .success()
                .then_some(())
        },
    );
}

/// A web server answering its pod name on `/`, the client's address on
/// `/cgi-bin/ip`, and `/ready` while /www/ready exists.
fn web_yaml(ns: &str, name: &str, replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  strategy: {{rollingUpdate: {{maxUnavailable: 0, maxSurge: 1}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: web
        image: busybox
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "mkdir -p /www/cgi-bin && hostname > /www/index.html && touch /www/ready && printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho $REMOTE_ADDR\\n' > /www/cgi-bin/ip && chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www"]
        ports: [{{name: http, containerPort: 8080}}]
        readinessProbe: {{httpGet: {{path: /ready, port: 8080}}, periodSeconds: 1, failureThreshold: 1}}
        lifecycle: {{preStop: {{exec: {{command: ["sleep", "2"]}}}}}}
"#
    )
}

fn service_yaml(ns: &str, name: &str, app: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  selector: {{app: {app}}}
  ports: [{{name: http, port: 80, targetPort: 8080}}]
{extra}
"#
    )
}

/// A busybox pod that sleeps, to run commands in.
fn client_pod(c: &Cluster, ns: &str, name: &str) {
    c.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - {{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}}
"#
    ));
}

fn wait_ready(c: &Cluster, ns: &str, what: &str) {
    c.kubectl(&[
        "-n",
        ns,
        "wait",
        "--for=condition=Ready",
        what,
        "--timeout=120s",
    ]);
}

fn wait_rollout(c: &Cluster, ns: &str, deploy: &str) {
    c.kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        &format!("deployment/{deploy}"),
        "--timeout=180s",
    ]);
}

/// `kubectl exec POD -- sh -c SCRIPT`: (success, stdout, stderr).
fn sh(c: &Cluster, ns: &str, pod: &str, script: &str) -> (bool, String, String) {
    let out = c.kubectl_output(&["-n", ns, "exec", pod, "--", "sh", "-c", script]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sh` that must succeed.
fn sh_ok(c: &Cluster, ns: &str, pod: &str, script: &str) -> String {
    let (ok, out, err) = sh(c, ns, pod, script);
    assert!(ok, "{pod}: {script}: {out}{err}");
    out
}

/// The names of the ready endpoints of Service `svc`.
fn ready_endpoint_pods(c: &Cluster, ns: &str, svc: &str) -> Vec<String> {
    let out = c.kubectl_output(&[
        "-n",
        ns,
        "get",
        "endpointslices",
        "-l",
        &format!("kubernetes.io/service-name={svc}"),
        "-o",
        r#"jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.targetRef.name}{"\n"}{end}"#,
    ]);
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

fn pods_of(c: &Cluster, ns: &str, app: &str) -> Vec<String> {
    let out = c.kubectl(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        &format!("app={app}"),
        "--field-selector=status.phase=Running",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let mut names: Vec<String> = out.split_whitespace().map(str::to_string).collect();
    names.sort();
    names
}

/// How many of `n` requests to `url` from `pod` each backend answered.
fn spread(
    c: &Cluster,
    ns: &str,
    pod: &str,
    url: &str,
    n: u32,
) -> std::collections::BTreeMap<String, u32> {
    let out = sh_ok(
        c,
        ns,
        pod,
        &format!("i=0; while [ $i -lt {n} ]; do timeout 5 wget -qO- {url} || echo FAILED; i=$((i+1)); done"),
    );
    let mut seen = std::collections::BTreeMap::new();
    for line in out.lines().filter(|l| !l.is_empty()) {
        *seen.entry(line.to_string()).or_insert(0) += 1;
    }
    seen
}

/// In a new namespace: 3 web pods behind the ClusterIP Service `web`,
/// and a client pod, all running.
fn three_webs_and_a_client(c: &Cluster, ns: &str) {
    namespace(c, ns);
    c.apply(&web_yaml(ns, "web", 3));
    c.apply(&service_yaml(ns, "web", "web", ""));
    client_pod(c, ns, "client");
    wait_rollout(c, ns, "web");
    wait_ready(c, ns, "pod/client");
}

fn cluster_ip_and_readiness(env: &Env) {
    let c = &env.c;
    let ns = "rotation";
    three_webs_and_a_client(c, ns);
    let pods = pods_of(c, ns, "web");
    assert_eq!(pods.len(), 3, "{pods:?}");
    wait_for("three ready endpoints", Duration::from_secs(30), || {
        (ready_endpoint_pods(c, ns, "web") == pods).then_some(())
    });
    let seen = spread(c, ns, "client", "http://web/", 300);
    assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), pods, "{seen:?}");
    for (pod, n) in &seen {
        assert!(*n >= 50, "{pod} answered only {n} of 300: {seen:?}");
    }

    // Running ≠ Ready: the pod that stops being ready leaves the rotation.
    let out_of = &pods[0];
    sh_ok(c, ns, out_of, "rm /www/ready");
    wait_for(
        "the pod to leave the endpoints",
        Duration::from_secs(30),
        || (!ready_endpoint_pods(c, ns, "web").contains(out_of)).then_some(()),
    );
    let seen = spread(c, ns, "client", "http://web/", 60);
    assert!(
        !seen.contains_key(out_of),
        "{out_of} still answers: {seen:?}"
    );
    assert!(!seen.contains_key("FAILED"), "{seen:?}");
    sh_ok(c, ns, out_of, "touch /www/ready");
    wait_for("the pod to come back", Duration::from_secs(30), || {
        ready_endpoint_pods(c, ns, "web")
            .contains(out_of)
            .then_some(())
    });
    let seen = spread(c, ns, "client", "http://web/", 120);
    assert!(
        seen.contains_key(out_of),
        "{out_of} does not answer again: {seen:?}"
    );
}

fn rolling_update_under_load(env: &Env) {
    let c = &env.c;
    let ns = "rolling";
    three_webs_and_a_client(c, ns);
    wait_for("three ready endpoints", Duration::from_secs(30), || {
        (ready_endpoint_pods(c, ns, "web").len() == 3).then_some(())
    });
    // The loop runs until /tmp/stop appears, counting what failed.
    let looping = Command::new(cluster::KUBECTL)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["-n", ns, "exec", "client", "--", "sh", "-c"])
        .arg("ok=0; fail=0; while [ ! -e /tmp/stop ]; do if timeout 5 wget -qO- http://web/ >/dev/null 2>&1; then ok=$((ok+1)); else fail=$((fail+1)); fi; done; echo ok=$ok fail=$fail")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let before: Vec<String> = pods_of(c, ns, "web");
    c.kubectl(&["-n", ns, "rollout", "restart", "deployment/web"]);
    wait_rollout(c, ns, "web");
    wait_for("the old pods to be gone", Duration::from_secs(60), || {
        let now = c.kubectl(&[
            "-n",
            ns,
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ]);
        (!before
            .iter()
            .any(|p| now.split_whitespace().any(|n| n == p)))
        .then_some(())
    });
    sh_ok(c, ns, "client", "touch /tmp/stop");
    let out = looping.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let counts = text.trim();
    let fail: u32 = counts
        .split_whitespace()
        .find_map(|w| w.strip_prefix("fail="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no counts: {counts:?} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let ok: u32 = counts
        .split_whitespace()
        .find_map(|w| w.strip_prefix("ok="))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        ok > 20,
        "too few requests went through the rollout: {counts}"
    );
    assert_eq!(fail, 0, "requests failed during the rollout: {counts}");
}

/// busybox httpd's REMOTE_ADDR of an IPv4 client: `[::ffff:a.b.c.d]`.
fn unmapped(addr: &str) -> String {
    addr.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_start_matches("::ffff:")
        .to_string()
}

fn node_ports_and_policies(env: &Env) {
    let c = &env.c;
    let ns = "ports";
    namespace(c, ns);
    c.apply(&web_yaml(ns, "web", 2));
    c.apply(&service_yaml(ns, "web-np", "web", "  type: NodePort"));
    c.apply(&service_yaml(
        ns,
        "web-local",
        "web",
        "  type: NodePort\n  externalTrafficPolicy: Local",
    ));
    c.apply(&service_yaml(
        ns,
        "web-sticky",
        "web",
        "  sessionAffinity: ClientIP",
    ));
    c.apply(&service_yaml(ns, "web-lb", "web", "  type: LoadBalancer"));
    c.apply(&service_yaml(ns, "nobody", "no-such-app", ""));
    c.apply(&web_yaml(ns, "solo", 1));
    c.apply(&service_yaml(ns, "solo", "solo", ""));
    client_pod(c, ns, "client");
    wait_rollout(c, ns, "web");
    wait_rollout(c, ns, "solo");
    wait_ready(c, ns, "pod/client");
    wait_for("two ready endpoints", Duration::from_secs(30), || {
        (ready_endpoint_pods(c, ns, "web-np").len() == 2).then_some(())
    });
    let node_port = |svc: &str| {
        c.kubectl(&[
            "-n",
            ns,
            "get",
            "service",
            svc,
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])
    };
    let pods = pods_of(c, ns, "web");
    let node = &env.client.node_ip;

    // NodePort from the host, on the node's address.
    let np = node_port("web-np");
    let url = format!("{node}:{np}");
    let body = wait_for(
        "the node port from the host",
        Duration::from_secs(30),
        || cluster::http_get(&url, "/").ok(),
    );
    assert!(pods.iter().any(|p| body.contains(p.as_str())), "{body}");

    // From the client host: Cluster masquerades (the pod sees the
    // node's bridge address), Local keeps the client's address.
    let gateway = format!("10.{}.0.1", env.octet);
    let seen = unmapped(
        &env.client
            .curl(&format!("http://{node}:{np}/cgi-bin/ip"))
            .unwrap(),
    );
    assert_ne!(
        seen, env.client.client_ip,
        "externalTrafficPolicy Cluster keeps the source"
    );
    assert_eq!(seen, gateway);
    let local = node_port("web-local");
    let seen = wait_for("the Local node port", Duration::from_secs(30), || {
        env.client
            .curl(&format!("http://{node}:{local}/cgi-bin/ip"))
            .ok()
    });
    let seen = unmapped(&seen);
    assert_eq!(seen, env.client.client_ip, "externalTrafficPolicy Local");

    // A LoadBalancer gets the node's address and answers there.
    let ingress = wait_for("the load balancer address", Duration::from_secs(30), || {
        let ip = c.kubectl(&[
            "-n",
            ns,
            "get",
            "service",
            "web-lb",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ]);
        (!ip.is_empty()).then_some(ip)
    });
    assert_eq!(&ingress, node);
    let body = wait_for("the load balancer port", Duration::from_secs(30), || {
        env.client.curl(&format!("http://{node}:80/")).ok()
    });
    assert!(pods.iter().any(|p| body.contains(p.as_str())), "{body}");

    // ClientIP affinity: every request of the client goes to one pod.
    let seen = spread(c, ns, "client", "http://web-sticky/", 30);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen.keys().all(|k| pods.contains(k)), "{seen:?}");

    // Hairpin: the solo pod reaches itself through its own Service.
    let solo = pods_of(c, ns, "solo");
    let answer = sh_ok(c, ns, &solo[0], "timeout 5 wget -qO- http://solo/");
    assert_eq!(answer.trim(), solo[0]);

    // No endpoints: refused at once (ICMP port unreachable), not timed out.
    let (ok, out, err) = sh(c, ns, "client", "timeout 20 wget -qO- http://nobody/");
    assert!(!ok, "{out}");
    assert!(err.contains("Connection refused"), "{err}");
}

fn dns(env: &Env) {
    let c = &env.c;
    let ns = "names";
    namespace(c, ns);
    c.apply(&web_yaml(ns, "web", 1));
    c.apply(&service_yaml(ns, "web", "web", ""));
    c.apply(&format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: db, namespace: {ns}}}
spec:
  clusterIP: None
  selector: {{app: db}}
  ports: [{{name: pg, port: 5432}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {ns}}}
spec:
  serviceName: db
  replicas: 2
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - {{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}}
---
apiVersion: v1
kind: Service
metadata: {{name: elsewhere, namespace: {ns}}}
spec:
  type: ExternalName
  externalName: outside.test
"#
    ));
    client_pod(c, ns, "client");
    wait_rollout(c, ns, "web");
    wait_ready(c, ns, "pod/client");
    c.kubectl(&[
        "-n",
        ns,
        "rollout",
        "status",
        "statefulset/db",
        "--timeout=120s",
    ]);
    let web_ip = c.kubectl(&[
        "-n",
        ns,
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);

    // The pod's resolv.conf: the cluster DNS, the namespace's search path.
    let resolv = sh_ok(c, ns, "client", "cat /etc/resolv.conf");
    assert!(
        resolv.contains(&format!("nameserver {}", c.cidr.cluster_dns())),
        "{resolv}"
    );
    assert!(
        resolv.contains(&format!(
            "search {ns}.svc.cluster.local svc.cluster.local cluster.local example.test"
        )),
        "{resolv}"
    );
    assert!(resolv.contains("options ndots:5"), "{resolv}");
    let described = c.kubectl(&["-n", ns, "describe", "pod", "client"]);
    assert!(!described.contains("MissingClusterDNS"), "{described}");

    // (busybox nslookup tries every search domain and fails if any
    // does: look at what it found.)
    for name in ["web", &format!("web.{ns}.svc.cluster.local")] {
        let (_, out, _) = sh(c, ns, "client", &format!("nslookup {name}"));
        assert!(out.contains(&web_ip), "nslookup {name}: {out}");
    }
    // busybox nslookup does not search for a name with a dot; the C
    // library's resolver (wget's) does, under ndots:5.
    let web_pod = pods_of(c, ns, "web");
    for name in ["web", &format!("web.{ns}"), &format!("web.{ns}.svc")] {
        let out = sh_ok(
            c,
            ns,
            "client",
            &format!("timeout 10 wget -qO- http://{name}/"),
        );
        assert_eq!(out.trim(), web_pod[0], "{name}");
    }
    wait_for("both db pods in DNS", Duration::from_secs(30), || {
        let (_, out, _) = sh(
            c,
            ns,
            "client",
            &format!("nslookup db.{ns}.svc.cluster.local."),
        );
        (out.matches("Address").count() >= 3).then_some(())
    });
    let db0_ip = c.kubectl(&[
        "-n",
        ns,
        "get",
        "pod",
        "db-0",
        "-o",
        "jsonpath={.status.podIP}",
    ]);
    let (_, out, _) = sh(
        c,
        ns,
        "client",
        &format!("nslookup db-0.db.{ns}.svc.cluster.local."),
    );
    assert!(out.contains(&db0_ip), "{out}");
    let (_, out, _) = sh(
        c,
        ns,
        "client",
        &format!("nslookup -type=srv _pg._tcp.db.{ns}.svc.cluster.local."),
    );
    assert!(
        out.contains("5432") && out.contains(&format!("db-0.db.{ns}.svc.cluster.local")),
        "{out}"
    );
    let (_, out, _) = sh(
        c,
        ns,
        "client",
        &format!("nslookup elsewhere.{ns}.svc.cluster.local."),
    );
    assert!(
        out.contains("outside.test") && out.contains("192.0.2.44"),
        "{out}"
    );
    let (_, out, _) = sh(c, ns, "client", "nslookup outside.test.");
    assert!(out.contains("192.0.2.44"), "{out}");
    let (ok, out, err) = sh(
        c,
        ns,
        "client",
        &format!("nslookup nothing.{ns}.svc.cluster.local."),
    );
    assert!(
        !ok && (out.contains("NXDOMAIN") || err.contains("NXDOMAIN")),
        "{out}{err}"
    );
    let dashed = db0_ip.replace('.', "-");
    let (_, out, _) = sh(
        c,
        ns,
        "client",
        &format!("nslookup {dashed}.{ns}.pod.cluster.local."),
    );
    assert!(out.contains(&db0_ip), "{out}");

    // Service links: the web Service's variables, and the API's.
    let env_vars = sh_ok(c, ns, "client", "env");
    assert!(
        env_vars.contains(&format!("WEB_SERVICE_HOST={web_ip}")),
        "{env_vars}"
    );
    assert!(
        env_vars.contains(&format!("WEB_PORT_80_TCP=tcp://{web_ip}:80")),
        "{env_vars}"
    );
    assert!(
        env_vars.contains("KUBERNETES_SERVICE_PORT=443"),
        "{env_vars}"
    );
}

/// The host's Python and the venv with the `kubernetes` client, mounted
/// into a busybox pod.
fn python_pod_yaml(ns: &str, name: &str, script: &str) -> String {
    let venv = cluster::python_venv();
    let script = script.replace('\n', "\n      ");
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}, labels: {{app: {name}}}}}
spec:
  terminationGracePeriodSeconds: 0
  restartPolicy: Never
  volumes:
  - {{name: usr, hostPath: {{path: /usr}}}}
  - {{name: venv, hostPath: {{path: {venv}}}}}
  - {{name: ca, configMap: {{name: kube-root-ca.crt}}}}
  containers:
  - name: py
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["/usr/bin/python3", "-u", "-c"]
    args:
    - |
      import glob, sys
      sys.path[:0] = glob.glob("/venv/lib/python3*/site-packages")
      {script}
    volumeMounts:
    - {{name: usr, mountPath: /usr, readOnly: true}}
    - {{name: usr, mountPath: /lib, subPath: lib, readOnly: true}}
    - {{name: usr, mountPath: /lib64, subPath: lib64, readOnly: true}}
    - {{name: venv, mountPath: /venv, readOnly: true}}
    - {{name: ca, mountPath: /ca}}
"#,
        venv = venv.display()
    )
}

fn python_in_pod(env: &Env) {
    let c = &env.c;
    let ns = "inside";
    namespace(c, ns);
    wait_for("the root CA ConfigMap", Duration::from_secs(30), || {
        c.kubectl_output(&["-n", ns, "get", "configmap", "kube-root-ca.crt"])
            .status
            .success()
            .then_some(())
    });
    c.apply(&python_pod_yaml(
        ns,
        "py",
        r#"import kubernetes.client as k
cfg = k.Configuration()
cfg.host = "https://kubernetes.default.svc"
cfg.ssl_ca_cert = "/ca/ca.crt"
try:
    k.CoreV1Api(k.ApiClient(cfg)).list_namespaced_pod("default")
    print("STATUS 200")
except k.exceptions.ApiException as e:
    print("STATUS", e.status)"#,
    ));
    let phase = wait_for("the python pod to finish", Duration::from_secs(120), || {
        let p = c.kubectl(&[
            "-n",
            ns,
            "get",
            "pod",
            "py",
            "-o",
            "jsonpath={.status.phase}",
        ]);
        matches!(p.as_str(), "Succeeded" | "Failed").then_some(p)
    });
    let logs = c.kubectl(&["-n", ns, "logs", "py"]);
    assert_eq!(phase, "Succeeded", "{logs}");
    // The TLS handshake with the cluster CA worked; who may do what
    // comes with [rbac] (an anonymous caller is refused).
    assert!(
        logs.contains("STATUS 401") || logs.contains("STATUS 403") || logs.contains("STATUS 200"),
        "{logs}"
    );
}

/// An echo server and a client holding one connection through the
/// ClusterIP across a restart of the server (agent and proxy included).
fn restart_keeps_connections(env: &mut Env) {
    // The node's DNS endpoint, deleted, is published again.
    let slice = format!("kube-dns-{}", env.c.node());
    env.c
        .kubectl(&["-n", "kube-system", "delete", "endpointslice", &slice]);
    wait_for("the DNS endpoint again", Duration::from_secs(30), || {
        env.c
            .kubectl_output(&["-n", "kube-system", "get", "endpointslice", &slice])
            .status
            .success()
            .then_some(())
    });
    let ns = "restart";
    namespace(&env.c, ns);
    env.c.apply(&python_pod_yaml(
        ns,
        "echo",
        r#"import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9000))
s.listen(8)
while True:
    conn, _ = s.accept()
    import threading
    def serve(conn):
        while True:
            data = conn.recv(100)
            if not data:
                return
            conn.sendall(data)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()"#,
    ));
    env.c.apply(&format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: {ns}}}
spec:
  selector: {{app: echo}}
  ports: [{{port: 9000}}]
"#
    ));
    env.c.apply(&python_pod_yaml(
        ns,
        "holder",
        r#"import os, socket, time
deadline = time.time() + 60
while True:
    try:
        s = socket.create_connection(("echo", 9000), timeout=10)
        break
    except OSError as e:
        if time.time() > deadline:
            raise
        time.sleep(0.5)
s.sendall(b"one")
print("got", s.recv(100).decode(), flush=True)
deadline = time.time() + 300
while not os.path.exists("/tmp/go") and time.time() < deadline:
    time.sleep(0.2)
s.sendall(b"two")
print("got", s.recv(100).decode(), flush=True)"#,
    ));
    let c = &env.c;
    wait_for("the held connection", Duration::from_secs(120), || {
        let logs = c.kubectl_output(&["-n", ns, "logs", "holder"]);
        String::from_utf8_lossy(&logs.stdout)
            .contains("got one")
            .then_some(())
    });
    let table = format!("skiff-{}", c.bridge);
    env.c.stop();
    env.c.spawn();
    env.c.wait_node_ready();
    let c = &env.c;
    // The rules are back: the echo Service's address is in the table, and
    // a new connection through it works.
    let echo_ip = c.kubectl(&[
        "-n",
        ns,
        "get",
        "service",
        "echo",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    wait_for("the proxy's map again", Duration::from_secs(30), || {
        let out = Command::new("nft")
            .args(["list", "table", "ip", &table])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("{echo_ip} . tcp . 9000"))
            .then_some(())
    });
    // Once a full suite saw this first connection refused (the Service
    // without a ready endpoint in the rules for a moment; not reproduced
    // alone or under load since): a new connection must work within
    // seconds, and a timeout says what the slices and the last try said.
    let last = std::cell::RefCell::new(String::new());
    let again = wait_for_explained(
        "a new connection through the Service after the restart",
        Duration::from_secs(15),
        || {
            let (ok, out, err) = sh(
                c,
                ns,
                "holder",
                "/usr/bin/python3 -c \"import socket; s = socket.create_connection(('echo', 9000), 5); s.sendall(b'again'); print(s.recv(100).decode())\"",
            );
            if !ok {
                *last.borrow_mut() = format!("{out}{err}");
            }
            ok.then_some(out)
        },
        || {
            format!(
                "\nlast try: {}\nslices: {}",
                last.borrow(),
                c.kubectl(&["-n", ns, "get", "endpointslices", "-o", "yaml"])
            )
        },
    );
    assert_eq!(again.trim(), "again");
    sh_ok(c, ns, "holder", "touch /tmp/go");
    let logs = wait_for(
        "the old connection to answer",
        Duration::from_secs(60),
        || {
            let p = c.kubectl(&[
                "-n",
                ns,
                "get",
                "pod",
                "holder",
                "-o",
                "jsonpath={.status.phase}",
            ]);
            matches!(p.as_str(), "Succeeded" | "Failed")
                .then(|| c.kubectl(&["-n", ns, "logs", "holder"]))
        },
    );
    assert!(logs.contains("got two"), "{logs}");
}
