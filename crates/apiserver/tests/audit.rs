//! The audit log with the real kubectl (1.33) against one server started
//! with `--audit-log-path` and a policy: who created, read and deleted
//! what, and who was refused, can be read from the JSON lines afterwards,
//! at the level the policy gives each request (Request for ConfigMaps,
//! Metadata for the rest, nothing for Events and discovery).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skiff_apiserver::audit::Options;
use support::{fails, ok, Kubectl, TestServer, VIEWER_TOKEN};

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:nodes"]
  verbs: [get, list, watch]
- level: None
  resources:
  - group: ""
    resources: [events]
- level: None
  nonResourceURLs: ["/api*", "/openapi*", "/version", "/healthz*"]
- level: Request
  resources:
  - group: ""
    resources: [configmaps]
- level: Metadata
"#;

/// The log's events once one satisfies `wanted` (a thread writes them,
/// a moment after the answer); panics after 20 s, saying `what`.
fn until_event(log: &Path, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
            .find(|event| wanted(event));
        if let Some(event) = found {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "no event for {what} in 20 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is(event: &Value, verb: &str, resource: &str, name: &str) -> bool {
    event["stage"] == "ResponseComplete"
        && event["verb"] == verb
        && event["objectRef"]["resource"] == resource
        && (name.is_empty() || event["objectRef"]["name"] == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_changed_what_is_in_the_audit_log() {
    let server = TestServer::start_with(|mut config| {
        let policy = config.data_dir.join("audit-policy.yaml");
        std::fs::write(&policy, POLICY).expect("policy file");
        config.audit = Options {
            log_path: Some(config.data_dir.join("audit/audit.log")),
            policy_file: Some(policy),
            ..Options::default()
        };
        config
    })
    .await;
    let log = server.dir.path().join("audit/audit.log");
    let k = server.kubectl(33);

    // A ConfigMap created, read and deleted by the admin (Request level).
    ok(
        &k,
        &[
            "-n",
            "default",
            "create",
            "configmap",
            "cm1",
            "--from-literal=a=b",
        ],
    )
    .await;
    ok(
        &k,
        &["-n", "default", "get", "configmap", "cm1", "-o", "json"],
    )
    .await;
    ok(&k, &["-n", "default", "delete", "configmap", "cm1"]).await;
    let created = until_event(&log, "the create", |e| is(e, "create", "configmaps", "cm1"));
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(created["level"], "Request");
    assert_eq!(created["user"]["username"], "kubernetes-admin", "{created}");
    assert!(
        created["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters")),
        "{created}"
    );
    assert_eq!(
        created["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "cm1", "apiVersion": "v1"})
    );
    assert_eq!(
        created["responseStatus"],
        json!({"metadata": {}, "code": 201})
    );
    assert_eq!(
        created["requestObject"]["data"],
        json!({"a": "b"}),
        "{created}"
    );
    assert!(created.get("responseObject").is_none(), "{created}");
    assert_eq!(
        created["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert_eq!(created["sourceIPs"], json!(["127.0.0.1"]));
    assert!(
        created["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("kubectl"),
        "{created}"
    );
    let micros = |t: &Value| {
        let t = t.as_str().unwrap();
        chrono::DateTime::parse_from_rfc3339(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(t.len(), "2006-01-02T15:04:05.000000Z".len(), "{t}");
    };
    micros(&created["requestReceivedTimestamp"]);
    micros(&created["stageTimestamp"]);
    let read = until_event(&log, "the get", |e| is(e, "get", "configmaps", "cm1"));
    assert_eq!(read["responseStatus"]["code"], 200);
    assert!(read.get("requestObject").is_none(), "{read}");
    let deleted = until_event(&log, "the delete", |e| is(e, "delete", "configmaps", "cm1"));
    assert_eq!(deleted["responseStatus"]["code"], 200);
    assert_ne!(deleted["auditID"], created["auditID"]);

    // A Secret at Metadata: its name, never its data.
    ok(
        &k,
        &[
            "-n",
            "default",
            "create",
            "secret",
            "generic",
            "s1",
            "--from-literal=k=v",
        ],
    )
    .await;
    let secret = until_event(&log, "the secret", |e| is(e, "create", "secrets", "s1"));
    assert_eq!(secret["level"], "Metadata");
    assert!(secret.get("requestObject").is_none(), "{secret}");
    assert_eq!(secret["responseStatus"]["code"], 201);

    // A user with a token and no rights: refused, and recorded so.
    let viewer = Kubectl {
        kubeconfig: server.anonymous_kubeconfig(),
        ..server.kubectl(33)
    };
    let token = format!("--token={VIEWER_TOKEN}");
    fails(&viewer, &[&token, "-n", "default", "get", "configmaps"]).await;
    let refused = until_event(&log, "the refusal", |e| {
        is(e, "list", "configmaps", "") && e["user"]["username"] == "viewer"
    });
    assert_eq!(refused["responseStatus"]["code"], 403);
    assert_eq!(refused["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        refused["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );

    // The admin acting as jane: both names are in the record.
    fails(
        &k,
        &["--as=jane", "-n", "default", "delete", "secret", "s1"],
    )
    .await;
    let impersonated = until_event(&log, "the impersonation", |e| {
        is(e, "delete", "secrets", "s1") && e["responseStatus"]["code"] == 403
    });
    assert_eq!(impersonated["user"]["username"], "kubernetes-admin");
    assert_eq!(impersonated["impersonatedUser"]["username"], "jane");

    // Events and discovery are not recorded (policy level None); the
    // admin's `get events` is answered all the same.
    ok(&k, &["-n", "default", "get", "events"]).await;
    ok(&k, &["-n", "default", "get", "configmaps"]).await;
    until_event(&log, "the last list", |e| {
        is(e, "list", "configmaps", "") && e["user"]["username"] == "kubernetes-admin"
    });
    let text = std::fs::read_to_string(&log).unwrap();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        assert_ne!(event["objectRef"]["resource"], "events", "{line}");
        assert_ne!(event["stage"], "RequestReceived", "{line}");
        assert!(
            event["objectRef"].is_object()
                || !event["requestURI"].as_str().unwrap().starts_with("/api"),
            "discovery recorded: {line}"
        );
    }
    println!(
        "{} events, {} bytes, {} bytes each on average",
        text.lines().count(),
        text.len(),
        text.len() / text.lines().count().max(1)
    );
}

/// A policy with a mistake stops the server from starting, naming the
/// file and the field.
#[tokio::test]
async fn a_bad_policy_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n- level: Everything\n",
    )
    .unwrap();
    let store: std::sync::Arc<dyn skiff_store::Store> = std::sync::Arc::new(
        skiff_store::sqlite::SqliteStore::open(dir.path().join("state.db"), Default::default())
            .unwrap(),
    );
    let config = skiff_apiserver::Config {
        audit: Options {
            log_path: Some(dir.path().join("audit.log")),
            policy_file: Some(policy.clone()),
            ..Options::default()
        },
        ..skiff_apiserver::Config::new(dir.path().to_path_buf(), "127.0.0.1:0".parse().unwrap())
    };
    let err = skiff_apiserver::ApiServer::bind(config, store)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&policy.display().to_string()) && err.contains("rules[1].level"),
        "{err}"
    );
    assert!(
        !dir.path().join("audit.log").exists(),
        "no log without a policy"
    );
}
