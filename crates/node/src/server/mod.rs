//! The agent's HTTPS endpoint (the kubelet's server on port 10250), which
//! the API server proxies `pods/log`, `pods/exec`, `pods/attach` and
//! `pods/portforward` to:
//!
//! `GET /containerLogs/{namespace}/{pod}/{container}` with PodLogOptions
//! in the query (`follow`, `previous`, `tailLines`, `timestamps`,
//! `sinceSeconds`, `sinceTime`, `limitBytes`; the legacy `tail` too),
//! answered from the CRI log files under the log root, with the kubelet's
//! statuses and words for what is missing; and `/exec`, `/attach`,
//! `/portForward` ([`streaming`]), upgrades proxied to the runtime's
//! streaming server; `/metrics` and `/metrics/resource` from
//! [`crate::metrics`].
//!
//! Clients must present a certificate signed by the cluster's client CA
//! (the API server's kubelet-client certificate): without one the TLS
//! handshake fails. The serving certificate is the agent's own
//! ([`tls`]). An API server in the same process reaches it through
//! [`Server::local_endpoint`] instead: in-memory pipes served by the same
//! routes, or the routes themselves, without TCP or TLS (nothing outside
//! the process can reach them). Binding ([`bind`]) is apart from serving ([`Server::run`]),
//! so a port in use is an error before anything runs.
//!
//! It reads log files only through [`crate::logs`] and asks the agent
//! which pods it has through [`ServerConfig::lookup`]; it must not reach
//! into the pod workers; the runtime it reaches only through the
//! [`crate::runtime::Runtime`] trait, for streaming.

pub mod authz;
pub mod streaming;
pub mod tls;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::logs::{self, Follow, LogOptions};

/// The kubelet's port.
pub const DEFAULT_PORT: u16 = 10250;

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tls(#[from] tls::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the agent knows of a pod it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogInfo {
    pub uid: String,
    /// Every container the spec names (init, regular, ephemeral).
    pub containers: Vec<String>,
    /// Those whose spec asks for a TTY (an attach uses the container's).
    pub tty_containers: Vec<String>,
}

/// `(namespace, name)` to the pod the agent runs under that name.
pub type PodLookup = Arc<dyn Fn(&str, &str) -> Option<PodLogInfo> + Send + Sync>;

/// `(pod uid, container)`: whether that container is running now.
pub type ContainerRunning = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The endpoint's settings.
#[derive(Clone)]
pub struct ServerConfig {
    /// Where to listen (`0.0.0.0:10250` by default for an agent).
    pub addr: SocketAddr,
    /// Where the serving certificate is kept (made if absent).
    pub pki_dir: PathBuf,
    /// The CA (PEM) whose client certificates are let in.
    pub client_ca_pem: String,
    /// The CRI log root (`<root>/<ns>_<pod>_<uid>/<container>/<n>.log`).
    pub log_root: PathBuf,
    /// The node's name, for the serving certificate.
    pub node_name: String,
    /// More addresses for the serving certificate (the node's IPs).
    pub serving_ips: Vec<IpAddr>,
    /// The pods the agent runs; without it, pods are found by scanning
    /// the log root for `<ns>_<pod>_*`.
    pub lookup: Option<PodLookup>,
    /// Whether a container still runs, so a follow ends with it; without
    /// it a follow ends on a newer restart's file or the client leaving.
    pub running: Option<ContainerRunning>,
    /// How often a follow looks for more output.
    pub follow_poll: Duration,
    /// The runtime, for exec, attach and port-forward; until it is set
    /// they answer that the runtime is not ready.
    pub runtime: streaming::RuntimeSlot,
    /// Who may call from the network ([`authz`]); without it, any client
    /// certificate the CA signed.
    pub authorizer: Option<Arc<authz::Authorizer>>,
    /// `/metrics` and `/metrics/resource` ([`crate::metrics`]); without
    /// it they are 404.
    pub metrics: Option<Arc<crate::metrics::Endpoint>>,
}

