//! End to end, as root, on real containerd, runc and CNI: what a pod's
//! containers see of their pod ([lifecycle] deliverables 5, 7 and 8):
//! downwardAPI, projected and memory-backed volumes and subPathExpr; the
//! hostname, /etc/hosts and resolv.conf the kubelet gives; TZ and
//! /etc/localtime; securityContext, capabilities, OOM scores and the pod
//! cgroups; sidecars; sleep and httpGet hooks. Each test has its own
//! cluster (see cluster/), so they run in parallel.

mod cluster;

use std::time::Duration;

use cluster::{wait_for, Cluster, Options};

fn logs_when_done(c: &Cluster, pod: &str) -> String {
    c.wait(
        &format!("pod/{pod}"),
        "jsonpath={.status.phase}=Succeeded",
        90,
    );
    c.kubectl(&["logs", pod])
}

/// downwardAPI (labels, an annotation), projected (ConfigMap, Secret
/// item, downwardAPI), a memory emptyDir held to its sizeLimit, and a
/// subPathExpr from the pod's name; the tmpfs is unmounted with the pod.
#[test]
fn downward_projected_and_memory_volumes() {
    let c = Cluster::start(Options::default());
    let host = c.dir.path().join("scratch");
    c.apply(&format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: app}}
data: {{mode: fast}}
---
apiVersion: v1
kind: Secret
metadata: {{name: creds}}
stringData: {{pw: hunter2}}
---
apiVersion: v1
kind: Pod
metadata:
  name: vols
  labels: {{app: vols, tier: web}}
  annotations: {{note: hello}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    env: [{{name: POD, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}]
    resources: {{limits: {{memory: 64Mi}}}}
    command: ["sh", "-c", "cat /info/labels; echo; echo note=$(cat /info/note); echo projected=$(cat /all/mode)/$(cat /all/sub/pw)/$(cat /all/ns); df -k /mem | tail -1; (dd if=/dev/zero of=/mem/big bs=1M count=16 2>&1 || echo FULL) | tail -1; echo in-sub > /scratch/file"]
    volumeMounts:
    - {{name: info, mountPath: /info}}
    - {{name: all, mountPath: /all}}
    - {{name: mem, mountPath: /mem}}
    - {{name: scratch, mountPath: /scratch, subPathExpr: $(POD)}}
  volumes:
  - name: info
    downwardAPI:
      items:
      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}
      - {{path: note, fieldRef: {{fieldPath: "metadata.annotations['note']"}}}}
  - name: all
    projected:
      sources:
      - configMap: {{name: app}}
      - secret: {{name: creds, items: [{{key: pw, path: sub/pw}}]}}
      - downwardAPI: {{items: [{{path: ns, fieldRef: {{fieldPath: metadata.namespace}}}}]}}
  - name: mem
    emptyDir: {{medium: Memory, sizeLimit: 8Mi}}
  - name: scratch
    hostPath: {{path: {host}, type: DirectoryOrCreate}}
"#,
        host = host.display()
    ));
    let uid = wait_for("the pod's uid", Duration::from_secs(30), || {
        let uid = c.pod_field("vols", "{.metadata.uid}");
        (!uid.is_empty()).then_some(uid)
    });
    let logs = logs_when_done(&c, "vols");
    assert!(
        logs.starts_with("app=\"vols\"\ntier=\"web\"\n"),
        "labels as upstream writes them: {logs}"
    );
    assert!(logs.contains("note=hello\n"), "{logs}");
    assert!(logs.contains("projected=fast/hunter2/default\n"), "{logs}");
    let df = logs
        .lines()
        .find(|l| l.starts_with("tmpfs"))
        .unwrap_or_else(|| panic!("the memory emptyDir is a tmpfs: {logs}"));
    assert_eq!(
        df.split_whitespace().nth(1),
        Some("8192"),
        "sized by sizeLimit: {df}"
    );
    assert!(
        logs.trim_end().ends_with("FULL"),
        "writing past sizeLimit fails: {logs}"
    );
    assert_eq!(
        std::fs::read_to_string(host.join("vols/file")).unwrap_or_default(),
        "in-sub\n",
        "subPathExpr expanded to the pod's name"
    );
    c.kubectl(&["delete", "pod", "vols", "--timeout=60s"]);
    wait_for("the tmpfs to be unmounted", Duration::from_secs(30), || {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        (!mounts.contains(&uid)).then_some(())
    });
}

