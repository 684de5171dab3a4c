//! Tests of the bootstrap policy: every object valid, spot checks against
//! upstream 1.33's golden policy, and reconciliation against a store.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use skiff_api::validation::rbac;
use skiff_store::sqlite::{Config, SqliteStore};
use skiff_store::Store;

use super::reconcile::{reconciled_binding, reconciled_role, Plan};
use super::*;
use crate::authz::rbac::escalation::uncovered;

fn find<'a>(objs: &'a [Value], name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

/// Whether `role`'s rules allow `verb` on `resource` in `group` (named
/// `name`, if given).
fn allows(role: &Value, verb: &str, group: &str, resource: &str, name: Option<&str>) -> bool {
    let parse = |v: &Value| -> Vec<_> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| serde_json::from_value(r.clone()).unwrap())
            .collect()
    };
    let mut wanted = json!({"verbs": [verb], "apiGroups": [group], "resources": [resource]});
    if let Some(n) = name {
        wanted["resourceNames"] = json!([n]);
    }
    uncovered(&parse(&role["rules"]), &parse(&json!([wanted]))).is_empty()
}

#[test]
fn defaults_validate_and_aggregate() {
    let mut roles = cluster_roles();
    aggregate(&mut roles);
    let len = |n: &str| find(&roles, n)["rules"].as_array().unwrap().len();
    let (view, edit, admin) = (len("view"), len("edit"), len("admin"));
    // view also gathers system:aggregated-metrics-reader's one rule.
    assert_eq!(view, len("system:aggregate-to-view") + 1);
    assert!(allows(
        find(&roles, "view"),
        "list",
        "metrics.k8s.io",
        "pods",
        None
    ));
    assert!(view < edit && edit < admin, "{view} {edit} {admin}");
    let all = [
        (roles.clone(), rbac::cluster_role as fn(&Value) -> Vec<_>),
        (cluster_role_bindings(), rbac::cluster_role_binding),
        (super::roles(), rbac::role),
        (role_bindings(), rbac::role_binding),
    ];
    for (objs, validate) in &all {
        let mut names = BTreeSet::new();
        for o in objs {
            assert!(validate(o).is_empty(), "{o}: {:?}", validate(o));
            assert_eq!(o["metadata"]["labels"][BOOTSTRAPPING], "rbac-defaults");
            assert_eq!(o["metadata"]["annotations"][AUTOUPDATE], "true");
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("");
            assert!(
                names.insert((ns, o["metadata"]["name"].as_str().unwrap())),
                "{o}"
            );
        }
    }
    // 31 roles of policy.go and 35 controller roles, 12 + 35 bindings;
    // Skiff's node role and 20 controller patch roles, each bound; and
    // Skiff's DNS Role and RoleBinding in kube-system; metrics-server's
    // system:aggregated-metrics-reader.
    assert_eq!(roles.len(), 88);
    assert_eq!(cluster_role_bindings().len(), 68);
    assert_eq!(super::roles().len(), 8);
    assert_eq!(role_bindings().len(), 8);
}

#[test]
fn every_controller_role_is_bound_to_its_service_account() {
    let bindings = cluster_role_bindings();
    let controllers: Vec<_> = cluster_roles()
        .into_iter()
        .filter_map(|r| r["metadata"]["name"].as_str().map(str::to_string))
        .filter(|n| n.starts_with("system:controller:"))
        .collect();
    assert_eq!(controllers.len(), 35);
    for name in controllers {
        let b = find(&bindings, &name);
        assert_eq!(b["roleRef"]["name"], name.as_str());
        assert_eq!(
            b["subjects"],
            json!([{"kind": "ServiceAccount", "namespace": "kube-system",
                "name": name.trim_start_matches("system:controller:")}])
        );
    }
}