impl ServerConfig {
    pub fn new(
        node_name: impl Into<String>,
        addr: SocketAddr,
        pki_dir: PathBuf,
        client_ca_pem: String,
        log_root: PathBuf,
    ) -> Self {
        ServerConfig {
            addr,
            pki_dir,
            client_ca_pem,
            log_root,
            node_name: node_name.into(),
            serving_ips: Vec::new(),
            lookup: None,
            running: None,
            follow_poll: Follow::default().poll,
            runtime: streaming::RuntimeSlot::default(),
            authorizer: None,
            metrics: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("addr", &self.addr)
            .field("pki_dir", &self.pki_dir)
            .field("log_root", &self.log_root)
            .field("node_name", &self.node_name)
            .field("serving_ips", &self.serving_ips)
            .field("lookup", &self.lookup.as_ref().map(|_| "Fn"))
            .field("running", &self.running.as_ref().map(|_| "Fn"))
            .field("follow_poll", &self.follow_poll)
            .field("runtime", &self.runtime.get())
            .field("authorizer", &self.authorizer)
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

/// A bound endpoint, ready to serve.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    local_addr: SocketAddr,
}

/// What every request handler reads.
struct Shared {
    config: ServerConfig,
    /// Ends follows when the endpoint shuts down.
    shutdown: CancellationToken,
    /// How many log streams are being read out now.
    streams: tokio::sync::watch::Sender<usize>,
    /// How many exec/attach/port-forward sessions are spliced now.
    sessions: tokio::sync::watch::Sender<usize>,
}

/// Counts a log stream while it is read out.
struct StreamCount(tokio::sync::watch::Sender<usize>);

impl StreamCount {
    fn new(streams: &tokio::sync::watch::Sender<usize>) -> Self {
        streams.send_modify(|n| *n += 1);
        StreamCount(streams.clone())
    }
}

impl Drop for StreamCount {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish()
    }
}

/// Makes (or loads) the serving certificate and binds the port.
pub async fn bind(config: ServerConfig) -> Result<Server> {
    let mut ips = config.serving_ips.clone();
    ips.push(config.addr.ip());
    let (cert, key) = tls::ensure_serving_cert(&config.pki_dir, &config.node_name, &ips)?;
    let tls = tls::server_config(&cert, &key, &config.client_ca_pem)?;
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|source| Error::Listen {
            addr: config.addr,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| Error::Listen {
        addr: config.addr,
        source,
    })?;
    Ok(Server {
        listener,
        tls,
        shared: Arc::new(Shared {
            config,
            shutdown: CancellationToken::new(),
            streams: tokio::sync::watch::Sender::new(0),
            sessions: tokio::sync::watch::Sender::new(0),
        }),
        local_addr,
    })
}

/// Binds, then serves until `shutdown` is cancelled.
pub async fn serve(config: ServerConfig, shutdown: CancellationToken) -> Result<()> {
    bind(config).await?.run(shutdown).await;
    Ok(())
}

/// How long a client has for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Server {
    /// The address it listens on (the port when bound to `:0`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many log streams (follows, mostly) are being read out: one
    /// ends when its file ends or its client goes away.
    pub fn streams(&self) -> tokio::sync::watch::Receiver<usize> {
        self.shared.streams.subscribe()
    }

    /// How many exec, attach and port-forward sessions are spliced now:
    /// one ends when either side closes its connection.
    pub fn sessions(&self) -> tokio::sync::watch::Receiver<usize> {
        self.shared.sessions.subscribe()
    }

    /// Serves until `shutdown` is cancelled; follows and streaming
    /// sessions in progress end then.
    pub async fn run(self, shutdown: CancellationToken) {
        let Server {
            listener,
            tls,
            shared,
            local_addr,
        } = self;
        let _stop_follows = shared.shutdown.clone().drop_guard();
        tracing::info!(addr = %local_addr, "node server listening");
        let acceptor = TlsAcceptor::from(tls);
        let app = router(shared.clone());
        loop {
            let (stream, peer) = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                },
            };
            let (acceptor, app, shutdown) = (acceptor.clone(), app.clone(), shutdown.clone());
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                let tls =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            return;
                        }
                    };
                // The caller the client certificate names, judged by
                // `authz` on each request.
                let caller = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|certs| certs.first())
                    .map(|cert| authz::Caller::of_certificate(cert.as_ref()))
                    .unwrap_or(authz::Caller {
                        user: String::new(),
                        groups: Vec::new(),
                    });
                let app = app.layer(axum::Extension(caller));
                serve_connection(tls, app, shutdown, &peer.to_string()).await;
            });
        }
    }

    /// This endpoint for an API server in the same process (`skiff
    /// server`): a dialer of in-memory connections and the routes
    /// themselves, both served until `shutdown`.
    pub fn local_endpoint(&self, shutdown: CancellationToken) -> LocalEndpoint {
        LocalEndpoint {
            dial: self.local_dialer(shutdown.clone()),
            router: router(self.shared.clone()),
            stopped: shutdown,
        }
    }

    /// Connections to this endpoint from inside the process: each call
    /// gives one end of a new in-memory pipe whose other end is served by
    /// the same routes as the network listener until `shutdown`; `None`
    /// once it is cancelled. Streams through it skip a TLS encryption and
    /// decryption per byte each way.
    pub fn local_dialer(&self, shutdown: CancellationToken) -> LocalDial {
        let app = router(self.shared.clone());
        Arc::new(move || {
            if shutdown.is_cancelled() {
                return None;
            }
            let (ours, theirs) = tokio::io::duplex(LOCAL_PIPE_BYTES);
            let (app, shutdown) = (app.clone(), shutdown.clone());
            tokio::spawn(async move { serve_connection(ours, app, shutdown, "in-process").await });
            Some(theirs)
        })
    }
}

