//! Where the API server speaks to the client itself and SPDY to the
//! agent, as kube-apiserver 1.30+ does:
//!
//! - [`remote_command`]: a WebSocket `v5.channel.k8s.io` exec or attach
//!   (kubectl 1.30+, kube-rs, the Python client) becomes a SPDY/3.1
//!   session with the agent on `v4.channel.k8s.io` (upstream's
//!   `StreamTranslatorHandler`): the streams the options ask for are
//!   opened in client-go's order (error, stdin, stdout, stderr unless a
//!   tty, resize with a tty); channel 0 feeds stdin, `[255, 0]` closes it
//!   (FIN), channel 4's sizes go to the resize stream, stdout and stderr
//!   come back on channels 1 and 2; once they and the error stream have
//!   ended, the outcome goes on channel 3 as upstream's translator words
//!   it (Success; NonZeroExitCode with the ExitCode cause; any other
//!   failure an InternalError) and the WebSocket is closed normally.
//! - [`tunnel`]: a WebSocket `SPDY/3.1+portforward.k8s.io` (kubectl
//!   1.31+ port-forward) is spliced to a SPDY upgrade of the agent's
//!   `/portForward`: each binary message's payload is bytes of the SPDY
//!   connection, both ways (upstream's `TunnelingHandler`).
//!
//! It reaches agents only through `proxy`'s upgrade and looks inside no
//! SPDY stream it did not open; which pod and agent is the handlers'.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::Response;
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use super::proxy::{self, Agent, Answer, PROTOCOL_VERSION};
use super::spdy;
use super::websocket::{self, Incoming, Socket};
use crate::agents::dial::MAX_ERROR_BODY;
use crate::status::ApiResult;

/// The remote command protocol spoken to the agent.
pub const AGENT_PROTOCOL: &str = "v4.channel.k8s.io";
/// How long the client may take to answer our WebSocket close.
const CLOSE_WAIT: Duration = Duration::from_secs(10);
/// How much is read from a stream at a time.
const CHUNK: usize = 32 * 1024;

/// Which streams an exec or attach asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Streams {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

// ---------------------------------------------------------------------------
// The error channel's Status, as upstream's translator writes it
// (json.Marshal of a metav1.Status: no kind or apiVersion).

#[derive(Debug, Serialize)]
struct Status<'a> {
    metadata: serde_json::Map<String, Value>,
    status: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
}

#[derive(Debug, Serialize)]
struct Details<'a> {
    causes: Vec<StatusCause<'a>>,
}

#[derive(Debug, Serialize)]
struct StatusCause<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    message: &'a str,
}

/// How the session ended, as the client is told on channel 3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The command exited with this code.
    Exit(u8),
    /// Any other failure (upstream's NewInternalError of it).
    Internal(String),
    /// A Status the agent answered instead of upgrading, passed on.
    Status(Value),
}

impl Outcome {
    /// The Status JSON for channel 3.
    pub fn status_json(&self) -> Vec<u8> {
        let status = |s: &Status<'_>| serde_json::to_vec(s).unwrap_or_default();
        match self {
            Outcome::Success => status(&Status {
                metadata: Default::default(),
                status: "Success",
                message: "",
                reason: "",
                details: None,
                code: None,
            }),
            Outcome::Exit(code) => {
                let message = format!(
                    "command terminated with non-zero exit code: command terminated with exit code {code}"
                );
                let code = code.to_string();
                status(&Status {
                    metadata: Default::default(),
                    status: "Failure",
                    message: &message,
                    reason: "NonZeroExitCode",
                    details: Some(Details {
                        causes: vec![StatusCause {
                            reason: "ExitCode",
                            message: &code,
                        }],
                    }),
                    code: None,
                })
            }
            Outcome::Internal(e) => {
                let message = format!("Internal error occurred: {e}");
                status(&Status {
                    metadata: Default::default(),
                    status: "Failure",
                    message: &message,
                    reason: "InternalError",
                    details: Some(Details {
                        causes: vec![StatusCause {
                            reason: "",
                            message: e,
                        }],
                    }),
                    code: Some(500),
                })
            }
            Outcome::Status(v) => serde_json::to_vec(v).unwrap_or_default(),
        }
    }
}

