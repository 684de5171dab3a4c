//! rbac.authorization.k8s.io: Role, ClusterRole, RoleBinding and
//! ClusterRoleBinding, as upstream `pkg/apis/rbac/validation` (1.33) checks
//! them beyond ObjectMeta: policy rules (verbs, api groups, resources,
//! non-resource URLs), the aggregation rule's label selectors, the role
//! reference and the subjects, and `cannot change roleRef` on update. Names
//! follow `path.IsValidPathSegmentName` ([`path_segment_name`]). Works on
//! stored-form JSON after defaulting.

use serde_json::{Map, Value};

use super::{invalid, meta, names, not_supported, required, FieldError};

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `path.IsValidPathSegmentName`: the rule for role and binding names.
pub fn path_segment_name(name: &str) -> Vec<String> {
    for bad in [".", ".."] {
        if name == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

fn required_because(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field,
        message: format!("Required value: {detail}"),
    }
}

fn forbidden(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field,
        message: format!("Forbidden: {detail}"),
    }
}

/// The strings of the list at `obj[field]` (non-strings skipped).
fn strings<'a>(obj: &'a Value, field: &str) -> Vec<&'a str> {
    obj.get(field)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn str_at<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get(field).and_then(Value::as_str).unwrap_or("")
}

fn items<'a>(obj: &'a Value, field: &str) -> &'a [Value] {
    obj.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Go's `%#v` of a `[]string`.
fn go_strings(list: &[&str]) -> String {
    let inner: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", inner.join(", "))
}

fn invalid_raw(field: String, shown: &str, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {shown}: {detail}"),
    }
}

