//! `FieldsV1` encoding, path strings and set operations.

use serde_json::{json, Value};

use super::super::{fields_of, path_string, ApplyError, FieldSet, PathElement};

fn parse(value: &Value) -> FieldSet {
    match FieldSet::from_fields_v1(value) {
        Ok(set) => set,
        Err(e) => panic!("{value}: {e}"),
    }
}

fn paths(set: &FieldSet) -> Vec<String> {
    set.paths().iter().map(|p| path_string(p)).collect()
}

#[test]
fn fields_v1_round_trips() {
    let cases: &[(&str, Value, &[&str])] = &[
        ("empty", json!({}), &[]),
        (
            "maps and keyed elements",
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}
            }),
            &[
                ".metadata.labels.app",
                r#".spec.containers[name="c"]"#,
                r#".spec.containers[name="c"].image"#,
            ],
        ),
        (
            "several keys, sets and indexes",
            json!({
                "f:metadata": {"f:finalizers": {".": {}, "v:\"a/b\"": {}, "v:3": {}}},
                "f:spec": {
                    "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}},
                    "f:list": {"i:2": {}}
                }
            }),
            &[
                ".metadata.finalizers",
                ".metadata.finalizers[=3]",
                r#".metadata.finalizers[="a/b"]"#,
                ".spec.list[2]",
                r#".spec.ports[port=80,protocol="TCP"]"#,
                r#".spec.ports[port=80,protocol="TCP"].port"#,
            ],
        ),
    ];
    for (name, encoded, want) in cases {
        let set = parse(encoded);
        assert_eq!(set.to_fields_v1(), *encoded, "{name}");
        assert_eq!(paths(&set), *want, "{name}");
        let mut rebuilt = FieldSet::new();
        for path in set.paths() {
            assert!(set.contains(&path), "{name}");
            rebuilt.insert(&path);
        }
        assert_eq!(rebuilt, set, "{name}");
    }
}

#[test]
fn fields_v1_reading_follows_upstream() {
    // Keys of unknown element types are skipped; "." alone is a leaf.
    let set = parse(&json!({"f:a": {".": {}}, "x:b": {}, "f:c": {"z:d": {}}}));
    assert_eq!(paths(&set), vec![".a", ".c"]);
    for bad in [
        json!({"f": {}}),
        json!({"fa": {}}),
        json!({"k:[1]": {}}),
        json!({"v:{": {}}),
        json!({"i:x": {}}),
        json!({"f:a": 1}),
        json!([]),
    ] {
        assert!(
            matches!(FieldSet::from_fields_v1(&bad), Err(ApplyError::Invalid(_))),
            "{bad}"
        );
    }
}

#[test]
fn set_operations_are_exact_path_operations() {
    let a = parse(&json!({"f:spec": {".": {}, "f:replicas": {}, "f:paused": {}}}));
    let b = parse(&json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(paths(&a.difference(&b)), vec![".spec", ".spec.paused"]);
    assert_eq!(paths(&a.intersection(&b)), vec![".spec.replicas"]);
    assert_eq!(a.union(&b), a);
    assert!(b.difference(&a).is_empty());
    let spec = [PathElement::Field("spec".into())];
    let mut only_spec = FieldSet::new();
    only_spec.insert(&spec);
    assert_eq!(
        paths(&a.difference(&only_spec)),
        vec![".spec.paused", ".spec.replicas"]
    );
}

#[test]
fn fields_of_follows_the_apply_schema() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "k"}],
            "containers": [{
                "name": "c",
                "args": ["a"],
                "ports": [{"containerPort": 53, "protocol": "UDP"}, {"containerPort": 80}],
                "env": [{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
                "resources": {}
            }]
        }
    });
    let c = r#".spec.containers[name="c"]"#;
    let mut want: Vec<String> = vec![
        ".spec.nodeSelector".into(),
        ".spec.tolerations".into(),
        c.into(),
    ];
    for tail in [
        ".args",
        ".name",
        ".resources",
        r#".env[name="E"]"#,
        r#".env[name="E"].name"#,
        r#".env[name="E"].valueFrom.fieldRef"#,
        r#".ports[containerPort=53,protocol="UDP"]"#,
        r#".ports[containerPort=80,protocol="TCP"]"#,
        r#".ports[containerPort=53,protocol="UDP"].containerPort"#,
        r#".ports[containerPort=53,protocol="UDP"].protocol"#,
        r#".ports[containerPort=80,protocol="TCP"].containerPort"#,
    ] {
        want.push(format!("{c}{tail}"));
    }
    assert_eq!(paths(&fields_of("Pod", &pod)), want);
}
