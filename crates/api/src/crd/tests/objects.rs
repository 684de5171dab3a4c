//! Custom objects: validation, defaulting, pruning, columns, patterns.

use serde_json::{json, Value};

use super::super::*;
use super::{cases, expect};

#[test]
fn type_errors_as_upstream() {
    cases(
        json!({"type": "object"}),
        &[json!({})],
        &[
            (
                json!("foo"),
                &[
                    r#"field: Invalid value: "string": field in body must be of type object: "string""#,
                ],
            ),
            (
                json!(42),
                &[
                    r#"field: Invalid value: "integer": field in body must be of type object: "integer""#,
                ],
            ),
            (
                json!(true),
                &[
                    r#"field: Invalid value: "boolean": field in body must be of type object: "boolean""#,
                ],
            ),
            (
                json!(1.2),
                &[
                    r#"field: Invalid value: "number": field in body must be of type object: "number""#,
                ],
            ),
            (
                json!([]),
                &[
                    r#"field: Invalid value: "array": field in body must be of type object: "array""#,
                ],
            ),
            (
                Value::Null,
                &[r#"field: Invalid value: "null": field in body must be of type object: "null""#],
            ),
        ],
    );
    cases(
        json!({"type": "object", "nullable": true}),
        &[json!({}), Value::Null],
        &[],
    );
    cases(
        json!({"nullable": true}),
        &[
            json!({}),
            Value::Null,
            json!("foo"),
            json!(42),
            json!(true),
            json!(1.2),
            json!([]),
        ],
        &[],
    );
    // The brief's example: an integer field given a string.
    let s = Structural::unchecked(
        &json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"replicas": {"type": "integer"}}}}}),
    );
    expect(
        &s.validate(&json!({"spec": {"replicas": "string"}})),
        &[
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
        ],
    );
    // whole floats pass as integers, integers as numbers
    cases(json!({"type": "integer"}), &[json!(3.0), json!(3)], &[]);
    cases(json!({"type": "number"}), &[json!(3), json!(1.5)], &[]);
}

