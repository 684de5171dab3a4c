//! A real `skiff server` process for benchmarks (the release binary
//! beside this one), and small helpers for talking to it and measuring it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::{json, Value};

pub struct Server {
    pub child: Child,
    _dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

/// How long a stopped server has to stop its node agent and the
/// containerd that agent runs before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(20);

impl Drop for Server {
    /// SIGTERM first, so the server stops its agent's containerd (a
    /// SIGKILL left one running per benchmark run), then SIGKILL.
    fn drop(&mut self) {
        stop_child(&mut self.child, STOP_GRACE);
    }
}

/// Stops a `skiff server` (or any child) by PID: SIGTERM, then SIGKILL
/// if it is still there after `grace`.
pub fn stop_child(child: &mut Child, grace: Duration) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "pid {} ignored SIGTERM for {grace:?}; killing it",
        child.id()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// CPU seconds (user + system) a process has used, from /proc.
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat (11 and 12 after ')').
    (ticks(11) + ticks(12)) / 100.0
}

/// Resident memory now (VmRSS) of a process in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `/proc/PID/status` figure in KiB (0 when unreadable).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Starts `skiff server` with `extra` flags and waits until it answers.
pub async fn start_server(extra: &[&str]) -> anyhow::Result<(Server, Client)> {
    let exe = std::env::current_exe()?;
    let skiff = exe.parent().unwrap_or(Path::new(".")).join("skiff");
    start_server_binary(&skiff, extra).await
}

/// Starts the `skiff` binary at `skiff` (e.g. a baseline build) as
/// [`start_server`] does.
pub async fn start_server_binary(skiff: &Path, extra: &[&str]) -> anyhow::Result<(Server, Client)> {
    start_server_prepared(skiff, extra, |_| Ok(())).await
}

/// [`start_server_binary`], with `prepare` run on the data dir before the
/// server starts (e.g. to write its `tokens.csv`).
pub async fn start_server_prepared(
    skiff: &Path,
    extra: &[&str],
    prepare: impl FnOnce(&Path) -> std::io::Result<()>,
) -> anyhow::Result<(Server, Client)> {
    anyhow::ensure!(
        skiff.exists(),
        "{} not found: cargo build --release -p skiff",
        skiff.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("skiff-bench-api-")
        .tempdir()?;
    prepare(dir.path())?;
    let port = skiff_testkit::free_port()?;
    let child = Command::new(skiff)
        .args([
            "server",
            "--bind-address",
            "127.0.0.1",
            "--https-listen-port",
            &port.to_string(),
            "--data-dir",
        ])
        .arg(dir.path())
        .args(extra)
        .env("SKIFF_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("SKIFF_BENCH_SERVER_LOG") {
            Some(p) => Stdio::from(std::fs::File::create(p)?),
            None => Stdio::null(),
        })
        .spawn()?;
    let kubeconfig = dir.path().join("admin.kubeconfig");
    let server = Server {
        child,
        _dir: dir,
        kubeconfig,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if server.kubeconfig.exists() {
            let kc = Kubeconfig::read_from(&server.kubeconfig)?;
            let config =
                kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
            let client = Client::try_from(config)?;
            if client.apiserver_version().await.is_ok() {
                return Ok((server, client));
            }
        }
        anyhow::ensure!(Instant::now() < deadline, "skiff server did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn request(method: &str, uri: &str, body: Option<&Value>) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(
            body.map(|b| serde_json::to_vec(b).unwrap_or_default())
                .unwrap_or_default(),
        )
        .expect("request")
}

pub async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    client
        .request_text(request("POST", "/api/v1/namespaces", Some(&ns)))
        .await?;
    // Pods need their ServiceAccount (the ServiceAccount admission
    // plugin); the benchmarks' servers may run without the controller
    // that makes it.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    let made = client
        .request_text(request(
            "POST",
            &format!("/api/v1/namespaces/{name}/serviceaccounts"),
            Some(&sa),
        ))
        .await;
    match made {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other.map(drop).map_err(Into::into),
    }
}

/// The path of a binary built beside this one.
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.parent().unwrap_or(Path::new(".")).join(name);
    anyhow::ensure!(
        path.exists(),
        "{} not found: cargo build --release -p skiff",
        path.display()
    );
    Ok(path)
}

/// The skiff binary a benchmark runs: `--skiff` if given, else the one
/// beside skiff-bench; checked to exist, made absolute.
pub fn skiff_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let skiff = match given {
        Some(p) => p.to_path_buf(),
        None => sibling("skiff")?,
    };
    anyhow::ensure!(skiff.exists(), "{} not found", skiff.display());
    Ok(std::path::absolute(skiff)?)
}
