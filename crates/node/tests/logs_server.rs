//! Container logs end to end: CRI log files under a temporary log root,
//! the agent's HTTPS endpoint serving them, a real in-process API server
//! proxying `pods/log` to it (found from the Node's address and
//! daemonEndpoints port), and the real kubectl (`logs`, `--previous`,
//! `--tail`, `--timestamps`, `-c`, `--limit-bytes`, `--since-time`, `-f`)
//! and kube's client over the in-process loopback reading them. Also:
//! the endpoint lets in only clients with a certificate from its CA.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::{AsyncBufReadExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{LogParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::json;
use skiff_node::logs::{container_log_file, pod_log_dir};
use skiff_node::server::{self, PodLogInfo, PodLookup, ServerConfig};
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Upper bound for any wait.
const WAIT: Duration = Duration::from_secs(30);
const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

fn cri(second: u32, stream: &str, tag: &str, text: &str) -> String {
    format!("2024-01-01T00:00:{second:02}.000000001Z {stream} {tag} {text}\n")
}

/// Writes `text` as a container's `<restart>.log` in `pod_dir`.
fn write_log(pod_dir: &Path, container: &str, restart: u32, text: &str) -> PathBuf {
    let path = pod_dir.join(container_log_file(container, restart));
    std::fs::create_dir_all(path.parent().expect("parent")).expect("container log dir");
    std::fs::write(&path, text).expect("write log");
    path
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open log");
    f.write_all(text.as_bytes()).expect("append");
    f.flush().expect("flush");
}

/// Starts the node endpoint on a free loopback port; cancelled on drop.
struct NodeServer {
    addr: SocketAddr,
    pki_dir: PathBuf,
    /// Log streams being read out.
    streams: tokio::sync::watch::Receiver<usize>,
    stop: CancellationToken,
}