/// What the agent's error stream said, read as client-go's v4 decoder
/// does (an empty stream is success).
pub fn decode_error_stream(message: &[u8]) -> Outcome {
    if message.is_empty() {
        return Outcome::Success;
    }
    let status: Value = match serde_json::from_slice(message) {
        Ok(v) => v,
        Err(e) => {
            return Outcome::Internal(format!(
                "error stream protocol error: {e} in {:?}",
                String::from_utf8_lossy(message)
            ))
        }
    };
    let text = |field: &str| status.get(field).and_then(Value::as_str).unwrap_or("");
    match text("status") {
        "Success" => Outcome::Success,
        "Failure" if text("reason") == "NonZeroExitCode" => {
            let Some(details) = status.get("details").filter(|d| !d.is_null()) else {
                return Outcome::Internal(
                    "error stream protocol error: details must be set".into(),
                );
            };
            let cause = details
                .get("causes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("reason").and_then(Value::as_str) == Some("ExitCode"));
            match cause {
                Some(c) => {
                    let code = c.get("message").and_then(Value::as_str).unwrap_or("");
                    match code.parse::<u8>() {
                        Ok(code) => Outcome::Exit(code),
                        Err(_) => Outcome::Internal(format!(
                            "error stream protocol error: invalid exit code value {code:?}"
                        )),
                    }
                }
                None => {
                    Outcome::Internal("error stream protocol error: no ExitCode cause given".into())
                }
            }
        }
        "Failure" => Outcome::Internal(text("message").to_string()),
        _ => Outcome::Internal("error stream protocol error: unknown error".into()),
    }
}

/// An agent's refusal to upgrade, as client-go's SPDY round tripper
/// reports it: its Status if the body is one, else `unable to upgrade
/// connection: <body>`.
pub fn refusal(body: &[u8]) -> Outcome {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        if v.get("kind").and_then(Value::as_str) == Some("Status") {
            return Outcome::Status(v);
        }
    }
    Outcome::Internal(format!(
        "unable to upgrade connection: {}",
        String::from_utf8_lossy(body).trim()
    ))
}

// ---------------------------------------------------------------------------
// v5 exec and attach.

/// Accepts the WebSocket `v5.channel.k8s.io` request `req` and runs the
/// session with the agent's `path` once the 101 is sent.
pub fn remote_command(
    agent: Agent,
    path: String,
    streams: Streams,
    mut req: Request,
) -> ApiResult<Response> {
    let (response, pending) = websocket::accept(&mut req, Some(websocket::V5))?.split();
    tokio::spawn(async move {
        if let Some(socket) = pending.socket().await {
            run_remote_command(socket, &agent, &path, streams).await;
        }
    });
    Ok(response)
}

/// The SPDY upgrade request headers for protocol `protocols`.
fn spdy_headers(protocols: &[String]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    for p in protocols {
        if let Ok(v) = HeaderValue::from_str(p) {
            headers.append(PROTOCOL_VERSION, v);
        }
    }
    headers
}

/// Whether a 101 is SPDY/3.1's (upstream checks it before using it).
fn is_spdy(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("spdy/3.1"))
}

/// Opens the SPDY session with the agent (POST, as client-go's executor).
async fn open_session(agent: &Agent, path: &str) -> Result<Upgraded, Outcome> {
    let answer = proxy::request_upgrade(
        agent,
        Method::POST,
        path,
        spdy_headers(&[AGENT_PROTOCOL.to_string()]),
    )
    .await
    .map_err(Outcome::Internal)?;
    match answer {
        Answer::Refused(response) => {
            let body = axum::body::to_bytes(response.into_body(), MAX_ERROR_BODY)
                .await
                .unwrap_or_default();
            Err(refusal(&body))
        }
        Answer::Switched { headers, io } => {
            if !is_spdy(&headers) {
                return Err(Outcome::Internal(
                    "unable to upgrade connection: missing upgrade headers in response".into(),
                ));
            }
            let chosen = headers
                .get(PROTOCOL_VERSION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if chosen != AGENT_PROTOCOL {
                return Err(Outcome::Internal(format!(
                    "unable to negotiate protocol: client supports [{AGENT_PROTOCOL}], server returned {chosen:?}"
                )));
            }
            Ok(io)
        }
    }
}

/// Sends `[channel, data…]`; false once the client is gone.
async fn send(out: &mpsc::Sender<Message>, channel: u8, data: &[u8]) -> bool {
    out.send(Message::Binary(Bytes::from(websocket::frame(
        channel, data,
    ))))
    .await
    .is_ok()
}

/// Copies a SPDY stream to a channel until it ends, or until the client
/// is gone (then the stream is reset).
async fn pump(
    mut from: spdy::ReadHalf,
    channel: u8,
    out: mpsc::Sender<Message>,
    gone: CancellationToken,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let read = tokio::select! {
            read = from.read(&mut buf) => read,
            _ = gone.cancelled() => {
                from.reset();
                return;
            }
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if !send(&out, channel, &buf[..n]).await {
                    from.reset();
                    gone.cancel();
                    return;
                }
            }
        }
    }
}

