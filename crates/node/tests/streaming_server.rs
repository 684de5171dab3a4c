//! exec, attach and portForward on the agent's HTTPS endpoint, with the
//! fake runtime handing out URLs on a fake streaming server (a loopback
//! listener that records what it is sent, answers 101 and echoes): the
//! CRI requests the routes make from the query and the pod, what reaches
//! the streaming server (method, target, only the upgrade headers), the
//! 101 the client gets, bytes both ways through TLS, sessions ending
//! with the client, and every refusal in the kubelet's status and words.
//! The real containerd is in crates/skiff/tests/agent_streaming.rs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use skiff_node::runtime::fake::{FakeRuntime, Streamed};
use skiff_node::runtime::{api, Error as CriError, Runtime, POD_UID_LABEL};
use skiff_node::server::{self, PodLogInfo, PodLookup, ServerConfig};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(20);

/// The fake streaming server: records request heads, answers 101 with
/// containerd-like headers, then echoes until the client ends.
async fn streaming_server() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let Some(head) = read_head(&mut s).await else {
                    return;
                };
                let upgrade = header(&head, "upgrade").unwrap_or_default();
                seen.lock().expect("heads").push(head);
                let answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: {upgrade}\r\n\
                     Sec-WebSocket-Accept: fake-accept\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\
                     X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
                );
                if s.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (addr, heads)
}

/// Reads up to the end of an HTTP head.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).await.ok()? == 0 {
            return None;
        }
        head.push(b[0]);
    }
    String::from_utf8(head).ok()
}

/// The first value of header `name` in `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

struct Ca {
    cert: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca() -> Ca {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "cluster-ca");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).expect("CA cert");
    Ca {
        cert: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

fn tls_client(ca: &Ca, pki_dir: &Path) -> Arc<rustls::ClientConfig> {
    let key = KeyPair::generate().expect("client key");
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver-kubelet-client");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &ca.issuer).expect("client cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let serving = std::fs::read(pki_dir.join("kubelet.crt")).expect("serving cert");
    for c in CertificateDer::pem_slice_iter(&serving) {
        roots.add(c.expect("pem")).expect("root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key"),
        )
        .expect("client auth");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// The endpoint over the fake runtime, with pod ns/web (uid u-1;
/// containers app (running, TTY), side (exited) and late (not created)).
struct Fixture {
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    runtime: Arc<FakeRuntime>,
    app: String,
    sandbox: String,
    heads: Arc<Mutex<Vec<String>>>,
    sessions: tokio::sync::watch::Receiver<usize>,
    slot: server::streaming::RuntimeSlot,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn container(rt: &FakeRuntime, sandbox: &str, name: &str) -> String {
    let config = api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: name.into(),
            attempt: 0,
        }),
        image: Some(api::ImageSpec {
            image: "busybox".into(),
            ..Default::default()
        }),
        labels: HashMap::from([
            (POD_UID_LABEL.to_string(), "u-1".to_string()),
            ("io.kubernetes.container.name".to_string(), name.to_string()),
        ]),
        ..Default::default()
    };
    rt.create_container(sandbox, config, api::PodSandboxConfig::default())
        .await
        .expect("create")
}

