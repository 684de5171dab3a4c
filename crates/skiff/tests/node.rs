//! End to end, as root, on real containerd, runc and CNI: pods created
//! with kubectl run through `skiff server`'s scheduler and node agent.
//! Each test has its own server, data dir, containerd, bridge and pod
//! CIDR (see cluster/), so they run in parallel.

mod cluster;

use std::time::Duration;

use cluster::{http_get, wait_for, Cluster, Options};

/// `kubectl run` of busybox httpd reaches Running and Ready, answers on
/// its pod IP from the host, and its events come in the kubelet's order.
#[test]
fn a_pod_runs_and_serves_on_its_ip() {
    let c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "web",
        "--image=busybox",
        "--",
        "httpd",
        "-f",
        "-p",
        "8080",
    ]);
    c.wait("pod/web", "condition=Ready", 60);
    assert_eq!(c.pod_field("web", "{.status.phase}"), "Running");
    let ip = c.pod_field("web", "{.status.podIP}");
    assert!(
        ip.starts_with(&format!("10.{}.", c.cidr.octet)),
        "pod IP {ip}"
    );
    assert_eq!(c.pod_field("web", "{.status.hostIP}"), "127.0.0.1");
    assert!(c
        .pod_field("web", "{.status.containerStatuses[0].containerID}")
        .starts_with("containerd://"));
    // httpd answers 404 for a missing page: that is an answer.
    let answer = wait_for("httpd to answer", Duration::from_secs(20), || {
        http_get(&format!("{ip}:8080"), "/").ok()
    });
    assert!(answer.starts_with("HTTP/1."), "{answer}");

    let reasons = c.event_reasons("web");
    let order: Vec<&str> = reasons
        .iter()
        .map(String::as_str)
        .filter(|r| ["Scheduled", "Pulled", "Created", "Started"].contains(r))
        .collect();
    assert_eq!(
        order,
        ["Scheduled", "Pulled", "Created", "Started"],
        "{reasons:?}"
    );
    let describe = c.kubectl(&["describe", "pod", "web"]);
    assert!(describe.contains("Started container web"), "{describe}");
    assert!(
        describe.contains("Container image \"busybox\" already present on machine")
            || describe.contains("Successfully pulled image"),
        "{describe}"
    );

    // The node reports itself Ready with upstream's reason.
    let ready = c.kubectl(&[
        "get",
        "node",
        &c.node(),
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}",
    ]);
    assert_eq!(ready, "KubeletReady");

    // Deleting it stops the container and removes the object.
    c.kubectl(&["delete", "pod", "web", "--grace-period=1", "--timeout=60s"]);
}

/// A container that keeps failing restarts at once, then backs off:
/// CrashLoopBackOff in the status and the STATUS column, BackOff events,
/// and the previous run's output through `kubectl logs --previous`.
#[test]
fn a_crashing_container_backs_off() {
    let c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "crash",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sh",
        "-c",
        "echo started; exit 3",
    ]);
    c.wait(
        "pod/crash",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}=CrashLoopBackOff",
        60,
    );
    let restarts: u32 = c
        .pod_field("crash", "{.status.containerStatuses[0].restartCount}")
        .parse()
        .unwrap();
    assert!(restarts >= 1, "restartCount {restarts}");
    assert_eq!(
        c.pod_field(
            "crash",
            "{.status.containerStatuses[0].lastState.terminated.exitCode}"
        ),
        "3"
    );
    assert_eq!(
        c.pod_field(
            "crash",
            "{.status.containerStatuses[0].lastState.terminated.reason}"
        ),
        "Error"
    );
    let message = c.pod_field(
        "crash",
        "{.status.containerStatuses[0].state.waiting.message}",
    );
    assert!(
        message.starts_with("back-off ")
            && message.contains("restarting failed container=crash pod=crash_default("),
        "{message}"
    );
    // Running: the container has run, and will again.
    assert_eq!(c.pod_field("crash", "{.status.phase}"), "Running");
    let table = c.kubectl(&["get", "pod", "crash"]);
    assert!(
        table.contains("CrashLoopBackOff") || table.contains("Error"),
        "{table}"
    );
    let reasons = c.event_reasons("crash");
    assert!(reasons.iter().any(|r| r == "BackOff"), "{reasons:?}");
    let previous = c.kubectl(&["logs", "crash", "--previous"]);
    assert_eq!(previous, "started\n");
}

