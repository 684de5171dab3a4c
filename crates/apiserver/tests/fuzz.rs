//! A fuzz pass over the write path, through the real handlers (the
//! in-process loopback: authentication, admission, handlers, store): many
//! mutations of valid objects of every served kind — wrong JSON types at
//! every field path, nulls, huge and empty values, deep nesting, invalid
//! names, bad patches of each type, bad options bodies and query
//! parameters. It asserts that no answer is a 5xx, every refusal is a
//! Status with the answer's code, a refused request changed nothing, and
//! every stored object reads back and decodes as its type.
//!
//! Deterministic (seeded) and bounded: `SKIFF_FUZZ_CASES` (default 1500)
//! requests, `SKIFF_FUZZ_SEED` to replay another run.

mod support;

use axum::body::Body;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tower::ServiceExt;

/// (URL collection path, a valid object).
fn bases() -> Vec<(&'static str, Value)> {
    let pod_spec = json!({"containers": [{"name": "c", "image": "busybox:1.36",
        "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "b"}],
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}],
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]});
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": pod_spec});
    vec![
        (
            "/api/v1/namespaces/fuzz/pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}}, "spec": pod_spec}),
        ),
        (
            "/api/v1/namespaces/fuzz/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"k": "v"}}),
        ),
        (
            "/api/v1/namespaces/fuzz/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "stringData": {"k": "v"}, "type": "Opaque"}),
        ),
        (
            "/api/v1/namespaces/fuzz/services",
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/namespaces/fuzz/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa"}}),
        ),
        (
            "/api/v1/namespaces/fuzz/endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "ep"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}),
        ),
        (
            "/api/v1/namespaces/fuzz/events",
            json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "ev"}, "involvedObject": {"kind": "Pod", "name": "p", "namespace": "fuzz"},
            "reason": "R", "message": "m", "type": "Normal", "count": 1}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/fuzz/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "ev2"}, "eventTime": "2026-01-01T00:00:00.000000Z", "type": "Normal",
            "reason": "R", "action": "A", "reportingController": "example.com/c", "reportingInstance": "i",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "fuzz"}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            "/apis/apps/v1/namespaces/fuzz/replicasets",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "rs"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}}, "template": template}}),
        ),
        (
            "/apis/batch/v1/namespaces/fuzz/jobs",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/fuzz/leases",
            json!({"apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "h", "leaseDurationSeconds": 15}}),
        ),
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fuzz-node",
            "labels": {"kubernetes.io/hostname": "n"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}),
        ),
    ]
}

