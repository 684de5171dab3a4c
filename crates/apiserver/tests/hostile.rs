//! Hostile clients against the real server over TLS: half-sent requests
//! are cut off by the header and body timeouts, and bad options bodies
//! change nothing.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TLS connection to the test server as its admin (client certificate).
async fn connect(server: &TestServer) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let pki = server.dir.path().join("pki");
    let ca = std::fs::read(pki.join("ca.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
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

/// Reads until the server closes; what it sent. Bounded by `limit`.
async fn read_until_closed(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    limit: Duration,
) -> Option<String> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|_| String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn half_sent_requests_are_cut_off() {
    let server = TestServer::start_with(|mut c| {
        c.timeouts.header_read = Duration::from_secs(1);
        c.timeouts.body_read = Duration::from_secs(1);
        c
    })
    .await;
    // An unfinished header block: the connection is closed.
    let mut s = connect(&server).await;
    s.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let got = read_until_closed(&mut s, Duration::from_secs(20)).await;
    assert!(got.is_some(), "a stalled header block was not cut off");

    // A body that never comes: 408 and the connection ends.
    let mut s = connect(&server).await;
    s.write_all(
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
          Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    )
    .await
    .unwrap();
    let got = read_until_closed(&mut s, Duration::from_secs(20))
        .await
        .expect("a stalled body was not cut off");
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(got.contains("\"reason\":\"Timeout\""), "{got}");
}

#[tokio::test]
async fn bogus_dry_run_in_delete_options_deletes_nothing() {
    let server = TestServer::start().await;
    let kubectl = server.kubectl(33);
    kubectl
        .ok(&["create", "configmap", "keep", "--from-literal=a=b"])
        .await;
    let mut s = connect(&server).await;
    let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["Bogus"]}"#;
    let req = format!(
        "DELETE /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let got = read_until_closed(&mut s, Duration::from_secs(20))
        .await
        .unwrap();
    assert!(got.starts_with("HTTP/1.1 422"), "{got}");
    assert!(
        got.contains(r#"DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \"Bogus\": supported values: \"All\""#),
        "{got}"
    );
    assert_eq!(
        kubectl
            .ok(&["get", "configmap", "keep", "-o", "name"])
            .await
            .trim(),
        "configmap/keep"
    );
}

#[tokio::test]
async fn health_endpoints_list_their_checks_when_verbose() {
    let server = TestServer::start().await;
    let kubectl = server.kubectl(33);
    assert_eq!(kubectl.ok(&["get", "--raw", "/readyz"]).await, "ok");
    let readyz = kubectl.ok(&["get", "--raw", "/readyz?verbose"]).await;
    assert_eq!(
        readyz,
        "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]shutdown ok\nreadyz check passed\n"
    );
    let livez = kubectl.ok(&["get", "--raw", "/livez?verbose"]).await;
    assert!(
        livez.ends_with("[+]etcd ok\nlivez check passed\n"),
        "{livez}"
    );
}

/// Sends one HTTP/1.1 request over TLS and returns the whole answer.
async fn exchange(server: &TestServer, head: &str, body: &[u8]) -> String {
    let mut s = connect(server).await;
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    read_until_closed(&mut s, Duration::from_secs(20))
        .await
        .expect("an answer")
}

#[tokio::test]
async fn yaml_apply_encoded_names_and_transfer_codings() {
    let server = TestServer::start().await;
    // Server-side apply with a YAML body.
    let yaml = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a-b\ndata:\n  k: v\n";
    let head = format!(
        "PATCH /api/v1/namespaces/default/configmaps/a-b?fieldManager=curl HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/apply-patch+yaml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        yaml.len()
    );
    let got = exchange(&server, &head, yaml).await;
    assert!(got.starts_with("HTTP/1.1 201"), "{got}");
    // A percent-encoded name is the name.
    let got = exchange(
        &server,
        "GET /api/v1/namespaces/default/configmaps/a%2Db HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.contains("\"name\":\"a-b\""), "{got}");
    // gzip is no transfer coding we take.
    let got = exchange(
        &server,
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
        b"",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 501"), "{got}");
}

/// curl's POST of the JSON file `body` to `url` as the admin, with `args`.
async fn curl_post(
    server: &TestServer,
    args: &[&str],
    body: &std::path::Path,
    url: &str,
) -> std::process::Output {
    let pki = server.dir.path().join("pki");
    tokio::process::Command::new("curl")
        .args(args)
        .args(["-X", "POST", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(url)
        .output()
        .await
        .expect("run curl")
}

/// Over HTTP/2 a POST with a body to an unserved path gets its 404, not a
/// reset stream, every time.
#[tokio::test]
async fn http2_posts_to_unserved_paths_get_their_404() {
    let server = TestServer::start().await;
    let body = server.dir.path().join("body.json");
    // Large enough that it is still being sent when the answer comes.
    std::fs::write(&body, "x".repeat(3 * 1024 * 1024 - 100)).unwrap();
    for _ in 0..20 {
        let url = format!("{}/apis/nope.example.com/v1/things", server.url);
        let out = curl_post(
            &server,
            &["-s", "--http2", "-o", "/dev/null", "-w", "%{http_code}"],
            &body,
            &url,
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "404",
            "curl exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A Status is written as upstream's encoder writes it: fields in order, a
/// trailing newline, and `details` (empty) on the generic 404.
#[tokio::test]
async fn status_bodies_are_upstreams_bytes() {
    let server = TestServer::start().await;
    let got = exchange(
        &server,
        "GET /apis/nope.example.com/v1/things HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 404"), "{got}");
    assert!(
        got.ends_with(
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the server could not find the requested resource\",\"reason\":\"NotFound\",\"details\":{},\"code\":404}\n"
        ),
        "{got}"
    );
}

/// A body over the limit (a 4 MiB ConfigMap) gets upstream's 413 Status
/// over HTTP/2 as over HTTP/1.1 (with and without `Expect:
/// 100-continue`), not a reset stream or a broken pipe, and creates
/// nothing.
#[tokio::test]
async fn bodies_over_the_limit_get_their_413_over_http2_and_http1() {
    let server = TestServer::start().await;
    let body = server.dir.path().join("big.json");
    let big = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big"}, "data": {"x": "y".repeat(4 * 1024 * 1024)}});
    std::fs::write(&body, serde_json::to_vec(&big).unwrap()).unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps", server.url);
    for protocol in [
        &["--http2"][..],
        &["--http1.1"],
        &["--http1.1", "-H", "Expect:"],
    ] {
        let mut args = vec!["-sS", "-w", "\n%{http_code}"];
        args.extend_from_slice(protocol);
        let out = curl_post(&server, &args, &body, &url).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (answer, code) = stdout.rsplit_once('\n').unwrap_or_default();
        assert_eq!(
            code,
            "413",
            "{protocol:?}: curl exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let status: serde_json::Value = serde_json::from_str(answer).unwrap_or_default();
        assert_eq!(status["kind"], "Status", "{protocol:?}: {answer}");
        assert_eq!(status["reason"], "RequestEntityTooLarge", "{protocol:?}");
        assert_eq!(
            status["message"], "Request entity too large: limit is 3145728",
            "{protocol:?}"
        );
    }
    let got = exchange(
        &server,
        "GET /api/v1/namespaces/default/configmaps/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 404"), "{got}");
}
