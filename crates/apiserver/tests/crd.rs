//! CustomResourceDefinitions end to end: the real kubectl (1.27, 1.30, 1.33)
//! applies a CRD, waits for Established, applies, lists (printer
//! columns), describes, scales, patches and deletes custom objects,
//! reads them in a second version (`None` conversion), sees defaults,
//! pruning and schema validation in upstream's words, and deleting the CRD
//! removes its objects and stops serving it; names conflicts set
//! NamesAccepted False; discovery and OpenAPI carry the resource; a kube-rs
//! client (DynamicObject, cluster scope) creates, lists, watches, patches
//! (merge, JSON, apply), writes status and deletes; the Python dynamic
//! client does the same (tests/python/crd_checks.py).

mod support;

use std::future::Future;
use std::process::Output;
use std::time::Duration;

use support::{fails_text as fails, ok, run, text, Kubectl, TestServer};

const TIMEOUT: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in {TIMEOUT:?}"))
}

async fn apply(k: &Kubectl, args: &[&str], yaml: &str) -> Output {
    let mut all = vec!["--request-timeout=30s", "apply", "-f", "-"];
    all.extend_from_slice(args);
    within("kubectl apply", k.run_stdin(&all, yaml)).await
}

fn crd(group: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.{group}
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec:
                type: string
              image:
                type: string
              replicas:
                type: integer
                minimum: 1
                maximum: 10
                default: 1
          status:
            type: object
            properties:
              replicas:
                type: integer
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#
    )
}

fn crontab(group: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: {group}/v1\nkind: CronTab\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}"
    )
}