#[test]
fn int_or_string_and_its_any_of_patterns() {
    cases(
        json!({"x-kubernetes-int-or-string": true}),
        &[json!(42), json!("foo")],
        &[
            (
                Value::Null,
                &[
                    r#"field: Invalid value: "null": field in body must be of type integer,string: "null""#,
                ],
            ),
            (
                json!(true),
                &[
                    r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
                ],
            ),
            (
                json!({}),
                &[
                    r#"field: Invalid value: "object": field in body must be of type integer,string: "object""#,
                ],
            ),
        ],
    );
    cases(
        json!({"x-kubernetes-int-or-string": true, "nullable": true,
               "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        &[Value::Null, json!(42), json!("foo")],
        &[(
            json!(true),
            &[
                r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                r#"field: Invalid value: "boolean": field in body must be of type integer,string: "boolean""#,
                r#"field: Invalid value: "boolean": field in body must be of type integer: "boolean""#,
            ],
        )],
    );
    cases(
        json!({"x-kubernetes-int-or-string": true, "nullable": true,
               "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}),
        &[Value::Null, json!(42), json!("foo")],
        &[(
            json!(1.2),
            &[
                r#"<nil>: Invalid value: "": "field" must validate all the schemas (allOf). None validated"#,
                r#"<nil>: Invalid value: "": "field" must validate at least one schema (anyOf)"#,
                r#"field: Invalid value: "number": field in body must be of type integer,string: "number""#,
                r#"field: Invalid value: "number": field in body must be of type integer: "number""#,
            ],
        )],
    );
}

#[test]
fn required_enum_and_limits() {
    let s = Structural::unchecked(
        &json!({"type": "object", "required": ["field"], "properties": {
        "field": {"type": "object", "required": ["nested"], "properties": {"nested": {}}}}}),
    );
    expect(
        &s.validate(&json!({"test": "a"})),
        &["field: Required value"],
    );
    expect(
        &s.validate(&json!({"field": {}})),
        &["field.nested: Required value"],
    );

    let s = Structural::unchecked(&json!({"type": "object", "properties": {"field": {
        "type": "object", "required": ["nestedint", "nestedstring"], "properties": {
            "nestedint": {"type": "integer", "enum": [1, 2]},
            "nestedstring": {"type": "string", "enum": ["a", "b"]}}}}}));
    expect(
        &s.validate(&json!({"field": {}})),
        &[
            "field.nestedint: Required value",
            "field.nestedstring: Required value",
        ],
    );
    expect(
        &s.validate(&json!({"field": {"nestedint": "x", "nestedstring": true}})),
        &[
            r#"field.nestedint: Invalid value: "string": field.nestedint in body must be of type integer: "string""#,
            r#"field.nestedint: Unsupported value: "x": supported values: "1", "2""#,
            r#"field.nestedstring: Invalid value: "boolean": field.nestedstring in body must be of type string: "boolean""#,
            r#"field.nestedstring: Unsupported value: true: supported values: "a", "b""#,
        ],
    );
    assert!(s
        .validate(&json!({"field": {"nestedint": 2, "nestedstring": "a"}}))
        .is_empty());

    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "fieldX": {"type": "object", "maxProperties": 2},
        "fieldY": {"type": "array", "maxItems": 2, "minItems": 1},
        "fieldZ": {"type": "string", "maxLength": 2, "minLength": 1, "pattern": "^[a-c]+$"},
        "n": {"type": "integer", "minimum": 1, "maximum": 10, "exclusiveMaximum": true, "multipleOf": 3}}}));
    expect(
        &s.validate(&json!({"fieldX": {"a": true, "b": true, "c": true}})),
        &["fieldX: Too many: 3: must have at most 2 items"],
    );
    expect(
        &s.validate(&json!({"fieldY": ["a", "b", "c"]})),
        &["fieldY: Too many: 3: must have at most 2 items"],
    );
    expect(
        &s.validate(&json!({"fieldY": []})),
        &["fieldY: Invalid value: 0: fieldY in body should have at least 1 items"],
    );
    expect(
        &s.validate(&json!({"fieldZ": "abc"})),
        &["fieldZ: Too long: may not be more than 2 bytes"],
    );
    expect(
        &s.validate(&json!({"fieldZ": ""})),
        &[r#"fieldZ: Invalid value: "": fieldZ in body should be at least 1 chars long"#],
    );
    expect(
        &s.validate(&json!({"fieldZ": "xy"})),
        &[r#"fieldZ: Invalid value: "xy": fieldZ in body should match '^[a-c]+$'"#],
    );
    expect(
        &s.validate(&json!({"n": 0})),
        &["n: Invalid value: 0: n in body should be greater than or equal to 1"],
    );
    expect(
        &s.validate(&json!({"n": 12})),
        &["n: Invalid value: 12: n in body should be less than 10"],
    );
    expect(
        &s.validate(&json!({"n": 4})),
        &["n: Invalid value: 4: n in body should be a multiple of 3"],
    );
    assert!(s
        .validate(&json!({"n": 9, "fieldZ": "ab", "fieldY": [1]}))
        .is_empty());
}

#[test]
fn invalid_pattern_reports_go_parse_error() {
    cases(
        json!({"type": "string", "pattern": "+"}),
        &[],
        &[(
            json!("foo"),
            &["field: Invalid value: \"foo\": field in body should match '+, but pattern is invalid: error parsing regexp: missing argument to repetition operator: `+`'"],
        )],
    );
}

#[test]
fn items_additional_properties_and_formats() {
    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "list": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date-time"},
        "n": {"type": "integer", "format": "int32"}}}));
    expect(
        &s.validate(&json!({"list": [{"port": 1}, {"port": "x"}], "labels": {"a": "b", "c": 1}})),
        &[
            r#"labels.c: Invalid value: "integer": labels.c in body must be of type string: "integer""#,
            r#"list[1].port: Invalid value: "string": list[1].port in body must be of type integer: "string""#,
        ],
    );
    expect(
        &s.validate(&json!({"id": "nope", "when": "yesterday"})),
        &[
            r#"id: Invalid value: "nope": id in body must be of type uuid: "nope""#,
            r#"when: Invalid value: "yesterday": when in body must be of type date-time: "yesterday""#,
        ],
    );
    // a formatted string given another type names the format
    expect(
        &s.validate(&json!({"when": 5, "id": true})),
        &[
            r#"id: Invalid value: "": id in body must be of type uuid: """#,
            r#"when: Invalid value: "int64": when in body must be of type date-time: "int64""#,
        ],
    );
    // int32 is not a format upstream checks; unknown formats are ignored
    assert!(s
        .validate(&json!({"id": "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
                           "when": "2024-01-02T03:04:05Z", "n": 99999999999i64}))
        .is_empty());
}