/// Reads the error stream to its end (client-go's watchErrorStream).
async fn read_error_stream(mut from: spdy::ReadHalf, gone: CancellationToken) -> Outcome {
    let mut message = Vec::new();
    let read = tokio::select! {
        read = from.read_to_end(&mut message) => read,
        _ = gone.cancelled() => {
            from.reset();
            return Outcome::Internal("the client went away".into());
        }
    };
    match read {
        Ok(_) => decode_error_stream(&message),
        Err(e) => Outcome::Internal(format!("error reading from error stream: {e}")),
    }
}

async fn run_remote_command<S>(
    socket: WebSocketStream<S>,
    agent: &Agent,
    path: &str,
    streams: Streams,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut ws_out, ws_in) = socket.split();
    let (out, mut queue) = mpsc::channel::<Message>(16);
    // One writer: stdout, stderr and the status share the WebSocket.
    let writer = tokio::spawn(async move {
        while let Some(message) = queue.recv().await {
            let close = matches!(message, Message::Close(_));
            if ws_out.send(message).await.is_err() {
                // The client closed first (or is gone): what is queued is
                // the answer to its close, which a failed send leaves
                // unsent.
                let _ = ws_out.close().await;
                return None;
            }
            if close {
                break;
            }
        }
        Some(ws_out)
    });
    // Upstream tells the client the connection is up with an empty
    // message on the lowest channel it writes to.
    let first = if streams.stdout {
        websocket::STDOUT
    } else if streams.stderr {
        websocket::STDERR
    } else {
        websocket::ERROR
    };
    let (ws_in_tx, ws_in_rx) = tokio::sync::oneshot::channel();
    let mut ws_in = Some((ws_in, ws_in_tx));
    if send(&out, first, &[]).await {
        let outcome = match open_session(agent, path).await {
            Ok(io) => session(io, streams, &out, &mut ws_in).await,
            Err(outcome) => outcome,
        };
        let _ = send(&out, websocket::ERROR, &outcome.status_json()).await;
        let _ = out
            .send(Message::Close(Some(CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            })))
            .await;
    }
    drop(out);
    let ws_out = writer.await.ok().flatten();
    // The reading half: still here if no session ran, else handed back
    // by the session's reader once it stops.
    let ws_in = match ws_in {
        Some((ws_in, _)) => Some(ws_in),
        None => ws_in_rx.await.ok(),
    };
    // Wait (a while) for the client's close, so it sees ours.
    if let (Some(ws_out), Some(ws_in)) = (ws_out, ws_in) {
        if let Ok(mut socket) = ws_out.reunite(ws_in) {
            let _ = tokio::time::timeout(CLOSE_WAIT, async {
                while let Some(Ok(_)) = socket.next().await {}
            })
            .await;
        }
    }
}

type ClientMessages<S> = futures::stream::SplitStream<WebSocketStream<S>>;

