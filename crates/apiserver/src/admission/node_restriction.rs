//! NodeRestriction (upstream's `plugin/pkg/admission/noderestriction`):
//! what a node agent (`system:node:<name>` in `system:nodes`) may write
//! about the objects the Node authorizer lets it touch. It may create and
//! change only its own Node, may not set labels under
//! `node-restriction.kubernetes.io/` nor unknown `kubernetes.io`/`k8s.io`
//! labels, may not change its own taints once registered, may write the
//! status only of pods bound to it, create only mirror pods bound to it,
//! and touch only the Lease and CSINode named after it. Deleting pods of
//! other nodes is refused in the delete path ([`check_pod_delete`]), as
//! Skiff's admission does not see deletes, and a node's TokenRequest must
//! be bound to one of its own pods ([`token_binding`],
//! [`check_token_pod`], called by the TokenRequest handler).
//!
//! Other users' writes pass untouched. Messages are upstream's.

use async_trait::async_trait;
use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::authz::node::node_identity;
use crate::status::{ApiError, ApiResult};

#[derive(Debug)]
pub struct NodeRestriction;

/// `node-restriction.kubernetes.io`: labels only admins may set.
const RESTRICTED_NAMESPACE: &str = "node-restriction.kubernetes.io";
/// Labels under kubernetes.io a kubelet may set (upstream's
/// `kubeletapis.IsKubeletLabel`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];
const KUBELET_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];

