//! ResourceQuota and LimitRange (core/v1) and PodDisruptionBudget
//! (policy/v1), as upstream's `ValidateResourceQuota`, `ValidateLimitRange`
//! and `ValidatePodDisruptionBudget` word them: quota names and
//! non-negative amounts, the min <= defaultRequest <= default <= max
//! order and ratios of a limit, and a budget's minAvailable xor
//! maxUnavailable as a non-negative number or percentage.

use serde_json::Value;

use super::{invalid, not_supported, FieldError};
use crate::quota::Amount;

const QUOTA_SCOPES: &[&str] = &[
    "BestEffort",
    "CrossNamespacePodAffinity",
    "NotBestEffort",
    "NotTerminating",
    "PriorityClass",
    "Terminating",
];
const STANDARD_QUOTA: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];
const LIMIT_TYPES: &[&str] = &["Container", "PersistentVolumeClaim", "Pod"];
const EVICTION_POLICIES: &[&str] = &["AlwaysAllow", "IfHealthyBudget"];

fn forbidden(field: String, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field,
        message: format!("Forbidden: {detail}"),
    }
}

fn quota_name_ok(name: &str) -> bool {
    STANDARD_QUOTA.contains(&name)
        || name.starts_with("count/")
        || name.starts_with("requests.")
        || name.starts_with("limits.")
        || name.starts_with("hugepages-")
        || name.contains('/')
}

fn resource_list(errors: &mut Vec<FieldError>, list: Option<&Value>, path: &str, quota: bool) {
    let Some(map) = list.and_then(Value::as_object) else {
        return;
    };
    for (name, q) in map {
        let at = format!("{path}[{name}]");
        if quota && !quota_name_ok(name) {
            errors.push(invalid(
                at.clone(),
                &Value::from(name.as_str()),
                "must be a standard resource for quota",
            ));
        }
        if let Some(a) = q.as_str().and_then(Amount::parse) {
            if a.milli < 0 {
                errors.push(invalid(at, q, "must be greater than or equal to 0"));
            }
        }
    }
}

/// A ResourceQuota.
pub fn resource_quota(rq: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    resource_list(&mut errors, rq.pointer("/spec/hard"), "spec.hard", true);
    resource_list(&mut errors, rq.pointer("/status/hard"), "status.hard", true);
    resource_list(&mut errors, rq.pointer("/status/used"), "status.used", true);
    if let Some(scopes) = rq.pointer("/spec/scopes").and_then(Value::as_array) {
        for (i, s) in scopes.iter().enumerate() {
            let s = s.as_str().unwrap_or("");
            if !QUOTA_SCOPES.contains(&s) {
                errors.push(not_supported(format!("spec.scopes[{i}]"), s, QUOTA_SCOPES));
            }
        }
    }
    errors
}

/// The orderings a LimitRange item must keep, in upstream's order of
/// checks: (field, its words, the field it may not exceed, its words,
/// the field the error is reported at).
const ORDERED: [(&str, &str, &str, &str, &str); 6] = [
    ("min", "min value", "max", "max value", "min"),
    (
        "min",
        "min value",
        "defaultRequest",
        "default request value",
        "defaultRequest",
    ),
    (
        "defaultRequest",
        "default request value",
        "max",
        "max value",
        "defaultRequest",
    ),
    (
        "defaultRequest",
        "default request value",
        "default",
        "default limit value",
        "defaultRequest",
    ),
    ("min", "min value", "default", "default value", "default"),
    ("default", "default value", "max", "max value", "default"),
];

fn amount(list: Option<&Value>, name: &str) -> Option<(Amount, Value)> {
    let v = list?.get(name)?;
    v.as_str().and_then(Amount::parse).map(|a| (a, v.clone()))
}

