//! A node's credentials reach only what its pods need, end to end on a
//! real `skiff server`: a certificate for `system:node:<this node>` reads
//! the Secret its pod mounts but not another one, nor a list; another
//! node's certificate reads neither; NodeRestriction refuses a restricted
//! label, a taint change, a change to another node and deleting a pod
//! bound elsewhere; and the agent's own HTTPS endpoint lets a user in
//! only when a SubjectAccessReview for `nodes/proxy` says so.

mod cluster;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use cluster::{wait_for, Cluster, Options};

const SKIFF: &str = env!("CARGO_BIN_EXE_skiff");
const KUBECTL: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// A kubeconfig with a client certificate for `user` in `groups`, minted
/// by `skiff kubeconfig`.
fn mint(c: &Cluster, dir: &Path, user: &str, groups: &[&str]) -> PathBuf {
    let mut cmd = Command::new(SKIFF);
    cmd.args(["kubeconfig", "--user", user, "--data-dir"])
        .arg(&c.data_dir);
    for g in groups {
        cmd.args(["--group", g]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(format!("{}.kubeconfig", user.replace(':', "_")));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

fn kubectl_as(config: &Path, args: &[&str]) -> Output {
    Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(config)
        .args(args)
        .output()
        .unwrap()
}

/// Runs `args` as `config`'s user and expects a refusal whose message
/// contains `words`.
fn refused(config: &Path, args: &[&str], words: &str) {
    let out = kubectl_as(config, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} was allowed");
    assert!(stderr.contains(words), "{args:?}: {stderr}");
}

fn allowed(config: &Path, args: &[&str]) -> String {
    let out = kubectl_as(config, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes the client certificate and key of a kubeconfig to files.
fn cert_files(config: &Path, dir: &Path) -> (PathBuf, PathBuf) {
    let field = |name: &str| {
        let out = allowed(
            config,
            &[
                "config",
                "view",
                "--raw",
                "-o",
                &format!("jsonpath={{.users[0].user.{name}}}"),
            ],
        );
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(out.trim())
            .unwrap()
    };
    let stem = config.file_stem().unwrap().to_string_lossy().into_owned();
    let (crt, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&crt, field("client-certificate-data")).unwrap();
    std::fs::write(&key, field("client-key-data")).unwrap();
    (crt, key)
}

/// `curl` to the agent's endpoint with a client certificate: (status, body).
fn agent_get(c: &Cluster, path: &str, (crt, key): &(PathBuf, PathBuf)) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}", "--cert"])
        .arg(crt)
        .arg("--key")
        .arg(key)
        .arg(format!("https://127.0.0.1:{}{path}", c.kubelet_port))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_string(), body.to_string())
}

#[test]
fn a_node_reaches_only_what_its_pods_need() {
    let c = Cluster::start(Options::default());
    let node = c.node();
    let dir = tempfile::tempdir().unwrap();
    c.kubectl(&["create", "namespace", "na"]);
    c.kubectl(&[
        "-n",
        "na",
        "create",
        "secret",
        "generic",
        "mine",
        "--from-literal=k=v",
    ]);
    c.kubectl(&[
        "-n",
        "na",
        "create",
        "secret",
        "generic",
        "theirs",
        "--from-literal=k=v",
    ]);
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: na}
spec:
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "echo hello from web; sleep 3600"]
    volumeMounts: [{name: s, mountPath: /s}]
  volumes: [{name: s, secret: {secretName: mine}}]
---
apiVersion: v1
kind: Pod
metadata: {name: elsewhere, namespace: na}
spec:
  nodeName: ghost
  containers: [{name: main, image: busybox}]
"#,
    );
    wait_for("pod web running", Duration::from_secs(120), || {
        (c.kubectl(&[
            "-n",
            "na",
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.status.phase}",
        ]) == "Running")
            .then_some(())
    });
    // The real agent (same user as `this_node` below) got its pod running
    // without a refusal; the refusals that follow are the test's own.
    c.assert_no_component_refused();

    let this_node = mint(
        &c,
        dir.path(),
        &format!("system:node:{node}"),
        &["system:nodes"],
    );
    let other_node = mint(&c, dir.path(), "system:node:ghost", &["system:nodes"]);

    // Reads follow the pods bound to the node.
    allowed(&this_node, &["-n", "na", "get", "secret", "mine"]);
    refused(
        &this_node,
        &["-n", "na", "get", "secret", "theirs"],
        &format!(
            r#"secrets "theirs" is forbidden: User "system:node:{node}" cannot get resource "secrets" in API group "" in the namespace "na""#
        ),
    );
    refused(
        &this_node,
        &["-n", "na", "get", "secrets"],
        "cannot list resource \"secrets\"",
    );
    refused(
        &other_node,
        &["-n", "na", "get", "secret", "mine"],
        r#"User "system:node:ghost" cannot get resource "secrets""#,
    );
    // What the static node rules allow.
    allowed(&this_node, &["get", "pods", "-A"]);

    // NodeRestriction.
    refused(
        &this_node,
        &[
            "label",
            "node",
            &node,
            "node-restriction.kubernetes.io/pool=a",
        ],
        "is not allowed to modify labels: node-restriction.kubernetes.io/pool",
    );
    refused(
        &this_node,
        &["taint", "node", &node, "dedicated=x:NoSchedule"],
        &format!("node \"{node}\" is not allowed to modify taints"),
    );
    allowed(
        &this_node,
        &["label", "node", &node, "example.com/tier=web"],
    );
    refused(
        &other_node,
        &["label", "node", &node, "example.com/tier=db", "--overwrite"],
        &format!("node \"ghost\" is not allowed to modify node \"{node}\""),
    );
    refused(
        &this_node,
        &["-n", "na", "delete", "pod", "elsewhere", "--wait=false"],
        &format!("node \"{node}\" can only delete pods with spec.nodeName set to itself"),
    );

    // Tokens only for its pods' ServiceAccounts, bound to its own pods.
    allowed(
        &this_node,
        &[
            "-n",
            "na",
            "create",
            "token",
            "default",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "web",
        ],
    );
    refused(
        &this_node,
        &[
            "-n",
            "na",
            "create",
            "token",
            "default",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "elsewhere",
        ],
        "node requested token bound to a pod scheduled on a different node",
    );
    refused(
        &this_node,
        &["-n", "na", "create", "token", "default"],
        "node requested token not bound to a pod",
    );
    refused(
        &other_node,
        &[
            "-n",
            "na",
            "create",
            "token",
            "default",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "web",
        ],
        // The Node authorizer lets ghost ask (its pod `elsewhere` uses
        // `default` too); NodeRestriction refuses the binding.
        "node requested token bound to a pod scheduled on a different node",
    );

    // The agent's endpoint asks the API server about each caller.
    let jane = cert_files(&mint(&c, dir.path(), "jane", &["devs"]), dir.path());
    let (code, body) = agent_get(&c, "/containerLogs/na/web/main", &jane);
    assert_eq!(code, "403", "{body}");
    assert!(
        body.contains("Forbidden (user=jane, verb=get, resource=nodes, subresource(s)=[proxy])"),
        "{body}"
    );
    c.kubectl(&[
        "create",
        "clusterrole",
        "node-proxy",
        "--verb=get",
        "--resource=nodes/proxy",
    ]);
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "ops-node-proxy",
        "--clusterrole=node-proxy",
        "--user=ops",
    ]);
    let ops = cert_files(&mint(&c, dir.path(), "ops", &[]), dir.path());
    // The binding reaches the authorizer through the watch cache.
    let body = wait_for("ops to read the logs", Duration::from_secs(30), || {
        let (code, body) = agent_get(&c, "/containerLogs/na/web/main", &ops);
        (code == "200").then_some(body)
    });
    assert!(body.contains("hello from web"), "{body}");

    c.kubectl(&[
        "-n",
        "na",
        "delete",
        "pod",
        "elsewhere",
        "--force",
        "--grace-period=0",
    ]);
}
