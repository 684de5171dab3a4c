//! The agent's client-side load balancer over the cluster's API servers,
//! as k3s's agent has (`pkg/agent/loadbalancer`): a TCP proxy on
//! 127.0.0.1 that the agent's kube client dials instead of a server. Each
//! connection goes to the current server; when it cannot be dialed, the
//! next one in the list is tried and becomes current. TLS stays end to
//! end (the proxy copies bytes): the client verifies each server's
//! certificate against the cluster CA under the name 127.0.0.1, which
//! every server's certificate carries (as k3s's do).
//!
//! The list starts with the `--server` the agent was given and is
//! replaced by the `kubernetes` Endpoints' addresses as they change
//! ([`follow_endpoints`]), the given server kept last as a fallback.
//! Connections to a server the Endpoints dropped are closed, so the
//! client reconnects (its watches re-list and re-watch) to a live one.
//!
//! This module owns the listener and the server list; it does not know
//! what the client sends (it never reads the bytes) nor what the agent
//! does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// How long a dial of one server may take before the next is tried.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the `kubernetes` Endpoints is read (the servers refresh
/// their leases every 10 s).
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the API load balancer cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the kubeconfig's server {0:?} is not an https://host:port URL")]
    Server(String),
    #[error("no API server answered (tried {tried:?})")]
    NoServer { tried: Vec<String> },
}

pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, Default)]
struct State {
    /// `host:port` of each server, in the order they are tried.
    addrs: Vec<String>,
    /// The one connections go to first.
    current: Option<String>,
    /// The server the agent was given, tried last when not listed.
    fallback: String,
    /// Cancels the proxied connections of each server.
    conns: HashMap<String, CancellationToken>,
}

/// The server list, shared by the proxy and whoever updates it.
#[derive(Clone, Debug)]
pub struct Servers(Arc<Mutex<State>>);

impl Servers {
    /// A list of just `fallback` (`host:port`).
    pub fn new(fallback: &str) -> Self {
        Self(Arc::new(Mutex::new(State {
            addrs: vec![fallback.to_string()],
            current: Some(fallback.to_string()),
            fallback: fallback.to_string(),
            conns: HashMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the list with `addrs` (the given server kept last); the
    /// current server stays current if in `addrs`, and connections to
    /// servers not in `addrs` are closed. An empty `addrs` changes
    /// nothing.
    pub fn set(&self, addrs: &[String]) {
        if addrs.is_empty() {
            return;
        }
        let mut state = self.lock();
        let mut list: Vec<String> = Vec::new();
        for a in addrs {
            if !list.contains(a) {
                list.push(a.clone());
            }
        }
        if !list.contains(&state.fallback) {
            list.push(state.fallback.clone());
        }
        if list == state.addrs {
            return;
        }
        tracing::info!(servers = ?list, "API servers for the agent's load balancer");
        // Not listed any more (the given server too, when the Endpoints
        // dropped it: it stays only as a last resort).
        let gone: Vec<String> = state
            .conns
            .keys()
            .filter(|a| !addrs.contains(a))
            .cloned()
            .collect();
        for a in gone {
            if let Some(token) = state.conns.remove(&a) {
                token.cancel();
            }
        }
        if !state.current.as_ref().is_some_and(|c| addrs.contains(c)) {
            state.current = list.first().cloned();
        }
        state.addrs = list;
    }

    /// The servers, in the order they are tried.
    pub fn list(&self) -> Vec<String> {
        self.lock().addrs.clone()
    }

    /// The server connections go to first.
    pub fn current(&self) -> Option<String> {
        self.lock().current.clone()
    }

    /// The list starting at the current server.
    fn order(&self) -> Vec<String> {
        let state = self.lock();
        let start = state
            .current
            .as_ref()
            .and_then(|c| state.addrs.iter().position(|a| a == c))
            .unwrap_or(0);
        let mut out = state.addrs[start..].to_vec();
        out.extend_from_slice(&state.addrs[..start]);
        out
    }

    /// `addr` answered: it becomes current; the token of its connections.
    fn chose(&self, addr: &str) -> CancellationToken {
        let mut state = self.lock();
        if state.current.as_deref() != Some(addr) {
            tracing::warn!(from = ?state.current, to = addr, "API server failover");
            state.current = Some(addr.to_string());
        }
        state.conns.entry(addr.to_string()).or_default().clone()
    }
}

/// Dials the current server, or the next that answers.
async fn dial(servers: &Servers) -> Result<(String, TcpStream)> {
    let order = servers.order();
    for addr in &order {
        match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr.as_str())).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok((addr.clone(), stream));
            }
            Ok(Err(e)) => tracing::debug!(server = %addr, error = %e, "API server dial failed"),
            Err(_) => tracing::debug!(server = %addr, "API server dial timed out"),
        }
    }
    Err(Error::NoServer { tried: order })
}

/// The proxy: a listener on 127.0.0.1 and the server list.
#[derive(Debug)]
pub struct LoadBalancer {
    listener: TcpListener,
    local: SocketAddr,
    servers: Servers,
}

impl LoadBalancer {
    /// Listens on 127.0.0.1 (a free port) for connections to `server`
    /// (`host:port`) and the servers [`Servers::set`] adds.
    pub async fn bind(server: &str) -> Result<Self> {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Listen { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| Error::Listen { addr, source })?;
        Ok(Self {
            listener,
            local,
            servers: Servers::new(server),
        })
    }