/// The streams of one session: opens them, copies until stdout, stderr
/// and the error stream have ended, and says how it ended. The client's
/// reading half is taken for the session and sent back when it ends.
async fn session<S>(
    io: Upgraded,
    streams: Streams,
    out: &mpsc::Sender<Message>,
    ws_in: &mut Option<(
        ClientMessages<S>,
        tokio::sync::oneshot::Sender<ClientMessages<S>>,
    )>,
) -> Outcome
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // The agent opens no streams of its own here: dropping `Incoming`
    // refuses any.
    let (conn, _) = spdy::Connection::client(TokioIo::new(io));
    let open = |kind: &'static str| {
        let conn = conn.clone();
        async move {
            conn.open(&[("streamtype", kind)])
                .await
                .map_err(|e| Outcome::Internal(e.to_string()))
        }
    };
    let opened = async {
        let error = open("error").await?;
        let stdin = match streams.stdin {
            true => Some(open("stdin").await?),
            false => None,
        };
        let stdout = match streams.stdout {
            true => Some(open("stdout").await?),
            false => None,
        };
        let stderr = match streams.stderr && !streams.tty {
            true => Some(open("stderr").await?),
            false => None,
        };
        let resize = match streams.tty {
            true => Some(open("resize").await?),
            false => None,
        };
        Ok::<_, Outcome>((error, stdin, stdout, stderr, resize))
    };
    let (error, stdin, stdout, stderr, resize) = match opened.await {
        Ok(s) => s,
        Err(outcome) => {
            tokio::spawn(async move { conn.close().await });
            return outcome;
        }
    };
    let gone = CancellationToken::new();
    // Only read: our side of the error, stdout and stderr streams is
    // closed (FIN) at once, as client-go does.
    let (error, _) = error.split();
    let error_task = tokio::spawn(read_error_stream(error, gone.clone()));
    let mut pumps = Vec::new();
    for (stream, channel) in [(stdout, websocket::STDOUT), (stderr, websocket::STDERR)] {
        if let Some(stream) = stream {
            let (read, _) = stream.split();
            pumps.push(tokio::spawn(pump(read, channel, out.clone(), gone.clone())));
        }
    }

    // The client's messages: stdin, resizes, stdin's close.
    let reader = ws_in.take().map(|(mut client, back)| {
        let gone = gone.clone();
        let mut stdin = stdin.map(|s| s.split().1);
        let mut resize = resize.map(|s| s.split().1);
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    m = client.next() => m,
                    _ = gone.cancelled() => break,
                };
                let data = match message {
                    Some(Ok(Message::Binary(data))) => data,
                    // Upstream's wsstream reads text frames as bytes too
                    // (the Python client writes str stdin as text).
                    Some(Ok(Message::Text(text))) => Bytes::from(text),
                    Some(Ok(Message::Close(_)) | Err(_)) | None => {
                        // The client is gone: end the session.
                        gone.cancel();
                        break;
                    }
                    Some(Ok(_)) => continue,
                };
                match websocket::parse(&data) {
                    Incoming::Data(websocket::STDIN, bytes) => {
                        if let Some(s) = stdin.as_mut() {
                            // The agent may stop reading; the session's end
                            // must not wait for it.
                            let wrote = tokio::select! {
                                w = s.write_all(bytes) => w.is_ok(),
                                _ = gone.cancelled() => break,
                            };
                            if !wrote {
                                stdin = None;
                            }
                        }
                    }
                    Incoming::Data(websocket::RESIZE, bytes) => {
                        if let Some(s) = resize.as_mut() {
                            // The agent may stop reading; the session's end
                            // must not wait for it.
                            let wrote = tokio::select! {
                                w = s.write_all(bytes) => w.is_ok(),
                                _ = gone.cancelled() => break,
                            };
                            if !wrote {
                                resize = None;
                            }
                        }
                    }
                    Incoming::Close(websocket::STDIN) => {
                        if let Some(mut s) = stdin.take() {
                            let _ = s.shutdown().await;
                        }
                    }
                    Incoming::Close(websocket::RESIZE) => {
                        if let Some(mut s) = resize.take() {
                            let _ = s.shutdown().await;
                        }
                    }
                    _ => {}
                }
            }
            let _ = back.send(client);
        })
    });

    for p in pumps {
        let _ = p.await;
    }
    let outcome = error_task
        .await
        .unwrap_or_else(|e| Outcome::Internal(e.to_string()));
    // Done: stop reading the client (it gets its reading half back) and
    // let the session close behind us.
    gone.cancel();
    if let Some(reader) = reader {
        let _ = reader.await;
    }
    tokio::spawn(async move { conn.close().await });
    outcome
}

// ---------------------------------------------------------------------------
// Port-forward: SPDY tunnelled in a WebSocket.

