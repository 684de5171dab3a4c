//! skiff-apiserver: the Kubernetes API server. Its modules form layers;
//! each uses only those before it in this list (`scripts/check-cycles.py`
//! fails CI on a circle):
//!
//! - [`status`] (Status errors) and [`response`] (JSON answers, the body
//!   limit);
//! - [`decode`]: bodies as their kinds' types (Go's wording), field
//!   validation;
//! - [`catalog`]: every kind the server knows: [`catalog::Resource`],
//!   [`catalog::KindDef`] and its [`catalog::Strategy`], storage hooks, and
//!   the per-server [`catalog::Catalog`] that resolves a request's
//!   [`catalog::Kind`] once;
//! - [`object`] (metadata, storage keys), [`request`] (what a URL names),
//!   [`authn`] and [`authz`] (who asks, whether they may), [`audit`] (the
//!   audit log of who asked what);
//! - [`watchcache`]: per-resource caches fed by one store watch;
//! - [`metrics`]: the server's metrics (requests, watch events, stored
//!   objects, the process) and `GET /metrics`;
//! - [`allocators`]: Service ClusterIPs and NodePorts;
//! - [`resources`]: one file per built-in kind;
//! - [`admission`]: mutating then validating plugins, one file each, over a
//!   narrow [`admission::Context`];
//! - [`customresources`]: the custom resources a server's CRDs serve (its
//!   registry, schemas, Tables, OpenAPI);
//! - [`agents`]: reaching node agents; [`bootstrap`]: what exists from the
//!   first start;
//! - [`state`]: [`AppState`], what handlers share;
//! - [`registry`]: the shared write path, deletion, finalizers, observers
//!   of stored writes, managedFields, conversion;
//! - [`crd`]: the CRD controllers; [`reviews`]: the create-only review
//!   kinds; [`rbac_defaults`]; [`discovery`], [`openapi`], [`openapi_v2`],
//!   [`protobuf`], [`table`];
//! - [`metrics_api`]: metrics.k8s.io (`kubectl top`): the scraper of
//!   the agents' resource metrics and NodeMetrics/PodMetrics;
//! - [`handlers`]: one file per verb and subresource; [`streaming`]:
//!   exec, attach and port-forward;
//! - [`serve`]: TLS (with [`serve::pki`]), HTTP/1.1 and HTTP/2, the
//!   request filters, timeouts, the panic guard, and the in-process
//!   loopback ([`ApiServer::loopback`]).
//!
//! It talks to storage only through the `skiff_store::Store` trait.

pub mod admission;
pub mod agents;
pub mod allocators;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod bootstrap;
pub mod catalog;
pub mod crd;
pub mod customresources;
pub mod decode;
pub mod discovery;
pub mod handlers;
pub mod metrics;
pub mod metrics_api;
pub mod object;
pub mod oidc;
pub mod openapi;
pub mod openapi_v2;
pub mod protobuf;
pub mod rbac_defaults;
pub mod registry;
pub mod request;
pub mod resources;
pub mod response;
pub mod reviews;
pub mod serve;
pub mod state;
pub mod status;
pub mod streaming;
pub mod table;
pub mod watchcache;

