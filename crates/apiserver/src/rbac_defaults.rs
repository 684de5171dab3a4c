//! Upstream's RBAC bootstrap policy (plugin/pkg/auth/authorizer/rbac/
//! bootstrappolicy, Kubernetes 1.33, with 1.33's default feature gates),
//! reconciled into the store at server start.
//!
//! The policy is split by where upstream defines it:
//! - [`user_facing`]: `cluster-admin`, `system:discovery`,
//!   `system:monitoring`, `system:basic-user`, `system:public-info-viewer`,
//!   the aggregated `admin`/`edit`/`view` and the `system:aggregate-to-*`
//!   roles they gather, with their bindings;
//! - [`components`]: the roles of the system components (`system:node`,
//!   `system:kube-scheduler`, `system:node-proxier`, the CSR approvers, …)
//!   and their bindings (policy.go);
//! - [`controllers`]: one `system:controller:<name>` ClusterRole per
//!   kube-controller-manager controller, bound to the ServiceAccount
//!   `kube-system/<name>` (controller_policy.go);
//! - [`namespaced`]: the Roles and RoleBindings of `kube-system` and
//!   `kube-public` (namespace_policy.go);
//! - [`skiff`]: what Skiff's node agent needs beyond upstream's kubelet
//!   (its embedded service proxy, DNS server and local-path cleaner).
//!
//! Every object carries `kubernetes.io/bootstrapping: rbac-defaults` and
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. Rule lists are
//! sorted as upstream's rule builder sorts them. [`ensure`] creates what is
//! absent and reconciles what exists as upstream's `reconciliation` package
//! does ([`reconcile`]). The aggregated roles are created with the rules
//! [`aggregate`] computes from the bootstrap roles (the
//! clusterrole-aggregation controller keeps them current afterwards).

use serde_json::{json, Value};
use skiff_store::Store;

use crate::object;
use crate::resources;

mod components;
mod controllers;
mod namespaced;
mod reconcile;
mod skiff;
#[cfg(test)]
mod tests;
mod user_facing;

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const READ_UPDATE: &[&str] = &["get", "list", "patch", "update", "watch"];

/// The label every bootstrap object carries.
const BOOTSTRAPPING: &str = "kubernetes.io/bootstrapping";
/// The annotation that lets an admin stop reconciliation (`"false"`).
const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Upstream's `NodeRules` (the `system:node` ClusterRole's rules), which
/// the Node authorizer applies to every node.
pub(crate) fn node_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    components::node_rules()
        .into_iter()
        .filter_map(|rule| serde_json::from_value(rule).ok())
        .collect()
}

/// `items` sorted and without duplicates, as upstream's rule builder keeps
/// its string sets.
fn sorted(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| (*s).to_string()).collect();
    v.sort();
    v.dedup();
    v
}

/// A resource rule.
fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": sorted(verbs), "apiGroups": sorted(groups), "resources": sorted(resources)})
}

/// A resource rule limited to some object names.
fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
    let mut r = rule(verbs, groups, resources);
    object::set(&mut r, "resourceNames", json!(sorted(names)));
    r
}

/// A non-resource URL rule.
fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": sorted(verbs), "nonResourceURLs": sorted(urls)})
}

/// Upstream's `eventsRule`: writing events in both event groups.
fn events_rule() -> Value {
    rule(
        &["create", "patch", "update"],
        &["", "events.k8s.io"],
        &["events"],
    )
}

fn metadata(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l = serde_json::Map::new();
    for (k, v) in labels {
        l.insert((*k).into(), json!(v));
    }
    l.insert(BOOTSTRAPPING.into(), json!("rbac-defaults"));
    json!({
        "name": name,
        "labels": l,
        "annotations": {AUTOUPDATE: "true"},
    })
}

/// A ClusterRole.
fn role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "kind": "ClusterRole",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": metadata(name, labels),
        "rules": rules,
    })
}

/// A ClusterRole aggregating the roles labelled `selector: "true"`.
fn aggregated(name: &str, labels: &[(&str, &str)], selector: &str) -> Value {
    let mut r = role(name, labels, Vec::new());
    object::set(
        &mut r,
        "aggregationRule",
        json!({"clusterRoleSelectors": [{"matchLabels": {selector: "true"}}]}),
    );
    r
}

/// A Role in `namespace`.
fn ns_role(namespace: &str, name: &str, rules: Vec<Value>) -> Value {
    let mut meta = metadata(name, &[]);
    object::set(&mut meta, "namespace", json!(namespace));
    json!({
        "kind": "Role",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": meta,
        "rules": rules,
    })
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": name})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": RBAC_GROUP, "name": name})
}