/// Upgrades `path` on the agent to SPDY with `protocols` (those the
/// client tunnels), then accepts the client's WebSocket with the
/// protocol the agent chose and splices the two. An agent that refuses
/// has its answer passed back, as upstream does.
pub async fn tunnel(
    agent: &Agent,
    path: &str,
    protocols: &[String],
    mut req: Request,
) -> ApiResult<Response> {
    let mut accepted = websocket::accept(&mut req, None)?;
    let answer = proxy::request_upgrade(agent, Method::POST, path, spdy_headers(protocols))
        .await
        .map_err(|e| proxy::dial_failed(&e))?;
    let (headers, io) = match answer {
        Answer::Refused(response) => return Ok(response),
        Answer::Switched { headers, io } => (headers, io),
    };
    if !is_spdy(&headers) {
        return Err(crate::status::ApiError::internal(
            "unable to upgrade: missing upgrade headers in response",
        ));
    }
    if let Some(chosen) = headers
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        accepted.set_protocol(&format!("{}{chosen}", websocket::SPDY_TUNNEL_PREFIX))?;
    }
    let (response, pending) = accepted.split();
    tokio::spawn(async move {
        if let Some(socket) = pending.socket().await {
            splice_tunnel(socket, TokioIo::new(io)).await;
        }
    });
    Ok(response)
}