/// Finished pods keep their final status: Succeeded and Failed under
/// Never, Succeeded under OnFailure, with the exit codes.
#[test]
fn finished_pods_keep_their_phase_and_exit_code() {
    let c = Cluster::start(Options::default());
    for (name, policy, code) in [
        ("ok", "Never", 0),
        ("bad", "Never", 5),
        ("retry", "OnFailure", 0),
    ] {
        c.kubectl(&[
            "run",
            name,
            "--image=busybox",
            "--image-pull-policy=IfNotPresent",
            &format!("--restart={policy}"),
            "--",
            "sh",
            "-c",
            &format!("echo {name}; exit {code}"),
        ]);
    }
    c.wait("pod/ok", "jsonpath={.status.phase}=Succeeded", 60);
    c.wait("pod/bad", "jsonpath={.status.phase}=Failed", 60);
    c.wait("pod/retry", "jsonpath={.status.phase}=Succeeded", 60);
    assert_eq!(
        c.pod_field(
            "bad",
            "{.status.containerStatuses[0].state.terminated.exitCode}"
        ),
        "5"
    );
    assert_eq!(
        c.pod_field(
            "bad",
            "{.status.containerStatuses[0].state.terminated.reason}"
        ),
        "Error"
    );
    assert_eq!(
        c.pod_field(
            "ok",
            "{.status.containerStatuses[0].state.terminated.reason}"
        ),
        "Completed"
    );
    assert_eq!(
        c.pod_field("ok", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    let ready = c.pod_field("ok", "{.status.conditions[?(@.type==\"Ready\")].reason}");
    assert_eq!(ready, "PodCompleted");
    // The logs of a finished container stay readable.
    assert_eq!(c.kubectl(&["logs", "bad"]), "bad\n");
    let table = c.kubectl(&["get", "pods"]);
    assert!(
        table.contains("Completed") && table.contains("Error"),
        "{table}"
    );
}

/// Deletion: a container that handles SIGTERM exits at once, one that
/// ignores it is killed when its grace period runs out. Either way the
/// object goes away only after the container has stopped.
#[test]
fn deletion_honours_term_and_the_grace_period() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: polite}
spec:
  terminationGracePeriodSeconds: 120
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'echo bye; exit 0' TERM; while true; do sleep 0.2; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
"#,
    );
    c.wait("pod/polite", "condition=Ready", 60);
    c.wait("pod/stubborn", "condition=Ready", 60);
    // With 120 s of grace, only a container that acted on TERM lets this
    // finish within the timeout.
    c.kubectl(&["delete", "pod", "polite", "--timeout=40s"]);
    // `sleep` as PID 1 ignores TERM: the agent must SIGKILL at 3 s.
    c.kubectl(&["delete", "pod", "stubborn", "--timeout=40s"]);
    // A second delete with a shorter grace period cuts a long one short.
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  terminationGracePeriodSeconds: 300
  containers:
  - {name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
"#,
    );
    c.wait("pod/slow", "condition=Ready", 60);
    c.kubectl(&["delete", "pod", "slow", "--wait=false"]);
    c.wait(
        "pod/slow",
        "jsonpath={.metadata.deletionGracePeriodSeconds}=300",
        30,
    );
    c.kubectl(&["delete", "pod", "slow", "--grace-period=1", "--timeout=40s"]);
    let reasons = c.event_reasons("stubborn");
    assert!(reasons.iter().any(|r| r == "Killing"), "{reasons:?}");
    // Nothing of them is left in the runtime.
    let out = std::process::Command::new("ctr")
        .arg("--address")
        .arg(c.data_dir.join("node/containerd/containerd.sock"))
        .args(["-n", "k8s.io", "containers", "ls", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "containers left"
    );
}

