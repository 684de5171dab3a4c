//! `skiff-bench api --rbac`: what RBAC costs a request ([#37]). One
//! `skiff server` (agent and controller manager off); a user outside `system:masters`
//! (`bench-user`, a bearer token written to the server's `tokens.csv`
//! before it starts) holding 50 bindings: 40 RoleBindings to Roles and 9
//! ClusterRoleBindings to ClusterRoles that grant unrelated things, all
//! looked at first, and one RoleBinding to `edit` in the churned
//! namespace. The same churn (creates and updates at `--writes-per-sec`,
//! GETs and LISTs, 10 watchers on everything) runs as the admin and as the
//! user, twice each in the order admin, user, user, admin; create p99 and LIST p50 side by side,
//! beside the target (user within 5 % of admin). Then a micro-benchmark:
//! decisions per second of the authorizer's in-memory policy with the
//! same 50 bindings, allowed and not allowed. It prints figures and never
//! asserts them.
//!
//! [#37]: https://github.com/skiff/skiff/issues/37

use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use serde_json::{json, Value};
use skiff_apiserver::authn::User;
use skiff_apiserver::authz::rbac::{Binding, Policy};
use skiff_apiserver::authz::Attributes;

use crate::api::{churn, create_many, p50_p99, Args, Phase};
use crate::cluster::{create_namespace, request, start_server_prepared};
use crate::stats::{ms, percentile, print_table};

const USER: &str = "bench-user";
const TOKEN: &str = "skiff-bench-rbac-user-token-0123456789";
const NS: &str = "churn";
/// Bindings that grant something else (looked at before the one that
/// grants the churn): Roles in the namespace and ClusterRoles.
const FILLER_ROLES: usize = 40;
const FILLER_CLUSTER_ROLES: usize = 9;

fn rbac(kind: &str, name: &str, ns: Option<&str>, body: Value) -> Value {
    let mut obj = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
    });
    if let Some(ns) = ns {
        obj["metadata"]["namespace"] = json!(ns);
    }
    if let (Some(o), Some(b)) = (obj.as_object_mut(), body.as_object()) {
        o.extend(b.clone());
    }
    obj
}

fn user_subject() -> Value {
    json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": USER}])
}

/// The 50 bindings, as (collection URI, object).
fn objects() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let roles = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles");
    let bindings = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings");
    let croles = "/apis/rbac.authorization.k8s.io/v1/clusterroles".to_string();
    let cbindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_string();
    for i in 0..FILLER_ROLES {
        let name = format!("a-filler-{i}");
        let rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": [format!("cm-{i}")]});
        out.push((
            roles.clone(),
            rbac("Role", &name, Some(NS), json!({"rules": [rule]})),
        ));
        let body = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}, "subjects": user_subject()});
        out.push((bindings.clone(), rbac("RoleBinding", &name, Some(NS), body)));
    }
    for i in 0..FILLER_CLUSTER_ROLES {
        let name = format!("a-bench-filler-{i}");
        let rule = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"], "resourceNames": [format!("node-{i}")]});
        out.push((
            croles.clone(),
            rbac("ClusterRole", &name, None, json!({"rules": [rule]})),
        ));
        let body = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}, "subjects": user_subject()});
        out.push((
            cbindings.clone(),
            rbac("ClusterRoleBinding", &name, None, body),
        ));
    }
    let body = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}, "subjects": user_subject()});
    out.push((bindings, rbac("RoleBinding", "z-grant", Some(NS), body)));
    out
}

/// A client of the admin's kubeconfig, authenticating with `TOKEN`.
async fn user_client(kubeconfig: &std::path::Path) -> anyhow::Result<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    config.auth_info = kube::config::AuthInfo {
        token: Some(TOKEN.to_string().into()),
        ..Default::default()
    };
    Ok(Client::try_from(config)?)
}

