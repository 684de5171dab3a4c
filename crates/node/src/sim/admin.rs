//! The simulator's admin endpoint (`skiff sim --admin-listen ADDR`): plain
//! HTTP, meant for loopback, through which a test loses one simulated node
//! at a time (node-loss and eviction paths), where `--stop-after` loses
//! them all.
//!
//! - `GET /nodes`: every simulated node, in order, and whether it still
//!   renews its Lease (`{"nodes":[{"name":"sim-0","renewing":true},…]}`).
//! - `POST /nodes/{name}/stop`: that node stops renewing its Lease and
//!   patching its status; its pods keep running, as on a kubelet cut off
//!   from the API server. Answers the node's new state; 404 for a name the
//!   process does not simulate. Stopping a stopped node changes nothing.
//!
//! It owns only the routes: each node's renewals are a cancellation token
//! that [`super::run`] hands its registration loop; nothing here talks to
//! the API server.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Each simulated node's name and the token its Lease renewals stop on,
/// in node order.
#[derive(Debug, Default)]
pub struct Renewals {
    nodes: Vec<(String, CancellationToken)>,
}

impl Renewals {
    /// Adds node `name`, whose renewals stop on `token`.
    pub fn add(&mut self, name: &str, token: CancellationToken) {
        self.nodes.push((name.to_string(), token));
    }

    /// Stops node `name`'s renewals; false when there is no such node.
    /// (A scan: a test's occasional call, over thousands of nodes at most.)
    pub fn stop(&self, name: &str) -> bool {
        match self.nodes.iter().find(|(n, _)| n == name) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

/// The admin routes over `renewals`.
pub fn router(renewals: Arc<Renewals>) -> Router {
    Router::new()
        .route("/nodes", get(list))
        .route("/nodes/{name}/stop", post(stop))
        .with_state(renewals)
}

/// Serves the admin routes on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    renewals: Arc<Renewals>,
    shutdown: CancellationToken,
) {
    let served = axum::serve(listener, router(renewals))
        .with_graceful_shutdown(async move { shutdown.cancelled().await });
    if let Err(e) = served.await {
        tracing::warn!(error = %e, "the simulator's admin endpoint stopped");
    }
}

async fn list(State(renewals): State<Arc<Renewals>>) -> Json<serde_json::Value> {
    let nodes: Vec<_> = renewals
        .nodes
        .iter()
        .map(|(name, token)| json!({ "name": name, "renewing": !token.is_cancelled() }))
        .collect();
    Json(json!({ "nodes": nodes }))
}

async fn stop(State(renewals): State<Arc<Renewals>>, Path(name): Path<String>) -> Response {
    if renewals.stop(&name) {
        tracing::info!(node = %name, "a simulated node stops renewing its Lease");
        Json(json!({ "name": name, "renewing": false })).into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            Json(json!({ "error": format!("no simulated node {name:?}") })),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    /// The answer's status and its JSON body (null when empty).
    async fn call(app: &Router, method: &str, path: &str) -> (StatusCode, serde_json::Value) {
        let response = app
            .clone()
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::empty())
                    .expect("request"),
            )
            .await
            .expect("answer");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let json = if body.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_slice(&body).expect("JSON")
        };
        (status, json)
    }

    #[tokio::test]
    async fn stopping_one_node_cancels_its_token_alone() {
        let mut renewals = Renewals::default();
        let (a, b) = (CancellationToken::new(), CancellationToken::new());
        renewals.add("sim-0", a.clone());
        renewals.add("sim-1", b.clone());
        let app = router(Arc::new(renewals));

        let (status, body) = call(&app, "POST", "/nodes/sim-1/stop").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, json!({ "name": "sim-1", "renewing": false }));
        assert!(b.is_cancelled() && !a.is_cancelled());

        // Again: the same answer, nothing else changes.
        let (status, _) = call(&app, "POST", "/nodes/sim-1/stop").await;
        assert_eq!(status, StatusCode::OK);
        assert!(!a.is_cancelled());

        let (status, body) = call(&app, "GET", "/nodes").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            json!({ "nodes": [
                { "name": "sim-0", "renewing": true },
                { "name": "sim-1", "renewing": false },
            ]})
        );

        let (status, body) = call(&app, "POST", "/nodes/sim-9/stop").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, json!({ "error": "no simulated node \"sim-9\"" }));
        assert!(!a.is_cancelled());

        // Only POST stops a node.
        let (status, _) = call(&app, "GET", "/nodes/sim-0/stop").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert!(!a.is_cancelled());
    }
}