/// hostname and subdomain, the managed /etc/hosts with hostAliases,
/// resolv.conf for dnsPolicy None with dnsConfig and for ClusterFirst
/// (the cluster DNS, the namespace's search path then the node's search
/// domains, ndots:5, and no MissingClusterDNS warning), TZ in the
/// environment and /etc/localtime from the host.
#[test]
fn names_hosts_dns_and_time_zone() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: named}
spec:
  restartPolicy: Never
  hostname: db
  subdomain: backend
  hostAliases: [{ip: "127.0.0.1", hostnames: [foo.local, bar.local]}]
  dnsPolicy: None
  dnsConfig:
    nameservers: ["192.0.2.53"]
    searches: [corp.example]
    options: [{name: ndots, value: "2"}]
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    env: [{name: TZ, value: Asia/Shanghai}]
    command: ["sh", "-c", "echo host=$(hostname); cat /etc/hosts; cat /etc/resolv.conf; echo TZ=$TZ; echo offset=$(env -u TZ date +%z)"]
    volumeMounts: [{name: tz, mountPath: /etc/localtime, readOnly: true}]
  volumes: [{name: tz, hostPath: {path: /usr/share/zoneinfo/Asia/Shanghai, type: File}}]
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["cat", "/etc/resolv.conf"]
"#,
    );
    let logs = logs_when_done(&c, "named");
    let ip = c.pod_field("named", "{.status.podIP}");
    assert!(logs.contains("host=db\n"), "{logs}");
    assert!(
        logs.contains("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"),
        "{logs}"
    );
    assert!(
        logs.contains(&format!(
            "\n{ip}\tdb.backend.default.svc.cluster.local\tdb\n"
        )),
        "the pod's names under its IP {ip}: {logs}"
    );
    assert!(
        logs.contains("\n# Entries added by HostAliases.\n127.0.0.1\tfoo.local\tbar.local\n"),
        "{logs}"
    );
    assert!(logs.contains("nameserver 192.0.2.53"), "{logs}");
    assert!(logs.contains("search corp.example"), "{logs}");
    assert!(logs.contains("options ndots:2"), "{logs}");
    assert!(logs.contains("TZ=Asia/Shanghai\n"), "{logs}");
    assert!(logs.contains("offset=+0800\n"), "/etc/localtime: {logs}");

    let plain = logs_when_done(&c, "plain");
    let node_searches: Vec<String> = std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("search"))
        .flat_map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let mut search = vec![
        "default.svc.cluster.local".to_string(),
        "svc.cluster.local".into(),
        "cluster.local".into(),
    ];
    search.extend(node_searches);
    assert!(
        plain.contains(&format!("search {}\n", search.join(" "))),
        "{plain}"
    );
    assert!(
        plain.contains(&format!("nameserver {}\n", c.cidr.cluster_dns())),
        "{plain}"
    );
    assert!(plain.contains("options ndots:5"), "{plain}");
    let reasons = c.event_reasons("plain");
    assert!(
        !reasons.iter().any(|r| r == "MissingClusterDNS"),
        "{reasons:?}"
    );
}

