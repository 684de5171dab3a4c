//! Row cells of the RBAC kinds and APIServices, following upstream
//! `printRole`, `printClusterRole`, `printRoleBinding` and
//! `printClusterRoleBinding` in `pkg/printers/internalversion` (1.33, with
//! `SubjectsStrings` from `pkg/apis/rbac/v1/helpers.go`) and the
//! kube-aggregator's APIService table (`registry/apiservice/etcd`).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::util::{age, arr_at, get, name, str_at, time_at};

type Now = DateTime<Utc>;

/// `convertToHumanReadableDateType`: RFC 3339 in UTC, `<unknown>` unset.
fn created_at(obj: &Value) -> String {
    time_at(obj, &["metadata", "creationTimestamp"]).map_or_else(
        || "<unknown>".to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    )
}

/// Role and ClusterRole: NAME, CREATED AT.
pub(super) fn role(obj: &Value, _now: Now) -> Vec<Value> {
    vec![json!(name(obj)), json!(created_at(obj))]
}

/// `SubjectsStrings`: users, groups and service accounts (`ns/name`).
fn subjects(obj: &Value) -> (String, String, String) {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in arr_at(obj, &["subjects"]) {
        let n = str_at(s, &["name"]);
        match str_at(s, &["kind"]) {
            "ServiceAccount" => sas.push(format!("{}/{n}", str_at(s, &["namespace"]))),
            "User" => users.push(n.to_string()),
            "Group" => groups.push(n.to_string()),
            _ => {}
        }
    }
    (users.join(", "), groups.join(", "), sas.join(", "))
}

/// RoleBinding and ClusterRoleBinding: NAME, ROLE (`Kind/name`), AGE, and
/// the wide USERS, GROUPS, SERVICEACCOUNTS.
pub(super) fn role_binding(obj: &Value, now: Now) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        str_at(obj, &["roleRef", "kind"]),
        str_at(obj, &["roleRef", "name"])
    );
    let (users, groups, sas) = subjects(obj);
    vec![
        json!(name(obj)),
        json!(role),
        json!(age(obj, now)),
        json!(users),
        json!(groups),
        json!(sas),
    ]
}

/// APIService: NAME, SERVICE (`Local` or `ns/name`), AVAILABLE (the
/// Available condition, `False (Reason)` when not True), AGE.
pub(super) fn api_service(obj: &Value, now: Now) -> Vec<Value> {
    let service = match get(obj, &["spec", "service"]) {
        Some(s) => format!("{}/{}", str_at(s, &["namespace"]), str_at(s, &["name"])),
        None => "Local".to_string(),
    };
    let available = arr_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == "Available")
        .map_or_else(
            || "Unknown".to_string(),
            |c| match str_at(c, &["status"]) {
                "True" => "True".to_string(),
                status => format!("{status} ({})", str_at(c, &["reason"])),
            },
        );
    vec![
        json!(name(obj)),
        json!(service),
        json!(available),
        json!(age(obj, now)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbac_rows() {
        let now = Utc::now();
        let b = json!({"metadata": {"name": "b", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
                {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]});
        let cells = role_binding(&b, now);
        assert_eq!(cells[1], "ClusterRole/view");
        assert_eq!(cells[3], "u1, u2");
        assert_eq!(cells[4], "g");
        assert_eq!(cells[5], "n/s");
        assert_eq!(role(&b, now)[1], "2020-01-01T00:00:00Z");
        assert_eq!(
            role(&json!({"metadata": {"name": "r"}}), now)[1],
            "<unknown>"
        );
        let svc = json!({"metadata": {"name": "v1.x"}, "spec": {"service": {"namespace": "n", "name": "m"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
        let cells = api_service(&svc, now);
        assert_eq!(
            (cells[1].as_str(), cells[2].as_str()),
            (Some("n/m"), Some("False (ServiceNotFound)"))
        );
        let local = json!({"metadata": {"name": "v1."}, "spec": {}});
        assert_eq!(
            api_service(&local, now)[1..3],
            [json!("Local"), json!("Unknown")]
        );
    }
}
