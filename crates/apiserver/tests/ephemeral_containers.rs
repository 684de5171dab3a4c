//! `pods/ephemeralcontainers` at the API server alone (no node agent; the
//! containers running is crates/skiff/tests/debug.rs): `kubectl debug`'s
//! strategic merge patch from kubectl 1.27 and 1.33, JSON merge and JSON
//! patches, PUT and GET, what the subresource leaves alone (labels, the
//! rest of the spec, status), upstream's 422s, refusal on create and
//! through the pod itself, and discovery listing it.

mod support;

use serde_json::{json, Value};
use support::TestServer;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\nspec:\n  containers:\n  - name: c\n    image: busybox\n";

const URL: &str = "/api/v1/namespaces/default/pods/web/ephemeralcontainers";

/// The pod's ephemeral containers' names.
fn names(pod: &Value) -> Vec<String> {
    pod["spec"]["ephemeralContainers"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|c| c["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_containers_subresource() {
    let server = TestServer::start().await;
    let k33 = server.kubectl(33);
    let k27 = server.kubectl(27);
    let out = k33
        .run_stdin(&["create", "-f", "-", "--validate=false"], POD)
        .await;
    assert!(out.status.success(), "{out:?}");

    // Discovery lists it as upstream does.
    let v1: Value = serde_json::from_str(&k33.ok(&["get", "--raw", "/api/v1"]).await).unwrap();
    let listed = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods/ephemeralcontainers")
        .cloned();
    assert_eq!(
        listed,
        Some(
            json!({"name": "pods/ephemeralcontainers", "singularName": "", "namespaced": true,
                    "kind": "Pod", "verbs": ["get", "patch", "update"]})
        ),
        "{v1}"
    );

    // kubectl debug (no attach: nothing runs here): both kubectls' patches.
    for (k, name) in [(&k27, "dbg-27"), (&k33, "dbg-33")] {
        k.ok(&[
            "debug",
            "web",
            "--image=busybox",
            "--target=c",
            "-c",
            name,
            "--",
            "sleep",
            "3600",
        ])
        .await;
    }
    let pod: Value = serde_json::from_str(&k33.ok(&["get", "--raw", URL]).await).unwrap();
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(names(&pod), ["dbg-27", "dbg-33"]);
    let first = &pod["spec"]["ephemeralContainers"][0];
    assert_eq!(first["targetContainerName"], "c");
    assert_eq!(first["command"], json!(["sleep", "3600"]));
    // Defaulted as a container is.
    assert_eq!(first["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(first["imagePullPolicy"], "Always");

    // A JSON merge patch and a JSON patch through the subresource; what
    // else they say is dropped.
    let merge = json!({
        "metadata": {"labels": {"app": "changed"}},
        "spec": {
            "activeDeadlineSeconds": 5,
            "ephemeralContainers": pod["spec"]["ephemeralContainers"].as_array().unwrap().iter().cloned()
                .chain([json!({"name": "merged", "image": "busybox"})]).collect::<Vec<_>>()
        }
    });
    k33.ok(&[
        "patch",
        "pod",
        "web",
        "--subresource=ephemeralcontainers",
        "--type=merge",
        "-p",
        &merge.to_string(),
    ])
    .await;
    let jsonpatch = r#"[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"jp","image":"busybox"}}]"#;
    k33.ok(&[
        "patch",
        "pod",
        "web",
        "--subresource=ephemeralcontainers",
        "--type=json",
        "-p",
        jsonpatch,
    ])
    .await;
    let pod: Value =
        serde_json::from_str(&k33.ok(&["get", "pod", "web", "-o", "json"]).await).unwrap();
    assert_eq!(names(&pod), ["dbg-27", "dbg-33", "merged", "jp"]);
    assert_eq!(pod["metadata"]["labels"], json!({"app": "web"}));
    assert!(pod["spec"].get("activeDeadlineSeconds").is_none(), "{pod}");

    // A PUT that adds one.
    let mut put = pod.clone();
    put["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "put", "image": "busybox"}));
    let file = server.dir.path().join("put.json");
    std::fs::write(&file, put.to_string()).unwrap();
    let answer = k33
        .ok(&["replace", "--raw", URL, "-f", file.to_str().unwrap()])
        .await;
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(names(&answer), ["dbg-27", "dbg-33", "merged", "jp", "put"]);
    let resource_version = answer["metadata"]["resourceVersion"].clone();

    // Upstream's refusals, whatever the patch type.
    let refused = |args: Vec<String>| {
        let k = &k33;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            k.fails(&args).await
        }
    };
    let patch = |kind: &str, body: String| {
        vec![
            "patch".to_string(),
            "pod".into(),
            "web".into(),
            "--subresource=ephemeralcontainers".into(),
            format!("--type={kind}"),
            "-p".into(),
            body,
        ]
    };
    let removed = refused(patch(
        "json",
        r#"[{"op":"remove","path":"/spec/ephemeralContainers/0"}]"#.into(),
    ))
    .await;
    assert!(
        removed.contains(r#"The Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg-27" may not be removed"#),
        "{removed}"
    );
    let changed = refused(patch(
        "json",
        r#"[{"op":"replace","path":"/spec/ephemeralContainers/1/image","value":"busybox:1"}]"#
            .into(),
    ))
    .await;
    assert!(
        changed.contains(r#"spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg-33" may not be changed"#)
            && changed.contains("busybox:1"),
        "{changed}"
    );
    // A plain strategic merge patch puts a new item first (upstream's
    // normalizeElementOrder); kubectl debug's keeps the order with
    // $setElementOrder.
    let strategic = |c: Value| json!({"spec": {"ephemeralContainers": [c]}}).to_string();
    for (container, want) in [
        (
            json!({"name": "p", "image": "busybox", "ports": [{"containerPort": 80}]}),
            "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
        ),
        (
            json!({"name": "r", "image": "busybox", "readinessProbe": {"exec": {"command": ["true"]}}}),
            "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
        ),
        (
            json!({"name": "l", "image": "busybox", "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}),
            "spec.ephemeralContainers[0].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
        ),
        (
            json!({"name": "q", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}),
            "spec.ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container",
        ),
        (
            json!({"name": "c", "image": "busybox"}),
            r#"spec.ephemeralContainers[0].name: Duplicate value: "c""#,
        ),
        (
            json!({"name": "t", "image": "busybox", "targetContainerName": "nope"}),
            r#"spec.ephemeralContainers[0].targetContainerName: Not found: "nope""#,
        ),
    ] {
        let said = refused(patch("strategic", strategic(container))).await;
        assert!(said.contains(want), "{want}: {said}");
    }
    // kubectl debug's own patch, refused the same way.
    for k in [&k27, &k33] {
        let said = k
            .fails(&[
                "debug",
                "web",
                "--image=busybox",
                "--target=nope",
                "-c",
                "x",
            ])
            .await;
        assert!(
            said.contains(r#"Pod "web" is invalid: spec.ephemeralContainers[5].targetContainerName: Not found: "nope""#),
            "{said}"
        );
    }
    // Nothing refused was written.
    let now: Value = serde_json::from_str(&k33.ok(&["get", "--raw", URL]).await).unwrap();
    assert_eq!(now["metadata"]["resourceVersion"], resource_version);

    // Not through the pod itself, nor on create.
    let mut more = now.clone();
    more["spec"]["ephemeralContainers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "direct", "image": "busybox"}));
    std::fs::write(&file, more.to_string()).unwrap();
    let said = k33.fails(&["replace", "-f", file.to_str().unwrap()]).await;
    assert!(
        said.contains("Forbidden: pod updates may not change fields other than"),
        "{said}"
    );
    let born = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: born\nspec:\n  containers:\n  - name: c\n    image: busybox\n  ephemeralContainers:\n  - name: e\n    image: busybox\n";
    let out = k33
        .run_stdin(&["create", "-f", "-", "--validate=false"], born)
        .await;
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && said.contains(r#"The Pod "born" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"#),
        "{said}"
    );
    // A missing pod is the pod's 404 (kubectl tells it apart from a
    // disabled subresource by the name in the Status).
    let said = k33.fails(&["debug", "gone", "--image=busybox"]).await;
    assert!(said.contains(r#"pods "gone" not found"#), "{said}");
}
