//! The scraper: every resolution (15 s by default, as the docs of
//! metrics-server state it) it reads `/metrics/resource` of every Ready
//! node's agent — in-process agents through their pipe, others over TLS
//! with the kubelet-client certificate (`crate::agents`) — and records
//! each answer in the store (`super::store`); nodes that are gone, not
//! Ready or not answering are forgotten, so they are absent until they
//! have answered twice again. It sets the APIService Available once the
//! first usage can be computed. It reads Nodes from the watch cache and
//! writes only the APIService.

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::store::Sample;
use super::{apiservice, scrape, MetricsApi};
use crate::agents::dial::{connect_agent, join_host_port, kubelet_endpoint};
use crate::agents::Agent;
use crate::{object, resources, AppState};

/// The most of an answer read (a node with many pods writes ~1 KiB per
/// container).
const MAX_BODY: usize = 16 << 20;

/// Why one node could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no address: {0}")]
    Address(String),
    #[error("dial: {0}")]
    Dial(String),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("request: {0}")]
    Request(#[from] axum::http::Error),
    #[error("answered {0}")]
    Status(StatusCode),
    #[error("body: {0}")]
    Body(String),
    #[error("timed out")]
    Timeout,
    #[error(transparent)]
    Parse(#[from] scrape::Error),
}

/// GETs `/metrics/resource` from `agent`.
async fn fetch(agent: &Agent) -> Result<String, Error> {
    let stream = connect_agent(agent).await.map_err(Error::Dial)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let task = tokio::spawn(conn);
    let request = Request::get("/metrics/resource")
        .header(header::HOST, join_host_port(&agent.host, agent.port))
        .header(header::USER_AGENT, "skiff-apiserver/metrics")
        .body(Body::empty())?;
    let result = async {
        let response = sender.send_request(request).await?;
        if response.status() != StatusCode::OK {
            return Err(Error::Status(response.status()));
        }
        let bytes = axum::body::to_bytes(Body::new(response.into_body()), MAX_BODY)
            .await
            .map_err(|e| Error::Body(e.to_string()))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
    .await;
    task.abort();
    result
}

fn ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// The Ready nodes: (name, the Node).
fn ready_nodes(state: &AppState) -> Vec<(String, Value)> {
    let Some(nodes) = resources::find_builtin("", "v1", "nodes") else {
        return Vec::new();
    };
    let Ok((_, items)) = state.cache(nodes).list(&object::prefix(nodes, None)) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|c| c.object())
        .filter(ready)
        .filter_map(|n| Some((n.pointer("/metadata/name")?.as_str()?.to_string(), n)))
        .collect()
}

/// Reads one node.
async fn scrape_node(
    state: &AppState,
    name: &str,
    node: &Value,
    timeout: Duration,
) -> Result<Sample, Error> {
    let (host, port) = kubelet_endpoint(node).map_err(|e| Error::Address(e.message))?;
    let tls = state
        .kubelet_tls
        .clone()
        .ok_or_else(|| Error::Dial("no kubelet client credentials".into()))?;
    let agent = Agent {
        tls,
        host,
        port,
        local: state.local_agents.get(name),
    };
    let text = tokio::time::timeout(timeout, fetch(&agent))
        .await
        .map_err(|_| Error::Timeout)??;
    Ok(Sample {
        at: chrono::Utc::now(),
        scrape: scrape::parse(&text)?,
    })
}

/// The scraper of one API server.
#[derive(Debug)]
pub struct Scraper {
    pub state: AppState,
    pub api: MetricsApi,
}

impl Scraper {
    /// One round: every Ready node read at once.
    pub async fn round(&self) {
        let nodes = ready_nodes(&self.state);
        let timeout = self.api.resolution.min(Duration::from_secs(10));
        let reads = nodes.iter().map(|(name, node)| async move {
            (name, scrape_node(&self.state, name, node, timeout).await)
        });
        let mut answered = Vec::new();
        for (name, result) in futures::future::join_all(reads).await {
            match result {
                Ok(sample) => {
                    self.api.write().record(name, sample);
                    answered.push(name.clone());
                }
                Err(e) => tracing::debug!(node = %name, error = %e, "resource metrics not read"),
            }
        }
        self.api.write().retain(&answered);
    }

    /// Scrapes every resolution until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let store = self.state.store.clone();
        if let Err(e) = apiservice::ensure(store.as_ref(), false).await {
            tracing::warn!(error = %e, "cannot register the metrics.k8s.io APIService");
        }
        let mut available = false;
        let mut tick = tokio::time::interval(self.api.resolution);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            self.round().await;
            if !available && self.api.read().has_rates() {
                match apiservice::ensure(store.as_ref(), true).await {
                    Ok(()) => available = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot mark the metrics.k8s.io APIService available")
                    }
                }
            }
        }
    }
}
