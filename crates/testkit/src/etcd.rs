//! A private etcd (Debian's `etcd-server` package) for tests and
//! benchmarks: one member ([`EtcdServer`]) or a cluster of several
//! ([`EtcdCluster`], for tests that kill a member).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// Why etcd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("etcd binary not found at {0} (install Debian's etcd-server)")]
    NotInstalled(PathBuf),
    #[error("cannot start etcd: {0}")]
    Io(#[from] std::io::Error),
    #[error("etcd did not become ready within {0:?}; its log:\n{1}")]
    NotReady(Duration, String),
}

/// A running etcd, killed (and its data removed) on drop.
#[derive(Debug)]
pub struct EtcdServer {
    child: Child,
    endpoint: String,
    dir: tempfile::TempDir,
}

const READY_TIMEOUT: Duration = Duration::from_secs(30);
const ATTEMPTS: usize = 3;

impl EtcdServer {
    /// Starts etcd on free ports and waits until it answers requests.
    pub async fn start() -> Result<Self, Error> {
        let binary =
            PathBuf::from(std::env::var("SKIFF_ETCD").unwrap_or_else(|_| "/usr/bin/etcd".into()));
        if !binary.exists() {
            return Err(Error::NotInstalled(binary));
        }
        let mut last = None;
        // A port picked as free can be taken by a parallel test before etcd
        // binds it; then etcd exits and we try new ports.
        for _ in 0..ATTEMPTS {
            match Self::try_start(&binary).await {
                Ok(server) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NotReady(READY_TIMEOUT, String::new())))
    }

    async fn try_start(binary: &PathBuf) -> Result<Self, Error> {
        let dir = tempfile::Builder::new().prefix("skiff-etcd-").tempdir()?;
        let client = free_port()?;
        let peer = free_port()?;
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log"))?;
        let child = Command::new(binary)
            .arg("--name=skiff-test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=skiff-test={peer_url}"))
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let mut server = EtcdServer {
            child,
            endpoint: client_url,
            dir,
        };
        server.wait_ready().await?;
        Ok(server)
    }

    async fn wait_ready(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut backoff = Duration::from_millis(20);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Err(Error::NotReady(READY_TIMEOUT, self.log()));
            }
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(1))
                .with_timeout(Duration::from_secs(1));
            if let Ok(mut client) =
                etcd_client::Client::connect([self.endpoint.as_str()], Some(options)).await
            {
                if client.get("/", None).await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady(READY_TIMEOUT, self.log()));
            }
            // Retry interval while polling for readiness, not a fixed wait.
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(250));
        }
    }

    /// The client URL, e.g. `http://127.0.0.1:23791`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// etcd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private etcd cluster of several members on loopback, each killed
/// (and its data removed) on drop; [`EtcdCluster::kill`] stops one with
/// SIGKILL, as a machine lost.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Option<Child>>,
    endpoints: Vec<String>,
    dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts `size` members and waits until the cluster answers through
    /// every one of them.
    pub async fn start(size: usize) -> Result<Self, Error> {
        let binary =
            PathBuf::from(std::env::var("SKIFF_ETCD").unwrap_or_else(|_| "/usr/bin/etcd".into()));
        if !binary.exists() {
            return Err(Error::NotInstalled(binary));
        }
        let mut last = None;
        for _ in 0..ATTEMPTS {
            match Self::try_start(&binary, size).await {
                Ok(cluster) => return Ok(cluster),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::NotReady(READY_TIMEOUT, String::new())))
    }

    async fn try_start(binary: &PathBuf, size: usize) -> Result<Self, Error> {
        let dir = tempfile::Builder::new()
            .prefix("skiff-etcd-cluster-")
            .tempdir()?;
        let mut ports = Vec::new();
        for _ in 0..size {
            ports.push((free_port()?, free_port()?));
        }
        let name = |i: usize| format!("m{i}");
        let initial = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("{}=http://127.0.0.1:{peer}", name(i)))
            .collect::<Vec<_>>()
            .join(",");
        let token = dir
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut cluster = EtcdCluster {
            members: Vec::new(),
            endpoints: Vec::new(),
            dir,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let client_url = format!("http://127.0.0.1:{client}");
            let peer_url = format!("http://127.0.0.1:{peer}");
            let log = std::fs::File::create(cluster.dir.path().join(format!("{}.log", name(i))))?;
            let child = Command::new(binary)
                .arg(format!("--name={}", name(i)))
                .arg(format!(
                    "--data-dir={}",
                    cluster.dir.path().join(name(i)).display()
                ))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster={initial}"))
                .arg(format!("--initial-cluster-token={token}"))
                .arg("--initial-cluster-state=new")
                .arg("--log-level=warn")
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?;
            cluster.members.push(Some(child));
            cluster.endpoints.push(client_url);
        }
        for i in 0..size {
            cluster.wait_ready(i).await?;
        }
        Ok(cluster)
    }

    async fn wait_ready(&mut self, i: usize) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut backoff = Duration::from_millis(20);
        loop {
            if let Some(Some(child)) = self.members.get_mut(i) {
                if let Ok(Some(_)) = child.try_wait() {
                    return Err(Error::NotReady(READY_TIMEOUT, self.log()));
                }
            }
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(Duration::from_secs(1))
                .with_timeout(Duration::from_secs(1));
            if let Ok(mut client) =
                etcd_client::Client::connect([self.endpoints[i].as_str()], Some(options)).await
            {
                // A linearizable read: answered only once the member is
                // part of a cluster with a leader.
                if client.get("/", None).await.is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error::NotReady(READY_TIMEOUT, self.log()));
            }
            // Retry interval while polling for readiness, not a fixed wait.
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(250));
        }
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Kills member `i` with SIGKILL (its endpoint stops answering).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members.get_mut(i).and_then(Option::take) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every member's log so far.
    pub fn log(&self) -> String {
        (0..self.endpoints.len())
            .map(|i| {
                let text = std::fs::read_to_string(self.dir.path().join(format!("m{i}.log")))
                    .unwrap_or_default();
                format!("--- m{i}\n{text}")
            })
            .collect()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut child) = member.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}
