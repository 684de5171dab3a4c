//! The kube client every component uses: HTTP/2 to an https API server,
//! as client-go talks to API servers (one connection carries the watches,
//! bindings and events as streams; kube-rs' own client speaks HTTP/1.1, a
//! connection and TLS handshake per concurrent request), with kube-rs'
//! authentication and headers; kube-rs' client for anything else.

use std::path::Path;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A kube client from a kubeconfig file: HTTP/2 to an https server, as
/// client-go talks to API servers (one connection carries the watches,
/// bindings and events as streams; kube-rs' own client speaks HTTP/1.1,
/// a connection and TLS handshake per concurrent request), with kube-rs'
/// authentication and headers; kube-rs' client otherwise.
pub async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read kubeconfig {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    client_of(config)
}

fn client_of(config: kube::Config) -> anyhow::Result<kube::Client> {
    if config.cluster_url.scheme_str() != Some("https") || config.proxy_url.is_some() {
        return Ok(kube::Client::try_from(config)?);
    }
    h2_client(config, None)
}

/// A client certificate the client presents from a swappable cell, and
/// where the kubeconfig keeps it (for [`crate::certificate::rotation`]).
pub type RotatingCert = (
    std::sync::Arc<crate::certificate::rotation::ClientCert>,
    crate::certificate::kubeconfig::Location,
);

/// [`client`], presenting the kubeconfig's client certificate (if its
/// user has one and the server is https) from a cell the caller can swap
/// a renewed certificate into: the next connection presents it.
pub async fn client_with_rotating_cert(
    kubeconfig: &Path,
) -> anyhow::Result<(kube::Client, Option<RotatingCert>)> {
    client_with_rotating_cert_at(kubeconfig, None).await
}

/// [`client_with_rotating_cert`], dialing `server` (an `https://` URL,
/// the agent's load balancer) instead of the kubeconfig's server, the
/// server's certificate checked under that URL's host.
pub async fn client_with_rotating_cert_at(
    kubeconfig: &Path,
    server: Option<&str>,
) -> anyhow::Result<(kube::Client, Option<RotatingCert>)> {
    let credential = crate::certificate::kubeconfig::read(kubeconfig)?;
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read kubeconfig {}", kubeconfig.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    if let Some(server) = server {
        config.cluster_url = server
            .parse()
            .with_context(|| format!("server URL {server:?}"))?;
        config.tls_server_name = None;
    }
    let plain = config.cluster_url.scheme_str() != Some("https") || config.proxy_url.is_some();
    let Some(credential) = credential.filter(|_| !plain) else {
        return Ok((client_of(config)?, None));
    };
    let cell =
        crate::certificate::rotation::ClientCert::new(&credential.cert_pem, &credential.key_pem)?;
    let client = h2_client(config, Some(cell.clone()))?;
    Ok((client, Some((cell, credential.location))))
}

fn h2_client(
    config: kube::Config,
    client_cert: Option<std::sync::Arc<dyn rustls::client::ResolvesClientCert>>,
) -> anyhow::Result<kube::Client> {
    use kube::client::ConfigExt;
    use tower::{BoxError, ServiceBuilder, ServiceExt};

    // The connector offers h2 by ALPN itself. No Nagle: a request's
    // frames are small writes, and waiting for the previous one's ACK
    // held event writes ~40 ms each (delayed ACKs).
    let mut tls = config.rustls_client_config()?;
    if let Some(resolver) = client_cert {
        tls.client_auth_cert_resolver = resolver;
    }
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.set_nodelay(true);
    tcp.enforce_http(false);
    tcp.set_connect_timeout(config.connect_timeout);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http2()
        .wrap_connector(tcp);
    // client-go's HTTP/2 health check (ReadIdleTimeout 30 s, PingTimeout
    // 15 s): a connection to a server that vanished without closing it
    // (a dead machine) is dropped, and the next request dials again
    // (through the agent's load balancer, another server).
    let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .timer(hyper_util::rt::TokioTimer::new())
            .http2_keep_alive_interval(std::time::Duration::from_secs(30))
            .http2_keep_alive_timeout(std::time::Duration::from_secs(15))
            .http2_keep_alive_while_idle(true)
            .build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .service(http.map_err(BoxError::from));
    Ok(kube::Client::new(service, config.default_namespace))
}