impl NodeServer {
    /// Waits until no log stream is being read out.
    async fn idle(&mut self) {
        tokio::time::timeout(WAIT, self.streams.wait_for(|n| *n == 0))
            .await
            .expect("log streams end in time")
            .expect("node server running");
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start_node_server(
    dir: &Path,
    client_ca_pem: String,
    log_root: PathBuf,
    lookup: Option<PodLookup>,
) -> NodeServer {
    let pki_dir = dir.join("node-pki");
    let config = ServerConfig {
        lookup,
        follow_poll: Duration::from_millis(20),
        ..ServerConfig::new(
            "n1",
            "127.0.0.1:0".parse().expect("addr"),
            pki_dir.clone(),
            client_ca_pem,
            log_root,
        )
    };
    let bound = server::bind(config).await.expect("bind node server");
    let addr = bound.local_addr();
    let streams = bound.streams();
    let stop = CancellationToken::new();
    tokio::spawn(bound.run(stop.clone()));
    NodeServer {
        addr,
        pki_dir,
        streams,
        stop,
    }
}

async fn kubectl(server: &TestApiServer, args: &[&str]) -> Output {
    let mut cmd = Command::new(KUBECTL);
    cmd.arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .arg("--cache-dir")
        .arg(server.dir.path().join("kubectl-cache"))
        .args(args);
    tokio::time::timeout(
        WAIT,
        tokio::task::spawn_blocking(move || cmd.output().expect("run kubectl")),
    )
    .await
    .expect("kubectl finishes in time")
    .expect("kubectl task")
}

async fn kubectl_ok(server: &TestApiServer, args: &[&str]) -> String {
    let out = kubectl(server, args).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates Node `n1` with the endpoint's address and port in its status.
async fn create_node(client: &Client, port: u16) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1"},
    }))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    let status = json!({"status": {
        "addresses": [
            {"type": "Hostname", "address": "n1.invalid"},
            {"type": "InternalIP", "address": "127.0.0.1"},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("node status");
}

/// Creates pod `name` with `containers`, on `node` when given; its UID.
async fn create_pod(
    client: &Client,
    name: &str,
    containers: &[&str],
    node: Option<&str>,
) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let containers: Vec<_> = containers
        .iter()
        .map(|c| json!({"name": c, "image": "busybox"}))
        .collect();
    let mut spec = json!({"containers": containers});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("pod");
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    created.metadata.uid.expect("uid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_through_the_api_server_and_the_node_endpoint() {
    let api = TestApiServer::start(|c| c, Options { loopback: true }).await;
    let client = api.client().await;
    let client_ca = std::fs::read_to_string(api.dir.path().join("pki/ca.crt")).expect("CA");
    let root = tempfile::tempdir().expect("log root");
    // No lookup: the endpoint finds pods by scanning the log root.
    let mut node =
        start_node_server(api.dir.path(), client_ca, root.path().to_path_buf(), None).await;
    create_node(&client, node.addr.port()).await;
    let uid = create_pod(&client, "web", &["app", "side"], Some("n1")).await;
    create_pod(&client, "pending", &["app"], None).await;

    let dir = pod_log_dir(root.path(), "default", "web", &uid);
    write_log(
        &dir,
        "app",
        0,
        &[
            cri(1, "stdout", "F", "first run"),
            cri(2, "stderr", "F", "crashed"),
        ]
        .concat(),
    );
    let current = write_log(
        &dir,
        "app",
        1,
        &[
            cri(3, "stdout", "F", "one"),
            cri(4, "stdout", "P", "t"),
            cri(4, "stdout", "F", "wo"),
            cri(5, "stderr", "F", "three"),
        ]
        .concat(),
    );
    write_log(&dir, "side", 0, &cri(6, "stdout", "F", "side car"));

    // Several containers: kubectl picks the first and says so.
    let out = kubectl(&api, &["logs", "web"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\nthree\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Defaulted container \"app\""),
        "{out:?}"
    );
    assert_eq!(
        kubectl_ok(&api, &["logs", "web", "-c", "app", "--previous"]).await,
        "first run\ncrashed\n"
    );
    assert_eq!(
        kubectl_ok(&api, &["logs", "web", "-c", "app", "--tail=1"]).await,
        "three\n"
    );
    assert_eq!(
        kubectl_ok(&api, &["logs", "web", "-c", "app", "--timestamps"]).await,
        "2024-01-01T00:00:03.000000001Z one\n\
         2024-01-01T00:00:04.000000001Z two\n\
         2024-01-01T00:00:05.000000001Z three\n"
    );
    assert_eq!(
        kubectl_ok(&api, &["logs", "web", "-c", "side"]).await,
        "side car\n"
    );
    assert_eq!(
        kubectl_ok(&api, &["logs", "web", "-c", "app", "--limit-bytes=6"]).await,
        "one\ntw"
    );
    assert_eq!(
        kubectl_ok(
            &api,
            &[
                "logs",
                "web",
                "-c",
                "app",
                "--since-time=2024-01-01T00:00:04Z"
            ]
        )
        .await,
        "two\nthree\n"
    );
    // Not scheduled yet: nothing, as upstream.
    assert_eq!(kubectl_ok(&api, &["logs", "pending"]).await, "");

    let out = kubectl(&api, &["logs", "web", "-c", "side", "--previous"]).await;
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Error from server (BadRequest): previous terminated container \"side\" in pod \"web\" not found"
    );
    let out = kubectl(&api, &["logs", "nothere"]).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"nothere\" not found"));

    // The API's own checks, through kube's client.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let err = pods
        .logs("web", &LogParams::default())
        .await
        .expect_err("two containers, none named");
    assert!(
        err.to_string()
            .contains("a container name must be specified for pod web, choose one of: [app side]"),
        "{err}"
    );
    let err = pods
        .logs(
            "web",
            &LogParams {
                container: Some("nope".into()),
                ..LogParams::default()
            },
        )
        .await
        .expect_err("no such container");
    assert!(
        err.to_string()
            .contains("container nope is not valid for pod web"),
        "{err}"
    );

    // -f streams a line written after it started.
    node.idle().await;
    let mut follow = Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&api.kubeconfig)
        .arg("--cache-dir")
        .arg(api.dir.path().join("kubectl-cache"))
        .args(["logs", "-f", "web", "-c", "app"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl logs -f");
    let stdout = follow.stdout.take().expect("stdout");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    wait_for_line(&mut lines, &mut seen, "three").await;
    append(&current, &cri(7, "stdout", "F", "four"));
    wait_for_line(&mut lines, &mut seen, "four").await;
    assert_eq!(*node.streams.borrow(), 1, "kubectl's follow is being read");
    follow.kill().expect("kill kubectl");
    let _ = follow.wait();
    assert_eq!(seen, ["one", "two", "three", "four"]);
    // Its going away reaches the node through the API server.
    node.idle().await;

    // The in-process loopback proxies too, follow included.
    let loopback = Client::new(api.loopback.clone().expect("loopback"), "default");
    let pods: Api<Pod> = Api::namespaced(loopback, "default");
    let tail = pods
        .logs(
            "web",
            &LogParams {
                container: Some("app".into()),
                tail_lines: Some(2),
                ..LogParams::default()
            },
        )
        .await
        .expect("logs over the loopback");
    assert_eq!(tail, "three\nfour\n");
    let stream = pods
        .log_stream(
            "web",
            &LogParams {
                container: Some("app".into()),
                follow: true,
                tail_lines: Some(0),
                ..LogParams::default()
            },
        )
        .await
        .expect("follow over the loopback");
    let mut stream_lines = stream.lines();
    append(&current, &cri(8, "stdout", "F", "five"));
    let line = tokio::time::timeout(WAIT, stream_lines.try_next())
        .await
        .expect("a followed line in time")
        .expect("read")
        .expect("a line");
    assert_eq!(line, "five");
    drop(stream_lines);
    node.idle().await;
}

/// Receives lines into `seen` until `want` is among them.
async fn wait_for_line(
    lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    seen: &mut Vec<String>,
    want: &str,
) {
    let found = tokio::time::timeout(WAIT, async {
        while !seen.iter().any(|l| l == want) {
            let Some(line) = lines.recv().await else {
                return false;
            };
            seen.push(line);
        }
        true
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "no {want:?} from kubectl logs -f: {seen:?}"
    );
}

/// A CA that signs client certificates (PEM).
struct TestCa {
    cert: String,
    issuer: Issuer<'static, KeyPair>,
}

fn test_ca(name: &str) -> TestCa {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).expect("CA cert");
    TestCa {
        cert: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

impl TestCa {
    fn client_cert(&self, cn: &str) -> (String, String) {
        let key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).expect("client cert");
        (cert.pem(), key.serialize_pem())
    }
}

/// A TLS client trusting the endpoint's own serving certificate, with
/// `identity` (cert, key PEM) as its client certificate if any.
fn tls_client(pki_dir: &Path, identity: Option<&(String, String)>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    let serving = std::fs::read(pki_dir.join("kubelet.crt")).expect("serving cert");
    for cert in CertificateDer::pem_slice_iter(&serving) {
        roots.add(cert.expect("pem")).expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("cert"),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// GET `path` over HTTP/1.1 (`Connection: close`): status and body.
async fn get(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    path: &str,
) -> std::io::Result<(u16, String)> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await?;
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no HTTP answer: {text:?}")))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line: {head:?}")))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
        out
    } else {
        body.to_string()
    };
    Ok((status, body))
}

