//! Users and certificates end to end, with the real kubectl and openssl:
//! a user's CertificateSigningRequest approved with `kubectl certificate
//! approve` is signed by the cluster CA for the asked expirationSeconds
//! and its certificate is judged by RBAC as that user; requests breaking
//! their signer's rules fail; a node's own client request is approved
//! and signed by the controllers alone; `skiff certs check-expiration`
//! lists the data dir's certificates and `skiff certs renew all` on a
//! running server leaves kubectl working while the new serving
//! certificate is served.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

const SKIFF: &str = env!("CARGO_BIN_EXE_skiff");
const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";
const TIMEOUT: Duration = Duration::from_secs(60);

/// A running `skiff server` in a private dir on a free port, killed on
/// drop.
struct Server {
    child: std::process::Child,
    data_dir: PathBuf,
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    dir: std::sync::Arc<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start() -> Server {
        Server::start_in(std::sync::Arc::new(tempfile::tempdir().unwrap()))
    }

    /// A server on `dir`'s data dir (kept from an earlier one, say).
    fn start_in(dir: std::sync::Arc<tempfile::TempDir>) -> Server {
        Server::start_with(dir, &[])
    }

    /// A server on `dir`'s data dir with more flags.
    fn start_with(dir: std::sync::Arc<tempfile::TempDir>, flags: &[&str]) -> Server {
        let data_dir = dir.path().join("data");
        let mut child = Command::new(SKIFF)
            .args([
                "server",
                "--https-listen-port",
                "0",
                "--bind-address",
                "127.0.0.1",
                "--disable-agent",
                "--data-dir",
            ])
            .arg(&data_dir)
            .args(flags)
            .env("SKIFF_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ready = lines.by_ref().map_while(Result::ok).any(|line| {
            let ready = line.contains("skiff server is running");
            log.lock().unwrap().push(line);
            ready
        });
        assert!(ready, "the server never said it was running");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            data_dir,
            log,
            dir,
        }
    }

    fn admin(&self) -> PathBuf {
        self.data_dir.join("admin.kubeconfig")
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// host:port of the API.
    fn address(&self) -> String {
        let text = std::fs::read_to_string(self.admin()).unwrap();
        text.lines()
            .find_map(|l| l.trim().strip_prefix("server: https://"))
            .unwrap()
            .to_string()
    }

    /// kubectl with `kubeconfig`, stdin `input`.
    fn kubectl_as(&self, kubeconfig: &Path, args: &[&str], input: Option<&str>) -> Output {
        let mut child = Command::new(KUBECTL)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        if let Some(text) = input {
            stdin.write_all(text.as_bytes()).unwrap();
        }
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// kubectl as the admin; must succeed.
    fn kubectl(&self, args: &[&str], input: Option<&str>) -> String {
        let out = self.kubectl_as(&self.admin(), args, input);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A kubeconfig like the admin's with another client certificate.
    fn kubeconfig_with(&self, name: &str, cert_pem: &str, key_pem: &str) -> PathBuf {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let text = std::fs::read_to_string(self.admin()).unwrap();
        let text: String = text
            .lines()
            .map(|l| {
                let field = l.trim_start();
                let indent = &l[..l.len() - field.len()];
                if field.starts_with("client-certificate-data:") {
                    format!("{indent}client-certificate-data: {}\n", b64(cert_pem))
                } else if field.starts_with("client-key-data:") {
                    format!("{indent}client-key-data: {}\n", b64(key_pem))
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Polls `get csr NAME -o jsonpath=PATH` until `done` holds.
    fn wait_csr(&self, name: &str, path: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let out = self.kubectl(
                &["get", "csr", name, "-o", &format!("jsonpath={path}")],
                None,
            );
            if done(&out) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "csr {name}: {path} is {out:?} after {TIMEOUT:?}\n{}\nserver log:\n{}",
                self.kubectl(&["get", "csr", name, "-o", "yaml"], None),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A new EC key and a CSR for `subject` (openssl's `/CN=.../O=...`), PEM.
fn openssl_request(subject: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            subject,
            "-keyout",
        ])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        std::fs::read_to_string(&key).unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn csr_yaml(
    name: &str,
    request_pem: &str,
    signer: &str,
    usages: &[&str],
    expiration: Option<u32>,
) -> String {
    let request = base64::engine::general_purpose::STANDARD.encode(request_pem);
    let usages: Vec<String> = usages.iter().map(|u| format!("  - {u}\n")).collect();
    let expiration = expiration
        .map(|s| format!("  expirationSeconds: {s}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {request}
  signerName: {signer}
{expiration}  usages:
{}",
        usages.concat()
    )
}

fn parse_pem(pem: &[u8]) -> x509_parser::pem::Pem {
    let (_, parsed) = x509_parser::pem::parse_x509_pem(pem).unwrap();
    parsed
}

/// What openssl reads from the certificate served at `address`: its
/// serial (hex).
fn served_serial(address: &str) -> String {
    let mut s_client = Command::new("openssl")
        .args(["s_client", "-connect", address, "-servername", "localhost"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let x509 = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(s_client.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ = s_client.wait();
    let out = x509.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_ascii_lowercase()
}

fn file_serial(path: &Path) -> String {
    let pem = parse_pem(&std::fs::read(path).unwrap());
    let cert = pem.parse_x509().unwrap();
    cert.raw_serial()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_user_request_approved_with_kubectl_is_signed_and_judged_by_rbac() {
    let server = Server::start();
    let (key, request) = openssl_request("/CN=jane/O=devs/O=auditors");
    let created = Instant::now();
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&csr_yaml(
            "jane",
            &request,
            "kubernetes.io/kube-apiserver-client",
            &["client auth"],
            Some(3600),
        )),
    );
    // Not signed before it is approved.
    assert_eq!(
        server.kubectl(
            &["get", "csr", "jane", "-o", "jsonpath={.status.certificate}"],
            None
        ),
        ""
    );
    let approve = server.kubectl(&["certificate", "approve", "jane"], None);
    assert!(approve.contains("approved"), "{approve}");
    let approved = Instant::now();
    let b64 = server.wait_csr("jane", "{.status.certificate}", |c| !c.is_empty());
    let issued = Instant::now();
    eprintln!(
        "figure: create -> issued {:?} (approve -> issued {:?})",
        issued - created,
        issued - approved
    );
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let parsed = parse_pem(&pem);
    let cert = parsed.parse_x509().unwrap();
    // One hour asked, one hour given (short-lived: the backdate is
    // not taken off the end), from about now.
    let not_before = cert.validity().not_before.timestamp();
    let not_after = cert.validity().not_after.timestamp();
    assert_eq!(not_after - not_before, 3600 + 300);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((not_after - now - 3600).abs() < 120, "{not_after} vs {now}");
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);

    // The certificate is the user jane in both groups.
    let jane = server.kubeconfig_with("jane.kubeconfig", &String::from_utf8(pem).unwrap(), &key);
    let who = server.kubectl_as(
        &jane,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
        None,
    );
    let who = String::from_utf8_lossy(&who.stdout).into_owned();
    assert!(
        who.starts_with("jane ") && who.contains("devs") && who.contains("auditors"),
        "{who}"
    );
    let denied = server.kubectl_as(&jane, &["get", "pods"], None);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains(
            "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    server.kubectl(
        &[
            "create",
            "rolebinding",
            "auditors-view",
            "--clusterrole=view",
            "--group=auditors",
        ],
        None,
    );
    let deadline = Instant::now() + TIMEOUT;
    while !server
        .kubectl_as(&jane, &["get", "pods"], None)
        .status
        .success()
    {
        assert!(
            Instant::now() < deadline,
            "the group binding never took effect"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn requests_breaking_their_signers_rules_fail() {
    let server = Server::start();
    let (_, request) = openssl_request("/CN=jane/O=system:nodes");
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&csr_yaml(
            "not-a-node",
            &request,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
            None,
        )),
    );
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&csr_yaml(
            "serving-usage",
            &request,
            "kubernetes.io/kube-apiserver-client",
            &["client auth", "server auth"],
            None,
        )),
    );
    server.kubectl(
        &["certificate", "approve", "not-a-node", "serving-usage"],
        None,
    );
    let failed = "{.status.conditions[?(@.type==\"Failed\")].reason}:{.status.conditions[?(@.type==\"Failed\")].message}";
    let out = server.wait_csr("not-a-node", failed, |s| s != ":");
    assert_eq!(
        out,
        "SignerValidationFailure:subject common name does not begin with system:node:"
    );
    let out = server.wait_csr("serving-usage", failed, |s| s != ":");
    assert_eq!(
        out,
        "SignerValidationFailure:invalid usage for client certificate: server auth"
    );
    for name in ["not-a-node", "serving-usage"] {
        assert_eq!(
            server.kubectl(
                &["get", "csr", name, "-o", "jsonpath={.status.certificate}"],
                None
            ),
            ""
        );
    }
    // kubectl's table says so too.
    let table = server.kubectl(&["get", "csr", "not-a-node"], None);
    assert!(table.contains("Approved,Failed"), "{table}");
}

#[test]
fn a_nodes_own_client_request_is_approved_and_signed_by_the_controllers() {
    let server = Server::start();
    let minted = Command::new(SKIFF)
        .args([
            "kubeconfig",
            "--user",
            "system:node:n1",
            "--group",
            "system:nodes",
            "--data-dir",
        ])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let node = server.dir.path().join("n1.kubeconfig");
    std::fs::write(&node, &minted.stdout).unwrap();
    let (_, request) = openssl_request("/CN=system:node:n1/O=system:nodes");
    let yaml = csr_yaml(
        "node-csr-n1",
        &request,
        "kubernetes.io/kube-apiserver-client-kubelet",
        &["digital signature", "client auth"],
        Some(86400),
    );
    let created = server.kubectl_as(&node, &["create", "-f", "-"], Some(&yaml));
    assert!(
        created.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&created.stderr),
        server.log()
    );
    let approved = server.wait_csr(
        "node-csr-n1",
        "{.status.conditions[?(@.type==\"Approved\")].reason}:{.status.conditions[?(@.type==\"Approved\")].message}",
        |s| s != ":",
    );
    assert_eq!(
        approved,
        "AutoApproved:Auto approving self kubelet client certificate after SubjectAccessReview."
    );
    let b64 = server.wait_csr("node-csr-n1", "{.status.certificate}", |c| !c.is_empty());
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let parsed = parse_pem(&pem);
    let cert = parsed.parse_x509().unwrap();
    let cn: Vec<_> = cert
        .subject()
        .iter_common_name()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(cn, ["system:node:n1"]);

    // Someone else asking for a node's certificate is approved as a
    // node client when RBAC lets them (the admin, in system:masters).
    let (_, request) = openssl_request("/CN=system:node:n2/O=system:nodes");
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&csr_yaml(
            "by-admin",
            &request,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
            None,
        )),
    );
    let approved = server.wait_csr(
        "by-admin",
        "{.status.conditions[?(@.type==\"Approved\")].message}",
        |s| !s.is_empty(),
    );
    assert_eq!(
        approved,
        "Auto approving kubelet client certificate after SubjectAccessReview."
    );
}

#[test]
fn check_expiration_lists_and_renew_all_keeps_a_running_server_working() {
    let server = Server::start();
    let check = Command::new(SKIFF)
        .args(["certs", "check-expiration", "--data-dir"])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let table = String::from_utf8(check.stdout).unwrap();
    assert!(
        table.contains("CERTIFICATE")
            && table.contains("RESIDUAL TIME")
            && table.contains("EXTERNALLY MANAGED"),
        "{table}"
    );
    for row in ["admin.kubeconfig", "apiserver ", "apiserver-kubelet-client"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row} missing:\n{table}"));
        assert!(
            line.contains("364d") && line.contains(" ca ") && line.trim_end().ends_with("no"),
            "{line}"
        );
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("ca ") && l.contains("y ")),
        "{table}"
    );

    let address = server.address();
    let serving = server.data_dir.join("pki").join("apiserver.crt");
    let before = served_serial(&address);
    assert_eq!(before, file_serial(&serving));
    let admin_before = std::fs::read_to_string(server.admin()).unwrap();

    let renew = Command::new(SKIFF)
        .args(["certs", "renew", "all", "--data-dir"])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        renew.status.success(),
        "{}",
        String::from_utf8_lossy(&renew.stderr)
    );
    let said = String::from_utf8(renew.stdout).unwrap();
    assert!(
        said.contains("certificate for serving the Kubernetes API renewed"),
        "{said}"
    );
    assert!(said.contains("certificate embedded in the kubeconfig file for the admin to use and for skiff itself renewed"), "{said}");
    assert!(said.contains("Done renewing certificates."), "{said}");
    let after = file_serial(&serving);
    assert_ne!(after, before);
    assert_ne!(
        std::fs::read_to_string(server.admin()).unwrap(),
        admin_before
    );

    // kubectl goes on with the renewed admin kubeconfig, and the running
    // server serves the new certificate.
    server.kubectl(&["get", "namespaces"], None);
    let deadline = Instant::now() + TIMEOUT;
    while served_serial(&address) != after {
        assert!(
            Instant::now() < deadline,
            "the renewed serving certificate was never served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server.kubectl(&["get", "namespaces"], None);

    // An unknown name is refused and changes nothing.
    let bad = Command::new(SKIFF)
        .args(["certs", "renew", "nope", "--data-dir"])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown certificate \"nope\""));
    assert_eq!(file_serial(&serving), after);
}

#[test]
fn a_node_rotates_its_client_certificate_through_a_request_when_due() {
    use skiff_client::certificate::{authority, kubeconfig, rotation};
    let server = Server::start();
    let minted = Command::new(SKIFF)
        .args([
            "kubeconfig",
            "--user",
            "system:node:n1",
            "--group",
            "system:nodes",
            "--validity-period",
            "1h",
            "--data-dir",
        ])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let path = server.dir.path().join("n1.kubeconfig");
    std::fs::write(&path, &minted.stdout).unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (before, after) = runtime.block_on(async {
        let (client, rotating) = skiff_client::http::client_with_rotating_cert(&path)
            .await
            .unwrap();
        let (cert, location) = rotating.expect("a client-certificate kubeconfig");
        let before = cert.certificate_pem();
        let rotation =
            rotation::Rotation::new(client.clone(), "n1", location, cert.clone()).with_jitter(0.0);
        assert!(rotation.is_own());
        // Issued now for an hour (and a minute back): due after 70 % of
        // that, not before.
        let now = time::OffsetDateTime::now_utc();
        let due = rotation.next_deadline().unwrap();
        assert!(
            due > now + time::Duration::minutes(40) && due < now + time::Duration::minutes(45),
            "{due}"
        );
        // A clock an hour on finds it due and rotates at once.
        let later = now + time::Duration::hours(1);
        let rotation = rotation.with_clock(std::sync::Arc::new(move || later));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let running = tokio::spawn(rotation.run(shutdown.clone()));
        let deadline = Instant::now() + TIMEOUT;
        while cert.certificate_pem() == before {
            assert!(
                Instant::now() < deadline,
                "never rotated:\n{}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shutdown.cancel();
        running.await.unwrap();
        // The same running client goes on (as the node).
        let csrs: kube::Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
            kube::Api::all(client);
        let listed = csrs.list(&Default::default()).await.unwrap();
        let mine = listed
            .items
            .iter()
            .find(|c| c.spec.username.as_deref() == Some("system:node:n1"))
            .expect("the node's request");
        assert_eq!(
            mine.spec.signer_name,
            "kubernetes.io/kube-apiserver-client-kubelet"
        );
        (before, cert.certificate_pem())
    });
    let old = authority::inspect(before.as_bytes()).unwrap();
    let new = authority::inspect(after.as_bytes()).unwrap();
    assert_ne!(old.serial, new.serial);
    assert_eq!(new.common_name, "system:node:n1");
    assert_eq!(new.organizations, ["system:nodes"]);
    // A year by default (--cluster-signing-duration), so it is not due
    // again soon.
    assert!(new.not_after - new.not_before > time::Duration::days(364));
    // Written where the kubeconfig keeps it; kubectl with it is the node.
    let written = kubeconfig::read(&path).unwrap().unwrap();
    assert_eq!(written.cert_pem, after);
    let who = server.kubectl_as(
        &path,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&who.stdout), "system:node:n1");
}

#[test]
fn the_server_warns_of_a_certificate_expiring_within_30_days() {
    use skiff_client::certificate::authority::Authority;
    let first = Server::start();
    let dir = first.dir.clone();
    let pki = first.data_dir.join("pki");
    drop(first);
    let ca = Authority::load(&pki.join("ca.crt"), &pki.join("ca.key")).unwrap();
    let file = pki.join("apiserver-kubelet-client.crt");
    let now = time::OffsetDateTime::now_utc();
    let expires = now + time::Duration::days(10);
    let short = ca
        .renew(
            &std::fs::read(&file).unwrap(),
            now - time::Duration::minutes(1),
            expires,
        )
        .unwrap();
    std::fs::write(&file, short).unwrap();
    let second = Server::start_in(dir);
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][usize::from(u8::from(expires.month())) - 1];
    let day = format!("{month} {:02}, {}", expires.day(), expires.year());
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let warned = second.log.lock().unwrap().iter().any(|l| {
            l.contains("certificate expires within 30 days")
                && l.contains(&file.display().to_string())
                && l.contains(&day)
        });
        if warned {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no warning naming {} and {day}:\n{}",
            file.display(),
            second.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Only that one: the others have a year.
    let warnings = second
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("certificate expires within 30 days"))
        .count();
    assert_eq!(warnings, 1, "{}", second.log());
}

#[test]
fn a_minted_user_kubeconfig_keeps_every_group() {
    let server = Server::start();
    let minted = Command::new(SKIFF)
        .args([
            "kubeconfig",
            "--user",
            "jane",
            "--group",
            "devs",
            "--group",
            "ops",
            "--data-dir",
        ])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let path = server.dir.path().join("jane.kubeconfig");
    std::fs::write(&path, &minted.stdout).unwrap();
    let who = server.kubectl_as(
        &path,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
        None,
    );
    let who = String::from_utf8_lossy(&who.stdout).into_owned();
    assert!(
        who.starts_with("jane ") && who.contains("devs") && who.contains("ops"),
        "{who}"
    );
}

/// `skiff controller-manager` alone signs with the CA it is given.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_separate_controller_manager_signs_with_the_cluster_signing_flags() {
    let server = Server::start_with(
        std::sync::Arc::new(tempfile::tempdir().unwrap()),
        &["--disable-controller-manager"],
    );
    let pki = server.data_dir.join("pki");
    let _manager = Killed(
        Command::new(SKIFF)
            .args([
                "controller-manager",
                "--leader-elect=false",
                "--secure-port=0",
                "--controllers=csrsigning",
                "--kubeconfig",
            ])
            .arg(server.admin())
            .arg("--cluster-signing-cert-file")
            .arg(pki.join("ca.crt"))
            .arg("--cluster-signing-key-file")
            .arg(pki.join("ca.key"))
            .args(["--cluster-signing-duration", "2h"])
            .env("SKIFF_LOG", "warn")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (_, request) = openssl_request("/CN=sam");
    server.kubectl(
        &["apply", "-f", "-"],
        Some(&csr_yaml(
            "sam",
            &request,
            "kubernetes.io/kube-apiserver-client",
            &["client auth"],
            Some(86400),
        )),
    );
    server.kubectl(&["certificate", "approve", "sam"], None);
    let b64 = server.wait_csr("sam", "{.status.certificate}", |c| !c.is_empty());
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let parsed = parse_pem(&pem);
    let cert = parsed.parse_x509().unwrap();
    // A day asked, two hours allowed (short-lived: plus the five minutes
    // of backdating).
    let life = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(life, 2 * 3600 + 300);
    // Only one of the pair is refused before anything starts.
    let half = Command::new(SKIFF)
        .args(["controller-manager", "--kubeconfig"])
        .arg(server.admin())
        .arg("--cluster-signing-cert-file")
        .arg(pki.join("ca.crt"))
        .output()
        .unwrap();
    assert!(!half.status.success());
    assert!(String::from_utf8_lossy(&half.stderr).contains("--cluster-signing-key-file"));
}
