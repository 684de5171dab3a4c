//! Row cells of the policy and allocation kinds, following upstream
//! `printPriorityClass`, `printResourceQuota`, `printLimitRange`,
//! `printPodDisruptionBudget`, `printServiceCIDR` and `printIPAddress` in
//! `pkg/printers/internalversion` (1.33).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::util::{age, arr_at, get, int_at, name, str_at, time_at};
use crate::quota::Amount;

type Now = DateTime<Utc>;

pub(super) fn priority_class(obj: &Value, now: Now) -> Vec<Value> {
    let policy = match str_at(obj, &["preemptionPolicy"]) {
        "" => "PreemptLowerPriority",
        p => p,
    };
    vec![
        json!(name(obj)),
        json!(int_at(obj, &["value"])),
        json!(get(obj, &["globalDefault"])
            .and_then(Value::as_bool)
            .unwrap_or(false)),
        json!(age(obj, now)),
        json!(policy),
    ]
}

/// A quantity as upstream prints it (`Quantity.String()`).
fn canonical(v: Option<&Value>) -> String {
    v.and_then(Value::as_str)
        .and_then(Amount::parse)
        .unwrap_or(Amount::ZERO)
        .format()
}

/// Upstream's `SortableResourceNames` order is plain string order.
pub(super) fn resource_quota(obj: &Value, now: Now) -> Vec<Value> {
    let mut names: Vec<&String> = get(obj, &["status", "hard"])
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    names.sort();
    let mut request = Vec::new();
    let mut limit = Vec::new();
    for n in names {
        let used = canonical(get(obj, &["status", "used", n]));
        let hard = canonical(get(obj, &["status", "hard", n]));
        let cell = format!("{n}: {used}/{hard}");
        if n.split('.').next() == Some("limits") && n.contains('.') {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    vec![
        json!(name(obj)),
        json!(age(obj, now)),
        json!(request.join(", ")),
        json!(limit.join(", ")),
    ]
}

pub(super) fn limit_range(obj: &Value, _now: Now) -> Vec<Value> {
    let created = time_at(obj, &["metadata", "creationTimestamp"]).map_or_else(
        || "0001-01-01T00:00:00Z".to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    vec![json!(name(obj)), json!(created)]
}

fn int_or_string(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "N/A".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

pub(super) fn pod_disruption_budget(obj: &Value, now: Now) -> Vec<Value> {
    vec![
        json!(name(obj)),
        json!(int_or_string(get(obj, &["spec", "minAvailable"]))),
        json!(int_or_string(get(obj, &["spec", "maxUnavailable"]))),
        json!(int_at(obj, &["status", "disruptionsAllowed"])),
        json!(age(obj, now)),
    ]
}

pub(super) fn service_cidr(obj: &Value, now: Now) -> Vec<Value> {
    let cidrs: Vec<&str> = arr_at(obj, &["spec", "cidrs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    vec![
        json!(name(obj)),
        json!(cidrs.join(",")),
        json!(age(obj, now)),
    ]
}

pub(super) fn ip_address(obj: &Value, now: Now) -> Vec<Value> {
    let parent = match get(obj, &["spec", "parentRef"]) {
        Some(p) if p.is_object() => {
            let group = str_at(p, &["group"]);
            let resource = str_at(p, &["resource"]);
            let mut s = if group.is_empty() {
                resource.to_lowercase()
            } else {
                format!("{resource}.{group}").to_lowercase()
            };
            let ns = str_at(p, &["namespace"]);
            if !ns.is_empty() {
                s.push('/');
                s.push_str(ns);
            }
            s.push('/');
            s.push_str(str_at(p, &["name"]));
            s
        }
        _ => "<none>".into(),
    };
    vec![json!(name(obj)), json!(parent), json!(age(obj, now))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_columns_split_limits() {
        let q = json!({"metadata": {"name": "q"}, "status": {
            "hard": {"pods": "2", "limits.cpu": "1", "requests.memory": "1Gi"},
            "used": {"pods": "1", "limits.cpu": "500m"}}});
        let cells = resource_quota(&q, Utc::now());
        assert_eq!(cells[2], "pods: 1/2, requests.memory: 0/1Gi");
        assert_eq!(cells[3], "limits.cpu: 500m/1");
    }

    #[test]
    fn budgets_and_addresses() {
        let p = json!({"metadata": {"name": "b"}, "spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 0}});
        let cells = pod_disruption_budget(&p, Utc::now());
        assert_eq!(cells[1], "1");
        assert_eq!(cells[2], "N/A");
        let ip = json!({"metadata": {"name": "10.43.0.1"}, "spec": {"parentRef": {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}});
        assert_eq!(
            ip_address(&ip, Utc::now())[1],
            "services/default/kubernetes"
        );
    }
}