/// An agent in the API server's process is reached through the pipe it
/// registered, not the Node's address (here a port nothing listens on);
/// once its endpoint has shut down, the API server dials the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_agent_is_reached_without_tcp() {
    let api = TestApiServer::start(|c| c, Options { loopback: true }).await;
    let client = api.client().await;
    let client_ca = std::fs::read_to_string(api.dir.path().join("pki/ca.crt")).expect("CA");
    let root = tempfile::tempdir().expect("log root");
    let config = ServerConfig::new(
        "n1",
        "127.0.0.1:0".parse().expect("addr"),
        api.dir.path().join("node-pki"),
        client_ca,
        root.path().to_path_buf(),
    );
    let bound = server::bind(config).await.expect("bind node server");
    let stop = CancellationToken::new();
    let endpoint = bound.local_endpoint(stop.clone());
    api.local_agents.register(
        "n1",
        skiff_apiserver::agents::LocalAgent {
            dial: endpoint.dial,
            router: endpoint.router,
            stopped: endpoint.stopped,
        },
    );
    tokio::spawn(bound.run(stop.clone()));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    let closed_port = closed.local_addr().expect("addr").port();
    drop(closed);
    create_node(&client, closed_port).await;
    let uid = create_pod(&client, "web", &["app"], Some("n1")).await;
    let dir = pod_log_dir(root.path(), "default", "web", &uid);
    write_log(&dir, "app", 0, &cri(1, "stdout", "F", "through the pipe"));

    assert_eq!(
        kubectl_ok(&api, &["logs", "web"]).await,
        "through the pipe\n"
    );

    stop.cancel();
    let out = kubectl(&api, &["logs", "web"]).await;
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "dial tcp 127.0.0.1:{closed_port}: connect: connection refused"
        )),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_node_endpoint_lets_in_only_clients_of_its_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().join("pods");
    let pod_dir = pod_log_dir(&root, "ns", "web", "u-1");
    write_log(&pod_dir, "app", 0, &cri(1, "stdout", "F", "hello"));
    let ca = test_ca("cluster-ca");
    let lookup: PodLookup = Arc::new(|ns, name| {
        (ns == "ns" && name == "web").then(|| PodLogInfo {
            uid: "u-1".into(),
            containers: vec!["app".into(), "later".into()],
            tty_containers: vec![],
        })
    });
    let node = start_node_server(dir.path(), ca.cert.clone(), root.clone(), Some(lookup)).await;

    let good = ca.client_cert("kube-apiserver-kubelet-client");
    let client = tls_client(&node.pki_dir, Some(&good));
    let addr = node.addr;
    let ok = |path: &'static str| {
        let client = client.clone();
        async move {
            tokio::time::timeout(WAIT, get(addr, client, path))
                .await
                .expect("answer in time")
                .expect("request")
        }
    };
    assert_eq!(
        ok("/containerLogs/ns/web/app").await,
        (200, "hello\n".to_string())
    );
    assert_eq!(
        ok("/containerLogs/ns/web/app?timestamps=true").await,
        (200, "2024-01-01T00:00:01.000000001Z hello\n".to_string())
    );
    assert_eq!(
        ok("/containerLogs/ns/db/app").await,
        (404, "pod \"db\" does not exist".to_string())
    );
    assert_eq!(
        ok("/containerLogs/ns/web/nope").await,
        (
            404,
            "container \"nope\" not found in pod \"web\"".to_string()
        )
    );
    assert_eq!(
        ok("/containerLogs/ns/web/later").await,
        (
            400,
            "container \"later\" in pod \"web\" is waiting to start - no logs yet".to_string()
        )
    );
    assert_eq!(
        ok("/containerLogs/ns/web/app?previous=true").await,
        (
            400,
            "previous terminated container \"app\" in pod \"web\" not found".to_string()
        )
    );
    assert_eq!(ok("/containerLogs/ns/web/app?tailLines=-1").await.0, 422);
    assert_eq!(ok("/healthz").await.0, 404);

    // No client certificate, or one from another CA: no HTTP answer at all.
    let stranger = test_ca("other-ca").client_cert("kube-apiserver-kubelet-client");
    for identity in [None, Some(&stranger)] {
        let refused = tokio::time::timeout(
            WAIT,
            get(
                node.addr,
                tls_client(&node.pki_dir, identity),
                "/containerLogs/ns/web/app",
            ),
        )
        .await
        .expect("refused in time");
        assert!(refused.is_err(), "{identity:?} got {refused:?}");
    }

    // Binding a port in use is an error before serving.
    let taken = ServerConfig::new(
        "n1",
        node.addr,
        dir.path().join("node-pki"),
        ca.cert.clone(),
        root,
    );
    assert!(matches!(
        server::bind(taken).await,
        Err(server::Error::Listen { .. })
    ));
}
