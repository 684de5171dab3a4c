//! The handlers against real sockets: HTTP, HTTPS and gRPC servers on
//! 127.0.0.1, free ports, started and stopped by each test.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, Pod, Probe,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tonic_health::ServingStatus;

use super::handlers::try_once;
use super::{Outcome, Prober, Target};
use crate::events::Recorded;
use crate::runtime::fake::FakeRuntime;

/// What a test server saw.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A request's head (request line and headers).
    Request(String),
    /// The client closed the connection after the answer.
    Closed,
    /// The TLS client's SNI.
    Sni(Option<String>),
}

/// A test server: its port, what it saw, and its task (aborted on drop).
struct Server {
    port: u16,
    seen: mpsc::UnboundedReceiver<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// The request heads seen so far.
    fn requests(&mut self) -> Vec<String> {
        let mut out = vec![];
        while let Ok(s) = self.seen.try_recv() {
            if let Seen::Request(r) = s {
                out.push(r);
            }
        }
        out
    }

    /// Waits (2 s at most) for the next event of the kind `want` picks.
    async fn next(&mut self, want: impl Fn(&Seen) -> bool) -> Option<Seen> {
        tokio::time::timeout(Duration::from_secs(2), async {
            loop {
                match self.seen.recv().await {
                    Some(s) if want(&s) => return Some(s),
                    Some(_) => {}
                    None => return None,
                }
            }
        })
        .await
        .ok()
        .flatten()
    }
}

type Answer = Arc<dyn Fn(&str) -> Vec<Vec<u8>> + Send + Sync>;

/// Reads a request head, answers it in pieces (each flushed apart, so
/// the client sees several reads), then waits for the client to close.
async fn handle<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    answer: Answer,
    seen: mpsc::UnboundedSender<Seen>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let _ = seen.send(Seen::Request(head.clone()));
    for (i, piece) in answer(&head).into_iter().enumerate() {
        if i > 0 {
            // Apart, so that the answer comes in more than one read.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if s.write_all(&piece).await.is_err() || s.flush().await.is_err() {
            return;
        }
    }
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = seen.send(Seen::Closed);
                return;
            }
            Ok(_) => {}
        }
    }
}

async fn serve_with(
    tls: Option<tokio_rustls::TlsAcceptor>,
    answer: impl Fn(&str) -> Vec<Vec<u8>> + Send + Sync + 'static,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    let answer: Answer = Arc::new(answer);
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (answer, tx) = (answer.clone(), tx.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    None => handle(tcp, answer, tx).await,
                    Some(acceptor) => {
                        let Ok(s) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let sni = s.get_ref().1.server_name().map(str::to_string);
                        let _ = tx.send(Seen::Sni(sni));
                        handle(s, answer, tx).await
                    }
                }
            });
        }
    });
    Server {
        port,
        seen: rx,
        task,
    }
}

async fn serve(answer: impl Fn(&str) -> Vec<Vec<u8>> + Send + Sync + 'static) -> Server {
    serve_with(None, answer).await
}

/// A TLS acceptor with a fresh self-signed certificate for `localhost`.
fn self_signed() -> tokio_rustls::TlsAcceptor {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![key.cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into()),
        )
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

fn reply(status: &str, extra: &str, body: &str) -> Vec<Vec<u8>> {
    vec![format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()]
}

fn http_probe(scheme: &str, host: Option<&str>, port: u16, path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            scheme: Some(scheme.into()),
            host: host.map(str::to_string),
            port: IntOrString::Int(port.into()),
            path: Some(path.into()),
            ..HTTPGetAction::default()
        }),
        ..Probe::default()
    }
}

fn header(name: &str, value: &str) -> HTTPHeader {
    HTTPHeader {
        name: name.into(),
        value: value.into(),
    }
}

fn target() -> Target {
    Target {
        container_id: "c1".into(),
        pod_ip: Some("127.0.0.1".into()),
    }
}

async fn try_probe(probe: &Probe) -> Outcome {
    let c = Container {
        name: "c".into(),
        ..Container::default()
    };
    try_once(
        probe,
        &c,
        &target(),
        &FakeRuntime::new(),
        Duration::from_secs(1),
    )
    .await
}

