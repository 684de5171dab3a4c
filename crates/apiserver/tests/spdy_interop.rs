//! Interop of `streaming::spdy` with Go's implementation
//! (`moby/spdystream`, through client-go's SPDY executor): the real
//! kubectl runs `echo hi | kubectl exec -i p -- cat` against a tiny HTTP
//! server here that pretends to be the API server for that one exec. It
//! refuses the WebSocket attempt (so kubectl falls back to SPDY/3.1),
//! upgrades to SPDY with protocol v4.channel.k8s.io, and serves the exec
//! with `Connection::server`: stdin echoed to stdout, a line on stderr,
//! a Status on the error stream.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming as HyperBody;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use skiff_apiserver::streaming::spdy::{Connection, Stream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const KUBECTL_DIR: &str = "/usr/lib/google-cloud-sdk/bin";
const TIMEOUT: Duration = Duration::from_secs(60);
const STDERR_TEXT: &str = "a line for stderr from the fake container\n";

/// How the fake container ends the exec.
#[derive(Clone, Copy, Debug)]
enum Ending {
    /// Status Success; FIN on our streams, then GOAWAY.
    Success,
    /// Exit code 3; then, as the kubelet does, RST_STREAM on every stream
    /// and GOAWAY (`conn.Close()` in apimachinery's spdy connection).
    ExitCode3,
}

/// What the server saw of one exec.
#[derive(Debug)]
struct Seen {
    stream_types: Vec<String>,
    stdin: Vec<u8>,
    pinged: bool,
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn discovery(path: &str) -> Option<serde_json::Value> {
    Some(match path {
        "/api" => json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }),
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
        "/api/v1" => json!({
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                 "verbs": ["get", "list"], "shortNames": ["po"]},
                {"name": "pods/exec", "singularName": "", "namespaced": true,
                 "kind": "PodExecOptions", "verbs": ["create", "get"]},
            ],
        }),
        "/api/v1/namespaces/default/pods/p" => json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "0b2d4b4e-0000-4000-8000-000000000001"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": true,
                "restartCount": 0, "image": "busybox", "imageID": "", "state": {"running": {}}}]},
        }),
        _ => return None,
    })
}

fn header_values<'a>(req: &'a Request<HyperBody>, name: &str) -> Vec<&'a str> {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect()
}

async fn handle(
    mut req: Request<HyperBody>,
    ending: Ending,
    seen: mpsc::UnboundedSender<Result<Seen, String>>,
) -> Result<Response<Body>, Infallible> {
    let upgrade = header_values(&req, "upgrade")
        .join(",")
        .to_ascii_lowercase();
    if upgrade.contains("websocket") {
        // No WebSocket here: kubectl falls back to SPDY.
        return Ok(Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from("websocket not supported"))
            .unwrap());
    }
    if upgrade.contains("spdy/3.1") && req.uri().path().ends_with("/exec") {
        let offered = header_values(&req, "x-stream-protocol-version");
        if !offered.contains(&"v4.channel.k8s.io") {
            let _ = seen.send(Err(format!("offered protocols: {offered:?}")));
            return Ok(json_response(StatusCode::FORBIDDEN, json!({})));
        }
        let on_upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let result = match on_upgrade.await {
                Ok(io) => serve_exec(TokioIo::new(io), ending).await,
                Err(e) => Err(format!("upgrade: {e}")),
            };
            let _ = seen.send(result);
        });
        return Ok(Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "Upgrade")
            .header("upgrade", "SPDY/3.1")
            .header("x-stream-protocol-version", "v4.channel.k8s.io")
            .body(Body::empty())
            .unwrap());
    }
    Ok(match discovery(req.uri().path()) {
        Some(body) => json_response(StatusCode::OK, body),
        None => json_response(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                   "status": "Failure", "reason": "NotFound", "code": 404}),
        ),
    })
}