    /// The URL the client dials: `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.local)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn servers(&self) -> Servers {
        self.servers.clone()
    }

    /// Proxies connections until `shutdown`, then closes them all.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                a = self.listener.accept() => a,
            };
            let (mut client, _) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "the API load balancer's accept failed");
                    continue;
                }
            };
            let _ = client.set_nodelay(true);
            let servers = self.servers.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let (addr, mut upstream) = match dial(&servers).await {
                    Ok(ok) => ok,
                    Err(e) => {
                        tracing::warn!(error = %e, "the API load balancer dropped a connection");
                        return;
                    }
                };
                let closed = servers.chose(&addr);
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = closed.cancelled() => {
                        tracing::debug!(server = %addr, "closing a connection to a server no longer listed");
                    }
                    r = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                        if let Err(e) = r {
                            tracing::debug!(server = %addr, error = %e, "an API connection ended");
                        }
                    }
                }
            });
        }
        let state = self.servers.lock();
        for token in state.conns.values() {
            token.cancel();
        }
    }
}

/// `host:port` of a kubeconfig server URL (`https://HOST:PORT`, 443 when
/// no port).
pub fn host_port(url: &str) -> Result<String> {
    let uri: http::Uri = url.parse().map_err(|_| Error::Server(url.into()))?;
    if uri.scheme_str() != Some("https") {
        return Err(Error::Server(url.into()));
    }
    let host = uri.host().ok_or_else(|| Error::Server(url.into()))?;
    Ok(format!("{host}:{}", uri.port_u16().unwrap_or(443)))
}

/// The servers an Endpoints lists (`ip:port` of each address of each
/// subset, its `https` port or its only one). Loopback addresses only
/// when `fallback` is loopback too (another machine's 127.0.0.1 is not
/// this one's).
pub fn endpoint_servers(
    endpoints: &k8s_openapi::api::core::v1::Endpoints,
    fallback: &str,
) -> Vec<String> {
    let local_ok = fallback.starts_with("127.") || fallback.starts_with("localhost:");
    let mut out = Vec::new();
    for subset in endpoints.subsets.iter().flatten() {
        let ports = subset.ports.as_deref().unwrap_or_default();
        let port = ports
            .iter()
            .find(|p| p.name.as_deref() == Some("https"))
            .or_else(|| (ports.len() == 1).then(|| &ports[0]))
            .map(|p| p.port);
        let Some(port) = port else { continue };
        for a in subset.addresses.iter().flatten() {
            let loopback =
                a.ip.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback && !local_ok {
                continue;
            }
            out.push(format!("{}:{port}", a.ip));
        }
    }
    out
}