#[test]
fn list_types_and_embedded_resources() {
    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "child": {"type": "object", "x-kubernetes-embedded-resource": true,
                  "x-kubernetes-preserve-unknown-fields": true}}}));
    expect(
        &s.validate(
            &json!({"set": ["a", "b", "a", "a"], "map": [{"name": "x"}, {"name": "x"}, "s"]}),
        ),
        &[
            r#"map[2]: Invalid value: "s": must be an object for an array of list-type map"#,
            r#"map[2]: Invalid value: "string": map[2] in body must be of type object: "string""#,
            r#"set[2]: Duplicate value: "a""#,
        ],
    );
    expect(
        &s.validate(&json!({"map": [{"name": "x"}, {"name": "x"}]})),
        &[r#"map[1]: Duplicate value: map[string]interface {}{"name":"x"}"#],
    );
    expect(
        &s.validate(&json!({"child": {"metadata": {"name": "a/b"}}})),
        &[
            "child.apiVersion: Required value: must not be empty",
            "child.kind: Required value: must not be empty",
            r#"child.metadata.name: Invalid value: "a/b": may not contain '/'"#,
        ],
    );
    assert!(s
        .validate(&json!({"child": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}))
        .is_empty());
}

#[test]
fn defaulting_as_upstream() {
    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "default": {}, "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "default": "a"},
            "ports": {"type": "array", "items": {"type": "object", "properties": {
                "protocol": {"type": "string", "default": "TCP"}}}},
            "extra": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "x": {"type": "integer", "default": 7}}}},
            "gone": {"type": "string"},
            "kept": {"type": "string", "nullable": true}}}}}));
    let mut obj = json!({});
    s.default(&mut obj);
    assert_eq!(obj, json!({"spec": {"replicas": 1, "mode": "a"}}));
    let mut obj = json!({"spec": {"replicas": 3, "mode": null, "ports": [{}, {"protocol": "UDP"}],
        "extra": {"k": {}}, "gone": null, "kept": null}});
    s.default(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {"replicas": 3, "mode": "a", "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}],
            "extra": {"k": {"x": 7}}, "kept": null}})
    );
}

#[test]
fn pruning_as_upstream() {
    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "a": {"type": "string"},
            "list": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                     "properties": {"inner": {"type": "object", "properties": {}}}},
            "emb": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}}}}}}));
    let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "status": {},
        "spec": {"a": "1", "foo": 1, "list": [{"b": "2", "c": 3}],
                 "free": {"any": 1, "inner": {"drop": 1}},
                 "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1}, "other": 1, "spec": {}}}});
    let pruned = s.prune(&mut obj);
    assert_eq!(
        pruned,
        vec![
            "spec.emb.other",
            "spec.foo",
            "spec.free.inner.drop",
            "spec.list[0].c",
            "status"
        ]
    );
    assert_eq!(
        obj,
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"},
            "spec": {"a": "1", "list": [{"b": "2"}], "free": {"any": 1, "inner": {}},
                     "emb": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}})
    );
}

#[test]
fn ratcheting_on_update() {
    let s = Structural::unchecked(&json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 2},
            "b": {"type": "integer"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer", "maximum": 10}}}},
            "atomic": {"type": "array", "items": {"type": "integer", "maximum": 10}}}}}}));
    let old = json!({"spec": {"a": "long", "b": 1, "ports": [{"name": "x", "port": 99}], "atomic": [99, 1]}});
    // unchanged invalid values ratchet
    let new = json!({"spec": {"a": "long", "b": 2, "ports": [{"name": "y", "port": 1}, {"name": "x", "port": 99}], "atomic": [99, 1]}});
    expect(&s.validate_update(&new, &old), &[]);
    // changed ones do not; an atomic list's items do not correlate
    let new = json!({"spec": {"a": "longer", "b": 2, "ports": [{"name": "x", "port": 98}], "atomic": [99, 2]}});
    expect(
        &s.validate_update(&new, &old),
        &[
            "spec.a: Too long: may not be more than 2 bytes",
            "spec.atomic[0]: Invalid value: 99: spec.atomic[0] in body should be less than or equal to 10",
            "spec.ports[0].port: Invalid value: 98: spec.ports[0].port in body should be less than or equal to 10",
        ],
    );
    assert_eq!(s.validate(&new).len(), 3);
}