/// The fake container's side of one exec.
async fn serve_exec(
    io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    ending: Ending,
) -> Result<Seen, String> {
    let (conn, mut incoming) = Connection::server(io);
    let mut stream_types = Vec::new();
    let (mut error, mut stdin, mut stdout, mut stderr) = (None, None, None, None);
    // client-go opens error, stdin, stdout, stderr, one after another.
    while error.is_none() || stdin.is_none() || stdout.is_none() || stderr.is_none() {
        let s: Stream = incoming.accept().await.ok_or("session ended early")?;
        let kind = s.headers().get("streamType").unwrap_or("").to_string();
        stream_types.push(kind.clone());
        match kind.as_str() {
            "error" => error = Some(s),
            "stdin" => stdin = Some(s),
            "stdout" => stdout = Some(s),
            "stderr" => stderr = Some(s),
            other => return Err(format!("unexpected stream type {other:?}")),
        }
    }
    let (mut error, mut stdin, mut stdout, mut stderr) = (
        error.unwrap(),
        stdin.unwrap(),
        stdout.unwrap(),
        stderr.unwrap(),
    );
    // spdystream echoes our PING.
    let pinged = conn.ping().await.is_ok();

    let mut input = Vec::new();
    stdin
        .read_to_end(&mut input)
        .await
        .map_err(|e| format!("stdin: {e}"))?;
    let io_err = |what: &'static str| move |e: std::io::Error| format!("{what}: {e}");
    stdout.write_all(&input).await.map_err(io_err("stdout"))?;
    stderr
        .write_all(STDERR_TEXT.as_bytes())
        .await
        .map_err(io_err("stderr"))?;
    let status = match ending {
        Ending::Success => json!({"metadata": {}, "status": "Success"}),
        Ending::ExitCode3 => json!({
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code: exit status 3",
            "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
        }),
    };
    error
        .write_all(status.to_string().as_bytes())
        .await
        .map_err(io_err("error"))?;
    match ending {
        Ending::Success => {
            for s in [&mut stdout, &mut stderr, &mut error] {
                s.shutdown().await.map_err(io_err("shutdown"))?;
            }
        }
        Ending::ExitCode3 => {
            for s in [&stdout, &stderr, &error, &stdin] {
                s.reset();
            }
        }
    }
    // kubectl answers with RST_STREAM for what it left open and GOAWAY;
    // close resolves once the streams are done and the io is closed.
    conn.close().await;
    Ok(Seen {
        stream_types,
        stdin: input,
        pinged,
    })
}

fn write_kubeconfig(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: default\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    path
}

async fn exec_once(minor: u32, ending: Ending) {
    let binary = Path::new(KUBECTL_DIR).join(format!("kubectl.1.{minor}"));
    assert!(binary.exists(), "{} is missing", binary.display());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let seen = seen_tx.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req| handle(req, ending, seen.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), port);
    let mut child = tokio::process::Command::new(&binary)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(["exec", "-i", "p", "--", "cat"])
        .env("HOME", dir.path())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut child_stdin = child.stdin.take().unwrap();
    child_stdin.write_all(b"hi\n").await.unwrap();
    drop(child_stdin);
    let out = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .expect("kubectl timed out")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("kubectl 1.{minor} {ending:?}: {out:?}\nstderr: {stderr}");

    let seen = tokio::time::timeout(TIMEOUT, seen_rx.recv())
        .await
        .expect("the exec session did not end")
        .expect("no exec session")
        .unwrap_or_else(|e| panic!("exec session failed: {e}\n{context}"));
    server.abort();

    assert_eq!(
        seen.stream_types,
        ["error", "stdin", "stdout", "stderr"],
        "{context}"
    );
    assert_eq!(seen.stdin, b"hi\n", "{context}");
    assert!(seen.pinged, "kubectl did not echo our PING\n{context}");
    assert_eq!(stdout, "hi\n", "{context}");
    assert!(stderr.contains(STDERR_TEXT), "{context}");
    match ending {
        Ending::Success => assert_eq!(out.status.code(), Some(0), "{context}"),
        Ending::ExitCode3 => {
            assert_eq!(out.status.code(), Some(3), "{context}");
            assert!(
                stderr.contains("command terminated with exit code 3"),
                "{context}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_exec_over_spdy() {
    exec_once(33, Ending::Success).await;
    exec_once(33, Ending::ExitCode3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_30_exec_over_spdy() {
    exec_once(30, Ending::Success).await;
    exec_once(30, Ending::ExitCode3).await;
}
