//! Tests of the PersistentVolume, PersistentVolumeClaim and StorageClass
//! printers.

use serde_json::{json, Value};

use super::row_cells;
use super::tests::{meta, now};

fn with_meta(mut obj: Value, name: &str) -> Value {
    obj["metadata"] = meta(name);
    obj
}

#[test]
fn persistent_volume_cells() {
    let pv = with_meta(
        json!({"spec": {"capacity": {"storage": "5Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce", "ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "manual",
            "claimRef": {"namespace": "default", "name": "data"}, "volumeMode": "Filesystem",
            "hostPath": {"path": "/data"}},
            "status": {"phase": "Bound", "reason": ""}}),
        "pv1",
    );
    assert_eq!(
        row_cells("PersistentVolume", &pv, now()),
        [
            "pv1",
            "5Gi",
            "RWO,ROX,RWX",
            "Retain",
            "Bound",
            "default/data",
            "manual",
            "<unset>",
            "",
            "3d",
            "Filesystem"
        ]
    );
    // The beta annotation wins over the field; deletion shows as
    // Terminating; no capacity is "0".
    let mut odd = with_meta(
        json!({"spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "manual"},
            "status": {"phase": "Released", "reason": "Recycled"}}),
        "pv2",
    );
    odd["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "beta"});
    odd["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:00:00Z");
    let cells = row_cells("PersistentVolume", &odd, now());
    assert_eq!(
        cells[1..9],
        [
            "0",
            "RWOP",
            "",
            "Terminating",
            "",
            "beta",
            "<unset>",
            "Recycled"
        ]
    );
    assert_eq!(cells[10], "<unset>");
}

#[test]
fn persistent_volume_claim_cells() {
    let pending = with_meta(
        json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "local-path", "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}}),
        "data",
    );
    assert_eq!(
        row_cells("PersistentVolumeClaim", &pending, now()),
        [
            "data",
            "Pending",
            "",
            "",
            "",
            "local-path",
            "<unset>",
            "3d",
            "Filesystem"
        ]
    );
    // Bound: capacity and modes are the volume's, from the status.
    let mut bound = pending.clone();
    bound["spec"]["volumeName"] = json!("pv1");
    bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce", "ReadWriteMany"]});
    let cells = row_cells("PersistentVolumeClaim", &bound, now());
    assert_eq!(cells[1..5], ["Bound", "pv1", "5Gi", "RWO,RWX"]);
    // A claim without a class prints an empty one.
    let classless = with_meta(json!({"spec": {}}), "c");
    assert_eq!(row_cells("PersistentVolumeClaim", &classless, now())[5], "");
}

#[test]
fn storage_class_cells_mark_the_default() {
    let mut sc = with_meta(
        json!({"provisioner": "skiff.dev/local-path", "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer"}),
        "local-path",
    );
    sc["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
    assert_eq!(
        row_cells("StorageClass", &sc, now()),
        [
            json!("local-path (default)"),
            json!("skiff.dev/local-path"),
            json!("Delete"),
            json!("WaitForFirstConsumer"),
            json!(false),
            json!("3d")
        ]
    );
    let plain = with_meta(
        json!({"provisioner": "p", "allowVolumeExpansion": true, "metadata": {}}),
        "fast",
    );
    assert_eq!(
        row_cells("StorageClass", &plain, now()),
        [
            json!("fast"),
            json!("p"),
            json!("Delete"),
            json!("Immediate"),
            json!(true),
            json!("3d")
        ]
    );
}
