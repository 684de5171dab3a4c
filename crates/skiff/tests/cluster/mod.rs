//! A real single-node cluster for end-to-end tests: `skiff server` (the
//! binary under test) with its own data dir, containerd, bridge, pod CIDR
//! and ports, driven with the real kubectl. Dropping it stops the server by
//! PID and runs `skiff reset` on its data dir, which removes its pods,
//! containerd state, bridge and CNI state.

#![allow(dead_code)] // each test binary uses a part of it

pub mod hosts;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SKIFF: &str = env!("CARGO_BIN_EXE_skiff");
pub const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// A /16 of 10.0.0.0/8 held by one test (a lock file per range, so tests
/// running at once never share a subnet or routes).
pub struct CidrLease {
    pub octet: u8,
    lock: PathBuf,
}

impl CidrLease {
    pub fn take() -> Self {
        let dir = Path::new("/tmp/skiff-test-cidrs");
        std::fs::create_dir_all(dir).unwrap();
        // Why the ranges were not taken (the first few), for the panic.
        let mut refused: Vec<String> = Vec::new();
        for octet in 100..=250u8 {
            let lock = dir.join(format!("10.{octet}.lock"));
            let mine = std::process::id().to_string();
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    f.write_all(mine.as_bytes()).unwrap();
                    return Self { octet, lock };
                }
                Err(e) => {
                    // A lock left by a process that is gone is free.
                    let owner = std::fs::read_to_string(&lock).unwrap_or_default();
                    if refused.len() < 5 {
                        refused.push(format!("10.{octet}: {e} (held by {owner:?})"));
                    }
                    if !owner.is_empty() && !Path::new(&format!("/proc/{}", owner.trim())).exists()
                    {
                        let _ = std::fs::remove_file(&lock);
                    }
                }
            }
        }
        panic!(
            "no free test pod CIDR in 10.100-250.0.0/16 (I am {}); first refusals: {refused:?}",
            std::process::id()
        );
    }

    /// The pod network: the lower half of the /16.
    pub fn cidr(&self) -> String {
        format!("10.{}.0.0/17", self.octet)
    }

    /// The Service range: the upper half, so that clusters running at
    /// once never share a ClusterIP (nor the cluster DNS address).
    pub fn service_cidr(&self) -> String {
        format!("10.{}.128.0/17", self.octet)
    }

    /// The cluster DNS address (the Service range's 10th).
    pub fn cluster_dns(&self) -> String {
        format!("10.{}.128.10", self.octet)
    }
}

impl Drop for CidrLease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// How to start one.
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub taint_control_plane: bool,
    pub disable_agent: bool,
    /// Do not wait for the node to be Ready.
    pub no_wait: bool,
    pub extra: Vec<String>,
    /// Start the server as systemd starts a unit's main process: in its own
    /// process group and in this (cgroup v2) cgroup, which its children
    /// (containerd, the shims) inherit; the test can then stop it as
    /// `systemctl stop` does with `KillMode=control-group`.
    pub cgroup: Option<PathBuf>,
    /// The node's IP (default 127.0.0.1; node ports do not answer on
    /// loopback).
    pub node_ip: Option<String>,
    /// The API server's --bind-address (default 127.0.0.1).
    pub bind_address: Option<String>,
}

/// A running cluster.
pub struct Cluster {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub data_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub bridge: String,
    pub kubelet_port: u16,
    pub options: Options,
    pub log: Arc<Mutex<Vec<String>>>,
    pub cidr: CidrLease,
}

