//! rbac.authorization.k8s.io defaults (upstream `pkg/apis/rbac/v1/defaults.go`):
//! a binding's `roleRef.apiGroup` and its subjects' `apiGroup`
//! (`rbac.authorization.k8s.io` for User and Group, `""` for ServiceAccount).

use serde_json::Value;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn empty(obj: &serde_json::Map<String, Value>, field: &str) -> bool {
    obj.get(field)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
}

/// `SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding` and
/// `SetDefaults_Subject` for each subject.
pub fn role_binding(obj: &mut Value) {
    if let Some(role_ref) = obj.get_mut("roleRef").and_then(Value::as_object_mut) {
        if empty(role_ref, "apiGroup") {
            role_ref.insert("apiGroup".into(), Value::from(RBAC_GROUP));
        }
    }
    let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
        if !empty(s, "apiGroup") {
            continue;
        }
        match s.get("kind").and_then(Value::as_str) {
            Some("User" | "Group") => {
                s.insert("apiGroup".into(), Value::from(RBAC_GROUP));
            }
            Some("ServiceAccount") => {
                s.remove("apiGroup");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_defaults() {
        let mut b = json!({"roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"},
                {"kind": "Group", "name": "g", "apiGroup": "x"}]});
        role_binding(&mut b);
        assert_eq!(b["roleRef"]["apiGroup"], RBAC_GROUP);
        assert_eq!(b["subjects"][0]["apiGroup"], RBAC_GROUP);
        assert!(b["subjects"][1].get("apiGroup").is_none());
        assert_eq!(b["subjects"][2]["apiGroup"], "x");
    }
}