/// Binary message payloads ↔ the agent's bytes, until both ways end.
pub async fn splice_tunnel<T>(socket: Socket, agent: T)
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut ws_out, mut ws_in) = socket.split();
    let (mut agent_read, mut agent_write) = tokio::io::split(agent);
    let up = tokio::spawn(async move {
        while let Some(message) = ws_in.next().await {
            match message {
                Ok(Message::Binary(data)) => {
                    if agent_write.write_all(&data).await.is_err() {
                        break;
                    }
                }
                // Text is no SPDY (client-go: "invalid message type").
                Ok(Message::Close(_) | Message::Text(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = agent_write.shutdown().await;
    });
    let mut buf = vec![0u8; CHUNK];
    loop {
        match agent_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if ws_out
                    .send(Message::Binary(Bytes::copy_from_slice(&buf[..n])))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = ws_out
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        })))
        .await;
    let mut up = up;
    if tokio::time::timeout(CLOSE_WAIT, &mut up).await.is_err() {
        up.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use axum::http::StatusCode;
    use tokio_tungstenite::tungstenite::protocol::Role;

    /// An agent on 127.0.0.1 (TLS, HTTP/1.1 upgrades) whose exec
    /// uppercases stdin to stdout, says "err" on stderr and exits 3; a
    /// container named `gone` is not found.
    async fn fake_agent() -> Agent {
        let rcgen::CertifiedKey { cert, signing_key } =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let (cert_pem, key_pem) = (cert.pem(), signing_key.serialize_pem());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![rustls::pki_types::CertificateDer::from(cert.der().to_vec())],
                rustls::pki_types::PrivateKeyDer::try_from(signing_key.serialize_der()).unwrap(),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let tls = acceptor.accept(tcp).await.unwrap();
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(
                            TokioIo::new(tls),
                            hyper::service::service_fn(agent_request),
                        )
                        .with_upgrades(),
                );
            }
        });
        Agent {
            tls: crate::agents::dial::kubelet_client_tls(&cert_pem, &key_pem).unwrap(),
            host: "127.0.0.1".into(),
            port,
            local: None,
        }
    }

    async fn agent_request(
        mut req: hyper::Request<hyper::body::Incoming>,
    ) -> Result<hyper::Response<String>, std::convert::Infallible> {
        let reply = |status: StatusCode, body: &str| {
            let mut r = hyper::Response::new(body.to_string());
            *r.status_mut() = status;
            Ok(r)
        };
        if req.uri().path().ends_with("/gone") {
            return reply(StatusCode::NOT_FOUND, "container not found (\"gone\")\n");
        }
        let headers = req.headers();
        if headers.get(header::UPGRADE).map(|v| v.as_bytes()) != Some(b"SPDY/3.1")
            || headers.get(PROTOCOL_VERSION).map(|v| v.as_bytes())
                != Some(AGENT_PROTOCOL.as_bytes())
            || req.method() != Method::POST
        {
            return reply(StatusCode::BAD_REQUEST, "bad upgrade");
        }
        let upgrade = hyper::upgrade::on(&mut req);
        let hold = req.uri().path().ends_with("/hold");
        tokio::spawn(async move {
            let io = upgrade.await.unwrap();
            if hold {
                return hold_session(io).await;
            }
            let (conn, mut incoming) = spdy::Connection::server(TokioIo::new(io));
            let mut by_type = std::collections::HashMap::new();
            while by_type.len() < 4 {
                let stream = incoming.accept().await.unwrap();
                let kind = format!("{:?}", stream.headers());
                let kind = ["error", "stdin", "stdout", "stderr"]
                    .into_iter()
                    .find(|k| kind.contains(&format!("\"{k}\"")))
                    .unwrap();
                by_type.insert(kind, stream);
            }
            let mut input = Vec::new();
            by_type
                .get_mut("stdin")
                .unwrap()
                .read_to_end(&mut input)
                .await
                .unwrap();
            let stdout = by_type.get_mut("stdout").unwrap();
            stdout.write_all(&input.to_ascii_uppercase()).await.unwrap();
            stdout.shutdown().await.unwrap();
            let stderr = by_type.get_mut("stderr").unwrap();
            stderr.write_all(b"err").await.unwrap();
            stderr.shutdown().await.unwrap();
            let error = by_type.get_mut("error").unwrap();
            error.write_all(br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#).await.unwrap();
            error.shutdown().await.unwrap();
            drop(by_type);
            conn.close().await;
        });
        let mut r = hyper::Response::new(String::new());
        *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        r.headers_mut()
            .insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
        r.headers_mut()
            .insert(PROTOCOL_VERSION, HeaderValue::from_static(AGENT_PROTOCOL));
        Ok(r)
    }

    /// An exec that never reads stdin: after a while it ends stdout,
    /// stderr and the error stream (Success) but keeps the connection and
    /// stdin open for a minute.
    async fn hold_session(io: hyper::upgrade::Upgraded) {
        let (conn, mut incoming) = spdy::Connection::server(TokioIo::new(io));
        let mut streams = Vec::new();
        for _ in 0..4 {
            streams.push(incoming.accept().await.unwrap());
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        for s in &mut streams {
            match s.headers().get("streamtype") {
                Some("error") => {
                    s.write_all(br#"{"metadata":{},"status":"Success"}"#)
                        .await
                        .unwrap();
                    s.shutdown().await.unwrap();
                }
                Some("stdout" | "stderr") => s.shutdown().await.unwrap(),
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop((streams, incoming, conn));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_session_ends_when_the_command_does_though_stdin_is_blocked() {
        let agent = fake_agent().await;
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = WebSocketStream::from_raw_socket(ours, Role::Server, None).await;
        let streams = Streams {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        tokio::spawn(async move {
            run_remote_command(server, &agent, "/exec/default/web/hold", streams).await
        });
        let client = WebSocketStream::from_raw_socket(theirs, Role::Client, None).await;
        let (mut sink, mut messages) = client.split();
        // Far more stdin than the agent, the connection and the session
        // buffer together: the session's write to stdin blocks.
        let sender = tokio::spawn(async move {
            let chunk = Bytes::from(websocket::frame(websocket::STDIN, &[b'x'; 32 * 1024]));
            for _ in 0..2048 {
                if sink.send(Message::Binary(chunk.clone())).await.is_err() {
                    return;
                }
            }
        });
        let status = tokio::time::timeout(Duration::from_secs(30), async {
            let mut status = Vec::new();
            while let Some(Ok(m)) = messages.next().await {
                match m {
                    Message::Binary(b) if b.first() == Some(&websocket::ERROR) => {
                        status.extend_from_slice(&b[1..])
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            status
        })
        .await
        .expect("the session ends once the command has");
        sender.abort();
        assert_eq!(status, Outcome::Success.status_json());
    }

    /// Runs a v5 session with the fake agent: sends `input` as client
    /// messages, returns every message the client got.
    async fn v5_session(path: &str, input: Vec<Message>) -> Vec<Message> {
        let agent = fake_agent().await;
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = WebSocketStream::from_raw_socket(ours, Role::Server, None).await;
        let streams = Streams {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        let path = path.to_string();
        tokio::spawn(async move { run_remote_command(server, &agent, &path, streams).await });
        let mut client = WebSocketStream::from_raw_socket(theirs, Role::Client, None).await;
        for m in input {
            client.send(m).await.unwrap();
        }
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(Ok(m)) = client.next().await {
                got.push(m);
            }
        })
        .await
        .expect("the session ends");
        got
    }

    #[tokio::test]
    async fn v5_is_translated_to_spdy_v4() {
        let got = v5_session(
            "/exec/default/web/app?command=x&stderr=1&stdin=1&stdout=1",
            vec![
                Message::Binary(Bytes::from_static(b"\x00hello ")),
                // The Python client sends str stdin as text frames.
                Message::text("\u{0}world"),
                Message::Binary(Bytes::from_static(&[255, 0])),
            ],
        )
        .await;
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let mut status = Vec::new();
        let mut closed = false;
        for (i, m) in got.iter().enumerate() {
            match m {
                Message::Binary(b) if i == 0 => assert_eq!(&b[..], [websocket::STDOUT]),
                Message::Binary(b) => match b.first() {
                    Some(&websocket::STDOUT) => stdout.extend_from_slice(&b[1..]),
                    Some(&websocket::STDERR) => stderr.extend_from_slice(&b[1..]),
                    Some(&websocket::ERROR) => status.extend_from_slice(&b[1..]),
                    other => panic!("channel {other:?}"),
                },
                Message::Close(frame) => {
                    assert_eq!(frame.as_ref().unwrap().code, CloseCode::Normal);
                    closed = true;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(stdout, b"HELLO WORLD");
        assert_eq!(stderr, b"err");
        assert_eq!(status, Outcome::Exit(3).status_json());
        assert!(closed);
    }

    #[tokio::test]
    async fn a_close_mid_stream_is_answered_with_a_close() {
        let got = v5_session(
            "/exec/default/web/app?command=x&stderr=1&stdin=1&stdout=1",
            vec![
                Message::Binary(Bytes::from_static(b"\x00part")),
                Message::Close(None),
            ],
        )
        .await;
        assert!(matches!(got.last(), Some(Message::Close(_))), "{got:?}");
    }

    #[tokio::test]
    async fn a_refused_upgrade_is_an_internal_error_on_the_error_channel() {
        let got = v5_session("/exec/default/web/gone", vec![]).await;
        let status = got
            .iter()
            .find_map(|m| match m {
                Message::Binary(b) if b.first() == Some(&websocket::ERROR) => {
                    Some(serde_json::from_slice::<Value>(&b[1..]).unwrap())
                }
                _ => None,
            })
            .expect("a status");
        assert_eq!(
            status["message"],
            "Internal error occurred: unable to upgrade connection: container not found (\"gone\")"
        );
        assert_eq!(status["code"], 500);
        assert!(matches!(got.last(), Some(Message::Close(_))));
    }

    #[test]
    fn error_stream_outcomes_are_upstreams() {
        assert_eq!(decode_error_stream(b""), Outcome::Success);
        assert_eq!(
            decode_error_stream(br#"{"metadata":{},"status":"Success"}"#),
            Outcome::Success
        );
        let exit = br#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#;
        assert_eq!(decode_error_stream(exit), Outcome::Exit(3));
        assert_eq!(
            decode_error_stream(br#"{"status":"Failure","reason":"NonZeroExitCode"}"#),
            Outcome::Internal("error stream protocol error: details must be set".into())
        );
        assert_eq!(
            decode_error_stream(
                br#"{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"300"}]}}"#
            ),
            Outcome::Internal("error stream protocol error: invalid exit code value \"300\"".into())
        );
        assert_eq!(
            decode_error_stream(
                br#"{"status":"Failure","message":"Internal error occurred: error executing command in container: boom","reason":"InternalError"}"#
            ),
            Outcome::Internal("Internal error occurred: error executing command in container: boom".into())
        );
        assert!(
            matches!(decode_error_stream(b"nope"), Outcome::Internal(m) if m.starts_with("error stream protocol error: "))
        );
    }

    #[test]
    fn statuses_are_written_as_upstreams_translator_does() {
        assert_eq!(
            String::from_utf8(Outcome::Success.status_json()).unwrap(),
            r#"{"metadata":{},"status":"Success"}"#
        );
        assert_eq!(
            String::from_utf8(Outcome::Exit(3).status_json()).unwrap(),
            r#"{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: command terminated with exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}"#
        );
        assert_eq!(
            String::from_utf8(Outcome::Internal("boom".into()).status_json()).unwrap(),
            r#"{"metadata":{},"status":"Failure","message":"Internal error occurred: boom","reason":"InternalError","details":{"causes":[{"message":"boom"}]},"code":500}"#
        );
        assert_eq!(
            refusal(b"container not found (\"c\")\n"),
            Outcome::Internal("unable to upgrade connection: container not found (\"c\")".into())
        );
        let status =
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"x","code":404}"#;
        assert!(matches!(refusal(status), Outcome::Status(_)));
    }
}
