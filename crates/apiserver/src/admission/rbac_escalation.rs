//! RBAC escalation prevention: a user may create or change a Role or
//! ClusterRole only with rules they hold themselves (or the `escalate`
//! verb on it), and bind a role only if they hold its rules (or the `bind`
//! verb on it); an aggregationRule, which can gather anything, needs
//! every permission. Members of `system:masters` and writes from inside
//! the server (no requester) pass, and so does an update that only
//! changes ownerReferences or finalizers (the garbage collector's). Upstream does this in the
//! RBAC kinds' own storage (`registry/rbac/*/policybased`); here it is a
//! validating admission step, with upstream's Forbidden words
//! (`crate::authz::rbac::escalation`).

use async_trait::async_trait;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;

use super::{Attributes, Operation, Plugin};
use crate::authn::User;
use crate::authz::rbac::escalation;
use crate::status::{ApiError, ApiResult};

const GROUP: &str = "rbac.authorization.k8s.io";

#[derive(Debug)]
pub struct RbacEscalation;

/// `obj[name]` decoded: `Ok(None)` when absent or null, an error (the
/// check then refuses: it fails closed) when it does not decode.
fn field<T: serde::de::DeserializeOwned>(obj: &Value, name: &str) -> Result<Option<T>, String> {
    match obj.get(name).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone())
            .map(Some)
            .map_err(|e| format!("{name} does not decode: {e}")),
    }
}

/// Whether an object asks to aggregate (any clusterRoleSelectors, read
/// from the raw tree so no decoding quirk can hide one).
fn aggregates(obj: &Value) -> bool {
    obj.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

/// Whether `new` differs from `old` only where the garbage collector
/// writes (upstream's `IsOnlyMutatingGCFields`).
fn only_gc_fields(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "ownerReferences",
                "finalizers",
                "resourceVersion",
                "managedFields",
            ] {
                meta.remove(k);
            }
        }
        v
    };
    strip(old) == strip(new)
}

fn forbidden(plural: &str, name: &str, why: &str) -> ApiError {
    ApiError::forbidden(format!("{plural}.{GROUP} \"{name}\" is forbidden: {why}"))
}

impl RbacEscalation {
    /// `user` holds every rule of `wanted` in `namespace`.
    fn confirm(
        attrs: &Attributes<'_>,
        user: &User,
        namespace: &str,
        wanted: &[PolicyRule],
    ) -> Result<(), String> {
        let (held, unresolved) = attrs.state.rbac.held(user, namespace);
        let missing = escalation::uncovered(&held, wanted);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(escalation::message(user, missing, unresolved))
        }
    }

    fn allowed(attrs: &Attributes<'_>, a: &crate::authz::Attributes<'_>) -> bool {
        crate::authz::allowed(attrs.state.authorizers, a)
    }
}

#[async_trait]
impl Plugin for RbacEscalation {
    fn name(&self) -> &'static str {
        "RBACEscalation"
    }

    async fn validate(&self, attrs: &Attributes<'_>, object: &Value) -> ApiResult<()> {
        let r = attrs.resource;
        if r.group != GROUP || attrs.subresource.is_some() {
            return Ok(());
        }
        let Some(user) = crate::authn::requester::current() else {
            return Ok(());
        };
        if user.groups.iter().any(|g| g == "system:masters") {
            return Ok(());
        }
        if attrs.operation == Operation::Update
            && attrs.old.is_some_and(|old| only_gc_fields(old, object))
        {
            return Ok(());
        }
        let namespace = attrs.namespace.unwrap_or("");
        let name = attrs.name;
        match r.plural {
            "roles" | "clusterroles" => {
                // The request's name, as upstream asks: none for a create.
                let asked = if attrs.operation == Operation::Create {
                    ""
                } else {
                    name
                };
                let escalate =
                    crate::authz::Attributes::resource(&user, "escalate", GROUP, r.plural)
                        .in_namespace(namespace)
                        .named(asked);
                if Self::allowed(attrs, &escalate) {
                    return Ok(());
                }
                let rules: Vec<PolicyRule> = field(object, "rules")
                    .map_err(|why| forbidden(r.plural, name, &why))?
                    .unwrap_or_default();
                Self::confirm(attrs, &user, namespace, &rules)
                    .map_err(|why| forbidden(r.plural, name, &why))?;
                // Setting, changing or removing an aggregationRule.
                let aggregated = aggregates(object) || attrs.old.is_some_and(aggregates);
                if aggregated
                    && Self::confirm(attrs, &user, namespace, &escalation::full_authority())
                        .is_err()
                {
                    return Err(forbidden(
                        r.plural,
                        name,
                        "must have cluster-admin privileges to use the aggregationRule",
                    ));
                }
                Ok(())
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref = match field::<RoleRef>(object, "roleRef") {
                    Ok(Some(r)) => r,
                    Ok(None) => return Ok(()), // validation words a missing roleRef
                    Err(why) => return Err(forbidden(r.plural, name, &why)),
                };
                let cluster_role = role_ref.kind == "ClusterRole";
                let role_resource = if cluster_role {
                    "clusterroles"
                } else {
                    "roles"
                };
                let bind = crate::authz::Attributes::resource(&user, "bind", GROUP, role_resource)
                    .in_namespace(namespace)
                    .named(&role_ref.name);
                if Self::allowed(attrs, &bind) {
                    return Ok(());
                }
                let role_ns = (!cluster_role).then_some(namespace);
                let Some(rules) = attrs.state.rbac.role_rules(role_ns, &role_ref.name) else {
                    let what = if cluster_role {
                        format!("clusterrole.{GROUP} \"{}\" not found", role_ref.name)
                    } else {
                        format!("role.{GROUP} \"{}\" not found", role_ref.name)
                    };
                    return Err(forbidden(r.plural, name, &what));
                };
                Self::confirm(attrs, &user, namespace, &rules)
                    .map_err(|why| forbidden(r.plural, name, &why))
            }
            _ => Ok(()),
        }
    }
}
