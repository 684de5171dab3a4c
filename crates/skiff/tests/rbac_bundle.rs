//! End to end, as root, on a real `skiff server` driven with the real
//! kubectl ([#37], part 6): a Helm-style bundle (Namespace,
//! ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap and a
//! Deployment running as the ServiceAccount) applied in one
//! `kubectl apply -f` runs, and its pod (the host's Python with the
//! `kubernetes` client, `load_incluster_config()`) can do exactly what the
//! ClusterRole grants: list pods (in its namespace and, the binding being
//! cluster-wide, everywhere) and get its ConfigMap, but not list Secrets
//! nor create a ConfigMap (upstream's Forbidden, naming
//! `system:serviceaccount:NS:lister`). `kubectl delete -f` takes it all
//! away again. The API server is bound to every address and advertised on
//! the host's address, so the pod reaches it through the `kubernetes`
//! Service.

mod cluster;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cluster::{wait_for, wait_for_explained, Cluster, Options};

const NS: &str = "rbac-bundle";
const ACCOUNT: &str = "system:serviceaccount:rbac-bundle:lister";

#[test]
fn helm_style_bundle_does_what_it_was_granted() {
    let started = Instant::now();
    let c = Cluster::start(Options {
        bind_address: Some("0.0.0.0".into()),
        extra: vec!["--advertise-address".into(), host_ip()],
        ..Options::default()
    });
    let bundle_path = c.dir.path().join("bundle.yaml");
    std::fs::write(&bundle_path, bundle()).unwrap();
    let bundle_file = bundle_path.to_str().unwrap();

    // One apply of the whole bundle.
    let applied = c.kubectl(&["apply", "-f", bundle_file]);
    for made in [
        "namespace/rbac-bundle created",
        "serviceaccount/lister created",
        "clusterrole.rbac.authorization.k8s.io/rbac-bundle-lister created",
        "clusterrolebinding.rbac.authorization.k8s.io/rbac-bundle-lister created",
        "configmap/lister-settings created",
        "deployment.apps/lister created",
    ] {
        assert!(applied.contains(made), "{made} missing from:\n{applied}");
    }
    let explain = || format!("; pods:\n{}\nserver log:\n{}", pods(&c), c.log_text());
    wait_for_explained(
        "the Deployment to be available",
        Duration::from_secs(120),
        || {
            let out = c.kubectl_output(&[
                "-n",
                NS,
                "get",
                "deployment",
                "lister",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}/{.status.availableReplicas}",
            ]);
            (String::from_utf8_lossy(&out.stdout) == "True/1").then_some(())
        },
        explain,
    );

    // The pod's checks, one line each.
    let checks = wait_for_explained(
        "the pod's five CHECK lines",
        Duration::from_secs(60),
        || {
            let out = c.kubectl_output(&["-n", NS, "logs", "deploy/lister"]);
            let logs = String::from_utf8_lossy(&out.stdout).into_owned();
            let lines: Vec<String> = logs
                .lines()
                .filter(|l| l.starts_with("CHECK "))
                .map(String::from)
                .collect();
            (lines.len() >= 5 || logs.contains("DONE")).then_some(lines)
        },
        explain,
    );
    let line = |name: &str| -> &str {
        let prefix = format!("CHECK {name} ");
        checks
            .iter()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {name} line in {checks:#?}"))
    };
    let pod = c
        .kubectl(&["-n", NS, "get", "pods", "-l", "app=lister", "-o", "name"])
        .trim()
        .trim_start_matches("pod/")
        .to_string();
    // Allowed: its namespace's pods (itself among them), all pods (the
    // binding is a ClusterRoleBinding), its ConfigMap.
    let listed = line("list-pods");
    assert!(
        listed.starts_with("200 ") && listed.split_whitespace().any(|p| p == pod),
        "list-pods: {listed} (pod {pod})"
    );
    let everywhere = line("list-all-pods");
    assert!(
        everywhere.starts_with("200 ") && everywhere.contains(&format!("{NS}/{pod}")),
        "list-all-pods: {everywhere}"
    );
    assert_eq!(line("get-configmap"), "200 greeting=hello");
    // Refused: what the ClusterRole does not say, in upstream's words.
    assert_eq!(
        line("list-secrets"),
        format!(
            r#"403 secrets is forbidden: User "{ACCOUNT}" cannot list resource "secrets" in API group "" in the namespace "{NS}""#
        )
    );
    assert_eq!(
        line("create-configmap"),
        format!(
            r#"403 configmaps is forbidden: User "{ACCOUNT}" cannot create resource "configmaps" in API group "" in the namespace "{NS}""#
        )
    );
    // The same answers from the authorizer, asked by the admin.
    let can_i = |args: &[&str]| -> String {
        let mut all = vec!["auth", "can-i", "--as", ACCOUNT];
        all.extend_from_slice(args);
        String::from_utf8_lossy(&c.kubectl_output(&all).stdout)
            .trim()
            .to_string()
    };
    assert_eq!(can_i(&["watch", "pods", "-n", "kube-system"]), "yes");
    assert_eq!(can_i(&["get", "configmaps", "-n", NS]), "yes");
    assert_eq!(can_i(&["list", "configmaps", "-n", NS]), "no");
    assert_eq!(can_i(&["delete", "pods", "-n", NS]), "no");
    assert_eq!(can_i(&["get", "secrets", "-n", NS]), "no");

    // `kubectl delete -f` of the same file: everything goes, rights too.
    // (The Namespace comes first, so the namespace controller may have
    // removed its content before kubectl asks: not found is fine.)
    let deleted = c.kubectl(&[
        "delete",
        "-f",
        bundle_file,
        "--ignore-not-found",
        "--timeout=90s",
    ]);
    assert!(
        deleted.contains(
            "clusterrolebinding.rbac.authorization.k8s.io \"rbac-bundle-lister\" deleted"
        ),
        "{deleted}"
    );
    wait_for("the bundle's rights to go", Duration::from_secs(20), || {
        (can_i(&["list", "pods", "-n", "kube-system"]) == "no").then_some(())
    });
    for (kind, name) in [
        ("clusterrole", "rbac-bundle-lister"),
        ("clusterrolebinding", "rbac-bundle-lister"),
        ("namespace", NS),
    ] {
        let out = c.kubectl_output(&["get", kind, name]);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("NotFound"),
            "{kind} {name} still there: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    c.assert_no_component_refused();
    eprintln!("bundle checks passed in {:?}", started.elapsed());
}

/// The pods of the bundle's namespace, for a failure's explanation.
fn pods(c: &Cluster) -> String {
    let out: Output = c.kubectl_output(&["-n", NS, "get", "pods", "-o", "wide"]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The host's address on its default route: where pods reach the API
/// server (they cannot reach the node's 127.0.0.1).
fn host_ip() -> String {
    let out = Command::new("ip")
        .args(["-4", "route", "get", "1.1.1.1"])
        .stdin(Stdio::null())
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

/// What the pod runs: each check, one line, then it sleeps.
const CHECKS: &str = r#"import json, time
from kubernetes import client, config
config.load_incluster_config()
ns = open("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read()
v1 = client.CoreV1Api()
def check(name, call, granted=False):
    # What is granted may take a moment to reach the authorizer.
    deadline = time.monotonic() + (10 if granted else 0)
    try:
        while True:
            try:
                result = call()
                break
            except client.exceptions.ApiException as e:
                if e.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        print("CHECK", name, 200, result, flush=True)
    except client.exceptions.ApiException as e:
        try:
            why = json.loads(e.body)["message"]
        except Exception:
            why = repr(e.body)
        print("CHECK", name, e.status, why, flush=True)
    except Exception as e:
        print("CHECK", name, "ERROR", repr(e), flush=True)
check("list-pods", lambda: " ".join(p.metadata.name for p in v1.list_namespaced_pod(ns).items), True)
check("list-all-pods", lambda: " ".join(p.metadata.namespace + "/" + p.metadata.name for p in v1.list_pod_for_all_namespaces().items), True)
check("get-configmap", lambda: " ".join(k + "=" + v for k, v in sorted(v1.read_namespaced_config_map("lister-settings", ns).data.items())), True)
check("list-secrets", lambda: len(v1.list_namespaced_secret(ns).items))
check("create-configmap", lambda: v1.create_namespaced_config_map(ns, {"metadata": {"name": "made-by-lister"}}).metadata.name)
print("DONE", flush=True)
time.sleep(36000)"#;

/// The bundle, as a chart would render it: one multi-document YAML.
fn bundle() -> String {
    let venv = cluster::python_venv();
    let script = CHECKS.replace('\n', "\n          ");
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {NS}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: lister
  namespace: {NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: rbac-bundle-lister
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rbac-bundle-lister
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: rbac-bundle-lister
subjects:
- kind: ServiceAccount
  name: lister
  namespace: {NS}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: lister-settings
  namespace: {NS}
data:
  greeting: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: lister
  namespace: {NS}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: lister}}
  template:
    metadata:
      labels: {{app: lister}}
    spec:
      serviceAccountName: lister
      terminationGracePeriodSeconds: 0
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
