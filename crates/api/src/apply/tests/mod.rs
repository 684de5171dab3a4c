//! Table-driven tests of server-side apply. Expected managedFields and
//! messages follow upstream (structured-merge-diff merge tests, the
//! apiserver's apply integration tests and kubectl output).

mod fieldsv1;
mod update;

use serde_json::{json, Value};

use super::{apply, fields_of, record_update, ApplyError, FieldSet};

pub(super) const T0: &str = "2024-01-01T00:00:00Z";
pub(super) const T1: &str = "2024-01-01T00:01:00Z";
pub(super) const T2: &str = "2024-01-01T00:02:00Z";

pub(super) fn deployment(replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": image}]}
            }
        }
    })
}

/// An applied configuration with only the identifying fields and `spec`.
pub(super) fn config(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec})
}

pub(super) fn entries(object: &Value) -> Vec<Value> {
    object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The fieldsV1 of `manager`'s entry.
pub(super) fn fields(object: &Value, manager: &str) -> Option<Value> {
    entries(object)
        .into_iter()
        .find(|e| e["manager"] == manager)
        .map(|e| e["fieldsV1"].clone())
}

pub(super) fn apply_ok(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Value {
    match apply("Deployment", live, applied, manager, "apps/v1", force, now) {
        Ok(object) => object,
        Err(e) => panic!("apply by {manager}: {e}"),
    }
}

pub(super) fn apply_err(live: &Value, applied: &Value, manager: &str) -> ApplyError {
    match apply(
        "Deployment",
        Some(live),
        applied,
        manager,
        "apps/v1",
        false,
        T1,
    ) {
        Ok(object) => panic!("apply by {manager} succeeded: {object}"),
        Err(e) => e,
    }
}

#[test]
fn create_via_apply_records_the_applied_fields() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    assert_eq!(created["spec"]["replicas"], 3);
    assert_eq!(created["metadata"]["name"], "web");
    assert_eq!(
        entries(&created),
        vec![json!({
            "manager": "m1",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {
                            "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}
                        }}
                    }
                }
            }
        })]
    );
}

#[test]
fn reapplying_the_same_config_is_a_no_op() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let again = apply_ok(Some(&created), &deployment(3, "nginx:1"), "m1", false, T1);
    assert_eq!(again, created, "time must not move either");
}

/// Name, applied config, message, causes (field, message).
type ConflictCase = (
    &'static str,
    Value,
    &'static str,
    Vec<(&'static str, &'static str)>,
);

#[test]
fn conflicts_without_force_name_the_owner() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let cases: &[ConflictCase] = &[
        (
            "one field",
            config(json!({"replicas": 5})),
            r#"Apply failed with 1 conflict: conflict with "m1": .spec.replicas"#,
            vec![(".spec.replicas", r#"conflict with "m1""#)],
        ),
        (
            "two fields",
            config(json!({
                "replicas": 5,
                "template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
            })),
            "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .spec.replicas\n\
             - .spec.template.spec.containers[name=\"c\"].image",
            vec![
                (".spec.replicas", r#"conflict with "m1""#),
                (
                    r#".spec.template.spec.containers[name="c"].image"#,
                    r#"conflict with "m1""#,
                ),
            ],
        ),
    ];
    for (name, applied, message, causes) in cases {
        let err = apply_err(&created, applied, "m2");
        assert_eq!(err.to_string(), *message, "{name}");
        assert_eq!(err.status_code(), 409, "{name}");
        let want: Vec<(String, String)> = causes
            .iter()
            .map(|(f, m)| ((*f).to_owned(), (*m).to_owned()))
            .collect();
        assert_eq!(err.conflict_causes(), want, "{name}");
    }
    // The same value is no conflict: both managers own it.
    let shared = apply_ok(
        Some(&created),
        &config(json!({"replicas": 3})),
        "m2",
        false,
        T1,
    );
    assert_eq!(
        fields(&shared, "m2"),
        Some(json!({"f:spec": {"f:replicas": {}}}))
    );
    assert!(fields(&shared, "m1").is_some_and(|f| f["f:spec"]["f:replicas"] == json!({})));
}

#[test]
fn force_takes_ownership() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let forced = apply_ok(
        Some(&created),
        &config(json!({"replicas": 5})),
        "m2",
        true,
        T1,
    );
    assert_eq!(forced["spec"]["replicas"], 5);
    assert_eq!(
        fields(&forced, "m2"),
        Some(json!({"f:spec": {"f:replicas": {}}}))
    );
    let m1 = fields(&forced, "m1").unwrap_or_default();
    assert!(m1["f:spec"].get("f:replicas").is_none(), "{m1}");
    assert!(m1["f:spec"].get("f:selector").is_some(), "{m1}");
    // m1 re-applying its old value now conflicts with m2.
    let err = apply_err(&forced, &deployment(3, "nginx:1"), "m1");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "m2": .spec.replicas"#
    );
    // A manager that owns nothing any more loses its entry.
    let all = apply_ok(
        Some(&forced),
        &config(json!({"replicas": 7})),
        "m3",
        true,
        T2,
    );
    assert!(fields(&all, "m2").is_none());
}