/// Opens an in-process connection to a node agent's endpoint (see
/// [`Server::local_dialer`]).
pub type LocalDial = Arc<dyn Fn() -> Option<tokio::io::DuplexStream> + Send + Sync>;

/// The endpoint as an API server in the same process reaches it.
#[derive(Clone)]
pub struct LocalEndpoint {
    /// In-memory connections (logs).
    pub dial: LocalDial,
    /// The routes, for requests handed over whole: an upgrade request
    /// that carries the client's own pending upgrade is answered here and
    /// the client's connection spliced straight to the runtime.
    pub router: Router,
    /// Cancelled when the endpoint shuts down.
    pub stopped: CancellationToken,
}

impl std::fmt::Debug for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEndpoint")
            .field("stopped", &self.stopped.is_cancelled())
            .finish()
    }
}

/// Bytes an in-process pipe holds each way (a streaming splice moves up
/// to 64 KiB at a time).
const LOCAL_PIPE_BYTES: usize = 256 * 1024;

/// Serves HTTP/1.1 (with upgrades) or HTTP/2 on `io` until it ends or
/// `shutdown`.
async fn serve_connection<I>(io: I, app: Router, shutdown: CancellationToken, peer: &str)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(app);
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::select! {
        result = conn => if let Err(e) = result {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        },
        _ = shutdown.cancelled() => {}
    }
}

fn router(shared: Arc<Shared>) -> Router {
    let authorizer = shared.config.authorizer.clone();
    let mut app = Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .merge(streaming::routes());
    if let Some(metrics) = shared.config.metrics.clone() {
        app = app.merge(crate::metrics::routes(metrics));
    }
    let app = app
        .fallback(|| async { text(StatusCode::NOT_FOUND, "404 page not found\n") })
        .with_state(shared);
    match authorizer {
        Some(a) => app.layer(axum::middleware::from_fn(move |req, next| {
            authz::check(a.clone(), req, next)
        })),
        None => app,
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// A query the kubelet refuses, with its status and words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// PodLogOptions from the query, as the kubelet decodes and validates
/// them: booleans are true unless `0`/`false`, `tail=N` (or `all`) is the
/// old name of tailLines; a number that does not parse is a 400, a
/// negative tailLines or a limitBytes/sinceSeconds below 1 (or both
/// since forms) a 422.
pub fn parse_query(
    pairs: &[(String, String)],
    now: DateTime<Utc>,
) -> Result<(LogOptions, bool), Refusal> {
    let mut first: HashMap<&str, &str> = HashMap::new();
    for (k, v) in pairs {
        first.entry(k.as_str()).or_insert(v.as_str());
    }
    if let Some(tail) = first.get("tail").copied().filter(|t| !t.is_empty()) {
        if tail == "all" {
            first.remove("tailLines");
        } else {
            first.insert("tailLines", tail);
        }
    }
    let undecodable = || {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            r#"{"message": "Unable to decode query."}"#,
        )
    };
    let invalid = || {
        Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"message": "Invalid request."}"#,
        )
    };
    let flag = |name: &str| {
        first
            .get(name)
            .is_some_and(|v| !(*v == "0" || v.eq_ignore_ascii_case("false")))
    };
    let int = |name: &str| -> Result<Option<i64>, Refusal> {
        first
            .get(name)
            .map(|v| v.parse::<i64>().map_err(|_| undecodable()))
            .transpose()
    };
    let tail_lines = int("tailLines")?;
    let limit_bytes = int("limitBytes")?;
    let since_seconds = int("sinceSeconds")?;
    let since_time = first
        .get("sinceTime")
        .map(|v| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| undecodable())
        })
        .transpose()?;
    if tail_lines.is_some_and(|n| n < 0)
        || limit_bytes.is_some_and(|n| n < 1)
        || since_seconds.is_some_and(|n| n < 1)
        || (since_seconds.is_some() && since_time.is_some())
    {
        return Err(invalid());
    }
    let opts = LogOptions {
        follow: flag("follow"),
        tail_lines: tail_lines.and_then(|n| u64::try_from(n).ok()),
        timestamps: flag("timestamps"),
        since: LogOptions::since_from(since_seconds, since_time, now),
        limit_bytes: limit_bytes.and_then(|n| u64::try_from(n).ok()),
    };
    Ok((opts, flag("previous")))
}