/// Decisions per second of `policy` on `attrs` (best of three runs).
fn decisions_per_second(policy: &Policy, attrs: &Attributes<'_>, want: bool) -> f64 {
    let n = 200_000;
    let mut best = 0.0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let mut allowed = 0usize;
        for _ in 0..n {
            allowed +=
                usize::from(std::hint::black_box(policy).allows(std::hint::black_box(attrs)));
        }
        let rate = n as f64 / start.elapsed().as_secs_f64();
        assert_eq!(allowed == n, want, "the micro-benchmark's decision changed");
        best = best.max(rate);
    }
    best
}

/// The in-process policy of the same 50 bindings (with `edit` reduced to
/// its pods rule).
fn micro() -> (f64, f64) {
    let mut policy = Policy::default();
    let subject = || Subject {
        kind: "User".into(),
        name: USER.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    };
    let rule = |verbs: &[&str], resource: &str, names: Option<String>| PolicyRule {
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        api_groups: Some(vec![String::new()]),
        resources: Some(vec![resource.to_string()]),
        resource_names: names.map(|n| vec![n]),
        non_resource_urls: None,
    };
    let role_ref = |kind: &str, name: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    };
    let meta = |name: &str, ns: Option<&str>| ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(String::from),
        ..ObjectMeta::default()
    };
    for i in 0..FILLER_ROLES {
        let name = format!("a-filler-{i}");
        policy.set_role(
            NS,
            &name,
            vec![rule(&["get"], "configmaps", Some(format!("cm-{i}")))],
        );
        let b = RoleBinding {
            metadata: meta(&name, Some(NS)),
            role_ref: role_ref("Role", &name),
            subjects: Some(vec![subject()]),
        };
        policy.set_binding(
            &format!("/registry/rolebindings/{NS}/{name}"),
            Binding::of_role_binding(&b),
        );
    }
    for i in 0..FILLER_CLUSTER_ROLES {
        let name = format!("a-bench-filler-{i}");
        policy.set_cluster_role(
            &name,
            vec![rule(&["get"], "nodes", Some(format!("node-{i}")))],
        );
        let b = ClusterRoleBinding {
            metadata: meta(&name, None),
            role_ref: role_ref("ClusterRole", &name),
            subjects: Some(vec![subject()]),
        };
        policy.set_binding(
            &format!("/registry/clusterrolebindings/{name}"),
            Binding::of_cluster_role_binding(&b),
        );
    }
    policy.set_cluster_role(
        "edit",
        vec![rule(
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            "pods",
            None,
        )],
    );
    let grant = RoleBinding {
        metadata: meta("z-grant", Some(NS)),
        role_ref: role_ref("ClusterRole", "edit"),
        subjects: Some(vec![subject()]),
    };
    policy.set_binding(
        &format!("/registry/rolebindings/{NS}/z-grant"),
        Binding::of_role_binding(&grant),
    );
    let user = User {
        name: USER.into(),
        groups: vec!["system:authenticated".into()],
    };
    let create = Attributes::resource(&user, "create", "", "pods").in_namespace(NS);
    let nodes = Attributes::resource(&user, "list", "", "nodes");
    (
        decisions_per_second(&policy, &create, true),
        decisions_per_second(&policy, &nodes, false),
    )
}

