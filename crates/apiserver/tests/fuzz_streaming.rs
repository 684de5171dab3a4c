//! A hostile-input pass over pods/exec, pods/attach and pods/portforward
//! through the real server over TLS, with a fake node agent (TLS, HTTP/1.1
//! upgrades; SPDY exec that echoes stdin to stdout and ends with Success,
//! SPDY port-forward that echoes data streams, WebSocket upgrades for the
//! channel protocols it knows, a plain-text refusal for anything else):
//!
//! - query parameters: repeated, empty, huge, non-UTF-8 and truncated
//!   percent-encodings, ports out of range, negative, empty and many;
//! - upgrade headers: none, WebSocket without a key or with a wrong or no
//!   version, unknown subprotocols only, SPDY without
//!   X-Stream-Protocol-Version, bytes that are no text;
//! - a seeded random mix of the two;
//! - WebSocket v5 sessions (translated to SPDY here): messages with no
//!   channel byte, unknown channels, resize messages of garbage and of
//!   1 MiB, text messages, a close mid-stream, a 16 MiB message, and
//!   junk after the upgrade of the SPDY pass-through and of the
//!   port-forward tunnel.
//!
//! No answer is a 5xx; a refusal is a Status with the answer's code
//! (or the agent's own refusal, passed back as upstream does); every
//! session ends; nothing the requests sent changed a stored object.
//! `SKIFF_FUZZ_CASES` (default 200) random cases, `SKIFF_FUZZ_SEED` to
//! replay another run.

mod support;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use http::header;
use hyper::body::Incoming as HyperBody;
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use skiff_apiserver::streaming::spdy;
use support::TestServer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

type Tls = TlsStream<tokio::net::TcpStream>;

const STEP: Duration = Duration::from_secs(30);
const NS: &str = "fz";
const SUCCESS: &[u8] = br#"{"metadata":{},"status":"Success"}"#;
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(STEP, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

// ---------------------------------------------------------------------------
// The fake node agent.

/// Request targets the agent was sent, in order.
type Seen = Arc<Mutex<Vec<String>>>;

fn plain(code: u16, body: &str) -> hyper::Response<String> {
    let mut r = hyper::Response::new(format!("fake agent: {body}"));
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    r
}

fn flag(query: &str, name: &str) -> bool {
    query
        .split('&')
        .any(|p| p == format!("{name}=1") || p == format!("{name}=true"))
}

/// The kubelet's exec over SPDY, reduced: the streams the query asks for;
/// stdin (up to 1 MiB) echoed to stdout; resizes read and dropped;
/// Success on the error stream, then GOAWAY.
async fn fake_exec(io: hyper::upgrade::Upgraded, query: String) {
    let (conn, mut incoming) = spdy::Connection::server(TokioIo::new(io));
    let tty = flag(&query, "tty");
    let want = 1
        + usize::from(flag(&query, "stdin"))
        + usize::from(flag(&query, "stdout"))
        + usize::from(flag(&query, "stderr") && !tty)
        + usize::from(tty);
    let mut streams = HashMap::new();
    while streams.len() < want {
        match tokio::time::timeout(STEP, incoming.accept()).await {
            Ok(Some(s)) => {
                let kind = s.headers().get("streamtype").unwrap_or("").to_string();
                streams.insert(kind, s);
            }
            _ => return,
        }
    }
    if let Some(mut resize) = streams.remove("resize") {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut resize, &mut tokio::io::sink()).await;
        });
    }
    let mut input = Vec::new();
    if let Some(stdin) = streams.remove("stdin") {
        let mut limited = stdin.take(1 << 20);
        let _ = tokio::time::timeout(STEP, limited.read_to_end(&mut input)).await;
    }
    if let Some(mut s) = streams.remove("stdout") {
        let _ = s.write_all(&input).await;
        let _ = s.shutdown().await;
    }
    if let Some(mut s) = streams.remove("stderr") {
        let _ = s.shutdown().await;
    }
    if let Some(mut s) = streams.remove("error") {
        let _ = s.write_all(SUCCESS).await;
        let _ = s.shutdown().await;
    }
    drop(streams);
    conn.close().await;
}

/// Port-forward over SPDY: data streams echo, error streams stay quiet.
async fn fake_forward(io: hyper::upgrade::Upgraded) {
    let (_conn, mut incoming) = spdy::Connection::server(TokioIo::new(io));
    let mut quiet = Vec::new();
    while let Some(s) = incoming.accept().await {
        if s.headers().get("streamtype") == Some("data") {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        } else {
            quiet.push(s);
        }
    }
}