/// Which file answers: the pod's log directory and the container's
/// current or previous restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    pub uid: String,
    /// Whether it is the container's current file (the one a running
    /// container writes).
    pub current: bool,
}

/// The file for `container` of pod `namespace/pod` under `log_root`,
/// or the kubelet's answer when there is none.
pub fn locate(
    log_root: &Path,
    lookup: Option<&PodLookup>,
    namespace: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<Located, Refusal> {
    let no_pod = || Refusal::new(StatusCode::NOT_FOUND, format!("pod {pod:?} does not exist"));
    let no_container = || {
        Refusal::new(
            StatusCode::NOT_FOUND,
            format!("container {container:?} not found in pod {pod:?}"),
        )
    };
    let (dir, uid, known) = match lookup {
        Some(lookup) => {
            let info = lookup(namespace, pod).ok_or_else(no_pod)?;
            if !info.containers.iter().any(|c| c == container) {
                return Err(no_container());
            }
            (
                logs::pod_log_dir(log_root, namespace, pod, &info.uid),
                info.uid,
                true,
            )
        }
        None => {
            let dir = logs::find_pod_dir(log_root, namespace, pod).ok_or_else(no_pod)?;
            let uid = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit('_').next())
                .unwrap_or_default()
                .to_string();
            (dir, uid, false)
        }
    };
    let restarts = logs::restarts(&dir, container)
        .map_err(|e| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let (current, before) = logs::current_and_previous(&restarts);
    let Some(current) = current else {
        return Err(if known {
            Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("container {container:?} in pod {pod:?} is waiting to start - no logs yet"),
            )
        } else {
            no_container()
        });
    };
    let restart = if previous {
        before.ok_or_else(|| {
            Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("previous terminated container {container:?} in pod {pod:?} not found"),
            )
        })?
    } else {
        current
    };
    Ok(Located {
        path: dir.join(logs::container_log_file(container, restart)),
        uid,
        current: !previous,
    })
}

/// Chunks in flight between the file reader and the connection.
const CHANNEL_CHUNKS: usize = 8;