async fn fixture(with_runtime: bool) -> Fixture {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("dir");
    let (stream_addr, heads) = streaming_server().await;
    let rt = Arc::new(FakeRuntime::new());
    rt.set_stream_server(&format!("http://{stream_addr}"));
    rt.add_image("busybox", 1);
    let sandbox = rt
        .run_pod_sandbox(
            api::PodSandboxConfig {
                labels: HashMap::from([(POD_UID_LABEL.to_string(), "u-1".to_string())]),
                ..Default::default()
            },
            String::new(),
        )
        .await
        .expect("sandbox");
    let app = container(&rt, &sandbox, "app").await;
    rt.start_container(&app).await.expect("start");
    let side = container(&rt, &sandbox, "side").await;
    rt.start_container(&side).await.expect("start");
    rt.exit(&side, 1, "Error");

    let lookup: PodLookup = Arc::new(|ns, name| {
        (ns == "ns" && name == "web").then(|| PodLogInfo {
            uid: "u-1".into(),
            containers: vec!["app".into(), "side".into(), "late".into()],
            tty_containers: vec!["app".into()],
        })
    });
    let ca = ca();
    let pki_dir = dir.path().join("pki");
    let mut config = ServerConfig::new(
        "n1",
        "127.0.0.1:0".parse().expect("addr"),
        pki_dir.clone(),
        ca.cert.clone(),
        dir.path().join("pods"),
    );
    config.lookup = Some(lookup);
    let slot = config.runtime.clone();
    if with_runtime {
        let _ = slot.set(rt.clone() as Arc<dyn Runtime>);
    }
    let bound = server::bind(config).await.expect("bind");
    let addr = bound.local_addr();
    let sessions = bound.sessions();
    let stop = CancellationToken::new();
    tokio::spawn(bound.run(stop.clone()));
    Fixture {
        addr,
        tls: tls_client(&ca, &pki_dir),
        runtime: rt,
        app,
        sandbox,
        heads,
        sessions,
        slot,
        stop,
        _dir: dir,
    }
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// An answer's head; for a refusal, its body too.
struct Answer {
    status: u16,
    head: String,
    body: String,
    stream: Tls,
}

const WEBSOCKET: &[(&str, &str)] = &[
    ("Connection", "Upgrade"),
    ("Upgrade", "websocket"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("Sec-WebSocket-Version", "13"),
    ("Sec-WebSocket-Protocol", "v4.channel.k8s.io"),
    ("Authorization", "Bearer not-for-containerd"),
];

const SPDY: &[(&str, &str)] = &[
    ("Connection", "Upgrade"),
    ("Upgrade", "SPDY/3.1"),
    ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
    ("X-Stream-Protocol-Version", "v3.channel.k8s.io"),
];

impl Fixture {
    async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        tokio::time::timeout(WAIT, self.send_now(method, path, headers))
            .await
            .expect("an answer in time")
    }

    async fn send_now(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        let name = ServerName::try_from("localhost").expect("name");
        let mut stream = tokio_rustls::TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .expect("TLS");
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).await.expect("send");
        let head = read_head(&mut stream).await.expect("an answer");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let mut body = String::new();
        if status != 101 {
            let len: usize = header(&head, "content-length")
                .and_then(|l| l.parse().ok())
                .expect("a refusal has a length");
            let mut buf = vec![0u8; len];
            stream.read_exact(&mut buf).await.expect("body");
            body = String::from_utf8(buf).expect("text");
        }
        Answer {
            status,
            head,
            body,
            stream,
        }
    }

    /// A refusal: status and text.
    async fn refused(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let a = self.send(method, path, headers).await;
        assert_ne!(a.status, 101, "{path} was upgraded");
        assert_eq!(
            header(&a.head, "content-type").as_deref(),
            Some("text/plain; charset=utf-8"),
            "{}",
            a.head
        );
        (a.status, a.body)
    }

    fn last_head(&self) -> String {
        self.heads
            .lock()
            .expect("heads")
            .last()
            .cloned()
            .expect("the streaming server was reached")
    }

    async fn wait_sessions(&mut self, n: usize) {
        tokio::time::timeout(WAIT, self.sessions.wait_for(|v| *v == n))
            .await
            .expect("sessions settle")
            .expect("server running");
    }
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, data: &[u8]) -> Vec<u8> {
    tokio::time::timeout(WAIT, async {
        s.write_all(data).await.expect("write");
        let mut got = vec![0u8; data.len()];
        s.read_exact(&mut got).await.expect("read");
        got
    })
    .await
    .expect("echo in time")
}

async fn ends<S: AsyncRead + Unpin>(s: &mut S) {
    let mut rest = Vec::new();
    let r = tokio::time::timeout(WAIT, s.read_to_end(&mut rest))
        .await
        .expect("the connection ends");
    // A TLS peer that closes without close_notify is an error here; both
    // are an end.
    if r.is_ok() {
        assert!(rest.is_empty(), "{rest:?}");
    }
}