async fn agent_request(
    seen: Seen,
    mut req: hyper::Request<HyperBody>,
) -> Result<hyper::Response<String>, Infallible> {
    let target = req.uri().to_string();
    seen.lock().unwrap().push(target);
    let headers = req.headers();
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let values = |name: header::HeaderName| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|p| p.trim().to_string())
            .collect()
    };
    let query = req.uri().query().unwrap_or("").to_string();
    let mut answer = hyper::Response::new(String::new());
    *answer.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
    let h = answer.headers_mut();
    h.insert(header::CONNECTION, "Upgrade".parse().unwrap());
    if upgrade == "spdy/3.1" {
        let offered = values(header::HeaderName::from_static("x-stream-protocol-version"));
        let Some(chosen) = ["v4.channel.k8s.io", "portforward.k8s.io"]
            .into_iter()
            .find(|p| offered.iter().any(|o| o == p))
        else {
            return Ok(plain(403, "no streaming protocol I speak was offered"));
        };
        h.insert(header::UPGRADE, "SPDY/3.1".parse().unwrap());
        h.insert("x-stream-protocol-version", chosen.parse().unwrap());
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            if let Ok(io) = on.await {
                if chosen == "portforward.k8s.io" {
                    fake_forward(io).await
                } else {
                    fake_exec(io, query).await
                }
            }
        });
        return Ok(answer);
    }
    if upgrade == "websocket" {
        let offered = values(header::SEC_WEBSOCKET_PROTOCOL);
        let Some(chosen) = [
            "v4.channel.k8s.io",
            "channel.k8s.io",
            "v4.base64.channel.k8s.io",
        ]
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p)) else {
            return Ok(plain(400, "no WebSocket protocol I speak was offered"));
        };
        let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
            return Ok(plain(400, "no Sec-WebSocket-Key"));
        };
        let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
        h.insert(header::UPGRADE, "websocket".parse().unwrap());
        h.insert(header::SEC_WEBSOCKET_ACCEPT, accept.parse().unwrap());
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, chosen.parse().unwrap());
        let on = hyper::upgrade::on(&mut req);
        // Accepted, then closed: what is said on it is not tested here.
        tokio::spawn(async move {
            let _ = on.await;
        });
        return Ok(answer);
    }
    Ok(plain(400, "not an upgrade I know"))
}