pub use state::AppState;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use serde_json::json;
use skiff_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Why the API server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad --service-cidr or --service-node-port-range, or the
    /// allocators' start failing.
    #[error("service allocation: {0}")]
    Allocators(String),
    #[error(transparent)]
    Pki(#[from] serve::pki::Error),
    #[error(transparent)]
    Tls(#[from] serve::Error),
    #[error(transparent)]
    Auth(#[from] authn::Error),
    #[error(transparent)]
    ServiceAccountKeys(#[from] authn::serviceaccount::Error),
    #[error(transparent)]
    Audit(#[from] audit::Error),
    #[error(transparent)]
    KubeletClient(#[from] agents::dial::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create system namespace {name}: {source}")]
    Bootstrap {
        name: String,
        #[source]
        source: skiff_store::Error,
    },
    #[error("cannot create default object {name}: {source}")]
    Defaults {
        name: String,
        #[source]
        source: skiff_store::Error,
    },
}

/// API server settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub bind: SocketAddr,
    /// How often watches that allow bookmarks get one (upstream: ~1 min).
    pub bookmark_every: std::time::Duration,
    /// How long a client may take to send a request.
    pub timeouts: serve::Timeouts,
    /// Where Service ClusterIPs come from (k3s' default 10.43.0.0/16).
    pub service_cidr: String,
    /// Where NodePorts come from (30000-32767).
    pub service_node_port_range: String,
    /// The address the `kubernetes` Service's endpoints give (upstream's
    /// --advertise-address); default: the bind address, or 127.0.0.1 when
    /// bound to every address.
    pub advertise_address: Option<std::net::IpAddr>,
    /// Admission plugins turned off by name (upstream's
    /// `--disable-admission-plugins`), e.g. `ServiceAccount` for a server
    /// without the ServiceAccount controller.
    pub disable_admission_plugins: Vec<String>,
    /// The audit log (`--audit-log-path` and friends); off by default.
    pub audit: audit::Options,
    /// How often the agents' resource metrics are scraped for
    /// metrics.k8s.io (metrics-server's `--metric-resolution`).
    pub metric_resolution: std::time::Duration,
    /// Whether the server records and serves metrics (default on). Off:
    /// nothing is recorded on the request path or per watch event,
    /// `/metrics` is 404 and no metrics.k8s.io usage is scraped (its
    /// NodeMetrics and PodMetrics lists are empty; `kubectl top` says
    /// metrics are not available).
    pub metrics: bool,
}

impl Config {
    pub fn new(data_dir: PathBuf, bind: SocketAddr) -> Self {
        Config {
            data_dir,
            bind,
            bookmark_every: std::time::Duration::from_secs(60),
            timeouts: serve::Timeouts::default(),
            service_cidr: allocators::DEFAULT_SERVICE_CIDR.into(),
            service_node_port_range: allocators::DEFAULT_NODE_PORT_RANGE.into(),
            advertise_address: None,
            disable_admission_plugins: Vec::new(),
            audit: audit::Options::default(),
            metric_resolution: metrics_api::DEFAULT_RESOLUTION,
            metrics: true,
        }
    }
}

/// Makes in-process clients' routers (see [`ApiServer::loopback_as`]).
#[derive(Clone)]
pub struct Loopbacks(Router);

impl std::fmt::Debug for Loopbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Loopbacks")
    }
}

impl Loopbacks {
    /// The routes as `user` in `groups` reaches them.
    pub fn as_user(&self, user: &str, groups: &[&str]) -> Router {
        self.0
            .clone()
            .layer(axum::Extension(authn::PeerUser(Some(authn::User {
                name: user.to_string(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            }))))
    }
}

/// Waits for the authorizers' first read of their policy (see
/// [`ApiServer::authorization_ready`]).
#[derive(Debug, Clone)]
pub struct AuthorizationReady {
    rbac: authz::Rbac,
    node: authz::NodeAuthorizer,
}

impl AuthorizationReady {
    /// False after `timeout`.
    pub async fn wait(&self, timeout: std::time::Duration) -> bool {
        let (rbac, node) = tokio::join!(self.rbac.ready(timeout), self.node.ready(timeout));
        rbac && node
    }
}

/// A bound, ready-to-serve API server.
#[derive(Debug)]
pub struct ApiServer {
    state: AppState,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: Router,
    /// Whether requests are audited (the listener then notes each
    /// client's address).
    audited: bool,
    pub local_addr: SocketAddr,
    pub kubeconfig: PathBuf,
    timeouts: serve::Timeouts,
    /// metrics.k8s.io's usage store, filled by its scraper in [`ApiServer::run`].
    metrics_api: metrics_api::MetricsApi,
    /// This server's lease and the `kubernetes` endpoints.
    endpoints: bootstrap::endpoint_reconciler::EndpointReconciler,
}

/// The router for `state`, auditing to `audit` when given.
pub fn router(
    state: AppState,
    tokens: Arc<authn::Tokens>,
    audit: Option<Arc<audit::Auditor>>,
    metrics_api: &metrics_api::MetricsApi,
) -> Router {
    let authorizers = state.authorizers.clone();
    let reviews = reviews::Context {
        tokens: tokens.clone(),
        authorizers: authorizers.clone(),
    };
    let filters = Arc::new(serve::filters::Filters {
        tokens,
        authorizers,
        reviews,
        audit,
        metrics: state.metrics.clone(),
    });
    let routes = match state.metrics.clone() {
        // Off: not routed, so 404 as any unknown path.
        None => Router::new(),
        Some(metrics) => {
            Router::new().route("/metrics", get(move || async move { metrics.response() }))
        }
    };
    routes
        .route("/version", get(discovery::version))
        .route("/version/", get(discovery::version))
        .route(authn::CA_CERTS_PATH, get(discovery::ca_certs))
        .route("/healthz", get(discovery::healthz))
        .route("/livez", get(discovery::healthz))
        .route("/readyz", get(discovery::healthz))
        .route("/api", get(discovery::api_versions))
        .route("/api/", get(discovery::api_versions))
        .route("/api/v1", get(discovery::core_resources))
        .route("/api/v1/", get(discovery::core_resources))
        .route("/apis", get(discovery::api_groups))
        .route("/apis/", get(discovery::api_groups))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::group_resources))
        .route("/openapi/v2", get(openapi_v2::handler))
        .route(
            "/.well-known/openid-configuration",
            get(oidc::configuration),
        )
        .route("/openid/v1/jwks", get(oidc::jwks))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/", get(openapi::index))
        .route("/openapi/v3/{*path}", get(openapi::document))
        .merge(metrics_api::handlers::routes(metrics_api.clone()))
        .fallback(handlers::dispatch)
        .layer(axum::middleware::from_fn(move |req, next| {
            serve::filters::run(filters.clone(), req, next)
        }))
        .with_state(state)
}

async fn bootstrap_system(store: &dyn Store) -> Result<(), Error> {
    let ns = resources::namespaces();
    for name in SYSTEM_NAMESPACES {
        let body = json!({
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": object::now(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        match store
            .create(
                &object::key(ns, None, name),
                serde_json::to_vec(&body).unwrap_or_default().into(),
            )
            .await
        {
            Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => {}
            Err(source) => {
                return Err(Error::Bootstrap {
                    name: name.to_string(),
                    source,
                })
            }
        }
    }
    bootstrap::flowcontrol::ensure(store)
        .await
        .map_err(|(name, source)| Error::Defaults { name, source })?;
    rbac_defaults::ensure(store)
        .await
        .map_err(|(name, source)| Error::Defaults { name, source })?;
    reviews::apiservices::sync(store, &resources::builtin().groups())
        .await
        .map_err(|source| Error::Defaults {
            name: "the local APIServices".into(),
            source,
        })?;
    Ok(())
}

impl ApiServer {
    /// Creates the PKI and token file if needed, bootstraps the system
    /// namespaces, binds the port and writes `<data-dir>/admin.kubeconfig`.
    pub async fn bind(config: Config, store: Arc<dyn Store>) -> Result<Self, Error> {
        // The `kubernetes` Service's ClusterIP (the range's first) is in
        // the serving certificate: in-cluster clients dial it.
        let service_ip = config
            .service_cidr
            .parse::<allocators::ipv4::Cidr>()
            .ok()
            .and_then(|cidr| cidr.nth(1))
            .map(std::net::IpAddr::V4);
        let pki = serve::pki::ensure_with(&config.data_dir.join("pki"), service_ip.as_slice())?;
        let tls = serve::tls_config(&pki)?;
        let token_path = config.data_dir.join("tokens.csv");
        authn::ensure_token_file(&token_path)?;
        let tokens = Arc::new(authn::Tokens::load(&token_path)?);
        let audit = audit::Auditor::start(&config.audit)?;
        bootstrap_system(store.as_ref()).await?;
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|source| Error::Listen {
                addr: config.bind,
                source,
            })?;
        let local_addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: config.bind,
            source,
        })?;
        let host = if config.bind.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            config.bind.ip().to_string()
        };
        let advertise = format!("{host}:{}", local_addr.port());
        let kubeconfig = config.data_dir.join("admin.kubeconfig");
        serve::pki::write_admin_kubeconfig(&pki, &format!("https://{advertise}"), &kubeconfig)?;
        let mut state = AppState::new(store, advertise, config.bookmark_every);
        if !config.metrics {
            state.metrics = None;
        }
        // Service-account tokens: signed with pki/sa.key, checked against
        // the watch caches.
        let (signer, keys) = authn::serviceaccount::ensure_keys(&pki.dir)?;
        let caches = state.caches.clone();
        let lookup: authn::serviceaccount::Lookup = Arc::new(move |key: &str| {
            let storage = key.strip_prefix("/registry/")?.split('/').next()?;
            let cached = caches.get(storage)?.get(key)?;
            Some((cached.revision, cached.json()?.clone()))
        });
        let service_accounts = Arc::new(authn::serviceaccount::ServiceAccounts::new(
            signer,
            keys,
            authn::serviceaccount::DEFAULT_ISSUER,
            lookup.clone(),
        ));
        state.service_accounts = Some(service_accounts.clone());
        state.ca_cert = Some(pki.ca_cert.clone().into());
        state.disabled_admission_plugins = config.disable_admission_plugins.clone().into();
        // Bootstrap tokens (joining nodes) are Secrets, read the same way.
        let tokens = Arc::new(
            (*tokens)
                .clone()
                .with_service_accounts(service_accounts)
                .with_bootstrap(Arc::new(authn::bootstrap::BootstrapTokens::new(lookup))),
        );
        let advertised = match config.advertise_address {
            Some(ip) => std::net::SocketAddr::new(ip, local_addr.port()).to_string(),
            None => state.advertise.to_string(),
        };
        state.set_allocators(
            bootstrap::start(
                state.store.as_ref(),
                &config.service_cidr,
                &config.service_node_port_range,
                &advertised,
            )
            .await?,
        );
        // Listed in the `kubernetes` endpoints from the start; the lease
        // is refreshed while the server runs.
        let endpoints = bootstrap::endpoint_reconciler::EndpointReconciler::new(
            state.store.clone(),
            bootstrap::endpoint_reconciler::Member::parse(&advertised),
        );
        if let Err(e) = endpoints.reconcile().await {
            tracing::warn!(error = %e, "the kubernetes endpoints; retrying while serving");
        }
        state.kubelet_tls = Some(agents::dial::kubelet_client_tls(
            &pki.kubelet_client_cert,
            &pki.kubelet_client_key,
        )?);
        let metrics_api = metrics_api::MetricsApi::new(config.metric_resolution);
        Ok(ApiServer {
            audited: audit.is_some(),
            router: router(state.clone(), tokens, audit, &metrics_api),
            metrics_api,
            endpoints,
            state,
            listener,
            tls,
            local_addr,
            kubeconfig,
            timeouts: config.timeouts,
        })
    }

    /// The in-process loopback: a service that answers requests with the
    /// same router (authentication, handlers, admission) as the network
    /// listener, as the privileged loopback user `system:apiserver` in
    /// `system:masters` (upstream's loopback client identity), without TCP,
    /// TLS or HTTP framing. Components that `skiff server` runs in its own
    /// process (the scheduler) talk to the API through it, e.g. with
    /// `kube::Client::new(api.loopback(), "default")`. Requests only reach
    /// it from inside the process, so the identity cannot be claimed from
    /// the network (there, `serve` sets the peer identity itself).
    pub fn loopback(&self) -> Router {
        self.loopback_as("system:apiserver", &["system:masters"])
    }

    /// The loopback as `user` in `groups`, for a component of this process
    /// that must have only its own rights (the scheduler as
    /// `system:kube-scheduler`, a node agent as `system:node:NAME`, each
    /// controller as its ServiceAccount): judged by the authorizers and
    /// admission as that user would be over the network.
    pub fn loopback_as(&self, user: &str, groups: &[&str]) -> Router {
        self.loopbacks().as_user(user, groups)
    }

    /// Makes loopbacks for any user after the server is running (the
    /// controller manager makes one per controller).
    pub fn loopbacks(&self) -> Loopbacks {
        Loopbacks(self.router.clone())
    }

    /// Tells when the authorizers have read their policy once, so that
    /// components on the loopback start with their rights in place.
    pub fn authorization_ready(&self) -> AuthorizationReady {
        AuthorizationReady {
            rbac: self.state.rbac.clone(),
            node: self.state.node_authorizer.clone(),
        }
    }

    /// The process's metrics registry, served on `/metrics`: `skiff
    /// server` registers its scheduler's and controller manager's metrics
    /// here too. None when metrics are off ([`Config::metrics`]).
    pub fn metrics_registry(&self) -> Option<skiff_metrics::Registry> {
        Some(self.state.metrics.as_ref()?.registry().clone())
    }

    /// Where node agents running in this process register, so that
    /// logs and streams reach them without TCP or TLS.
    pub fn local_agents(&self) -> agents::LocalAgents {
        self.state.local_agents.clone()
    }

    /// Serves until `shutdown` is cancelled.
    pub async fn run(self, shutdown: CancellationToken) {
        tokio::spawn(
            self.state
                .caches
                .clone()
                .run(self.state.store.clone(), shutdown.clone()),
        );
        tokio::spawn(self.state.rbac.clone().follow(
            self.state.caches.clone(),
            self.state.catalog.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(self.state.node_authorizer.clone().follow(
            self.state.caches.clone(),
            self.state.catalog.clone(),
            shutdown.clone(),
        ));
        tokio::spawn(crd::controller::run(self.state.clone(), shutdown.clone()));
        tokio::spawn(bootstrap::flowcontrol::run(
            self.state.store.clone(),
            shutdown.clone(),
        ));
        // Removes this server's lease when `shutdown` comes.
        let endpoints = tokio::spawn(self.endpoints.clone().run(shutdown.clone()));
        // metrics-server's work, only when metrics are on.
        if self.state.metrics.is_some() {
            tokio::spawn(
                self.metrics_api
                    .scraper(self.state.clone())
                    .run(shutdown.clone()),
            );
        }
        // Requests of callers outside system:masters are judged by the
        // Node authorizer and RBAC, which need their kinds read once.
        if !self
            .authorization_ready()
            .wait(std::time::Duration::from_secs(60))
            .await
        {
            tracing::warn!("authorization not loaded after 60 s; serving anyway (RBAC and the Node authorizer allow nothing until it is)");
        }
        tracing::info!(addr = %self.local_addr, "API server listening");
        serve::serve(
            self.listener,
            self.tls,
            self.router,
            self.timeouts,
            self.audited,
            shutdown,
        )
        .await;
        let _ = endpoints.await;
    }
}