#[test]
fn printer_column_paths() {
    let obj = json!({"spec": {"replicas": 3, "list": [1, 2, 3], "m": {"a.b": "dot"}},
        "status": {"conditions": [{"type": "Progressing", "status": "False"}, {"type": "Ready", "status": "True"}]}});
    assert_eq!(Structural::column(&obj, ".spec.replicas"), Some(json!(3)));
    assert_eq!(Structural::column(&obj, ".spec.missing"), None);
    assert_eq!(
        Structural::column(&obj, r#".status.conditions[?(@.type=="Ready")].status"#),
        Some(json!("True"))
    );
    assert_eq!(Structural::column(&obj, ".spec.list[-1]"), Some(json!(3)));
    assert_eq!(Structural::column(&obj, ".spec.list[1:]"), Some(json!(2)));
    assert_eq!(
        Structural::column(&obj, ".spec.m['a.b']"),
        Some(json!("dot"))
    );
    assert_eq!(Structural::column(&obj, "{.spec.list[*]}"), Some(json!(1)));
    assert_eq!(
        Structural::column(&obj, "..conditions[1].type"),
        Some(json!("Ready"))
    );
    assert_eq!(Structural::column(&obj, ".spec[unclosed"), None);
}

#[test]
fn regex_engine() {
    use super::super::regex::Regex;
    let m = |p: &str, t: &str| Regex::new(p).map(|r| r.is_match(t)).unwrap_or(false);
    assert!(m("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-name"));
    assert!(!m("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "-bad"));
    assert!(m("ab", "xxabyy"));
    assert!(m("^(foo|bar){2}$", "foobar"));
    assert!(!m("^(foo|bar){2}$", "foo"));
    assert!(m(r"^\d{3}-\w+\s?$", "123-abc "));
    assert!(m("(?i)^HELLO$", "hello"));
    assert!(m(r"^[^/]+$", "abc"));
    assert!(!m(r"^[^/]+$", "a/c"));
    assert!(m(r"\bword\b", "a word here"));
    assert!(m("^a.c$", "abc") && !m("^a.c$", "a\nc"));
    assert!(m("^[[:alpha:]]+$", "abc"));
    assert!(m("^$", ""));
    // a pathological pattern stays linear
    assert!(!m("^(a+)+$", &format!("{}b", "a".repeat(5000))));
    let e = |p: &str| Regex::new(p).err().map(|e| e.to_string());
    assert_eq!(
        e("("),
        Some("error parsing regexp: missing closing ): `(`".into())
    );
    assert_eq!(
        e("a**"),
        Some("error parsing regexp: invalid nested repetition operator: `**`".into())
    );
    assert_eq!(
        e("[z-a]"),
        Some("error parsing regexp: invalid character class range: `z-a`".into())
    );
    assert_eq!(
        e(r"\q"),
        Some(r"error parsing regexp: invalid escape sequence: `\q`".into())
    );
    assert_eq!(
        e("a{1001}"),
        Some("error parsing regexp: invalid repeat count: `{1001}`".into())
    );
}

/// upstream pruning/algorithm_test.go "nested x-kubernetes-preserve-unknown-fields".
#[test]
fn pruning_nested_preserve_unknown_fields() {
    let obj_schema = json!({"type": "object"});
    let s = Structural::unchecked(&json!({
        "type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "alpha": {"type": "string"}, "beta": {"type": "number"},
            "pruning": {"type": "object", "properties": {
                "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "pruning": obj_schema}},
            "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
                "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": true},
                "pruning": obj_schema}},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "additionalProperties": {"type": "object", "properties": {"specified": obj_schema}}},
            "preservingAdditionalPropertiesKeyPruneValues": {"type": "object",
                "additionalProperties": {"type": "object", "properties": {"specified": obj_schema}}}}}));
    let mut obj = json!({
        "unspecified": "bar", "alpha": "abc", "beta": 42.0, "unspecifiedObject": {"unspecified": "bar"},
        "pruning": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"unspecified": "bar"}, "apiVersion": "unknown", "preserving": {"unspecified": "bar"}},
        "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"},
            "preservingUnknownType": [{"foo": true}, {"bar": true}]},
        "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
            "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
        "preservingAdditionalPropertiesKeyPruneValues": {
            "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}}});
    let pruned = s.prune(&mut obj);
    assert_eq!(
        pruned,
        vec![
            "preserving.pruning.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
            "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
            "pruning.apiVersion",
            "pruning.pruning.unspecified",
            "pruning.unspecified",
            "pruning.unspecifiedObject",
        ]
    );
    assert_eq!(
        obj,
        json!({
            "unspecified": "bar", "alpha": "abc", "beta": 42.0, "unspecifiedObject": {"unspecified": "bar"},
            "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
            "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"}, "pruning": {},
                "preserving": {"unspecified": "bar"}, "preservingUnknownType": [{"foo": true}, {"bar": true}]},
            "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {"foo": {"specified": {}}},
            "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}}})
    );
}

