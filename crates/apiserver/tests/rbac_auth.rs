//! RBAC objects, the review APIs and APIServices with the real kubectl
//! (1.27, 1.30, 1.33): `create role|rolebinding|clusterrole|clusterrolebinding`
//! (protobuf bodies on the newer kubectl), their tables and `describe`,
//! upstream's validation wording and the immutable roleRef, the default
//! cluster roles and bindings, `auth whoami` (admin and a user outside
//! system:masters), `auth can-i` (yes/no with exit codes 0/1, `--list`,
//! `--as`), `get apiservices`, and TokenReviews of a valid and an invalid
//! token.

mod support;

use serde_json::Value;
use skiff_testkit::apiserver::ADMIN_TOKEN;
use support::{ok, run, within, Kubectl, TestServer, VIEWER_TOKEN};

/// (exit code, stdout, stderr).
async fn code(k: &Kubectl, args: &[&str]) -> (i32, String, String) {
    let out = run(k, args).await;
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn stdin(k: &Kubectl, args: &[&str], input: &str) -> (bool, String, String) {
    let mut all = vec!["--request-timeout=30s"];
    all.extend_from_slice(args);
    let out = within(&args.join(" "), k.run_stdin(&all, input)).await;
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The words of the line of `table` whose first word is `name`.
fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect()
}

async fn scenario(minor: u32) {
    let server = TestServer::start().await;
    let k = server.kubectl(minor);

    // The generators; kubectl 1.32+ sends them as protobuf.
    let create_role = [
        "create",
        "role",
        "pod-reader",
        "--verb=get",
        "--verb=list",
        "--resource=pods",
        "-v=8",
    ];
    let out = run(&k, &create_role).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("role.rbac.authorization.k8s.io/pod-reader created"),
        "{stdout}"
    );
    if minor >= 32 {
        assert!(
            stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "kubectl 1.{minor} sent no protobuf body: {stderr}"
        );
    }
    let out = ok(
        &k,
        &[
            "create",
            "rolebinding",
            "readers",
            "--role=pod-reader",
            "--user=alice",
            "--group=devs",
            "--serviceaccount=default:robot",
        ],
    )
    .await;
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io/readers created"),
        "{out}"
    );
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "node-reader",
            "--verb=get,list",
            "--resource=nodes",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "team",
            "--aggregation-rule=team=blue",
        ],
    )
    .await;
    let out = ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "bob-nodes",
            "--clusterrole=node-reader",
            "--user=bob",
        ],
    )
    .await;
    assert!(
        out.contains("clusterrolebinding.rbac.authorization.k8s.io/bob-nodes created"),
        "{out}"
    );

    // Stored as upstream defaults them.
    let rb: Value =
        serde_json::from_str(&ok(&k, &["get", "rolebinding", "readers", "-o", "json"]).await)
            .unwrap();
    assert_eq!(
        rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io",
        "{rb}"
    );
    assert_eq!(
        rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io",
        "{rb}"
    );
    let team: Value =
        serde_json::from_str(&ok(&k, &["get", "clusterrole", "team", "-o", "json"]).await).unwrap();
    assert_eq!(
        team["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["team"], "blue",
        "{team}"
    );

    // Tables.
    let roles = ok(&k, &["get", "roles"]).await;
    assert_eq!(header(&roles), ["NAME", "CREATED", "AT"], "{roles}");
    assert!(row(&roles, "pod-reader")[1].ends_with('Z'), "{roles}");
    let bindings = ok(&k, &["get", "rolebindings", "-o", "wide"]).await;
    assert_eq!(
        header(&bindings),
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{bindings}"
    );
    let r = row(&bindings, "readers");
    assert_eq!(
        (r[1], r[3], r[4], r[5]),
        ("Role/pod-reader", "alice", "devs", "default/robot")
    );
    let crbs = ok(&k, &["get", "clusterrolebindings", "-o", "wide"]).await;
    assert_eq!(row(&crbs, "bob-nodes")[1..2], ["ClusterRole/node-reader"]);
    // USERS is empty: the words are NAME ROLE AGE GROUPS.
    assert_eq!(row(&crbs, "cluster-admin")[3], "system:masters", "{crbs}");
    let describe = ok(&k, &["describe", "role", "pod-reader"]).await;
    assert!(
        describe.contains("pods") && describe.contains("[get list]"),
        "{describe}"
    );
    let describe = ok(&k, &["describe", "rolebinding", "readers"]).await;
    assert!(
        describe.contains("Role:") && describe.contains("pod-reader") && describe.contains("alice"),
        "{describe}"
    );

    // Validation in upstream's words.
    let (done, _, err) = stdin(
        &k,
        &["create", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bad\nrules:\n- verbs: [get]\n  resources: [pods]\n",
    )
    .await;
    assert!(!done);
    assert!(
        err.contains(
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group"
        ),
        "{err}"
    );
    let (code_, _, err) = code(
        &k,
        &[
            "patch",
            "rolebinding",
            "readers",
            "--type=merge",
            "-p",
            r#"{"roleRef":{"name":"other"}}"#,
        ],
    )
    .await;
    assert_ne!(code_, 0);
    assert!(
        err.contains("roleRef: Invalid value:") && err.contains("cannot change roleRef"),
        "{err}"
    );

    // The defaults users see on day one.
    let defaults = ok(
        &k,
        &[
            "get",
            "clusterroles",
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:basic-user",
            "system:discovery",
            "system:public-info-viewer",
            "-o",
            "json",
        ],
    )
    .await;
    let list: Value = serde_json::from_str(&defaults).unwrap();
    for role in list["items"].as_array().unwrap() {
        assert_eq!(
            role["metadata"]["labels"]["kubernetes.io/bootstrapping"],
            "rbac-defaults"
        );
        assert_eq!(
            role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    let view = ok(&k, &["get", "clusterrole", "edit", "-o", "json"]).await;
    let view: Value = serde_json::from_str(&view).unwrap();
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(
        view["rules"].as_array().is_some_and(|r| !r.is_empty()),
        "{view}"
    );

    // auth whoami: the admin, and a user outside system:masters.
    let who = ok(&k, &["auth", "whoami"]).await;
    // The admin kubeconfig authenticates with its client certificate.
    assert_eq!(row(&who, "Username")[1], "kubernetes-admin", "{who}");
    assert!(
        who.contains("system:masters") && who.contains("system:authenticated"),
        "{who}"
    );
    let viewer = Kubectl {
        kubeconfig: server.anonymous_kubeconfig(),
        ..server.kubectl(minor)
    };
    let token = format!("--token={VIEWER_TOKEN}");
    let who = ok(&viewer, &["auth", "whoami", &token]).await;
    assert_eq!(row(&who, "Username")[1], "viewer", "{who}");

    // auth can-i: yes (0), no (1), --as, --list.
    let (c, out, _) = code(&k, &["auth", "can-i", "create", "pods"]).await;
    assert_eq!((c, out.trim()), (0, "yes"));
    let (c, out, _) = code(&viewer, &["auth", "can-i", "create", "pods", &token]).await;
    assert_eq!((c, out.trim()), (1, "no"));
    let (c, out, _) = code(&k, &["auth", "can-i", "get", "pods", "--as=someone"]).await;
    assert_eq!((c, out.trim()), (1, "no"));
    let (c, out, _) = code(
        &k,
        &[
            "auth",
            "can-i",
            "get",
            "pods",
            "--as=someone",
            "--as-group=system:masters",
        ],
    )
    .await;
    assert_eq!((c, out.trim()), (0, "yes"));
    let (c, _, err) = code(
        &viewer,
        &["auth", "can-i", "get", "pods", "--as=someone", &token],
    )
    .await;
    assert_ne!(c, 0);
    assert!(
        err.contains("users \"someone\" is forbidden: User \"viewer\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{err}"
    );
    let list = ok(&k, &["auth", "can-i", "--list"]).await;
    assert_eq!(row(&list, "*.*")[1..], ["[]", "[]", "[*]"], "{list}");
    let list = ok(&viewer, &["auth", "can-i", "--list", &token]).await;
    assert_eq!(
        row(&list, "selfsubjectreviews.authentication.k8s.io")[1..],
        ["[]", "[]", "[create]"],
        "{list}"
    );
    assert!(!list.contains("*.*"), "{list}");

    // APIServices: one Local per served group/version.
    let services = ok(&k, &["get", "apiservices"]).await;
    assert_eq!(
        header(&services),
        ["NAME", "SERVICE", "AVAILABLE", "AGE"],
        "{services}"
    );
    for name in [
        "v1.",
        "v1.apps",
        "v1.rbac.authorization.k8s.io",
        "v1.authentication.k8s.io",
    ] {
        assert_eq!(row(&services, name)[1..3], ["Local", "True"], "{services}");
    }

    // TokenReviews.
    let review = |t: &str| {
        format!("apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: {t}\n")
    };
    let (done, out, err) = stdin(
        &k,
        &["create", "-f", "-", "-o", "json"],
        &review(ADMIN_TOKEN),
    )
    .await;
    assert!(done, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(answer["status"]["authenticated"], true, "{answer}");
    assert_eq!(answer["status"]["user"]["username"], "admin", "{answer}");
    let (done, out, err) = stdin(&k, &["create", "-f", "-", "-o", "json"], &review("wrong")).await;
    assert!(done, "{err}");
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert!(answer["status"].get("authenticated").is_none(), "{answer}");
    assert_eq!(answer["status"]["user"], serde_json::json!({}), "{answer}");
    // SubjectAccessReviews, answered by the authorizer for the subject.
    let sar = |spec: &str| {
        format!("apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n{spec}")
    };
    let attrs = "  resourceAttributes: {namespace: default, verb: get, resource: pods}\n";
    for (who, allowed) in [
        ("  user: someone\n  groups: [system:masters]\n", true),
        ("  user: someone\n", false),
    ] {
        let (done, out, err) = stdin(
            &k,
            &["create", "-f", "-", "-o", "json"],
            &sar(&format!("{who}{attrs}")),
        )
        .await;
        assert!(done, "{err}");
        let answer: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["status"]["allowed"], allowed, "{answer}");
    }
    let (done, _, err) = stdin(&k, &["create", "-f", "-"], &sar(attrs)).await;
    assert!(!done);
    assert!(
        err.contains(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{err}"
    );
    let lsar = "apiVersion: authorization.k8s.io/v1\nkind: LocalSubjectAccessReview\nmetadata:\n  namespace: default\nspec:\n  user: someone\n  resourceAttributes: {namespace: other, verb: get, resource: pods}\n";
    let (done, _, err) = stdin(&k, &["create", "-f", "-"], lsar).await;
    assert!(!done);
    assert!(
        err.contains("spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"),
        "{err}"
    );
    // Nothing is stored: the resource only takes create.
    let (c, _, err) = code(&k, &["get", "tokenreviews"]).await;
    assert_ne!(c, 0);
    assert!(
        err.contains("MethodNotAllowed") || err.contains("not allow"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27() {
    scenario(27).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_30() {
    scenario(30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33() {
    scenario(33).await;
}

/// A review is answered however its path is spelled, and never stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_are_answered_not_stored_whatever_the_spelling() {
    use axum::body::Body;
    use tower::ServiceExt;

    let server = TestServer::start_loopback().await;
    let app = server.loopback.clone().expect("loopback");
    let send = |method: &str, uri: &str, body: &str| {
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let app = app.clone();
        async move {
            let resp = app.oneshot(req).await.unwrap();
            let code = resp.status().as_u16();
            let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
                .await
                .unwrap();
            (
                code,
                serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
            )
        }
    };
    let review = format!(
        r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","metadata":{{"name":"x"}},"spec":{{"token":"{ADMIN_TOKEN}"}}}}"#
    );
    for uri in [
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "/apis/authentication%2Ek8s.io/v1/tokenreviews",
        "//apis/authentication.k8s.io/v1/tokenreviews/",
    ] {
        let (code, body) = send("POST", uri, &review).await;
        assert_eq!(code, 201, "{uri}: {body}");
        assert_eq!(body["status"]["authenticated"], true, "{uri}: {body}");
        assert_eq!(
            body["status"]["audiences"][0], "https://kubernetes.default.svc.cluster.local",
            "{body}"
        );
    }
    let listed = server
        .store
        .list("/registry/tokenreviews/", Default::default())
        .await
        .unwrap();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    let (code, _) = send("GET", "/apis/authentication.k8s.io/v1/tokenreviews", "").await;
    assert_eq!(code, 405);
    let (code, _) = send("GET", "/apis/authentication.k8s.io/v1/tokenreviews/x", "").await;
    assert_eq!(code, 404);
    // A token for another audience only is not authenticated here.
    let other = format!(
        r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{{"token":"{ADMIN_TOKEN}","audiences":["vault"]}}}}"#
    );
    let (code, body) = send(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &other,
    )
    .await;
    assert_eq!(
        (code, &body["status"]),
        (201, &serde_json::json!({"user": {}})),
        "{body}"
    );
    // An empty token is a 400 in upstream's words.
    let (code, body) = send(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{}}"#,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );
    // The rules review answers for the loopback user (system:masters).
    let (code, body) = send(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"default"}}"#,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["incomplete"], false, "{body}");
    assert_eq!(
        body["status"]["resourceRules"][0]["verbs"][0], "*",
        "{body}"
    );
    // Upstream's answer is a fresh object whose spec (a struct, not
    // omitempty) is empty.
    assert_eq!(body["spec"], serde_json::json!({}), "{body}");
}
