//! Upgrading a connection to a node agent and splicing it to the
//! client's, as upstream's `UpgradeAwareHandler` does for exec, attach
//! and port-forward: the client's upgrade request (SPDY/3.1 or a
//! WebSocket channel protocol) goes to the agent with the kubelet client
//! certificate and the headers that negotiate the protocol; the agent's
//! 101 goes back with its headers, and the two upgraded connections are
//! copied into each other until both sides are done. An agent that does
//! not switch protocols has its answer passed back unchanged (kubectl
//! words it `unable to upgrade connection: <body>`).
//!
//! It owns no protocol: bytes pass through as they are. What is said on
//! them is `translate`'s when the API server speaks to the client itself.

/// The copy buffer each direction of a splice uses (tokio's default is
/// 8 KiB; bulk port-forward traffic moves in fewer, larger writes).
const SPLICE_BUFFER: usize = 64 * 1024;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use futures::StreamExt as _;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;

use crate::agents::dial::{connect_agent, join_host_port, unknown, MAX_ERROR_BODY};
use crate::status::{ApiError, ApiResult};

/// The header that names the streaming protocols (SPDY's negotiation).
pub const PROTOCOL_VERSION: &str = "x-stream-protocol-version";

pub use crate::agents::Agent;

/// What the agent answered an upgrade request.
#[derive(Debug)]
pub enum Answer {
    /// 101: its headers, and the upgraded connection.
    Switched { headers: HeaderMap, io: Upgraded },
    /// Anything else, read whole (up to upstream's limit), to pass back.
    Refused(Response),
}

/// The client's headers that negotiate an upgrade, passed to the agent
/// (credentials are not: the agent trusts the API server's certificate).
const FORWARDED: &[&str] = &[
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    PROTOCOL_VERSION,
    "origin",
    "user-agent",
];

/// Whether `headers` ask for an upgrade (upstream's IsUpgradeRequest: a
/// `Connection` header that mentions it).
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str()
            .unwrap_or("")
            .to_ascii_lowercase()
            .contains("upgrade")
    })
}

/// The negotiating headers of a client request, for the agent.
pub fn forwarded_headers(client: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in FORWARDED {
        for value in client.get_all(*name) {
            out.append(HeaderName::from_static(name), value.clone());
        }
    }
    out
}

/// The longest request target the agent can be sent (the `http` crate's
/// limit on a URI; the client's own is the same, but the agent's is
/// written with more escapes: `ports=1,2` becomes `port=1%2C2`).
pub const MAX_AGENT_TARGET: usize = u16::MAX as usize - 1;

/// A 400 for a request whose target on the agent could not be sent, so
/// that it is refused before any upgrade rather than failing as an
/// error dialing the backend.
pub fn check_agent_target(path: &str) -> ApiResult<()> {
    if path.len() > MAX_AGENT_TARGET {
        return Err(ApiError::bad_request(format!(
            "the request for the node is too long: its URL would be {} bytes, at most {MAX_AGENT_TARGET}",
            path.len()
        )));
    }
    axum::http::Uri::try_from(path)
        .map(drop)
        .map_err(|e| ApiError::bad_request(format!("invalid URL for the node: {e}")))
}

/// The 400 upstream answers a streaming request that is no upgrade.
pub fn upgrade_required() -> ApiError {
    ApiError::bad_request("Upgrade request required")
}

