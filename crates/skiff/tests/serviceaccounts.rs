//! End to end, as root, on a real `skiff server` (containerd, CNI, the
//! proxy, DNS) driven with the real kubectl: ServiceAccounts and their
//! tokens ([#37], part 3). One cluster for the file, its API server bound
//! to every address and advertised on the host's address so pods reach it
//! through the `kubernetes` Service. Scenarios run at once, each
//! in its namespace:
//!
//! - the Python `kubernetes` client in a pod, `load_incluster_config()`:
//!   lists pods when its ServiceAccount is bound to `view`, gets upstream's
//!   Forbidden when not; its token (read out of the pod) authenticates
//!   (TokenReview, kubectl) until the pod is deleted, then is refused
//!   (401);
//! - `kubectl create token` with a duration, an audience and a pod
//!   binding: the claims, TokenReview for that audience only, the token
//!   refused once the pod is gone; a too-short duration refused in
//!   upstream's words;
//! - the issuer's discovery documents serve the key that signed them;
//! - admission: the `kube-api-access-` volume and mounts, none with
//!   `automountServiceAccountToken: false` on the pod or its account, a
//!   missing account refused;
//! - a legacy token Secret created by hand is filled by the tokens
//!   controller, and its token works while the Secret exists.

mod cluster;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use base64::Engine as _;
use cluster::{wait_for, Cluster, Options, KUBECTL};
use serde_json::Value;

struct Env {
    c: Cluster,
    /// The API server's URL as the host reaches it.
    server: String,
    /// An empty kubeconfig, so that kubectl sends only the token it is given.
    empty: PathBuf,
}