/// Random schemas and objects through every entry point: nothing panics.
#[test]
fn random_inputs_do_not_panic() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    fn value(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> Value {
        let keys = [
            "type",
            "properties",
            "items",
            "default",
            "a",
            "b",
            "enum",
            "required",
            "x-kubernetes-list-type",
            "x-kubernetes-list-map-keys",
            "additionalProperties",
            "x-kubernetes-embedded-resource",
            "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-int-or-string",
            "nullable",
            "pattern",
            "maxLength",
            "minimum",
            "anyOf",
            "allOf",
            "not",
            "format",
            "metadata",
            "apiVersion",
            "kind",
        ];
        let words = [
            "object",
            "array",
            "string",
            "integer",
            "number",
            "boolean",
            "set",
            "map",
            "a",
            "^a+$",
            "(",
            "date-time",
            "uuid",
            "v1",
            "",
        ];
        match next(if depth > 4 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => json!(next(2) == 0),
            2 => json!(next(20) as i64 - 5),
            3 => json!(next(100) as f64 / 7.0),
            4 => json!(words[next(words.len() as u64) as usize]),
            5 | 6 => {
                let mut m = serde_json::Map::new();
                for _ in 0..next(5) {
                    m.insert(
                        keys[next(keys.len() as u64) as usize].to_string(),
                        value(next, depth + 1),
                    );
                }
                Value::Object(m)
            }
            _ => Value::Array((0..next(4)).map(|_| value(next, depth + 1)).collect()),
        }
    }
    for _ in 0..3000 {
        let schema = value(&mut next, 0);
        let mut obj = value(&mut next, 0);
        let old = value(&mut next, 0);
        let _ = Structural::new(&schema, "s");
        let s = Structural::unchecked(&schema);
        s.prune(&mut obj);
        s.default(&mut obj);
        let _ = s.validate(&obj);
        let _ = s.validate_update(&obj, &old);
        let _ = Structural::column(&obj, ".a[0].b");
        let crd = json!({"metadata": {"name": "x"}, "spec": {"group": "a.b", "versions": [{"name": "v1",
            "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}], "names": obj}});
        let _ = validate_crd(&crd);
        let _ = validate_crd_update(&crd, &old);
    }
}

#[test]
fn numbers_print_as_go_does() {
    use super::super::errors::go_float;
    assert_eq!(go_float(1e6), "1e+06");
    assert_eq!(go_float(1.5e-7), "1.5e-07");
    assert_eq!(go_float(123456.0), "123456");
    assert_eq!(go_float(1234567.0), "1.234567e+06");
    assert_eq!(go_float(0.0001), "0.0001");
    assert_eq!(go_float(10.0), "10");
    assert_eq!(go_float(-2.5), "-2.5");
    // integers compare natively against the bound cut to an int64; floats print %v
    cases(
        json!({"type": "number", "maximum": 1000000, "multipleOf": 0.5}),
        &[json!(999999.5), json!(3)],
        &[
            (json!(2000000), &["field: Invalid value: 2000000: field in body should be less than or equal to 1000000"]),
            (json!(2e6), &["field: Invalid value: 2e+06: field in body should be less than or equal to 1e+06"]),
            (json!(0.3), &["field: Invalid value: 0.3: field in body should be a multiple of 0.5"]),
        ],
    );
    cases(
        json!({"type": "integer", "minimum": 1.5, "multipleOf": 2}),
        &[json!(2)],
        &[
            (
                json!(0),
                &["field: Invalid value: 0: field in body should be greater than or equal to 1.5"],
            ),
            (
                json!(3),
                &["field: Invalid value: 3: field in body should be a multiple of 2"],
            ),
        ],
    );
}
