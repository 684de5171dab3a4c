//! Test support: an API server started in-process on a free port with a
//! private data dir and embedded store, and the real kubectl binaries.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use skiff_apiserver::Config;
use skiff_testkit::apiserver::{Options, TestApiServer};

/// Where the versioned kubectl binaries live.
pub const KUBECTL_DIR: &str = "/usr/lib/google-cloud-sdk/bin";

#[allow(unused_imports)] // the tests that use it are in some binaries only
pub use skiff_testkit::apiserver::VIEWER_TOKEN;

/// Controllers started for a test; stopped when dropped.
pub struct Controllers(tokio_util::sync::CancellationToken);

impl Drop for Controllers {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// The shared in-process server (`dir`, `kubeconfig`, `url`, `store`,
/// `loopback`), with kubectl helpers.
pub struct TestServer {
    server: TestApiServer,
}

impl std::ops::Deref for TestServer {
    type Target = TestApiServer;
    fn deref(&self) -> &TestApiServer {
        &self.server
    }
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(|c| c).await
    }

    /// A server whose in-process loopback router is kept for the test.
    pub async fn start_loopback() -> TestServer {
        Self::start_inner(|c| c, true).await
    }

    /// Starts a server whose settings `configure` may change.
    pub async fn start_with(configure: impl FnOnce(Config) -> Config) -> TestServer {
        Self::start_inner(configure, false).await
    }

    async fn start_inner(configure: impl FnOnce(Config) -> Config, loopback: bool) -> TestServer {
        TestServer {
            server: TestApiServer::start(configure, Options { loopback }).await,
        }
    }

    /// Runs the namespace controller against this server until the guard
    /// is dropped: deleting a namespace only marks it, the controller
    /// deletes its content and finalizes it (as with upstream's
    /// kube-controller-manager), so tests that wait for a namespace to go
    /// need it.
    pub async fn namespace_controller(&self) -> Controllers {
        let stop = tokio_util::sync::CancellationToken::new();
        let config = skiff_controllers::Config {
            leader_election: None,
            controllers: vec!["namespace".into()],
            ..skiff_controllers::Config::default()
        };
        let client = self.client().await;
        tokio::spawn(skiff_controllers::ControllerManager::new(config).run(client, stop.clone()));
        Controllers(stop)
    }

    /// A kubeconfig that trusts the server but carries no credentials.
    pub fn anonymous_kubeconfig(&self) -> PathBuf {
        let path = self.dir.path().join("anonymous.kubeconfig");
        let ca = self.dir.path().join("pki/ca.crt");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
            self.url,
            ca.display()
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// A kubectl of minor version `minor` with its own cache dir.
    pub fn kubectl(&self, minor: u32) -> Kubectl {
        let cache = self.dir.path().join(format!("kubectl-cache-{minor}"));
        Kubectl {
            binary: Path::new(KUBECTL_DIR).join(format!("kubectl.1.{minor}")),
            kubeconfig: self.kubeconfig.clone(),
            cache,
        }
    }
}

/// The longest one kubectl command may take in a test.
pub const KUBECTL_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits for a kubectl task for at most [`KUBECTL_LIMIT`].
async fn bounded(args: &[&str], task: tokio::task::JoinHandle<Output>) -> Output {
    tokio::time::timeout(KUBECTL_LIMIT, task)
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in {KUBECTL_LIMIT:?}"))
        .expect("kubectl task")
}

pub struct Kubectl {
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
    pub cache: PathBuf,
}

impl Kubectl {
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        cmd
    }

    /// Runs kubectl (off the async runtime) and returns its output; a
    /// kubectl still running after [`KUBECTL_LIMIT`] fails the test.
    pub async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        bounded(
            args,
            tokio::task::spawn_blocking(move || cmd.output().expect("run kubectl")),
        )
        .await
    }

    /// Runs kubectl with `stdin` as standard input.
    pub async fn run_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut cmd = self.command(args);
        let stdin = stdin.to_string();
        let task = tokio::task::spawn_blocking(move || {
            let mut child = cmd
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn kubectl");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(stdin.as_bytes())
                .expect("write stdin");
            child.wait_with_output().expect("kubectl output")
        });
        bounded(args, task).await
    }

    /// Runs kubectl and returns stdout, failing the test on a non-zero exit.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub async fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            !out.status.success(),
            "kubectl {args:?} should have failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// How long one kubectl call of [`run`] may take.
pub const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

/// `f`, failing the test if it takes longer than [`KUBECTL_TIMEOUT`].
pub async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(KUBECTL_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| panic!("kubectl {what} did not finish in {KUBECTL_TIMEOUT:?}"))
}

/// kubectl `args` with a 30 s request timeout, within [`KUBECTL_TIMEOUT`].
pub async fn run(k: &Kubectl, args: &[&str]) -> Output {
    let mut all = vec!["--request-timeout=30s"];
    all.extend_from_slice(args);
    within(&args.join(" "), k.run(&all)).await
}

/// stdout and stderr of `out`, one after the other.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// [`run`], failing the test on a non-zero exit; returns stdout.
pub async fn ok(k: &Kubectl, args: &[&str]) -> String {
    let out = run(k, args).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// [`run`], failing the test on success; returns stderr.
pub async fn fails(k: &Kubectl, args: &[&str]) -> String {
    let out = run(k, args).await;
    assert!(
        !out.status.success(),
        "kubectl {args:?} should have failed: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// [`fails`], returning stdout and stderr.
pub async fn fails_text(k: &Kubectl, args: &[&str]) -> String {
    let out = run(k, args).await;
    assert!(
        !out.status.success(),
        "kubectl {args:?} should have failed: {}",
        text(&out)
    );
    text(&out)
}