#[test]
fn spot_checks_against_upstream() {
    let mut roles = cluster_roles();
    aggregate(&mut roles);
    let r = |n: &str| find(&roles, n).clone();
    let sched = r("system:kube-scheduler");
    assert!(allows(
        &sched,
        "create",
        "coordination.k8s.io",
        "leases",
        None
    ));
    assert!(allows(
        &sched,
        "update",
        "coordination.k8s.io",
        "leases",
        Some("kube-scheduler")
    ));
    assert!(!allows(
        &sched,
        "update",
        "coordination.k8s.io",
        "leases",
        None
    ));
    assert!(allows(&sched, "create", "", "pods/binding", None));
    assert!(!allows(
        &sched,
        "get",
        "resource.k8s.io",
        "resourceclaims",
        None
    ));
    let rs = r("system:controller:replicaset-controller");
    assert!(allows(&rs, "create", "", "pods", None) && allows(&rs, "delete", "", "pods", None));
    assert!(!allows(&rs, "get", "", "pods", None));
    let proxier = r("system:node-proxier");
    assert!(allows(
        &proxier,
        "list",
        "discovery.k8s.io",
        "endpointslices",
        None
    ));
    assert!(allows(
        &proxier,
        "watch",
        "networking.k8s.io",
        "servicecidrs",
        None
    ));
    let node = r("system:node");
    assert!(allows(&node, "create", "", "pods/eviction", None));
    assert!(allows(&node, "get", "node.k8s.io", "runtimeclasses", None));
    assert!(!allows(
        &node,
        "get",
        "certificates.k8s.io",
        "clustertrustbundles",
        None
    ));
    assert!(allows(
        &r("system:kubelet-api-admin"),
        "get",
        "",
        "nodes/configz",
        None
    ));
    let kcm = r("system:kube-controller-manager");
    assert!(allows(&kcm, "list", "apps", "deployments", None));
    assert!(!allows(
        &kcm,
        "update",
        "coordination.k8s.io",
        "leases",
        Some("x")
    ));
    let edit = r("edit");
    assert!(allows(&edit, "create", "", "serviceaccounts/token", None));
    assert!(allows(&edit, "get", "", "pods", None));
    assert!(!allows(
        &edit,
        "create",
        "rbac.authorization.k8s.io",
        "roles",
        None
    ));
    assert!(allows(
        &r("admin"),
        "create",
        "rbac.authorization.k8s.io",
        "roles",
        None
    ));
    let approver = r("system:certificates.k8s.io:kubelet-serving-approver");
    assert_eq!(
        approver["rules"][0]["resourceNames"],
        json!(["kubernetes.io/kubelet-serving"])
    );
    // Rule lists come sorted, as upstream's builder keeps them.
    assert_eq!(
        find(&roles, "system:controller:job-controller")["rules"][3]["verbs"],
        json!(["create", "delete", "list", "patch", "watch"])
    );

    let bindings = cluster_role_bindings();
    let node_binding = find(&bindings, "system:node");
    assert!(node_binding.get("subjects").is_none());
    assert_eq!(
        find(&bindings, "system:volume-scheduler")["subjects"][0]["name"],
        "system:kube-scheduler"
    );
    assert_eq!(
        find(&bindings, "system:service-account-issuer-discovery")["subjects"][0]["name"],
        "system:serviceaccounts"
    );
    let rbs = role_bindings();
    let lock = rbs
        .iter()
        .find(|b| b["metadata"]["name"] == "system::leader-locking-kube-controller-manager")
        .unwrap();
    assert_eq!(lock["metadata"]["namespace"], "kube-system");
    assert_eq!(lock["subjects"].as_array().unwrap().len(), 3);
    let public: Vec<_> = super::roles()
        .into_iter()
        .filter(|r| r["metadata"]["namespace"] == "kube-public")
        .collect();
    assert_eq!(public.len(), 1);
    assert!(allows(
        &public[0],
        "update",
        "",
        "configmaps",
        Some("cluster-info")
    ));
}

fn store(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("db"), Config::default()).expect("store")
}

fn key(plural: &str, ns: Option<&str>, name: &str) -> String {
    let r = crate::resources::find_builtin("rbac.authorization.k8s.io", "v1", plural).unwrap();
    crate::object::key(r, ns, name)
}

async fn put(store: &SqliteStore, key: &str, obj: Value) -> i64 {
    let body = serde_json::to_vec(&obj).unwrap();
    store.create(key, body.into()).await.unwrap().mod_revision
}

async fn read(store: &SqliteStore, key: &str) -> (Value, i64) {
    let kv = store.get(key).await.unwrap();
    (serde_json::from_slice(&kv.value).unwrap(), kv.mod_revision)
}

#[tokio::test]
async fn ensure_creates_then_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    ensure(&s).await.unwrap();
    let (lock, _) = read(
        &s,
        &key(
            "roles",
            Some("kube-system"),
            "system::leader-locking-kube-scheduler",
        ),
    )
    .await;
    assert_eq!(lock["metadata"]["namespace"], "kube-system");
    assert!(lock["metadata"]["uid"].is_string());
    let (edit, _) = read(&s, &key("clusterroles", None, "edit")).await;
    assert!(allows(&edit, "create", "", "pods/eviction", None));
    let before = s.current_revision().await.unwrap();
    ensure(&s).await.unwrap();
    assert_eq!(s.current_revision().await.unwrap(), before);
}

