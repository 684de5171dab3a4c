//! `skiff-bench streaming`: exec latency and port-forward throughput
//! through the API server and node agent, beside the same operations done
//! directly against containerd's streaming server in the same run (the
//! floor), issue [streaming] deliverable 6.
//!
//! One `skiff server` (API server, scheduler and agent in one process,
//! with the node's own containerd) runs one busybox pod that writes a
//! `--size-mib` file `/www/big` into its rootfs (dd from /dev/zero) and
//! serves it with `httpd -f -p 8080 -h /www`.
//!
//! Exec of `true`, `--runs` times per row, the rows interleaved run by run
//! (the machines are shared: pairing keeps drifts in background load out
//! of the ratios), after a few uncounted warm-up runs:
//!
//! 1. floor: CRI Exec on the node's containerd socket for the URL, then
//!    the bench's SPDY/3.1 client (`skiff_apiserver::streaming::spdy`) at
//!    that URL: `v4.channel.k8s.io`, streams `error` and `stdout`, read
//!    until both end; the Status on the error stream says success. Timed
//!    from the CRI call (the agent has to make it too) to the end;
//! 2. the same client at the API server's `pods/exec` (TLS, the admin
//!    kubeconfig's client certificate): SPDY passed through the API server
//!    and the agent to containerd;
//! 3. a WebSocket `v5.channel.k8s.io` client at `pods/exec`: the API
//!    server translates to SPDY;
//! 4. `kubectl exec` wall time (WebSocket v5, and SPDY with
//!    `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`), beside `kubectl version
//!    --client`: kubectl's own start-up, so the relay's cost can be read
//!    off;
//!
//! and, to tell the hops apart, the same SPDY client at the agent's
//! endpoint directly (TLS with the API server's kubelet-client
//! certificate, as the API server reaches it). Each exec row also prints
//! its phases (CRI URL, 101, streams open, Status).
//!
//! Port-forward of the whole file (`GET /big HTTP/1.0` on a `data`
//! stream, counted to the last byte of the body, then FIN and EOF),
//! `--transfers` times per row, median: the floor (CRI PortForward and
//! SPDY straight at containerd), SPDY through the API server, the
//! WebSocket tunnel (`SPDY/3.1+portforward.k8s.io`), and `kubectl
//! port-forward` (tunnel and SPDY) with a plain TCP GET from the bench;
//! as diagnostics, the agent directly and a plain TCP GET to the pod's IP
//! (no port-forward at all: what the machine moves).
//!
//! CPU per row, from the task schedstat of each process (ns): the bench
//! itself (so a client that is the limit shows), kubectl (its CPU as a
//! reaped child, or of the running port-forward), the server and its
//! containerd. containerd's shims (runc exec) are not counted.
//!
//! Everything runs under guards from `node`: the server is stopped by PID
//! and `skiff reset` clears its data dir, bridge and shims, also on errors
//! and Ctrl-C; kubectl processes are killed when dropped. Every wait is
//! bounded. It prints figures and never asserts them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::client::ConfigExt as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use skiff_apiserver::agents::dial::kubelet_endpoint;
use skiff_apiserver::streaming::spdy;
use skiff_client::tls::AcceptAnyServerCert;
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::{api, Runtime as _};
use tokio::io::{
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader,
};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::node::{bounded, on_path, wait_node_ready, Lease, Server};
use crate::stats::{percentile, print_grid};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// The kubectl binary.
    #[arg(long, default_value = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33")]
    kubectl: PathBuf,
    /// Execs per row.
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Uncounted execs per row before the measured ones.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Port-forward transfers per row (the median is reported).
    #[arg(long, default_value_t = 3)]
    transfers: usize,
    /// Size of the file transferred, in MiB.
    #[arg(long, default_value_t = 100)]
    size_mib: u64,
    /// SKIFF_LOG of the server.
    #[arg(long, default_value = "info,kube=warn,tower=warn,hyper=warn,h2=warn")]
    log: String,
    /// Copy the server's and containerd's logs into this directory before
    /// cleaning up.
    #[arg(long)]
    keep_logs: Option<PathBuf>,
}

const NS: &str = "default";
const POD: &str = "web";
const CONTAINER: &str = "web";
const PORT: u16 = 8080;
/// Bound of one exec, one upgrade, one read.
const STEP: Duration = Duration::from_secs(30);
/// Bound of one whole transfer.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(300);
const POD_TIMEOUT: Duration = Duration::from_secs(180);
/// Pauses before each exec and each transfer, so that what the previous
/// one left to do (teardown, kubectl's exit) is not counted in the next.
const EXEC_SETTLE: Duration = Duration::from_millis(20);
const TRANSFER_SETTLE: Duration = Duration::from_millis(500);
/// What an exec must say on the error stream (or nothing at all).
const SUCCESS: &str = "Success";
/// Exec's SPDY sub-protocol, and port-forward's.
const EXEC_PROTOCOL: &str = "v4.channel.k8s.io";
const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";
const WS_EXEC_PROTOCOL: &str = "v5.channel.k8s.io";
const WS_TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";
/// /proc/PID/stat counts in clock ticks (USER_HZ, 100 on Linux).
const CLK_TCK: f64 = 100.0;
const READ_BUF: usize = 256 * 1024;

// ------------------------------------------------------------------ CPU

/// CPU time of every live thread of `pid` (`self` for the bench), in ns,
/// from /proc/PID/task/*/schedstat (exact, unlike stat's 10 ms ticks).
fn cpu_ns(pid: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU of the bench's reaped children (cutime + cstime), in ns.
fn children_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // cutime and cstime are fields 16 and 17 of stat (13 and 14 after ')').
    let ticks: f64 = [13, 14]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    (ticks / CLK_TCK * 1e9) as u64
}

/// The processes whose CPU a row counts.
#[derive(Debug, Clone)]
struct Pids {
    server: String,
    containerd: String,
}

/// A row's CPU so far (ns): the bench, its client (kubectl), the server
/// and its containerd.
#[derive(Debug, Default, Clone, Copy)]
struct Cpu {
    bench: u64,
    client: u64,
    server: u64,
    containerd: u64,
}

/// CPU of the processes at one moment; `client` names a running kubectl
/// (or none: the reaped children are counted).
#[derive(Debug, Clone, Copy)]
struct CpuMark(Cpu);

