//! A lean HTTP/2 client for creating objects in bulk, the way client-go
//! talks to an API server: TLS with ALPN `h2`, the kubeconfig's identity,
//! and concurrent requests as streams over a few connections. kube-rs'
//! client speaks HTTP/1.1 through a pool and a buffer task; as the load
//! generator of the scheduler benchmark it used about a sixth of the two
//! cores the API server and scheduler are measured on. It authenticates
//! with the kubeconfig's client certificate (what `skiff server` writes).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::ConfigExt;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// HTTP/2 connections a benchmark's clients share (client-go uses one per
/// server; a few spread the server's TLS work over its threads).
pub const CONNECTIONS: usize = 4;

/// Connections to one API server; cheap to clone.
#[derive(Clone)]
pub struct H2 {
    senders: Arc<Vec<SendRequest<Full<Bytes>>>>,
    next: Arc<AtomicUsize>,
    authority: String,
}

impl H2 {
    /// Opens `connections` HTTP/2 connections to the server of `kubeconfig`.
    pub async fn connect(kubeconfig: &Path, connections: usize) -> anyhow::Result<Self> {
        let kc = Kubeconfig::read_from(kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        let mut tls = config.rustls_client_config()?;
        tls.alpn_protocols = vec![b"h2".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
        let host = config
            .cluster_url
            .host()
            .ok_or_else(|| anyhow::anyhow!("no host in {}", config.cluster_url))?
            .to_string();
        let port = config.cluster_url.port_u16().unwrap_or(443);
        let mut senders = Vec::new();
        for _ in 0..connections.max(1) {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = rustls::pki_types::ServerName::try_from(host.clone())?;
            let stream = connector.connect(name, tcp).await?;
            anyhow::ensure!(
                stream.get_ref().1.alpn_protocol() == Some(b"h2"),
                "the server did not agree to HTTP/2"
            );
            let (sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                    .await?;
            // Ends with an error when the server is stopped after a run;
            // a failure during one shows in the requests.
            tokio::spawn(conn);
            senders.push(sender);
        }
        Ok(H2 {
            senders: Arc::new(senders),
            next: Arc::default(),
            authority: format!("{host}:{port}"),
        })
    }

    /// POSTs a JSON `body` to `path`; an error unless the answer is 2xx.
    pub async fn post(&self, path: &str, body: Bytes) -> anyhow::Result<()> {
        let request = http::Request::post(format!("https://{}{path}", self.authority))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(body))?;
        self.send(request, &[]).await
    }

    /// DELETEs `path` (default grace period, as `kubectl delete`); an
    /// error unless the answer is 2xx or 404 (already gone).
    pub async fn delete(&self, path: &str) -> anyhow::Result<()> {
        let request = http::Request::delete(format!("https://{}{path}", self.authority))
            .header("accept", "application/json")
            .body(Full::new(Bytes::new()))?;
        self.send(request, &[http::StatusCode::NOT_FOUND]).await
    }

    /// Sends `request` on the next connection; an error unless the answer
    /// is 2xx or one of `also_ok`.
    async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        also_ok: &[http::StatusCode],
    ) -> anyhow::Result<()> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len();
        let mut sender = self.senders[i].clone();
        let what = format!("{} {}", request.method(), request.uri().path());
        let response = sender.send_request(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            status.is_success() || also_ok.contains(&status),
            "{what}: {status}: {}",
            String::from_utf8_lossy(&body)
        );
        Ok(())
    }
}
