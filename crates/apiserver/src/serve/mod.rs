//! The HTTPS listener: rustls with optional client certificates verified
//! against the cluster CA, HTTP/1.1 and HTTP/2, and the connection's
//! certificate identity handed to the router as a [`PeerUser`]. HTTP/2
//! responses are written through [`coalesce`], so the responses finished
//! in one turn of the runtime share a TLS record and a system call. The
//! serving certificate is read again when its files change
//! ([`reload`]), so a renewed one is served without a restart.

use std::sync::Arc;

mod coalesce;
pub mod filters;
mod panic;
pub mod pki;
pub mod reload;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::authn::{user_from_cert, PeerUser};
use crate::serve::pki::Pki;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad PEM in the PKI: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    #[error("serving certificate: {0}")]
    Serving(#[from] reload::Error),
}

/// The server's TLS configuration from the PKI.
pub fn tls_config(pki: &Pki) -> Result<Arc<rustls::ServerConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(pki.ca_cert.as_bytes()) {
        roots.add(ca?)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()?;
    let serving = reload::ReloadingCert::new(
        pki.dir.join(pki::SERVING_CERT),
        pki.dir.join(pki::SERVING_KEY),
        provider.clone(),
        reload::CHECK_EVERY,
    )?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(serving));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How long a client may take to send what it started (slow or stalled
/// clients are cut off, as Go's http.Server and upstream's request
/// timeout do).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TLS handshake.
    pub handshake: std::time::Duration,
    /// A request's header block (upstream's ReadHeaderTimeout: 32 s).
    pub header_read: std::time::Duration,
    /// A request's body, once its headers are in (upstream's default
    /// request timeout: 60 s).
    pub body_read: std::time::Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            handshake: std::time::Duration::from_secs(10),
            header_read: std::time::Duration::from_secs(32),
            body_read: std::time::Duration::from_secs(60),
        }
    }
}

/// The body deadline of a request that came in over the network (the
/// loopback has none), as a request extension.
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub std::time::Duration);

/// Accepts connections until `shutdown` is cancelled; with `peer_addrs`
/// (auditing on), each request carries its client's address as an
/// [`audit::PeerAddr`](crate::audit::PeerAddr).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    timeouts: Timeouts,
    peer_addrs: bool,
    shutdown: CancellationToken,
) {
    let acceptor = TlsAcceptor::from(tls);
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
            let tls = match tokio::time::timeout(timeouts.handshake, acceptor.accept(stream)).await
            {
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
            let user = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| user_from_cert(cert.as_ref()));
            // The connection's identity and body deadline go into each
            // request's extensions here rather than as router layers: a
            // layer over the router costs every request a boxed clone of
            // every route.
            // Shared: hyper clones the service for every request, and the
            // identity is cloned once more into the request.
            let connection = Arc::new((app, PeerUser(user), BodyTimeout(timeouts.body_read)));
            let peer_addr = peer_addrs.then_some(crate::audit::PeerAddr(peer));
            let service = TowerToHyperService::new(tower::service_fn(
                move |mut req: axum::http::Request<hyper::body::Incoming>| {
                    let (app, identity, body_timeout) = &*connection;
                    req.extensions_mut().insert(identity.clone());
                    req.extensions_mut().insert(*body_timeout);
                    if let Some(peer_addr) = peer_addr {
                        req.extensions_mut().insert(peer_addr);
                    }
                    tower::ServiceExt::oneshot(app.clone(), req)
                },
            ));
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            // Upstream's --http2-max-streams-per-connection default: many
            // watches share one HTTP/2 connection.
            builder.http2().max_concurrent_streams(1000);
            builder
                .http1()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(timeouts.header_read);
            // HTTP/2 responses finished together go out together:
            // `skiff-bench sim`'s pod phase made half the writev calls
            // (70,623 -> 36,023). Not HTTP/1.1 (see `coalesce`).
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = TokioIo::new(coalesce::Coalesce::new(tls, h2));
            let conn = builder.serve_connection_with_upgrades(io, service);
            tokio::select! {
                result = conn => if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                },
                _ = shutdown.cancelled() => {}
            }
        });
    }
}