impl CpuMark {
    fn now(pids: &Pids, client: Option<u32>) -> Self {
        CpuMark(Cpu {
            bench: cpu_ns("self"),
            client: client.map_or_else(children_cpu_ns, |p| cpu_ns(&p.to_string())),
            server: cpu_ns(&pids.server),
            containerd: cpu_ns(&pids.containerd),
        })
    }

    fn add_since(&self, pids: &Pids, client: Option<u32>, total: &mut Cpu) {
        let now = CpuMark::now(pids, client).0;
        let d = |a: u64, b: u64| b.saturating_sub(a);
        total.bench += d(self.0.bench, now.bench);
        total.client += d(self.0.client, now.client);
        total.server += d(self.0.server, now.server);
        total.containerd += d(self.0.containerd, now.containerd);
    }
}

// ------------------------------------------------------------ transport

/// A TLS endpoint: the API server as the admin kubeconfig reaches it (its
/// CA and client certificate), or the agent as the API server reaches it
/// (the kubelet-client certificate, the agent's certificate unchecked).
/// HTTP/1.1 only: upgrades are HTTP/1.1's.
struct Endpoint {
    authority: String,
    name: ServerName<'static>,
    tls: tokio_rustls::TlsConnector,
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

impl Endpoint {
    async fn from_kubeconfig(path: &Path) -> anyhow::Result<Self> {
        let kc = Kubeconfig::read_from(path)?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        let mut tls = config.rustls_client_config()?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let url = &config.cluster_url;
        let host = url
            .host()
            .ok_or_else(|| anyhow!("{url}: no host"))?
            .trim_matches(['[', ']'])
            .to_string();
        let port = url.port_u16().unwrap_or(443);
        Ok(Endpoint {
            authority: format!("{host}:{port}"),
            name: ServerName::try_from(host)?,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        })
    }

    fn agent(pki: &Path, host: &str, port: u16) -> anyhow::Result<Self> {
        let cert = std::fs::read(pki.join("apiserver-kubelet-client.crt"))?;
        let key = std::fs::read(pki.join("apiserver-kubelet-client.key"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider)))
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(&cert).collect::<Result<Vec<_>, _>>()?,
                PrivateKeyDer::from_pem_slice(&key)?,
            )?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Endpoint {
            authority: format!("{host}:{port}"),
            name: ServerName::try_from(host.to_string())?,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
        })
    }

    async fn connect(&self) -> anyhow::Result<Tls> {
        let tcp = tcp_connect(&self.authority).await?;
        bounded(
            &format!("TLS handshake with {}", self.authority),
            self.tls.connect(self.name.clone(), tcp),
        )
        .await
    }
}

async fn tcp_connect(authority: &str) -> anyhow::Result<TcpStream> {
    let tcp = bounded(
        &format!("connecting to {authority}"),
        TcpStream::connect(authority),
    )
    .await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// containerd's streaming URL split for dialling: `host:port` and the
/// request target.
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let uri: http::Uri = url.parse().with_context(|| format!("URL {url:?}"))?;
    anyhow::ensure!(
        uri.scheme_str() == Some("http"),
        "unexpected streaming URL {url}"
    );
    let authority = uri
        .authority()
        .ok_or_else(|| anyhow!("{url}: no host"))?
        .to_string();
    let target = uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.as_str().to_string());
    Ok((authority, target))
}

type Upgraded = TokioIo<hyper::upgrade::Upgraded>;

/// An HTTP/1.1 upgrade request (`POST`, as kubectl sends) on `io`: the
/// upgraded connection once the server answers 101, or its refusal.
async fn upgrade<T>(
    io: T,
    host: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<Upgraded>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        // Ends at the upgrade, or with the connection after a refusal.
        let _ = conn.with_upgrades().await;
    });
    let mut req = http::Request::builder()
        .method("POST")
        .uri(target)
        .header("Host", host);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Empty::<Bytes>::new())?;
    let resp = bounded("the upgrade request", sender.send_request(req)).await?;
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        let status = resp.status();
        let body = tokio::time::timeout(STEP, resp.into_body().collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        bail!("upgrade of {target} refused: {status}: {}", body.trim());
    }
    let upgraded = bounded("the upgraded connection", hyper::upgrade::on(resp)).await?;
    Ok(TokioIo::new(upgraded))
}

fn spdy_headers(protocol: &str) -> [(&'static str, &str); 3] {
    [
        ("Connection", "Upgrade"),
        ("Upgrade", spdy::UPGRADE),
        ("X-Stream-Protocol-Version", protocol),
    ]
}

/// A WebSocket session at `path` on the API server offering `protocol`.
async fn websocket(
    apiserver: &Endpoint,
    path: &str,
    protocol: &str,
) -> anyhow::Result<tokio_tungstenite::WebSocketStream<Tls>> {
    let mut req = format!("wss://{}{path}", apiserver.authority).into_client_request()?;
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", protocol.parse()?);
    let tls = apiserver.connect().await?;
    match bounded(
        "the WebSocket handshake",
        tokio_tungstenite::client_async(req, tls),
    )
    .await
    {
        Ok((ws, resp)) => {
            let got = resp
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok());
            anyhow::ensure!(
                got == Some(protocol),
                "{path}: negotiated {got:?}, not {protocol}"
            );
            Ok(ws)
        }
        Err(e) => match e.downcast_ref::<tungstenite::Error>() {
            Some(tungstenite::Error::Http(resp)) => bail!(
                "{path}: {}: {}",
                resp.status(),
                String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default())
            ),
            _ => Err(e),
        },
    }
}

/// The bytes of a `SPDY/3.1+portforward.k8s.io` tunnel as one io: binary
/// messages' payloads in, writes out as binary messages (client-go's
/// `TunnelingConnection`), pumped by two tasks through a duplex pipe.
fn tunnel_io(ws: tokio_tungstenite::WebSocketStream<Tls>) -> tokio::io::DuplexStream {
    let (mine, theirs) = tokio::io::duplex(READ_BUF);
    let (mut sink, mut source) = ws.split();
    let (mut from_spdy, mut to_spdy) = tokio::io::split(theirs);
    tokio::spawn(async move {
        while let Some(Ok(msg)) = source.next().await {
            match msg {
                Message::Binary(b) if to_spdy.write_all(&b).await.is_err() => break,
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = to_spdy.shutdown().await;
    });
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from_spdy.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let data = Bytes::copy_from_slice(buf.get(..n).unwrap_or_default());
                    if sink.send(Message::Binary(data)).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sink.close().await;
    });
    mine
}