/// Reads the `kubernetes` Endpoints in `default` now and every
/// [`REFRESH_EVERY`] until `shutdown`, and sets the servers from it
/// (through `client`, which goes through the load balancer itself).
pub async fn follow_endpoints(client: kube::Client, servers: Servers, shutdown: CancellationToken) {
    let api: kube::Api<k8s_openapi::api::core::v1::Endpoints> =
        kube::Api::namespaced(client, "default");
    let fallback = servers.lock().fallback.clone();
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match api.get("kubernetes").await {
            Ok(endpoints) => servers.set(&endpoint_servers(&endpoints, &fallback)),
            Err(e) => tracing::debug!(error = %e, "reading the kubernetes endpoints"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that answers each connection with `name`.
    async fn named(name: &'static str) -> (String, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let _ = s.write_all(name.as_bytes()).await;
                    // Held open until the peer closes.
                    let mut buf = [0u8; 16];
                    let _ = s.read(&mut buf).await;
                });
            }
        });
        (addr, task)
    }

    async fn hello(lb: SocketAddr) -> String {
        let mut s = TcpStream::connect(lb).await.unwrap();
        let mut buf = vec![0u8; 1];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test]
    async fn fails_over_to_the_next_server_and_follows_the_list() {
        let (a, a_task) = named("a").await;
        let (b, _b_task) = named("b").await;
        let lb = LoadBalancer::bind(&a).await.unwrap();
        let local = lb.local_addr();
        let servers = lb.servers();
        let shutdown = CancellationToken::new();
        tokio::spawn(lb.run(shutdown.clone()));
        assert_eq!(hello(local).await, "a");
        servers.set(&[a.clone(), b.clone()]);
        assert_eq!(servers.list(), [a.clone(), b.clone()]);
        // An open connection to a, closed when a leaves the list.
        let mut open = TcpStream::connect(local).await.unwrap();
        let mut buf = [0u8; 1];
        assert_eq!(open.read(&mut buf).await.unwrap(), 1);
        // a dies: the next connection goes to b, which becomes current.
        a_task.abort();
        let _ = a_task.await;
        assert_eq!(hello(local).await, "b");
        assert_eq!(servers.current(), Some(b.clone()));
        // The list without a (the given server stays last).
        servers.set(std::slice::from_ref(&b));
        assert_eq!(servers.list(), [b.clone(), a.clone()]);
        let n = tokio::time::timeout(Duration::from_secs(5), open.read(&mut buf))
            .await
            .expect("the connection to a was closed")
            .unwrap_or(0);
        // a's side of it is still open (only its listener died): the
        // proxy closed it.
        assert_eq!(n, 0);
        shutdown.cancel();
    }

    #[test]
    fn endpoint_servers_keep_loopback_only_for_a_local_fallback() {
        let endpoints: k8s_openapi::api::core::v1::Endpoints =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "kubernetes"},
                "subsets": [
                    {"addresses": [{"ip": "10.0.0.1"}, {"ip": "127.0.0.1"}],
                     "ports": [{"name": "https", "port": 6443}]},
                    {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 7000}]},
                ]
            }))
            .unwrap();
        assert_eq!(
            endpoint_servers(&endpoints, "10.0.0.1:6443"),
            ["10.0.0.1:6443", "10.0.0.2:7000"]
        );
        assert_eq!(
            endpoint_servers(&endpoints, "127.0.0.1:6443"),
            ["10.0.0.1:6443", "127.0.0.1:6443", "10.0.0.2:7000"]
        );
        assert_eq!(host_port("https://10.0.0.1:6443").unwrap(), "10.0.0.1:6443");
        assert_eq!(host_port("https://example.com").unwrap(), "example.com:443");
        assert!(host_port("http://10.0.0.1:6443").is_err());
    }
}
