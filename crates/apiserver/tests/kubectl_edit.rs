//! End-to-end: how people change a cluster with kubectl 1.32 and 1.33 —
//! apply (client- and server-side), taint, cordon, label, annotate, scale,
//! drain's eviction, explain and strict field validation.

mod support;

use support::TestServer;

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: ap, labels: {app: ap}}
spec:
  containers: [{name: c, image: \"busybox:1.36\"}]
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: d1}
spec:
  replicas: 1
  selector: {matchLabels: {app: d1}}
  template:
    metadata: {labels: {app: d1}}
    spec: {containers: [{name: c, image: busybox}]}
";

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);
    let stdin_ok = |args: &'static [&'static str], input: String| {
        let k = &k;
        async move {
            let out = k.run_stdin(args, &input).await;
            assert!(out.status.success(), "kubectl {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };

    // apply with default (OpenAPI-backed) validation, change, apply again.
    assert!(stdin_ok(&["apply", "-f", "-"], POD.into())
        .await
        .contains("pod/ap created"));
    let changed = POD.replace("busybox:1.36", "busybox:1.37");
    assert!(stdin_ok(&["apply", "-f", "-"], changed.clone())
        .await
        .contains("pod/ap configured"));
    let image = k
        .ok(&[
            "get",
            "pod",
            "ap",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "busybox:1.37");
    let last_applied = k
        .ok(&[
            "get",
            "pod",
            "ap",
            "-o",
            "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}",
        ])
        .await;
    assert!(last_applied.contains("busybox:1.37"), "{last_applied}");

    // create twice.
    let again = k.run_stdin(&["create", "-f", "-"], POD).await;
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("Error from server (AlreadyExists)")
            && err.contains("pods \"ap\" already exists"),
        "{err}"
    );

    // taint twice, untaint one: the list is replaced, not merged.
    stdin_ok(
        &["create", "-f", "-"],
        "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}".into(),
    )
    .await;
    k.ok(&["taint", "node", "n1", "a=1:NoSchedule"]).await;
    k.ok(&["taint", "node", "n1", "b=2:NoSchedule"]).await;
    k.ok(&["taint", "node", "n1", "a-"]).await;
    let taints = k
        .ok(&["get", "node", "n1", "-o", "jsonpath={.spec.taints}"])
        .await;
    assert_eq!(taints, r#"[{"effect":"NoSchedule","key":"b","value":"2"}]"#);

    // cordon and uncordon.
    k.ok(&["cordon", "n1"]).await;
    assert_eq!(
        k.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"])
            .await,
        "true"
    );
    k.ok(&["uncordon", "n1"]).await;
    assert_eq!(
        k.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"])
            .await,
        ""
    );

    // label --overwrite and annotate.
    let err = k.fails(&["label", "pod", "ap", "app=new"]).await;
    assert!(err.contains("already has a value (ap)"), "{err}");
    k.ok(&["label", "pod", "ap", "app=new", "--overwrite"])
        .await;
    k.ok(&["annotate", "pod", "ap", "note=hi"]).await;
    let meta = k
        .ok(&[
            "get",
            "pod",
            "ap",
            "-o",
            "jsonpath={.metadata.labels.app} {.metadata.annotations.note}",
        ])
        .await;
    assert_eq!(meta, "new hi");

    // scale a Deployment and read the Scale back.
    stdin_ok(&["apply", "-f", "-"], DEPLOYMENT.into()).await;
    k.ok(&["scale", "deployment", "d1", "--replicas=3"]).await;
    let scale: serde_json::Value = serde_json::from_str(
        &k.ok(&[
            "get",
            "--raw",
            "/apis/apps/v1/namespaces/default/deployments/d1/scale",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=d1");

    // drain evicts a pod bound to the node.
    let bound = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"bp\"},\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}";
    stdin_ok(&["create", "-f", "-"], bound.into()).await;
    let drained = k
        .ok(&[
            "drain",
            "n1",
            "--force",
            "--grace-period=0",
            "--timeout=60s",
        ])
        .await;
    assert!(
        drained.contains("pod/bp evicted") && drained.contains("node/n1 drained"),
        "{drained}"
    );
    assert!(k.fails(&["get", "pod", "bp"]).await.contains("NotFound"));

    // delete --wait, then server-side apply creates it again.
    assert!(k
        .ok(&["delete", "pod", "ap", "--wait"])
        .await
        .contains("pod \"ap\" deleted"));
    let applied = stdin_ok(&["apply", "--server-side", "-f", "-"], changed).await;
    assert!(applied.contains("pod/ap serverside-applied"), "{applied}");
    let managers = k
        .ok(&[
            "get",
            "pod",
            "ap",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ])
        .await;
    assert!(managers.contains("kubectl"), "{managers}");

    // explain, from the OpenAPI v3 documents.
    let explained = k.ok(&["explain", "pod.spec.containers.image"]).await;
    assert!(
        explained.contains("FIELD: image <string>") && explained.contains("Container image name"),
        "{explained}"
    );

    // strict field validation, in upstream's words.
    let strict = k
        .run_stdin(&["create", "-f", "-"], "apiVersion: v1\nkind: Pod\nmetadata: {name: sp}\nspec:\n  foo: 1\n  containers: [{name: c, image: busybox}]\n")
        .await;
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(
        err.contains("Error from server (BadRequest): error when creating \"STDIN\": Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.foo\""),
        "{err}"
    );
    // --validate=warn: created, with the finding as a warning.
    let warned = k
        .run_stdin(&["create", "--validate=warn", "-f", "-"], "apiVersion: v1\nkind: Pod\nmetadata: {name: wp}\nspec:\n  foo: 1\n  containers: [{name: c, image: busybox}]\n")
        .await;
    assert!(warned.status.success(), "{warned:?}");
    let err = String::from_utf8_lossy(&warned.stderr);
    assert!(err.contains("Warning: unknown field \"spec.foo\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_32_edits() {
    scenario(32).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33_edits() {
    scenario(33).await;
}