#[tokio::test]
async fn an_autoupdate_role_gets_missing_rules_and_keeps_extra_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let k = key("clusterroles", None, "system:kube-dns");
    let extra = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]});
    put(
        &s,
        &k,
        json!({
            "kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "system:kube-dns", "labels": {"mine": "yes"},
                "annotations": {AUTOUPDATE: "true"}},
            "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["endpoints"]}, extra],
        }),
    )
    .await;
    ensure(&s).await.unwrap();
    let (role, _) = read(&s, &k).await;
    let rules = role["rules"].as_array().unwrap();
    assert!(rules.contains(&extra));
    for (verb, resource) in [
        ("list", "endpoints"),
        ("watch", "endpoints"),
        ("list", "services"),
    ] {
        assert!(allows(&role, verb, "", resource, None), "{verb} {resource}");
    }
    // Broken down as upstream appends them: one verb on one resource.
    assert!(
        rules.contains(&json!({"verbs": ["watch"], "apiGroups": [""], "resources": ["services"]}))
    );
    assert_eq!(role["metadata"]["labels"]["mine"], "yes");
    assert_eq!(role["metadata"]["labels"][BOOTSTRAPPING], "rbac-defaults");
    assert!(rbac::cluster_role(&role).is_empty());
}

#[tokio::test]
async fn a_role_with_autoupdate_false_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let k = key(
        "roles",
        Some("kube-system"),
        "system:controller:token-cleaner",
    );
    let stored = json!({
        "kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": {"name": "system:controller:token-cleaner", "namespace": "kube-system",
            "annotations": {AUTOUPDATE: "false"}},
        "rules": [],
    });
    let rev = put(&s, &k, stored.clone()).await;
    ensure(&s).await.unwrap();
    assert_eq!(read(&s, &k).await, (stored, rev));
}

#[tokio::test]
async fn a_binding_gets_missing_subjects_and_keeps_extra_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let k = key("clusterrolebindings", None, "system:kube-scheduler");
    let extra = json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"});
    put(
        &s,
        &k,
        json!({
            "kind": "ClusterRoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "system:kube-scheduler", "uid": "u1"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "system:kube-scheduler"},
            "subjects": [extra],
        }),
    )
    .await;
    ensure(&s).await.unwrap();
    let (b, _) = read(&s, &k).await;
    assert_eq!(b["metadata"]["uid"], "u1");
    assert_eq!(b["subjects"][0], extra);
    assert_eq!(b["subjects"][1]["name"], "system:kube-scheduler");
    assert_eq!(b["metadata"]["annotations"][AUTOUPDATE], "true");
}

#[tokio::test]
async fn a_binding_to_another_role_is_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(&dir);
    let k = key(
        "rolebindings",
        Some("kube-public"),
        "system:controller:bootstrap-signer",
    );
    let extra = json!({"kind": "ServiceAccount", "name": "other", "namespace": "kube-public"});
    put(
        &s,
        &k,
        json!({
            "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "system:controller:bootstrap-signer", "namespace": "kube-public",
                "uid": "old"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "view"},
            "subjects": [extra],
        }),
    )
    .await;
    ensure(&s).await.unwrap();
    let (b, _) = read(&s, &k).await;
    assert_ne!(b["metadata"]["uid"], "old");
    assert_eq!(b["roleRef"]["kind"], "Role");
    assert_eq!(b["roleRef"]["name"], "system:controller:bootstrap-signer");
    assert_eq!(b["subjects"][0], extra);
    assert_eq!(b["subjects"][1]["name"], "bootstrap-signer");
    assert!(rbac::role_binding(&b).is_empty());
}

#[test]
fn aggregated_roles_reconcile_only_their_selectors() {
    let mut roles = cluster_roles();
    aggregate(&mut roles);
    let expected = find(&roles, "edit").clone();
    let mut existing = expected.clone();
    existing["rules"] = json!([]);
    assert_eq!(reconciled_role(&existing, &expected), None);
    existing["aggregationRule"] =
        json!({"clusterRoleSelectors": [{"matchLabels": {"custom": "true"}}]});
    let result = reconciled_role(&existing, &expected).unwrap();
    assert_eq!(result["rules"], json!([]));
    let selectors = result["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .unwrap();
    assert_eq!(selectors.len(), 2);
    assert_eq!(selectors[0]["matchLabels"]["custom"], "true");
    // A role upstream does not aggregate loses a stored aggregation rule.
    let dns = find(&roles, "system:kube-dns").clone();
    let mut stored = dns.clone();
    stored["aggregationRule"] = existing["aggregationRule"].clone();
    assert_eq!(reconciled_role(&stored, &dns), Some(dns.clone()));
    // Bindings: equal ones need nothing; protected ones are kept.
    let b = find(&cluster_role_bindings(), "cluster-admin").clone();
    assert_eq!(reconciled_binding(&b, &b), Plan::Keep);
    let mut off = b.clone();
    off["metadata"]["annotations"][AUTOUPDATE] = json!("false");
    off["roleRef"]["name"] = json!("view");
    assert_eq!(reconciled_binding(&off, &b), Plan::Keep);
}