pub async fn run(args: &Args) -> anyhow::Result<()> {
    let skiff = crate::cluster::sibling("skiff")?;
    // Only the API server: the churned pods are bound to nodes that do
    // not exist, which the pod garbage collector would delete.
    let flags = ["--disable-agent", "--disable-controller-manager"];
    let (server, admin) = start_server_prepared(&skiff, &flags, |dir| {
        std::fs::write(
            dir.join("tokens.csv"),
            format!("skiff-bench-admin-token-0123456789,skiff-admin,skiff-admin,\"system:masters\"\n{TOKEN},{USER},{USER}\n"),
        )
    })
    .await?;
    let pid = server.child.id();
    create_namespace(&admin, NS).await?;
    let watchers = args.watchers;
    create_many(&admin, NS, args.pods, "p", watchers).await?;
    for (uri, obj) in objects() {
        admin
            .request_text(request("POST", &uri, Some(&obj)))
            .await?;
    }
    let user = user_client(&server.kubeconfig).await?;
    let probe = format!("/api/v1/namespaces/{NS}/pods/p-0");
    let deadline = Instant::now() + Duration::from_secs(30);
    while user
        .request_text(request("GET", &probe, None))
        .await
        .is_err()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the user's binding did not take effect in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "{USER} holds {} bindings; churn as admin, {USER}, {USER}, admin",
        FILLER_ROLES + FILLER_CLUSTER_ROLES + 1
    );
    // Each round leaves its creates behind, so the namespace grows from
    // round to round; the order admin, user, user, admin gives both the
    // same mean size (admin then user twice over had the user's rounds
    // always 1,000 pods bigger).
    let mut as_admin = Vec::new();
    let mut as_user = Vec::new();
    // Each round's create p99 and LIST p50, in order: the spread between
    // rounds of the same identity is the noise the ratios sit in.
    let mut rounds = Vec::new();
    for (round, as_user_now) in [false, true, true, false].into_iter().enumerate() {
        let (client, tag) = if as_user_now {
            (&user, format!("ru{round}"))
        } else {
            (&admin, format!("ra{round}"))
        };
        let mut phase = churn(client, pid, args, false, watchers, &tag).await?;
        rounds.push(format!(
            "{} {} / {}",
            if as_user_now { "user" } else { "admin" },
            ms(percentile(&mut phase.creates, 99.0)),
            ms(percentile(&mut phase.lists, 50.0))
        ));
        if as_user_now {
            as_user.push(phase);
        } else {
            as_admin.push(phase);
        }
    }
    drop(server);
    let (mut a, mut u) = (Phase::merge(as_admin), Phase::merge(as_user));
    let (allowed, denied) = micro();
    let ratio = |u: Duration, a: Duration| u.as_secs_f64() / a.as_secs_f64().max(1e-9);
    let (ca, cu) = (
        percentile(&mut a.creates, 99.0),
        percentile(&mut u.creates, 99.0),
    );
    let (la, lu) = (
        percentile(&mut a.lists, 50.0),
        percentile(&mut u.lists, 50.0),
    );
    let verdict = |r: f64| if r <= 1.05 { "met" } else { "MISSED" };
    let rows = vec![
        (
            "create p50 / p99".to_string(),
            p50_p99(&mut a.creates),
            p50_p99(&mut u.creates),
            String::new(),
        ),
        (
            "update p50 / p99".into(),
            p50_p99(&mut a.updates),
            p50_p99(&mut u.updates),
            String::new(),
        ),
        (
            "get p50 / p99".into(),
            p50_p99(&mut a.gets),
            p50_p99(&mut u.gets),
            String::new(),
        ),
        (
            format!("list {} pods (limit 500) p50 / p99", args.pods),
            p50_p99(&mut a.lists),
            p50_p99(&mut u.lists),
            String::new(),
        ),
        (
            "server CPU (both rounds)".into(),
            format!("{:.1} s", a.server_cpu),
            format!("{:.1} s", u.server_cpu),
            String::new(),
        ),
        (
            "create p99: user / admin".into(),
            String::new(),
            format!("{:.2}× ({} / {})", ratio(cu, ca), ms(cu), ms(ca)),
            format!("≤ 1.05× ({})", verdict(ratio(cu, ca))),
        ),
        (
            "LIST p50: user / admin".into(),
            String::new(),
            format!("{:.2}× ({} / {})", ratio(lu, la), ms(lu), ms(la)),
            format!("≤ 1.05× ({})", verdict(ratio(lu, la))),
        ),
        (
            "each round in order: create p99 / LIST p50".into(),
            String::new(),
            rounds.join(" · "),
            String::new(),
        ),
        (
            "authorizer decisions/s, 50 bindings (in process)".into(),
            String::new(),
            format!("{allowed:.0} allowed, {denied:.0} not allowed"),
            String::new(),
        ),
    ];
    print_table(
        &format!(
            "RBAC: the same churn as the admin (system:masters) and as {USER} with 50 bindings; {} writes/s for {} s, {watchers} watchers, rounds admin, user, user, admin",
            args.writes_per_sec, args.seconds
        ),
        ["metric", "admin", USER, "target"],
        &rows,
    );
    Ok(())
}
