//! Unit tests of the CRD schema engine, with upstream's cases and words
//! (pkg/apiserver/validation/validation_test.go and friends).

mod crds;
mod objects;

use serde_json::{json, Value};

use super::*;

pub(super) fn shown(errs: &[FieldError]) -> Vec<String> {
    let mut v: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    v.sort();
    v
}

pub(super) fn expect(errs: &[FieldError], want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(shown(errs), want);
}

pub(super) fn schema_of(field: Value) -> Structural {
    Structural::unchecked(&json!({"type": "object", "properties": {"field": field}}))
}

/// (object, expected errors) pairs against one field schema.
pub(super) fn cases(field: Value, ok: &[Value], bad: &[(Value, &[&str])]) {
    let s = schema_of(field);
    for o in ok {
        let obj = json!({"field": o});
        assert_eq!(shown(&s.validate(&obj)), Vec::<String>::new(), "{obj}");
    }
    for (o, want) in bad {
        let obj = json!({"field": o});
        expect(&s.validate(&obj), want);
    }
}