// ----------------------------------------------------------------- exec

/// Where one exec's time went (from its start).
#[derive(Debug, Clone, Copy)]
struct ExecTiming {
    /// The CRI Exec answer (floor only).
    url: Option<Duration>,
    /// The 101.
    upgraded: Option<Duration>,
    /// The streams open (SPDY) or the first message (WebSocket).
    opened: Option<Duration>,
    total: Duration,
}

/// The Status an exec's error stream (or channel 3) carried: success if
/// empty or `Success`.
fn check_status(raw: &[u8]) -> anyhow::Result<()> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let status: Value = serde_json::from_slice(raw)
        .with_context(|| format!("exec status {:?}", String::from_utf8_lossy(raw)))?;
    anyhow::ensure!(
        status["status"] == SUCCESS,
        "exec failed: {}",
        String::from_utf8_lossy(raw)
    );
    Ok(())
}

/// A SPDY exec of `true` on `io` at `target`, as client-go's v4 client
/// does it: upgrade, open `error` then `stdout`, read both to their ends.
async fn spdy_exec<T>(io: T, host: &str, target: &str, began: Instant) -> anyhow::Result<ExecTiming>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let upgraded = upgrade(io, host, target, &spdy_headers(EXEC_PROTOCOL)).await?;
    let upgraded_at = began.elapsed();
    let (conn, _incoming) = spdy::Connection::client(upgraded);
    let mut error = bounded(
        "opening the error stream",
        conn.open(&[("streamType", "error")]),
    )
    .await?;
    let mut stdout = bounded(
        "opening the stdout stream",
        conn.open(&[("streamType", "stdout")]),
    )
    .await?;
    let opened = began.elapsed();
    let (mut status, mut out) = (Vec::new(), Vec::new());
    let (a, b) = bounded("the exec's end", async {
        Ok::<_, anyhow::Error>(tokio::join!(
            error.read_to_end(&mut status),
            stdout.read_to_end(&mut out)
        ))
    })
    .await?;
    a.context("reading the error stream")?;
    b.context("reading stdout")?;
    let total = began.elapsed();
    // GOAWAY and the io's close, off the clock (the server ends it too).
    tokio::spawn(async move { conn.close().await });
    check_status(&status)?;
    Ok(ExecTiming {
        url: None,
        upgraded: Some(upgraded_at),
        opened: Some(opened),
        total,
    })
}

/// The floor: CRI Exec, then SPDY straight at containerd's URL.
async fn floor_exec(cri: &CriRuntime, container: &str) -> anyhow::Result<ExecTiming> {
    let began = Instant::now();
    let url = bounded(
        "CRI Exec",
        cri.exec(api::ExecRequest {
            container_id: container.to_string(),
            cmd: vec!["true".into()],
            tty: false,
            stdin: false,
            stdout: true,
            stderr: false,
        }),
    )
    .await?;
    let url_at = began.elapsed();
    let (authority, target) = split_url(&url)?;
    let tcp = tcp_connect(&authority).await?;
    let mut t = spdy_exec(tcp, &authority, &target, began).await?;
    t.url = Some(url_at);
    Ok(t)
}

fn exec_path() -> String {
    format!("/api/v1/namespaces/{NS}/pods/{POD}/exec?command=true&stdout=1")
}

/// The agent's exec route, as the API server asks it.
fn agent_exec_path() -> String {
    format!("/exec/{NS}/{POD}/{CONTAINER}?command=true&stdout=1")
}

/// SPDY at a TLS endpoint: the API server (passed through to the agent
/// and containerd) or the agent itself (passed through to containerd).
async fn tls_spdy_exec(endpoint: &Endpoint, path: &str) -> anyhow::Result<ExecTiming> {
    let began = Instant::now();
    let tls = endpoint.connect().await?;
    spdy_exec(tls, &endpoint.authority, path, began).await
}