/// The agent restarting (the whole server, here) adopts running pods:
/// same container, no restart.
#[test]
fn a_restart_of_the_server_adopts_running_pods() {
    let mut c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "keep",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/keep", "condition=Ready", 60);
    let id = c.pod_field("keep", "{.status.containerStatuses[0].containerID}");
    c.stop();
    c.spawn();
    c.wait_node_ready();
    c.wait("pod/keep", "condition=Ready", 60);
    assert_eq!(
        c.pod_field("keep", "{.status.containerStatuses[0].containerID}"),
        id
    );
    assert_eq!(
        c.pod_field("keep", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );

    // containerd dying is survived too: the agent starts it again, the
    // pod keeps its container, and new pods start.
    let pid = c.containerd_pid().expect("containerd pid");
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    wait_for(
        "containerd to be restarted",
        Duration::from_secs(30),
        || {
            c.containerd_pid()
                .filter(|p| *p != pid && std::path::Path::new(&format!("/proc/{p}")).exists())
        },
    );
    c.kubectl(&[
        "run",
        "after",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/after", "condition=Ready", 60);
    assert_eq!(
        c.pod_field("keep", "{.status.containerStatuses[0].containerID}"),
        id
    );
    assert_eq!(
        c.pod_field("keep", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
}

/// Pods reach each other over their IPs, and a hostPort reaches a pod.
#[test]
fn pods_talk_over_pod_ips_and_host_ports() {
    let c = Cluster::start(Options::default());
    let host_port = cluster::free_port();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: server}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: httpd
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-server > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
    - containerPort: 8080
      hostPort: {host_port}
"#
    ));
    c.wait("pod/server", "condition=Ready", 60);
    let ip = c.pod_field("server", "{.status.podIP}");
    c.kubectl(&[
        "run",
        "client",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--restart=Never",
        "--",
        // Not `-T`: busybox 1.35's static wget crashes with a timeout set.
        "wget",
        "-q",
        "-O",
        "-",
        &format!("http://{ip}:8080/index.html"),
    ]);
    c.wait("pod/client", "jsonpath={.status.phase}=Succeeded", 60);
    assert_eq!(c.kubectl(&["logs", "client"]), "hello-from-server\n");
    let answer = wait_for("the hostPort to answer", Duration::from_secs(20), || {
        http_get(&format!("127.0.0.1:{host_port}"), "/index.html").ok()
    });
    assert!(answer.contains("hello-from-server"), "{answer}");

    // A second pod asking for the same hostPort does not fit the node.
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: second}}
spec:
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    ports:
    - containerPort: 8080
      hostPort: {host_port}
"#
    ));
    let message = c.wait_event("second", "FailedScheduling", 30);
    assert!(
        message.contains("1 node(s) didn't have free ports for the requested pod ports"),
        "{message}"
    );
}

/// With the control-plane taint, pods stay Pending with the scheduler's
/// upstream message until the taint is removed.
#[test]
fn the_control_plane_taint_keeps_pods_pending_until_removed() {
    let c = Cluster::start(Options {
        taint_control_plane: true,
        ..Options::default()
    });
    c.kubectl(&[
        "run",
        "waiting",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sleep",
        "3600",
    ]);
    let message = c.wait_event("waiting", "FailedScheduling", 30);
    assert!(
        message.contains("0/1 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"),
        "{message}"
    );
    assert_eq!(c.pod_field("waiting", "{.status.phase}"), "Pending");
    c.kubectl(&[
        "taint",
        "nodes",
        "--all",
        "node-role.kubernetes.io/control-plane-",
    ]);
    c.wait("pod/waiting", "condition=Ready", 60);
}

