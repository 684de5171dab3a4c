//! The secure port of a standalone `skiff scheduler` (10259) and `skiff
//! controller-manager` (10257), as kube-scheduler's and
//! kube-controller-manager's: HTTPS with a self-signed serving
//! certificate made in memory at start (upstream's without
//! `--tls-cert-file`), `GET /metrics` (the process's registry, the text
//! format) and `GET /healthz`, `/livez`, `/readyz`.
//!
//! Who may read `/metrics` is the API server's call, as upstream's
//! delegated authentication and authorization: the caller's bearer token
//! is checked with a TokenReview, then a SubjectAccessReview asks whether
//! that user may `get` the non-resource URL `/metrics` (upstream's
//! `system:monitoring` ClusterRole has it). No token: 401; not allowed:
//! 403. The health paths are open (upstream's always-allowed paths).
//! Answers are cached 10 s, upstream's default for both. Client
//! certificates are not read (upstream also takes those its client CA
//! signed); a Prometheus service account's token is the usual way.
//!
//! It owns that endpoint only; the metrics are the components'.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

/// kube-scheduler's secure port.
pub const SCHEDULER_PORT: u16 = 10259;
/// kube-controller-manager's secure port.
pub const CONTROLLER_MANAGER_PORT: u16 = 10257;

/// How long an answer of the API server is kept (upstream's
/// `--authentication-token-webhook-cache-ttl` and authorization cache
/// defaults for delegated servers: 10 s).
const CACHE_TTL: Duration = Duration::from_secs(10);

/// How long a client has for its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// The API server's answers, behind a trait so the decisions are tested
/// without one.
pub trait Delegate: Send + Sync + 'static {
    /// The user `token` authenticates, if any.
    fn authenticate(
        &self,
        token: &str,
    ) -> impl Future<Output = anyhow::Result<Option<User>>> + Send;
    /// Whether `user` may `get` the non-resource URL `path`.
    fn authorize(
        &self,
        user: &User,
        path: &str,
    ) -> impl Future<Output = anyhow::Result<bool>> + Send;
}

/// The real one: reviews posted with the component's own client.
#[derive(Clone)]
pub struct Reviews(pub kube::Client);

impl Delegate for Reviews {
    async fn authenticate(&self, token: &str) -> anyhow::Result<Option<User>> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.0.clone());
        let review = api
            .create(&PostParams::default(), &review)
            .await
            .context("TokenReview")?;
        let Some(status) = review.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let user = status.user.unwrap_or_default();
        Ok(Some(User {
            name: user.username.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
        }))
    }

    async fn authorize(&self, user: &User, path: &str) -> anyhow::Result<bool> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                groups: Some(user.groups.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.0.clone());
        let review = api
            .create(&PostParams::default(), &review)
            .await
            .context("SubjectAccessReview")?;
        Ok(review.status.is_some_and(|s| s.allowed))
    }
}

/// What a request to `/metrics` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Allowed,
    /// No token, or one the API server does not know.
    Unauthorized,
    Forbidden,
}

struct Guard<D> {
    delegate: D,
    /// Verdicts by token.
    cache: Mutex<HashMap<String, (Instant, Verdict)>>,
}

impl<D: Delegate> Guard<D> {
    async fn verdict(&self, token: Option<&str>, path: &str) -> anyhow::Result<Verdict> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Verdict::Unauthorized);
        };
        let key = format!("{path} {token}");
        {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
            if let Some((_, v)) = cache.get(&key) {
                return Ok(*v);
            }
        }
        let verdict = match self.delegate.authenticate(token).await? {
            None => Verdict::Unauthorized,
            Some(user) if self.delegate.authorize(&user, path).await? => Verdict::Allowed,
            Some(_) => Verdict::Forbidden,
        };
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, (Instant::now(), verdict));
        Ok(verdict)
    }
}