/// WebSocket v5 through the API server (translated to SPDY there): read
/// until the server closes; channel 3 carries the Status.
async fn api_ws_exec(apiserver: &Endpoint) -> anyhow::Result<ExecTiming> {
    let began = Instant::now();
    let mut ws = websocket(apiserver, &exec_path(), WS_EXEC_PROTOCOL).await?;
    let upgraded = began.elapsed();
    let mut first = None;
    let mut status = Vec::new();
    bounded("the exec's end", async {
        while let Some(msg) = ws.next().await {
            first.get_or_insert_with(|| began.elapsed());
            match msg? {
                Message::Binary(b) => {
                    if let Some((&3, data)) = b.split_first() {
                        status.extend_from_slice(data);
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
        Ok::<_, anyhow::Error>(())
    })
    .await?;
    let total = began.elapsed();
    tokio::spawn(async move { ws.close(None).await });
    check_status(&status)?;
    Ok(ExecTiming {
        url: None,
        upgraded: Some(upgraded),
        opened: first,
        total,
    })
}

/// A kubectl command with the cluster's kubeconfig and its own discovery
/// cache.
fn kubectl(c: &Cluster, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&c.kubectl);
    cmd.arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .arg("--cache-dir")
        .arg(&c.kubectl_cache)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// A kubectl run's wall time (it must succeed).
async fn kubectl_run(mut cmd: tokio::process::Command) -> anyhow::Result<ExecTiming> {
    let began = Instant::now();
    let out = bounded("kubectl", cmd.output()).await?;
    let total = began.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "{cmd:?}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(ExecTiming {
        url: None,
        upgraded: None,
        opened: None,
        total,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExecRow {
    Floor,
    AgentSpdy,
    ApiSpdy,
    ApiWebSocket,
    KubectlWebSocket,
    KubectlSpdy,
    KubectlVersion,
}

impl ExecRow {
    const ALL: [ExecRow; 7] = [
        ExecRow::Floor,
        ExecRow::AgentSpdy,
        ExecRow::ApiSpdy,
        ExecRow::ApiWebSocket,
        ExecRow::KubectlWebSocket,
        ExecRow::KubectlSpdy,
        ExecRow::KubectlVersion,
    ];

    fn label(self) -> &'static str {
        match self {
            ExecRow::Floor => "floor: CRI Exec + SPDY to containerd",
            ExecRow::AgentSpdy => "(diagnostic) agent directly, SPDY over TLS",
            ExecRow::ApiSpdy => "API server, SPDY (passthrough)",
            ExecRow::ApiWebSocket => "API server, WebSocket v5 (translated)",
            ExecRow::KubectlWebSocket => "kubectl exec (WebSocket v5)",
            ExecRow::KubectlSpdy => "kubectl exec (SPDY, websockets=false)",
            ExecRow::KubectlVersion => "kubectl version --client (start-up)",
        }
    }

    fn is_kubectl(self) -> bool {
        matches!(
            self,
            ExecRow::KubectlWebSocket | ExecRow::KubectlSpdy | ExecRow::KubectlVersion
        )
    }

    async fn once(self, c: &Cluster) -> anyhow::Result<ExecTiming> {
        match self {
            ExecRow::Floor => floor_exec(&c.cri, &c.container).await,
            ExecRow::AgentSpdy => tls_spdy_exec(&c.agent, &agent_exec_path()).await,
            ExecRow::ApiSpdy => tls_spdy_exec(&c.apiserver, &exec_path()).await,
            ExecRow::ApiWebSocket => api_ws_exec(&c.apiserver).await,
            ExecRow::KubectlWebSocket => {
                let mut cmd = kubectl(c, &["exec", POD, "--", "true"]);
                cmd.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "true");
                kubectl_run(cmd).await
            }
            ExecRow::KubectlSpdy => {
                let mut cmd = kubectl(c, &["exec", POD, "--", "true"]);
                cmd.env("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false");
                kubectl_run(cmd).await
            }
            ExecRow::KubectlVersion => kubectl_run(kubectl(c, &["version", "--client"])).await,
        }
    }
}

#[derive(Debug, Default)]
struct ExecFigures {
    timings: Vec<ExecTiming>,
    cpu: Cpu,
}

impl ExecFigures {
    fn p(&self, p: f64, f: impl Fn(&ExecTiming) -> Option<Duration>) -> Option<Duration> {
        let mut v: Vec<Duration> = self.timings.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| percentile(&mut v, p))
    }
    fn total(&self, p: f64) -> Option<Duration> {
        self.p(p, |t| Some(t.total))
    }
}

async fn measure_exec(c: &Cluster, args: &Args) -> anyhow::Result<Vec<(ExecRow, ExecFigures)>> {
    let mut rows: Vec<(ExecRow, ExecFigures)> = ExecRow::ALL
        .iter()
        .map(|&r| (r, ExecFigures::default()))
        .collect();
    for (row, _) in &rows {
        for _ in 0..args.warmup {
            row.once(c)
                .await
                .with_context(|| format!("warm-up of {}", row.label()))?;
        }
    }
    eprintln!("exec: {} runs of each row", args.runs);
    let n = rows.len();
    for i in 0..args.runs {
        // Each run starts at another row, so that no row always follows
        // the same one (kubectl's exit, a session's teardown).
        for k in 0..n {
            let (row, fig) = &mut rows[(i + k) % n];
            tokio::time::sleep(EXEC_SETTLE).await;
            let mark = CpuMark::now(&c.pids, None);
            let t = row
                .once(c)
                .await
                .with_context(|| format!("{} (run {i})", row.label()))?;
            mark.add_since(&c.pids, None, &mut fig.cpu);
            fig.timings.push(t);
        }
    }
    Ok(rows)
}

// --------------------------------------------------------- port-forward

/// One transfer: the body's bytes and the time from the start to its
/// last byte.
#[derive(Debug, Clone, Copy)]
struct Transfer {
    bytes: u64,
    took: Duration,
}

impl Transfer {
    fn mib_s(&self) -> f64 {
        self.bytes as f64 / (1024.0 * 1024.0) / self.took.as_secs_f64().max(1e-9)
    }
}

/// Sends `GET /big` on `io` and reads the answer to the body's last
/// byte (by Content-Length): the body's size and when it was complete.
async fn http_get_big<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    want: u64,
) -> anyhow::Result<(u64, Instant)> {
    io.write_all(b"GET /big HTTP/1.0\r\n\r\n").await?;
    io.flush().await?;
    let mut buf = vec![0u8; READ_BUF];
    let mut head = Vec::new();
    let (length, mut body) = loop {
        let n = bounded("the answer's head", io.read(&mut buf)).await?;
        anyhow::ensure!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let text = String::from_utf8_lossy(head.get(..end).unwrap_or_default()).into_owned();
            anyhow::ensure!(
                text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"),
                "GET /big: {text}"
            );
            let length = text
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim()
                        .eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<u64>().ok())?
                })
                .ok_or_else(|| anyhow!("GET /big: no Content-Length: {text}"))?;
            break (length, (head.len() - end - 4) as u64);
        }
    };
    anyhow::ensure!(length == want, "GET /big: {length} bytes, not {want}");
    while body < length {
        let n = bounded("the answer's body", io.read(&mut buf)).await?;
        anyhow::ensure!(n > 0, "closed after {body} of {length} bytes");
        body += n as u64;
    }
    Ok((body, Instant::now()))
}

/// A port-forward session on an upgraded (or tunnelled) SPDY connection,
/// as client-go opens one: the `error` stream (closed for writing at
/// once), the `data` stream with the request; after the body, FIN on data
/// (containerd then ends the pair) and both streams read to their ends.
async fn spdy_port_forward<T>(io: T, began: Instant, want: u64) -> anyhow::Result<Transfer>
where
    T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (conn, _incoming) = spdy::Connection::client(io);
    let port = PORT.to_string();
    let mut error = bounded(
        "opening the error stream",
        conn.open(&[("streamType", "error"), ("port", &port), ("requestID", "0")]),
    )
    .await?;
    error.shutdown().await?;
    let mut data = bounded(
        "opening the data stream",
        conn.open(&[("streamType", "data"), ("port", &port), ("requestID", "0")]),
    )
    .await?;
    let (bytes, done) = tokio::time::timeout(TRANSFER_TIMEOUT, http_get_big(&mut data, want))
        .await
        .map_err(|_| anyhow!("the transfer took over {TRANSFER_TIMEOUT:?}"))??;
    data.shutdown().await?;
    let mut rest = Vec::new();
    let mut said = Vec::new();
    let _ = tokio::time::timeout(STEP, async {
        let _ = tokio::join!(data.read_to_end(&mut rest), error.read_to_end(&mut said));
    })
    .await;
    tokio::spawn(async move { conn.close().await });
    anyhow::ensure!(
        said.is_empty(),
        "port-forward error: {}",
        String::from_utf8_lossy(&said)
    );
    Ok(Transfer {
        bytes,
        took: done - began,
    })
}