/// A LimitRange (after its defaults: a Container limit's default comes
/// from max, its defaultRequest from default or min).
pub fn limit_range(lr: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(limits) = lr.pointer("/spec/limits").and_then(Value::as_array) else {
        return errors;
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, item) in limits.iter().enumerate() {
        let at = format!("spec.limits[{i}]");
        let ty = item.get("type").and_then(Value::as_str).unwrap_or("");
        if !LIMIT_TYPES.contains(&ty) {
            errors.push(not_supported(format!("{at}.type"), ty, LIMIT_TYPES));
        } else if seen.contains(&ty) {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: format!("{at}.type"),
                message: format!("Duplicate value: \"{ty}\""),
            });
        }
        seen.push(ty);
        for field in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            resource_list(
                &mut errors,
                item.get(field),
                &format!("{at}.{field}"),
                false,
            );
        }
        if ty == "Pod" {
            for field in ["default", "defaultRequest"] {
                if item
                    .get(field)
                    .and_then(Value::as_object)
                    .is_some_and(|m| !m.is_empty())
                {
                    errors.push(forbidden(
                        format!("{at}.{field}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        let mut names: Vec<&String> = Vec::new();
        for field in [
            "max",
            "min",
            "default",
            "defaultRequest",
            "maxLimitRequestRatio",
        ] {
            if let Some(m) = item.get(field).and_then(Value::as_object) {
                names.extend(m.keys().filter(|k| !names.contains(k)).collect::<Vec<_>>());
            }
        }
        for name in names {
            let max = amount(item.get("max"), name);
            let min = amount(item.get("min"), name);
            let def = amount(item.get("default"), name);
            let def_req = amount(item.get("defaultRequest"), name);
            let ratio = amount(item.get("maxLimitRequestRatio"), name);
            let show = |a: &Amount| a.format();
            let of = |field: &str| match field {
                "max" => &max,
                "min" => &min,
                "default" => &def,
                _ => &def_req,
            };
            for (small, small_words, large, large_words, reported) in ORDERED {
                let (Some((a, _)), Some((b, _))) = (of(small), of(large)) else {
                    continue;
                };
                if a.milli <= b.milli {
                    continue;
                }
                if let Some((_, value)) = of(reported) {
                    errors.push(invalid(
                        format!("{at}.{reported}[{name}]"),
                        value,
                        &format!(
                            "{small_words} {} is greater than {large_words} {}",
                            show(a),
                            show(b)
                        ),
                    ));
                }
            }
            if let Some((r, rv)) = &ratio {
                if r.milli < 1000 {
                    errors.push(invalid(
                        format!("{at}.maxLimitRequestRatio[{name}]"),
                        rv,
                        &format!("ratio {} is less than 1", show(r)),
                    ));
                }
                if let (Some((mn, _)), Some((mx, _))) = (&min, &max) {
                    if mn.milli > 0 {
                        let bound = mx.milli as f64 / mn.milli as f64;
                        if (r.milli as f64 / 1000.0) > bound {
                            errors.push(invalid(
                                format!("{at}.maxLimitRequestRatio[{name}]"),
                                rv,
                                &format!("ratio {} is greater than max/min = {bound:.6}", show(r)),
                            ));
                        }
                    }
                }
            }
        }
    }
    errors
}

/// Upstream `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`
/// (values shown as Go shows an IntOrString).
fn int_or_percent(errors: &mut Vec<FieldError>, v: Option<&Value>, field: &str) {
    use super::workloads::{not_more_than_100_percent, positive_int_or_percent};
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return;
    };
    if !v.is_number() && !v.is_string() {
        errors.push(invalid(field.into(), v, "must be an integer or percentage"));
        return;
    }
    errors.extend(positive_int_or_percent(v, field));
    errors.extend(not_more_than_100_percent(Some(v), field));
}

/// A PodDisruptionBudget.
pub fn pod_disruption_budget(pdb: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(spec) = pdb.get("spec") else {
        return errors;
    };
    let set = |f: &str| spec.get(f).is_some_and(|v| !v.is_null());
    if set("minAvailable") && set("maxUnavailable") {
        errors.push(invalid(
            "spec".into(),
            spec,
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    int_or_percent(&mut errors, spec.get("minAvailable"), "spec.minAvailable");
    int_or_percent(
        &mut errors,
        spec.get("maxUnavailable"),
        "spec.maxUnavailable",
    );
    errors.extend(super::common::label_selector(
        spec.get("selector"),
        "spec.selector",
    ));
    if let Some(p) = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
    {
        if !EVICTION_POLICIES.contains(&p) {
            errors.push(not_supported(
                "spec.unhealthyPodEvictionPolicy".into(),
                p,
                EVICTION_POLICIES,
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budgets() {
        let e = pod_disruption_budget(&json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}}));
        assert_eq!(e.len(), 1);
        assert!(e[0]
            .message
            .ends_with("minAvailable and maxUnavailable cannot be both set"));
        let e = pod_disruption_budget(&json!({"spec": {"minAvailable": "150%"}}));
        assert_eq!(
            e[0].message,
            // Go prints the IntOrString itself (%#v).
            "Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%"
        );
        let e = pod_disruption_budget(&json!({"spec": {"maxUnavailable": -1}}));
        assert_eq!(
            e[0].message,
            "Invalid value: -1: must be greater than or equal to 0"
        );
        assert!(pod_disruption_budget(&json!({"spec": {"minAvailable": "50%"}})).is_empty());
    }

    #[test]
    fn quotas_and_limits() {
        let e = resource_quota(&json!({"spec": {"hard": {"pods": "-1", "bogus": "1"}}}));
        assert_eq!(e.len(), 2);
        let e = limit_range(
            &json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}}),
        );
        assert_eq!(e[0].field, "spec.limits[0].min[cpu]");
        assert_eq!(
            e[0].message,
            "Invalid value: \"2\": min value 2 is greater than max value 1"
        );
        // Every ordering, reported where upstream reports it and in its order.
        let e = limit_range(&json!({"spec": {"limits": [{
            "type": "Container",
            "min": {"memory": "4Gi"}, "max": {"memory": "1Gi"},
            "default": {"memory": "2Gi"}, "defaultRequest": {"memory": "3Gi"},
        }]}}));
        let got: Vec<(&str, &str)> = e
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("spec.limits[0].min[memory]", "Invalid value: \"4Gi\": min value 4Gi is greater than max value 1Gi"),
                ("spec.limits[0].defaultRequest[memory]", "Invalid value: \"3Gi\": min value 4Gi is greater than default request value 3Gi"),
                ("spec.limits[0].defaultRequest[memory]", "Invalid value: \"3Gi\": default request value 3Gi is greater than max value 1Gi"),
                ("spec.limits[0].defaultRequest[memory]", "Invalid value: \"3Gi\": default request value 3Gi is greater than default limit value 2Gi"),
                ("spec.limits[0].default[memory]", "Invalid value: \"2Gi\": min value 4Gi is greater than default value 2Gi"),
                ("spec.limits[0].default[memory]", "Invalid value: \"2Gi\": default value 2Gi is greater than max value 1Gi"),
            ]
        );
        let e =
            limit_range(&json!({"spec": {"limits": [{"type": "Pod", "default": {"cpu": "1"}}]}}));
        assert_eq!(
            e[0].message,
            "Forbidden: may not be specified when `type` is 'Pod'"
        );
    }
}