struct Shared<D> {
    guard: Guard<D>,
    registry: skiff_metrics::Registry,
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

async fn metrics<D: Delegate>(State(shared): State<Arc<Shared<D>>>, req: Request) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match shared.guard.verdict(token, "/metrics").await {
        Ok(Verdict::Allowed) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            shared.registry.encode(),
        )
            .into_response(),
        Ok(Verdict::Unauthorized) => text(StatusCode::UNAUTHORIZED, "Unauthorized\n"),
        Ok(Verdict::Forbidden) => text(
            StatusCode::FORBIDDEN,
            "Forbidden (user may not get path \"/metrics\")\n",
        ),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "reviewing a /metrics request");
            text(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n")
        }
    }
}

fn router<D: Delegate>(delegate: D, registry: skiff_metrics::Registry) -> Router {
    let shared = Arc::new(Shared {
        guard: Guard {
            delegate,
            cache: Mutex::new(HashMap::new()),
        },
        registry,
    });
    let ok = || async { text(StatusCode::OK, "ok") };
    Router::new()
        .route("/metrics", get(metrics::<D>))
        .route("/healthz", get(ok))
        .route("/livez", get(ok))
        .route("/readyz", get(ok))
        .fallback(|| async { text(StatusCode::NOT_FOUND, "404 page not found\n") })
        .with_state(shared)
}

/// A self-signed serving certificate for localhost, the loopback
/// addresses and this host's name (upstream's when no certificate is
/// given), in memory.
fn tls_config() -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let mut names = vec!["localhost".to_string()];
    if let Some(host) = skiff_node::registration::machine::hostname() {
        if host != "localhost" {
            names.push(host);
        }
    }
    let mut params = rcgen::CertificateParams::new(names)?;
    params.subject_alt_names.extend(
        [
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ]
        .map(rcgen::SanType::IpAddress),
    );
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "localhost@skiff");
    let key = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `addr` (an error if it cannot, as upstream's), then serves the
/// secure port until `shutdown` in a task, judging callers with
/// `client`'s reviews.
pub async fn start(
    addr: SocketAddr,
    client: kube::Client,
    registry: skiff_metrics::Registry,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on the secure port {addr}"))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls_config()?);
    let app = router(Reviews(client), registry);
    tracing::info!(addr = %listener.local_addr()?, "serving securely (/metrics, /healthz)");
    Ok(tokio::spawn(run(listener, acceptor, app, shutdown)))
}

async fn run(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
    shutdown: CancellationToken,
) {
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
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                _ => {
                    tracing::debug!(%peer, "TLS handshake failed");
                    return;
                }
            };
            let service = TowerToHyperService::new(app);
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                result = conn => if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                _ = shutdown.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Knows token "prom" (allowed) and "nobody" (not allowed).
    #[derive(Default)]
    struct Fake {
        asked: AtomicUsize,
    }

    impl Delegate for Arc<Fake> {
        async fn authenticate(&self, token: &str) -> anyhow::Result<Option<User>> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            Ok(["prom", "nobody"].contains(&token).then(|| User {
                name: token.to_string(),
                groups: Vec::new(),
            }))
        }

        async fn authorize(&self, user: &User, path: &str) -> anyhow::Result<bool> {
            Ok(user.name == "prom" && path == "/metrics")
        }
    }

    #[tokio::test]
    async fn metrics_need_a_token_the_api_server_allows() {
        let fake = Arc::new(Fake::default());
        let guard = Guard {
            delegate: fake.clone(),
            cache: Mutex::new(HashMap::new()),
        };
        let verdict = |token: Option<&'static str>| guard.verdict(token, "/metrics");
        assert_eq!(verdict(None).await.unwrap(), Verdict::Unauthorized);
        assert_eq!(verdict(Some("")).await.unwrap(), Verdict::Unauthorized);
        assert_eq!(
            verdict(Some("forged")).await.unwrap(),
            Verdict::Unauthorized
        );
        assert_eq!(verdict(Some("nobody")).await.unwrap(), Verdict::Forbidden);
        assert_eq!(verdict(Some("prom")).await.unwrap(), Verdict::Allowed);
        // Cached: asking again asks the API server nothing.
        let asked = fake.asked.load(Ordering::SeqCst);
        assert_eq!(verdict(Some("prom")).await.unwrap(), Verdict::Allowed);
        assert_eq!(fake.asked.load(Ordering::SeqCst), asked);
    }

    #[test]
    fn the_serving_certificate_is_made_in_memory() {
        assert!(tls_config().is_ok());
    }
}
