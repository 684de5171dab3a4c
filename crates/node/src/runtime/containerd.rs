//! The agent's own containerd: its config with every movable path under the
//! node's data dir, the child process, and its restarts.
//!
//! [`Containerd::start`] writes the config, starts `containerd --config`,
//! and waits (bounded) until CRI answers. [`Containerd::run`] then watches
//! the child: when it dies it is started again (with a back-off) and the
//! health channel says so meanwhile; on shutdown it is sent SIGTERM and
//! waited for (SIGKILL after a bound). Containers outlive it, as they
//! outlive containerd upstream: their shims are separate processes.
//!
//! It owns no pod logic and never talks CRI beyond "are you up".

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

use super::cri::CriRuntime;
use super::Runtime as _;

/// Errors starting containerd.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot write containerd's config {path}: {source}")]
    Config {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start {binary}: {source}")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("containerd exited before it was ready ({status}); see {log}")]
    Exited { status: String, log: PathBuf },
    #[error("containerd did not answer CRI within {0:?}; see its log")]
    NotReady(Duration),
    #[error(transparent)]
    Runtime(#[from] super::Error),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to run it.
#[derive(Debug, Clone)]
pub struct Config {
    /// `<data-dir>/containerd`: root, state, socket, log and config.
    pub dir: PathBuf,
    /// The containerd binary (`containerd` on PATH by default).
    pub binary: PathBuf,
    /// The pause image every sandbox runs.
    pub sandbox_image: String,
    /// Where the CNI config lives (the agent writes it there).
    pub cni_conf_dir: PathBuf,
    /// The CNI plugin binaries (Debian: /usr/lib/cni).
    pub cni_bin_dir: PathBuf,
    /// The port of CRI's streaming server (exec, attach, port-forward);
    /// 0 picks one.
    pub stream_port: u16,
    /// Registries (`host:port`) to reach over plain HTTP or without
    /// verifying their certificate (loopback ones need nothing: containerd
    /// speaks HTTP to them already).
    pub insecure_registries: Vec<String>,
}

impl Config {
    /// The defaults for a node whose data dir is `data_dir`.
    pub fn new(data_dir: &Path, sandbox_image: &str) -> Self {
        Self {
            dir: data_dir.join("containerd"),
            binary: PathBuf::from("containerd"),
            sandbox_image: sandbox_image.to_string(),
            cni_conf_dir: data_dir.join("cni").join("net.d"),
            cni_bin_dir: PathBuf::from("/usr/lib/cni"),
            stream_port: 0,
            insecure_registries: vec![],
        }
    }

    /// containerd's hosts.toml for an insecure registry.
    pub fn hosts_toml(registry: &str) -> String {
        format!(
            "server = \"http://{registry}\"\n\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n"
        )
    }

    /// containerd's gRPC socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// The running containerd's PID.
    pub fn pid_path(&self) -> PathBuf {
        self.dir.join("containerd.pid")
    }

    /// containerd's own log.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("containerd.log")
    }

    /// The TOML config, every movable path under `dir` (see
    /// ../shared/docs/containerd.md for why each setting is there).
    pub fn toml(&self) -> String {
        let d = self.dir.display();
        format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"
oom_score = 0

[grpc]
  address = "{d}/containerd.sock"

[ttrpc]
  address = "{d}/containerd.sock.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox}"
  # Required here: without CAP_SYS_RESOURCE runc cannot lower oom_score_adj
  # and every RunPodSandbox fails ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  disable_apparmor = true
  disable_hugetlb_controller = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "{stream_port}"
  max_container_log_line_size = 16384

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{d}/certs.d"
"#,
            sandbox = self.sandbox_image,
            stream_port = self.stream_port,
            cni_bin = self.cni_bin_dir.display(),
            cni_conf = self.cni_conf_dir.display(),
        )
    }
}

/// What containerd 1.6 keeps outside its root and state dirs (it cannot be
/// moved): runc's state of each container, under the CRI namespace.
pub const RUNC_STATE_DIR: &str = "/run/containerd/runc/k8s.io";

/// The shims' sockets (also fixed).
pub const SHIM_SOCKET_DIR: &str = "/run/containerd/s";