#[test]
fn fields_left_out_are_removed_unless_someone_else_owns_them() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let mut without = deployment(3, "nginx:1");
    if let Some(spec) = without["spec"].as_object_mut() {
        spec.remove("replicas");
    }
    // Solely owned: removed from the object and from m1's entry.
    let pruned = apply_ok(Some(&created), &without, "m1", false, T1);
    assert!(pruned["spec"].get("replicas").is_none(), "{pruned}");
    assert_eq!(
        pruned["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert!(fields(&pruned, "m1").is_some_and(|f| f["f:spec"].get("f:replicas").is_none()));
    assert_eq!(entries(&pruned)[0]["time"], T1);

    // Shared with m2: stays, now owned by m2 alone.
    let shared = apply_ok(
        Some(&created),
        &config(json!({"replicas": 3})),
        "m2",
        false,
        T1,
    );
    let kept = apply_ok(Some(&shared), &without, "m1", false, T2);
    assert_eq!(kept["spec"]["replicas"], 3);
    assert_eq!(
        fields(&kept, "m2"),
        Some(json!({"f:spec": {"f:replicas": {}}}))
    );

    // A container m1 no longer applies goes, with the fields nobody owns.
    let mut two = deployment(3, "nginx:1");
    two["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "c", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]);
    let with_side = apply_ok(Some(&created), &two, "m1", false, T1);
    let containers = &with_side["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers.as_array().map(Vec::len), Some(2));
    let back = apply_ok(Some(&with_side), &deployment(3, "nginx:1"), "m1", false, T2);
    let containers = &back["spec"]["template"]["spec"]["containers"];
    assert_eq!(*containers, json!([{"name": "c", "image": "nginx:1"}]));
}

#[test]
fn containers_merge_by_name_across_managers() {
    let created = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let sidecar = config(json!({"template": {"spec": {"containers": [
        {"name": "side", "image": "busybox", "ports": [{"containerPort": 80}]}
    ]}}}));
    let both = apply_ok(Some(&created), &sidecar, "m2", false, T1);
    assert_eq!(
        both["spec"]["template"]["spec"]["containers"],
        json!([
            {"name": "c", "image": "nginx:1"},
            {"name": "side", "image": "busybox", "ports": [{"containerPort": 80}]}
        ])
    );
    assert_eq!(
        fields(&both, "m2"),
        Some(
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"side\"}": {
                    ".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                        ".": {}, "f:containerPort": {}
                    }}
                }
            }}}}})
        )
    );
    // m1 updating its own container keeps m2's, and needs no force.
    let updated = apply_ok(Some(&both), &deployment(3, "nginx:2"), "m1", false, T2);
    let containers = &updated["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers[0], json!({"name": "c", "image": "nginx:2"}));
    assert_eq!(containers[1]["name"], "side");
}

#[test]
fn invalid_configurations() {
    let cases: &[(&str, Value, &str)] = &[
        (
            "list",
            json!([1]),
            "error decoding YAML: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            "no apiVersion",
            json!({"kind": "Deployment"}),
            "Incorrect version specified in apply patch. Specified patch version: , expected: apps/v1",
        ),
        (
            "no kind",
            json!({"apiVersion": "apps/v1"}),
            r#"Object 'Kind' is missing in '{"apiVersion":"apps/v1"}'"#,
        ),
        (
            "managedFields",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"managedFields": []}}),
            "metadata.managedFields must be nil",
        ),
        (
            "duplicate keys",
            config(json!({"template": {"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}})),
            "failed to create typed patch object (apps/v1, Kind=Deployment): \
             .spec.template.spec.containers: duplicate entries for key [name=\"a\"]",
        ),
    ];
    for (name, applied, message) in cases {
        let got = apply("Deployment", None, applied, "m", "apps/v1", false, T0);
        assert_eq!(
            got,
            Err(ApplyError::Invalid((*message).to_owned())),
            "{name}"
        );
        if let Err(e) = got {
            assert_eq!(
                (e.status_code(), e.conflict_causes()),
                (400, vec![]),
                "{name}"
            );
        }
    }
}

#[test]
fn fields_of_skips_server_owned_fields() {
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": "c", "namespace": "d", "uid": "u", "resourceVersion": "5",
            "generation": 1, "creationTimestamp": null, "selfLink": "/x",
            "deletionTimestamp": "2024-01-01T00:00:00Z", "deletionGracePeriodSeconds": 0,
            "managedFields": [], "finalizers": ["a/b"], "annotations": {"x": "y"}
        },
        "data": {"k": "v"}
    });
    let want = json!({
        "f:data": {"f:k": {}},
        "f:metadata": {"f:annotations": {"f:x": {}}, "f:finalizers": {"v:\"a/b\"": {}}}
    });
    assert_eq!(fields_of("ConfigMap", &object).to_fields_v1(), want);
    assert!(fields_of(
        "ConfigMap",
        &json!({"apiVersion": "v1", "kind": "ConfigMap"})
    )
    .is_empty());
    assert_eq!(
        fields_of("Widget", &json!({"spec": {"a": [1]}}))
            .paths()
            .len(),
        1
    );
    assert_eq!(FieldSet::new(), fields_of("Widget", &json!({})));
}

#[test]
fn lists_merge_in_upstream_order_and_metadata_survives_pruning() {
    // Live [a, b, c] applied as [c, a]: b keeps its place before the
    // elements the configuration names, which come in its order.
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
    let created = record_update("Pod", None, &live, "creator", "v1", T0);
    let applied = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}, {"name": "a"}]}});
    let merged = match apply("Pod", Some(&created), &applied, "m", "v1", false, T1) {
        Ok(object) => object,
        Err(e) => panic!("{e}"),
    };
    let names: Vec<&Value> = merged["spec"]["containers"]
        .as_array()
        .map(|l| l.iter().map(|c| &c["name"]).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["b", "c", "a"]);

    // An applier that drops its labels and sends no metadata at all keeps
    // the object's metadata.
    let first = apply_ok(None, &deployment(3, "nginx:1"), "m1", false, T0);
    let bare = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3}});
    let second = apply_ok(Some(&first), &bare, "m1", false, T1);
    assert_eq!(second["metadata"]["name"], "web");
    assert!(second["metadata"].get("labels").is_none(), "{second}");
}
