//! flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
//! PriorityLevelConfigurations, as upstream's
//! pkg/apis/flowcontrol/validation checks v1 requests (1.33): precedence,
//! distinguisher, priority level reference, rules and subjects; level
//! type, limited and exempt settings and queuing (shuffle-sharding
//! entropy included); the mandatory `exempt` and `catch-all` objects'
//! fixed specs; unique condition types.

use serde_json::Value;

use super::common::{forbidden, invalid_shown, invalid_str, items, required_because, same, str_at};
use super::{invalid, names, not_supported, FieldError};
use crate::defaults::flowcontrol::{mandatory_flow_schema_spec, mandatory_priority_level_spec};

const MAX_MATCHING_PRECEDENCE: i64 = 10000;
const MAX_QUEUES: i64 = 10_000_000;
const MAX_HASH_BITS: f64 = 60.0;
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const NS_INTRO: &str = "each member of this list must be '*' or a DNS-1123 label; ";

fn go_strings(v: &[Value]) -> String {
    let parts: Vec<String> = v
        .iter()
        .map(|s| format!("\"{}\"", s.as_str().unwrap_or_default()))
        .collect();
    format!("[]string{{{}}}", parts.join(", "))
}

fn quoted(list: &[&str]) -> String {
    list.iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn int(v: &Value, field: &str) -> i64 {
    v.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// A FlowSchema (create and update alike).
pub fn flow_schema(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let precedence = int(spec, "matchingPrecedence");
    let at = "spec.matchingPrecedence";
    if precedence <= 0 {
        errors.push(invalid(
            at.into(),
            &Value::from(precedence),
            "must be a positive value",
        ));
    }
    if precedence > MAX_MATCHING_PRECEDENCE {
        errors.push(invalid(
            at.into(),
            &Value::from(precedence),
            &format!("must not be greater than {MAX_MATCHING_PRECEDENCE}"),
        ));
    }
    if precedence == 1 && name != "exempt" {
        errors.push(invalid(
            at.into(),
            &Value::from(precedence),
            "only the schema named 'exempt' may have matchingPrecedence 1",
        ));
    }
    if let Some(d) = spec.get("distinguisherMethod").filter(|d| !d.is_null()) {
        let ty = str_at(d, "type").unwrap_or_default();
        if ty != "ByNamespace" && ty != "ByUser" {
            errors.push(FieldError {
                reason: "FieldValueNotSupported",
                field: "spec.distinguisherMethod.type".into(),
                message: format!(
                    "Unsupported value: flowcontrol.FlowDistinguisherMethod{{Type:\"{ty}\"}}: supported values: \"ByNamespace\", \"ByUser\""
                ),
            });
        }
    }
    let level = spec
        .pointer("/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if level.is_empty() {
        errors.push(required_because(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    } else {
        for m in names::dns1123_subdomain(level) {
            errors.push(invalid_str(
                "spec.priorityLevelConfiguration.name",
                level,
                &m,
            ));
        }
    }
    for (i, rule) in items(spec, "rules").iter().enumerate() {
        errors.extend(rules_with_subjects(rule, &format!("spec.rules[{i}]")));
    }
    if let Some(want) = mandatory_flow_schema_spec(name) {
        if !same(Some(&want), Some(spec)) {
            errors.push(invalid_shown(
                "spec",
                &go_flow_schema_spec(spec),
                &format!("spec of '{name}' must equal the fixed value"),
            ));
        }
    }
    errors.extend(conditions(obj));
    errors
}

fn go_flow_schema_spec(spec: &Value) -> String {
    let level = spec
        .pointer("/priorityLevelConfiguration/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let distinguisher = if spec
        .get("distinguisherMethod")
        .is_some_and(|d| !d.is_null())
    {
        "(*flowcontrol.FlowDistinguisherMethod)(0xc000000000)"
    } else {
        "(*flowcontrol.FlowDistinguisherMethod)(nil)"
    };
    let rules = if items(spec, "rules").is_empty() {
        "[]flowcontrol.PolicyRulesWithSubjects(nil)".to_string()
    } else {
        "[]flowcontrol.PolicyRulesWithSubjects{...}".to_string()
    };
    format!(
        "flowcontrol.FlowSchemaSpec{{PriorityLevelConfiguration:flowcontrol.PriorityLevelConfigurationReference{{Name:\"{level}\"}}, MatchingPrecedence:{}, DistinguisherMethod:{distinguisher}, Rules:{rules}}}",
        int(spec, "matchingPrecedence")
    )
}

fn rules_with_subjects(rule: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let subjects = items(rule, "subjects");
    if subjects.is_empty() {
        errors.push(required_because(
            format!("{at}.subjects"),
            "subjects must contain at least one value",
        ));
    }
    for (i, s) in subjects.iter().enumerate() {
        errors.extend(subject(s, &format!("{at}.subjects[{i}]")));
    }
    let resource_rules = items(rule, "resourceRules");
    let non_resource_rules = items(rule, "nonResourceRules");
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        errors.push(required_because(
            at,
            "at least one of resourceRules and nonResourceRules has to be non-empty",
        ));
    }
    for (i, r) in resource_rules.iter().enumerate() {
        errors.extend(resource_rule(r, &format!("{at}.resourceRules[{i}]")));
    }
    for (i, r) in non_resource_rules.iter().enumerate() {
        errors.extend(non_resource_rule(r, &format!("{at}.nonResourceRules[{i}]")));
    }
    errors
}

fn subject(s: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let kind = str_at(s, "kind").unwrap_or_default();
    let has = |f: &str| s.get(f).is_some_and(|v| !v.is_null());
    let others: &[(&str, &str)] = match kind {
        "ServiceAccount" => {
            match s.get("serviceAccount").filter(|v| !v.is_null()) {
                None => errors.push(required_because(
                    format!("{at}.serviceAccount"),
                    "serviceAccount is required when subject kind is 'ServiceAccount'",
                )),
                Some(sa) => {
                    let name = str_at(sa, "name").unwrap_or_default();
                    if name.is_empty() {
                        errors.push(required_because(format!("{at}.serviceAccount.name"), ""));
                    } else if name != "*" {
                        for m in names::dns1123_subdomain(name) {
                            errors.push(invalid_str(format!("{at}.serviceAccount.name"), name, &m));
                        }
                    }
                    let ns = str_at(sa, "namespace").unwrap_or_default();
                    if ns.is_empty() {
                        errors.push(required_because(
                            format!("{at}.serviceAccount.namespace"),
                            "must specify namespace for service account",
                        ));
                    } else {
                        for m in names::dns1123_label(ns) {
                            errors.push(invalid_str(
                                format!("{at}.serviceAccount.namespace"),
                                ns,
                                &m,
                            ));
                        }
                    }
                }
            }
            &[("user", "User"), ("group", "Group")]
        }
        "User" | "Group" => {
            let field = if kind == "User" { "user" } else { "group" };
            match s.get(field).filter(|v| !v.is_null()) {
                None => errors.push(required_because(
                    format!("{at}.{field}"),
                    &format!("{field} is required when subject kind is '{kind}'"),
                )),
                Some(v) => {
                    if str_at(v, "name").unwrap_or_default().is_empty() {
                        errors.push(required_because(format!("{at}.{field}.name"), ""));
                    }
                }
            }
            if kind == "User" {
                &[("serviceAccount", "ServiceAccount"), ("group", "Group")]
            } else {
                &[("serviceAccount", "ServiceAccount"), ("user", "User")]
            }
        }
        other => {
            errors.push(not_supported(
                format!("{at}.kind"),
                other,
                &["Group", "ServiceAccount", "User"],
            ));
            &[]
        }
    };
    for (field, kind) in others {
        if has(field) {
            errors.push(forbidden(
                format!("{at}.{field}"),
                &format!("{field} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    }
    errors
}

fn verbs(errors: &mut Vec<FieldError>, rule: &Value, at: &str) {
    let verbs = items(rule, "verbs");
    let field = format!("{at}.verbs");
    if verbs.is_empty() {
        errors.push(required_because(
            field,
            "verbs must contain at least one value",
        ));
    } else if verbs.iter().any(|v| v.as_str() == Some("*")) {
        if verbs.len() > 1 {
            errors.push(invalid_shown(
                field,
                &go_strings(verbs),
                "if '*' is present, must not specify other verbs",
            ));
        }
    } else if !verbs
        .iter()
        .all(|v| VERBS.contains(&v.as_str().unwrap_or_default()))
    {
        errors.push(FieldError {
            reason: "FieldValueNotSupported",
            field,
            message: format!(
                "Unsupported value: {}: supported values: {}",
                go_strings(verbs),
                quoted(VERBS)
            ),
        });
    }
}

fn wildcard_list(
    errors: &mut Vec<FieldError>,
    rule: &Value,
    at: &str,
    field: &str,
    what: &str,
    detail: &str,
) {
    let list = items(rule, field);
    if list.is_empty() {
        errors.push(required_because(format!("{at}.{field}"), detail));
    } else if list.len() > 1 && list.iter().any(|v| v.as_str() == Some("*")) {
        errors.push(invalid_shown(
            format!("{at}.{field}"),
            &go_strings(list),
            &format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

fn resource_rule(rule: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    verbs(&mut errors, rule, at);
    wildcard_list(
        &mut errors,
        rule,
        at,
        "apiGroups",
        "api groups",
        "resource rules must supply at least one api group",
    );
    wildcard_list(
        &mut errors,
        rule,
        at,
        "resources",
        "resources",
        "resource rules must supply at least one resource",
    );
    let namespaces = items(rule, "namespaces");
    let cluster = rule
        .get("clusterScope")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if namespaces.is_empty() && !cluster {
        errors.push(required_because(
            format!("{at}.namespaces"),
            "resource rules that are not cluster scoped must supply at least one namespace",
        ));
    } else if namespaces.iter().any(|v| v.as_str() == Some("*")) {
        if namespaces.len() > 1 {
            errors.push(invalid_shown(
                format!("{at}.namespaces"),
                &go_strings(namespaces),
                "if '*' is present, must not specify other namespaces",
            ));
        }
    } else {
        for (i, ns) in namespaces.iter().enumerate() {
            let ns = ns.as_str().unwrap_or_default();
            for m in names::dns1123_label(ns) {
                errors.push(invalid_str(
                    format!("{at}.namespaces[{i}]"),
                    ns,
                    &format!("{NS_INTRO}{m}"),
                ));
            }
        }
    }
    errors
}

/// `ValidateNonResourceURLPath`.
fn url_path(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("must not be empty");
    }
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') {
        return Some("must start with slash");
    }
    if path.contains(' ') {
        return Some("must not contain white-space");
    }
    if path.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = path.matches('*').count();
    if stars > 1 || (stars == 1 && !path.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

fn non_resource_rule(rule: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    verbs(&mut errors, rule, at);
    let urls = items(rule, "nonResourceURLs");
    let field = format!("{at}.nonResourceURLs");
    if urls.is_empty() {
        errors.push(required_because(
            field,
            "nonResourceURLs must contain at least one value",
        ));
    } else if urls.iter().any(|v| v.as_str() == Some("*")) {
        if urls.len() > 1 {
            errors.push(invalid_shown(
                field,
                &go_strings(urls),
                "if '*' is present, must not specify other non-resource URLs",
            ));
        }
    } else {
        for (i, u) in urls.iter().enumerate() {
            let u = u.as_str().unwrap_or_default();
            if let Some(m) = url_path(u) {
                errors.push(invalid_str(format!("{field}[{i}]"), u, m));
            }
        }
    }
    errors
}

fn conditions(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let list = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let ty = str_at(c, "type").unwrap_or_default();
        let at = format!("status.conditions[{i}].type");
        if seen.contains(&ty) {
            errors.push(super::common::duplicate(&at, ty));
        }
        seen.push(ty);
        if ty.is_empty() {
            errors.push(required_because(at, "must not be empty"));
        }
    }
    errors
}

/// A PriorityLevelConfiguration (create and update alike).
pub fn priority_level_configuration(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let ty = str_at(spec, "type").unwrap_or_default();
    if (name == "exempt") != (ty == "Exempt") {
        errors.push(invalid_str(
            "spec.type",
            ty,
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    let limited = spec.get("limited").filter(|v| !v.is_null());
    let exempt = spec.get("exempt").filter(|v| !v.is_null());
    match ty {
        "Exempt" => {
            if limited.is_some() {
                errors.push(forbidden(
                    "spec.limited",
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(e) = exempt {
                if let Some(n) = e.get("nominalConcurrencyShares").and_then(Value::as_i64) {
                    if n < 0 {
                        errors.push(invalid(
                            "spec.exempt.nominalConcurrencyShares".into(),
                            &Value::from(n),
                            "must be a non-negative integer",
                        ));
                    }
                }
                lendable(&mut errors, e, "spec.exempt");
            }
        }
        "Limited" => {
            if exempt.is_some() {
                errors.push(forbidden(
                    "spec.exempt",
                    "must be nil if the type is Limited",
                ));
            }
            match limited {
                None => errors.push(required_because(
                    "spec.limited",
                    "must not be empty when type is Limited",
                )),
                Some(l) => errors.extend(limited_config(l)),
            }
        }
        other => errors.push(not_supported(
            "spec.type".into(),
            other,
            &["Exempt", "Limited"],
        )),
    }
    if let Some(want) = mandatory_priority_level_spec(name) {
        let mut have = spec.clone();
        let mut want = want;
        let detail = if name == "exempt" {
            // The admin may change the exempt level's `exempt` settings.
            if let (Some(h), Some(w)) = (have.as_object_mut(), want.as_object_mut()) {
                h.remove("exempt");
                w.remove("exempt");
            }
            format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value")
        } else {
            format!("spec of '{name}' must equal the fixed value")
        };
        if !same(Some(&want), Some(&have)) {
            let ptr = |v: Option<&Value>, ty: &str| match v {
                Some(_) => format!("(*flowcontrol.{ty})(0xc000000000)"),
                None => format!("(*flowcontrol.{ty})(nil)"),
            };
            errors.push(invalid_shown(
                "spec",
                &format!(
                    "flowcontrol.PriorityLevelConfigurationSpec{{Type:\"{ty}\", Limited:{}, Exempt:{}}}",
                    ptr(limited, "LimitedPriorityLevelConfiguration"),
                    ptr(exempt, "ExemptPriorityLevelConfiguration"),
                ),
                &detail,
            ));
        }
    }
    errors.extend(conditions(obj));
    errors
}

fn lendable(errors: &mut Vec<FieldError>, v: &Value, at: &str) {
    if let Some(p) = v.get("lendablePercent").and_then(Value::as_i64) {
        if !(0..=100).contains(&p) {
            errors.push(invalid(
                format!("{at}.lendablePercent"),
                &Value::from(p),
                "must be between 0 and 100, inclusive",
            ));
        }
    }
}

fn limited_config(l: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let at = "spec.limited";
    let shares = int(l, "nominalConcurrencyShares");
    if shares < 0 {
        errors.push(invalid(
            format!("{at}.nominalConcurrencyShares"),
            &Value::from(shares),
            "must be a non-negative integer",
        ));
    }
    let response = l.get("limitResponse").unwrap_or(&Value::Null);
    let queuing = response.get("queuing").filter(|q| !q.is_null());
    match str_at(response, "type").unwrap_or_default() {
        "Reject" => {
            if queuing.is_some() {
                errors.push(forbidden(
                    format!("{at}.limitResponse.queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        "Queue" => match queuing {
            None => errors.push(required_because(
                format!("{at}.limitResponse.queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(q) => errors.extend(queuing_config(q, &format!("{at}.limitResponse.queuing"))),
        },
        other => errors.push(not_supported(
            format!("{at}.limitResponse.type"),
            other,
            &["Queue", "Reject"],
        )),
    }
    lendable(&mut errors, l, at);
    if let Some(b) = l.get("borrowingLimitPercent").and_then(Value::as_i64) {
        if b < 0 {
            errors.push(invalid(
                format!("{at}.borrowingLimitPercent"),
                &Value::from(b),
                "if specified, must be a non-negative integer",
            ));
        }
    }
    errors
}

/// Shuffle sharding's `RequiredEntropyBits`: ceil(log2(deck) * hand).
fn entropy_bits(deck: i64, hand: i64) -> f64 {
    ((deck as f64).log2() * hand as f64).ceil()
}

fn queuing_config(q: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let limit = int(q, "queueLengthLimit");
    if limit <= 0 {
        errors.push(invalid(
            format!("{at}.queueLengthLimit"),
            &Value::from(limit),
            "must be positive",
        ));
    }
    let queues = int(q, "queues");
    if queues <= 0 {
        errors.push(invalid(
            format!("{at}.queues"),
            &Value::from(queues),
            "must be positive",
        ));
    } else if queues > MAX_QUEUES {
        errors.push(invalid(
            format!("{at}.queues"),
            &Value::from(queues),
            &format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = int(q, "handSize");
    if hand <= 0 {
        errors.push(invalid(
            format!("{at}.handSize"),
            &Value::from(hand),
            "must be positive",
        ));
    } else if hand > queues {
        errors.push(invalid(
            format!("{at}.handSize"),
            &Value::from(hand),
            &format!("should not be greater than queues ({queues})"),
        ));
    } else if entropy_bits(queues, hand) > MAX_HASH_BITS {
        errors.push(invalid(
            format!("{at}.handSize"),
            &Value::from(hand),
            &format!(
                "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than 60"
            ),
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn flow_schema_findings() {
        let fs = json!({"metadata": {"name": "mine"}, "spec": {"matchingPrecedence": 1,
            "priorityLevelConfiguration": {"name": ""},
            "rules": [{"subjects": [{"kind": "User"}], "resourceRules": [{"verbs": ["fly"],
                "apiGroups": [""], "resources": ["pods"]}]}]}});
        assert_eq!(
            found(&flow_schema(&fs)),
            vec![
                ("spec.matchingPrecedence", "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"),
                ("spec.priorityLevelConfiguration.name", "Required value: must reference a priority level"),
                ("spec.rules[0].subjects[0].user", "Required value: user is required when subject kind is 'User'"),
                ("spec.rules[0].resourceRules[0].verbs", "Unsupported value: []string{\"fly\"}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\""),
                ("spec.rules[0].resourceRules[0].namespaces", "Required value: resource rules that are not cluster scoped must supply at least one namespace"),
            ]
        );
        let mut exempt = json!({"metadata": {"name": "exempt"},
            "spec": mandatory_flow_schema_spec("exempt").unwrap()});
        assert!(flow_schema(&exempt).is_empty());
        exempt["spec"]["matchingPrecedence"] = json!(2);
        assert_eq!(
            flow_schema(&exempt)[0].message.split(": ").last(),
            Some("spec of 'exempt' must equal the fixed value")
        );
    }

    #[test]
    fn priority_level_findings() {
        let pl = json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 30, "lendablePercent": 101,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 8, "queueLengthLimit": 50}}}}});
        assert_eq!(
            found(&priority_level_configuration(&pl)),
            vec![
                (
                    "spec.limited.limitResponse.queuing.handSize",
                    "Invalid value: 8: should not be greater than queues (4)"
                ),
                (
                    "spec.limited.lendablePercent",
                    "Invalid value: 101: must be between 0 and 100, inclusive"
                ),
            ]
        );
        let mut exempt = json!({"metadata": {"name": "exempt"},
            "spec": mandatory_priority_level_spec("exempt").unwrap()});
        exempt["spec"]["exempt"]["nominalConcurrencyShares"] = json!(10);
        assert!(priority_level_configuration(&exempt).is_empty());
        assert_eq!(entropy_bits(64, 8), 48.0);
        assert_eq!(entropy_bits(1024, 7), 70.0);
    }
}