/// `skiff agent` alone joins a `skiff server --disable-agent` and runs
/// pods bound to it.
#[test]
fn a_standalone_agent_joins_and_runs_pods() {
    let c = Cluster::start(Options {
        disable_agent: true,
        ..Options::default()
    });
    let agent_dir = c.dir.path().join("agent");
    let bridge = format!("{}a", c.bridge);
    let mut agent = std::process::Command::new(cluster::SKIFF)
        .arg("agent")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--data-dir")
        .arg(&agent_dir)
        .args([
            "--node-name",
            "worker-1",
            "--node-ip",
            "127.0.0.1",
            "--bridge-name",
            &bridge,
        ])
        .args(["--kubelet-port", &cluster::free_port().to_string()])
        .env("SKIFF_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Reset(std::path::PathBuf, String);
    impl Drop for Reset {
        fn drop(&mut self) {
            let _ = std::process::Command::new(cluster::SKIFF)
                .arg("reset")
                .arg("--data-dir")
                .arg(&self.0)
                .args(["--bridge-name", &self.1])
                .output();
        }
    }
    let _reset = Reset(agent_dir.clone(), bridge);
    wait_for("the agent's node", Duration::from_secs(60), || {
        c.kubectl_output(&["get", "node", "worker-1"])
            .status
            .success()
            .then_some(())
    });
    c.wait("node/worker-1", "condition=Ready", 60);
    c.kubectl(&[
        "run",
        "joined",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/joined", "condition=Ready", 60);
    assert_eq!(c.pod_field("joined", "{.spec.nodeName}"), "worker-1");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status();
    let _ = agent.wait();
}

/// A command that is not in the image: the start fails with the
/// runtime's message, and the container backs off like any crash.
#[test]
fn a_missing_command_is_a_start_error() {
    let c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "nocmd",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--command",
        "--",
        "/no/such/binary",
    ]);
    let reason = wait_for("the start to fail", Duration::from_secs(60), || {
        let waiting = c.pod_field(
            "nocmd",
            "{.status.containerStatuses[0].state.waiting.reason}",
        );
        let last = c.pod_field(
            "nocmd",
            "{.status.containerStatuses[0].lastState.terminated.reason}",
        );
        let now = c.pod_field(
            "nocmd",
            "{.status.containerStatuses[0].state.terminated.reason}",
        );
        [waiting, last, now]
            .into_iter()
            .find(|r| ["RunContainerError", "StartError", "CrashLoopBackOff"].contains(&r.as_str()))
    });
    assert!(!reason.is_empty());
    let describe = c.kubectl(&["describe", "pod", "nocmd"]);
    assert!(describe.contains("no such file or directory"), "{describe}");
    assert!(describe.contains("Error: "), "{describe}");
}

/// hostNetwork pods share the node's network: their IP is the node's.
#[test]
fn a_host_network_pod_has_the_node_ip() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - {name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
"#,
    );
    c.wait("pod/hostnet", "condition=Ready", 60);
    assert_eq!(c.pod_field("hostnet", "{.status.podIP}"), "127.0.0.1");
    // Force deletion removes the object at once; the agent still stops
    // and removes the container.
    c.kubectl(&["delete", "pod", "hostnet", "--grace-period=0", "--force"]);
    wait_for(
        "the container to be removed",
        Duration::from_secs(30),
        || {
            let out = std::process::Command::new("ctr")
                .arg("--address")
                .arg(c.data_dir.join("node/containerd/containerd.sock"))
                .args(["-n", "k8s.io", "containers", "ls", "-q"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .is_empty()
                .then_some(())
        },
    );
}

/// Without a container runtime the node registers NotReady with the
/// reason, and the API keeps serving.
#[test]
fn without_containerd_the_node_is_not_ready_and_the_api_serves() {
    let c = Cluster::start(Options {
        no_wait: true,
        extra: vec![
            "--containerd-binary".into(),
            "/nonexistent/containerd".into(),
        ],
        ..Options::default()
    });
    let node = format!("node/{}", c.node());
    let message = wait_for(
        "the node to say why it is not ready",
        Duration::from_secs(30),
        || {
            let out = c.kubectl_output(&[
                "get",
                &node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].message}",
            ]);
            let m = String::from_utf8_lossy(&out.stdout).into_owned();
            m.contains("/nonexistent/containerd").then_some(m)
        },
    );
    assert!(message.contains("container runtime is down"), "{message}");
    let status = c.kubectl(&[
        "get",
        &node,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    assert_eq!(status, "False");
    assert!(c.kubectl(&["get", "namespaces"]).contains("default"));
}

/// An image tarball dropped in `<data-dir>/images/` is imported at start
/// (k3s's airgap images) and runs with imagePullPolicy Never.
#[test]
fn airgap_images_are_imported_at_start() {
    use skiff_node::images::oci::{archive, ImageConfig, Layer};
    let mut c = Cluster::start(Options::default());
    let busybox = std::fs::read("/bin/busybox").unwrap();
    let mut layer = Layer::new();
    layer.file("bin/busybox", 0o755, busybox).unwrap();
    layer.symlink("bin/sleep", "busybox").unwrap();
    let config = ImageConfig {
        env: vec!["PATH=/bin".into()],
        entrypoint: vec![],
        cmd: vec!["sleep".into(), "3600".into()],
        working_dir: None,
    };
    let tar = archive("docker.io/skiff/airgap:1", &layer, &config).unwrap();
    c.stop();
    let images = c.data_dir.join("images");
    std::fs::create_dir_all(&images).unwrap();
    std::fs::write(images.join("airgap.tar"), tar).unwrap();
    c.spawn();
    c.wait_node_ready();
    c.kubectl(&[
        "run",
        "offline",
        "--image=docker.io/skiff/airgap:1",
        "--image-pull-policy=Never",
    ]);
    c.wait("pod/offline", "condition=Ready", 60);
}

/// With --stop-pods-on-exit, stopping the server stops its pods too (by
/// default they keep running, as under a kubelet).
#[test]
fn stop_pods_on_exit_stops_the_pods() {
    let mut c = Cluster::start(Options {
        extra: vec!["--stop-pods-on-exit".into()],
        ..Options::default()
    });
    c.kubectl(&[
        "run",
        "short",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/short", "condition=Ready", 60);
    let needle = c.data_dir.display().to_string();
    let shims = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                text.contains("containerd-shim") && text.contains(&needle)
            })
            .count()
    };
    assert!(shims() > 0, "the running pod has a shim");
    c.stop();
    wait_for("the pod's shim to exit", Duration::from_secs(20), || {
        (shims() == 0).then_some(())
    });
}

/// A sandbox that dies (its pause process killed) is noticed by the
/// relist and re-created, with upstream's SandboxChanged event, and the
/// pod's containers start again in it.
#[test]
fn a_dead_sandbox_is_recreated() {
    let c = Cluster::start(Options::default());
    c.kubectl(&[
        "run",
        "phoenix",
        "--image=busybox",
        "--image-pull-policy=IfNotPresent",
        // The old container is stopped with the pod's grace period.
        "--overrides={\"spec\":{\"terminationGracePeriodSeconds\":1}}",
        "--",
        "sleep",
        "3600",
    ]);
    c.wait("pod/phoenix", "condition=Ready", 60);
    let ctr = |args: &[&str]| {
        let out = std::process::Command::new("ctr")
            .arg("--address")
            .arg(c.data_dir.join("node/containerd/containerd.sock"))
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let sandbox = ctr(&[
        "containers",
        "ls",
        "-q",
        "labels.\"io.cri-containerd.kind\"==sandbox",
    ]);
    let sandbox = sandbox.trim().to_string();
    assert!(!sandbox.is_empty(), "no sandbox");
    let pid = ctr(&["tasks", "ls"])
        .lines()
        .find(|l| l.starts_with(&sandbox))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        .expect("the sandbox's task");
    std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    wait_for("SandboxChanged", Duration::from_secs(60), || {
        c.event_reasons("phoenix")
            .iter()
            .any(|r| r == "SandboxChanged")
            .then_some(())
    });
    c.wait(
        "pod/phoenix",
        "jsonpath={.status.containerStatuses[0].restartCount}=1",
        60,
    );
    c.wait("pod/phoenix", "condition=Ready", 60);
}

/// A container whose environment names a ConfigMap that does not exist
/// waits with CreateContainerConfigError in upstream's words, and starts by
/// itself once the ConfigMap is created; values come from ConfigMaps,
/// Secrets and the pod's fields, with $(VAR) expansion.
#[test]
fn environment_from_config_maps_secrets_and_fields() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {token: hunter2}
---
apiVersion: v1
kind: Pod
metadata: {name: envy, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo color=$COLOR token=$TOKEN pod=$POD app=$APP ip=$IP greeting=$(GREETING) cm=$CM_size; sleep 3600"]
    envFrom:
    - {configMapRef: {name: settings}, prefix: CM_}
    env:
    - {name: COLOR, valueFrom: {configMapKeyRef: {name: settings, key: color}}}
    - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: "metadata.labels['app']"}}}
    - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: GREETING, value: "hello-$(POD)"}
