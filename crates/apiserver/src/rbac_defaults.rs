//! The default cluster roles and bindings upstream's RBAC bootstrap policy
//! creates (plugin/pkg/auth/authorizer/rbac/bootstrappolicy, 1.33), the
//! ones users meet on day one: `cluster-admin`, the user-facing `admin`,
//! `edit` and `view` with their aggregation rules and the
//! `system:aggregate-to-*` roles they aggregate, `system:basic-user`,
//! `system:discovery`, `system:public-info-viewer`, and their bindings
//! (`cluster-admin` to `system:masters`, the others to
//! `system:authenticated`/`system:unauthenticated`). Each carries
//! `kubernetes.io/bootstrapping: rbac-defaults` and
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`. [`ensure`]
//! creates those that are absent at server start and never changes
//! existing ones. The aggregated roles' rules are computed here from the
//! bootstrap roles ([`aggregate`], upstream's clusterrole-aggregation
//! controller's rule); roles users add later with an aggregation label are
//! not folded in (there is no aggregation controller yet).

use serde_json::{json, Value};
use skiff_store::Store;

use crate::object;
use crate::resources;

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

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn metadata(name: &str, labels: &[(&str, &str)]) -> Value {
    let mut l = serde_json::Map::new();
    for (k, v) in labels {
        l.insert((*k).into(), json!(v));
    }
    l.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    json!({
        "name": name,
        "labels": l,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({
        "kind": "ClusterRole",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": metadata(name, labels),
        "rules": rules,
    })
}

fn aggregated(name: &str, labels: &[(&str, &str)], selector: &str) -> Value {
    let mut r = role(name, labels, Vec::new());
    object::set(
        &mut r,
        "aggregationRule",
        json!({"clusterRoleSelectors": [{"matchLabels": {selector: "true"}}]}),
    );
    r
}

const TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The default cluster roles, before aggregation.
pub fn cluster_roles() -> Vec<Value> {
    vec![
        role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
            ],
        ),
        role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
            )],
        ),
        aggregated("admin", &[], TO_ADMIN),
        aggregated("edit", &[(TO_ADMIN, "true")], TO_EDIT),
        aggregated("view", &[(TO_EDIT, "true")], TO_VIEW),
        role(
            "system:aggregate-to-admin",
            &[(TO_ADMIN, "true")],
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(
                    READ_WRITE,
                    &["rbac.authorization.k8s.io"],
                    &["rolebindings", "roles"],
                ),
            ],
        ),
        role(
            "system:aggregate-to-edit",
            &[(TO_EDIT, "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/exec",
                        "pods/portforward",
                        "pods/proxy",
                    ],
                ),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "configmaps",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                ),
                rule(
                    WRITE,
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                ),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["cronjobs", "jobs"]),
                rule(
                    WRITE,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "ingresses",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    &["networking.k8s.io"],
                    &["ingresses", "networkpolicies"],
                ),
            ],
        ),
        role(
            "system:aggregate-to-view",
            &[(TO_VIEW, "true")],
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                ),
                rule(
                    READ,
                    &[""],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                ),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                ),
                rule(
                    READ,
                    &["autoscaling"],
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    &["batch"],
                    &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                ),
                rule(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "networkpolicies",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                    ],
                ),
                rule(
                    READ,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    &["networking.k8s.io"],
                    &["ingresses", "ingresses/status", "networkpolicies"],
                ),
            ],
        ),
    ]
}

fn binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
        .collect();
    json!({
        "kind": "ClusterRoleBinding",
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "metadata": metadata(role, &[]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

/// The default cluster role bindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", &["system:masters"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding("system:discovery", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
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

/// Creates the default roles and bindings that are absent.
pub async fn ensure(store: &dyn Store) -> Result<(), (String, skiff_store::Error)> {
    let mut roles = cluster_roles();
    aggregate(&mut roles);
    let pairs = [
        ("clusterroles", roles),
        ("clusterrolebindings", cluster_role_bindings()),
    ];
    for (plural, objects) in pairs {
        let Some(r) = resources::find_builtin("rbac.authorization.k8s.io", "v1", plural) else {
            continue;
        };
        for mut obj in objects {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let meta = object::meta(&mut obj);
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(object::now()));
            let body = serde_json::to_vec(&obj).unwrap_or_default();
            match store
                .create(&object::key(r, None, &name), body.into())
                .await
            {
                Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => {}
                Err(e) => return Err((name, e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_aggregate() {
        let mut roles = cluster_roles();
        aggregate(&mut roles);
        let find = |n: &str| {
            roles
                .iter()
                .find(|r| r["metadata"]["name"] == n)
                .unwrap()
                .clone()
        };
        let view = find("view")["rules"].as_array().unwrap().len();
        let edit = find("edit")["rules"].as_array().unwrap().len();
        let admin = find("admin")["rules"].as_array().unwrap().len();
        assert_eq!(
            view,
            find("system:aggregate-to-view")["rules"]
                .as_array()
                .unwrap()
                .len()
        );
        assert!(view < edit && edit < admin, "{view} {edit} {admin}");
        for r in &roles {
            assert!(
                skiff_api::validation::rbac::cluster_role(r).is_empty(),
                "{r}"
            );
            assert_eq!(
                r["metadata"]["labels"]["kubernetes.io/bootstrapping"],
                "rbac-defaults"
            );
        }
        for b in cluster_role_bindings() {
            assert!(skiff_api::validation::rbac::cluster_role_binding(&b).is_empty());
        }
    }
}
