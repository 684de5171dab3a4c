//! The WebSocket side of streaming: recognising a WebSocket upgrade and
//! the subprotocols it offers, accepting it here (RFC 6455's handshake on
//! hyper's upgrade, then tungstenite frames the connection), and the
//! channel protocols' framing: `v5.channel.k8s.io` binary messages whose
//! first byte is the channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4
//! resize) and whose `[255, channel]` closes a channel (apimachinery's
//! `wsstream`); `SPDY/3.1+portforward.k8s.io` binary messages whose
//! payloads are the SPDY connection's bytes (client-go's
//! `TunnelingConnection`).
//!
//! It frames and negotiates; which streams exist and what goes on them
//! is `translate`'s.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use crate::status::{ApiError, ApiResult};

/// Remote command protocol 5 (stream close signals; upstream's
/// `StreamProtocolV5Name`).
pub const V5: &str = "v5.channel.k8s.io";
/// The prefix of SPDY tunnelled through a WebSocket (`SPDY/3.1+portforward.k8s.io`).
pub const SPDY_TUNNEL_PREFIX: &str = "SPDY/3.1+";

/// The v5 channels.
pub const STDIN: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const RESIZE: u8 = 4;
/// A message `[CLOSE, channel]` says the sender closed `channel`.
pub const CLOSE: u8 = 255;

/// An accepted WebSocket connection, server side.
pub type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Whether `headers` ask for a WebSocket upgrade (upstream's
/// IsWebSocketRequest).
pub fn is_websocket(headers: &HeaderMap) -> bool {
    super::proxy::is_upgrade(headers)
        && headers
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// The subprotocols a WebSocket request offers, in its order (one
/// comma-separated header or several).
pub fn protocols(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a WebSocket request offers `v5.channel.k8s.io` (upstream's
/// IsWebSocketRequestWithStreamCloseProtocol: then the API server
/// translates, whatever else is offered).
pub fn offers_v5(headers: &HeaderMap) -> bool {
    is_websocket(headers) && protocols(headers).iter().any(|p| p == V5)
}

/// The SPDY protocols a WebSocket request tunnels (`SPDY/3.1+X.k8s.io`
/// offers `X.k8s.io`; upstream's spdyProtocolsFromWebsocketProtocols).
pub fn tunnelled_spdy_protocols(headers: &HeaderMap) -> Vec<String> {
    if !is_websocket(headers) {
        return Vec::new();
    }
    protocols(headers)
        .into_iter()
        .filter(|p| p.starts_with(SPDY_TUNNEL_PREFIX) && p.ends_with(".k8s.io"))
        .map(|p| p[SPDY_TUNNEL_PREFIX.len()..].to_string())
        .collect()
}

/// A WebSocket handshake this side will complete: the 101 to answer, and
/// the connection once it is sent.
#[derive(Debug)]
pub struct Accepted {
    response: Response,
    upgrade: OnUpgrade,
}

/// The connection a 101 leads to, once it is sent.
#[derive(Debug)]
pub struct Pending {
    upgrade: OnUpgrade,
}

impl Accepted {
    /// Names the subprotocol in the 101 (chosen after the fact, as the
    /// tunnel does once the agent has picked its SPDY protocol).
    pub fn set_protocol(&mut self, protocol: &str) -> ApiResult<()> {
        let value =
            HeaderValue::from_str(protocol).map_err(|e| ApiError::bad_request(e.to_string()))?;
        self.response
            .headers_mut()
            .insert(header::SEC_WEBSOCKET_PROTOCOL, value);
        Ok(())
    }

    /// The 101 to answer, and the connection to come.
    pub fn split(self) -> (Response, Pending) {
        (
            self.response,
            Pending {
                upgrade: self.upgrade,
            },
        )
    }
}

impl Pending {
    /// The WebSocket once the 101 has been sent (`None` if the client's
    /// connection went away first).
    pub async fn socket(self) -> Option<Socket> {
        match self.upgrade.await {
            Ok(io) => {
                Some(WebSocketStream::from_raw_socket(TokioIo::new(io), Role::Server, None).await)
            }
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket upgrade failed");
                None
            }
        }
    }
}

/// Accepts the WebSocket request `req` with `protocol` (none: no
/// subprotocol header in the answer). A request that is no valid
/// handshake, or whose connection cannot be upgraded, is a 400.
pub fn accept(req: &mut Request, protocol: Option<&str>) -> ApiResult<Accepted> {
    let headers = req.headers();
    if !is_websocket(headers) {
        return Err(ApiError::bad_request(
            "websocket: the client is not using the websocket protocol",
        ));
    }
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        != Some("13")
    {
        return Err(ApiError::bad_request(
            "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header",
        ));
    }
    let Some(key) = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| k.as_bytes())
        .filter(|k| !k.is_empty())
    else {
        return Err(ApiError::bad_request(
            "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header is missing or blank",
        ));
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key);
    let Some(upgrade) = super::proxy::client_upgrade(req) else {
        return Err(super::proxy::upgrade_required());
    };
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(
        header::SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).map_err(|e| ApiError::internal(e.to_string()))?,
    );
    if let Some(p) = protocol {
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(p).map_err(|e| ApiError::bad_request(e.to_string()))?,
        );
    }
    Ok(Accepted { response, upgrade })
}

