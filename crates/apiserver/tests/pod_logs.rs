//! `pods/log` at the API server alone (no node agent; the whole path with
//! one is in skiff-node's `logs_server` test): PodLogOptions validation,
//! an unreachable agent in upstream's words, authorization as a pod
//! subresource, and discovery listing it.

mod support;

use support::{TestServer, VIEWER_TOKEN};

fn pod(name: &str, node: Option<&str>) -> String {
    let node = node
        .map(|n| format!("  nodeName: {n}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{node}  containers:\n  - name: app\n    image: busybox\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_logs_without_an_agent() {
    let server = TestServer::start().await;
    let k = server.kubectl(33);
    // A node whose agent port nothing listens on.
    let port = skiff_testkit::free_port().expect("free port");
    let node = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 127.0.0.1\n  daemonEndpoints:\n    kubeletEndpoint:\n      Port: {port}\n"
    );
    let out = k
        .run_stdin(&["create", "-f", "-", "--validate=false"], &node)
        .await;
    assert!(out.status.success(), "{out:?}");
    let status = format!(
        r#"{{"status":{{"addresses":[{{"type":"InternalIP","address":"127.0.0.1"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":{port}}}}}}}}}"#
    );
    k.ok(&[
        "patch",
        "node",
        "n1",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ])
    .await;
    for (name, node) in [("web", Some("n1")), ("pending", None)] {
        let out = k
            .run_stdin(&["create", "-f", "-", "--validate=false"], &pod(name, node))
            .await;
        assert!(out.status.success(), "{out:?}");
    }

    let err = k.fails(&["logs", "web"]).await;
    assert_eq!(
        err.trim(),
        format!(
            "Error from server: Get \"https://127.0.0.1:{port}/containerLogs/default/web/app\": dial tcp 127.0.0.1:{port}: connect: connection refused"
        )
    );
    // Not on a node yet: nothing to show, as upstream.
    assert_eq!(k.ok(&["logs", "pending"]).await, "");

    let raw = |query: &str| format!("/api/v1/namespaces/default/pods/web/log?{query}");
    let err = k.fails(&["get", "--raw", &raw("tailLines=-1")]).await;
    assert_eq!(
        err.trim(),
        "The PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
    );
    let err = k.fails(&["get", "--raw", &raw("limitBytes=0")]).await;
    assert_eq!(
        err.trim(),
        "The PodLogOptions \"web\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"
    );
    let err = k.fails(&["get", "--raw", &raw("tailLines=x")]).await;
    assert_eq!(
        err.trim(),
        "Error from server (BadRequest): strconv.ParseInt: parsing \"x\": invalid syntax"
    );
    let err = k.fails(&["get", "--raw", &raw("container=db")]).await;
    assert_eq!(
        err.trim(),
        "Error from server (BadRequest): container db is not valid for pod web"
    );
    let err = k
        .fails(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/nothere/log",
        ])
        .await;
    assert_eq!(
        err.trim(),
        "Error from server (NotFound): pods \"nothere\" not found"
    );

    // Authorization: a pod subresource, verb get.
    let anonymous = support::Kubectl {
        kubeconfig: server.anonymous_kubeconfig(),
        ..server.kubectl(33)
    };
    let err = anonymous
        .fails(&["get", "--raw", &raw(""), &format!("--token={VIEWER_TOKEN}")])
        .await;
    assert_eq!(
        err.trim(),
        "Error from server (Forbidden): pods \"web\" is forbidden: User \"viewer\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"default\""
    );

    // Discovery lists it as upstream does.
    let resources = k.ok(&["get", "--raw", "/api/v1"]).await;
    let list: serde_json::Value = serde_json::from_str(&resources).expect("APIResourceList");
    let log = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "pods/log")
        .expect("pods/log listed");
    assert_eq!(log["kind"], "Pod");
    assert_eq!(log["verbs"], serde_json::json!(["get"]));
}
