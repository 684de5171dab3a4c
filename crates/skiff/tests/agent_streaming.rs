//! End to end, as root, on real containerd ([streaming] deliverable 2,
//! the agent's half): exec, attach and port-forward on the agent's HTTPS
//! endpoint, reached directly as the API server reaches it (its
//! kubelet-client certificate, no check of the agent's serving
//! certificate), proxied to containerd's streaming server. A WebSocket
//! `v4.channel.k8s.io` client checks what containerd says through the
//! proxy: exec output and its Status, stdin echoed, attach output, a
//! port-forward's HTTP answer, the kubelet's refusals, containerd's own
//! refusal passed back as it came, a SPDY upgrade's 101; and that 50
//! sessions opened and closed leave no file descriptors in the server
//! and no processes in the container.

mod cluster;

use std::sync::Arc;
use std::time::Duration;

use cluster::{wait_for, Cluster, Options};
use futures::{SinkExt, StreamExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use skiff_client::tls::AcceptAnyServerCert;
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::{api, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

/// Upper bound for one step (a connection, an answer, a session).
const STEP: Duration = Duration::from_secs(20);

type Tls = tokio_rustls::client::TlsStream<TcpStream>;
type Ws = tokio_tungstenite::WebSocketStream<Tls>;

/// The agent as the API server sees it.
struct Agent {
    port: u16,
    tls: Arc<rustls::ClientConfig>,
}

impl Agent {
    fn of(c: &Cluster) -> Self {
        let pki = c.data_dir.join("pki");
        let cert = std::fs::read(pki.join("apiserver-kubelet-client.crt")).unwrap();
        let key = std::fs::read(pki.join("apiserver-kubelet-client.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider)))
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(&cert)
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(&key).unwrap(),
            )
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Agent {
            port: c.kubelet_port,
            tls: Arc::new(tls),
        }
    }

    async fn connect(&self) -> Tls {
        let tcp = tokio::time::timeout(STEP, TcpStream::connect(("127.0.0.1", self.port)))
            .await
            .unwrap()
            .unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        tokio::time::timeout(
            STEP,
            tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp),
        )
        .await
        .unwrap()
        .unwrap()
    }

    /// A WebSocket session at `path` with subprotocol
    /// `v4.channel.k8s.io`, or the refusal: status and body.
    async fn ws(&self, path: &str) -> Result<Ws, (u16, String)> {
        let mut req = format!("wss://127.0.0.1:{}{path}", self.port)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            "v4.channel.k8s.io".parse().unwrap(),
        );
        let tls = self.connect().await;
        match tokio::time::timeout(STEP, tokio_tungstenite::client_async(req, tls))
            .await
            .expect("a handshake answer in time")
        {
            Ok((ws, resp)) => {
                assert_eq!(
                    resp.headers()
                        .get("sec-websocket-protocol")
                        .map(|v| v.to_str().unwrap()),
                    Some("v4.channel.k8s.io")
                );
                Ok(ws)
            }
            Err(tungstenite::Error::Http(resp)) => Err((
                resp.status().as_u16(),
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned(),
            )),
            Err(e) => panic!("{path}: {e}"),
        }
    }

    /// A raw request (no body): the answer's head, and what follows it
    /// until the agent closes or `STEP` passes.
    async fn raw(&self, request: &str) -> (String, Vec<u8>) {
        let mut tls = self.connect().await;
        tls.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = tokio::time::timeout(STEP, tls.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed before an answer: {got:?}");
            got.extend_from_slice(&buf[..n]);
        };
        let mut rest = got.split_off(end);
        let head = String::from_utf8(got).unwrap();
        if !head.starts_with("HTTP/1.1 101") {
            let _ = tokio::time::timeout(STEP, tls.read_to_end(&mut rest)).await;
        }
        (head, rest)
    }
}

/// What a v4 session carried, channel by channel.
#[derive(Debug, Default)]
struct Channels([Vec<u8>; 5]);

impl Channels {
    fn text(&self, channel: usize) -> String {
        String::from_utf8_lossy(&self.0[channel]).into_owned()
    }

    fn add(&mut self, msg: Message) -> bool {
        match msg {
            Message::Binary(b) => {
                if let Some((&ch, data)) = b.split_first() {
                    self.0[usize::from(ch)].extend_from_slice(data);
                }
                true
            }
            Message::Close(_) => false,
            _ => true,
        }
    }
}

/// Reads until the server closes the session.
async fn read_all(ws: &mut Ws) -> Channels {
    let mut got = Channels::default();
    tokio::time::timeout(STEP, async {
        while let Some(Ok(msg)) = ws.next().await {
            if !got.add(msg) {
                break;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the session did not end: {got:?}"));
    got
}

/// Reads until channel `channel` has carried `want`.
async fn read_until(ws: &mut Ws, channel: usize, want: &str) -> Channels {
    let mut got = Channels::default();
    tokio::time::timeout(STEP, async {
        while !got.text(channel).contains(want) {
            let msg = ws.next().await.expect("the session ended").unwrap();
            assert!(got.add(msg), "closed early: {got:?}");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {want:?} on channel {channel}: {got:?}"));
    got
}

fn stdin(data: &str) -> Message {
    let mut frame = vec![0u8];
    frame.extend_from_slice(data.as_bytes());
    Message::Binary(frame.into())
}

/// The server's open file descriptors.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The count once it has held still for half a second (sessions just
/// ended may still be closing their connections).
async fn settled_fds(pid: u32) -> usize {
    let deadline = tokio::time::Instant::now() + STEP;
    let (mut last, mut still) = (fds(pid), 0);
    while still < 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server's fds never settled"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = fds(pid);
        if now == last {
            still += 1;
        } else {
            (last, still) = (now, 0);
        }
    }
    last
}

/// What they are (for a failure's message).
fn fd_targets(pid: u32) -> Vec<String> {
    let mut all: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| {
            let target = std::fs::read_link(e.path()).unwrap_or_default();
            format!(
                "{} -> {}",
                e.file_name().to_string_lossy(),
                target.display()
            )
        })
        .collect();
    all.sort();
    all
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: shell}
spec:
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
---
apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "while true; do echo tick; sleep 1; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: httpd
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo hello-from-httpd > /www/index.html && exec httpd -f -p 8080 -h /www"]
---
apiVersion: v1
kind: Pod
metadata: {name: two}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
  - name: quits
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exit 3"]
"#;

#[test]
fn exec_attach_and_port_forward_through_the_agent() {
    let c = Cluster::start(Options::default());
    c.apply(PODS);
    for pod in ["shell", "talker", "web"] {
        c.wait(&format!("pod/{pod}"), "condition=Ready", 60);
    }
    let quits = r#"{.status.containerStatuses[?(@.name=="quits")]"#;
    let quits_id = wait_for("container quits to exit", STEP * 3, || {
        let code = c.pod_field("two", &format!("{quits}.state.terminated.exitCode}}"));
        let running = c.pod_field(
            "two",
            r#"{.status.containerStatuses[?(@.name=="main")].state.running.startedAt}"#,
        );
        (code == "3" && !running.is_empty())
            .then(|| c.pod_field("two", &format!("{quits}.containerID}}")))
    });
    let quits_id = quits_id
        .strip_prefix("containerd://")
        .unwrap_or_else(|| panic!("container ID {quits_id:?}"))
        .to_string();
    let pid = c.child.as_ref().unwrap().id();
    let agent = Agent::of(&c);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    rt.block_on(async {
        // exec: stdout, then the Status on the error channel.
        let mut ws = agent
            .ws("/exec/default/shell/main?command=echo&command=hello&stdout=1&stderr=1")
            .await
            .unwrap();
        let got = read_all(&mut ws).await;
        assert_eq!(got.text(1), "hello\n");
        assert_eq!(got.text(2), "");
        assert!(
            got.text(3).contains(r#""status":"Success""#),
            "{}",
            got.text(3)
        );

        // A command that fails: its Status says so.
        let mut ws = agent
            .ws("/exec/default/shell/main?command=sh&command=-c&command=echo%20oops%20%3E%262%3B%20exit%207&stdout=1&stderr=1")
            .await
            .unwrap();
        let got = read_all(&mut ws).await;
        assert_eq!(got.text(2), "oops\n");
        let status = got.text(3);
        assert!(
            status.contains(r#""status":"Failure""#)
                && status.contains(r#""reason":"NonZeroExitCode""#)
                && status.contains(r#""message":"7""#),
            "{status}"
        );

        // stdin echoed by cat.
        let mut ws = agent
            .ws("/exec/default/shell/main?command=cat&stdin=1&stdout=1")
            .await
            .unwrap();
        ws.send(stdin("ping\n")).await.unwrap();
        read_until(&mut ws, 1, "ping\n").await;
        ws.send(stdin("pong\n")).await.unwrap();
        read_until(&mut ws, 1, "pong\n").await;
        ws.close(None).await.unwrap();

        // attach: the container's own output.
        let mut ws = agent
            .ws("/attach/default/talker/main?stdout=1&stderr=1")
            .await
            .unwrap();
        read_until(&mut ws, 1, "tick\n").await;
        ws.close(None).await.unwrap();

        // Refusals, in the kubelet's words, before any upgrade.
        assert_eq!(
            agent
                .ws("/exec/default/shell/nope?command=ls&stdout=1")
                .await
                .unwrap_err(),
            (500, r#"container not found ("nope")"#.into())
        );
        assert_eq!(
            agent
                .ws("/exec/default/ghost/main?command=ls&stdout=1")
                .await
                .unwrap_err(),
            (404, "pod does not exist".into())
        );
        // A container that is not running is not found, as the kubelet
        // (which looks among running containers only) says...
        assert_eq!(
            agent
                .ws("/exec/default/two/quits?command=ls&stdout=1")
                .await
                .unwrap_err(),
            (500, r#"container not found ("quits")"#.into())
        );
        assert_eq!(
            agent.ws("/exec/default/shell/main?command=ls").await.unwrap_err(),
            (
                400,
                "you must specify at least 1 of stdin, stdout, stderr".into()
            )
        );
        // ...and containerd, asked all the same (a container that exits
        // between the lookup and the call), answers this.
        let cri = CriRuntime::new(c.data_dir.join("node/containerd/containerd.sock")).unwrap();
        let e = cri
            .exec(api::ExecRequest {
                container_id: quits_id.clone(),
                cmd: vec!["ls".into()],
                stdout: true,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            e.go_text(),
            "rpc error: code = Unknown desc = container is in CONTAINER_EXITED state"
        );

        // containerd's own refusal comes back as it came: its WebSocket
        // server takes GET only.
        let (head, body) = agent
            .raw(
                "POST /exec/default/shell/main?command=ls&stdout=1 HTTP/1.1\r\nHost: agent\r\n\
                 Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            )
            .await;
        assert!(head.starts_with("HTTP/1.1 405"), "{head}");
        assert!(String::from_utf8_lossy(&body).contains("bad method"), "{body:?}");

        // SPDY/3.1 (kubectl's POST) is upgraded by containerd through the
        // proxy, with the protocol version it chose.
        let (head, _) = agent
            .raw(
                "POST /exec/default/shell/main?command=ls&stdout=1 HTTP/1.1\r\nHost: agent\r\n\
                 Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\
                 X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\
                 X-Stream-Protocol-Version: channel.k8s.io\r\n\r\n",
            )
            .await;
        let lower = head.to_ascii_lowercase();
        assert!(lower.starts_with("http/1.1 101"), "{head}");
        assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
        assert!(
            lower.contains("x-stream-protocol-version: v4.channel.k8s.io"),
            "{head}"
        );

        // port-forward over WebSocket: each channel first carries the
        // port (2 bytes, little-endian); then the pod's HTTP answer.
        let mut ws = agent
            .ws("/portForward/default/web?port=8080")
            .await
            .unwrap();
        ws.send(stdin("GET / HTTP/1.0\r\nHost: web\r\n\r\n"))
            .await
            .unwrap();
        let got = read_all(&mut ws).await;
        assert_eq!(got.0[0].get(..2), Some(&8080u16.to_le_bytes()[..]));
        assert_eq!(got.0[1], 8080u16.to_le_bytes());
        let answer = String::from_utf8_lossy(&got.0[0][2..]).into_owned();
        // (busybox's httpd answers in HTTP/1.1 whatever it is asked in.)
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("hello-from-httpd\n"), "{answer}");
        assert_eq!(
            agent.ws("/portForward/default/web").await.unwrap_err(),
            (400, r#"query parameter "port" is required"#.into())
        );

        // 55 sessions opened and closed (by a Close, or by the client
        // vanishing) leave nothing behind.
        let warm = agent
            .ws("/exec/default/shell/main?command=cat&stdin=1&stdout=1")
            .await
            .unwrap();
        drop(warm);
        let ps = || async {
            let mut ws = agent
                .ws("/exec/default/shell/main?command=ps&stdout=1")
                .await
                .unwrap();
            read_all(&mut ws).await.text(1)
        };
        let no_cat = || async {
            let deadline = tokio::time::Instant::now() + STEP;
            loop {
                let out = ps().await;
                if !out.lines().any(|l| l.trim_end().ends_with("cat")) {
                    return out;
                }
                assert!(tokio::time::Instant::now() < deadline, "cat left: {out}");
            }
        };
        no_cat().await;
        let before = settled_fds(pid).await;
        let before_targets = fd_targets(pid);
        // The count is the agent's: five sessions open hold a client and
        // an upstream connection each.
        let mut open = Vec::new();
        for _ in 0..5 {
            let mut ws = agent
                .ws("/exec/default/shell/main?command=cat&stdin=1&stdout=1")
                .await
                .unwrap();
            ws.send(stdin("up\n")).await.unwrap();
            read_until(&mut ws, 1, "up\n").await;
            open.push(ws);
        }
        let busy = fds(pid);
        assert!(busy >= before + 10, "{busy} fds with 5 sessions, {before} before");
        drop(open);
        for i in 0..50 {
            let mut ws = agent
                .ws("/exec/default/shell/main?command=cat&stdin=1&stdout=1")
                .await
                .unwrap();
            let line = format!("ping {i}\n");
            ws.send(stdin(&line)).await.unwrap();
            read_until(&mut ws, 1, &line).await;
            if i % 2 == 0 {
                ws.close(None).await.unwrap();
                read_all(&mut ws).await;
            }
        }
        let out = no_cat().await;
        eprintln!("in the container after 50 sessions:\n{out}");
        let procs: Vec<&str> = out.lines().skip(1).collect();
        assert!(
            procs.len() <= 2 && procs.iter().any(|l| l.contains("sleep 3600")),
            "processes left in the container: {out}"
        );
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let now = fds(pid);
            if now <= before {
                eprintln!("server fds: {before} before, {busy} with 5 sessions, {now} after 55");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{now} fds open in the server after 55 sessions, {before} before:\n{before_targets:#?}\nnow:\n{:#?}",
                fd_targets(pid)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
