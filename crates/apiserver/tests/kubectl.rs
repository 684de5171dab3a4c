//! End-to-end: the real kubectl binaries (1.30, 1.32, 1.33) against an API
//! server started in this process.

mod support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use support::{TestServer, VIEWER_TOKEN};

fn configmap(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n")
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);

    let version = k.ok(&["version"]).await;
    assert!(
        version.contains("Server Version: v1.33.0-skiff"),
        "{version}"
    );

    let namespaces = k.ok(&["get", "namespaces"]).await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(namespaces.contains(ns), "{namespaces}");
    }

    let created = k
        .run_stdin(
            &["create", "-f", "-", "--validate=false"],
            &configmap("demo"),
        )
        .await;
    assert!(created.status.success(), "{created:?}");
    assert!(String::from_utf8_lossy(&created.stdout).contains("configmap/demo created"));
    let again = k
        .run_stdin(
            &["create", "-f", "-", "--validate=false"],
            &configmap("demo"),
        )
        .await;
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("Error from server (AlreadyExists)"), "{err}");
    assert!(err.contains("configmaps \"demo\" already exists"), "{err}");

    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "configmap", "demo", "-o", "json"]).await).unwrap();
    assert_eq!(json["data"]["a"], "b");
    assert_eq!(json["metadata"]["namespace"], "default");
    assert!(json["metadata"]["resourceVersion"]
        .as_str()
        .is_some_and(|rv| !rv.is_empty()));
    assert!(json["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    let yaml = k.ok(&["get", "cm", "demo", "-o", "yaml"]).await;
    assert!(yaml.contains("name: demo"), "{yaml}");

    // get -w sees a change made after it started.
    let mut watch = k
        .command(&["get", "configmaps", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let seen = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("configmap/later"))
    });
    // The first line (existing objects) arrives before the change.
    k.run_stdin(
        &["create", "-f", "-", "--validate=false"],
        &configmap("later"),
    )
    .await;
    let seen = tokio::time::timeout(Duration::from_secs(60), seen).await;
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        matches!(seen, Ok(Ok(Some(_)))),
        "kubectl get -w never printed the new configmap"
    );

    let deleted = k.ok(&["delete", "configmap", "demo", "--wait"]).await;
    assert!(deleted.contains("configmap \"demo\" deleted"), "{deleted}");
    let err = k.fails(&["get", "configmap", "demo"]).await;
    assert!(
        err.contains("Error from server (NotFound): configmaps \"demo\" not found"),
        "{err}"
    );

    let bad = k
        .run_stdin(
            &["create", "-f", "-", "--validate=false"],
            &configmap("Bad_Name"),
        )
        .await;
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("The ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"),
        "{err}"
    );

    // Pods and nodes as tables, describe with events, event field selectors.
    let objects = r#"apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {node-role.kubernetes.io/control-plane: ""}}
status:
  conditions: [{type: Ready, status: "True"}]
  nodeInfo: {kubeletVersion: v1.33.0}
"#;
    let created = k
        .run_stdin(&["create", "-f", "-", "--validate=false"], objects)
        .await;
    assert!(created.status.success(), "{created:?}");
    let pods = k.ok(&["get", "pods"]).await;
    let header: Vec<&str> = pods.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    let row: Vec<&str> = pods.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "0/1", "Pending", "0"]);
    let wide = k.ok(&["get", "pods", "-o", "wide", "--show-labels"]).await;
    assert!(
        wide.lines()
            .next()
            .unwrap()
            .contains("NOMINATED NODE   READINESS GATES   LABELS"),
        "{wide}"
    );
    assert!(wide.contains("app=web"), "{wide}");
    let all_ns = k.ok(&["get", "pods", "-A"]).await;
    assert!(all_ns.starts_with("NAMESPACE"), "{all_ns}");
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.contains("n1     Ready    control-plane"), "{nodes}");

    let uid = k
        .ok(&["get", "pod", "web", "-o", "jsonpath={.metadata.uid}"])
        .await;
    let event = format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: web.1}}\n\
         involvedObject: {{kind: Pod, name: web, namespace: default, uid: {uid}, apiVersion: v1}}\n\
         reason: Scheduled\nmessage: Successfully assigned default/web to n1\ntype: Normal\n\
         source: {{component: default-scheduler}}\ncount: 1\n"
    );
    let created = k
        .run_stdin(&["create", "-f", "-", "--validate=false"], &event)
        .await;
    assert!(created.status.success(), "{created:?}");
    let node_event = "apiVersion: v1\nkind: Event\nmetadata: {name: n1.1}\n\
        involvedObject: {kind: Node, name: n1, uid: n1}\nreason: NodeReady\n\
        message: Node n1 status is now NodeReady\ntype: Normal\nsource: {component: kubelet}\n";
    let created = k
        .run_stdin(&["create", "-f", "-", "--validate=false"], node_event)
        .await;
    assert!(created.status.success(), "{created:?}");
    let described = k.ok(&["describe", "pod", "web"]).await;
    assert!(
        described.contains("Successfully assigned default/web to n1"),
        "{described}"
    );
    assert!(
        described.contains("node.kubernetes.io/not-ready:NoExecute op=Exists for 300s"),
        "{described}"
    );
    let described = k.ok(&["describe", "node", "n1"]).await;
    assert!(
        described.contains("Roles:              control-plane"),
        "{described}"
    );
    let selected = k
        .ok(&["get", "events", "--field-selector", "reason=Scheduled"])
        .await;
    assert!(
        selected.contains("pod/web") && !selected.contains("NodeReady"),
        "{selected}"
    );
    let selected = k
        .ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=Node,type=Normal",
        ])
        .await;
    assert!(
        selected.contains("NodeReady") && !selected.contains("pod/web"),
        "{selected}"
    );
    let v1 = k
        .ok(&[
            "get",
            "events.v1.events.k8s.io",
            "web.1",
            "-o",
            "jsonpath={.note}",
        ])
        .await;
    assert_eq!(v1, "Successfully assigned default/web to n1");

    // Authentication and authorization.
    let anonymous = support::Kubectl {
        kubeconfig: server.anonymous_kubeconfig(),
        ..server.kubectl(minor)
    };
    // No credentials at all: kubectl would prompt, so ask with curl.
    let curl = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(server.dir.path().join("pki/ca.crt"))
        .arg(format!("{}/api/v1/namespaces/default/pods", server.url))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "401");
    let err = anonymous
        .fails(&["get", "pods", "--token=not-a-token"])
        .await;
    assert!(err.contains("Unauthorized"), "{err}");
    let err = anonymous
        .fails(&["get", "pods", &format!("--token={VIEWER_TOKEN}")])
        .await;
    assert!(err.contains("Forbidden"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_32() {
    scenario(32).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33() {
    scenario(33).await;
}
