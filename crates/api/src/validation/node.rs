//! node.k8s.io/v1 RuntimeClasses, as upstream's pkg/apis/node/validation
//! checks them (1.33): the handler is a DNS label and immutable, the
//! overhead's quantities are not negative, the scheduling node selector
//! holds valid labels and its tolerations are valid and distinct.

use serde_json::Value;

use super::common::{immutable, invalid_shown, invalid_str, items, str_at};
use super::{meta, names, not_supported, FieldError};
use crate::quantity::ParsedQuantity;

const TOLERATION_OPERATORS: &[&str] = &["Equal", "Exists"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A RuntimeClass on create.
pub fn runtime_class(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let handler = str_at(obj, "handler").unwrap_or_default();
    for m in names::dns1123_label(handler) {
        errors.push(invalid_str("handler", handler, &m));
    }
    if let Some(fixed) = obj.pointer("/overhead/podFixed").and_then(Value::as_object) {
        for (name, q) in fixed {
            let at = format!("overhead.podFixed[{name}]");
            let s = q.as_str().unwrap_or_default();
            if ParsedQuantity::parse(s).is_ok_and(|p| p.is_negative()) {
                errors.push(invalid_str(at, s, "must be greater than or equal to 0"));
            }
        }
    }
    if let Some(s) = obj.get("scheduling").filter(|s| !s.is_null()) {
        if let Some(sel) = s.get("nodeSelector").and_then(Value::as_object) {
            errors.extend(meta::label_map(sel, "scheduling.nodeSelector"));
        }
        errors.extend(tolerations(
            items(s, "tolerations"),
            "scheduling.tolerations",
        ));
    }
    errors
}

/// A RuntimeClass update: the handler is immutable.
pub fn runtime_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = runtime_class(new);
    if old.get("handler") != new.get("handler") {
        errors.push(immutable("handler", new.get("handler")));
    }
    errors
}

/// What upstream's `ValidateTolerations` finds in any toleration at `at`:
/// the key a qualified name, an empty key only with Exists,
/// tolerationSeconds only with NoExecute.
pub(crate) fn toleration_common(t: &Value, at: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let key = str_at(t, "key").unwrap_or_default();
    if !key.is_empty() {
        for m in names::qualified_name(key) {
            errors.push(invalid_str(format!("{at}.key"), key, &m));
        }
    }
    let op = str_at(t, "operator").unwrap_or_default();
    if key.is_empty() && op != "Exists" {
        errors.push(invalid_str(
            format!("{at}.operator"),
            op,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    let effect = str_at(t, "effect").unwrap_or_default();
    if t.get("tolerationSeconds").is_some_and(|s| !s.is_null()) && effect != "NoExecute" {
        errors.push(invalid_str(
            format!("{at}.effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
    errors
}

/// `ValidateTolerations` (the common findings), then uniqueness.
fn tolerations(list: &[Value], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut seen: Vec<(&str, &str, &str, &str)> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        errors.extend(toleration_common(t, &at));
        let key = str_at(t, "key").unwrap_or_default();
        let op = str_at(t, "operator").unwrap_or_default();
        let effect = str_at(t, "effect").unwrap_or_default();
        let seconds = t.get("tolerationSeconds").filter(|s| !s.is_null());
        let value = str_at(t, "value").unwrap_or_default();
        let shown = format!(
            "core.Toleration{{Key:\"{key}\", Operator:\"{op}\", Value:\"{value}\", Effect:\"{effect}\", TolerationSeconds:{}}}",
            match seconds {
                Some(_) => "(*int64)(0xc000000000)",
                None => "(*int64)(nil)",
            }
        );
        match op {
            "" | "Equal" => {
                let errs = names::label_value(value);
                if !errs.is_empty() {
                    errors.push(invalid_shown(
                        format!("{at}.operator"),
                        &shown,
                        &errs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errors.push(invalid_shown(
                        format!("{at}.operator"),
                        &shown,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errors.push(not_supported(
                format!("{at}.operator"),
                other,
                TOLERATION_OPERATORS,
            )),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errors.push(not_supported(format!("{at}.effect"), effect, TAINT_EFFECTS));
        }
        let id = (key, op, value, effect);
        if seen.contains(&id) {
            errors.push(FieldError {
                reason: "FieldValueDuplicate",
                field: at,
                message: format!("Duplicate value: {shown}"),
            });
        } else {
            seen.push(id);
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn handler_rules() {
        assert!(runtime_class(&json!({"handler": "runc"})).is_empty());
        let e = runtime_class(&json!({"handler": "Run_C"}));
        assert_eq!(e[0].field, "handler");
        assert!(e[0]
            .message
            .starts_with("Invalid value: \"Run_C\": a lowercase RFC 1123 label"));
        let e = runtime_class_update(&json!({"handler": "a"}), &json!({"handler": "b"}));
        assert_eq!(e[0].message, "Invalid value: \"b\": field is immutable");
    }
}