"#,
    );
    c.wait(
        "pod/envy",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}=CreateContainerConfigError",
        60,
    );
    assert_eq!(
        c.pod_field(
            "envy",
            "{.status.containerStatuses[0].state.waiting.message}"
        ),
        "configmap \"settings\" not found"
    );
    let table = c.kubectl(&["get", "pod", "envy"]);
    assert!(table.contains("CreateContainerConfigError"), "{table}");
    c.kubectl(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=color=blue",
        "--from-literal=size=9",
    ]);
    c.wait("pod/envy", "condition=Ready", 60);
    let ip = c.pod_field("envy", "{.status.podIP}");
    let logs = wait_for("the container's output", Duration::from_secs(20), || {
        let out = c.kubectl(&["logs", "envy"]);
        (!out.is_empty()).then_some(out)
    });
    assert_eq!(
        logs,
        format!("color=blue token=hunter2 pod=envy app=web ip={ip} greeting=hello-envy cm=9\n")
    );
}

/// Init containers run one at a time, in order, before the main ones
/// (their order observed through a hostPath file); a failing one fails
/// the pod under Never and crash-loops under Always (`Init:` STATUS).
#[test]
fn init_containers_run_in_order_and_fail_as_upstream() {
    let c = Cluster::start(Options::default());
    let shared = c.dir.path().join("order");
    std::fs::create_dir_all(&shared).unwrap();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: ordered}}