/// An exec through the endpoint: the CRI request from the query and the
/// pod's running container, the streaming server reached with the
/// method, its URL and the upgrade headers alone, the 101 with the
/// streaming server's headers, bytes both ways, and the session ending
/// with the client.
#[tokio::test]
async fn exec_is_proxied_to_the_streaming_server() {
    let mut f = fixture(true).await;
    let mut a = f
        .send(
            "GET",
            "/exec/ns/web/app?command=sh&command=-c&command=echo%20hi&stdin=1&stdout=true&stderr=1",
            WEBSOCKET,
        )
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
    assert_eq!(
        header(&a.head, "sec-websocket-accept").as_deref(),
        Some("fake-accept")
    );
    assert_eq!(
        header(&a.head, "sec-websocket-protocol").as_deref(),
        Some("v4.channel.k8s.io")
    );
    assert_eq!(header(&a.head, "upgrade").as_deref(), Some("websocket"));
    f.wait_sessions(1).await;
    assert_eq!(
        f.runtime.streamed(),
        [Streamed::Exec(api::ExecRequest {
            container_id: f.app.clone(),
            cmd: vec!["sh".into(), "-c".into(), "echo hi".into()],
            tty: false,
            stdin: true,
            stdout: true,
            stderr: true,
        })]
    );
    let sent = f.last_head();
    assert!(
        sent.starts_with("GET /exec/token-") && sent.contains(" HTTP/1.1\r\n"),
        "{sent}"
    );
    assert!(!sent.contains("command="), "{sent}");
    for (k, v) in WEBSOCKET.iter().filter(|(k, _)| *k != "Authorization") {
        assert_eq!(header(&sent, k).as_deref(), Some(*v), "{k} in {sent}");
    }
    assert_eq!(header(&sent, "authorization"), None, "{sent}");
    assert!(
        header(&sent, "host").is_some_and(|h| h.starts_with("127.0.0.1:")),
        "{sent}"
    );

    assert_eq!(echo(&mut a.stream, b"\x00hello").await, b"\x00hello");
    a.stream.shutdown().await.expect("close");
    ends(&mut a.stream).await;
    f.wait_sessions(0).await;
}

/// SPDY's POST (with the UID in the path) keeps its method and every
/// protocol version offered; the TTY drops stderr.
#[tokio::test]
async fn spdy_exec_with_the_uid_in_the_path() {
    let mut f = fixture(true).await;
    let mut a = f
        .send(
            "POST",
            "/exec/ns/web/u-1/app?command=sh&stdin=1&stdout=1&stderr=1&tty=1",
            SPDY,
        )
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
    assert_eq!(
        header(&a.head, "x-stream-protocol-version").as_deref(),
        Some("v4.channel.k8s.io")
    );
    let sent = f.last_head();
    assert!(sent.starts_with("POST /exec/token-"), "{sent}");
    assert!(
        sent.contains(
            "x-stream-protocol-version: v4.channel.k8s.io\r\nx-stream-protocol-version: v3.channel.k8s.io\r\n"
        ),
        "{sent}"
    );
    assert_eq!(
        f.runtime.streamed(),
        [Streamed::Exec(api::ExecRequest {
            container_id: f.app.clone(),
            cmd: vec!["sh".into()],
            tty: true,
            stdin: true,
            stdout: true,
            stderr: false,
        })]
    );
    assert_eq!(echo(&mut a.stream, b"spdy frames").await, b"spdy frames");
    // The client vanishing ends the session too.
    drop(a);
    f.wait_sessions(0).await;
}

/// attach takes the TTY from the container's spec; port-forward goes to
/// the pod's ready sandbox with the WebSocket client's ports (and its
/// query reaches the streaming server), or none for SPDY.
#[tokio::test]
async fn attach_and_port_forward() {
    let mut f = fixture(true).await;
    let mut a = f
        .send(
            "GET",
            "/attach/ns/web/app?stdin=1&stdout=1&stderr=1",
            WEBSOCKET,
        )
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
    assert!(f.last_head().starts_with("GET /attach/token-"));
    assert_eq!(echo(&mut a.stream, b"attached").await, b"attached");
    drop(a);

    let mut a = f
        .send("GET", "/portForward/ns/web?port=8080&port=9090", WEBSOCKET)
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
    let sent = f.last_head();
    assert!(
        sent.starts_with("GET /portforward/token-")
            && sent.contains("?port=8080&port=9090 HTTP/1.1"),
        "{sent}"
    );
    assert_eq!(echo(&mut a.stream, b"\x00\x90\x1f").await, b"\x00\x90\x1f");
    drop(a);

    let a = f.send("POST", "/portForward/ns/web/u-1", SPDY).await;
    assert_eq!(a.status, 101, "{}", a.head);
    assert!(f.last_head().starts_with("POST /portforward/token-"));
    drop(a);

    assert_eq!(
        f.runtime.streamed(),
        [
            Streamed::Attach(api::AttachRequest {
                container_id: f.app.clone(),
                stdin: true,
                tty: true,
                stdout: true,
                stderr: false,
            }),
            Streamed::PortForward(api::PortForwardRequest {
                pod_sandbox_id: f.sandbox.clone(),
                port: vec![8080, 9090],
            }),
            Streamed::PortForward(api::PortForwardRequest {
                pod_sandbox_id: f.sandbox.clone(),
                port: vec![],
            }),
        ]
    );
    f.wait_sessions(0).await;
}