/// Starts the agent on 127.0.0.1; its port and what it was sent.
async fn fake_agent() -> (u16, Seen) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert.der().to_vec())],
            rustls::pki_types::PrivateKeyDer::try_from(signing_key.serialize_der()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, log) = (acceptor.clone(), log.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req| agent_request(log.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (port, seen)
}

// ---------------------------------------------------------------------------
// A raw HTTP/1.1 client, so that any header can be sent.

/// A TLS connection to the test server as its admin (client certificate).
async fn connect(server: &TestServer) -> Tls {
    use rustls::pki_types::pem::PemObject;
    let pki = server.dir.path().join("pki");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(pki.join("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(pki.join("admin.crt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(pki.join("admin.key")).unwrap();
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let addr = server.url.trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    connector
        .connect("127.0.0.1".try_into().unwrap(), tcp)
        .await
        .unwrap()
}

/// An answer: its code, head, body (none for a 101) and, for a 101, the
/// connection.
struct Answer {
    code: u16,
    head: String,
    body: Vec<u8>,
    io: Option<Tls>,
}

impl Answer {
    fn text(&self) -> String {
        format!(
            "{} {}",
            self.head.lines().next().unwrap_or(""),
            String::from_utf8_lossy(&self.body[..self.body.len().min(500)])
        )
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    /// The Status of a refusal (`None` for the agent's own refusals).
    fn status(&self) -> Option<Value> {
        if self.body.starts_with(b"fake agent:") {
            return None;
        }
        let status: Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not a Status: {}", self.text()));
        assert_eq!(status["kind"], "Status", "{}", self.text());
        assert_eq!(status["code"], self.code, "{}", self.text());
        Some(status)
    }
}

/// Sends `method target` with `headers` (raw bytes: anything goes) and
/// reads the answer; the head is read a byte at a time so that nothing
/// after a 101 is taken.
async fn send(server: &TestServer, method: &str, target: &str, headers: &[Vec<u8>]) -> Answer {
    let mut io = connect(server).await;
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n").into_bytes();
    for h in headers {
        out.extend_from_slice(h);
        out.extend_from_slice(b"\r\n");
    }
    if method != "GET" {
        out.extend_from_slice(b"Content-Length: 0\r\n");
    }
    out.extend_from_slice(b"\r\n");
    within("send", io.write_all(&out)).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = within("read the head", io.read(&mut byte)).await.unwrap();
        assert!(n > 0, "closed before an answer to {method} {target:.200}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let code: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let mut answer = Answer {
        code,
        head,
        body: Vec::new(),
        io: None,
    };
    if code == 101 {
        answer.io = Some(io);
        return answer;
    }
    if let Some(len) = answer.header("content-length") {
        let mut body = vec![0u8; len.parse().unwrap()];
        within("read the body", io.read_exact(&mut body))
            .await
            .unwrap();
        answer.body = body;
    } else if answer
        .header("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        let mut raw = Vec::new();
        while !raw.ends_with(b"0\r\n\r\n") {
            let n = within("read chunks", io.read(&mut byte)).await.unwrap();
            if n == 0 {
                break;
            }
            raw.push(byte[0]);
        }
        answer.body = dechunk(&raw);
    } else {
        let _ = within("read to EOF", io.read_to_end(&mut answer.body)).await;
    }
    answer
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = raw.windows(2).position(|w| w == b"\r\n") {
        let len =
            usize::from_str_radix(std::str::from_utf8(&raw[..i]).unwrap().trim(), 16).unwrap_or(0);
        if len == 0 {
            break;
        }
        out.extend_from_slice(&raw[i + 2..i + 2 + len]);
        raw = &raw[i + 4 + len..];
    }
    out
}

/// A JSON request; its code and body.
async fn api(server: &TestServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let body = body.to_string();
    let mut io = connect(server).await;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    io.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = within("api", io.read_to_end(&mut raw)).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest.as_bytes())
    } else {
        rest.as_bytes().to_vec()
    };
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn get(server: &TestServer, path: &str) -> (u16, Value) {
    let a = send(server, "GET", path, &[b"Connection: close".to_vec()]).await;
    (
        a.code,
        serde_json::from_slice(&a.body).unwrap_or(Value::Null),
    )
}

// ---------------------------------------------------------------------------
// Header sets.

fn h(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn spdy(protocol: Option<&str>) -> Vec<Vec<u8>> {
    let mut out = vec![h("Connection: Upgrade"), h("Upgrade: SPDY/3.1")];
    if let Some(p) = protocol {
        out.push(h(&format!("X-Stream-Protocol-Version: {p}")));
    }
    out
}

/// A WebSocket handshake offering `protocols`; `key` and `version` as
/// given (None: the header is left out).
fn ws(protocols: &[&str], key: Option<&str>, version: Option<&str>) -> Vec<Vec<u8>> {
    let mut out = vec![h("Connection: Upgrade"), h("Upgrade: websocket")];
    if let Some(k) = key {
        out.push(h(&format!("Sec-WebSocket-Key: {k}")));
    }
    if let Some(v) = version {
        out.push(h(&format!("Sec-WebSocket-Version: {v}")));
    }
    if !protocols.is_empty() {
        out.push(h(&format!(
            "Sec-WebSocket-Protocol: {}",
            protocols.join(", ")
        )));
    }
    out
}

fn ws_ok(protocols: &[&str]) -> Vec<Vec<u8>> {
    ws(protocols, Some(WS_KEY), Some("13"))
}

fn exec_path(pod: &str, sub: &str, query: &str) -> String {
    format!("/api/v1/namespaces/{NS}/pods/{pod}/{sub}?{query}")
}

// ---------------------------------------------------------------------------
// Setup.

async fn create(server: &TestServer, path: &str, body: Value) {
    let (code, got) = api(server, "POST", path, body).await;
    assert_eq!(code, 201, "{path}: {got}");
}

/// The namespace, a node whose agent is `port`, and pods: `p` (one
/// container `c`), `two` (containers `a` and `b`) on it, `pending` on
/// none.
async fn setup(server: &TestServer, port: u16) {
    create(
        server,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    create(
        server,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
    )
    .await;
    let (code, got) = api(
        server,
        "PATCH",
        "/api/v1/nodes/n1/status",
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}),
    )
    .await;
    assert_eq!(code, 200, "{got}");
    let pod = |name: &str, node: Option<&str>, containers: &[&str]| {
        let containers: Vec<Value> = containers
            .iter()
            .map(|c| json!({"name": c, "image": "busybox"}))
            .collect();
        let mut spec = json!({"containers": containers});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    };
    let pods = format!("/api/v1/namespaces/{NS}/pods");
    create(server, &pods, pod("p", Some("n1"), &["c"])).await;
    create(server, &pods, pod("two", Some("n1"), &["a", "b"])).await;
    create(server, &pods, pod("pending", None, &["c"])).await;
}

/// Every stored object of the test: resourceVersions by path.
async fn stored(server: &TestServer) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for path in [
        format!("/api/v1/namespaces/{NS}/pods"),
        "/api/v1/nodes".to_string(),
    ] {
        let (code, list) = get(server, &path).await;
        assert_eq!(code, 200, "{path}");
        for item in list["items"].as_array().unwrap() {
            out.push((
                item["metadata"]["name"].as_str().unwrap().to_string(),
                item["metadata"]["resourceVersion"].clone(),
            ));
        }
    }
    out
}

/// The invariant of every answer: no 5xx; a refusal is a Status (or the
/// agent's words).
fn check(what: &str, a: &Answer) {
    assert!(a.code < 500, "{what}: server error: {}", a.text());
    if a.code >= 400 {
        a.status();
    }
}

// ---------------------------------------------------------------------------
// The cases.

struct Case {
    what: &'static str,
    method: &'static str,
    target: String,
    headers: Vec<Vec<u8>>,
    code: u16,
    /// In the Status's message (or the agent's answer).
    message: Option<String>,
}

fn case(what: &'static str, target: String, headers: Vec<Vec<u8>>, code: u16) -> Case {
    Case {
        what,
        method: "GET",
        target,
        headers,
        code,
        message: None,
    }
}

impl Case {
    fn says(mut self, message: impl Into<String>) -> Case {
        self.message = Some(message.into());
        self
    }
    fn post(mut self) -> Case {
        self.method = "POST";
        self
    }
}

fn table() -> Vec<Case> {
    let v4 = Some("v4.channel.k8s.io");
    let pf = Some("portforward.k8s.io");
    let exec = |q: &str| exec_path("p", "exec", q);
    let forward = |q: &str| exec_path("p", "portforward", q);
    let convert = |p: &str, why: &str| {
        format!("cannot convert to []int32: strconv.ParseUint: parsing \"{p}\": {why}")
    };
    vec![
        // exec and attach: the query.
        case(
            "repeated parameters: the first counts",
            exec("command=echo&command=hi&container=c&container=zzz&stdout=1&stdout=0"),
            spdy(v4),
            101,
        ),
        case(
            "empty values",
            exec("command=&container=&stdin=&stdout=1&&=&=x"),
            spdy(v4),
            101,
        ),
        case(
            "a 60 KB command",
            exec(&format!("stdout=1&command={}", "a".repeat(60_000))),
            spdy(v4),
            101,
        ),
        case(
            "a command the agent's URL cannot hold",
            exec(&format!("stdout=1&command={}", "!".repeat(30_000))),
            spdy(v4),
            400,
        )
        .says("the request for the node is too long: its URL would be "),
        case(
            "a non-UTF-8 container name",
            exec("container=%ff%fe&stdout=1"),
            spdy(v4),
            400,
        )
        .says("container \u{fffd}\u{fffd} is not valid for pod p"),
        case(
            "non-UTF-8 and truncated percent-encodings in the command",
            exec("command=%C3%28&command=%&command=%zz&command=%4&stdout=1"),
            spdy(v4),
            101,
        ),
        case(
            "a TTY with stdin",
            exec("stdin=1&stdout=1&tty=1&command=sh"),
            spdy(v4),
            101,
        ),
        case("POST", exec("stdout=1"), spdy(v4), 101).post(),
        case(
            "no container named in a pod of two",
            exec_path("two", "exec", "stdout=1"),
            spdy(v4),
            400,
        )
        .says("a container name must be specified for pod two, choose one of: [a b]"),
        case(
            "a pod on no node",
            exec_path("pending", "exec", "stdout=1"),
            spdy(v4),
            400,
        )
        .says("pod pending does not have a host assigned"),
        case(
            "no such pod",
            exec_path("nope", "exec", "stdout=1"),
            spdy(v4),
            404,
        )
        .says("pods \"nope\" not found"),
        case(
            "attach with a NUL container",
            exec_path("p", "attach", "container=%00&stdout=1"),
            spdy(v4),
            400,
        ),
        case(
            "attach",
            exec_path("p", "attach", "stdin=1&stdout=1&command=ignored"),
            spdy(v4),
            101,
        ),
        // exec: the upgrade headers.
        case("no upgrade", exec("stdout=1"), vec![], 400).says("Upgrade request required"),
        case(
            "Upgrade without Connection: Upgrade",
            exec("stdout=1"),
            vec![h("Connection: keep-alive"), h("Upgrade: websocket")],
            400,
        )
        .says("Upgrade request required"),
        case(
            "WebSocket v5 without a key",
            exec("stdout=1"),
            ws(&["v5.channel.k8s.io"], None, Some("13")),
            400,
        )
        .says(
            "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header is missing or blank",
        ),
        case(
            "WebSocket v5 with an empty key",
            exec("stdout=1"),
            ws(&["v5.channel.k8s.io"], Some(""), Some("13")),
            400,
        )
        .says("'Sec-WebSocket-Key' header is missing or blank"),
        case(
            "WebSocket v5, version 8",
            exec("stdout=1"),
            ws(&["v5.channel.k8s.io"], Some(WS_KEY), Some("8")),
            400,
        )
        .says("websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header"),
        case(
            "WebSocket v5, no version",
            exec("stdout=1"),
            ws(&["v5.channel.k8s.io"], Some(WS_KEY), None),
            400,
        )
        .says("unsupported version"),
        case(
            "WebSocket v5",
            exec("stdout=1"),
            ws_ok(&["v5.channel.k8s.io"]),
            101,
        ),
        case(
            "WebSocket v5 among others, Upgrade in another case",
            exec("stdout=1"),
            vec![
                h("Connection: keep-alive, Upgrade"),
                h("Upgrade: WebSocket"),
                h(&format!("Sec-WebSocket-Key: {WS_KEY}")),
                h("Sec-WebSocket-Version: 13"),
                h("Sec-WebSocket-Protocol: , bogus,v5.channel.k8s.io,,"),
            ],
            101,
        ),
        case(
            "WebSocket with unknown subprotocols only (the agent's call)",
            exec("stdout=1"),
            ws_ok(&["foo", "bar.k8s.io"]),
            400,
        )
        .says("fake agent: no WebSocket protocol I speak was offered"),
        case(
            "WebSocket with no subprotocol",
            exec("stdout=1"),
            ws_ok(&[]),
            400,
        )
        .says("fake agent:"),
        case(
            "WebSocket subprotocols that are no text",
            exec("stdout=1"),
            {
                let mut hs = ws_ok(&[]);
                hs.push(b"Sec-WebSocket-Protocol: v5.channel.k8s.io\xff\xfe".to_vec());
                hs
            },
            400,
        )
        .says("fake agent:"),
        case(
            "WebSocket v4, passed through",
            exec("stdout=1"),
            ws_ok(&["v4.channel.k8s.io"]),
            101,
        ),
        case(
            "SPDY without X-Stream-Protocol-Version (the agent's call)",
            exec("stdout=1"),
            spdy(None),
            403,
        )
        .says("fake agent: no streaming protocol I speak was offered"),
        case(
            "an upgrade to something else",
            exec("stdout=1"),
            vec![h("Connection: Upgrade"), h("Upgrade: h2c")],
            400,
        )
        .says("fake agent: not an upgrade I know"),
        // portforward: the query.
        case("ports=99999", forward("ports=99999"), spdy(pf), 400)
            .says(convert("99999", "value out of range")),
        case("ports=-1", forward("ports=-1"), spdy(pf), 400).says(convert("-1", "invalid syntax")),
        case("ports=", forward("ports="), spdy(pf), 400).says(convert("", "invalid syntax")),
        case("ports=+80", forward("ports=%2B80"), spdy(pf), 400)
            .says(convert("+80", "invalid syntax")),
        case("ports=80,,81", forward("ports=80,,81"), spdy(pf), 400)
            .says(convert("", "invalid syntax")),
        case("ports=%ff", forward("ports=%ff"), spdy(pf), 400)
            .says(convert("\u{fffd}", "invalid syntax")),
        case(
            "a port of 40 digits",
            forward(&format!("ports={}", "9".repeat(40))),
            spdy(pf),
            400,
        )
        .says("value out of range"),
        case(
            "20000 ports",
            forward(&format!("ports={}", vec!["1"; 20_000].join(","))),
            spdy(pf),
            400,
        )
        .says("the request for the node is too long"),
        case(
            "many ports that fit",
            forward(&format!("ports={}", vec!["8080"; 2000].join(","))),
            spdy(pf),
            101,
        ),
        case(
            "ports=80&ports=81",
            forward("ports=80&ports=81"),
            spdy(pf),
            101,
        ),
        case(
            "ports=0 (the agent's call)",
            forward("ports=0"),
            spdy(pf),
            101,
        ),
        case("no ports", forward(""), spdy(pf), 101),
        case(
            "a tunnel without a key",
            forward("ports=80"),
            ws(&["SPDY/3.1+portforward.k8s.io"], None, Some("13")),
            400,
        )
        .says("'Sec-WebSocket-Key' header is missing or blank"),
        case(
            "a tunnel, wrong version",
            forward("ports=80"),
            ws(&["SPDY/3.1+portforward.k8s.io"], Some(WS_KEY), Some("99")),
            400,
        )
        .says("unsupported version"),
        case(
            "a tunnel",
            forward("ports=80"),
            ws_ok(&["SPDY/3.1+portforward.k8s.io"]),
            101,
        ),
        case(
            "a tunnel of a protocol the agent does not speak",
            forward("ports=80"),
            ws_ok(&["SPDY/3.1+bogus.k8s.io"]),
            403,
        )
        .says("fake agent:"),
        case(
            "port-forward over WebSocket v4, passed through",
            forward("ports=80"),
            ws_ok(&["v4.channel.k8s.io"]),
            101,
        ),
    ]
}

/// Random queries and header sets, from the pieces above and junk.
fn random_case(rng: &mut StdRng) -> (String, Vec<Vec<u8>>) {
    const KEYS: &[&str] = &[
        "command",
        "container",
        "stdin",
        "stdout",
        "stderr",
        "tty",
        "ports",
        "port",
        "x",
        "",
        "%ff",
        "command%00",
    ];
    const VALUES: &[&str] = &[
        "",
        "1",
        "0",
        "true",
        "false",
        "c",
        "zzz",
        "%ff",
        "%",
        "%4",
        "%zz",
        "+",
        "-1",
        "99999",
        "0",
        "80",
        "80,",
        ",",
        "%2C",
        "%00",
        "%7F",
        "8080,443",
        "9999999999999999999999",
    ];
    let mut pairs = Vec::new();
    for _ in 0..rng.random_range(0..8) {
        let key = KEYS[rng.random_range(0..KEYS.len())];
        let value = match rng.random_range(0..10) {
            0 => "y".repeat(rng.random_range(1000..20_000)),
            1 => vec!["1"; rng.random_range(1..3000)].join(","),
            _ => VALUES[rng.random_range(0..VALUES.len())].to_string(),
        };
        pairs.push(format!("{key}={value}"));
    }
    let pod = ["p", "two", "pending", "nope"][rng.random_range(0..4)];
    let sub = ["exec", "attach", "portforward"][rng.random_range(0..3)];
    let target = exec_path(pod, sub, &pairs.join("&"));
    let protocols: &[&str] = match rng.random_range(0..6) {
        0 => &["v5.channel.k8s.io"],
        1 => &["v5.channel.k8s.io", "v4.channel.k8s.io"],
        2 => &["SPDY/3.1+portforward.k8s.io"],
        3 => &["v4.channel.k8s.io"],
        4 => &["junk"],
        _ => &[],
    };
    let headers = match rng.random_range(0..8) {
        0 => vec![],
        1 => spdy(Some("v4.channel.k8s.io")),
        2 => spdy(Some("portforward.k8s.io")),
        3 => spdy(None),
        4 => ws(protocols, None, Some("13")),
        5 => ws(
            protocols,
            Some(WS_KEY),
            Some(["13", "8", ""][rng.random_range(0..3)]),
        ),
        6 => ws_ok(protocols),
        _ => {
            let mut hs = ws_ok(protocols);
            hs.push(h(&format!(
                "Sec-WebSocket-Protocol: {}",
                "x,".repeat(rng.random_range(1..5000))
            )));
            hs
        }
    };
    (target, headers)
}

// ---------------------------------------------------------------------------
// v5 sessions.

/// What a v5 client got before the session ended.
#[derive(Debug, Default)]
struct Got {
    stdout: Vec<u8>,
    status: Option<Value>,
    closed: bool,
}

async fn v5(server: &TestServer, query: &str) -> WebSocketStream<Tls> {
    let a = send(
        server,
        "GET",
        &exec_path("p", "exec", query),
        &ws_ok(&["v5.channel.k8s.io"]),
    )
    .await;
    assert_eq!(a.code, 101, "{}", a.text());
    assert_eq!(
        a.header("sec-websocket-protocol").as_deref(),
        Some("v5.channel.k8s.io")
    );
    WebSocketStream::from_raw_socket(a.io.unwrap(), Role::Client, None).await
}

/// Sends `input` (from another task, so that a server that stops reading
/// cannot stall the test) and reads until the session ends.
async fn v5_session(server: &TestServer, query: &str, input: Vec<Message>) -> Got {
    let socket = v5(server, query).await;
    let (mut sink, mut messages) = socket.split();
    let sender = tokio::spawn(async move {
        for m in input {
            if sink.send(m).await.is_err() {
                break;
            }
        }
        sink
    });
    let mut got = Got::default();
    within("the v5 session ends", async {
        while let Some(Ok(m)) = messages.next().await {
            match m {
                Message::Binary(b) => match b.first() {
                    Some(1) => got.stdout.extend_from_slice(&b[1..]),
                    Some(3) => {
                        got.status = Some(serde_json::from_slice(&b[1..]).expect("a Status"))
                    }
                    _ => {}
                },
                Message::Close(_) => got.closed = true,
                _ => {}
            }
        }
    })
    .await;
    sender.abort();
    got
}

fn bin(b: &[u8]) -> Message {
    Message::Binary(Bytes::copy_from_slice(b))
}

fn stdin(data: &[u8]) -> Message {
    let mut m = vec![0u8];
    m.extend_from_slice(data);
    Message::Binary(Bytes::from(m))
}

async fn v5_sessions(server: &TestServer) {
    let success = Some(serde_json::from_slice::<Value>(SUCCESS).unwrap());

    // Messages with no channel byte, unknown channels, closes of unknown
    // channels, pings: ignored; stdin still flows.
    let got = v5_session(
        server,
        "stdin=1&stdout=1&command=cat",
        vec![
            bin(b""),
            bin(&[7, b'x']),
            bin(&[255]),
            bin(&[255, 9]),
            bin(&[3, b'{']),
            Message::Ping(Bytes::from_static(b"p")),
            stdin(b"hello "),
            // Text frames are stdin too (the Python client's).
            Message::text("\u{0}world"),
            Message::text(""),
            bin(&[255, 0]),
        ],
    )
    .await;
    assert_eq!(got.stdout, b"hello world");
    assert_eq!(got.status, success);
    assert!(got.closed);

    // Resize messages of garbage, absurd numbers and 1 MiB of nesting.
    let nested = format!("{}{}", "[".repeat(1 << 19), "]".repeat(1 << 19));
    let mut resize = vec![4u8];
    resize.extend_from_slice(nested.as_bytes());
    let got = v5_session(
        server,
        "stdin=1&stdout=1&tty=1&command=sh",
        vec![
            bin(b"\x04garbage"),
            bin(b"\x04{\"Width\": 1e100, \"Height\": -1}"),
            bin(&[4]),
            Message::Binary(Bytes::from(resize)),
            stdin(b"still here"),
            bin(&[255, 4]),
            bin(&[4, b'{']),
            bin(&[255, 0]),
        ],
    )
    .await;
    assert_eq!(got.stdout, b"still here");
    assert_eq!(got.status, success);

    // A close mid-stream: the session ends (the client went away).
    let got = v5_session(
        server,
        "stdin=1&stdout=1&command=cat",
        vec![stdin(b"part"), Message::Close(None)],
    )
    .await;
    assert!(got.closed, "{got:?}");

    // A 16 MiB message (one frame over tungstenite's 16 MiB limit): the
    // session ends instead of buffering it.
    // Channel 0 (stdin) and 16 MiB of zeros.
    let huge = vec![0u8; 16 * 1024 * 1024 + 1];
    let _ = v5_session(
        server,
        "stdin=1&stdout=1&command=cat",
        vec![Message::Binary(Bytes::from(huge))],
    )
    .await;

    // A client that goes away at once, and one that never sends.
    drop(v5(server, "stdin=1&stdout=1&command=cat").await);
    let got = v5_session(server, "stdout=1&command=true", vec![]).await;
    assert_eq!(got.status, success);
}

/// Junk after the upgrade of the pass-through and of the tunnel: each
/// connection ends, none hangs.
async fn junk_after_upgrades(server: &TestServer, rng: &mut StdRng) {
    // SPDY pass-through: the agent gets the junk and ends the session.
    for _ in 0..5 {
        let a = send(
            server,
            "POST",
            &exec_path("p", "exec", "stdin=1&stdout=1"),
            &spdy(Some("v4.channel.k8s.io")),
        )
        .await;
        assert_eq!(a.code, 101, "{}", a.text());
        let mut io = a.io.unwrap();
        // A SPDY/2 frame first, so that the agent's session fails at once
        // (a truncated frame would wait for its rest, as spdystream does).
        let mut junk = vec![0x80, 0x02, 0x00, 0x01, 0, 0, 0, 0];
        junk.extend((0..rng.random_range(0..4096)).map(|_| rng.random::<u8>()));
        let _ = io.write_all(&junk).await;
        let mut sink = Vec::new();
        within("the pass-through ends", read_some(&mut io, &mut sink)).await;
    }
    // The port-forward tunnel: a text message, random binary, a close.
    for round in 0..3 {
        let a = send(
            server,
            "GET",
            &exec_path("p", "portforward", "ports=80"),
            &ws_ok(&["SPDY/3.1+portforward.k8s.io"]),
        )
        .await;
        assert_eq!(a.code, 101, "{}", a.text());
        assert_eq!(
            a.header("sec-websocket-protocol").as_deref(),
            Some("SPDY/3.1+portforward.k8s.io")
        );
        let mut socket = WebSocketStream::from_raw_socket(a.io.unwrap(), Role::Client, None).await;
        let m = match round {
            0 => Message::text("not SPDY"),
            1 => {
                let mut junk = vec![0x80, 0x02, 0x00, 0x01, 0, 0, 0, 0];
                junk.extend((0..2048).map(|_| rng.random::<u8>()));
                bin(&junk)
            }
            _ => Message::Close(None),
        };
        let _ = socket.send(m).await;
        within("the tunnel ends", async {
            while let Some(Ok(_)) = socket.next().await {}
        })
        .await;
    }
}

/// Reads until EOF or an error (at most 1 MiB kept).
async fn read_some(io: &mut (impl AsyncRead + AsyncWrite + Unpin), sink: &mut Vec<u8>) {
    let mut buf = [0u8; 4096];
    loop {
        match io.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if sink.len() < 1 << 20 {
                    sink.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_streaming_requests_never_fail_the_server_or_change_anything() {
    let server = TestServer::start().await;
    let (port, seen) = fake_agent().await;
    setup(&server, port).await;
    let before = stored(&server).await;

    for c in table() {
        let a = send(&server, c.method, &c.target, &c.headers).await;
        let shown = format!("{} ({} {:.120})", c.what, c.method, c.target);
        check(&shown, &a);
        assert_eq!(a.code, c.code, "{shown}: {}", a.text());
        if let Some(m) = &c.message {
            let said = match a.status() {
                Some(s) => s["message"].as_str().unwrap_or("").to_string(),
                None => String::from_utf8_lossy(&a.body).into_owned(),
            };
            assert!(said.contains(m.as_str()), "{shown}: {said:?} lacks {m:?}");
        }
        // A 101 is abandoned at once.
    }
    {
        let seen = seen.lock().unwrap();
        let has = |t: &str| seen.iter().any(|s| s == t);
        // The first container value, the streams on, each command in order.
        assert!(
            has("/exec/fz/p/c?command=echo&command=hi&stdout=1"),
            "{seen:?}"
        );
        // `stdin=` is on: upstream reads any first value but 0 and false so.
        assert!(has("/exec/fz/p/c?command=&stdin=1&stdout=1"), "{seen:?}");
        assert!(has("/attach/fz/p/c?stdin=1&stdout=1"), "{seen:?}");
        assert!(has("/portForward/fz/p?port=80%2C81"), "{seen:?}");
        assert!(has("/portForward/fz/p"), "{seen:?}");
        // Nothing refused here reached the agent.
        assert!(seen
            .iter()
            .all(|s| !s.contains("pending") && !s.contains("two")));
    }

    let seed: u64 = std::env::var("SKIFF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let cases: usize = std::env::var("SKIFF_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    for _ in 0..cases {
        let (target, headers) = random_case(&mut rng);
        let method = ["GET", "POST"][rng.random_range(0..2)];
        let a = send(&server, method, &target, &headers).await;
        *counts.entry(a.code).or_default() += 1;
        check(&format!("{method} {target:.200}"), &a);
    }
    eprintln!("streaming fuzz seed {seed}: {cases} cases, answers by code: {counts:?}");

    v5_sessions(&server).await;
    junk_after_upgrades(&server, &mut rng).await;

    // Nothing was written, and the server still serves.
    assert_eq!(stored(&server).await, before);
    let got = v5_session(
        &server,
        "stdin=1&stdout=1&command=cat",
        vec![stdin(b"ok"), bin(&[255, 0])],
    )
    .await;
    assert_eq!(got.stdout, b"ok");
}