spec:
  terminationGracePeriodSeconds: 0
  initContainers:
  - {{name: first, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "sleep 1; echo first >> /shared/log"], volumeMounts: [{{name: shared, mountPath: /shared}}]}}
  - {{name: second, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo second >> /shared/log"], volumeMounts: [{{name: shared, mountPath: /shared}}]}}
  containers:
  - {{name: main, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo main >> /shared/log; sleep 3600"], volumeMounts: [{{name: shared, mountPath: /shared}}]}}
  volumes:
  - {{name: shared, hostPath: {{path: {dir}}}}}
"#,
        dir = shared.display()
    ));
    let early = wait_for("Init:0/2", Duration::from_secs(30), || {
        let table = c.kubectl(&["get", "pod", "ordered"]);
        table.contains("Init:").then_some(table)
    });
    assert!(
        early.contains("Init:0/2") || early.contains("Init:1/2"),
        "{early}"
    );
    c.wait("pod/ordered", "condition=Ready", 60);
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    assert_eq!(log, "first\nsecond\nmain\n");
    assert_eq!(
        c.pod_field(
            "ordered",
            "{.status.initContainerStatuses[*].state.terminated.reason}"
        ),
        "Completed Completed"
    );
    assert_eq!(
        c.pod_field(
            "ordered",
            "{.status.conditions[?(@.type==\"Initialized\")].status}"
        ),
        "True"
    );

    for (name, policy) in [("init-never", "Never"), ("init-always", "Always")] {
        c.apply(&format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 0
  initContainers:
  - {{name: fails, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "exit 7"]}}
  containers:
  - {{name: main, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}}
"#
        ));
    }
    c.wait("pod/init-never", "jsonpath={.status.phase}=Failed", 60);
    assert_eq!(
        c.pod_field(
            "init-never",
            "{.status.initContainerStatuses[0].state.terminated.exitCode}"
        ),
        "7"
    );
    let table = c.kubectl(&["get", "pod", "init-never"]);
    assert!(table.contains("Init:Error"), "{table}");
    c.wait(
        "pod/init-always",
        "jsonpath={.status.initContainerStatuses[0].state.waiting.reason}=CrashLoopBackOff",
        60,
    );
    assert_eq!(c.pod_field("init-always", "{.status.phase}"), "Pending");
    let message = c.pod_field(
        "init-always",
        "{.status.conditions[?(@.type==\"Initialized\")].message}",
    );
    assert_eq!(message, "containers with incomplete status: [fails]");
    let table = c.kubectl(&["get", "pod", "init-always"]);
    assert!(table.contains("Init:CrashLoopBackOff"), "{table}");
}

/// A container over its memory limit is OOMKilled, reported in lastState
/// with exit code 137.
#[test]
fn a_container_over_its_memory_limit_is_oom_killed() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: hungry}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "tail /dev/zero"]
    resources: {limits: {memory: 20Mi}}
"#,
    );
    c.wait(
        "pod/hungry",
        "jsonpath={.status.containerStatuses[0].lastState.terminated.reason}=OOMKilled",
        60,
    );
    assert_eq!(
        c.pod_field(
            "hungry",
            "{.status.containerStatuses[0].lastState.terminated.exitCode}"
        ),
        "137"
    );
}

