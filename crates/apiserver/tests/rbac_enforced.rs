//! RBAC enforced, with the real kubectl (1.33) against one server: users
//! (by impersonation from the admin, and one real bearer token) get
//! upstream's Forbidden until a binding grants them, then exactly what the
//! bound role says: a RoleBinding to `view` in one namespace only, a Role
//! with resourceNames, a ClusterRoleBinding to a group, a ServiceAccount
//! subject, a non-resource URL, `auth can-i` and `--list`; deleting the
//! binding takes the rights away again.

mod support;

use std::time::{Duration, Instant};

use support::{ok, run, Kubectl, TestServer, VIEWER_TOKEN};

/// (success, stdout + stderr) of `kubectl ARGS`.
async fn try_run(k: &Kubectl, args: &[&str]) -> (bool, String) {
    let out = run(k, args).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Runs `kubectl ARGS` until its success is `want` (the authorizer follows
/// bindings through the watch cache, a moment after the write); the last
/// output. Panics after 20 s.
async fn until(k: &Kubectl, args: &[&str], want: bool) -> String {
    let what = if want { "succeed" } else { "fail" };
    until_output(k, args, what, |done, _| done == want).await
}

/// Runs `kubectl ARGS` until `ready(success, output)` holds; the last
/// output. Panics after 20 s, saying it never did `what`.
async fn until_output(
    k: &Kubectl,
    args: &[&str],
    what: &str,
    ready: impl Fn(bool, &str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (done, text) = try_run(k, args).await;
        if ready(done, &text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl {args:?} did not {what} in 20 s: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_is_enforced() {
    let server = TestServer::start().await;
    let k = server.kubectl(33);
    ok(&k, &["create", "namespace", "dev"]).await;
    ok(&k, &["create", "namespace", "prod"]).await;
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "configmap",
            "allowed",
            "--from-literal=a=b",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "configmap",
            "secret-ish",
            "--from-literal=a=b",
        ],
    )
    .await;

    // Nothing bound: upstream's words.
    let (done, text) = try_run(&k, &["--as=jane", "-n", "dev", "get", "pods"]).await;
    assert!(!done);
    assert!(
        text.contains("pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"dev\""),
        "{text}"
    );
    let (done, text) = try_run(&k, &["--as=jane", "get", "nodes", "n1"]).await;
    assert!(!done);
    assert!(
        text.contains("nodes \"n1\" is forbidden: User \"jane\" cannot get resource \"nodes\" in API group \"\" at the cluster scope"),
        "{text}"
    );
    // Discovery and self-reviews come with system:authenticated.
    ok(&k, &["--as=jane", "api-resources", "--api-group=apps"]).await;
    ok(&k, &["--as=jane", "auth", "whoami"]).await;

    // A RoleBinding to the view ClusterRole: dev only, read only.
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "rolebinding",
            "jane-view",
            "--clusterrole=view",
            "--user=jane",
        ],
    )
    .await;
    until(&k, &["--as=jane", "-n", "dev", "get", "pods"], true).await;
    ok(&k, &["--as=jane", "-n", "dev", "get", "configmaps"]).await;
    let (done, text) = try_run(&k, &["--as=jane", "-n", "prod", "get", "pods"]).await;
    assert!(
        !done && text.contains("in the namespace \"prod\""),
        "{text}"
    );
    let (done, text) = try_run(&k, &["--as=jane", "get", "pods", "-A"]).await;
    assert!(!done && text.contains("at the cluster scope"), "{text}");
    let (done, text) = try_run(&k, &["--as=jane", "-n", "dev", "create", "configmap", "x"]).await;
    assert!(
        !done && text.contains("configmaps is forbidden: User \"jane\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"dev\""),
        "{text}"
    );
    let (done, text) = try_run(&k, &["--as=jane", "-n", "dev", "get", "secrets"]).await;
    assert!(!done, "view does not read Secrets: {text}");
    let yes = ok(
        &k,
        &[
            "--as=jane",
            "-n",
            "dev",
            "auth",
            "can-i",
            "watch",
            "deployments.apps",
        ],
    )
    .await;
    assert_eq!(yes.trim(), "yes");
    let list = ok(&k, &["--as=jane", "-n", "dev", "auth", "can-i", "--list"]).await;
    let pods = list
        .lines()
        .find(|l| l.split_whitespace().next() == Some("pods"))
        .unwrap_or_else(|| panic!("no pods row in\n{list}"));
    assert!(pods.contains("[get list watch]"), "{list}");

    // A Role with resourceNames: that one ConfigMap, and no list.
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "role",
            "one-cm",
            "--verb=get,list,patch",
            "--resource=configmaps",
            "--resource-name=allowed",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "rolebinding",
            "bob-one-cm",
            "--role=one-cm",
            "--user=bob",
        ],
    )
    .await;
    until(
        &k,
        &["--as=bob", "-n", "dev", "get", "configmap", "allowed"],
        true,
    )
    .await;
    ok(
        &k,
        &[
            "--as=bob",
            "-n",
            "dev",
            "label",
            "configmap",
            "allowed",
            "touched=yes",
        ],
    )
    .await;
    let (done, text) = try_run(
        &k,
        &["--as=bob", "-n", "dev", "get", "configmap", "secret-ish"],
    )
    .await;
    assert!(
        !done && text.contains("configmaps \"secret-ish\" is forbidden: User \"bob\" cannot get resource \"configmaps\""),
        "{text}"
    );
    let (done, text) = try_run(&k, &["--as=bob", "-n", "dev", "get", "configmaps"]).await;
    assert!(!done && text.contains("cannot list resource"), "{text}");
    // A list narrowed to the name by a field selector is of that name
    // (as upstream decides since 1.30), so resourceNames allow it.
    ok(
        &k,
        &[
            "--as=bob",
            "-n",
            "dev",
            "get",
            "configmaps",
            "--field-selector=metadata.name=allowed",
        ],
    )
    .await;

    // A ClusterRoleBinding to a group: edit everywhere.
    ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "devs-edit",
            "--clusterrole=edit",
            "--group=devs",
        ],
    )
    .await;
    until(
        &k,
        &[
            "--as=carol",
            "--as-group=devs",
            "-n",
            "prod",
            "create",
            "configmap",
            "by-carol",
        ],
        true,
    )
    .await;
    let (done, _) = try_run(&k, &["--as=carol", "-n", "prod", "get", "configmaps"]).await;
    assert!(!done, "without the group carol has nothing");

    // A ServiceAccount subject (its namespace from the binding).
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "rolebinding",
            "ci-view",
            "--clusterrole=view",
            "--serviceaccount=dev:ci",
        ],
    )
    .await;
    until(
        &k,
        &[
            "--as=system:serviceaccount:dev:ci",
            "-n",
            "dev",
            "get",
            "pods",
        ],
        true,
    )
    .await;
    let (done, _) = try_run(
        &k,
        &[
            "--as=system:serviceaccount:prod:ci",
            "-n",
            "dev",
            "get",
            "pods",
        ],
    )
    .await;
    assert!(!done);

    // A non-resource URL: forbidden, then allowed (the server's metrics).
    let (done, text) = try_run(&k, &["--as=jane", "get", "--raw", "/metrics"]).await;
    assert!(!done && text.contains("cannot get path"), "{text}");
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "metrics-reader",
            "--verb=get",
            "--non-resource-url=/metrics",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "jane-metrics",
            "--clusterrole=metrics-reader",
            "--user=jane",
        ],
    )
    .await;
    let text = until(&k, &["--as=jane", "get", "--raw", "/metrics"], true).await;
    assert!(
        text.contains("# TYPE apiserver_request_total counter"),
        "{text}"
    );

    // A real bearer token (the viewer user) is judged the same way.
    let viewer = Kubectl {
        kubeconfig: server.anonymous_kubeconfig(),
        ..server.kubectl(33)
    };
    let token = format!("--token={VIEWER_TOKEN}");
    let (done, _) = try_run(&viewer, &["-n", "dev", "get", "pods", &token]).await;
    assert!(!done);
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "rolebinding",
            "viewer-view",
            "--clusterrole=view",
            "--user=viewer",
        ],
    )
    .await;
    until(&viewer, &["-n", "dev", "get", "pods", &token], true).await;

    // Deleting the binding takes the rights away.
    ok(&k, &["-n", "dev", "delete", "rolebinding", "jane-view"]).await;
    let text = until(&k, &["--as=jane", "-n", "dev", "get", "pods"], false).await;
    assert!(text.contains("forbidden"), "{text}");
    // Deleting the role a binding names does too.
    ok(&k, &["-n", "dev", "delete", "role", "one-cm"]).await;
    until(
        &k,
        &["--as=bob", "-n", "dev", "get", "configmap", "allowed"],
        false,
    )
    .await;
}