/// A request (method, path, headers) and the refusal it gets (status, text).
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], u16, &'a str);

/// Every refusal before an upgrade, in the kubelet's status and words.
#[tokio::test]
async fn refusals_in_the_kubelets_words() {
    let f = fixture(true).await;
    let ws = WEBSOCKET;
    let cases: &[Case] = &[
        (
            "GET",
            "/exec/ns/web/app?command=ls",
            ws,
            400,
            "you must specify at least 1 of stdin, stdout, stderr",
        ),
        (
            "GET",
            "/exec/ns/db/app?command=ls&stdout=1",
            ws,
            404,
            "pod does not exist",
        ),
        (
            "GET",
            "/exec/ns/web/nope?command=ls&stdout=1",
            ws,
            500,
            r#"container not found ("nope")"#,
        ),
        // Exited and not-yet-created containers are not running ones.
        (
            "GET",
            "/exec/ns/web/side?command=ls&stdout=1",
            ws,
            500,
            r#"container not found ("side")"#,
        ),
        (
            "GET",
            "/exec/ns/web/late?command=ls&stdout=1",
            ws,
            500,
            r#"container not found ("late")"#,
        ),
        (
            "GET",
            "/exec/ns/web/app?command=ls&stdout=1",
            &[],
            500,
            "Upgrade request required",
        ),
        (
            "GET",
            "/attach/ns/db/app?stdout=1",
            ws,
            404,
            "pod does not exist",
        ),
        (
            "GET",
            "/attach/ns/web/side?stdout=1",
            ws,
            500,
            "container side not found in pod web_ns",
        ),
        (
            "GET",
            "/attach/ns/web/u-2/app?stdout=1",
            ws,
            500,
            "pod web_ns not found",
        ),
        (
            "GET",
            "/portForward/ns/web",
            ws,
            400,
            r#"query parameter "port" is required"#,
        ),
        (
            "GET",
            "/portForward/ns/web?port=http",
            ws,
            400,
            r#"unable to parse "http" as a port: strconv.ParseUint: parsing "http": invalid syntax"#,
        ),
        (
            "GET",
            "/portForward/ns/db?port=80",
            ws,
            404,
            "pod does not exist",
        ),
        (
            "GET",
            "/portForward/ns/web/u-2?port=80",
            ws,
            404,
            "pod not found",
        ),
        ("DELETE", "/exec/ns/web/app?stdout=1", ws, 405, ""),
    ];
    for (method, path, headers, status, text) in cases {
        let a = f.send(method, path, headers).await;
        assert_eq!(
            (a.status, a.body.as_str()),
            (*status, *text),
            "{method} {path}"
        );
        if *status != 405 {
            assert_eq!(
                header(&a.head, "content-type").as_deref(),
                Some("text/plain; charset=utf-8"),
                "{path}"
            );
        }
    }

    // CRI errors as the kubelet's streaming.WriteError answers them.
    f.runtime.fail_next(
        "exec",
        CriError::Status {
            code: tonic::Code::NotFound,
            message: "gone".into(),
        },
    );
    assert_eq!(
        f.refused("GET", "/exec/ns/web/app?command=ls&stdout=1", ws)
            .await,
        (404, "rpc error: code = NotFound desc = gone".into())
    );
    f.runtime.fail_next(
        "attach",
        CriError::Status {
            code: tonic::Code::ResourceExhausted,
            message: "maximum number of in-flight requests exceeded".into(),
        },
    );
    let a = f.send("GET", "/attach/ns/web/app?stdout=1", ws).await;
    assert_eq!(
        (a.status, a.body.as_str()),
        (
            429,
            "rpc error: code = ResourceExhausted desc = maximum number of in-flight requests exceeded"
        )
    );
    assert_eq!(header(&a.head, "retry-after").as_deref(), Some("60"));

    // A pod whose sandbox is down has nothing to forward to.
    f.runtime
        .stop_pod_sandbox(&f.sandbox)
        .await
        .expect("stop sandbox");
    assert_eq!(
        f.refused("GET", "/portForward/ns/web?port=80", ws).await,
        (500, r#"pod not found ("web_ns")"#.into())
    );
    // Nothing was upgraded.
    assert!(f.heads.lock().expect("heads").is_empty());
    assert_eq!(*f.sessions.borrow(), 0);
}

/// An attach to a container the runtime still lists as running whose
/// process has exited (containerd reports RUNNING until it has collected
/// the task) is refused as one to a stopped container, in the kubelet's
/// words, before the runtime is asked; with the process alive it is
/// upgraded; with no PIDs to go by (or a sandbox process this agent
/// cannot see) the runtime's word stands.
#[tokio::test]
async fn attach_to_a_container_whose_process_exited_is_refused() {
    let mut f = fixture(true).await;
    let ws = WEBSOCKET;
    // A process that ran and is gone (reaped).
    let mut gone = std::process::Command::new("true").spawn().expect("true");
    gone.wait().expect("wait");
    let me = std::process::id();
    f.runtime.set_pid(&f.sandbox, me);
    f.runtime.set_pid(&f.app, gone.id());
    assert_eq!(
        f.refused("GET", "/attach/ns/web/app?stdout=1", ws).await,
        (500, "container app not found in pod web_ns".into())
    );
    assert!(f.heads.lock().expect("heads").is_empty());
    assert!(
        !f.runtime
            .streamed()
            .iter()
            .any(|s| matches!(s, Streamed::Attach(_))),
        "the runtime was not asked"
    );
    // Its sandbox's process not visible here: the runtime decides.
    f.runtime.set_pid(&f.sandbox, gone.id());
    let a = f.send("GET", "/attach/ns/web/app?stdout=1", ws).await;
    assert_eq!(a.status, 101, "{}", a.head);
    drop(a);
    f.wait_sessions(0).await;
    // The process alive: attached.
    f.runtime.set_pid(&f.sandbox, me);
    f.runtime.set_pid(&f.app, me);
    let a = f.send("GET", "/attach/ns/web/app?stdout=1", ws).await;
    assert_eq!(a.status, 101, "{}", a.head);
}

/// An attach to a container that started a moment ago is answered only
/// once the container has run for the kubelet's relist period
/// (`ATTACH_SETTLE`), the soonest the kubelet would have reported it.
#[tokio::test]
async fn an_attach_waits_until_the_container_has_run_a_moment() {
    let f = fixture(true).await;
    let started = f
        .runtime
        .container_status(&f.app)
        .await
        .expect("status")
        .started_at;
    let a = f
        .send("GET", "/attach/ns/web/app?stdout=1", WEBSOCKET)
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as i64;
    let settle = server::streaming::routes::ATTACH_SETTLE.as_nanos() as i64;
    assert!(
        now >= started + settle,
        "answered {} ms after the start",
        (now - started) / 1_000_000
    );
}

/// Before the runtime is up the endpoint serves logs but not streams.
#[tokio::test]
async fn no_runtime_yet() {
    let f = fixture(false).await;
    assert_eq!(
        f.refused("GET", "/exec/ns/web/app?command=ls&stdout=1", WEBSOCKET)
            .await,
        (500, "container runtime is not ready".into())
    );
    let _ = f.slot.set(f.runtime.clone() as Arc<dyn Runtime>);
    let a = f
        .send("GET", "/exec/ns/web/app?command=ls&stdout=1", WEBSOCKET)
        .await;
    assert_eq!(a.status, 101, "{}", a.head);
}

/// Sessions opened and closed leave nothing behind: the session count
/// and the runtime's live tasks come back to where they were.
#[tokio::test]
async fn many_sessions_leave_nothing_behind() {
    let mut f = fixture(true).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    // One session first, so that lazily started tasks are counted.
    drop(
        f.send("GET", "/exec/ns/web/app?command=cat&stdin=1", WEBSOCKET)
            .await,
    );
    f.wait_sessions(0).await;
    let before = metrics.num_alive_tasks();
    for i in 0..50 {
        let mut a = f
            .send("GET", "/exec/ns/web/app?command=cat&stdin=1", WEBSOCKET)
            .await;
        assert_eq!(a.status, 101);
        let msg = format!("ping {i}");
        assert_eq!(echo(&mut a.stream, msg.as_bytes()).await, msg.as_bytes());
        if i % 2 == 0 {
            a.stream.shutdown().await.expect("close");
            ends(&mut a.stream).await;
        }
    }
    f.wait_sessions(0).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while metrics.num_alive_tasks() > before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} tasks alive after the sessions, {before} before",
            metrics.num_alive_tasks()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