/// Running is not Ready: a readiness probe holds READY at 0/1 until it
/// passes (exec here, httpGet by named port with a tcpSocket liveness
/// probe beside it).
#[test]
fn readiness_probes_hold_ready_until_they_pass() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: slowready}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 6; touch /tmp/ready; sleep 3600"]
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: httpd
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /index.html, port: http}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
"#,
    );
    c.wait("pod/slowready", "jsonpath={.status.phase}=Running", 60);
    assert_eq!(
        c.pod_field("slowready", "{.status.containerStatuses[0].ready}"),
        "false"
    );
    let table = c.kubectl(&["get", "pod", "slowready"]);
    assert!(
        table.contains("0/1") && table.contains("Running"),
        "{table}"
    );
    c.wait("pod/slowready", "condition=Ready", 60);
    assert!(c.kubectl(&["get", "pod", "slowready"]).contains("1/1"));
    let reasons = c.event_reasons("slowready");
    assert!(reasons.iter().any(|r| r == "Unhealthy"), "{reasons:?}");
    c.wait("pod/web", "condition=Ready", 60);
    assert_eq!(
        c.pod_field("web", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
}

/// A failing liveness probe restarts the container with upstream's events;
/// a startup probe holds liveness off for a slow starter.
#[test]
fn liveness_restarts_and_startup_probes_protect_slow_starters() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: dies}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "touch /tmp/alive; sleep 2; rm /tmp/alive; sleep 3600"]
    livenessProbe:
      exec: {command: ["cat", "/tmp/alive"]}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {name: slowstart}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 4; touch /tmp/started; sleep 3600"]
    startupProbe:
      exec: {command: ["cat", "/tmp/started"]}
      periodSeconds: 1
      failureThreshold: 30
    livenessProbe:
      exec: {command: ["cat", "/tmp/started"]}
      periodSeconds: 1
      failureThreshold: 1
"#,
    );
    c.wait(
        "pod/dies",
        "jsonpath={.status.containerStatuses[0].restartCount}=1",
        60,
    );
    let describe = c.kubectl(&["describe", "pod", "dies"]);
    assert!(
        describe.contains(
            "Liveness probe failed: cat: can't open '/tmp/alive': No such file or directory"
        ),
        "{describe}"
    );
    assert!(
        describe.contains("Container c failed liveness probe, will be restarted"),
        "{describe}"
    );
    c.wait("pod/slowstart", "condition=Ready", 60);
    assert_eq!(
        c.pod_field("slowstart", "{.status.containerStatuses[0].restartCount}"),
        "0"
    );
    assert_eq!(
        c.pod_field("slowstart", "{.status.containerStatuses[0].started}"),
        "true"
    );
}

/// postStart runs after the container starts and preStop before it is
/// stopped (their order observed through a hostPath file); a failing
/// postStart kills the container with FailedPostStartHook.
#[test]
fn lifecycle_hooks_run_around_start_and_stop() {
    let c = Cluster::start(Options::default());
    let shared = c.dir.path().join("hooks");
    std::fs::create_dir_all(&shared).unwrap();
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: hooked}}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo main >> /h/log; sleep 3600"]
    volumeMounts: [{{name: h, mountPath: /h}}]
    lifecycle:
      postStart: {{exec: {{command: ["sh", "-c", "echo poststart >> /h/log"]}}}}
      preStop: {{exec: {{command: ["sh", "-c", "echo prestop >> /h/log"]}}}}
  volumes:
  - {{name: h, hostPath: {{path: {dir}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: badhook}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    lifecycle:
      postStart: {{exec: {{command: ["sh", "-c", "echo nope; exit 3"]}}}}
"#,
        dir = shared.display()
    ));
    c.wait("pod/hooked", "condition=Ready", 60);
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    assert!(log.contains("poststart") && log.contains("main"), "{log}");
    c.kubectl(&["delete", "pod", "hooked", "--timeout=40s"]);
    let log = std::fs::read_to_string(shared.join("log")).unwrap_or_default();
    assert_eq!(log.lines().last(), Some("prestop"), "{log}");

    let message = c.wait_event("badhook", "FailedPostStartHook", 60);
    assert!(
        message.starts_with("Exec lifecycle hook ([sh -c echo nope; exit 3]) for Container \"c\" in Pod \"badhook_default(")
            && message.contains("command 'sh -c echo nope; exit 3' exited with 3: nope"),
        "{message}"
    );
}

