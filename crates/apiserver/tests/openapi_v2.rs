//! `/openapi/v2` as kube-apiserver 1.33 serves it, and what it is for:
//! kubectl 1.27–1.29 download it (as gnostic protobuf) before `apply`,
//! `create -f` and `explain`, validate `kind: List` manifests against it
//! client-side, and merge lists by its patch extensions; kubectl 1.30 and
//! 1.33 `apply --prune` with their default allowlist need every kind on
//! it served.

mod support;

use std::io::Read;
use std::path::Path;

use axum::body::Body;
use prost_reflect::{DescriptorPool, DynamicMessage};
use serde_json::Value;
use support::TestServer;
use tower::ServiceExt;

const PROTOBUF_ACCEPT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

async fn get(app: &axum::Router, headers: &[(&str, &str)]) -> Answer {
    let mut req = http::Request::builder().uri("/openapi/v2");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

fn header<'a>(a: &'a Answer, name: &str) -> &'a str {
    a.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test]
async fn served_as_json_and_protobuf_with_an_etag_and_gzip() {
    let server = TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");

    let json = get(&app, &[("accept", "application/json")]).await;
    assert_eq!(json.status, 200);
    assert_eq!(header(&json, "content-type"), "application/json");
    let etag = header(&json, "etag").to_string();
    // kube-openapi: the quoted upper-case hex SHA-512 of the JSON.
    assert_eq!(etag.len(), 2 + 128, "{etag}");
    assert!(etag[1..129]
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()));
    let doc: Value = serde_json::from_slice(&json.body).expect("JSON");
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(doc["info"]["title"], "Kubernetes");
    let deployment = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"][0],
        serde_json::json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert_eq!(
        deployment["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    let containers = &doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(
        doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"],
        "int-or-string"
    );
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
    assert!(patch["consumes"]
        .as_array()
        .unwrap()
        .contains(&"application/strategic-merge-patch+json".into()));
    assert!(patch["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query" && p["type"] == "string"));
    // Every reference resolves, as kubectl's parser insists.
    let text = String::from_utf8_lossy(&json.body);
    for r in text.split("\"$ref\":\"#/definitions/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(doc["definitions"].get(name).is_some(), "dangling {name}");
    }

    // The form kubectl asks for: gnostic's Document, with the same ETag.
    let pb = get(&app, &[("accept", PROTOBUF_ACCEPT)]).await;
    assert_eq!(pb.status, 200);
    assert_eq!(header(&pb, "content-type"), PROTOBUF);
    assert_eq!(header(&pb, "etag"), etag);
    let pool = DescriptorPool::decode(
        &include_bytes!(concat!(env!("OUT_DIR"), "/openapiv2-descriptors.pb"))[..],
    )
    .unwrap();
    let desc = pool.get_message_by_name("openapi.v2.Document").unwrap();
    let m = DynamicMessage::decode(desc, &pb.body[..]).expect("a gnostic Document");
    assert_eq!(
        m.get_field_by_name("swagger").unwrap().as_str(),
        Some("2.0")
    );
    let definitions = m.get_field_by_name("definitions").unwrap();
    let count = definitions
        .as_message()
        .and_then(|d| d.get_field_by_name("additional_properties"))
        .and_then(|l| l.as_list().map(<[_]>::len));
    assert_eq!(
        count,
        doc["definitions"].as_object().map(|d| d.len()),
        "every definition is in the protobuf form"
    );

    // Conditional requests, as http.ServeContent answers them.
    let same = get(
        &app,
        &[("accept", PROTOBUF_ACCEPT), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    assert_eq!(header(&same, "etag"), etag);
    let other = get(&app, &[("if-none-match", "\"0123\"")]).await;
    assert_eq!(other.status, 200);
    assert_eq!(header(&other, "content-type"), "application/json");

    // gzip when asked, the same bytes inside.
    let gz = get(
        &app,
        &[("accept", PROTOBUF_ACCEPT), ("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(header(&gz, "content-encoding"), "gzip");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, pb.body);
    let vary: Vec<_> = gz.headers.get_all("vary").iter().collect();
    assert_eq!(vary, ["Accept-Encoding", "Accept"]);

    assert_eq!(get(&app, &[("accept", "text/html")]).await.status, 406);
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: registry.local/web:1
        ports:
        - containerPort: 8080
        env:
        - name: A
          value: \"1\"
";

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: 8080
";

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// kubectl 1.27, 1.28 and 1.29 validate by default: without
/// `--validate=false` they must download `/openapi/v2` (protobuf) first.
#[tokio::test]
async fn kubectl_1_27_to_1_29_apply_and_create_with_validation() {
    let server = TestServer::start().await;
    let dir = server.dir.path();
    let deployment = write(dir, "deployment.yaml", DEPLOYMENT);
    let service = write(dir, "service.yaml", SERVICE);
    let configmap = write(dir, "configmap.yaml", CONFIGMAP);
    let bad = write(
        dir,
        "bad.yaml",
        &DEPLOYMENT.replace("  replicas: 1\n", "  replicas: 1\n  foo: bar\n"),
    );
    // A List is validated by kubectl itself (its kind has no fieldValidation
    // to leave it to the server).
    let bad_list = write(
        dir,
        "bad-list.yaml",
        &format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}",
            DEPLOYMENT
                .replace("  replicas: 1\n", "  replicas: 1\n  foo: bar\n")
                .replace('\n', "\n  ")
                .trim_end()
        ),
    );
    for minor in [27, 28, 29] {
        let k = server.kubectl(minor);
        let ns = format!("v{minor}");
        k.ok(&["create", "namespace", &ns]).await;
        for verb in ["create", "apply"] {
            let ns_verb = format!("{ns}-{verb}");
            k.ok(&["create", "namespace", &ns_verb]).await;
            let out = k
                .ok(&[
                    verb,
                    "-n",
                    &ns_verb,
                    "-f",
                    &deployment,
                    "-f",
                    &service,
                    "-f",
                    &configmap,
                ])
                .await;
            for line in [
                "deployment.apps/web created",
                "service/web created",
                "configmap/settings created",
            ] {
                assert!(out.contains(line), "kubectl 1.{minor} {verb}: {out}");
            }
        }
        // Re-applying changes nothing: the patch kubectl computes with the
        // v2 schema's merge keys is empty.
        let ns_apply = format!("{ns}-apply");
        let out = k
            .ok(&["apply", "-n", &ns_apply, "-f", &deployment, "-f", &service])
            .await;
        assert!(
            out.contains("deployment.apps/web unchanged") && out.contains("service/web unchanged"),
            "kubectl 1.{minor}: {out}"
        );
        // A changed list item is merged by its key (the v2 schema's
        // `x-kubernetes-patch-merge-key`): a variable set since, outside
        // the manifest, stays.
        k.ok(&["set", "env", "-n", &ns_apply, "deployment/web", "B=3"])
            .await;
        let changed = write(
            dir,
            "changed.yaml",
            &DEPLOYMENT.replace("value: \"1\"", "value: \"2\""),
        );
        let out = k.ok(&["apply", "-n", &ns_apply, "-f", &changed]).await;
        assert!(out.contains("deployment.apps/web configured"), "{out}");
        let env = k
            .ok(&[
                "get",
                "deployment",
                "web",
                "-n",
                &ns_apply,
                "-o",
                "jsonpath={.spec.template.spec.containers[0].env}",
            ])
            .await;
        assert_eq!(
            env, r#"[{"name":"A","value":"2"},{"name":"B","value":"3"}]"#,
            "kubectl 1.{minor}"
        );

        // An unknown field: the server supports fieldValidation (the
        // OpenAPI says so), so kubectl leaves it to the server's strict
        // decoding, as against kube-apiserver 1.33.
        let out = k.run(&["apply", "-n", &ns, "-f", &bad]).await;
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains(r#"strict decoding error: unknown field "spec.foo""#),
            "kubectl 1.{minor}: {}",
            stderr(&out)
        );
        // In a List, kubectl's own validation against /openapi/v2 finds it.
        let out = k.run(&["apply", "-n", &ns, "-f", &bad_list]).await;
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains(
                r#"error validating data: ValidationError(Deployment.spec): unknown field "foo" in io.k8s.api.apps.v1.DeploymentSpec"#
            ),
            "kubectl 1.{minor}: {}",
            stderr(&out)
        );
        let out = k.run(&["create", "-n", &ns, "-f", &bad_list]).await;
        assert!(
            stderr(&out).contains("error validating data: ValidationError(Deployment.spec)"),
            "kubectl 1.{minor}: {}",
            stderr(&out)
        );
        // Nothing was made in that namespace.
        let out = k.ok(&["get", "deployments", "-n", &ns, "-o", "name"]).await;
        assert_eq!(out.trim(), "", "kubectl 1.{minor}");
    }
}

/// kubectl 1.27 reads `/openapi/v2` before it explains (its default
/// output then comes from v3); `--output=plaintext-openapiv2` explains
/// from v2 alone.
#[tokio::test]
async fn kubectl_1_27_explains_from_openapi_v2() {
    let server = TestServer::start().await;
    let k = server.kubectl(27);
    let out = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(out.contains("FIELD: replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    let v2 = ["--output=plaintext-openapiv2"];
    let out = k
        .ok(&[&["explain", "deployment.spec.replicas"][..], &v2].concat())
        .await;
    assert!(out.contains("KIND:     Deployment"), "{out}");
    assert!(out.contains("VERSION:  apps/v1"), "{out}");
    assert!(out.contains("FIELD:    replicas <integer>"), "{out}");
    assert!(out.contains("Number of desired pods"), "{out}");
    let out = k
        .ok(&[&["explain", "pods.spec.containers"][..], &v2].concat())
        .await;
    assert!(out.contains("RESOURCE: containers <[]Object>"), "{out}");
    assert!(out.contains("image\t<string>"), "{out}");
    let out = k
        .run(&[&["explain", "deployment.spec.nope"][..], &v2].concat())
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"field "nope" does not exist"#),
        "{}",
        stderr(&out)
    );
}

/// `kubectl apply --prune -l app=x -f dir/` with kubectl's default
/// allowlist (ConfigMap, Endpoints, Namespace, PersistentVolumeClaim,
/// PersistentVolume, Pod, ReplicationController, Secret, Service, Job,
/// CronJob, Ingress, DaemonSet, Deployment, ReplicaSet, StatefulSet):
/// kubectl maps every one of them first, so each must be served.
#[tokio::test]
async fn apply_prune_with_the_default_allowlist() {
    let server = TestServer::start().await;
    for minor in [30, 33] {
        let k = server.kubectl(minor);
        let ns = format!("prune{minor}");
        k.ok(&["create", "namespace", &ns]).await;
        let dir = server.dir.path().join(format!("manifests-{minor}"));
        std::fs::create_dir_all(&dir).unwrap();
        let cm = |name: &str| {
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {{app: x}}\ndata:\n  k: v\n")
        };
        write(&dir, "a.yaml", &cm("a"));
        write(&dir, "b.yaml", &cm("b"));
        let relabel = |text: &str| text.replacen("labels: {app: web}", "labels: {app: x}", 1);
        write(&dir, "web.yaml", &relabel(DEPLOYMENT));
        write(
            &dir,
            "svc.yaml",
            &SERVICE.replace("  name: web\n", "  name: web\n  labels: {app: x}\n"),
        );
        let dir_arg = format!("{}/", dir.display());
        // An object with another label is never pruned.
        k.ok(&[
            "create",
            "configmap",
            "other",
            "--from-literal=k=v",
            "-n",
            &ns,
        ])
        .await;
        let args = ["apply", "-n", &ns, "--prune", "-l", "app=x", "-f", &dir_arg];
        let out = k.run(&args).await;
        assert!(
            out.status.success(),
            "kubectl 1.{minor} apply --prune: {}",
            stderr(&out)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        for line in [
            "configmap/a created",
            "configmap/b created",
            "deployment.apps/web created",
            "service/web created",
        ] {
            assert!(text.contains(line), "kubectl 1.{minor}: {text}");
        }
        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        std::fs::remove_file(dir.join("svc.yaml")).unwrap();
        let out = k.ok(&args).await;
        assert!(
            out.contains("configmap/a unchanged"),
            "kubectl 1.{minor}: {out}"
        );
        assert!(
            out.contains("configmap/b pruned"),
            "kubectl 1.{minor}: {out}"
        );
        assert!(
            out.contains("service/web pruned"),
            "kubectl 1.{minor}: {out}"
        );
        let left = k
            .ok(&["get", "configmaps,services", "-n", &ns, "-o", "name"])
            .await;
        let mut left: Vec<&str> = left
            .lines()
            .filter(|l| !l.contains("kube-root-ca"))
            .collect();
        left.sort_unstable();
        assert_eq!(
            left,
            ["configmap/a", "configmap/other"],
            "kubectl 1.{minor}"
        );
    }
}

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size:
                type: integer
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
              note:
                type: string
                nullable: true
              tags:
                type: array
                items: {type: string}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
";

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: 3
  port: http
  note: null
  tags: [a, b]
  extra: {anything: [1, 2]}
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: t}}
";

/// A custom resource appears in `/openapi/v2` once its CRD is
/// established (a new ETag), and kubectl 1.27 applies it with validation,
/// merges it with a merge patch (the CRD's patch operation does not
/// consume strategic merge patches) and validates it client-side in a List.
#[tokio::test]
async fn custom_resources_appear_in_openapi_v2() {
    let server = TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let before = get(&app, &[]).await;
    let k = server.kubectl(27);
    let dir = server.dir.path();
    let crd = write(dir, "crd.yaml", WIDGET_CRD);
    k.ok(&["apply", "-f", &crd]).await;
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/widgets.example.com",
    ])
    .await;
    let after = get(&app, &[]).await;
    assert_ne!(header(&after, "etag"), header(&before, "etag"));
    let doc: Value = serde_json::from_slice(&after.body).unwrap();
    let (name, widget) = doc["definitions"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, d)| d["x-kubernetes-group-version-kind"][0]["kind"] == "Widget")
        .expect("a Widget definition");
    assert_eq!(
        widget["x-kubernetes-group-version-kind"][0],
        serde_json::json!({"group": "example.com", "kind": "Widget", "version": "v1"}),
        "{name}"
    );
    let spec = &widget["properties"]["spec"];
    // v2's forms, as apiextensions-apiserver publishes them.
    assert!(spec["properties"]["port"].get("anyOf").is_none(), "{spec}");
    assert!(spec["properties"]["note"].get("type").is_none(), "{spec}");
    assert!(spec["properties"]["extra"].get("type").is_none(), "{spec}");
    let patch = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(p, _)| p.ends_with("/widgets/{name}"))
        .map(|(_, item)| item["patch"].clone())
        .expect("the widget path");
    assert!(!patch["consumes"]
        .as_array()
        .unwrap()
        .contains(&"application/strategic-merge-patch+json".into()));

    let widget = write(dir, "widget.yaml", WIDGET);
    let out = k.ok(&["apply", "-f", &widget]).await;
    assert!(out.contains("widget.example.com/w created"), "{out}");
    let out = k.ok(&["apply", "-f", &widget]).await;
    assert!(out.contains("widget.example.com/w unchanged"), "{out}");
    let bigger = write(dir, "bigger.yaml", &WIDGET.replace("size: 3", "size: 4"));
    let out = k.ok(&["apply", "-f", &bigger]).await;
    assert!(out.contains("widget.example.com/w configured"), "{out}");
    let size = k
        .ok(&["get", "widget", "w", "-o", "jsonpath={.spec.size}"])
        .await;
    assert_eq!(size, "4");
    let list = write(
        dir,
        "widgets.yaml",
        &format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}",
            WIDGET
                .replace("name: w\n", "name: w2\n")
                .replace("size: 3\n", "size: 3\n  bogus: 1\n")
                .replace('\n', "\n  ")
                .trim_end()
        ),
    );
    let out = k.run(&["apply", "-f", &list]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"ValidationError(Widget.spec): unknown field "bogus""#),
        "{}",
        stderr(&out)
    );
}