/// Every path to a value in `v`.
fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(json!(k));
                paths(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push(json!(i));
                paths(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let mut cur = v;
    for step in path {
        cur = match step {
            Value::String(k) => cur.get_mut(k.as_str())?,
            Value::Number(n) => cur.get_mut(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn deep(levels: usize) -> Value {
    let mut v = json!("leaf");
    for i in 0..levels {
        v = if i % 2 == 0 {
            json!([v])
        } else {
            json!({"a": v})
        };
    }
    v
}

/// A replacement value: wrong types, nulls, empties, huge, deep, bad names.
fn junk(rng: &mut StdRng) -> Value {
    match rng.random_range(0..14) {
        0 => Value::Null,
        1 => json!("x"),
        2 => json!(5),
        3 => json!(-1.5),
        4 => json!(true),
        5 => json!([]),
        6 => json!({}),
        7 => json!(""),
        8 => json!("x".repeat(70_000)),
        9 => deep(110),
        10 => json!({"bad key!": 1, "k": [1, "2"]}),
        11 => json!("Bad Name!"),
        12 => json!(["a", 1, null]),
        _ => json!(i64::MAX),
    }
}

fn mutate(rng: &mut StdRng, mut obj: Value) -> Value {
    let mut all = Vec::new();
    paths(&obj, &mut Vec::new(), &mut all);
    let n = rng.random_range(1..=3);
    for _ in 0..n {
        let path = all[rng.random_range(0..all.len())].clone();
        if path.is_empty() {
            continue;
        }
        if rng.random_bool(0.15) {
            let (last, parent) = path.split_last().unwrap();
            if let (Some(Value::Object(m)), Value::String(k)) = (get_mut(&mut obj, parent), last) {
                m.remove(k.as_str());
            }
            continue;
        }
        if let Some(slot) = get_mut(&mut obj, &path) {
            *slot = junk(rng);
        }
    }
    obj
}

fn json_patch(rng: &mut StdRng, obj: &Value) -> Value {
    let mut all = Vec::new();
    paths(obj, &mut Vec::new(), &mut all);
    let pointer = |p: &Vec<Value>| -> String {
        p.iter()
            .map(|s| match s {
                Value::String(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
                other => format!("/{other}"),
            })
            .collect()
    };
    let a = pointer(&all[rng.random_range(0..all.len())]);
    let b = pointer(&all[rng.random_range(0..all.len())]);
    match rng.random_range(0..7) {
        0 => json!([{"op": "replace", "path": a, "value": junk(rng)}]),
        1 => json!([{"op": "remove", "path": a}]),
        2 => json!([{"op": "copy", "from": "", "path": a}]),
        3 => json!([{"op": "copy", "from": b, "path": a}, {"op": "copy", "from": "", "path": b}]),
        4 => json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}]),
        5 => json!([{"op": "bogus", "path": a}]),
        _ => json!({"not": "a list"}),
    }
}

struct Case {
    method: &'static str,
    uri: String,
    content_type: &'static str,
    body: Vec<u8>,
}

async fn send(app: &axum::Router, case: &Case) -> (u16, Vec<u8>) {
    let req = http::Request::builder()
        .method(case.method)
        .uri(&case.uri)
        .header("content-type", case.content_type)
        .body(Body::from(case.body.clone()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (code, body.to_vec())
}

async fn get(app: &axum::Router, uri: &str) -> (u16, Vec<u8>) {
    let case = Case {
        method: "GET",
        uri: uri.to_string(),
        content_type: "",
        body: vec![],
    };
    send(app, &case).await
}

/// The stored object decodes as its type (`GET` then the typed decoder).
fn decodes(kind: &str, group: &str, body: &[u8]) -> Result<(), String> {
    match skiff_apiserver::resources::find_kind(group, kind) {
        Some(k) => k.typed.check(body),
        None => Ok(()),
    }
}

fn group_of(collection: &str) -> &'static str {
    for g in ["events.k8s.io", "apps", "batch", "coordination.k8s.io"] {
        if collection.starts_with(&format!("/apis/{g}/")) {
            return g;
        }
    }
    ""
}

#[tokio::test]
async fn hostile_writes_never_fail_the_server_or_poison_the_store() {
    let server = support::TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let seed: u64 = std::env::var("SKIFF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11);
    let cases: usize = std::env::var("SKIFF_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let mut rng = StdRng::seed_from_u64(seed);
    let ns = Case {
        method: "POST",
        uri: "/api/v1/namespaces".into(),
        content_type: "application/json",
        body: br#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fuzz"}}"#.to_vec(),
    };
    assert_eq!(send(&app, &ns).await.0, 201);
    let bases = bases();
    // Each kind's valid object exists, so updates and patches have a target.
    for (collection, obj) in &bases {
        let case = Case {
            method: "POST",
            uri: collection.to_string(),
            content_type: "application/json",
            body: serde_json::to_vec(obj).unwrap(),
        };
        let (code, body) = send(&app, &case).await;
        assert_eq!(
            code,
            201,
            "{collection}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let bad_queries = [
        "",
        "",
        "",
        "?dryRun=Bogus",
        "?fieldValidation=Nope",
        "?fieldManager=",
        "?limit=abc",
        "?dryRun=All",
        "?fieldValidation=Strict",
        "?force=true",
    ];
    let mut counts = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..cases {
        let (collection, base) = &bases[rng.random_range(0..bases.len())];
        let name = base["metadata"]["name"].as_str().unwrap();
        let kind = base["kind"].as_str().unwrap();
        let group = group_of(collection);
        let item = format!("{collection}/{name}");
        let query = bad_queries[rng.random_range(0..bad_queries.len())];
        let mutated = mutate(&mut rng, base.clone());
        let case = match rng.random_range(0..9) {
            0 | 1 => {
                let mut body = mutated;
                if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.insert("name".into(), json!(format!("n{i}")));
                }
                Case {
                    method: "POST",
                    uri: format!("{collection}{query}"),
                    content_type: "application/json",
                    body: serde_json::to_vec(&body).unwrap(),
                }
            }
            2 => Case {
                method: "PUT",
                uri: format!("{item}{query}"),
                content_type: "application/json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            3 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/merge-patch+json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            4 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/strategic-merge-patch+json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            5 => Case {
                method: "PATCH",
                uri: format!("{item}{query}"),
                content_type: "application/json-patch+json",
                body: serde_json::to_vec(&json_patch(&mut rng, base)).unwrap(),
            },
            6 => Case {
                method: "PATCH",
                uri: format!("{item}?fieldManager=fuzz&force=true"),
                content_type: "application/apply-patch+yaml",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            7 => Case {
                method: "PUT",
                uri: format!("{item}/status"),
                content_type: "application/json",
                body: serde_json::to_vec(&mutated).unwrap(),
            },
            _ => {
                let opts = json!({"kind": "DeleteOptions", "apiVersion": "v1",
                    "dryRun": [junk(&mut rng)], "gracePeriodSeconds": junk(&mut rng)});
                Case {
                    method: "DELETE",
                    uri: format!("{collection}{query}"),
                    content_type: "application/json",
                    body: serde_json::to_vec(&opts).unwrap(),
                }
            }
        };
        let before = get(&app, &item).await;
        let (code, body) = send(&app, &case).await;
        *counts.entry(code).or_default() += 1;
        let shown = || {
            format!(
                "{} {} -> {code}: {}",
                case.method,
                case.uri,
                String::from_utf8_lossy(&body[..body.len().min(600)])
            )
        };
        assert!(code < 500, "server error: {}", shown());
        if code >= 400 {
            let status: Value = serde_json::from_slice(&body)
                .unwrap_or_else(|_| panic!("not a Status: {}", shown()));
            assert_eq!(status["kind"], "Status", "{}", shown());
            assert_eq!(status["code"], code, "{}", shown());
            let after = get(&app, &item).await;
            assert_eq!(
                before,
                after,
                "a refused request changed {item}: {}",
                shown()
            );
        }
        // Whatever is stored now reads back and decodes as its type.
        let (code, now) = get(&app, &item).await;
        if code == 200 {
            decodes(kind, group, &now)
                .unwrap_or_else(|e| panic!("{item} no longer decodes ({e}) after {}", shown()));
        }
        // A deleted victim is put back for the next cases.
        if code == 404 {
            let restore = Case {
                method: "POST",
                uri: collection.to_string(),
                content_type: "application/json",
                body: serde_json::to_vec(base).unwrap(),
            };
            let _ = send(&app, &restore).await;
        }
    }
    // Every list still decodes item by item.
    for (collection, base) in &bases {
        let (code, body) = get(&app, collection).await;
        assert_eq!(code, 200, "{collection}");
        let list: Value = serde_json::from_slice(&body).unwrap();
        for item in list["items"].as_array().unwrap() {
            decodes(
                base["kind"].as_str().unwrap(),
                group_of(collection),
                &serde_json::to_vec(item).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{collection}: an item does not decode: {e}"));
        }
    }
    eprintln!("fuzz seed {seed}: {cases} cases, answers by code: {counts:?}");
    assert!(
        counts.keys().any(|c| *c < 300) && counts.keys().any(|c| *c >= 400),
        "{counts:?}"
    );
}
