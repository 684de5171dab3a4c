//! End-to-end: kubectl's `create <kind>` generators (1.32 and 1.33 send
//! their bodies as `application/vnd.kubernetes.protobuf`) against an API
//! server started in this process; the stored objects must be what the
//! same command produces upstream.

mod support;

use serde_json::Value;
use support::TestServer;

async fn get_json(k: &support::Kubectl, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&all).await).expect("kubectl printed JSON")
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);

    let out = k.ok(&["create", "namespace", "demo"]).await;
    assert!(out.contains("namespace/demo created"), "{out}");
    let ns = get_json(&k, &["namespace", "demo"]).await;
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");

    let out = k
        .ok(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=0",
            "--port=8080",
            "-n",
            "demo",
        ])
        .await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let d = get_json(&k, &["deployment", "web", "-n", "demo"]).await;
    // A pointer set to zero survives; Go's zero non-pointer fields do not.
    assert_eq!(d["spec"]["replicas"], 0, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "web", "{d}");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "nginx:1.27", "{c}");
    assert_eq!(c["ports"][0]["containerPort"], 8080, "{c}");
    assert!(c.get("stdin").is_none() && c.get("tty").is_none(), "{c}");
    // Server defaults still apply to what protobuf left unset.
    assert_eq!(c["imagePullPolicy"], "IfNotPresent", "{c}");
    assert!(d["metadata"]["creationTimestamp"].is_string(), "{d}");

    k.ok(&[
        "create",
        "configmap",
        "cm",
        "--from-literal=a=b",
        "--from-literal=empty=",
        "-n",
        "demo",
    ])
    .await;
    let cm = get_json(&k, &["configmap", "cm", "-n", "demo"]).await;
    assert_eq!(
        cm["data"],
        serde_json::json!({"a": "b", "empty": ""}),
        "{cm}"
    );

    k.ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=password=hunter2",
        "-n",
        "demo",
    ])
    .await;
    let s = get_json(&k, &["secret", "s", "-n", "demo"]).await;
    assert_eq!(s["data"]["password"], "aHVudGVyMg==", "{s}");
    assert_eq!(s["type"], "Opaque", "{s}");

    k.ok(&[
        "create",
        "service",
        "clusterip",
        "svc",
        "--tcp=80:8080",
        "-n",
        "demo",
    ])
    .await;
    let svc = get_json(&k, &["service", "svc", "-n", "demo"]).await;
    let port = &svc["spec"]["ports"][0];
    assert_eq!(port["port"], 80, "{svc}");
    assert_eq!(port["targetPort"], 8080, "{svc}");
    assert!(port.get("nodePort").is_none(), "{svc}");

    k.ok(&[
        "create",
        "job",
        "j",
        "--image=busybox",
        "-n",
        "demo",
        "--",
        "echo",
        "hi",
    ])
    .await;
    let job = get_json(&k, &["job", "j", "-n", "demo"]).await;
    let jc = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(jc["command"], serde_json::json!(["echo", "hi"]), "{job}");

    k.ok(&["create", "serviceaccount", "robot", "-n", "demo"])
        .await;
    get_json(&k, &["serviceaccount", "robot", "-n", "demo"]).await;

    // Bad input still gets the upstream error, from a protobuf body.
    let err = k.fails(&["create", "namespace", "Not_Valid"]).await;
    assert!(err.contains("Invalid value: \"Not_Valid\""), "{err}");
    let err = k.fails(&["create", "configmap", "cm", "-n", "demo"]).await;
    assert!(err.contains("configmaps \"cm\" already exists"), "{err}");
}

#[tokio::test]
async fn kubectl_1_33_create_sends_protobuf() {
    scenario(33).await;
}

#[tokio::test]
async fn kubectl_1_32_create_sends_protobuf() {
    scenario(32).await;
}