/// A v5 message on `channel`.
pub fn frame(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 1);
    out.push(channel);
    out.extend_from_slice(data);
    out
}

/// A v5 message from the client, parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    Data(u8, &'a [u8]),
    /// The client closed this channel.
    Close(u8),
    /// An empty message (no channel byte).
    Empty,
}

/// Parses a binary v5 message.
pub fn parse(message: &[u8]) -> Incoming<'_> {
    match message {
        [] => Incoming::Empty,
        [CLOSE, channel, ..] => Incoming::Close(*channel),
        [channel, data @ ..] => Incoming::Data(*channel, data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws_headers(protocols: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        for p in protocols {
            h.append(
                header::SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_str(p).unwrap(),
            );
        }
        h
    }

    #[test]
    fn subprotocols_are_read_as_offered() {
        // kubectl 1.30+ exec offers v5 alone; kube-rs and the Python
        // client offer "v5.channel.k8s.io, v4.channel.k8s.io".
        let h = ws_headers(&["v5.channel.k8s.io, v4.channel.k8s.io"]);
        assert_eq!(protocols(&h), vec![V5, "v4.channel.k8s.io"]);
        assert!(offers_v5(&h));
        assert!(!offers_v5(&ws_headers(&[
            "v4.channel.k8s.io",
            "channel.k8s.io"
        ])));
        let h = ws_headers(&["SPDY/3.1+portforward.k8s.io"]);
        assert_eq!(tunnelled_spdy_protocols(&h), vec!["portforward.k8s.io"]);
        assert!(tunnelled_spdy_protocols(&ws_headers(&["SPDY/3.1+other"])).is_empty());
        let mut spdy = HeaderMap::new();
        spdy.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        spdy.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        assert!(!is_websocket(&spdy));
    }

    #[test]
    fn v5_messages() {
        assert_eq!(frame(STDOUT, b"hi"), b"\x01hi");
        assert_eq!(parse(b"\x00abc"), Incoming::Data(STDIN, b"abc"));
        assert_eq!(parse(&[CLOSE, STDIN]), Incoming::Close(STDIN));
        assert_eq!(parse(&[RESIZE]), Incoming::Data(RESIZE, b""));
        assert_eq!(parse(&[]), Incoming::Empty);
    }

    #[test]
    fn handshakes_are_checked() {
        let request = |h: HeaderMap| {
            let mut r = Request::new(Body::empty());
            *r.headers_mut() = h;
            r
        };
        let mut h = ws_headers(&[V5]);
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        let e = accept(&mut request(h.clone()), Some(V5)).unwrap_err();
        assert!(e.message.contains("Sec-WebSocket-Key"), "{}", e.message);
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        // No connection to upgrade (as over HTTP/2 or the loopback).
        let e = accept(&mut request(h), Some(V5)).unwrap_err();
        assert_eq!(e.message, "Upgrade request required");
        // RFC 6455's example key and answer.
        assert_eq!(
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(
                b"dGhlIHNhbXBsZSBub25jZQ=="
            ),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