/// runAsUser/runAsGroup/supplementalGroups, readOnlyRootFilesystem,
/// runAsNonRoot refusing an image that runs as root,
/// capabilities dropped and added, the Burstable OOM score from the
/// request's share of the node's memory, and the pod's own cgroup under
/// the node's holding the pod's memory limit, removed with the pod.
#[test]
fn security_context_oom_score_and_pod_cgroups() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: secure}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000]}
  containers:
  - name: app
    image: busybox
    imagePullPolicy: IfNotPresent
    resources: {requests: {memory: 32Mi}, limits: {memory: 64Mi}}
    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}
    command: ["sh", "-c", "id; touch /x 2>/dev/null || echo READONLY; echo oom=$(cat /proc/self/oom_score_adj); sleep 3600"]
  - name: caps
    image: busybox
    imagePullPolicy: IfNotPresent
    resources: {limits: {memory: 16Mi}}
    securityContext:
      runAsUser: 0
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
    command: ["sh", "-c", "grep CapEff /proc/self/status; sleep 3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: rootless}
spec:
  securityContext: {runAsNonRoot: true}
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
"#,
    );
    let reason = wait_for("runAsNonRoot to refuse", Duration::from_secs(60), || {
        let r = c.pod_field(
            "rootless",
            "{.status.containerStatuses[0].state.waiting.reason}",
        );
        (r == "CreateContainerConfigError").then_some(r)
    });
    assert_eq!(reason, "CreateContainerConfigError");
    let message = c.pod_field(
        "rootless",
        "{.status.containerStatuses[0].state.waiting.message}",
    );
    assert!(
        message.starts_with(
            "container has runAsNonRoot and image will run as root (pod: \"rootless_default("
        ),
        "{message}"
    );
    c.wait("pod/secure", "condition=Ready", 90);
    let uid = c.pod_field("secure", "{.metadata.uid}");
    let app = wait_for("the app's output", Duration::from_secs(30), || {
        let l = c.kubectl(&["logs", "secure", "-c", "app"]);
        l.contains("oom=").then_some(l)
    });
    assert!(app.contains("uid=1000 gid=3000"), "{app}");
    assert!(app.contains("4000"), "supplemental group: {app}");
    assert!(app.contains("READONLY"), "{app}");
    let mem_total: i64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<i64>().ok())
        .unwrap()
        * 1024;
    let expected = (1000 - 1000 * (32 << 20) / mem_total).clamp(2, 999);
    assert!(app.contains(&format!("oom={expected}\n")), "{app}");
    let caps = wait_for("the caps output", Duration::from_secs(30), || {
        let l = c.kubectl(&["logs", "secure", "-c", "caps"]);
        l.contains("CapEff").then_some(l)
    });
    assert!(
        caps.contains("0000000000000400"),
        "only NET_BIND_SERVICE: {caps}"
    );
    let pod_cgroup = std::path::PathBuf::from(format!(
        "/sys/fs/cgroup/memory/skiff/{}/kubepods/burstable/pod{uid}",
        c.node()
    ));
    let limit = std::fs::read_to_string(pod_cgroup.join("memory.limit_in_bytes"))
        .unwrap_or_else(|e| panic!("{}: {e}", pod_cgroup.display()));
    assert_eq!(limit.trim(), (80u64 << 20).to_string(), "64Mi + 16Mi");
    let children = std::fs::read_dir(&pod_cgroup)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .count();
    assert!(children >= 3, "the sandbox and both containers inside");
    c.kubectl(&["delete", "pod", "secure", "--timeout=60s"]);
    wait_for("the pod cgroup to go", Duration::from_secs(30), || {
        (!pod_cgroup.exists()).then_some(())
    });
}

/// A sidecar (an init container with restartPolicy Always) starts after
/// the init container before it and before the main container, runs
/// beside it, is restarted when it exits, and is stopped after it; one
/// with a startupProbe holds the main container back until it passed.
#[test]
fn sidecars_run_beside_restart_and_stop_last() {
    let c = Cluster::start(Options::default());
    let shared = c.dir.path().join("side");
    std::fs::create_dir_all(&shared).unwrap();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: sidecar}}
spec:
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: prep
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo prep >> /h/log"]
    volumeMounts: [{{name: h, mountPath: /h}}]
  - name: side
    image: busybox
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "echo side-start >> /h/log; if [ ! -f /h/once ]; then while ! grep -q main-start /h/log; do sleep 0.2; done; touch /h/once; exit 1; fi; trap 'echo side-stop >> /h/log; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{{name: h, mountPath: /h}}]
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo main-start >> /h/log; trap 'echo main-stop >> /h/log; exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{{name: h, mountPath: /h}}]
  volumes:
  - {{name: h, hostPath: {{path: {dir}}}}}