/// Stops a child process with SIGTERM and waits for it, with SIGKILL
/// after 40 s (a stuck stop never hangs a test).
pub fn stop_child(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(40);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        // A poll interval while waiting for the exit, not a fixed wait.
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` every 100 ms until it gives a value, failing after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_for_explained(what, timeout, f, String::new)
}

/// The venv with the Python `kubernetes` client (scripts/deps.sh makes
/// it; `SKIFF_PYTHON` names its python instead), for pods that mount it
/// with the host's Python.
pub fn python_venv() -> PathBuf {
    let venv: PathBuf = std::env::var("SKIFF_PYTHON")
        .map(|p| {
            Path::new(&p)
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"))
                .to_path_buf()
        })
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    std::fs::canonicalize(&venv).expect("the .venv of scripts/deps.sh")
}

/// [`wait_for`], failing with what `explain` says then (a log).
pub fn wait_for_explained<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    explain: impl Fn() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}{}",
            explain()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A scenario of a shared cluster: its name and what it does.
pub type Scenario<E> = (&'static str, fn(&E));

/// Runs each scenario on its own thread against `env` and fails with
/// every scenario that failed, by name.
pub fn run_scenarios<E: Sync>(env: &E, scenarios: &[Scenario<E>]) {
    let failures: Vec<String> = std::thread::scope(|s| {
        let running: Vec<_> = scenarios
            .iter()
            .map(|(name, f)| (name, s.spawn(move || f(env))))
            .collect();
        running
            .into_iter()
            .filter_map(|(name, handle)| {
                handle.join().err().map(|e| {
                    let why = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    format!("{name}: {why}")
                })
            })
            .collect()
    });
    assert!(
        failures.is_empty(),
        "scenarios failed:\n{}",
        failures.join("\n\n")
    );
}

impl Cluster {
    pub fn start(options: Options) -> Self {
        Self::start_with(options, CidrLease::take())
    }

    /// [`Cluster::start`] on a range the caller took (to set up the
    /// host around it first).
    pub fn start_with(options: Options, cidr: CidrLease) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let bridge = format!("sk{}", cidr.octet);
        let kubelet_port = free_port();
        let mut c = Self {
            child: None,
            dir,
            data_dir,
            kubeconfig: PathBuf::new(),
            bridge,
            kubelet_port,
            options,
            log: Arc::default(),
            cidr,
        };
        c.kubeconfig = c.data_dir.join("admin.kubeconfig");
        c.spawn();
        if !c.options.disable_agent && !c.options.no_wait {
            c.wait_node_ready();
        }
        c
    }

    /// The node's name (tests run it under a fixed one).
    pub fn node(&self) -> String {
        format!("node-{}", self.cidr.octet)
    }

    /// Starts (or restarts) the server process.
    pub fn spawn(&mut self) {
        let mut cmd = Command::new(SKIFF);
        cmd.args([
            "server",
            "--https-listen-port",
            "0",
            "--bind-address",
            self.options.bind_address.as_deref().unwrap_or("127.0.0.1"),
        ])
        .arg("--data-dir")
        .arg(&self.data_dir)
        .args(["--cluster-cidr", &self.cidr.cidr()])
        .args(["--service-cidr", &self.cidr.service_cidr()])
        .args(["--bridge-name", &self.bridge])
        .args(["--kubelet-port", &self.kubelet_port.to_string()])
        .args([
            "--node-ip",
            self.options.node_ip.as_deref().unwrap_or("127.0.0.1"),
        ])
        .args(["--node-name", &self.node()])
        .args(&self.options.extra)
        .env("SKIFF_LOG", "info,kube=warn,tower=warn,hyper=warn,h2=warn")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
        if self.options.taint_control_plane {
            cmd.arg("--taint-control-plane");
        }
        if self.options.disable_agent {
            cmd.arg("--disable-agent");
        }
        if let Some(cgroup) = &self.options.cgroup {
            // sh joins the cgroup, then becomes the server (same PID).
            let mut wrapped = Command::new("sh");
            wrapped
                .arg("-c")
                .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
                .arg(cgroup)
                .arg(SKIFF)
                .args(cmd.get_args())
                .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
                .stdin(Stdio::null())
                .stderr(Stdio::piped());
            // Its own process group (PGID = its PID), as a unit's.
            std::os::unix::process::CommandExt::process_group(&mut wrapped, 0);
            cmd = wrapped;
        }
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = self.log.clone();
        let ready = lines.by_ref().map_while(Result::ok).any(|line| {
            let ready = line.contains("skiff server is running");
            log.lock().unwrap().push(line);
            ready
        });
        assert!(
            ready,
            "the server never said it was running:\n{}",
            self.log_text()
        );
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                log.lock().unwrap().push(line);
            }
        });
        self.child = Some(child);
    }

    /// The server address and the token file of the join command the
    /// server printed (`skiff agent --server URL --token-file FILE`).
    pub fn printed_join(&self) -> (String, PathBuf) {
        // The banner's later lines are read after the server said it runs.
        let line = wait_for("the printed join command", Duration::from_secs(10), || {
            self.log_text()
                .lines()
                .find(|l| l.contains("skiff agent --server "))
                .map(String::from)
        });
        let after = |flag: &str| {
            line.split_whitespace()
                .skip_while(|w| *w != flag)
                .nth(1)
                .unwrap_or_else(|| panic!("no {flag} in {line:?}"))
                .to_string()
        };
        (after("--server"), PathBuf::from(after("--token-file")))
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Fails if the server refused one of the cluster's own components
    /// (the scheduler, a controller, the node agent: users named
    /// `system:…`) anything: a gap in the bootstrap roles.
    pub fn assert_no_component_refused(&self) {
        let refused: Vec<String> = self
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("system user refused"))
            .cloned()
            .collect();
        assert!(
            refused.is_empty(),
            "components were refused:\n{}",
            refused.join("\n")
        );
    }

    /// Stops the server with SIGTERM and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(40);
            loop {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn kubectl_output(&self, args: &[&str]) -> Output {
        Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// kubectl, which must succeed; its stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_output(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_text()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) {
        let mut child = Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(yaml.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A jsonpath of pod `name`.
    pub fn pod_field(&self, name: &str, path: &str) -> String {
        let out = self.kubectl_output(&["get", "pod", name, "-o", &format!("jsonpath={path}")]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until `kubectl wait --for=...` on `target` succeeds.
    pub fn wait(&self, target: &str, condition: &str, timeout_s: u32) {
        self.kubectl(&[
            "wait",
            &format!("--for={condition}"),
            target,
            &format!("--timeout={timeout_s}s"),
        ]);
    }

    pub fn wait_node_ready(&self) {
        let node = format!("node/{}", self.node());
        // The server's log says why (containerd, CNI, registration).
        wait_for_explained(
            "the node to register",
            Duration::from_secs(60),
            || {
                self.kubectl_output(&["get", &node])
                    .status
                    .success()
                    .then_some(())
            },
            || format!("; server log:\n{}", self.log_text()),
        );
        self.wait(&node, "condition=Ready", 60);
    }

    /// The event reasons of pod `name`, oldest first.
    pub fn event_reasons(&self, name: &str) -> Vec<String> {
        let out = self.kubectl(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "--sort-by=.metadata.creationTimestamp",
            "-o",
            "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}",
        ]);
        out.lines().map(str::to_string).collect()
    }

    /// Waits until pod `pod` has an event with `reason`; the messages of
    /// those events.
    pub fn wait_event(&self, pod: &str, reason: &str, timeout_s: u64) -> String {
        let selector = format!("involvedObject.name={pod},reason={reason}");
        wait_for(reason, Duration::from_secs(timeout_s), || {
            let out = self.kubectl(&[
                "get",
                "events",
                "--field-selector",
                &selector,
                "-o",
                "jsonpath={.items[*].message}",
            ]);
            (!out.is_empty()).then_some(out)
        })
    }

    /// The containerd the node runs (its PID).
    pub fn containerd_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.data_dir.join("node/containerd/containerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        let out = Command::new(SKIFF)
            .arg("reset")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--bridge-name", &self.bridge])
            .output();
        if let Ok(out) = out {
            if !out.status.success() {
                eprintln!(
                    "skiff reset failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// An HTTP GET over plain TCP; the body, or the error.
pub fn http_get(addr: &str, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(
        &addr.parse().map_err(|e| format!("{addr}: {e}"))?,
        Duration::from_secs(2),
    )
    .map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

// ------------------------------------------------------------ users

/// `kubectl --kubeconfig CONFIG ARGS`: what a user of that kubeconfig gets.
pub fn kubectl_as(config: &Path, args: &[&str]) -> Output {
    Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

/// The client certificate and key of a kubeconfig, written to files in
/// `dir` (for curl).
pub fn cert_files(config: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let field = |name: &str| {
        let out = kubectl_as(
            config,
            &[
                "config",
                "view",
                "--raw",
                "-o",
                &format!("jsonpath={{.users[0].user.{name}}}"),
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(String::from_utf8_lossy(&out.stdout).trim())
            .unwrap()
    };
    let stem = config.file_stem().unwrap().to_string_lossy().into_owned();
    let (crt, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&crt, field("client-certificate-data")).unwrap();
    std::fs::write(&key, field("client-key-data")).unwrap();
    (crt, key)
}

impl Cluster {
    /// A kubeconfig with a client certificate for `user` in `groups`,
    /// minted by `skiff kubeconfig`, written to `dir`.
    pub fn mint(&self, dir: &Path, user: &str, groups: &[&str]) -> PathBuf {
        let mut cmd = Command::new(SKIFF);
        cmd.args(["kubeconfig", "--user", user, "--data-dir"])
            .arg(&self.data_dir);
        for g in groups {
            cmd.args(["--group", g]);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = dir.join(format!("{}.kubeconfig", user.replace(':', "_")));
        std::fs::write(&path, &out.stdout).unwrap();
        path
    }

    /// GET on the agent's HTTPS endpoint with a client certificate:
    /// (status, body).
    pub fn agent_get(&self, path: &str, (crt, key): &(PathBuf, PathBuf)) -> (String, String) {
        let out = Command::new("curl")
            .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}", "--cert"])
            .arg(crt)
            .arg("--key")
            .arg(key)
            .arg(format!("https://127.0.0.1:{}{path}", self.kubelet_port))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.to_string(), body.to_string())
    }
}