/// The cells of `row` under the columns of `header`, as kubectl's tab
/// writer lines them up.
fn cells(header: &str, row: &str, names: &[&str]) -> Vec<String> {
    let starts: Vec<usize> = names
        .iter()
        .scan(0, |from, name| {
            let at = *from + header[*from..].find(name).expect("column in header");
            *from = at + name.len();
            Some(at)
        })
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &start)| {
            let end = starts.get(i + 1).copied().unwrap_or(row.len());
            row.get(start..end.min(row.len()))
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect()
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);
    let group = format!("k{minor}.stable.example.com");
    let crd_name = format!("crontabs.{group}");

    let out = apply(&k, &[], &crd(&group)).await;
    assert!(out.status.success(), "{}", text(&out));
    ok(
        &k,
        &[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            &format!("crd/{crd_name}"),
        ],
    )
    .await;
    let conditions = ok(
        &k,
        &[
            "get",
            "crd",
            &crd_name,
            "-o",
            "jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason};{end}|{.status.acceptedNames.kind}|{.status.storedVersions}",
        ],
    )
    .await;
    assert_eq!(
        conditions,
        "NamesAccepted=True/NoConflicts;Established=True/InitialNamesAccepted;|CronTab|[\"v1\"]"
    );
    // Its group is served: a Local APIService names it (upstream's
    // crdregistration controller).
    let apiservices = ok(&k, &["get", "apiservices"]).await;
    assert!(
        apiservices.contains(&format!("v1.{group}")),
        "{apiservices}"
    );
    // The CRD's own table: NAME, CREATED AT.
    let table = ok(&k, &["get", "crds"]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("NAME") && header.contains("CREATED AT"),
        "{table}"
    );
    assert!(table.contains(&crd_name), "{table}");

    // Defaults applied; unknown fields pruned (kubectl's Strict field
    // validation refuses them, as upstream).
    let strict = apply(
        &k,
        &[],
        &crontab(&group, "pruned", "  cronSpec: '* * * * */5'\n  bogus: 1\n"),
    )
    .await;
    assert!(!strict.status.success());
    assert!(
        text(&strict).contains("unknown field \"spec.bogus\""),
        "{}",
        text(&strict)
    );
    let out = apply(
        &k,
        &["--validate=false"],
        &crontab(&group, "pruned", "  cronSpec: '* * * * */5'\n  bogus: 1\n"),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let spec = ok(&k, &["get", "crontab", "pruned", "-o", "jsonpath={.spec}"]).await;
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("spec JSON");
    assert_eq!(
        spec,
        serde_json::json!({"cronSpec": "* * * * */5", "replicas": 1})
    );

    // A schema violation, in upstream's words.
    let bad = apply(
        &k,
        &[],
        &crontab(&group, "bad", "  cronSpec: x\n  replicas: 20\n"),
    )
    .await;
    assert!(!bad.status.success());
    assert!(
        text(&bad).contains(
            "The CronTab \"bad\" is invalid: spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10"
        ),
        "{}",
        text(&bad)
    );

    // Printer columns, short name.
    let out = apply(
        &k,
        &[],
        &crontab(
            &group,
            "web",
            "  cronSpec: '*/1 * * * *'\n  image: nginx\n  replicas: 3\n",
        ),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let table = ok(&k, &["get", "ct"]).await;
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let row = lines
        .find(|l| l.starts_with("web "))
        .unwrap_or_else(|| panic!("no web row: {table}"));
    let columns = ["NAME", "SPEC", "REPLICAS", "AGE"];
    let got = cells(header, row, &columns);
    assert_eq!(&got[..3], &["web", "*/1 * * * *", "3"], "{table}");
    assert!(!got[3].is_empty(), "{table}");

    let described = ok(&k, &["describe", "crontab", "web"]).await;
    assert!(
        described.contains("Name:") && described.contains("web"),
        "{described}"
    );
    assert!(
        described.contains("Cron Spec:") || described.contains("cronSpec"),
        "{described}"
    );

    // The second version, None conversion: apiVersion rewritten.
    let v1beta1 = ok(
        &k,
        &[
            "get",
            &format!("crontabs.v1beta1.{group}"),
            "web",
            "-o",
            "jsonpath={.apiVersion}",
        ],
    )
    .await;
    assert_eq!(v1beta1, format!("{group}/v1beta1"));
    let warned = run(&k, &["get", &format!("crontabs.v1beta1.{group}"), "web"]).await;
    assert!(
        String::from_utf8_lossy(&warned.stderr)
            .contains(&format!("Warning: {group}/v1beta1 CronTab is deprecated")),
        "{}",
        text(&warned)
    );

    // Scale and status subresources.
    ok(&k, &["scale", "crontab", "web", "--replicas=5"]).await;
    let replicas = ok(
        &k,
        &["get", "crontab", "web", "-o", "jsonpath={.spec.replicas}"],
    )
    .await;
    assert_eq!(replicas, "5");
    ok(
        &k,
        &[
            "patch",
            "crontab",
            "web",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":4}}"#,
        ],
    )
    .await;
    let scale = ok(
        &k,
        &[
            "get",
            "--raw",
            &format!("/apis/{group}/v1/namespaces/default/crontabs/web/scale"),
        ],
    )
    .await;
    let scale: serde_json::Value = serde_json::from_str(&scale).expect("scale JSON");
    assert_eq!(scale["spec"]["replicas"], 5, "{scale}");
    assert_eq!(scale["status"]["replicas"], 4, "{scale}");
    // Status written through the main resource is ignored.
    ok(
        &k,
        &[
            "patch",
            "crontab",
            "web",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":9},"spec":{"image":"nginx:2"}}"#,
        ],
    )
    .await;
    let both = ok(
        &k,
        &[
            "get",
            "crontab",
            "web",
            "-o",
            "jsonpath={.status.replicas}/{.spec.image}",
        ],
    )
    .await;
    assert_eq!(both, "4/nginx:2");
    // No strategic merge patch for custom resources.
    let smp = fails(
        &k,
        &[
            "patch",
            "crontab",
            "web",
            "--type=strategic",
            "-p",
            r#"{"spec":{"image":"x"}}"#,
        ],
    )
    .await;
    assert!(
        smp.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{smp}"
    );
    // kubectl explain reads the CRD's schema from /openapi/v3.
    let explained = ok(&k, &["explain", "crontab.spec.replicas"]).await;
    assert!(
        explained.contains("FIELD: replicas <integer>")
            || explained.contains("FIELD:    replicas <integer>"),
        "{explained}"
    );
    // Field selector on metadata.name.
    let named = ok(
        &k,
        &[
            "get",
            "crontabs",
            "--field-selector",
            "metadata.name=web",
            "-o",
            "name",
        ],
    )
    .await;
    assert_eq!(named.trim(), "crontab.".to_string() + &group + "/web");

    // `kubectl get --watch`: the table's rows as objects come and go.
    watch_sees_new_object(&k, &group).await;

    // Server-side apply.
    let out = apply(
        &k,
        &["--server-side", "--field-manager=test"],
        &crontab(&group, "ssa", "  cronSpec: '0 * * * *'\n"),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let managers = ok(
        &k,
        &[
            "get",
            "crontab",
            "ssa",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
    )
    .await;
    assert!(managers.contains("test"), "{managers}");

    ok(&k, &["delete", "crontab", "pruned"]).await;
    let names = ok(&k, &["get", "crontabs", "-o", "name"]).await;
    assert!(!names.contains("/pruned"), "{names}");

    // Deleting a namespace takes its custom objects (the namespace
    // controller deletes them; kubectl waits for the namespace to go).
    let _controllers = server.namespace_controller().await;
    ok(&k, &["create", "namespace", "doomed"]).await;
    let out = apply(
        &k,
        &[],
        &crontab(&group, "inside", "  cronSpec: x\n")
            .replace("namespace: default", "namespace: doomed"),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    ok(&k, &["delete", "namespace", "doomed", "--timeout=30s"]).await;
    let inside = server
        .store
        .list(
            &format!("/registry/{group}/crontabs/doomed/"),
            Default::default(),
        )
        .await
        .expect("list store");
    assert!(inside.items.is_empty(), "objects left in doomed");

    // Deleting the CRD takes its objects and stops serving it.
    ok(&k, &["delete", "crd", &crd_name, "--timeout=30s"]).await;
    let gone = fails(&k, &["get", &format!("crontabs.{group}")]).await;
    assert!(
        gone.contains("the server doesn't have a resource type"),
        "{gone}"
    );
    let left = server
        .store
        .list(&format!("/registry/{group}/"), Default::default())
        .await
        .expect("list store");
    assert!(left.items.is_empty(), "objects left: {}", left.items.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_kubectl_1_33() {
    scenario(33).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_kubectl_1_27() {
    scenario(27).await;
}

/// A cluster-scoped CRD through kube-rs: typed CRD create and
/// `await_condition(is_crd_established)`, then DynamicObject create, get,
/// list, watch, merge and JSON patch, server-side apply, status, and
/// deletion; discovery and OpenAPI list the resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_kube_rs() {
    use futures::StreamExt;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{
        Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
        PatchParams, PostParams, WatchEvent, WatchParams,
    };
    use serde_json::json;

    let server = TestServer::start().await;
    let client = server.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.kube.example.com"},
        "spec": {
            "group": "kube.example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string", "default": "blue"},
                        }},
                        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                    },
                }},
            }],
        },
    }))
    .expect("CRD");
    let made = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let uid = made.metadata.uid.clone().expect("uid");
    within(
        "established",
        kube::runtime::wait::await_condition(
            crds.clone(),
            "widgets.kube.example.com",
            kube::runtime::wait::conditions::is_crd_established(),
        ),
    )
    .await
    .expect("await established");

    // Discovery and OpenAPI carry it.
    let groups = client.list_api_groups().await.expect("groups");
    assert!(
        groups.groups.iter().any(|g| g.name == "kube.example.com"),
        "{:?}",
        groups.groups.iter().map(|g| &g.name).collect::<Vec<_>>()
    );
    let resources = client
        .list_api_group_resources("kube.example.com/v1")
        .await
        .expect("resources");
    let names: Vec<&str> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    let index: serde_json::Value = client
        .request(
            http::Request::get("/openapi/v3")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("openapi index");
    let path = index["paths"]["apis/kube.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("the group-version's document")
        .to_string();
    let doc: serde_json::Value = client
        .request(http::Request::get(path).body(Vec::new()).expect("request"))
        .await
        .expect("openapi document");
    let schema = &doc["components"]["schemas"]["com.example.kube.v1.Widget"];
    assert_eq!(
        schema["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["kind"],
        "Widget"
    );
    assert!(doc["paths"]["/apis/kube.example.com/v1/widgets/{name}/status"].is_object());

    let gvk = GroupVersionKind::gvk("kube.example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let widgets: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut stream = widgets
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let mut w = DynamicObject::new("w1", &ar);
    w.data = json!({"spec": {"size": 3}});
    let created = widgets
        .create(&PostParams::default(), &w)
        .await
        .expect("create");
    assert_eq!(created.data["spec"], json!({"size": 3, "color": "blue"}));
    assert!(created.metadata.namespace.is_none());
    let seen = within("watch event", async {
        loop {
            match stream.next().await {
                Some(Ok(WatchEvent::Added(o))) if o.metadata.name.as_deref() == Some("w1") => {
                    break o
                }
                Some(Ok(_)) => continue,
                other => panic!("watch ended: {other:?}"),
            }
        }
    })
    .await;
    assert_eq!(seen.data["spec"]["size"], 3);

    let list = widgets.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    let patched = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 4}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(patched.data["spec"]["size"], 4);
    let patched = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/spec/color", "value": "red"}]),
                )
                .expect("json patch"),
            ),
        )
        .await
        .expect("json patch");
    assert_eq!(patched.data["spec"]["color"], "red");
    let applied = widgets
        .patch(
            "w2",
            &PatchParams::apply("kube-test"),
            &Patch::Apply(json!({
                "apiVersion": "kube.example.com/v1", "kind": "Widget",
                "metadata": {"name": "w2"}, "spec": {"size": 1},
            })),
        )
        .await
        .expect("apply");
    assert_eq!(applied.data["spec"], json!({"size": 1, "color": "blue"}));
    let status = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("status");
    assert_eq!(status.data["status"]["ready"], true);
    assert_eq!(status.data["spec"]["size"], 4);
    let bad = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "big"}})),
        )
        .await
        .expect_err("a string is no integer");
    match bad {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(
                s.message.contains("spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    // selectableFields: spec.color is a field selector.
    let red = widgets
        .list(&ListParams::default().fields("spec.color=red"))
        .await
        .expect("field selector");
    let red: Vec<_> = red
        .items
        .iter()
        .filter_map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(red, ["w1"]);
    let blue = widgets
        .list(&ListParams::default().fields("spec.color!=red"))
        .await
        .expect("field selector");
    assert_eq!(blue.items.len(), 1);
    let unsupported = widgets
        .list(&ListParams::default().fields("spec.size=1"))
        .await
        .expect_err("spec.size is not selectable");
    assert!(
        matches!(unsupported, kube::Error::Api(ref s) if s.code == 400),
        "{unsupported:?}"
    );

    // Ratcheting: a tightened schema refuses new values, not the ones an
    // update leaves as they were.
    crds.patch(
        "widgets.kube.example.com",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/minimum",
                "value": 2}]))
            .expect("json patch"),
        ),
    )
    .await
    .expect("tighten schema");
    within("tightened schema served", async {
        loop {
            let mut probe = DynamicObject::new("probe", &ar);
            probe.data = json!({"spec": {"size": 1}});
            let dry = PostParams {
                dry_run: true,
                ..Default::default()
            };
            if widgets.create(&dry, &probe).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    widgets
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"color": "green"}})),
        )
        .await
        .expect("unchanged size 1 ratchets");
    let refused = widgets
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 0}})),
        )
        .await
        .expect_err("size 0 is new");
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 422),
        "{refused:?}"
    );

    widgets
        .delete("w1", &DeleteParams::default())
        .await
        .expect("delete");
    let list = widgets.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);

    // Names conflicts: another CRD of the group asking for the same kind.
    let mut other = crd.clone();
    other.metadata.name = Some("gadgets.kube.example.com".into());
    other.spec.names.plural = "gadgets".into();
    other.spec.names.singular = Some("gadget".into());
    crds.create(&PostParams::default(), &other)
        .await
        .expect("create second CRD");
    let conflicted = within(
        "names conflict",
        kube::runtime::wait::await_condition(
            crds.clone(),
            "gadgets.kube.example.com",
            |c: Option<&CustomResourceDefinition>| {
                c.and_then(|c| c.status.as_ref())
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c.type_ == "NamesAccepted" && c.status == "False")
                    })
            },
        ),
    )
    .await
    .expect("await")
    .expect("CRD");
    let conditions = conflicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    let names = conditions
        .iter()
        .find(|c| c.type_ == "NamesAccepted")
        .expect("NamesAccepted");
    // Kind and listKind both conflict; upstream checks listKind last.
    assert_eq!(names.reason.as_deref(), Some("ListKindConflict"));
    assert_eq!(
        names.message.as_deref(),
        Some("\"WidgetList\" is already in use")
    );
    let established = conditions
        .iter()
        .find(|c| c.type_ == "Established")
        .expect("Established");
    assert_eq!(
        (established.status.as_str(), established.reason.as_deref()),
        ("False", Some("NotAccepted"))
    );

    // Deleting the CRD removes the remaining object.
    crds.delete("widgets.kube.example.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    within(
        "CRD deleted",
        kube::runtime::wait::await_condition(
            crds.clone(),
            "widgets.kube.example.com",
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await
    .expect("await deletion");
    let left = server
        .store
        .list("/registry/kube.example.com/", Default::default())
        .await
        .expect("list store");
    assert!(left.items.is_empty());
    let err = widgets
        .list(&ListParams::default())
        .await
        .expect_err("no longer served");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
}

/// The Python client's DynamicClient (tests/python/crd_checks.py).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_with_python_dynamic_client() {
    use std::path::PathBuf;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = std::env::var("SKIFF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".venv/bin/python"));
    assert!(
        python.exists(),
        "{} not found: run scripts/deps.sh to create the venv",
        python.display()
    );
    let server = TestServer::start().await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/crd_checks.py");
    let kubeconfig = server.kubeconfig.clone();
    let output = within(
        "python",
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(python)
                .arg(script)
                .env("KUBECONFIG", kubeconfig)
                .output()
                .expect("run python")
        }),
    )
    .await
    .expect("python task");
    assert!(
        output.status.success(),
        "python checks failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Hostile custom objects: wrong types, deep nesting, junk metadata and
/// subresource bodies, bad patches. Every answer is a 4xx (or a success),
/// never a 5xx, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_custom_objects_are_refused() {
    use serde_json::json;
    let server = TestServer::start().await;
    let k = server.kubectl(33);
    let group = "hostile.example.com";
    let out = apply(&k, &[], &crd(group)).await;
    assert!(out.status.success(), "{}", text(&out));
    ok(
        &k,
        &[
            "wait",
            "--for",
            "condition=established",
            "--timeout=30s",
            &format!("crd/crontabs.{group}"),
        ],
    )
    .await;
    let client = server.client().await;
    let base = format!("/apis/{group}/v1/namespaces/default/crontabs");
    let good = json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab",
        "metadata": {"name": "ok"}, "spec": {"cronSpec": "x", "replicas": 2}});
    let send = |method: &str, uri: String, ct: &str, body: Vec<u8>| {
        http::Request::builder()
            .method(method)
            .uri(uri)
            .header("Content-Type", ct)
            .body(body)
            .expect("request")
    };
    let status = |r: Result<String, kube::Error>| match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("transport error: {e}"),
    };
    let created = client
        .request_text(send(
            "POST",
            base.clone(),
            "application/json",
            serde_json::to_vec(&good).unwrap(),
        ))
        .await;
    assert_eq!(status(created), 200);
    let mut deep = json!("leaf");
    for _ in 0..200 {
        deep = json!({ "a": deep });
    }
    let bodies = [
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "a"}, "spec": []}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "b"}, "spec": {"replicas": "many"}}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "c"}, "spec": {"replicas": 1e300}}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "d", "labels": {"a": 1}}}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": "e"}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "f"}, "spec": deep}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "Other", "metadata": {"name": "g"}}),
        json!({"apiVersion": "v1", "kind": "CronTab", "metadata": {"name": "h"}}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "Bad_Name"}}),
        json!({"apiVersion": format!("{group}/v1"), "kind": "CronTab", "metadata": {"name": "i"}, "status": {"replicas": {"x": 1}}, "spec": null}),
        json!([1, 2, 3]),
    ];
    for body in &bodies {
        for (method, uri, ct) in [
            ("POST", base.clone(), "application/json"),
            ("PUT", format!("{base}/ok"), "application/json"),
            ("PUT", format!("{base}/ok/status"), "application/json"),
            (
                "PATCH",
                format!("{base}/ok"),
                "application/merge-patch+json",
            ),
            (
                "PATCH",
                format!("{base}/ok/status"),
                "application/merge-patch+json",
            ),
            (
                "PATCH",
                format!("{base}/ok?fieldManager=h&force=true"),
                "application/apply-patch+yaml",
            ),
            ("PATCH", format!("{base}/ok"), "application/json-patch+json"),
            ("PUT", format!("{base}/ok/scale"), "application/json"),
            (
                "PATCH",
                format!("{base}/ok/scale"),
                "application/merge-patch+json",
            ),
        ] {
            let code = status(
                client
                    .request_text(send(
                        method,
                        uri.clone(),
                        ct,
                        serde_json::to_vec(body).unwrap(),
                    ))
                    .await,
            );
            assert!(code < 500, "{method} {uri} {body} -> {code}");
        }
    }
    // Still serving, the object readable.
    let got = client
        .request_text(send(
            "GET",
            format!("{base}/ok"),
            "application/json",
            Vec::new(),
        ))
        .await
        .expect("get");
    let got: serde_json::Value = serde_json::from_str(&got).expect("JSON");
    assert_eq!(got["kind"], "CronTab");
    // deletecollection takes every object of the namespace.
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, "v1", "CronTab"),
        "crontabs",
    );
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "default", &ar);
    api.delete_collection(&Default::default(), &Default::default())
        .await
        .expect("deletecollection");
    let left = api.list(&Default::default()).await.expect("list");
    assert!(left.items.is_empty(), "{:?}", left.items);
}

/// Runs `kubectl get crontabs --watch`, creates an object and waits (with
/// a deadline) for its row.
async fn watch_sees_new_object(k: &Kubectl, group: &str) {
    use std::io::BufRead;
    let mut child = k
        .command(&["get", "crontabs", "--watch", "--request-timeout=0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn kubectl watch");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The initial list comes first (the header and the existing rows).
    let header = within("watch header", rx.recv()).await.expect("header");
    assert!(
        header.starts_with("NAME") && header.contains("REPLICAS"),
        "{header}"
    );
    let out = apply(
        k,
        &[],
        &crontab(group, "watched", "  cronSpec: '5 * * * *'\n  replicas: 2\n"),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let row = within("watch row", async {
        loop {
            match rx.recv().await {
                Some(line) if line.starts_with("watched ") => break line,
                Some(_) => continue,
                None => panic!("kubectl watch ended"),
            }
        }
    })
    .await;
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        fields.get(1..6),
        Some(&["5", "*", "*", "*", "*"][..]),
        "{row}"
    );
    assert_eq!(fields.get(6), Some(&"2"), "{row}");
    let _ = child.kill();
    let _ = child.wait();
}
