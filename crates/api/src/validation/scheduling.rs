//! PriorityClasses (scheduling.k8s.io/v1), upstream
//! pkg/apis/scheduling/validation: the reserved `system-` prefix (only
//! the two built-in classes, with their values), the highest value a
//! user may give (one billion), the preemption policy, and value and
//! preemptionPolicy fixed after creation. Only one class may be the
//! global default; the Priority admission plugin checks that.

use serde_json::Value;

use super::{not_supported, required, FieldError};

/// The largest value of a class not named `system-...`.
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// The built-in classes: name, value (never global defaults).
pub const SYSTEM_PRIORITY_CLASSES: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

fn forbidden(field: &str, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    }
}

/// Upstream `IsKnownSystemPriorityClass`.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _)| *n == name) {
        None => Err(format!("{name} is not a known system priority class")),
        Some((n, v)) if *v != value => Err(format!("value of {n} PriorityClass must be {v}")),
        Some((n, _)) if global_default => {
            Err(format!("globalDefault of {n} PriorityClass must be false"))
        }
        Some(_) => Ok(()),
    }
}

/// Upstream `ValidatePreemptionPolicy`.
pub fn preemption_policy(v: Option<&Value>, field: &str) -> Option<FieldError> {
    let p = v?.as_str().unwrap_or("");
    match p {
        "PreemptLowerPriority" | "Never" => None,
        "" => Some(required(field.into())),
        other => Some(not_supported(
            field.into(),
            other,
            &["PreemptLowerPriority", "Never"],
        )),
    }
}

/// A PriorityClass.
pub fn priority_class(pc: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = pc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = pc.get("value").and_then(Value::as_i64).unwrap_or(0);
    let global_default = pc
        .get("globalDefault")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if name.starts_with("system-") {
        if let Err(e) = known_system_class(name, value, global_default) {
            errors.push(forbidden(
                "metadata.name",
                &format!("priority class names with 'system-' prefix are reserved for system use only. error: {e}"),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errors.push(forbidden(
            "value",
            &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"),
        ));
    }
    errors.extend(preemption_policy(
        pc.get("preemptionPolicy"),
        "preemptionPolicy",
    ));
    errors
}

/// An update: value and preemptionPolicy stay.
pub fn priority_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = priority_class(new);
    if old.get("value") != new.get("value") {
        errors.push(forbidden("value", "may not be changed in an update."));
    }
    if old.get("preemptionPolicy") != new.get("preemptionPolicy") {
        let shown = match new.get("preemptionPolicy") {
            Some(Value::String(s)) => format!("\"{s}\""),
            _ => "null".into(),
        };
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field: "preemptionPolicy".into(),
            message: format!("Invalid value: {shown}: field is immutable"),
        });
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reserved_names_and_values() {
        let e = priority_class(&json!({"metadata": {"name": "system-foo"}, "value": 1}));
        assert_eq!(e[0].message, "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-foo is not a known system priority class");
        assert!(priority_class(
            &json!({"metadata": {"name": "system-node-critical"}, "value": 2000001000})
        )
        .is_empty());
        let e = priority_class(&json!({"metadata": {"name": "high"}, "value": 2000000000}));
        assert_eq!(e[0].field, "value");
        let e = priority_class(
            &json!({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Sometimes"}),
        );
        assert_eq!(e[0].message, "Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\"");
        let e = priority_class_update(
            &json!({"metadata": {"name": "x"}, "value": 1}),
            &json!({"metadata": {"name": "x"}, "value": 2}),
        );
        assert_eq!(e[0].message, "Forbidden: may not be changed in an update.");
    }
}
