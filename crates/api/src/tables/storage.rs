//! Row cells of the storage kinds, following upstream
//! `printPersistentVolume`, `printPersistentVolumeClaim` and
//! `printStorageClass` in `pkg/printers/internalversion` (1.33), with the
//! helpers they use (`GetAccessModesAsString`, `GetPersistentVolumeClass`,
//! `GetPersistentVolumeClaimClass`; `IsDefaultAnnotation` is
//! [`crate::defaults::is_default_storage_class`]).
//!
//! Quantities print as stored: upstream prints `Quantity.String()`, the
//! canonical form, which is what clients write in the common cases
//! (`1Gi`, `500Mi`).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::util::{age, arr_at, deleting, get, name, str_at};

type Now = DateTime<Utc>;

/// The beta annotation naming a volume's or claim's class.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// `GetAccessModesAsString`: the distinct modes as RWO, ROX, RWX, RWOP, in
/// that order, comma-joined.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The beta class annotation, if the object has it (even empty).
fn beta_class(obj: &Value) -> Option<&str> {
    get(obj, &["metadata", "annotations", BETA_CLASS]).map(|v| v.as_str().unwrap_or(""))
}

/// A quantity's cell: the stored string, `0` for none.
fn quantity(obj: &Value, path: &[&str]) -> String {
    match str_at(obj, path) {
        "" => "0".to_string(),
        q => q.to_string(),
    }
}

/// The phase, or `Terminating` while the object is being deleted.
fn phase(obj: &Value) -> &str {
    if deleting(obj) {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"])
    }
}

/// `<unset>` for an absent optional string.
fn or_unset<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    get(obj, path).and_then(Value::as_str).unwrap_or("<unset>")
}

pub(super) fn persistent_volume(obj: &Value, now: Now) -> Vec<Value> {
    let claim = match get(obj, &["spec", "claimRef"]) {
        Some(r) => format!("{}/{}", str_at(r, &["namespace"]), str_at(r, &["name"])),
        None => String::new(),
    };
    let class = beta_class(obj).unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]));
    vec![
        json!(name(obj)),
        json!(quantity(obj, &["spec", "capacity", "storage"])),
        json!(access_modes(arr_at(obj, &["spec", "accessModes"]))),
        json!(str_at(obj, &["spec", "persistentVolumeReclaimPolicy"])),
        json!(phase(obj)),
        json!(claim),
        json!(class),
        json!(or_unset(obj, &["spec", "volumeAttributesClassName"])),
        json!(str_at(obj, &["status", "reason"])),
        json!(age(obj, now)),
        json!(or_unset(obj, &["spec", "volumeMode"])),
    ]
}

pub(super) fn persistent_volume_claim(obj: &Value, now: Now) -> Vec<Value> {
    // Capacity and access modes are the bound volume's, once there is one.
    let (capacity, modes) = match str_at(obj, &["spec", "volumeName"]) {
        "" => (String::new(), String::new()),
        _ => (
            quantity(obj, &["status", "capacity", "storage"]),
            access_modes(arr_at(obj, &["status", "accessModes"])),
        ),
    };
    let class = beta_class(obj).unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]));
    vec![
        json!(name(obj)),
        json!(phase(obj)),
        json!(str_at(obj, &["spec", "volumeName"])),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(or_unset(obj, &["spec", "volumeAttributesClassName"])),
        json!(age(obj, now)),
        json!(or_unset(obj, &["spec", "volumeMode"])),
    ]
}

pub(super) fn storage_class(obj: &Value, now: Now) -> Vec<Value> {
    let mut shown = name(obj).to_string();
    if crate::defaults::is_default_storage_class(obj) {
        shown.push_str(" (default)");
    }
    let or = |field: &str, default: &'static str| match str_at(obj, &[field]) {
        "" => default.to_string(),
        v => v.to_string(),
    };
    let expansion = get(obj, &["allowVolumeExpansion"])
        .and_then(Value::as_bool)
        .unwrap_or(false);
    vec![
        json!(shown),
        json!(str_at(obj, &["provisioner"])),
        json!(or("reclaimPolicy", "Delete")),
        json!(or("volumeBindingMode", "Immediate")),
        json!(expansion),
        json!(age(obj, now)),
    ]
}