#[test]
fn service_accounts_and_tokens() {
    let c = Cluster::start(Options {
        bind_address: Some("0.0.0.0".into()),
        extra: vec!["--advertise-address".into(), host_ip()],
        ..Options::default()
    });
    let server = c.kubectl(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let empty = c.dir.path().join("empty.kubeconfig");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").unwrap();
    let env = Env { c, server, empty };
    let scenarios: &[cluster::Scenario<Env>] = &[
        ("in-cluster client with and without view", in_cluster_client),
        ("kubectl create token", create_token),
        ("issuer discovery", issuer_discovery),
        ("admission", admission),
        ("legacy token secret", legacy_token),
    ];
    cluster::run_scenarios(&env, scenarios);
}

/// The host's address on its default route: where pods reach the API
/// server (they cannot reach the node's 127.0.0.1).
fn host_ip() -> String {
    let out = Command::new("ip")
        .args(["-4", "route", "get", "1.1.1.1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    words
        .find(|w| *w == "src")
        .and_then(|_| words.next())
        .unwrap_or_else(|| panic!("no source address in {text:?}"))
        .to_string()
}

fn namespace(c: &Cluster, ns: &str) {
    c.kubectl(&["create", "namespace", ns]);
    for (kind, name) in [
        ("serviceaccount", "default"),
        ("configmap", "kube-root-ca.crt"),
    ] {
        wait_for(
            &format!("{kind} {name} in {ns}"),
            Duration::from_secs(30),
            || {
                c.kubectl_output(&["-n", ns, "get", kind, name])
                    .status
                    .success()
                    .then_some(())
            },
        );
    }
}

/// kubectl with only `token` as credentials.
fn as_token(env: &Env, token: &str, args: &[&str]) -> Output {
    let ca = env.c.data_dir.join("pki/ca.crt");
    Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&env.empty)
        .args(["--server", &env.server, "--token", token])
        .arg("--certificate-authority")
        .arg(&ca)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `kubectl create -f -` of `yaml` with extra args; the output.
fn create(c: &Cluster, yaml: &str, args: &[&str]) -> Output {
    let mut child = Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["create", "-f", "-"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(yaml.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A TokenReview of `token` for `audiences` (none: the API's): its status.
fn review(c: &Cluster, token: &str, audiences: &[&str]) -> Value {
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences},
    });
    let out = create(c, &body.to_string(), &["-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    answer["status"].clone()
}

/// The claims of a JWT.
fn claims(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn header(token: &str) -> Value {
    let part = token.split('.').next().unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The host's Python and the venv with the `kubernetes` client, mounted
/// into a busybox pod running as `account`.
fn python_pod_yaml(ns: &str, name: &str, account: &str, script: &str) -> String {
    let venv = cluster::python_venv();
    let script = script.replace('\n', "\n      ");
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}}}
spec:
  serviceAccountName: {account}
  terminationGracePeriodSeconds: 0
  restartPolicy: Never
  volumes:
  - {{name: usr, hostPath: {{path: /usr}}}}
  - {{name: venv, hostPath: {{path: {venv}}}}}
  containers:
  - name: py
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["/usr/bin/python3", "-u", "-c"]
    args:
    - |
      import glob, sys
      sys.path[:0] = glob.glob("/venv/lib/python3*/site-packages")
      {script}
    volumeMounts:
    - {{name: usr, mountPath: /usr, readOnly: true}}
    - {{name: usr, mountPath: /lib, subPath: lib, readOnly: true}}
    - {{name: usr, mountPath: /lib64, subPath: lib64, readOnly: true}}
    - {{name: venv, mountPath: /venv, readOnly: true}}
"#,
        venv = venv.display()
    )
}

/// Lists the pods of its namespace with the in-cluster configuration,
/// prints the outcome and its token, then waits to be deleted.
const LIST_PODS: &str = r#"import time
from kubernetes import client, config
config.load_incluster_config()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
try:
    client.CoreV1Api().list_namespaced_pod(ns)
    print("LIST 200", flush=True)
except client.exceptions.ApiException as e:
    print("LIST", e.status, e.body.replace("\n", " "), flush=True)
except Exception as e:
    print("LIST ERROR", repr(e), flush=True)
print("TOKEN", open("/var/run/secrets/kubernetes.io/serviceaccount/token").read(), flush=True)
time.sleep(3600)"#;

/// The pod's `LIST` line and its token, once it printed them.
fn list_outcome(c: &Cluster, ns: &str, pod: &str) -> (String, String) {
    wait_for(
        &format!("the output of pod {ns}/{pod}"),
        Duration::from_secs(180),
        || {
            let out = c.kubectl_output(&["-n", ns, "logs", pod]);
            let logs = String::from_utf8_lossy(&out.stdout).into_owned();
            let list = logs.lines().find(|l| l.starts_with("LIST"))?.to_string();
            let token = logs
                .lines()
                .find_map(|l| l.strip_prefix("TOKEN "))?
                .trim()
                .to_string();
            Some((list, token))
        },
    )
}

fn in_cluster_client(env: &Env) {
    let c = &env.c;
    let ns = "sa-view";
    namespace(c, ns);
    c.kubectl(&["-n", ns, "create", "serviceaccount", "reader"]);
    c.kubectl(&["-n", ns, "create", "serviceaccount", "nobody"]);
    c.kubectl(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        "reader-view",
        "--clusterrole=view",
        &format!("--serviceaccount={ns}:reader"),
    ]);
    c.apply(&python_pod_yaml(ns, "reader", "reader", LIST_PODS));
    c.apply(&python_pod_yaml(ns, "nobody", "nobody", LIST_PODS));
    let (list, token) = list_outcome(c, ns, "reader");
    assert_eq!(list, "LIST 200");
    let (list, _) = list_outcome(c, ns, "nobody");
    assert!(
        list.starts_with("LIST 403") && list.contains(&format!(
            r#"pods is forbidden: User \"system:serviceaccount:{ns}:nobody\" cannot list resource \"pods\" in API group \"\" in the namespace \"{ns}\""#
        )),
        "{list}"
    );
    // The token read out of the pod: bound to it, and it authenticates.
    let claimed = claims(&token);
    assert_eq!(claimed["sub"], format!("system:serviceaccount:{ns}:reader"));
    assert_eq!(claimed["kubernetes.io"]["pod"]["name"], "reader");
    assert_eq!(
        claimed["exp"].as_i64().unwrap() - claimed["iat"].as_i64().unwrap(),
        3607
    );
    let status = review(c, &token, &[]);
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(
        status["user"]["username"],
        format!("system:serviceaccount:{ns}:reader")
    );
    assert_eq!(
        status["user"]["extra"]["authentication.kubernetes.io/pod-name"][0],
        "reader"
    );
    let out = as_token(env, &token, &["-n", ns, "get", "pods", "-o", "name"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The pod deleted: the token is refused.
    c.kubectl(&["-n", ns, "delete", "pod", "reader", "--wait=true"]);
    wait_for(
        "the deleted pod's token to be refused",
        Duration::from_secs(30),
        || (review(c, &token, &[])["authenticated"] != true).then_some(()),
    );
    let out = as_token(env, &token, &["-n", ns, "get", "pods"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("Unauthorized"),
        "{stderr}"
    );
}

fn create_token(env: &Env) {
    let c = &env.c;
    let ns = "sa-token";
    namespace(c, ns);
    c.kubectl(&["-n", ns, "create", "serviceaccount", "robot"]);
    c.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: target, namespace: {ns}}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 0
  containers:
  - {{name: c, image: busybox, imagePullPolicy: IfNotPresent, command: [sleep, "3600"]}}
"#
    ));
    let token = c
        .kubectl(&[
            "-n",
            ns,
            "create",
            "token",
            "robot",
            "--duration",
            "20m",
            "--audience",
            "vault",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "target",
        ])
        .trim()
        .to_string();
    let claimed = claims(&token);
    assert_eq!(claimed["aud"], serde_json::json!(["vault"]));
    assert_eq!(
        claimed["exp"].as_i64().unwrap() - claimed["iat"].as_i64().unwrap(),
        1200
    );
    assert_eq!(
        claimed["iss"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(claimed["kubernetes.io"]["pod"]["name"], "target");
    assert_eq!(
        claimed["kubernetes.io"]["pod"]["uid"],
        c.kubectl(&[
            "-n",
            ns,
            "get",
            "pod",
            "target",
            "-o",
            "jsonpath={.metadata.uid}"
        ])
    );
    // For its audience only.
    let status = review(c, &token, &["vault"]);
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], serde_json::json!(["vault"]));
    assert_eq!(
        status["user"]["groups"],
        serde_json::json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ])
    );
    assert_ne!(review(c, &token, &[])["authenticated"], true);
    // A token for the API authenticates kubectl.
    let api_token = c.kubectl(&["-n", ns, "create", "token", "robot"]);
    let out = as_token(env, api_token.trim(), &["auth", "whoami", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let whoami: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        format!("system:serviceaccount:{ns}:robot")
    );
    assert_eq!(
        whoami["status"]["userInfo"]["uid"],
        c.kubectl(&[
            "-n",
            ns,
            "get",
            "sa",
            "robot",
            "-o",
            "jsonpath={.metadata.uid}"
        ])
    );
    assert!(
        whoami["status"]["userInfo"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .unwrap()
            .starts_with("JTI=")
    );
    // Too short, and a missing account: upstream's answers.
    let out = c.kubectl_output(&["-n", ns, "create", "token", "robot", "--duration", "5m"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("may not specify a duration less than 10 minutes"),
        "{stderr}"
    );
    let out = c.kubectl_output(&["-n", ns, "create", "token", "ghost"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"serviceaccounts "ghost" not found"#),
        "{stderr}"
    );
    // The bound pod deleted: refused.
    c.kubectl(&["-n", ns, "delete", "pod", "target", "--wait=true"]);
    wait_for(
        "the token bound to the deleted pod to be refused",
        Duration::from_secs(30),
        || (review(c, &token, &["vault"])["authenticated"] != true).then_some(()),
    );
}

fn issuer_discovery(env: &Env) {
    let c = &env.c;
    let config: Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/.well-known/openid-configuration"]))
            .unwrap();
    assert_eq!(
        config["issuer"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(
        config["response_types_supported"],
        serde_json::json!(["id_token"])
    );
    assert_eq!(
        config["subject_types_supported"],
        serde_json::json!(["public"])
    );
    assert!(config["jwks_uri"]
        .as_str()
        .unwrap()
        .ends_with("/openid/v1/jwks"));
    let jwks: Value =
        serde_json::from_str(&c.kubectl(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
    let token = c.kubectl(&["-n", "default", "create", "token", "default"]);
    let kid = header(token.trim())["kid"].clone();
    let key = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .unwrap_or_else(|| panic!("no key {kid} in {jwks}"));
    assert_eq!(
        key["alg"],
        config["id_token_signing_alg_values_supported"][0]
    );
    assert_eq!(key["use"], "sig");
    // Service accounts may read them (system:service-account-issuer-discovery).
    let out = as_token(env, token.trim(), &["get", "--raw", "/openid/v1/jwks"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A pod as admission makes it (server-side dry run).
fn admitted(c: &Cluster, ns: &str, spec: &str) -> Result<Value, String> {
    let yaml =
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}}}\nspec:\n{spec}");
    let out = create(c, &yaml, &["--dry-run=server", "-o", "json"]);
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn admission(env: &Env) {
    let c = &env.c;
    let ns = "sa-admission";
    namespace(c, ns);
    c.apply(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: quiet, namespace: {ns}}}\nautomountServiceAccountToken: false\n"
    ));
    let containers = "  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox, volumeMounts: [{name: mine, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}]}\n  initContainers:\n  - {name: i, image: busybox}\n  volumes:\n  - {name: mine, emptyDir: {}}\n";
    let pod = admitted(c, ns, containers).unwrap();
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    let volume = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str().unwrap().starts_with("kube-api-access-"))
        .unwrap_or_else(|| panic!("no token volume: {spec}"))
        .clone();
    let name = volume["name"].as_str().unwrap();
    assert_eq!(name.len(), "kube-api-access-".len() + 5);
    assert_eq!(volume["projected"]["defaultMode"], 420);
    assert_eq!(
        volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
        3607
    );
    assert_eq!(
        volume["projected"]["sources"][1]["configMap"]["name"],
        "kube-root-ca.crt"
    );
    let mounts = |list: &str, i: usize| spec[list][i]["volumeMounts"].to_string();
    assert!(mounts("containers", 0).contains(name), "{spec}");
    assert!(mounts("initContainers", 0).contains(name), "{spec}");
    assert!(!mounts("containers", 1).contains(name), "{spec}");
    // No token: the pod says so, or its account does.
    let pod = admitted(
        c,
        ns,
        &format!("  automountServiceAccountToken: false\n{containers}"),
    )
    .unwrap();
    assert!(
        !pod["spec"].to_string().contains("kube-api-access-"),
        "{pod}"
    );
    let pod = admitted(c, ns, &format!("  serviceAccountName: quiet\n{containers}")).unwrap();
    assert!(
        !pod["spec"].to_string().contains("kube-api-access-"),
        "{pod}"
    );
    // A missing account.
    let err = admitted(c, ns, &format!("  serviceAccountName: ghost\n{containers}")).unwrap_err();
    assert!(
        err.contains(&format!(
            r#"pods "p" is forbidden: error looking up service account {ns}/ghost: serviceaccount "ghost" not found"#
        )),
        "{err}"
    );
}

fn legacy_token(env: &Env) {
    let c = &env.c;
    let ns = "sa-legacy";
    namespace(c, ns);
    c.kubectl(&["-n", ns, "create", "serviceaccount", "old"]);
    c.apply(&format!(
        r#"apiVersion: v1
kind: Secret
metadata:
  name: old-token
  namespace: {ns}
  annotations: {{kubernetes.io/service-account.name: old}}
type: kubernetes.io/service-account-token
"#
    ));
    let token = wait_for("the token controller", Duration::from_secs(30), || {
        let out = c.kubectl(&[
            "-n",
            ns,
            "get",
            "secret",
            "old-token",
            "-o",
            "jsonpath={.data.token}",
        ]);
        (!out.is_empty()).then_some(out)
    });
    let token = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(token.trim())
            .unwrap(),
    )
    .unwrap();
    let claimed = claims(&token);
    assert_eq!(claimed["iss"], "kubernetes/serviceaccount");
    assert_eq!(
        claimed["kubernetes.io/serviceaccount/secret.name"],
        "old-token"
    );
    let ca = c.kubectl(&[
        "-n",
        ns,
        "get",
        "secret",
        "old-token",
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    assert!(!ca.is_empty());
    let out = as_token(
        env,
        &token,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("system:serviceaccount:{ns}:old"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.kubectl(&["-n", ns, "delete", "secret", "old-token"]);
    wait_for(
        "the legacy token to be refused",
        Duration::from_secs(30),
        || {
            let out = as_token(env, &token, &["auth", "whoami"]);
            String::from_utf8_lossy(&out.stderr)
                .contains("Unauthorized")
                .then_some(())
        },
    );
}
