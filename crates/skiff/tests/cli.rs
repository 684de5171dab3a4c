//! The binary as a user runs it: help, version, and `skiff server` opening
//! its store and stopping cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const SKIFF: &str = env!("CARGO_BIN_EXE_skiff");

#[test]
fn help_and_version() {
    let help = Command::new(SKIFF).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    assert!(text.contains("server"), "{text}");
    let version = Command::new(SKIFF).arg("version").output().unwrap();
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap().trim(),
        format!("skiff {}", env!("CARGO_PKG_VERSION"))
    );
}

/// A mistyped controller name or an unusable cluster CIDR stops the
/// server (and `skiff controller-manager`) before it creates anything.
#[test]
fn bad_controller_flags_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    for (args, said) in [
        (
            vec![
                "server",
                "--data-dir",
                &data,
                "--controllers",
                "*,-deploymnet",
            ],
            "--controllers: \"-deploymnet\" is not a known controller",
        ),
        (
            vec![
                "server",
                "--data-dir",
                &data,
                "--cluster-cidr",
                "10.0.0.0/99",
            ],
            "--cluster-cidr 10.0.0.0/99",
        ),
        (
            vec![
                "controller-manager",
                "--kubeconfig",
                "/nonexistent",
                "--controllers",
                "nope",
            ],
            "--controllers: \"nope\" is not a known controller",
        ),
    ] {
        let out = Command::new(SKIFF).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
    }
    assert!(
        !std::path::Path::new(data).exists(),
        "the data dir was created"
    );
}