"#,
        dir = shared.display()
    ));
    wait_for("the sidecar's restart", Duration::from_secs(90), || {
        let restarts = c.pod_field(
            "sidecar",
            "{.status.initContainerStatuses[?(@.name==\"side\")].restartCount}",
        );
        (restarts == "1").then_some(())
    });
    c.wait("pod/sidecar", "condition=Ready", 60);
    let row = c.kubectl(&["get", "pod", "sidecar", "--no-headers"]);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.get(1..4), Some(&["2/2", "Running", "1"][..]), "{row}");
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines.get(..3),
        Some(&["prep", "side-start", "main-start"][..]),
        "{log}"
    );
    assert_eq!(
        c.pod_field("sidecar", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    c.kubectl(&["delete", "pod", "sidecar", "--timeout=60s"]);
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(2).collect();
    assert_eq!(tail, ["side-stop", "main-stop"], "main first: {log}");

    // A sidecar with a startupProbe: the main container starts only once
    // the probe passed (here: once the test creates the file it checks);
    // then the sidecar reads started and the pod 2/2 Running.
    let gate = c.dir.path().join("gate");
    std::fs::create_dir_all(&gate).unwrap();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: gated}}
spec:
  terminationGracePeriodSeconds: 0
  initContainers:
  - name: proxy
    image: busybox
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    startupProbe:
      exec: {{command: ["test", "-f", "/h/up"]}}
      periodSeconds: 1
      failureThreshold: 600
    volumeMounts: [{{name: h, mountPath: /h}}]
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
  volumes:
  - {{name: h, hostPath: {{path: {dir}}}}}
"#,
        dir = gate.display()
    ));
    // The probe has run (and failed) against the running sidecar.
    let failed = c.wait_event("gated", "Unhealthy", 60);
    assert!(failed.contains("Startup probe failed"), "{failed}");
    let field = |path: &str| c.pod_field("gated", path);
    assert_eq!(
        field(
            "{.status.initContainerStatuses[0].started}/{.status.initContainerStatuses[0].ready}"
        ),
        "false/false"
    );
    assert_ne!(
        field("{.status.initContainerStatuses[0].state.running.startedAt}"),
        ""
    );
    assert_eq!(
        field("{.status.containerStatuses[0].state.waiting.reason}"),
        "PodInitializing",
        "the main container waits for the startup probe"
    );
    assert_eq!(field("{.status.containerStatuses[0].containerID}"), "");
    assert_eq!(
        field("{.status.conditions[?(@.type==\"Ready\")].status}"),
        "False"
    );
    let row = c.kubectl(&["get", "pod", "gated", "--no-headers"]);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.get(1..3), Some(&["0/2", "Init:0/1"][..]), "{row}");

    std::fs::write(gate.join("up"), b"").unwrap();
    c.wait("pod/gated", "condition=Ready", 60);
    assert_eq!(
        field(
            "{.status.initContainerStatuses[0].started}/{.status.initContainerStatuses[0].ready}"
        ),
        "true/true"
    );
    let row = c.kubectl(&["get", "pod", "gated", "--no-headers"]);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols.get(1..4), Some(&["2/2", "Running", "0"][..]), "{row}");
    c.kubectl(&["delete", "pod", "gated", "--timeout=60s"]);
}

/// A sleep postStart hook and an httpGet preStop hook (to the
/// container's own server, whose CGI records the request).
#[test]
fn sleep_and_http_hooks() {
    let c = Cluster::start(Options::default());
    let shared = c.dir.path().join("hooks");
    std::fs::create_dir_all(&shared).unwrap();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www/cgi-bin; printf '#!/bin/sh\\necho \"$REQUEST_METHOD $REQUEST_URI\" >> /h/log\\necho Content-Type: text/plain\\necho\\necho ok\\n' > /www/cgi-bin/hook; chmod +x /www/cgi-bin/hook; exec httpd -f -p 8080 -h /www"]
    ports: [{{name: http, containerPort: 8080}}]
    volumeMounts: [{{name: h, mountPath: /h}}]
    lifecycle:
      postStart: {{sleep: {{seconds: 1}}}}
      preStop: {{httpGet: {{path: "/cgi-bin/hook?stop", port: http}}}}
  volumes:
  - {{name: h, hostPath: {{path: {dir}}}}}
"#,
        dir = shared.display()
    ));
    c.wait("pod/web", "condition=Ready", 90);
    assert!(
        !c.event_reasons("web")
            .iter()
            .any(|r| r == "FailedPostStartHook"),
        "the sleep hook succeeds"
    );
    c.kubectl(&["delete", "pod", "web", "--timeout=60s"]);
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    assert_eq!(log.trim(), "GET /cgi-bin/hook?stop", "{log}");
}