/// `ValidatePolicyRule`.
fn policy_rule(rule: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if strings(rule, "verbs").is_empty() {
        errors.push(required_because(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = strings(rule, "nonResourceURLs");
    if !urls.is_empty() {
        let shown = go_strings(&urls);
        if namespaced {
            errors.push(invalid_raw(
                format!("{path}.nonResourceURLs"),
                &shown,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !items(rule, "apiGroups").is_empty()
            || !items(rule, "resources").is_empty()
            || !items(rule, "resourceNames").is_empty()
        {
            errors.push(invalid_raw(
                format!("{path}.nonResourceURLs"),
                &shown,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errors;
    }
    if items(rule, "apiGroups").is_empty() {
        errors.push(required_because(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if items(rule, "resources").is_empty() {
        errors.push(required_because(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errors
}

fn rules(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    items(obj, "rules")
        .iter()
        .enumerate()
        .flat_map(|(i, rule)| policy_rule(rule, namespaced, &format!("rules[{i}]")))
        .collect()
}

/// `ValidateLabelSelector` (label values checked, as on create).
pub fn label_selector(selector: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        errors.extend(meta::label_map(labels, &format!("{path}.matchLabels")));
    }
    for (i, req) in items(selector, "matchExpressions").iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = items(req, "values");
        match str_at(req, "operator") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errors.push(required_because(
                        format!("{at}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errors.push(forbidden(
                        format!("{at}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errors.push(invalid(
                format!("{at}.operator"),
                &Value::from(other),
                "not a valid selector operator",
            )),
        }
        let key = str_at(req, "key");
        for m in names::qualified_name(key) {
            errors.push(invalid(format!("{at}.key"), &Value::from(key), &m));
        }
        for (j, v) in values.iter().enumerate() {
            let value = v.as_str().unwrap_or("");
            for m in names::label_value(value) {
                errors.push(invalid(
                    format!("{at}.values[{j}]"),
                    &Value::from(value),
                    &m,
                ));
            }
        }
    }
    errors
}

/// A Role (`ValidateRole`).
pub fn role(obj: &Value) -> Vec<FieldError> {
    rules(obj, true)
}

/// A ClusterRole (`ValidateClusterRole`): its rules and aggregation rule.
pub fn cluster_role(obj: &Value) -> Vec<FieldError> {
    let mut errors = rules(obj, false);
    if let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) {
        let selectors = items(rule, "clusterRoleSelectors");
        if selectors.is_empty() {
            errors.push(required_because(
                "aggregationRule.clusterRoleSelectors".into(),
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, s) in selectors.iter().enumerate() {
            errors.extend(label_selector(
                s,
                &format!("aggregationRule.clusterRoleSelectors[{i}]"),
            ));
        }
    }
    errors
}

/// `ValidateRoleBindingSubject`.
fn subject(s: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = str_at(s, "name");
    let api_group = str_at(s, "apiGroup");
    if name.is_empty() {
        errors.push(required(format!("{path}.name")));
    }
    match str_at(s, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for m in names::dns1123_subdomain(name) {
                    errors.push(invalid(format!("{path}.name"), &Value::from(name), &m));
                }
            }
            if !api_group.is_empty() {
                errors.push(not_supported(format!("{path}.apiGroup"), api_group, &[""]));
            }
            if !namespaced && str_at(s, "namespace").is_empty() {
                errors.push(required(format!("{path}.namespace")));
            }
        }
        "User" | "Group" => {
            if api_group != RBAC_GROUP {
                errors.push(not_supported(
                    format!("{path}.apiGroup"),
                    api_group,
                    &[RBAC_GROUP],
                ));
            }
        }
        other => errors.push(not_supported(
            format!("{path}.kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errors
}

fn binding(obj: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let empty = Value::Object(Map::new());
    let role_ref = obj.get("roleRef").unwrap_or(&empty);
    let api_group = str_at(role_ref, "apiGroup");
    if api_group != RBAC_GROUP {
        errors.push(not_supported(
            "roleRef.apiGroup".into(),
            api_group,
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = str_at(role_ref, "kind");
    if !kinds.contains(&kind) {
        errors.push(not_supported("roleRef.kind".into(), kind, kinds));
    }
    let name = str_at(role_ref, "name");
    if name.is_empty() {
        errors.push(required("roleRef.name".into()));
    } else {
        for m in path_segment_name(name) {
            errors.push(invalid("roleRef.name".into(), &Value::from(name), &m));
        }
    }
    for (i, s) in items(obj, "subjects").iter().enumerate() {
        errors.extend(subject(s, namespaced, &format!("subjects[{i}]")));
    }
    errors
}

/// A RoleBinding (`ValidateRoleBinding`).
pub fn role_binding(obj: &Value) -> Vec<FieldError> {
    binding(obj, true)
}

/// A ClusterRoleBinding (`ValidateClusterRoleBinding`).
pub fn cluster_role_binding(obj: &Value) -> Vec<FieldError> {
    binding(obj, false)
}

/// Go's `%#v` of an internal `rbac.RoleRef`.
fn go_role_ref(role_ref: Option<&Value>) -> String {
    let empty = Value::Null;
    let r = role_ref.unwrap_or(&empty);
    format!(
        "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
        str_at(r, "apiGroup"),
        str_at(r, "kind"),
        str_at(r, "name")
    )
}

/// An update of a RoleBinding or ClusterRoleBinding: the new object's
/// findings, and the role reference may not change.
pub fn binding_update(old: &Value, new: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = binding(new, namespaced);
    let fields = ["apiGroup", "kind", "name"];
    let get = |o: &Value, f: &str| o.get("roleRef").map(|r| str_at(r, f).to_string());
    if fields.iter().any(|f| get(old, f) != get(new, f)) {
        errors.push(invalid_raw(
            "roleRef".into(),
            &go_role_ref(new.get("roleRef")),
            "cannot change roleRef",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn rules_in_upstream_words() {
        let r = json!({"rules": [{"verbs": [], "resources": ["pods"]}]});
        assert_eq!(
            messages(&role(&r)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            ]
        );
        let r = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"], "resources": ["x"]}]});
        assert_eq!(
            messages(&role(&r)),
            [
                "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
                "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        let ok = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert!(cluster_role(&ok).is_empty());
        let agg = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            messages(&cluster_role(&agg)),
            ["aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"]
        );
        let agg = json!({"aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]}});
        assert_eq!(
            messages(&cluster_role(&agg)),
            ["aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]
        );
    }

    #[test]
    fn bindings_in_upstream_words() {
        let b = json!({"roleRef": {"apiGroup": "x", "kind": "Role", "name": ""},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "r"},
                {"kind": "User", "name": "u", "apiGroup": ""}]});
        assert_eq!(
            messages(&cluster_role_binding(&b)),
            [
                "roleRef.apiGroup: Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "roleRef.name: Required value",
                "subjects[0].namespace: Required value",
                "subjects[1].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "subjects[2].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"",
            ]
        );
        let old =
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"}});
        let new =
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "edit"}});
        assert_eq!(
            messages(&binding_update(&old, &new, true)),
            ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"]
        );
        assert!(binding_update(&old, &old, true).is_empty());
        assert_eq!(path_segment_name(".."), ["may not be '..'"]);
        assert_eq!(
            path_segment_name("a/b%"),
            ["may not contain '/'", "may not contain '%'"]
        );
    }
}
