//! The real API server in-process for tests: a private temp dir, the
//! embedded SQLite store, a free port on loopback, the admin kubeconfig,
//! a token file (an admin and a viewer outside system:masters), optionally
//! the in-process loopback router; stopped when dropped. Every crate's
//! integration tests start their server with this.

use std::path::PathBuf;
use std::sync::Arc;

use skiff_apiserver::{ApiServer, Config};
use skiff_store::sqlite::SqliteStore;
use skiff_store::Store;
use tokio_util::sync::CancellationToken;

/// A bearer token of `system:masters`.
pub const ADMIN_TOKEN: &str = "admin-token-0123456789";
/// A token for a user outside system:masters (authenticated, not allowed).
pub const VIEWER_TOKEN: &str = "viewer-token-0123456789";

/// A running API server.
#[derive(Debug)]
pub struct TestApiServer {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The store behind it, for writing what the API would refuse.
    pub store: Arc<dyn Store>,
    /// The in-process router as `system:apiserver` (with `loopback`).
    pub loopback: Option<axum::Router>,
    /// Where in-process node agents register (see skiff_apiserver::agents).
    pub local_agents: skiff_apiserver::agents::LocalAgents,
    shutdown: CancellationToken,
}

/// How to start one.
#[derive(Debug, Default)]
pub struct Options {
    /// Keep the loopback router for the test.
    pub loopback: bool,
}

impl TestApiServer {
    /// Starts a server with 200 ms bookmarks; `configure` may change the
    /// rest of its settings.
    pub async fn start(configure: impl FnOnce(Config) -> Config, options: Options) -> Self {
        // Several rustls providers may be compiled in (feature
        // unification across the workspace); pick one for kube's client.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("tokens.csv"),
            format!("{ADMIN_TOKEN},admin,1,\"system:masters\"\n{VIEWER_TOKEN},viewer,2\n"),
        )
        .expect("token file");
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(dir.path().join("db/state.db"), Default::default())
                .expect("open store"),
        );
        let server = ApiServer::bind(
            configure(Config {
                bookmark_every: std::time::Duration::from_millis(200),
                // No ServiceAccount controller runs beside it: pods need
                // no ServiceAccount (a test may turn the plugin back on).
                disable_admission_plugins: vec!["ServiceAccount".into()],
                ..Config::new(
                    dir.path().to_path_buf(),
                    "127.0.0.1:0".parse().expect("addr"),
                )
            }),
            store.clone(),
        )
        .await
        .expect("bind API server");
        let kubeconfig = server.kubeconfig.clone();
        let loopback = options.loopback.then(|| server.loopback());
        let local_agents = server.local_agents();
        let url = format!("https://127.0.0.1:{}", server.local_addr.port());
        let shutdown = CancellationToken::new();
        let authorization = server.authorization_ready();
        tokio::spawn(server.run(shutdown.clone()));
        // The loopback is served at once; the authorizers are read by
        // then, as they are before the listener serves.
        assert!(
            authorization.wait(std::time::Duration::from_secs(60)).await,
            "authorization not loaded after 60 s"
        );
        TestApiServer {
            dir,
            kubeconfig,
            url,
            store,
            loopback,
            local_agents,
            shutdown,
        }
    }

    /// A kube client for the admin kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("read kubeconfig");
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("kube config");
        kube::Client::try_from(config).expect("kube client")
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
