//! End to end, as root, on real containerd: the node agent's HTTPS,
//! gRPC and redirected httpGet probes, and a liveness probe's own
//! terminationGracePeriodSeconds. busybox has no TLS or gRPC server, so
//! those pods use hostNetwork (their podIP is the node's, 127.0.0.1)
//! and probe a server this test runs on the host, on a free port.

mod cluster;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cluster::{wait_for, Cluster, Options};

/// A server on a free port of 127.0.0.1, one thread per connection,
/// stopped (and its thread joined) on drop.
struct HostServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HostServer {
    fn start(handle: impl Fn(TcpStream) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let handle = Arc::new(handle);
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let handle = handle.clone();
                std::thread::spawn(move || handle(conn));
            }
        });
        Self {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for HostServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads up to the end of a request head.
fn read_head(s: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// An HTTPS server with a self-signed certificate (made by the agent's
/// own serving-cert code) that answers every request with `status`.
struct TlsServer {
    server: HostServer,
    status: Arc<AtomicU16>,
    heads: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl TlsServer {
    fn start(status: u16) -> Self {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) =
            skiff_node::server::tls::ensure_serving_cert(dir.path(), "probe-test", &[]).unwrap();
        let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .unwrap(),
        );
        let status = Arc::new(AtomicU16::new(status));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (answer, seen) = (status.clone(), heads.clone());
        let server = HostServer::start(move |tcp| {
            let Ok(conn) = rustls::ServerConnection::new(config.clone()) else {
                return;
            };
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let Some(head) = read_head(&mut tls) else {
                return;
            };
            seen.lock().unwrap().push(head);
            let code = answer.load(Ordering::SeqCst);
            let _ = write!(
                tls,
                "HTTP/1.1 {code} Probe\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            tls.conn.send_close_notify();
            let _ = tls.flush();
        });
        Self {
            server,
            status,
            heads,
            _dir: dir,
        }
    }
}

/// A plaintext gRPC server with only grpc.health.v1.Health/Check, spoken
/// in HTTP/2 frames by hand (the test has no gRPC stack of its own):
/// each service's status (1 SERVING, 2 NOT_SERVING), NotFound for others.
struct GrpcHealthServer {
    server: HostServer,
    statuses: Arc<Mutex<HashMap<String, u8>>>,
    checks: Arc<Mutex<Vec<String>>>,
}

const SERVING: u8 = 1;
const NOT_SERVING: u8 = 2;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: a literal header without indexing, with a new name.
fn literal(name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![0x00, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// `:status: 200` (static index 8) and `content-type: application/grpc`
/// (a literal with static name 31).
fn response_headers() -> Vec<u8> {
    let mut out = vec![0x88, 0x0f, 0x10, 16];
    out.extend_from_slice(b"application/grpc");
    out
}

/// The service name in a HealthCheckRequest (field 1, a string).
fn service_of(message: &[u8]) -> String {
    let mut i = 0;
    while i < message.len() {
        let tag = message[i];
        i += 1;
        let mut len = 0usize;
        let mut shift = 0;
        while i < message.len() {
            let b = message[i];
            i += 1;
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        if tag == 0x0a {
            return String::from_utf8_lossy(&message[i..(i + len).min(message.len())]).into_owned();
        }
        i += len;
    }
    String::new()
}

impl GrpcHealthServer {
    fn start(statuses: &[(&str, u8)]) -> Self {
        let statuses = Arc::new(Mutex::new(
            statuses
                .iter()
                .map(|(s, v)| (s.to_string(), *v))
                .collect::<HashMap<_, _>>(),
        ));
        let checks = Arc::new(Mutex::new(Vec::new()));
        let (known, seen) = (statuses.clone(), checks.clone());
        let server = HostServer::start(move |mut s| {
            let mut preface = [0u8; 24];
            if s.read_exact(&mut preface).is_err() || !preface.starts_with(b"PRI * HTTP/2.0") {
                return;
            }
            if s.write_all(&frame(4, 0, 0, &[])).is_err() {
                return;
            }
            let mut bodies: HashMap<u32, Vec<u8>> = HashMap::new();
            loop {
                let mut head = [0u8; 9];
                if s.read_exact(&mut head).is_err() {
                    return;
                }
                let len = (usize::from(head[0]) << 16)
                    | (usize::from(head[1]) << 8)
                    | usize::from(head[2]);
                let (kind, flags) = (head[3], head[4]);
                let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                let mut payload = vec![0u8; len];
                if s.read_exact(&mut payload).is_err() {
                    return;
                }
                let end_stream = flags & 0x1 != 0;
                let reply = match kind {
                    // SETTINGS, PING: acknowledged.
                    4 if flags & 0x1 == 0 => frame(4, 0x1, 0, &[]),
                    6 if flags & 0x1 == 0 => frame(6, 0x1, 0, &payload),
                    0 => {
                        let mut data = payload;
                        if flags & 0x8 != 0 {
                            // Padded.
                            let pad = usize::from(data.first().copied().unwrap_or(0));
                            data = data[1..data.len().saturating_sub(pad)].to_vec();
                        }
                        bodies.entry(stream).or_default().extend_from_slice(&data);
                        if !end_stream {
                            continue;
                        }
                        let body = bodies.remove(&stream).unwrap_or_default();
                        let service = service_of(body.get(5..).unwrap_or_default());
                        seen.lock().unwrap().push(service.clone());
                        let status = known.lock().unwrap().get(&service).copied();
                        let mut out = Vec::new();
                        match status {
                            Some(v) => {
                                out.extend(frame(1, 0x4, stream, &response_headers()));
                                out.extend(frame(0, 0, stream, &[0, 0, 0, 0, 2, 0x08, v]));
                                out.extend(frame(1, 0x5, stream, &literal("grpc-status", "0")));
                            }
                            None => {
                                let mut h = response_headers();
                                h.extend(literal("grpc-status", "5"));
                                h.extend(literal("grpc-message", "unknown service"));
                                out.extend(frame(1, 0x5, stream, &h));
                            }
                        }
                        out
                    }
                    // GOAWAY.
                    7 => return,
                    _ => continue,
                };
                if s.write_all(&reply).is_err() {
                    return;
                }
            }
        });
        Self {
            server,
            statuses,
            checks,
        }
    }

    fn set(&self, service: &str, status: u8) {
        self.statuses
            .lock()
            .unwrap()
            .insert(service.to_string(), status);
    }
}

fn ready(c: &Cluster, pod: &str) -> String {
    c.pod_field(pod, "{.status.containerStatuses[*].ready}")
}

/// An HTTPS readiness probe passes against a self-signed certificate
/// (not verified, as the kubelet's), and fails with upstream's text on a
/// 500, both ways.
#[test]
fn https_readiness_probes_skip_certificate_verification() {
    let c = Cluster::start(Options::default());
    let tls = TlsServer::start(500);
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: tls}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    readinessProbe:
      httpGet: {{scheme: HTTPS, path: /healthz, port: {port}}}
      periodSeconds: 1
"#,
        port = tls.server.port
    ));
    c.wait("pod/tls", "jsonpath={.status.phase}=Running", 60);
    assert_eq!(c.pod_field("tls", "{.status.podIP}"), "127.0.0.1");
    let unhealthy = c.wait_event("tls", "Unhealthy", 60);
    assert!(
        unhealthy.contains("Readiness probe failed: HTTP probe failed with statuscode: 500"),
        "{unhealthy}"
    );
    assert_eq!(ready(&c, "tls"), "false");

    tls.status.store(200, Ordering::SeqCst);
    c.wait("pod/tls", "condition=Ready", 60);
    assert!(c.kubectl(&["get", "pod", "tls"]).contains("1/1"));
    {
        let heads = tls.heads.lock().unwrap();
        let head = heads.last().expect("the server saw the probe");
        assert!(head.starts_with("GET /healthz HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("User-Agent: kube-probe/1.33\r\n"), "{head}");
    }

    tls.status.store(500, Ordering::SeqCst);
    c.wait("pod/tls", "condition=Ready=false", 60);
    assert_eq!(ready(&c, "tls"), "false");
}

/// A gRPC readiness probe asks grpc.health.v1.Health/Check for its
/// service: NOT_SERVING holds READY at 0/1 with upstream's message,
/// SERVING makes it 1/1, and NOT_SERVING again takes it back.
#[test]
fn grpc_readiness_probes_follow_the_health_service() {
    let c = Cluster::start(Options::default());
    let grpc = GrpcHealthServer::start(&[("app", NOT_SERVING)]);
    c.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: grpc}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    readinessProbe:
      grpc: {{port: {port}, service: app}}
      periodSeconds: 1
"#,
        port = grpc.server.port
    ));
    c.wait("pod/grpc", "jsonpath={.status.phase}=Running", 60);
    let unhealthy = c.wait_event("grpc", "Unhealthy", 60);
    assert!(
        unhealthy.contains(
            r#"Readiness probe failed: service unhealthy (responded with "NOT_SERVING")"#
        ),
        "{unhealthy}"
    );
    let table = c.kubectl(&["get", "pod", "grpc"]);
    assert!(table.contains("0/1"), "{table}");

    grpc.set("app", SERVING);
    c.wait("pod/grpc", "condition=Ready", 60);
    assert!(c.kubectl(&["get", "pod", "grpc"]).contains("1/1"));
    assert!(grpc.checks.lock().unwrap().iter().all(|s| s == "app"));

    grpc.set("app", NOT_SERVING);
    c.wait("pod/grpc", "condition=Ready=false", 60);
}

/// httpGet redirects, served by busybox httpd CGI scripts: one to the
/// same host is followed (to a page that exists: ready; to one that does
/// not: the 404 fails the probe), one to another host ends the probe as
/// a success with a ProbeWarning event.
#[test]
fn http_probes_follow_local_redirects_and_warn_on_others() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: redirects}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      mkdir -p /www/cgi-bin
      echo ok > /www/ok.html
      cat > /www/cgi-bin/local <<'EOF'
      #!/bin/sh
      printf 'HTTP/1.1 302 Found\r\nLocation: /ok.html\r\nContent-Length: 0\r\n\r\n'
      EOF
      cat > /www/cgi-bin/missing <<'EOF'
      #!/bin/sh
      printf 'HTTP/1.1 302 Found\r\nLocation: /nope.html\r\nContent-Length: 0\r\n\r\n'
      EOF
      cat > /www/cgi-bin/remote <<'EOF'
      #!/bin/sh
      printf 'HTTP/1.1 302 Found\r\nLocation: http://elsewhere.invalid/login\r\nContent-Length: 10\r\n\r\nmoved away'
      EOF
      chmod +x /www/cgi-bin/*
      exec httpd -f -p 8080 -h /www
    readinessProbe:
      httpGet: {path: /cgi-bin/local, port: 8080}
      periodSeconds: 1
  - name: remote
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    readinessProbe:
      httpGet: {path: /cgi-bin/remote, port: 8080}
      periodSeconds: 1
  - name: missing
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    readinessProbe:
      httpGet: {path: /cgi-bin/missing, port: 8080}
      periodSeconds: 1
"#,
    );
    let status = |name: &str| {
        c.pod_field(
            "redirects",
            &format!("{{.status.containerStatuses[?(@.name==\"{name}\")].ready}}"),
        )
    };
    wait_for(
        "web and remote to be ready",
        Duration::from_secs(90),
        || (status("web") == "true" && status("remote") == "true").then_some(()),
    );
    let warning = c.wait_event("redirects", "ProbeWarning", 30);
    assert!(
        warning.contains(
            "Readiness probe warning: Probe terminated redirects, Response body: moved away"
        ),
        "{warning}"
    );
    let unhealthy = c.wait_event("redirects", "Unhealthy", 30);
    assert!(
        unhealthy.contains("Readiness probe failed: HTTP probe failed with statuscode: 404"),
        "{unhealthy}"
    );
    assert_eq!(status("missing"), "false");
    assert!(c.kubectl(&["get", "pod", "redirects"]).contains("2/3"));
}

/// A container killed by its liveness probe is stopped with the probe's
/// terminationGracePeriodSeconds (2 s), not the pod's (120 s): it ignores
/// SIGTERM, so it only dies by the SIGKILL at the end of the grace.
#[test]
fn a_liveness_kill_uses_the_probes_grace_period() {
    let c = Cluster::start(Options::default());
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 120
  containers:
  - name: c
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
    livenessProbe:
      exec: {command: ["cat", "/tmp/never"]}
      periodSeconds: 1
      failureThreshold: 1
      terminationGracePeriodSeconds: 2
"#,
    );
    let killing = c.wait_event("stubborn", "Killing", 60);
    let since = Instant::now();
    assert!(
        killing.contains("Container c failed liveness probe, will be restarted"),
        "{killing}"
    );
    wait_for(
        "the container to be restarted",
        Duration::from_secs(90),
        || {
            let n: u32 = c
                .pod_field("stubborn", "{.status.containerStatuses[0].restartCount}")
                .parse()
                .ok()?;
            (n >= 1).then_some(())
        },
    );
    let took = since.elapsed();
    // The pod's 120 s would have taken at least that; 2 s plus a sync
    // is far below 60 s.
    assert!(took < Duration::from_secs(60), "restarted after {took:?}");
    assert_eq!(
        c.pod_field(
            "stubborn",
            "{.status.containerStatuses[0].lastState.terminated.exitCode}"
        ),
        "137",
        "killed by SIGKILL after the grace period"
    );
}