/// Escalation prevention: a namespace admin may write roles and bindings
/// only with rights they hold, unless granted `escalate` or `bind`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escalation_is_refused() {
    let server = TestServer::start().await;
    let k = server.kubectl(33);
    ok(&k, &["create", "namespace", "dev"]).await;
    ok(
        &k,
        &[
            "-n",
            "dev",
            "create",
            "rolebinding",
            "dave-admin",
            "--clusterrole=admin",
            "--user=dave",
        ],
    )
    .await;
    let dave = ["--as=dave", "-n", "dev"];
    let with = |rest: &[&'static str]| -> Vec<&'static str> {
        dave.iter().chain(rest.iter()).copied().collect()
    };
    // Rights dave holds: granted.
    until(
        &k,
        &with(&[
            "create",
            "role",
            "pod-reader",
            "--verb=get,list",
            "--resource=pods",
        ]),
        true,
    )
    .await;
    ok(
        &k,
        &with(&[
            "create",
            "rolebinding",
            "erin-view",
            "--clusterrole=view",
            "--user=erin",
        ]),
    )
    .await;
    ok(
        &k,
        &with(&[
            "create",
            "rolebinding",
            "erin-reader",
            "--role=pod-reader",
            "--user=erin",
        ]),
    )
    .await;
    // Rights dave does not hold: refused in upstream's words, nothing stored.
    let (done, text) = try_run(
        &k,
        &with(&[
            "create",
            "role",
            "node-reader",
            "--verb=get",
            "--resource=nodes",
        ]),
    )
    .await;
    assert!(!done);
    assert!(
        text.contains("roles.rbac.authorization.k8s.io \"node-reader\" is forbidden: user \"dave\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"),
        "{text}"
    );
    let (done, _) = try_run(&k, &["-n", "dev", "get", "role", "node-reader"]).await;
    assert!(!done, "the refused role was stored");
    let (done, text) = try_run(
        &k,
        &with(&[
            "create",
            "rolebinding",
            "erin-root",
            "--clusterrole=cluster-admin",
            "--user=erin",
        ]),
    )
    .await;
    assert!(!done);
    assert!(
        text.contains(
            "rolebindings.rbac.authorization.k8s.io \"erin-root\" is forbidden: user \"dave\""
        ) && text.contains("is attempting to grant RBAC permissions not currently held"),
        "{text}"
    );
    // Widening a role he wrote is an update, checked the same way.
    let (done, text) = try_run(
        &k,
        &with(&["patch", "role", "pod-reader", "--type=json", "-p", r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["nodes"],"verbs":["list"]}}]"#]),
    )
    .await;
    assert!(!done && text.contains("not currently held"), "{text}");
    // Labels on it are a change too, but grant nothing new: allowed.
    ok(&k, &with(&["label", "role", "pod-reader", "team=a"])).await;

    // `bind` on cluster-admin lets dave bind it; `escalate` on roles lets
    // him write any role.
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "bind-root",
            "--verb=bind",
            "--resource=clusterroles",
            "--resource-name=cluster-admin",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "dave-bind-root",
            "--clusterrole=bind-root",
            "--user=dave",
        ],
    )
    .await;
    until(
        &k,
        &with(&[
            "create",
            "rolebinding",
            "erin-root",
            "--clusterrole=cluster-admin",
            "--user=erin",
        ]),
        true,
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "escalate-roles",
            "--verb=escalate",
            "--resource=roles",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "dave-escalate",
            "--clusterrole=escalate-roles",
            "--user=dave",
        ],
    )
    .await;
    until(
        &k,
        &with(&[
            "create",
            "role",
            "node-reader",
            "--verb=get",
            "--resource=nodes",
        ]),
        true,
    )
    .await;

    // An aggregationRule needs every permission.
    ok(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "dave-cr",
            "--clusterrole=cluster-role-writer",
            "--user=dave",
        ],
    )
    .await;
    ok(
        &k,
        &[
            "create",
            "clusterrole",
            "cluster-role-writer",
            "--verb=create",
            "--resource=clusterroles",
        ],
    )
    .await;
    let aggregated = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gather}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {gather: \"yes\"}}]\nrules: []\n";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = k
            .run_stdin(&["--as=dave", "create", "-f", "-"], aggregated)
            .await;
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !out.status.success(),
            "an aggregated role without full rights: {text}"
        );
        if text.contains("must have cluster-admin privileges to use the aggregationRule") {
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