fn in_namespace(namespace: &str, of: &str) -> bool {
    namespace == of
        || namespace
            .strip_suffix(of)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// Whether a node may not set label `key` (upstream's
/// `getForbiddenLabels`).
pub fn forbidden_label(key: &str) -> bool {
    let namespace = key.split_once('/').map(|(ns, _)| ns).unwrap_or("");
    if in_namespace(namespace, RESTRICTED_NAMESPACE) {
        return true;
    }
    let kubernetes = in_namespace(namespace, "kubernetes.io") || in_namespace(namespace, "k8s.io");
    let kubelet = KUBELET_LABELS.contains(&key)
        || KUBELET_NAMESPACES
            .iter()
            .any(|ns| in_namespace(namespace, ns));
    kubernetes && !kubelet
}

/// The labels `new` sets or changes (or removes) compared with `old`.
fn modified_labels<'a>(new: &'a Value, old: Option<&'a Value>) -> Vec<&'a str> {
    let labels = |v: Option<&'a Value>| {
        v.and_then(|v| v.pointer("/metadata/labels"))
            .and_then(Value::as_object)
    };
    let (new_labels, old_labels) = (labels(Some(new)), labels(old));
    let mut keys: Vec<&str> = Vec::new();
    for (k, v) in new_labels.into_iter().flatten() {
        if old_labels.and_then(|o| o.get(k)) != Some(v) {
            keys.push(k);
        }
    }
    for k in old_labels.into_iter().flatten().map(|(k, _)| k) {
        if new_labels.is_none_or(|n| !n.contains_key(k)) {
            keys.push(k);
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn node_name_of(pod: &Value) -> &str {
    pod.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn refuse(attrs: &Attributes<'_>, why: String) -> ApiError {
    let r = attrs.resource;
    let resource = if r.group.is_empty() {
        r.plural.to_string()
    } else {
        format!("{}.{}", r.plural, r.group)
    };
    ApiError::forbidden(format!("{resource} \"{}\" is forbidden: {why}", attrs.name))
}

/// The requesting node, if a node is asking.
fn requesting_node() -> Option<String> {
    let user = crate::authn::requester::current()?;
    node_identity(&user).map(String::from)
}

/// Refuses a node's delete of a pod bound to another node (upstream does
/// this in NodeRestriction's delete admission).
pub fn check_pod_delete(plural: &str, group: &str, pod: &Value) -> ApiResult<()> {
    if plural != "pods" || !group.is_empty() {
        return Ok(());
    }
    let Some(node) = requesting_node() else {
        return Ok(());
    };
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node_name_of(pod) != node {
        return Err(ApiError::forbidden(format!(
            "pods \"{name}\" is forbidden: node \"{node}\" can only delete pods with spec.nodeName set to itself"
        )));
    }
    Ok(())
}

/// A TokenRequest by a node must be bound to a pod (upstream's
/// `admitServiceAccount`): `Ok(Some(node))` when a node asks (the pod is
/// then checked by [`check_token_pod`]), `Ok(None)` for anyone else.
pub fn token_binding(account: &str, bound_kind: Option<&str>) -> ApiResult<Option<String>> {
    let Some(node) = requesting_node() else {
        return Ok(None);
    };
    if bound_kind != Some("Pod") {
        return Err(ApiError::forbidden(format!(
            "serviceaccounts \"{account}\" is forbidden: node requested token not bound to a pod"
        )));
    }
    Ok(Some(node))
}

/// The pod a node's token is bound to must run on that node.
pub fn check_token_pod(node: &str, account: &str, pod: &Value) -> ApiResult<()> {
    if node_name_of(pod) != node {
        return Err(ApiError::forbidden(format!(
            "serviceaccounts \"{account}\" is forbidden: node requested token bound to a pod scheduled on a different node"
        )));
    }
    Ok(())
}

impl NodeRestriction {
    fn pods(attrs: &Attributes<'_>, node: &str, object: &Value) -> Result<(), String> {
        match (attrs.operation, attrs.subresource) {
            (Operation::Create, None) => {
                let mirror = object
                    .pointer("/metadata/annotations/kubernetes.io~1config.mirror")
                    .is_some();
                if !mirror {
                    return Err(format!("pod does not have \"kubernetes.io/config.mirror\" annotation, node \"{node}\" can only create mirror pods"));
                }
                if node_name_of(object) != node {
                    return Err(format!(
                        "node \"{node}\" can only create pods with spec.nodeName set to itself"
                    ));
                }
                Ok(())
            }
            (Operation::Update, Some("status")) => {
                let bound = attrs.old.map(node_name_of).unwrap_or("");
                if bound != node {
                    return Err(format!("node \"{node}\" can only update pod status for pods with spec.nodeName set to itself"));
                }
                Ok(())
            }
            (Operation::Create, Some("eviction")) => Ok(()),
            (op, sub) => Err(format!(
                "unexpected operation {}{}, node \"{node}\" can only create and delete mirror pods",
                match op {
                    Operation::Create => "CREATE",
                    Operation::Update => "UPDATE",
                },
                sub.map(|s| format!(" of {s}")).unwrap_or_default()
            )),
        }
    }

    fn nodes(attrs: &Attributes<'_>, node: &str, object: &Value) -> Result<(), String> {
        if attrs.name != node {
            return Err(format!(
                "node \"{node}\" is not allowed to modify node \"{}\"",
                attrs.name
            ));
        }
        match attrs.operation {
            Operation::Create => {
                let forbidden: Vec<&str> = modified_labels(object, None)
                    .into_iter()
                    .filter(|k| forbidden_label(k))
                    .collect();
                if !forbidden.is_empty() {
                    return Err(format!(
                        "node \"{node}\" is not allowed to set the following labels: {}",
                        forbidden.join(", ")
                    ));
                }
            }
            Operation::Update => {
                let taints = |v: Option<&Value>| {
                    v.and_then(|v| v.pointer("/spec/taints"))
                        .filter(|t| !t.is_null() && t.as_array().is_none_or(|a| !a.is_empty()))
                        .cloned()
                };
                if taints(Some(object)) != taints(attrs.old) {
                    return Err(format!("node \"{node}\" is not allowed to modify taints"));
                }
                let forbidden: Vec<&str> = modified_labels(object, attrs.old)
                    .into_iter()
                    .filter(|k| forbidden_label(k))
                    .collect();
                if !forbidden.is_empty() {
                    return Err(format!(
                        "is not allowed to modify labels: {}",
                        forbidden.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Plugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    async fn validate(&self, attrs: &Attributes<'_>, object: &Value) -> ApiResult<()> {
        let r = attrs.resource;
        let checked = matches!(
            (r.group, r.plural),
            ("", "pods")
                | ("", "nodes")
                | ("coordination.k8s.io", "leases")
                | ("storage.k8s.io", "csinodes")
        );
        if !checked {
            return Ok(());
        }
        let Some(node) = requesting_node() else {
            return Ok(());
        };
        let result = match (r.group, r.plural) {
            ("", "pods") => Self::pods(attrs, &node, object),
            ("", "nodes") => Self::nodes(attrs, &node, object),
            ("coordination.k8s.io", "leases") if attrs.name != node => {
                Err("can only access leases with the same name as the requesting node".to_string())
            }
            ("storage.k8s.io", "csinodes") if attrs.name != node => Err(format!(
                "node \"{node}\" is not allowed to modify csinode \"{}\"",
                attrs.name
            )),
            _ => Ok(()),
        };
        result.map_err(|why| refuse(attrs, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_a_node_may_not_set() {
        for key in [
            "node-restriction.kubernetes.io/pool",
            "team.node-restriction.kubernetes.io/x",
            "node-role.kubernetes.io/control-plane",
            "kubernetes.io/role",
            "example.k8s.io/x",
        ] {
            assert!(forbidden_label(key), "{key}");
        }
        for key in [
            "kubernetes.io/hostname",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "kubelet.kubernetes.io/x",
            "example.com/tier",
            "plain",
            "notkubernetes.io/x",
        ] {
            assert!(!forbidden_label(key), "{key}");
        }
    }

    #[test]
    fn modified_labels_are_the_changed_added_and_removed() {
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}});
        let new = json!({"metadata": {"labels": {"a": "1", "b": "x", "d": "4"}}});
        assert_eq!(modified_labels(&new, Some(&old)), vec!["b", "c", "d"]);
        assert_eq!(modified_labels(&new, None), vec!["a", "b", "d"]);
    }
}
