//! How the API server reaches node agents (`pods/log`, exec, attach,
//! port-forward): over TCP with TLS and the kubelet-client certificate,
//! or, for an agent running in the same process (`skiff server`), through
//! what it registered in [`LocalAgents`]: in-memory pipes its endpoint
//! serves (logs), and its routes, to which an upgrade request is handed
//! with the client's own pending upgrade, so the agent splices the
//! client's connection straight to the runtime (no TCP, no TLS and no
//! copy in between: a streamed byte is encrypted once, for the client).
//!
//! This module owns the registry and the connection type, and dialing an
//! agent ([`dial`]); choosing the node and speaking HTTP on the
//! connection are the handlers' job.

pub mod dial;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Opens an in-process connection to one agent's endpoint; `None` once
/// that endpoint has shut down.
pub type LocalDial = Arc<dyn Fn() -> Option<DuplexStream> + Send + Sync>;

/// An agent in this process.
#[derive(Clone)]
pub struct LocalAgent {
    /// In-memory connections to its endpoint.
    pub dial: LocalDial,
    /// Its endpoint's routes.
    pub router: axum::Router,
    /// Cancelled when its endpoint shuts down (then it is reached over
    /// the network, like any other).
    pub stopped: CancellationToken,
}

impl std::fmt::Debug for LocalAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAgent")
            .field("stopped", &self.stopped.is_cancelled())
            .finish()
    }
}

/// The agents in this process, by node name.
#[derive(Clone, Default)]
pub struct LocalAgents(Arc<RwLock<HashMap<String, LocalAgent>>>);

impl std::fmt::Debug for LocalAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self
            .0
            .read()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        f.debug_tuple("LocalAgents").field(&nodes).finish()
    }
}

impl LocalAgents {
    /// Registers (or replaces) the in-process agent of `node`.
    pub fn register(&self, node: &str, agent: LocalAgent) {
        if let Ok(mut m) = self.0.write() {
            m.insert(node.to_string(), agent);
        }
    }

    /// `node`'s agent, when it runs in this process and serves.
    pub fn get(&self, node: &str) -> Option<LocalAgent> {
        self.0
            .read()
            .ok()
            .and_then(|m| m.get(node).cloned())
            .filter(|a| !a.stopped.is_cancelled())
    }
}

/// How one node's agent is reached.
#[derive(Clone)]
pub struct Agent {
    pub tls: Arc<rustls::ClientConfig>,
    pub host: String,
    pub port: u16,
    /// Set when the agent runs in this process.
    pub local: Option<LocalAgent>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("local", &self.local)
            .finish()
    }
}

/// A connection to an agent.
#[derive(Debug)]
pub enum AgentStream {
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Local(DuplexStream),
}

impl AsyncRead for AgentStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AgentStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            AgentStream::Local(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AgentStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            AgentStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            AgentStream::Local(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AgentStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            AgentStream::Local(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AgentStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            AgentStream::Local(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            AgentStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            AgentStream::Local(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            AgentStream::Tls(s) => s.is_write_vectored(),
            AgentStream::Local(s) => s.is_write_vectored(),
        }
    }
}
