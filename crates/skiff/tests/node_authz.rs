//! A node's credentials reach only what its pods need, end to end on a
//! real `skiff server`: a certificate for `system:node:<this node>` reads
//! the Secret its pod mounts but not another one, nor a list; another
//! node's certificate reads neither; NodeRestriction refuses a restricted
//! label, a taint change, a change to another node and deleting a pod
//! bound elsewhere; and the agent's own HTTPS endpoint lets a user in
//! only when a SubjectAccessReview for `nodes/proxy` says so.

mod cluster;

use std::path::Path;
use std::time::Duration;

use cluster::{cert_files, kubectl_as, wait_for, Cluster, Options};

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

    let this_node = c.mint(
        dir.path(),
        &format!("system:node:{node}"),
        &["system:nodes"],
    );
    let other_node = c.mint(dir.path(), "system:node:ghost", &["system:nodes"]);

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
    let jane = cert_files(&c.mint(dir.path(), "jane", &["devs"]), dir.path());
    let (code, body) = c.agent_get("/containerLogs/na/web/main", &jane);
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
    let ops = cert_files(&c.mint(dir.path(), "ops", &[]), dir.path());
    // The binding reaches the authorizer through the watch cache.
    let body = wait_for("ops to read the logs", Duration::from_secs(30), || {
        let (code, body) = c.agent_get("/containerLogs/na/web/main", &ops);
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
