//! Leases (upstream `pkg/apis/coordination/validation`, 1.33): a duration
//! above 0 and transitions not negative. The holder is free-form; the
//! coordinated leader election fields are off in 1.33.

use serde_json::Value;

use super::{invalid, FieldError};

/// A Lease (upstream `ValidateLeaseSpec`), on create and update.
pub fn lease(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(d) = obj.pointer("/spec/leaseDurationSeconds") {
        if d.as_i64().is_some_and(|n| n <= 0) {
            errors.push(invalid(
                "spec.leaseDurationSeconds".into(),
                d,
                "must be greater than 0",
            ));
        }
    }
    if let Some(t) = obj.pointer("/spec/leaseTransitions") {
        if t.as_i64().is_some_and(|n| n < 0) {
            errors.push(invalid(
                "spec.leaseTransitions".into(),
                t,
                "must be greater than or equal to 0",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn validate_lease_spec() {
        let fields = |v| {
            super::lease(&v)
                .into_iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
        };
        assert!(
            fields(json!({"spec": {"holderIdentity": "h", "leaseDurationSeconds": 15}})).is_empty()
        );
        assert_eq!(
            fields(json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}})),
            vec![
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }
}