async fn floor_port_forward(c: &Cluster, want: u64) -> anyhow::Result<Transfer> {
    let began = Instant::now();
    let url = bounded(
        "CRI PortForward",
        c.cri.port_forward(api::PortForwardRequest {
            pod_sandbox_id: c.sandbox.clone(),
            port: vec![i32::from(PORT)],
        }),
    )
    .await?;
    let (authority, target) = split_url(&url)?;
    let tcp = tcp_connect(&authority).await?;
    let io = upgrade(
        tcp,
        &authority,
        &target,
        &spdy_headers(PORT_FORWARD_PROTOCOL),
    )
    .await?;
    spdy_port_forward(io, began, want).await
}

fn port_forward_path() -> String {
    format!("/api/v1/namespaces/{NS}/pods/{POD}/portforward")
}

/// SPDY at a TLS endpoint: the API server's `pods/portforward` or the
/// agent's `/portForward/NS/POD`.
async fn tls_spdy_port_forward(
    endpoint: &Endpoint,
    path: &str,
    want: u64,
) -> anyhow::Result<Transfer> {
    let began = Instant::now();
    let tls = endpoint.connect().await?;
    let io = upgrade(
        tls,
        &endpoint.authority,
        path,
        &spdy_headers(PORT_FORWARD_PROTOCOL),
    )
    .await?;
    spdy_port_forward(io, began, want).await
}

/// No port-forward at all: the GET straight to the pod's IP over the
/// node's bridge (what the machine moves through loopback TCP).
async fn pod_ip_get(c: &Cluster, want: u64) -> anyhow::Result<Transfer> {
    let began = Instant::now();
    let mut tcp = tcp_connect(&format!("{}:{PORT}", c.pod_ip)).await?;
    let (bytes, done) = tokio::time::timeout(TRANSFER_TIMEOUT, http_get_big(&mut tcp, want))
        .await
        .map_err(|_| anyhow!("the transfer took over {TRANSFER_TIMEOUT:?}"))??;
    Ok(Transfer {
        bytes,
        took: done - began,
    })
}

async fn api_tunnel_port_forward(c: &Cluster, want: u64) -> anyhow::Result<Transfer> {
    let began = Instant::now();
    let ws = websocket(&c.apiserver, &port_forward_path(), WS_TUNNEL_PROTOCOL).await?;
    spdy_port_forward(tunnel_io(ws), began, want).await
}

/// A running `kubectl port-forward` (killed when dropped).
struct KubectlForward {
    child: tokio::process::Child,
    port: u16,
}

