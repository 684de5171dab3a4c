//! Dialing a node agent: the TLS client configuration with the API
//! server's kubelet-client certificate (the agent's serving certificate
//! is not verified, upstream's default without
//! `--kubelet-certificate-authority`), the agent's address from its Node,
//! and the connection, with errors in Go's dialer words. `pods/log`
//! (`crate::handlers::log`) and the streams (`crate::streaming`) share it.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use skiff_client::tls::AcceptAnyServerCert;

use super::{Agent, AgentStream};
use crate::status::{ApiError, ApiResult};

/// The agent port when a node does not say (the kubelet's).
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// Address types tried in order (kubeadm's `--kubelet-preferred-address-types`,
/// then the rest of upstream's list).
pub const PREFERRED_ADDRESS_TYPES: &[&str] = &[
    "InternalIP",
    "ExternalIP",
    "Hostname",
    "InternalDNS",
    "ExternalDNS",
];

/// How long connecting to an agent may take (Go's dialer in upstream's
/// kubelet client).
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long its TLS handshake may take (Go's transport default).
const TLS_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an agent's error answer is read (upstream's maxReadLength).
pub(crate) const MAX_ERROR_BODY: usize = 50_000;

/// Why the kubelet client's TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("bad PEM in the kubelet client certificate or key: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("kubelet client TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
}

/// The TLS client configuration for agents: `cert_pem`/`key_pem` as the
/// client certificate, HTTP/1.1, any serving certificate.
pub fn kubelet_client_tls(
    cert_pem: &str,
    key_pem: &str,
) -> Result<Arc<rustls::ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider)))
        .with_client_auth_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A 500 worded as upstream's for errors that are no Status (reason
/// unknown): kubectl prints `Error from server: <message>`.
pub(crate) fn unknown(message: impl Into<String>) -> ApiError {
    let mut e = ApiError::internal(message);
    e.reason = "";
    e
}

/// The agent's host and port from a Node.
pub fn kubelet_endpoint(node: &Value) -> ApiResult<(String, u16)> {
    let addresses: Vec<(&str, &str)> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some((
                a.get("type").and_then(Value::as_str)?,
                a.get("address").and_then(Value::as_str)?,
            ))
        })
        .collect();
    let host = PREFERRED_ADDRESS_TYPES
        .iter()
        .find_map(|wanted| {
            addresses
                .iter()
                .find(|(t, a)| t == wanted && !a.is_empty())
                .map(|(_, a)| a.to_string())
        })
        .ok_or_else(|| {
            let known: Vec<String> = addresses
                .iter()
                .map(|(t, a)| format!("{{{t} {a}}}"))
                .collect();
            unknown(format!(
                "no preferred addresses found; known addresses: [{}]",
                known.join(" ")
            ))
        })?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .filter(|p| *p > 0)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Ok((host, port))
}

/// `host:port`, with brackets for IPv6.
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string(),
    }
}

/// A TLS connection to the agent at `host:port` with the kubelet client
/// certificate (`pods/log`, exec, attach and port-forward share it); the
/// error in Go's dialer words (`dial tcp H:P: connect: connection refused`).
pub(crate) async fn connect_agent(agent: &Agent) -> Result<AgentStream, String> {
    if let Some(stream) = agent.local.as_ref().and_then(|local| (local.dial)()) {
        return Ok(AgentStream::Local(stream));
    }
    let (tls, host, port) = (agent.tls.clone(), agent.host.as_str(), agent.port);
    let host_port = join_host_port(host, port);
    let tcp = tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect((host, port)))
        .await
        .map_err(|_| format!("dial tcp {host_port}: i/o timeout"))?
        .map_err(|e| format!("dial tcp {host_port}: {}", dial_error(&e)))?;
    let _ = tcp.set_nodelay(true);
    let server_name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let tls = tokio::time::timeout(
        TLS_TIMEOUT,
        tokio_rustls::TlsConnector::from(tls).connect(server_name, tcp),
    )
    .await
    .map_err(|_| "net/http: TLS handshake timeout".to_string())?
    .map_err(|e| e.to_string())?;
    Ok(AgentStream::Tls(Box::new(tls)))
}