/// The header lines of a request head, lowercased names, in order.
fn header_lines(head: &str) -> Vec<(String, String)> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn http_200_sends_the_kubelets_request_and_closes() {
    let mut s = serve(|_| reply("200 OK", "", "fine")).await;
    let mut probe = http_probe("HTTP", None, s.port, "/healthz?full=1");
    probe.http_get.as_mut().unwrap().http_headers = Some(vec![header("x-custom-header", "yes")]);
    assert_eq!(try_probe(&probe).await, Outcome::Success);
    let requests = s.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let head = &requests[0];
    assert!(
        head.starts_with("GET /healthz?full=1 HTTP/1.1\r\n"),
        "{head}"
    );
    let lines = header_lines(head);
    let value = |n: &str| {
        lines
            .iter()
            .filter(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(value("host"), [format!("127.0.0.1:{}", s.port).as_str()]);
    assert_eq!(value("user-agent"), ["kube-probe/1.33"]);
    assert_eq!(value("accept"), ["*/*"]);
    assert_eq!(value("connection"), ["close"]);
    assert_eq!(value("x-custom-header"), ["yes"]);
    // As Go writes them: canonical names, Host and User-Agent first.
    assert!(head.contains("\r\nX-Custom-Header: yes\r\n"), "{head}");
    assert_eq!(lines[0].0, "host");
    assert_eq!(lines[1].0, "user-agent");
    assert!(value("content-length").is_empty(), "{head}");
    // Not kept alive: the prober closes once it has the answer.
    assert_eq!(s.next(|e| *e == Seen::Closed).await, Some(Seen::Closed));
}

#[tokio::test]
async fn http_headers_override_host_and_the_defaults() {
    let mut s = serve(|_| reply("204 No Content", "", "")).await;
    let mut probe = http_probe("HTTP", None, s.port, "/");
    probe.http_get.as_mut().unwrap().http_headers = Some(vec![
        header("Host", "app.example"),
        header("user-agent", "mine/1"),
        header("Accept", "application/json"),
    ]);
    assert_eq!(try_probe(&probe).await, Outcome::Success);
    let head = s.requests().remove(0);
    let lines = header_lines(&head);
    let count = |n: &str| lines.iter().filter(|(k, _)| k == n).count();
    assert!(
        lines.contains(&("host".into(), "app.example".into())),
        "{head}"
    );
    assert!(
        lines.contains(&("user-agent".into(), "mine/1".into())),
        "{head}"
    );
    assert!(
        lines.contains(&("accept".into(), "application/json".into())),
        "{head}"
    );
    assert_eq!(
        (count("host"), count("user-agent"), count("accept")),
        (1, 1, 1),
        "{head}"
    );
}

#[tokio::test]
async fn the_status_line_may_come_in_pieces() {
    let s = serve(|_| {
        vec![
            b"HTTP/1.1 2".to_vec(),
            b"00 OK\r\nContent-Le".to_vec(),
            b"ngth: 2\r\n\r\nok".to_vec(),
        ]
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/")).await,
        Outcome::Success
    );
    let s = serve(|_| {
        vec![
            b"HTTP/1.1 50".to_vec(),
            b"3 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
            b"4\r\nbusy\r\n0\r\n\r\n".to_vec(),
        ]
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/")).await,
        Outcome::Failure("HTTP probe failed with statuscode: 503".into())
    );
}

#[tokio::test]
async fn http_500_fails_with_upstreams_text() {
    let s = serve(|_| reply("500 Internal Server Error", "", "boom")).await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/")).await,
        Outcome::Failure("HTTP probe failed with statuscode: 500".into())
    );
}

#[tokio::test]
async fn a_local_redirect_is_followed() {
    let mut s = serve(|head| {
        if head.starts_with("GET /start ") {
            reply("302 Found", "Location: /ok\r\n", "moved")
        } else if head.starts_with("GET /ok ") {
            reply("200 OK", "", "ok")
        } else {
            reply("404 Not Found", "", "")
        }
    })
    .await;
    let mut probe = http_probe("HTTP", None, s.port, "/start");
    probe.http_get.as_mut().unwrap().http_headers = Some(vec![header("X-Token", "t")]);
    assert_eq!(try_probe(&probe).await, Outcome::Success);
    let requests = s.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = &requests[1];
    assert!(second.starts_with("GET /ok HTTP/1.1\r\n"), "{second}");
    // The headers go along, and Go's Referer is added.
    assert!(second.contains("X-Token: t\r\n"), "{second}");
    assert!(
        second.contains(&format!("Referer: http://127.0.0.1:{}/start\r\n", s.port)),
        "{second}"
    );

    // A followed redirect's answer decides: here a 404.
    let s = serve(|head| {
        if head.starts_with("GET /start ") {
            reply("301 Moved Permanently", "Location: missing\r\n", "")
        } else {
            reply("404 Not Found", "", "")
        }
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/start")).await,
        Outcome::Failure("HTTP probe failed with statuscode: 404".into())
    );
}

#[tokio::test]
async fn a_redirect_to_another_host_is_a_warning_with_the_body() {
    let mut s = serve(|_| {
        reply(
            "302 Found",
            "Location: http://elsewhere.invalid:8080/login\r\n",
            "go away",
        )
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/")).await,
        Outcome::Warning("Probe terminated redirects, Response body: go away".into())
    );
    assert_eq!(s.requests().len(), 1);

    // The body in the warning is cut at 10 KiB.
    let big = "x".repeat(20 * 1024);
    let s = serve(move |_| reply("302 Found", "Location: http://other/\r\n", &big)).await;
    let Outcome::Warning(text) = try_probe(&http_probe("HTTP", None, s.port, "/")).await else {
        panic!("not a warning");
    };
    let body = text
        .strip_prefix("Probe terminated redirects, Response body: ")
        .unwrap();
    assert_eq!(body.len(), 10 * 1024);

    // A 3xx that is not followed (no Location) is a warning too.
    let s = serve(|_| reply("304 Not Modified", "", "")).await;
    assert!(matches!(
        try_probe(&http_probe("HTTP", None, s.port, "/")).await,
        Outcome::Warning(_)
    ));
}

#[tokio::test]
async fn redirects_stop_after_ten() {
    let mut s = serve(|head| {
        let n: u32 = head
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.trim_start_matches('/').parse().ok())
            .unwrap_or(0);
        reply("302 Found", &format!("Location: /{}\r\n", n + 1), "")
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/0")).await,
        Outcome::Failure("Get \"/10\": stopped after 10 redirects".into())
    );
    assert_eq!(s.requests().len(), 10);
}

#[tokio::test]
async fn a_server_that_does_not_answer_times_out() {
    let s = serve(|_| vec![]).await;
    let started = std::time::Instant::now();
    assert_eq!(
        try_probe(&http_probe("HTTP", None, s.port, "/slow")).await,
        Outcome::Failure(format!(
            "Get \"http://127.0.0.1:{}/slow\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            s.port
        ))
    );
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[tokio::test]
async fn a_garbled_answer_fails() {
    let s = serve(|_| vec![b"garbage\r\n\r\n".to_vec()]).await;
    let outcome = try_probe(&http_probe("HTTP", None, s.port, "/")).await;
    let Outcome::Failure(text) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        text,
        format!(
            "Get \"http://127.0.0.1:{}/\": net/http: HTTP/1.x transport connection broken: malformed HTTP response",
            s.port
        )
    );
}

#[tokio::test]
async fn a_closed_port_is_refused() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    assert_eq!(
        try_probe(&http_probe("HTTP", None, port, "/")).await,
        Outcome::Failure(format!(
            "Get \"http://127.0.0.1:{port}/\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        ))
    );
}

#[tokio::test]
async fn https_skips_verification_of_a_self_signed_cert() {
    let mut s = serve_with(Some(self_signed()), |head| {
        if head.starts_with("GET /bad ") {
            reply("500 Internal Server Error", "", "")
        } else {
            reply("200 OK", "", "secure")
        }
    })
    .await;
    assert_eq!(
        try_probe(&http_probe("HTTPS", None, s.port, "/")).await,
        Outcome::Success
    );
    // No SNI for an IP address.
    assert_eq!(
        s.next(|e| matches!(e, Seen::Sni(_))).await,
        Some(Seen::Sni(None))
    );
    assert_eq!(
        try_probe(&http_probe("HTTPS", None, s.port, "/bad")).await,
        Outcome::Failure("HTTP probe failed with statuscode: 500".into())
    );
    // A host name is sent as SNI (the cert's name is not checked).
    assert_eq!(
        try_probe(&http_probe("HTTPS", Some("localhost"), s.port, "/")).await,
        Outcome::Success
    );
    let sni = loop {
        match s.next(|e| matches!(e, Seen::Sni(_))).await {
            Some(Seen::Sni(Some(name))) => break name,
            Some(_) => continue,
            None => panic!("no SNI seen"),
        }
    };
    assert_eq!(sni, "localhost");
    let requests = s.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.contains(&format!("Host: localhost:{}\r\n", s.port))),
        "{requests:?}"
    );
}

#[tokio::test]
async fn https_to_a_plain_http_server_fails() {
    // A plain HTTP server answers a ClientHello with a 400.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 512];
        let _ = s.read(&mut buf).await;
        let _ = s
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            .await;
        let _ = s.read(&mut buf).await;
    });
    let outcome = try_probe(&http_probe("HTTPS", None, port, "/")).await;
    server.abort();
    assert_eq!(
        outcome,
        Outcome::Failure(format!(
            "Get \"https://127.0.0.1:{port}/\": http: server gave HTTP response to HTTPS client"
        ))
    );
}

/// A grpc.health.v1 server on a free port, with `app` SERVING.
struct GrpcServer {
    port: u16,
    reporter: tonic_health::server::HealthReporter,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn grpc_server() -> GrpcServer {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("app", ServingStatus::Serving)
        .await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let task = tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    GrpcServer {
        port,
        reporter,
        task,
    }
}

fn grpc_probe(port: u16, service: Option<&str>) -> Probe {
    Probe {
        grpc: Some(GRPCAction {
            port: port.into(),
            service: service.map(str::to_string),
        }),
        ..Probe::default()
    }
}

#[tokio::test]
async fn grpc_serving_and_not_serving() {
    let s = grpc_server().await;
    assert_eq!(
        try_probe(&grpc_probe(s.port, Some("app"))).await,
        Outcome::Success
    );
    // The server's own status ("") is SERVING too.
    assert_eq!(try_probe(&grpc_probe(s.port, None)).await, Outcome::Success);
    s.reporter
        .set_service_status("app", ServingStatus::NotServing)
        .await;
    assert_eq!(
        try_probe(&grpc_probe(s.port, Some("app"))).await,
        Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
    );
}

#[tokio::test]
async fn grpc_unknown_service_fails_with_the_rpc_error() {
    let s = grpc_server().await;
    assert_eq!(
        try_probe(&grpc_probe(s.port, Some("nope"))).await,
        Outcome::Failure(
            "error: health rpc probe failed: rpc error: code = NotFound desc = service not registered"
                .into()
        )
    );
}

#[tokio::test]
async fn grpc_refused_times_out_connecting() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = std::time::Instant::now();
    assert_eq!(
        try_probe(&grpc_probe(port, Some("app"))).await,
        Outcome::Failure(format!(
            "timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded"
        ))
    );
    // As grpc-go's blocking dial: it keeps trying until the deadline.
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn grpc_to_a_server_that_is_not_grpc_fails() {
    let s = serve(|_| vec![]).await;
    let outcome = try_probe(&grpc_probe(s.port, Some("app"))).await;
    assert_eq!(
        outcome,
        Outcome::Failure("timeout: health rpc did not complete within 1s".into())
    );
}

#[tokio::test]
async fn exec_outcomes_are_unchanged() {
    // FakeRuntime's ExecSync on an unknown container is an error.
    let probe = Probe {
        exec: Some(ExecAction {
            command: Some(vec!["true".into()]),
        }),
        ..Probe::default()
    };
    assert!(matches!(try_probe(&probe).await, Outcome::Failure(_)));
}

/// The probe task reports a warning as a ProbeWarning event and counts it
/// as a success.
#[tokio::test]
async fn a_warning_is_an_event_and_ready() {
    let s = serve(|_| reply("302 Found", "Location: http://other.invalid/\r\n", "bye")).await;
    let mut probe = http_probe("HTTP", None, s.port, "/");
    probe.period_seconds = Some(1);
    let c = Container {
        name: "c".into(),
        readiness_probe: Some(probe),
        ..Container::default()
    };
    let pod = Pod::default();
    let events = Arc::new(Recorded::default());
    let wake = Arc::new(tokio::sync::Notify::new());
    let mut prober = Prober::default();
    prober.sync(
        &pod,
        &[(c.clone(), target())],
        Arc::new(FakeRuntime::new()),
        events.clone(),
        wake.clone(),
    );
    tokio::time::timeout(Duration::from_secs(5), async {
        while !prober.ready(&c, "c1") {
            wake.notified().await;
        }
    })
    .await
    .expect("ready");
    let recorded = events.0.lock().unwrap().clone();
    assert!(
        recorded.contains(&(
            "ProbeWarning".into(),
            "Readiness probe warning: Probe terminated redirects, Response body: bye".into()
        )),
        "{recorded:?}"
    );
    assert!(
        !recorded.iter().any(|(r, _)| r == "Unhealthy"),
        "{recorded:?}"
    );
}