impl KubectlForward {
    async fn start(c: &Cluster, websockets: bool, log: &Path) -> anyhow::Result<Self> {
        let port = skiff_testkit::free_port()?;
        let mut cmd = kubectl(
            c,
            &[
                "port-forward",
                "--address",
                "127.0.0.1",
                &format!("pod/{POD}"),
                &format!("{port}:{PORT}"),
            ],
        );
        cmd.env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets.to_string())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?);
        let mut child = cmd.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout of kubectl"))?;
        let mut lines = BufReader::new(stdout).lines();
        let want = format!("Forwarding from 127.0.0.1:{port} -> {PORT}");
        bounded("kubectl port-forward to listen", async {
            loop {
                match lines.next_line().await? {
                    Some(l) if l.contains(&want) => return Ok::<_, anyhow::Error>(()),
                    Some(_) => {}
                    None => bail!(
                        "kubectl port-forward ended: {}",
                        std::fs::read_to_string(log).unwrap_or_default()
                    ),
                }
            }
        })
        .await?;
        // It prints a line per connection: keep its pipe drained.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(KubectlForward { child, port })
    }

    fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn get(&self, want: u64) -> anyhow::Result<Transfer> {
        let began = Instant::now();
        let mut tcp = tcp_connect(&format!("127.0.0.1:{}", self.port)).await?;
        let (bytes, done) = tokio::time::timeout(TRANSFER_TIMEOUT, http_get_big(&mut tcp, want))
            .await
            .map_err(|_| anyhow!("the transfer took over {TRANSFER_TIMEOUT:?}"))??;
        drop(tcp);
        Ok(Transfer {
            bytes,
            took: done - began,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ForwardRow {
    PodIp,
    Floor,
    AgentSpdy,
    ApiSpdy,
    ApiTunnel,
    KubectlTunnel,
    KubectlSpdy,
}

impl ForwardRow {
    const ALL: [ForwardRow; 7] = [
        ForwardRow::PodIp,
        ForwardRow::Floor,
        ForwardRow::AgentSpdy,
        ForwardRow::ApiSpdy,
        ForwardRow::ApiTunnel,
        ForwardRow::KubectlTunnel,
        ForwardRow::KubectlSpdy,
    ];

    fn label(self) -> &'static str {
        match self {
            ForwardRow::PodIp => "(diagnostic) plain TCP to the pod IP, no port-forward",
            ForwardRow::Floor => "floor: CRI PortForward + SPDY to containerd",
            ForwardRow::AgentSpdy => "(diagnostic) agent directly, SPDY over TLS",
            ForwardRow::ApiSpdy => "API server, SPDY (passthrough)",
            ForwardRow::ApiTunnel => "API server, WebSocket tunnel (SPDY/3.1+portforward)",
            ForwardRow::KubectlTunnel => "kubectl port-forward (tunnel) + TCP GET",
            ForwardRow::KubectlSpdy => "kubectl port-forward (SPDY, websockets=false) + TCP GET",
        }
    }

    fn kubectl_websockets(self) -> Option<bool> {
        match self {
            ForwardRow::KubectlTunnel => Some(true),
            ForwardRow::KubectlSpdy => Some(false),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
struct ForwardFigures {
    transfers: Vec<Transfer>,
    cpu: Cpu,
    error: Option<String>,
}

impl ForwardFigures {
    fn median(&self) -> Option<Transfer> {
        let mut v = self.transfers.clone();
        v.sort_by_key(|t| t.took);
        v.get(v.len() / 2).copied()
    }
}

async fn measure_forward(
    c: &Cluster,
    args: &Args,
    work: &Path,
) -> anyhow::Result<Vec<(ForwardRow, ForwardFigures)>> {
    let want = args.size_mib * 1024 * 1024;
    let mut rows: Vec<(ForwardRow, ForwardFigures)> = ForwardRow::ALL
        .iter()
        .map(|&r| (r, ForwardFigures::default()))
        .collect();
    // kubectl processes, one per kubectl row, for the whole phase.
    let mut forwards: Vec<Option<KubectlForward>> = Vec::new();
    for (row, fig) in rows.iter_mut() {
        let fwd = match row.kubectl_websockets() {
            Some(ws) => {
                let log = work.join(format!("kubectl-port-forward-{ws}.log"));
                match KubectlForward::start(c, ws, &log).await {
                    Ok(f) => Some(f),
                    Err(e) => {
                        fig.error = Some(format!("{e:#}"));
                        None
                    }
                }
            }
            None => None,
        };
        forwards.push(fwd);
    }
    eprintln!(
        "port-forward: {} transfers of {} MiB on each row",
        args.transfers, args.size_mib
    );
    let n = rows.len();
    for i in 0..args.transfers {
        // Each round starts at another row, as the execs do.
        for k in 0..n {
            let j = (i + k) % n;
            let (row, fig) = &mut rows[j];
            let fwd = &forwards[j];
            if fig.error.is_some() {
                continue;
            }
            tokio::time::sleep(TRANSFER_SETTLE).await;
            let client = fwd.as_ref().and_then(KubectlForward::pid);
            let mark = CpuMark::now(&c.pids, client);
            let result = match row {
                ForwardRow::Floor => floor_port_forward(c, want).await,
                ForwardRow::PodIp => pod_ip_get(c, want).await,
                ForwardRow::AgentSpdy => {
                    let path = format!("/portForward/{NS}/{POD}");
                    tls_spdy_port_forward(&c.agent, &path, want).await
                }
                ForwardRow::ApiSpdy => {
                    tls_spdy_port_forward(&c.apiserver, &port_forward_path(), want).await
                }
                ForwardRow::ApiTunnel => api_tunnel_port_forward(c, want).await,
                ForwardRow::KubectlTunnel | ForwardRow::KubectlSpdy => match fwd {
                    Some(f) => f.get(want).await,
                    None => Err(anyhow!("kubectl port-forward did not start")),
                },
            };
            mark.add_since(&c.pids, client, &mut fig.cpu);
            match result {
                Ok(t) => fig.transfers.push(t),
                Err(e) if *row == ForwardRow::Floor => {
                    return Err(e.context(format!("{} (transfer {i})", row.label())));
                }
                Err(e) => fig.error = Some(format!("{e:#}")),
            }
        }
    }
    drop(forwards);
    Ok(rows)
}

// ------------------------------------------------------------- the pod

/// busybox writing the file into its rootfs (not a tmpfs: no memory
/// limit needed), then httpd in the foreground; grace 0.
fn pod_json(size_mib: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NS, "labels": {"app": "skiff-bench-streaming"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": CONTAINER,
                "image": "busybox",
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", format!(
                    "mkdir -p /www && dd if=/dev/zero of=/www/big bs=1M count={size_mib} 2>/dev/null \
                     && echo ok > /www/index.html && exec httpd -f -p {PORT} -h /www"
                )],
                "ports": [{"containerPort": PORT}],
            }],
        },
    })
}

/// The running pod, as the bench reaches it.
struct Started {
    container: String,
    sandbox: String,
    ip: String,
    node: String,
}

/// The pod once it runs and httpd answers.
async fn start_pod(pods: &Api<Pod>, cri: &CriRuntime, size_mib: u64) -> anyhow::Result<Started> {
    let pod: Pod = serde_json::from_value(pod_json(size_mib))?;
    bounded(
        "creating the pod",
        pods.create(&PostParams::default(), &pod),
    )
    .await?;
    let deadline = Instant::now() + POD_TIMEOUT;
    let (uid, container, ip, node) = loop {
        let p = bounded("reading the pod", pods.get(POD)).await?;
        let status = p.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
        let id = status
            .and_then(|s| s.container_statuses.as_ref()?.first()?.container_id.clone())
            .map(|id| {
                id.split_once("://")
                    .map_or(id.clone(), |(_, i)| i.to_string())
            });
        let ip = status.and_then(|s| s.pod_ip.clone());
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        if let (true, Some(id), Some(uid), Some(ip), Some(node)) =
            (running, id, p.metadata.uid.clone(), ip, node)
        {
            break (uid, id, ip, node);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "pod {POD} not running within {POD_TIMEOUT:?}: {:?}",
            p.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let sandbox = bounded("listing sandboxes", cri.list_pod_sandboxes_of(&uid))
        .await?
        .into_iter()
        .find(|s| s.state == api::PodSandboxState::SandboxReady as i32)
        .ok_or_else(|| anyhow!("no ready sandbox for pod {POD}"))?
        .id;
    let probe = format!("wget -q -O /dev/null http://127.0.0.1:{PORT}/index.html");
    loop {
        let r = cri
            .exec_sync(&container, vec!["sh".into(), "-c".into(), probe.clone()], 5)
            .await;
        if matches!(r, Ok((0, _, _))) {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "httpd in {POD} did not answer within {POD_TIMEOUT:?}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Started {
        container,
        sandbox,
        ip,
        node,
    })
}

// ---------------------------------------------------------------- report

/// /proc/loadavg's three averages (the machines are shared: a build
/// running meanwhile shows here).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3))
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > Duration::ZERO => {
            format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
        }
        _ => "-".into(),
    }
}

fn exec_target(got: Option<Duration>, floor: Option<Duration>) -> String {
    let (Some(got), Some(floor)) = (got, floor) else {
        return "-".into();
    };
    let limit = floor.mul_f64(1.2) + Duration::from_millis(5);
    let verdict = if got <= limit { "met" } else { "MISSED" };
    format!("≤ {} ({verdict})", ms(Some(limit)))
}

/// CPU ms per operation.
fn per_op(ns: u64, n: usize) -> String {
    if n == 0 {
        return "-".into();
    }
    format!("{:.1}", ns as f64 / 1e6 / n as f64)
}