/// The socket of the shim that containerd at `containerd_socket` started
/// for `id` (a sandbox: its containers share its shim) in `namespace`, as
/// containerd's `shim.SocketAddress` names it: the SHA-256 of
/// `<address>/<namespace>/<id>`. For `skiff reset`, when the shim was
/// killed and containerd cannot remove it.
pub fn shim_socket(containerd_socket: &Path, namespace: &str, id: &str) -> PathBuf {
    use std::os::unix::ffi::OsStrExt as _;
    let key = containerd_socket.join(namespace).join(id);
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_os_str().as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Path::new(SHIM_SOCKET_DIR).join(hex)
}

/// A containerd the agent started and watches.
#[derive(Debug)]
pub struct Containerd {
    config: Config,
    child: Child,
}

/// How long a start may take before it is called failed.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long containerd gets to exit on SIGTERM before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

impl Containerd {
    /// Writes the config and starts containerd; returns once CRI answers.
    pub async fn start(config: Config) -> Result<Self> {
        for dir in [
            &config.dir,
            &config.cni_conf_dir,
            &config.dir.join("certs.d"),
        ] {
            std::fs::create_dir_all(dir).map_err(|source| Error::Config {
                path: dir.clone(),
                source,
            })?;
        }
        let path = config.dir.join("config.toml");
        std::fs::write(&path, config.toml()).map_err(|source| Error::Config {
            path: path.clone(),
            source,
        })?;
        for registry in &config.insecure_registries {
            let dir = config.dir.join("certs.d").join(registry);
            let file = dir.join("hosts.toml");
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&file, Config::hosts_toml(registry)))
                .map_err(|source| Error::Config { path: file, source })?;
        }
        let child = spawn(&config, &path)?;
        let mut this = Self { config, child };
        this.wait_ready().await?;
        Ok(this)
    }

    /// The CRI socket.
    pub fn socket(&self) -> PathBuf {
        self.config.socket()
    }

    /// The child's PID (for tests that kill it).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let cri = CriRuntime::new(self.config.socket())?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let mut delay = Duration::from_millis(20);
        loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                return Err(Error::Exited {
                    status: status.to_string(),
                    log: self.config.log_path(),
                });
            }
            if self.config.socket().exists() && cri.version().await.is_ok() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::NotReady(READY_TIMEOUT));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(250));
        }
    }

    /// Watches the child until `shutdown`: restarts it when it dies
    /// (publishing `false` on `up` until it answers again), then stops it.
    pub async fn run(mut self, up: tokio::sync::watch::Sender<bool>, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(500);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                status = self.child.wait() => {
                    let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    tracing::warn!(%status, log = %self.config.log_path().display(), "containerd exited; starting it again");
                    up.send_replace(false);
                    loop {
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        let path = self.config.dir.join("config.toml");
                        match spawn(&self.config, &path) {
                            Ok(child) => self.child = child,
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot restart containerd");
                                backoff = (backoff * 2).min(Duration::from_secs(30));
                                continue;
                            }
                        }
                        match self.wait_ready().await {
                            Ok(()) => {
                                tracing::info!("containerd is back");
                                up.send_replace(true);
                                backoff = Duration::from_millis(500);
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "containerd did not come back");
                                backoff = (backoff * 2).min(Duration::from_secs(30));
                            }
                        }
                    }
                }
            }
        }
        self.stop().await;
    }

    /// SIGTERM, then SIGKILL after [`STOP_TIMEOUT`].
    pub async fn stop(mut self) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn spawn(config: &Config, path: &Path) -> Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(config.log_path())
        .map_err(|source| Error::Config {
            path: config.log_path(),
            source,
        })?;
    let log2 = log.try_clone().map_err(|source| Error::Config {
        path: config.log_path(),
        source,
    })?;
    let child = Command::new(&config.binary)
        .arg("--config")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        // Its own process group: a Ctrl-C meant for skiff must not reach it
        // before skiff has decided how to stop.
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| Error::Spawn {
            binary: config.binary.display().to_string(),
            source,
        })?;
    // For `skiff reset` and for tests that kill it.
    if let Some(pid) = child.id() {
        let _ = std::fs::write(config.pid_path(), pid.to_string());
    }
    Ok(child)
}