async fn container_logs(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path((namespace, pod, container)): axum::extract::Path<(String, String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let config = &shared.config;
    let (opts, previous) = match parse_query(&pairs, Utc::now()) {
        Ok(parsed) => parsed,
        Err(refusal) => return text(refusal.status, refusal.message),
    };
    let located = match locate(
        &config.log_root,
        config.lookup.as_ref(),
        &namespace,
        &pod,
        &container,
        previous,
    ) {
        Ok(located) => located,
        Err(refusal) => return text(refusal.status, refusal.message),
    };
    let file = match logs::open(&located.path).await {
        Ok(file) => file,
        Err(e) => {
            tracing::warn!(error = %e, "cannot open a container log");
            return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        }
    };
    let running = match (&config.running, located.current) {
        (Some(running), true) => {
            let (running, uid, container) = (running.clone(), located.uid.clone(), container);
            Some(Arc::new(move || running(&uid, &container)) as logs::stream::RunningCheck)
        }
        // An earlier restart's file is finished: it has a newer one.
        _ => None,
    };
    let follow = Follow {
        running,
        poll: config.follow_poll,
        ..Follow::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(CHANNEL_CHUNKS);
    let cancel = shared.shutdown.child_token();
    let count = StreamCount::new(&shared.streams);
    tokio::spawn(async move {
        let _count = count;
        if let Err(e) = file.stream(opts, follow, tx, cancel).await {
            tracing::warn!(error = %e, "reading a container log failed");
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, std::io::Error>(Bytes::from(chunk)), rx))
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2024-01-01T00:01:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn decodes_the_query_as_the_kubelet() {
        let (opts, previous) = parse_query(
            &q(&[
                ("follow", "true"),
                ("previous", "1"),
                ("timestamps", "false"),
                ("tailLines", "3"),
                ("limitBytes", "10"),
                ("sinceSeconds", "30"),
            ]),
            now(),
        )
        .unwrap();
        assert!(previous);
        assert_eq!(
            opts,
            LogOptions {
                follow: true,
                tail_lines: Some(3),
                timestamps: false,
                since: Some(now() - chrono::TimeDelta::seconds(30)),
                limit_bytes: Some(10),
            }
        );
        let (opts, previous) =
            parse_query(&q(&[("tail", "all"), ("tailLines", "2")]), now()).unwrap();
        assert_eq!((opts.tail_lines, previous), (None, false));
        let (opts, _) = parse_query(&q(&[("tail", "5")]), now()).unwrap();
        assert_eq!(opts.tail_lines, Some(5));
        let (opts, _) = parse_query(&q(&[("sinceTime", "2024-01-01T00:00:10Z")]), now()).unwrap();
        assert_eq!(
            opts.since,
            DateTime::parse_from_rfc3339("2024-01-01T00:00:10Z")
                .ok()
                .map(|t| t.to_utc())
        );
        for bad in [
            ("tailLines", "x"),
            ("sinceTime", "yesterday"),
            ("limitBytes", "1.5"),
        ] {
            let r = parse_query(&q(&[bad]), now()).unwrap_err();
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad:?}");
            assert_eq!(r.message, r#"{"message": "Unable to decode query."}"#);
        }
        for bad in [
            vec![("tailLines", "-1")],
            vec![("limitBytes", "0")],
            vec![("sinceSeconds", "0")],
            vec![("sinceSeconds", "5"), ("sinceTime", "2024-01-01T00:00:10Z")],
        ] {
            let r = parse_query(&q(&bad), now()).unwrap_err();
            assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{bad:?}");
        }
    }

    #[test]
    fn locates_current_and_previous_files_in_kubelet_words() {
        let root = tempfile::tempdir().unwrap();
        let dir = logs::pod_log_dir(root.path(), "ns", "web", "u1");
        std::fs::create_dir_all(dir.join("app")).unwrap();
        std::fs::create_dir_all(dir.join("one")).unwrap();
        for f in ["app/0.log", "app/1.log", "one/0.log"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let by_scan =
            |pod: &str, c: &str, previous| locate(root.path(), None, "ns", pod, c, previous);
        assert_eq!(
            by_scan("web", "app", false).unwrap(),
            Located {
                path: dir.join("app/1.log"),
                uid: "u1".into(),
                current: true
            }
        );
        assert_eq!(
            by_scan("web", "app", true).unwrap().path,
            dir.join("app/0.log")
        );
        let r = by_scan("web", "one", true).unwrap_err();
        assert_eq!(
            (r.status, r.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                r#"previous terminated container "one" in pod "web" not found"#
            )
        );
        let r = by_scan("db", "app", false).unwrap_err();
        assert_eq!(
            (r.status, r.message.as_str()),
            (StatusCode::NOT_FOUND, r#"pod "db" does not exist"#)
        );
        let r = by_scan("web", "nope", false).unwrap_err();
        assert_eq!(
            (r.status, r.message.as_str()),
            (
                StatusCode::NOT_FOUND,
                r#"container "nope" not found in pod "web""#
            )
        );

        let lookup: PodLookup = Arc::new(|ns, name| {
            (ns == "ns" && name == "web").then(|| PodLogInfo {
                uid: "u1".into(),
                containers: vec!["app".into(), "one".into(), "later".into()],
                tty_containers: vec![],
            })
        });
        let by_lookup =
            |pod: &str, c: &str| locate(root.path(), Some(&lookup), "ns", pod, c, false);
        assert_eq!(by_lookup("web", "one").unwrap().path, dir.join("one/0.log"));
        let r = by_lookup("web", "later").unwrap_err();
        assert_eq!(
            (r.status, r.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                r#"container "later" in pod "web" is waiting to start - no logs yet"#
            )
        );
        assert_eq!(
            by_lookup("web", "nope").unwrap_err().status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            by_lookup("db", "app").unwrap_err().status,
            StatusCode::NOT_FOUND
        );
    }
}