fn service_account(namespace: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
}

/// A ClusterRoleBinding named after the ClusterRole it binds. With no
/// subjects the field is left out, as upstream serializes it.
fn binding(role: &str, subjects: Vec<Value>) -> Value {
    let mut b = json!({
        "kind": "ClusterRoleBinding",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": metadata(role, &[]),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
    });
    if !subjects.is_empty() {
        object::set(&mut b, "subjects", json!(subjects));
    }
    b
}

/// A RoleBinding in `namespace` of the Role `role`.
fn ns_binding(namespace: &str, name: &str, role: &str, subjects: Vec<Value>) -> Value {
    let mut meta = metadata(name, &[]);
    object::set(&mut meta, "namespace", json!(namespace));
    json!({
        "kind": "RoleBinding",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role},
        "subjects": subjects,
    })
}

/// Every bootstrap ClusterRole, before aggregation.
pub fn cluster_roles() -> Vec<Value> {
    let mut roles = user_facing::roles();
    roles.extend(components::roles());
    roles.extend(controllers::roles());
    roles.extend(skiff::roles());
    roles
}

/// Every bootstrap ClusterRoleBinding.
pub fn cluster_role_bindings() -> Vec<Value> {
    let mut bindings = user_facing::bindings();
    bindings.extend(components::bindings());
    bindings.extend(controllers::bindings());
    bindings.extend(skiff::bindings());
    bindings
}

/// The bootstrap Roles, each with its `metadata.namespace`.
pub fn roles() -> Vec<Value> {
    let mut roles = namespaced::roles();
    roles.extend(skiff::namespaced_roles());
    roles
}

/// The bootstrap RoleBindings, each with its `metadata.namespace`.
pub fn role_bindings() -> Vec<Value> {
    let mut bindings = namespaced::bindings();
    bindings.extend(skiff::namespaced_bindings());
    bindings
}

/// Whether `labels` satisfy a selector's matchLabels and matchExpressions.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let match_exprs = exprs.iter().all(|e| {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match e.get("operator").and_then(Value::as_str) {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            _ => false,
        }
    });
    match_labels && match_exprs
}

/// Fills each aggregated role's rules from the roles its selectors pick
/// (by name order, without duplicates, never itself), until nothing
/// changes — upstream's clusterrole-aggregation rule, applied to `roles`.
pub fn aggregate(roles: &mut [Value]) {
    for _ in 0..roles.len() {
        let mut changed = false;
        let mut by_name: Vec<usize> = (0..roles.len()).collect();
        by_name.sort_by_key(|&i| {
            roles[i]
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        });
        for i in 0..roles.len() {
            let Some(selectors) = roles[i]
                .pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
                .cloned()
            else {
                continue;
            };
            let mut rules: Vec<Value> = Vec::new();
            for selector in &selectors {
                for &j in &by_name {
                    let labels = roles[j]
                        .pointer("/metadata/labels")
                        .cloned()
                        .unwrap_or(json!({}));
                    if j == i || !selects(selector, &labels) {
                        continue;
                    }
                    for r in roles[j]
                        .get("rules")
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or(&[])
                    {
                        if !rules.contains(r) {
                            rules.push(r.clone());
                        }
                    }
                }
            }
            if roles[i].get("rules") != Some(&json!(rules)) {
                object::set(&mut roles[i], "rules", json!(rules));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// Creates the bootstrap roles and bindings that are absent and reconciles
/// those that exist (see [`reconcile`]); the error names the object.
pub async fn ensure(store: &dyn Store) -> Result<(), (String, skiff_store::Error)> {
    let mut cluster_roles = cluster_roles();
    aggregate(&mut cluster_roles);
    let sets = [
        ("clusterroles", cluster_roles),
        ("clusterrolebindings", cluster_role_bindings()),
        ("roles", roles()),
        ("rolebindings", role_bindings()),
    ];
    for (plural, objects) in sets {
        let Some(r) = resources::find_builtin("rbac.authorization.k8s.io", "v1", plural) else {
            continue;
        };
        for obj in objects {
            let name = object::name_of(&obj).unwrap_or("").to_string();
            let namespace = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string);
            let key = object::key(r, namespace.as_deref(), &name);
            let result = if plural.ends_with("bindings") {
                reconcile::binding(store, &key, &obj).await
            } else {
                reconcile::role(store, &key, &obj).await
            };
            if let Err(e) = result {
                let full = match namespace {
                    Some(ns) => format!("{ns}/{name}"),
                    None => name,
                };
                return Err((full, e));
            }
        }
    }
    Ok(())
}