fn report_exec(args: &Args, rows: &[(ExecRow, ExecFigures)]) {
    let floor = rows
        .iter()
        .find(|(r, _)| *r == ExecRow::Floor)
        .map(|(_, f)| f);
    let (f50, f99) = (
        floor.and_then(|f| f.total(50.0)),
        floor.and_then(|f| f.total(99.0)),
    );
    let version = rows
        .iter()
        .find(|(r, _)| *r == ExecRow::KubectlVersion)
        .and_then(|(_, f)| f.total(50.0));
    let mut table = Vec::new();
    for (row, fig) in rows {
        let (p50, p99) = (fig.total(50.0), fig.total(99.0));
        let targeted = matches!(row, ExecRow::ApiSpdy | ExecRow::ApiWebSocket);
        let n = fig.timings.len();
        table.push(vec![
            row.label().to_string(),
            ms(p50),
            ms(p99),
            if *row == ExecRow::KubectlVersion {
                "-".into()
            } else {
                ratio(p50, f50)
            },
            if *row == ExecRow::KubectlVersion {
                "-".into()
            } else {
                ratio(p99, f99)
            },
            if targeted {
                exec_target(p50, f50)
            } else {
                "-".into()
            },
            if targeted {
                exec_target(p99, f99)
            } else {
                "-".into()
            },
            per_op(fig.cpu.bench, n),
            if row.is_kubectl() {
                per_op(fig.cpu.client, n)
            } else {
                "-".into()
            },
            per_op(fig.cpu.server, n),
            per_op(fig.cpu.containerd, n),
        ]);
    }
    print_grid(
        &format!(
            "Exec `true` latency, {} runs per row (interleaved), target: through the API server ≤ 1.2 × floor + 5 ms; CPU in ms per exec",
            args.runs
        ),
        &[
            "path",
            "p50",
            "p99",
            "p50 / floor",
            "p99 / floor",
            "p50 target",
            "p99 target",
            "bench CPU",
            "kubectl CPU",
            "server CPU",
            "containerd CPU",
        ],
        &table,
    );

    // Where the time goes (p50 of each phase, from the start).
    let mut phases = Vec::new();
    for (row, fig) in rows.iter().filter(|(r, _)| !r.is_kubectl()) {
        phases.push(vec![
            row.label().to_string(),
            ms(fig.p(50.0, |t| t.url)),
            ms(fig.p(50.0, |t| t.upgraded)),
            ms(fig.p(50.0, |t| t.opened)),
            ms(fig.total(50.0)),
        ]);
    }
    print_grid(
        "Exec phases, p50 of the time since the start (TLS included in the upgrade through the API server; WebSocket 'opened' is its first message)",
        &["path", "CRI Exec URL", "101 upgraded", "streams open", "end (Status)"],
        &phases,
    );
    if let Some(version) = version {
        let relay: Vec<Vec<String>> = rows
            .iter()
            .filter(|(r, _)| matches!(r, ExecRow::KubectlWebSocket | ExecRow::KubectlSpdy))
            .map(|(r, f)| {
                let p50 = f.total(50.0);
                let relay = p50.map(|p| p.saturating_sub(version));
                vec![
                    r.label().to_string(),
                    ms(p50),
                    ms(Some(version)),
                    ms(relay),
                    ms(f50),
                    ratio(relay, f50),
                ]
            })
            .collect();
        print_grid(
            "kubectl exec less kubectl's start-up (p50s)",
            &[
                "path",
                "kubectl exec",
                "kubectl version --client",
                "difference",
                "floor",
                "difference / floor",
            ],
            &relay,
        );
    }
}

fn report_forward(args: &Args, rows: &[(ForwardRow, ForwardFigures)]) {
    let floor = rows
        .iter()
        .find(|(r, _)| *r == ForwardRow::Floor)
        .and_then(|(_, f)| f.median());
    let mut table = Vec::new();
    for (row, fig) in rows {
        let median = fig.median();
        let n = fig.transfers.len();
        let wall: f64 = fig.transfers.iter().map(|t| t.took.as_secs_f64()).sum();
        let share = |ns: u64| {
            if wall > 0.0 {
                format!("{:.0}%", ns as f64 / 1e9 / wall * 100.0)
            } else {
                "-".into()
            }
        };
        let pct = match (median, floor) {
            (Some(m), Some(f)) => Some(m.mib_s() / f.mib_s() * 100.0),
            _ => None,
        };
        let targeted = !matches!(
            row,
            ForwardRow::PodIp | ForwardRow::Floor | ForwardRow::AgentSpdy
        );
        let target = match (targeted, pct) {
            (false, _) | (_, None) => "-".to_string(),
            (_, Some(p)) if p >= 80.0 => "≥ 80% (met)".into(),
            (_, Some(_)) => "≥ 80% (MISSED)".into(),
        };
        let all: Vec<String> = fig
            .transfers
            .iter()
            .map(|t| format!("{:.0}", t.mib_s()))
            .collect();
        table.push(vec![
            row.label().to_string(),
            median.map_or("-".into(), |m| format!("{:.1} MiB/s", m.mib_s())),
            if all.is_empty() {
                fig.error.clone().unwrap_or_else(|| "-".into())
            } else {
                all.join(", ")
            },
            pct.map_or("-".into(), |p| format!("{p:.0}%")),
            target,
            share(fig.cpu.bench),
            if row.kubectl_websockets().is_some() {
                share(fig.cpu.client)
            } else {
                "-".into()
            },
            share(fig.cpu.server),
            share(fig.cpu.containerd),
            if n == 0 {
                "-".into()
            } else {
                let all = fig.cpu.bench + fig.cpu.client + fig.cpu.server + fig.cpu.containerd;
                format!("{:.2} s", all as f64 / 1e9 / n as f64)
            },
        ]);
    }
    print_grid(
        &format!(
            "Port-forward of a {} MiB file (GET /big, HTTP/1.0), median of {}; target ≥ 80% of floor. CPU as % of one core over the transfers",
            args.size_mib, args.transfers
        ),
        &[
            "path",
            "throughput",
            "each (MiB/s)",
            "% of floor",
            "target",
            "bench CPU",
            "kubectl CPU",
            "server CPU",
            "containerd CPU",
            "CPU per transfer",
        ],
        &table,
    );
    for (row, fig) in rows {
        if let (Some(e), false) = (&fig.error, fig.transfers.is_empty()) {
            println!("{}: later transfers failed: {e}", row.label());
        }
    }
}

