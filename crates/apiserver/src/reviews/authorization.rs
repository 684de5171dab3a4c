//! SubjectAccessReview, SelfSubjectAccessReview, LocalSubjectAccessReview
//! and SelfSubjectRulesReview (upstream `registry/authorization/*`),
//! answered by the server's authorizer chain with upstream's validation
//! (`pkg/apis/authorization/validation`).
//!
//! A review's attributes are what the chain of
//! [`Authorizer`](crate::authz::Authorizer)s judges, as they are for a
//! request.

use serde_json::{json, Value};

use super::{with_status, Context};
use crate::authn::User;
use crate::authz::Rules;
use crate::status::{ApiError, ApiResult, Cause};

const GROUP: &str = "authorization.k8s.io";

fn s<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

fn present<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|x| !x.is_null())
}

fn cause(field: &str, shown: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

/// Go's `%#v` of an `authorization.NonResourceAttributes`.
fn go_non_resource(v: &Value) -> String {
    format!(
        "authorization.NonResourceAttributes{{Path:{:?}, Verb:{:?}}}",
        s(v, "path"),
        s(v, "verb")
    )
}

/// `ValidateSelfSubjectAccessReviewSpec`: exactly one kind of attributes.
fn attribute_errors(spec: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let resource = present(spec, "resourceAttributes");
    let non_resource = present(spec, "nonResourceAttributes");
    if let (Some(_), Some(nr)) = (resource, non_resource) {
        causes.push(cause(
            "spec.nonResourceAttributes",
            &go_non_resource(nr),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if resource.is_none() && non_resource.is_none() {
        causes.push(cause(
            "spec.resourceAttributes",
            "\"null\"",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    causes
}

/// `ValidateSubjectAccessReviewSpec`: and a user or a group.
fn subject_errors(spec: &Value) -> Vec<Cause> {
    let mut causes = attribute_errors(spec);
    let groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if s(spec, "user").is_empty() && !groups {
        causes.push(cause(
            "spec.user",
            "\"\"",
            "at least one of user or group must be specified",
        ));
    }
    causes
}

/// Whether metadata holds anything but `keep` (and managedFields).
fn metadata_set(obj: &Value, keep: &[&str]) -> bool {
    obj.get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|m| {
            m.iter().any(|(k, v)| {
                !keep.contains(&k.as_str())
                    && k != "managedFields"
                    && !(v.is_null()
                        || v.as_str() == Some("")
                        || v.as_object().is_some_and(|o| o.is_empty())
                        || v.as_array().is_some_and(|a| a.is_empty())
                        || v.as_i64() == Some(0))
            })
        })
}

fn invalid(kind: &str, causes: Vec<Cause>) -> ApiResult<()> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(GROUP, kind, "", causes))
    }
}

/// The attributes `spec` describes, for `user`.
fn attributes_of<'a>(spec: &Value, user: &'a User) -> crate::authz::Attributes<'a> {
    use crate::authz::Attributes;
    if let Some(nr) = present(spec, "nonResourceAttributes") {
        return Attributes::non_resource(user, s(nr, "verb"), s(nr, "path"));
    }
    let empty = json!({});
    let ra = present(spec, "resourceAttributes").unwrap_or(&empty);
    let mut attrs = Attributes::resource(user, s(ra, "verb"), s(ra, "group"), s(ra, "resource"))
        .in_namespace(s(ra, "namespace"))
        .named(s(ra, "name"))
        .with_subresource(s(ra, "subresource"));
    attrs.api_version = s(ra, "version").to_string();
    attrs
}

/// The chain's answer for `user` on what `spec` describes: `{allowed}`.
fn decide(ctx: &Context, user: &User, spec: &Value) -> Value {
    let attrs = attributes_of(spec, user);
    let decision = ctx
        .authorizers
        .iter()
        .map(|a| a.authorize(&attrs))
        .find(|d| *d != crate::authz::Decision::NoOpinion);
    match decision {
        Some(crate::authz::Decision::Allow) => json!({"allowed": true}),
        Some(crate::authz::Decision::Deny) => json!({"allowed": false, "denied": true}),
        _ => json!({"allowed": false}),
    }
}

fn spec(obj: &Value) -> Value {
    obj.get("spec").cloned().unwrap_or(json!({}))
}

fn subject(spec: &Value) -> User {
    User {
        name: s(spec, "user").to_string(),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
    }
}

pub(super) fn subject_access_review(ctx: &Context, obj: Value) -> ApiResult<Value> {
    let spec = spec(&obj);
    let mut causes = subject_errors(&spec);
    if metadata_set(&obj, &[]) {
        causes.push(cause("metadata", "\"metadata\"", "must be empty"));
    }
    invalid("SubjectAccessReview", causes)?;
    let status = decide(ctx, &subject(&spec), &spec);
    Ok(with_status(obj, status))
}

pub(super) fn self_subject_access_review(
    ctx: &Context,
    user: Option<&User>,
    obj: Value,
) -> ApiResult<Value> {
    let Some(user) = user else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let spec = spec(&obj);
    invalid("SelfSubjectAccessReview", attribute_errors(&spec))?;
    let status = decide(ctx, user, &spec);
    Ok(with_status(obj, status))
}

pub(super) fn local_subject_access_review(
    ctx: &Context,
    namespace: &str,
    mut obj: Value,
) -> ApiResult<Value> {
    match obj.pointer("/metadata/namespace").and_then(Value::as_str) {
        None | Some("") => {
            crate::object::meta(&mut obj).insert("namespace".into(), json!(namespace));
        }
        Some(ns) if ns == namespace => {}
        Some(_) => return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
    }
    let spec = spec(&obj);
    let mut causes = subject_errors(&spec);
    if metadata_set(&obj, &["namespace"]) {
        causes.push(cause(
            "metadata",
            "\"metadata\"",
            "must be empty except for namespace",
        ));
    }
    if let Some(ra) = present(&spec, "resourceAttributes") {
        let ns = s(ra, "namespace");
        if ns != namespace {
            causes.push(cause(
                "spec.resourceAttributes.namespace",
                &format!("{ns:?}"),
                "must match metadata.namespace",
            ));
        }
    }
    if let Some(nr) = present(&spec, "nonResourceAttributes") {
        causes.push(cause(
            "spec.nonResourceAttributes",
            &go_non_resource(nr),
            "disallowed on this kind of request",
        ));
    }
    invalid("LocalSubjectAccessReview", causes)?;
    let status = decide(ctx, &subject(&spec), &spec);
    Ok(with_status(obj, status))
}

pub(super) fn self_subject_rules_review(
    ctx: &Context,
    user: Option<&User>,
    obj: Value,
) -> ApiResult<Value> {
    let Some(user) = user else {
        return Err(ApiError::bad_request("no user present on request"));
    };
    let namespace = obj
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if namespace.is_empty() {
        return Err(ApiError::bad_request("no namespace on request"));
    }
    let rules = ctx
        .authorizers
        .iter()
        .map(|a| a.rules(user, namespace))
        .fold(Rules::default(), Rules::union);
    // Upstream answers a fresh object: metadata, status and an empty spec
    // (a struct, not omitempty: `"spec":{}`, which clients' models need).
    let out = json!({
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": {},
    });
    Ok(with_status(
        out,
        json!({
            "resourceRules": rules.resource_rules,
            "nonResourceRules": rules.non_resource_rules,
            "incomplete": rules.incomplete,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_attributes_are_judged_as_they_are() {
        let user = User {
            name: "jane".into(),
            groups: vec![],
        };
        let spec = json!({"resourceAttributes": {"namespace": "default", "verb": "get",
            "resource": "pods", "name": "web", "subresource": "log"}});
        let a = attributes_of(&spec, &user);
        assert!(a.resource_request);
        assert_eq!(
            [&a.verb, &a.namespace, &a.resource, &a.name, &a.subresource],
            ["get", "default", "pods", "web", "log"]
        );
        let spec = json!({"resourceAttributes": {"verb": "impersonate", "resource": "users", "name": "bob"}});
        let a = attributes_of(&spec, &user);
        assert_eq!(
            [&a.verb, &a.resource, &a.name],
            ["impersonate", "users", "bob"]
        );
        let spec = json!({"nonResourceAttributes": {"verb": "get", "path": "/healthz"}});
        let a = attributes_of(&spec, &user);
        assert!(!a.resource_request);
        assert_eq!([&a.verb, &a.path], ["get", "/healthz"]);
    }

    #[test]
    fn validation_in_upstream_words() {
        let causes = subject_errors(&json!({}));
        let shown: Vec<_> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(shown, [
            "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            "spec.user: Invalid value: \"\": at least one of user or group must be specified",
        ]);
        assert!(!metadata_set(
            &json!({"metadata": {"creationTimestamp": null}}),
            &[]
        ));
        assert!(metadata_set(&json!({"metadata": {"name": "x"}}), &[]));
    }
}
