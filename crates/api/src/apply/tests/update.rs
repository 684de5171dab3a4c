//! Ownership recorded by creates and updates, and how applies meet it.

use serde_json::{json, Value};

use super::super::record_update;
use super::{apply_err, config, deployment, entries, fields, T0, T1, T2};

#[test]
fn updates_own_the_fields_they_change() {
    let created = record_update(
        "Deployment",
        None,
        &deployment(3, "nginx:1"),
        "kubectl-create",
        "apps/v1",
        T0,
    );
    assert_eq!(
        entries(&created),
        vec![json!({
            "manager": "kubectl-create",
            "operation": "Update",
            "apiVersion": "apps/v1",
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {"f:containers": {
                            "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}
                        }}
                    }
                }
            }
        })]
    );
    let err = apply_err(&created, &config(json!({"replicas": 5})), "kubectl");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using apps/v1: .spec.replicas"#
    );
    assert_eq!(
        err.conflict_causes(),
        vec![(
            ".spec.replicas".to_owned(),
            r#"conflict with "kubectl-create" using apps/v1"#.to_owned()
        )]
    );

    // An edit by another manager takes the field it changed.
    let mut edited = created.clone();
    edited["spec"]["replicas"] = json!(4);
    let edited = record_update(
        "Deployment",
        Some(&created),
        &edited,
        "kubectl-edit",
        "apps/v1",
        T1,
    );
    assert_eq!(
        fields(&edited, "kubectl-edit"),
        Some(json!({"f:spec": {"f:replicas": {}}}))
    );
    assert!(
        fields(&edited, "kubectl-create").is_some_and(|f| f["f:spec"].get("f:replicas").is_none())
    );
    // Entries are sorted: Apply first, then by time.
    let managers: Vec<Value> = entries(&edited)
        .iter()
        .map(|e| e["manager"].clone())
        .collect();
    assert_eq!(
        managers,
        vec![json!("kubectl-create"), json!("kubectl-edit")]
    );

    // An update that changes nothing leaves the entries alone.
    let same = record_update("Deployment", Some(&edited), &edited, "other", "apps/v1", T2);
    assert_eq!(same, edited);
}

#[test]
fn first_apply_to_an_untracked_object_conflicts_with_before_first_apply() {
    let live = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "uid": "u1"},
        "spec": {"replicas": 1}
    });
    let err = apply_err(&live, &config(json!({"replicas": 2})), "m1");
    assert_eq!(
        err.to_string(),
        r#"Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: .spec.replicas"#
    );
    // Updates of such an object are not tracked.
    let updated = record_update("Deployment", Some(&live), &live, "m", "apps/v1", T1);
    assert!(updated["metadata"].get("managedFields").is_none());
}