/// Sends an upgrade request for `path` (with its query) to `agent`,
/// `headers` included, and waits for the answer. `Err` is a connection
/// that could not be made or broke, in Go's words.
pub async fn request_upgrade(
    agent: &Agent,
    method: Method,
    path: &str,
    headers: HeaderMap,
) -> Result<Answer, String> {
    let stream = connect_agent(agent).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    // The connection task lives until the upgrade takes the connection
    // over (or the request fails).
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "node agent upgrade connection ended with an error");
        }
    });
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, join_host_port(&agent.host, agent.port))
        .header(header::CONNECTION, "Upgrade")
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let request_headers = request.headers_mut();
    for (name, value) in headers.iter() {
        request_headers.append(name.clone(), value.clone());
    }
    if !request_headers.contains_key(header::USER_AGENT) {
        request_headers.insert(
            header::USER_AGENT,
            HeaderValue::from_static("skiff-apiserver"),
        );
    }
    let mut response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        let headers = response.headers().clone();
        let io = hyper::upgrade::on(&mut response)
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Answer::Switched { headers, io });
    }
    let (parts, body) = response.into_parts();
    let mut data = Body::new(body).into_data_stream();
    let mut bytes: Vec<u8> = Vec::new();
    while bytes.len() < MAX_ERROR_BODY {
        match data.next().await {
            Some(Ok(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY);
    let mut refused = Response::new(Body::from(bytes));
    *refused.status_mut() = parts.status;
    for name in [header::CONTENT_TYPE, header::WARNING] {
        for value in parts.headers.get_all(&name) {
            refused.headers_mut().append(name.clone(), value.clone());
        }
    }
    Ok(Answer::Refused(refused))
}

/// The client's pending upgrade, if its connection can be upgraded (an
/// HTTP/1.1 connection; not HTTP/2, not the in-process loopback).
pub fn client_upgrade(req: &mut Request) -> Option<OnUpgrade> {
    req.extensions()
        .get::<OnUpgrade>()
        .is_some()
        .then(|| hyper::upgrade::on(req))
}

/// The error a connection to the agent that could not be made is
/// (upstream's `error dialing backend: …`, a 500 with no reason).
pub fn dial_failed(e: &str) -> ApiError {
    unknown(format!("error dialing backend: {e}"))
}

/// Proxies the upgrade request `req` to `path` on `agent` unchanged and
/// answers what the agent answers; on a 101, splices the connections.
pub async fn pass_through(agent: &Agent, path: &str, mut req: Request) -> ApiResult<Response> {
    if let Some(local) = &agent.local {
        return hand_over(&local.router, path, req).await;
    }
    let Some(client) = client_upgrade(&mut req) else {
        return Err(upgrade_required());
    };
    let answer = request_upgrade(
        agent,
        req.method().clone(),
        path,
        forwarded_headers(req.headers()),
    )
    .await
    .map_err(|e| dial_failed(&e))?;
    match answer {
        Answer::Refused(response) => Ok(response),
        Answer::Switched { headers, io } => {
            tokio::spawn(splice(client, io));
            Ok(switched(headers))
        }
    }
}

/// Hands the upgrade request `req` to an agent's routes in this process
/// as a request for `path`, with the client's pending upgrade: the agent
/// answers it and, on a 101, splices the client's connection to the
/// runtime itself. Its refusals come back as over the network.
async fn hand_over(router: &axum::Router, path: &str, mut req: Request) -> ApiResult<Response> {
    let Some(upgrade) = req.extensions_mut().remove::<OnUpgrade>() else {
        return Err(upgrade_required());
    };
    let mut request = Request::builder()
        .method(req.method().clone())
        .uri(path)
        .header(header::CONNECTION, "Upgrade")
        .body(Body::empty())
        .map_err(|e| dial_failed(&e.to_string()))?;
    for (name, value) in forwarded_headers(req.headers()).iter() {
        request.headers_mut().append(name.clone(), value.clone());
    }
    request.extensions_mut().insert(upgrade);
    let response = match tower::ServiceExt::oneshot(router.clone(), request).await {
        Ok(r) => r,
        Err(never) => match never {},
    };
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(switched(response.headers().clone()));
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ERROR_BODY)
        .await
        .unwrap_or_default();
    let mut refused = Response::new(Body::from(bytes));
    *refused.status_mut() = parts.status;
    for name in [header::CONTENT_TYPE, header::WARNING] {
        for value in parts.headers.get_all(&name) {
            refused.headers_mut().append(name.clone(), value.clone());
        }
    }
    Ok(refused)
}

/// A 101 with the agent's headers.
pub fn switched(headers: HeaderMap) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *response.headers_mut() = headers;
    response
}

/// Copies the client's upgraded connection and the agent's into each
/// other until both directions have ended.
async fn splice(client: OnUpgrade, agent: Upgraded) {
    let client = match client.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "client upgrade failed");
            return;
        }
    };
    let (mut client, mut agent) = (TokioIo::new(client), TokioIo::new(agent));
    match tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut agent,
        SPLICE_BUFFER,
        SPLICE_BUFFER,
    )
    .await
    {
        Ok((up, down)) => tracing::debug!(up, down, "streaming connection done"),
        Err(e) => tracing::debug!(error = %e, "streaming connection ended with an error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrades_are_recognised_and_negotiation_passed_on() {
        let mut h = HeaderMap::new();
        assert!(!is_upgrade(&h));
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        assert!(is_upgrade(&h));
        h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        h.append(
            PROTOCOL_VERSION,
            HeaderValue::from_static("v4.channel.k8s.io"),
        );
        h.append(
            PROTOCOL_VERSION,
            HeaderValue::from_static("v3.channel.k8s.io"),
        );
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        let out = forwarded_headers(&h);
        assert_eq!(out.get_all(PROTOCOL_VERSION).iter().count(), 2);
        assert_eq!(out.get(header::UPGRADE).unwrap(), "SPDY/3.1");
        assert!(out.get(header::AUTHORIZATION).is_none());
        assert!(out.get(header::CONNECTION).is_none());
    }

    #[test]
    fn agent_targets_too_long_to_send_are_a_400() {
        let fits = format!("/exec/ns/p/c?command={}", "a".repeat(60_000));
        assert!(check_agent_target(&fits).is_ok());
        // What the client's 40 KB of `ports=1,1,…` becomes for the agent.
        let long = format!("/portForward/ns/p?port={}", "1%2C".repeat(20_000));
        let e = check_agent_target(&long).unwrap_err();
        assert_eq!(e.code, StatusCode::BAD_REQUEST);
        assert_eq!(
            e.message,
            format!(
                "the request for the node is too long: its URL would be {} bytes, at most 65534",
                long.len()
            )
        );
        // It is what the request to the agent would have failed on.
        assert!(Request::builder().uri(long.as_str()).body(()).is_err());
    }
}