// -------------------------------------------------------------------- run

/// The cluster and what the bench uses of it; the server drops last.
struct Cluster {
    apiserver: Endpoint,
    agent: Endpoint,
    pod_ip: String,
    cri: CriRuntime,
    container: String,
    sandbox: String,
    pids: Pids,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    kubectl_cache: PathBuf,
    server: Server,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    tokio::select! {
        r = run_all(&args) => r,
        _ = tokio::signal::ctrl_c() => {
            // run_all's guards have stopped and reset everything by now.
            bail!("interrupted")
        }
    }
}

async fn run_all(args: &Args) -> anyhow::Result<()> {
    let skiff = crate::cluster::skiff_binary(args.skiff.as_deref())?;
    anyhow::ensure!(
        args.runs > 0 && args.transfers > 0 && args.size_mib > 0,
        "--runs, --transfers and --size-mib must be > 0"
    );
    for binary in ["containerd", "runc"] {
        anyhow::ensure!(on_path(binary).is_some(), "{binary} is not installed");
    }
    anyhow::ensure!(
        args.kubectl.exists(),
        "{} not found (--kubectl)",
        args.kubectl.display()
    );
    // Locals drop in reverse order: the server is stopped and reset before
    // the lease and the work dir go.
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-streaming-")
        .tempdir()?;
    let lease = Lease::take(230)?;
    skiff_node::network::remove_bridge(&lease.bridge());
    eprintln!("work dir {}", work.path().display());
    let cidr = format!("10.{}.0.0/16", lease.octet);
    let data_dir = work.path().join("server");
    let mut server = Server::spawn(
        &skiff,
        data_dir.clone(),
        &cidr,
        &lease.bridge(),
        &args.log,
        work.path().join("server.log"),
        &work.path().join("reset.log"),
    )?;
    let client = server.client(Duration::from_secs(60)).await?;
    wait_node_ready(&client, Duration::from_secs(120)).await?;
    eprintln!("skiff: node Ready (bridge {}, {cidr})", lease.bridge());
    let kubeconfig = data_dir.join("admin.kubeconfig");
    let result = async {
        let cri = CriRuntime::new(server.containerd_dir().join("containerd.sock"))?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let pod = start_pod(&pods, &cri, args.size_mib).await?;
        eprintln!(
            "pod {POD} at {} serving {} MiB (container {:.12})",
            pod.ip, args.size_mib, pod.container
        );
        // The agent where the API server finds it.
        let nodes: Api<Node> = Api::all(client.clone());
        let node = bounded("reading the node", nodes.get(&pod.node)).await?;
        let (host, port) = kubelet_endpoint(&serde_json::to_value(&node)?)
            .map_err(|e| anyhow!("the agent's endpoint: {}", e.message))?;
        let agent = Endpoint::agent(&data_dir.join("pki"), &host, port)?;
        let pids = Pids {
            server: server
                .pid()
                .ok_or_else(|| anyhow!("no server PID"))?
                .to_string(),
            containerd: server
                .containerd_pid()
                .ok_or_else(|| anyhow!("no containerd PID"))?
                .to_string(),
        };
        anyhow::Ok((
            Endpoint::from_kubeconfig(&kubeconfig).await?,
            agent,
            cri,
            pod,
            pids,
        ))
    }
    .await;
    let (apiserver, agent, cri, pod, pids) = match result {
        Ok(v) => v,
        Err(e) => return Err(e.context(format!("server log tail:\n{}", server.log_tail()))),
    };
    let cluster = Cluster {
        apiserver,
        agent,
        pod_ip: pod.ip,
        cri,
        container: pod.container,
        sandbox: pod.sandbox,
        pids,
        kubectl: args.kubectl.clone(),
        kubeconfig,
        kubectl_cache: work.path().join("kubectl-cache"),
        server,
    };
    let load_start = loadavg();
    let result = async {
        let exec = measure_exec(&cluster, args).await?;
        let forward = measure_forward(&cluster, args, work.path()).await?;
        anyhow::Ok((exec, forward))
    }
    .await;
    if let Some(dir) = &args.keep_logs {
        std::fs::create_dir_all(dir)?;
        for (from, to) in [
            (cluster.server.log.clone(), "skiff-server.log"),
            (
                cluster.server.containerd_dir().join("containerd.log"),
                "skiff-containerd.log",
            ),
        ] {
            let _ = std::fs::copy(from, dir.join(to));
        }
        for ws in [true, false] {
            let name = format!("kubectl-port-forward-{ws}.log");
            let _ = std::fs::copy(work.path().join(&name), dir.join(name));
        }
    }
    let (exec, forward) = match result {
        Ok(v) => v,
        Err(e) => {
            return Err(e.context(format!("server log tail:\n{}", cluster.server.log_tail())));
        }
    };
    let load_end = loadavg();
    drop(cluster); // SIGTERM, then skiff reset
    println!(
        "load average (1, 5, 15 min) before the measurements: {load_start}; after: {load_end}"
    );
    report_exec(args, &exec);
    report_forward(args, &forward);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_success_and_failure() {
        assert!(check_status(b"").is_ok());
        assert!(check_status(br#"{"metadata":{},"status":"Success"}"#).is_ok());
        assert!(check_status(br#"{"status":"Failure","reason":"NonZeroExitCode"}"#).is_err());
    }

    #[test]
    fn splits_containerd_urls() {
        let (a, t) = split_url("http://127.0.0.1:36421/exec/AbCd").unwrap();
        assert_eq!(a, "127.0.0.1:36421");
        assert_eq!(t, "/exec/AbCd");
    }

    #[test]
    fn own_cpu_is_counted() {
        assert!(cpu_ns("self") > 0);
    }

    #[tokio::test]
    async fn reads_a_body_to_its_content_length() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let mut req = [0u8; 21];
            server.read_exact(&mut req).await.unwrap();
            server
                .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5000\r\n\r\n")
                .await
                .unwrap();
            server.write_all(&[0u8; 5000]).await.unwrap();
        });
        let (n, _) = http_get_big(&mut client, 5000).await.unwrap();
        assert_eq!(n, 5000);
    }
}