#[test]
fn server_opens_its_store_and_stops_on_sigterm() {
    let mut server = start_server();
    let data_dir = server.kubeconfig.parent().unwrap().to_path_buf();
    assert!(data_dir.join("db/state.db").exists());
    assert!(data_dir.join("admin.kubeconfig").exists());
    assert!(data_dir.join("pki/ca.crt").exists());

    // `skiff kubeconfig` prints the admin kubeconfig the server wrote.
    let printed = Command::new(SKIFF)
        .args(["kubeconfig", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(data_dir.join("admin.kubeconfig")).unwrap()
    );
    assert!(
        text.contains("client-certificate-data:") && text.contains("server: https://127.0.0.1:"),
        "{text}"
    );

    // jemalloc runs with its background threads (crates/skiff/Cargo.toml):
    // they return the pages freed while the server idles.
    let purgers = std::fs::read_dir(format!("/proc/{}/task", server.child.id()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "jemalloc_bg_thd")
        .count();
    assert!(purgers >= 1, "no jemalloc background thread");

    // A second server on the same data dir is refused with a clear error.
    let second = Command::new(SKIFF)
        .args(["server", "--https-listen-port", "0", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("in use by another process"), "{err}");

    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "server exited with {status}");
}

/// A running `skiff server`, killed on drop.
struct Running {
    child: std::process::Child,
    kubeconfig: std::path::PathBuf,
    /// The server's stderr so far (read on by a thread so its pipe stays
    /// open), shown when a command fails.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server() -> Running {
    start_server_with(&[], &[], true)
}

/// Starts `skiff server` with `env` and extra `args`; `drain` keeps
/// reading its stderr after it is up (otherwise the pipe is closed once it
/// says so).
fn start_server_with(env: &[(&str, &str)], args: &[&str], drain: bool) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let mut child = Command::new(SKIFF)
        .args([
            "server",
            "--https-listen-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            // These tests are about the control plane; the node agent's
            // are in node.rs.
            "--disable-agent",
            "--data-dir",
        ])
        .arg(&data_dir)
        .args(args)
        .env("SKIFF_LOG", "warn")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let ready = lines.by_ref().map_while(Result::ok).any(|line| {
        let ready = line.contains("skiff server is running");
        log.lock().unwrap().push(line);
        ready
    });
    assert!(ready, "the server never said it was running");
    if drain {
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
    }
    Running {
        child,
        kubeconfig: data_dir.join("admin.kubeconfig"),
        log,
        _dir: dir,
    }
}

fn kubectl(server: &Running, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    cmd.arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log.lock().unwrap().join("\n")
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Applies `yaml` with kubectl, waits for pod `pod` (namespace default)
/// to be scheduled and returns its node.
fn apply_and_wait_scheduled(server: &Running, yaml: &str, pod: &str) -> String {
    kubectl(server, &["apply", "-f", "-"], Some(yaml));
    let target = format!("pod/{pod}");
    kubectl(
        server,
        &[
            "wait",
            "--for=condition=PodScheduled",
            &target,
            "--timeout=60s",
        ],
        None,
    );
    kubectl(
        server,
        &["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"],
        None,
    )
}

/// `skiff server` schedules with the scheduler inside it (over the
/// in-process loopback): a pod created with kubectl lands on the only
/// node that fits, with the upstream event and condition, and the
/// scheduler holds the kube-scheduler Lease.
#[test]
fn server_schedules_pods_with_its_in_process_scheduler() {
    let server = start_server();
    let node = apply_and_wait_scheduled(
        &server,
        r#"
apiVersion: v1
kind: Node
metadata: {name: small, labels: {kubernetes.io/hostname: small}}
status:
  capacity: {cpu: "1", memory: 1Gi, pods: "110"}
  allocatable: {cpu: "1", memory: 1Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: big, labels: {kubernetes.io/hostname: big}}
status:
  capacity: {cpu: "8", memory: 16Gi, pods: "110"}
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - name: web
    image: registry.local/web:1
    resources: {requests: {cpu: "2"}}
"#,
        "web",
    );
    assert_eq!(node, "big");
    // The binding is acknowledged before the event is written: watch for
    // it (`-w` lists what exists first, so an event already there counts).
    let mut watch = Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "get",
            "events",
            "-w",
            "--field-selector",
            "involvedObject.name=web,reason=Scheduled",
            "-o",
            "name",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let first = BufReader::new(watch.stdout.take().unwrap())
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let _ = watch.kill();
    let _ = watch.wait();
    let name = first.trim().trim_start_matches("event/");
    assert!(!name.is_empty(), "no Scheduled event");
    let event = kubectl(
        &server,
        &[
            "get",
            "event",
            name,
            "-o",
            "jsonpath={.source.component} {.message}",
        ],
        None,
    );
    assert_eq!(
        event,
        "default-scheduler Successfully assigned default/web to big"
    );
    let holder = kubectl(
        &server,
        &[
            "-n",
            "kube-system",
            "get",
            "lease",
            "kube-scheduler",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    );
    assert!(!holder.is_empty(), "no lease holder");
}

/// `skiff scheduler --kubeconfig FILE` on its own (HTTP/2, the
/// kubeconfig's client certificate) schedules for a server started
/// without its in-process scheduler.
#[test]
fn a_separate_scheduler_process_schedules_pods() {
    let server = start_server_with(&[], &["--disable-scheduler"], true);
    let mut scheduler = Command::new(SKIFF)
        .args([
            "scheduler",
            "--leader-elect=false",
            "--secure-port=0",
            "--kubeconfig",
        ])
        .arg(&server.kubeconfig)
        .env("SKIFF_LOG", "warn")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let node = apply_and_wait_scheduled(
        &server,
        r#"
apiVersion: v1
kind: Node
metadata: {name: only, labels: {kubernetes.io/hostname: only}}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: api, namespace: default}
spec:
  containers:
  - name: api
    image: registry.local/api:1
"#,
        "api",
    );
    let _ = scheduler.kill();
    let _ = scheduler.wait();
    assert_eq!(node, "only");
}

/// With its stderr reader gone (`skiff server 2>&1 | head`), the server
/// keeps serving while it logs every request.
#[test]
fn server_keeps_serving_when_its_stderr_is_closed() {
    let server = start_server_with(&[("SKIFF_LOG", "debug")], &[], false);
    for _ in 0..3 {
        let version = kubectl(&server, &["get", "--raw", "/version"], None);
        assert!(version.contains("gitVersion"), "{version}");
    }
}

/// `skiff kubeconfig --user NAME --group G`: a kubeconfig whose client
/// certificate the server authenticates as that user in those groups,
/// allowed exactly what RBAC grants it.
#[test]
fn kubeconfig_for_a_user_is_judged_by_rbac() {
    let server = start_server();
    let data_dir = server.kubeconfig.parent().unwrap().to_path_buf();
    let minted = Command::new(SKIFF)
        .args([
            "kubeconfig",
            "--user",
            "jane",
            "--group",
            "devs",
            "--validity-period",
            "24h",
            "--data-dir",
        ])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let jane_config = dir.path().join("jane.kubeconfig");
    std::fs::write(&jane_config, &minted.stdout).unwrap();
    let jane = |args: &[&str]| {
        Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
            .arg("--kubeconfig")
            .arg(&jane_config)
            .args(args)
            .output()
            .unwrap()
    };
    let who = jane(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
    ]);
    let who = String::from_utf8_lossy(&who.stdout).into_owned();
    assert!(
        who.starts_with("jane ") && who.contains("devs") && who.contains("system:authenticated"),
        "{who}"
    );
    let denied = jane(&["get", "pods"]);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    kubectl(
        &server,
        &[
            "create",
            "rolebinding",
            "devs-view",
            "--clusterrole=view",
            "--group=devs",
        ],
        None,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !jane(&["get", "pods"]).status.success() {
        assert!(
            std::time::Instant::now() < deadline,
            "the group binding never took effect"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // The certificate's lifetime is what was asked.
    let pem = String::from_utf8_lossy(&minted.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("client-certificate-data: ")
                .map(String::from)
        })
        .unwrap();
    let pem = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, pem).unwrap();
    let (_, parsed) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    let cert = parsed.parse_x509().unwrap();
    let life = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(life, 24 * 3600 + 60, "a day, plus the minute of slack");
    // --group without --user is refused.
    let bad = Command::new(SKIFF)
        .args(["kubeconfig", "--group", "devs", "--data-dir"])
        .arg(&data_dir)
        .output()
        .unwrap();
    assert!(!bad.status.success());
}

/// `--metrics=false` (documented in both commands' help): the server
/// serves no `/metrics` (404, as any unknown path) and its
/// metrics.k8s.io has no usage, while the API keeps working.
#[test]
fn metrics_off_serves_no_metrics() {
    for command in ["server", "agent"] {
        let help = Command::new(SKIFF)
            .args([command, "--help"])
            .output()
            .unwrap();
        let text = String::from_utf8(help.stdout).unwrap();
        assert!(text.contains("--metrics <METRICS>"), "{command}: {text}");
    }
    let server = start_server_with(&[], &["--metrics=false"], true);
    let out = Command::new("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["get", "--raw", "/metrics"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "/metrics answered");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    let nodes = kubectl(
        &server,
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"],
        None,
    );
    assert!(nodes.contains(r#""items":[]"#), "{nodes}");
    kubectl(&server, &["get", "namespaces"], None);
}