/// ConfigMap and Secret volumes: a missing ConfigMap is FailedMount with
/// the pod waiting in ContainerCreating; once it exists the files appear
/// (items, modes), and an update reaches the mounted file.
#[test]
fn config_map_and_secret_volumes() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: mounted}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: cfg, mountPath: /etc/app}
    - {name: sec, mountPath: /etc/creds, readOnly: true}
  volumes:
  - {name: cfg, configMap: {name: app, items: [{key: greeting, path: conf/greeting.txt}]}}
  - {name: sec, secret: {secretName: creds, defaultMode: 0400}}
"#,
    );
    let message = c.wait_event("mounted", "FailedMount", 30);
    assert_eq!(
        message,
        "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app\" not found"
    );
    assert!(c
        .kubectl(&["get", "pod", "mounted"])
        .contains("ContainerCreating"));
    c.kubectl(&[
        "create",
        "configmap",
        "app",
        "--from-literal=greeting=hello",
    ]);
    c.wait("pod/mounted", "condition=Ready", 60);
    let ctr_exec = |cmd: &str| {
        let id = c.pod_field("mounted", "{.status.containerStatuses[0].containerID}");
        let id = id.trim_start_matches("containerd://").to_string();
        let out = std::process::Command::new("ctr")
            .arg("--address")
            .arg(c.data_dir.join("node/containerd/containerd.sock"))
            .args([
                "-n",
                "k8s.io",
                "tasks",
                "exec",
                "--exec-id",
                &format!("t{}", std::process::id()),
                &id,
                "sh",
                "-c",
                cmd,
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(ctr_exec("cat /etc/app/conf/greeting.txt"), "hello");
    assert_eq!(ctr_exec("cat /etc/creds/password"), "s3cret");
    assert_eq!(ctr_exec("stat -L -c %a /etc/creds/password"), "400\n");
    let yaml = c.kubectl(&[
        "create",
        "configmap",
        "app",
        "--from-literal=greeting=updated",
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    c.apply(&yaml);
    wait_for(
        "the update to reach the file",
        Duration::from_secs(60),
        || (ctr_exec("cat /etc/app/conf/greeting.txt") == "updated").then_some(()),
    );
}

/// A pod past its activeDeadlineSeconds is stopped and Failed with reason
/// DeadlineExceeded.
#[test]
fn active_deadline_fails_the_pod() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: bounded}
spec:
  activeDeadlineSeconds: 3
  terminationGracePeriodSeconds: 0
  containers:
  - {name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sleep", "3600"]}
"#,
    );
    c.wait("pod/bounded", "jsonpath={.status.phase}=Failed", 60);
    assert_eq!(
        c.pod_field("bounded", "{.status.reason}"),
        "DeadlineExceeded"
    );
    assert_eq!(
        c.pod_field("bounded", "{.status.message}"),
        "Pod was active on the node longer than the specified deadline"
    );
}

/// The termination message: what the container wrote to its
/// terminationMessagePath, or, with FallbackToLogsOnError, the end of its
/// log when it failed.
#[test]
fn termination_messages_come_from_the_file_or_the_logs() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: wrote}
spec:
  restartPolicy: Never
  containers:
  - {name: c, image: busybox, imagePullPolicy: IfNotPresent, command: ["sh", "-c", "echo bye > /dev/termination-log; exit 1"]}
---
apiVersion: v1
kind: Pod
metadata: {name: logged}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo from-logs; exit 2"]
    terminationMessagePolicy: FallbackToLogsOnError
"#,
    );
    c.wait("pod/wrote", "jsonpath={.status.phase}=Failed", 60);
    c.wait("pod/logged", "jsonpath={.status.phase}=Failed", 60);
    assert_eq!(
        c.pod_field(
            "wrote",
            "{.status.containerStatuses[0].state.terminated.message}"
        ),
        "bye\n"
    );
    assert_eq!(
        c.pod_field(
            "logged",
            "{.status.containerStatuses[0].state.terminated.message}"
        ),
        "from-logs\n"
    );
}
