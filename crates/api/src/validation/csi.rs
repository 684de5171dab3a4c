//! storage.k8s.io/v1 CSI kinds: CSIDriver, CSINode, VolumeAttachment and
//! CSIStorageCapacity, as upstream's pkg/apis/storage/validation checks
//! them (1.33, SELinuxMountReadWriteOncePod on), with its field paths and
//! wording. Stored-form JSON after defaulting (the CSIDriver booleans are
//! required because defaulting always sets them).
//!
//! Go prints a changed struct with `%#v`; its pointers show as addresses,
//! which this module writes as `0xc000000000`.

use serde_json::Value;

use super::common::{
    duplicate, forbidden, immutable, invalid_shown, invalid_str, items, label_selector,
    required_because, same, str_at, subdomain_at,
};
use super::{invalid, names, not_supported, required, FieldError};
use crate::quantity::ParsedQuantity;

const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
const LIFECYCLE_MODES: &[&str] = &["Persistent", "Ephemeral"];
const CSI_NODE_ID_MAX: usize = 192;
const MAX_ATTACHMENT_METADATA: usize = 256 * 1024;
const MAX_VOLUME_ERROR_MESSAGE: usize = 1024;

/// `ValidateCSIDriverName`.
fn csi_driver_name(errors: &mut Vec<FieldError>, at: &str, name: &str) {
    if name.is_empty() {
        errors.push(required(at.to_string()));
    }
    if name.len() > 63 {
        errors.push(FieldError {
            reason: "FieldValueTooLong",
            field: at.to_string(),
            message: "Too long: may not be more than 63 bytes".into(),
        });
    }
    for m in names::dns1123_subdomain(&name.to_ascii_lowercase()) {
        errors.push(invalid_str(at, name, &m));
    }
}

/// A CSIDriver on create.
pub fn csi_driver(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    for (field, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
    ] {
        if spec.get(field).is_none_or(Value::is_null) {
            errors.push(required(path.into()));
        }
    }
    if let Some(p) = str_at(spec, "fsGroupPolicy") {
        if !FS_GROUP_POLICIES.contains(&p) {
            errors.push(not_supported(
                "spec.fsGroupPolicy".into(),
                p,
                FS_GROUP_POLICIES,
            ));
        }
    }
    let mut audiences: Vec<&str> = Vec::new();
    for (i, t) in items(spec, "tokenRequests").iter().enumerate() {
        let at = format!("spec.tokenRequests[{i}]");
        let audience = str_at(t, "audience").unwrap_or_default();
        if audiences.contains(&audience) {
            errors.push(duplicate(format!("{at}.audience"), audience));
            continue;
        }
        audiences.push(audience);
        if let Some(s) = t.get("expirationSeconds").and_then(Value::as_i64) {
            let field = format!("{at}.expirationSeconds");
            if s < 600 {
                errors.push(invalid(
                    field.clone(),
                    &Value::from(s),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if s > 1 << 32 {
                errors.push(invalid(
                    field,
                    &Value::from(s),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
        }
    }
    for mode in items(spec, "volumeLifecycleModes") {
        let mode = mode.as_str().unwrap_or_default();
        if !LIFECYCLE_MODES.contains(&mode) {
            errors.push(not_supported(
                "spec.volumeLifecycleModes".into(),
                mode,
                LIFECYCLE_MODES,
            ));
        }
    }
    if spec.get("seLinuxMount").is_none_or(Value::is_null) {
        errors.push(required("spec.seLinuxMount".into()));
    }
    if let Some(p) = spec
        .get("nodeAllocatableUpdatePeriodSeconds")
        .and_then(Value::as_i64)
    {
        if p < 10 {
            errors.push(invalid(
                "spec.nodeAllocatableUpdatePeriodSeconds".into(),
                &Value::from(p),
                "must be greater than or equal to 10 seconds",
            ));
        }
    }
    errors
}

/// Go's `%#v` of a `*bool`.
fn go_bool_ptr(v: Option<&Value>) -> String {
    match v.and_then(Value::as_bool) {
        None => "null".into(),
        Some(b) => b.to_string(),
    }
}

/// A CSIDriver update: attachRequired and the lifecycle modes are
/// immutable (upstream names the first `spec.attachedRequired`).
pub fn csi_driver_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = csi_driver(new);
    let (o, n) = (
        old.get("spec").unwrap_or(&Value::Null),
        new.get("spec").unwrap_or(&Value::Null),
    );
    if o.get("attachRequired") != n.get("attachRequired") {
        errors.push(invalid_shown(
            "spec.attachedRequired",
            &go_bool_ptr(n.get("attachRequired")),
            "field is immutable",
        ));
    }
    if !same(o.get("volumeLifecycleModes"), n.get("volumeLifecycleModes")) {
        let modes: Vec<String> = items(n, "volumeLifecycleModes")
            .iter()
            .map(|m| format!("\"{}\"", m.as_str().unwrap_or_default()))
            .collect();
        errors.push(invalid_shown(
            "spec.volumeLifecycleModes",
            &format!("[]storage.VolumeLifecycleMode{{{}}}", modes.join(", ")),
            "field is immutable",
        ));
    }
    errors
}

/// A CSINode on create.
pub fn csi_node(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut seen: Vec<&str> = Vec::new();
    for (i, d) in items(spec, "drivers").iter().enumerate() {
        let at = format!("spec.drivers[{i}]");
        let name = str_at(d, "name").unwrap_or_default();
        csi_driver_name(&mut errors, &format!("{at}.name"), name);
        let id = str_at(d, "nodeID").unwrap_or_default();
        if id.is_empty() {
            errors.push(required(format!("{at}.nodeID")));
        }
        if id.len() > CSI_NODE_ID_MAX {
            errors.push(invalid_str(
                format!("{at}.nodeID"),
                id,
                &format!("must be {CSI_NODE_ID_MAX} characters or less"),
            ));
        }
        if let Some(c) = d.pointer("/allocatable/count").and_then(Value::as_i64) {
            if c < 0 {
                errors.push(invalid(
                    format!("{at}.allocatable.count"),
                    &Value::from(c),
                    "must be greater than or equal to 0",
                ));
            }
        }
        if seen.contains(&name) {
            errors.push(duplicate(format!("{at}.name"), name));
        }
        seen.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for k in items(d, "topologyKeys") {
            let k = k.as_str().unwrap_or_default();
            if k.is_empty() {
                errors.push(required(at.clone()));
            }
            if keys.contains(&k) {
                errors.push(duplicate(&at, k));
            }
            keys.push(k);
            for m in names::qualified_name(k) {
                errors.push(invalid_str(&at, k, &m));
            }
        }
    }
    errors
}

/// A CSINode update: a driver already listed may not change (its
/// allocatable count excepted, as MutableCSINodeAllocatableCount is off).
pub fn csi_node_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = csi_node(new);
    let old_drivers = old.pointer("/spec/drivers").and_then(Value::as_array);
    let new_drivers = new.pointer("/spec/drivers").and_then(Value::as_array);
    for o in old_drivers.into_iter().flatten() {
        for n in new_drivers.into_iter().flatten() {
            if o.get("name") == n.get("name") && !same(Some(o), Some(n)) {
                let name = str_at(n, "name").unwrap_or_default();
                let node_id = str_at(n, "nodeID").unwrap_or_default();
                errors.push(invalid_shown(
                    "spec.drivers",
                    &format!(
                        "storage.CSINodeDriver{{Name:\"{name}\", NodeID:\"{node_id}\", TopologyKeys:[]string{{{}}}, Allocatable:(*storage.VolumeNodeResources)({})}}",
                        items(n, "topologyKeys")
                            .iter()
                            .map(|k| format!("\"{}\"", k.as_str().unwrap_or_default()))
                            .collect::<Vec<_>>()
                            .join(", "),
                        if n.get("allocatable").is_some_and(|a| !a.is_null()) { "0xc000000000" } else { "nil" }
                    ),
                    "field is immutable",
                ));
            }
        }
    }
    errors
}

/// A VolumeAttachment (`ValidateVolumeAttachment` and, for v1,
/// `ValidateVolumeAttachmentV1`).
pub fn volume_attachment(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let attacher = str_at(spec, "attacher").unwrap_or_default();
    if attacher.is_empty() {
        errors.push(required("spec.attacher".into()));
    }
    let source = spec.get("source").unwrap_or(&Value::Null);
    let pv = source.get("persistentVolumeName").filter(|v| !v.is_null());
    let inline = source.get("inlineVolumeSpec").filter(|v| !v.is_null());
    const ONE_OF: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    match (pv, inline) {
        (None, None) => errors.push(required_because("spec.source", ONE_OF)),
        (Some(_), Some(_)) => errors.push(forbidden("spec.source", ONE_OF)),
        (Some(name), None) => {
            if name.as_str().unwrap_or_default().is_empty() {
                errors.push(required_because(
                    "spec.source.persistentVolumeName",
                    "must specify non empty persistentVolumeName",
                ));
            }
        }
        (None, Some(_)) => {}
    }
    let node = str_at(spec, "nodeName").unwrap_or_default();
    subdomain_at(&mut errors, "spec.nodeName", node);
    let status = obj.get("status").unwrap_or(&Value::Null);
    if let Some(meta) = status.get("attachmentMetadata").and_then(Value::as_object) {
        let size: usize = meta
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if size > MAX_ATTACHMENT_METADATA {
            errors.push(FieldError {
                reason: "FieldValueTooLong",
                field: "status.attachmentMetadata".into(),
                message: format!("Too long: may not be more than {MAX_ATTACHMENT_METADATA} bytes"),
            });
        }
    }
    for which in ["attachError", "detachError"] {
        let Some(e) = status.get(which).filter(|e| !e.is_null()) else {
            continue;
        };
        if str_at(e, "message").map_or(0, str::len) > MAX_VOLUME_ERROR_MESSAGE {
            errors.push(FieldError {
                reason: "FieldValueTooLong",
                field: format!("status.{which}.message"),
                message: format!("Too long: may not be more than {MAX_ATTACHMENT_METADATA} bytes"),
            });
        }
        if let Some(code) = e.get("errorCode").and_then(Value::as_i64) {
            if code < 0 {
                errors.push(invalid(
                    format!("status.{which}.errorCode"),
                    &Value::from(code),
                    "must be between 0 and 2147483647, inclusive",
                ));
            }
        }
    }
    // v1 only.
    csi_driver_name(&mut errors, "spec.attacher", attacher);
    if let Some(name) = pv.and_then(Value::as_str) {
        subdomain_at(&mut errors, "spec.source.persistentVolumeName", name);
    }
    errors
}

/// A VolumeAttachment update: the spec is read-only.
pub fn volume_attachment_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = volume_attachment(new);
    if !same(old.get("spec"), new.get("spec")) {
        let spec = new.get("spec").unwrap_or(&Value::Null);
        let source = spec.get("source").unwrap_or(&Value::Null);
        let ptr = |f: &str, ty: &str| {
            if source.get(f).is_some_and(|v| !v.is_null()) {
                format!("({ty})(0xc000000000)")
            } else {
                format!("({ty})(nil)")
            }
        };
        errors.push(invalid_shown(
            "spec",
            &format!(
                "storage.VolumeAttachmentSpec{{Attacher:\"{}\", Source:storage.VolumeAttachmentSource{{PersistentVolumeName:{}, InlineVolumeSpec:{}}}, NodeName:\"{}\"}}",
                str_at(spec, "attacher").unwrap_or_default(),
                ptr("persistentVolumeName", "*string"),
                ptr("inlineVolumeSpec", "*core.PersistentVolumeSpec"),
                str_at(spec, "nodeName").unwrap_or_default(),
            ),
            "field is immutable",
        ));
    }
    errors
}

/// A CSIStorageCapacity on create.
pub fn csi_storage_capacity(obj: &Value) -> Vec<FieldError> {
    let mut errors = label_selector(obj.get("nodeTopology"), "nodeTopology");
    let class = str_at(obj, "storageClassName").unwrap_or_default();
    subdomain_at(&mut errors, "storageClassName", class);
    for field in ["capacity", "maximumVolumeSize"] {
        if let Some(q) = obj.get(field).and_then(Value::as_str) {
            if field == "capacity" && ParsedQuantity::parse(q).is_ok_and(|p| p.is_negative()) {
                errors.push(invalid_str(field, q, "must be greater than or equal to 0"));
            }
        }
    }
    errors
}

/// A CSIStorageCapacity update: the topology and class are immutable.
pub fn csi_storage_capacity_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = csi_storage_capacity(new);
    if !same(old.get("nodeTopology"), new.get("nodeTopology")) {
        errors.push(invalid_shown(
            "nodeTopology",
            &go_selector(new.get("nodeTopology")),
            "field is immutable",
        ));
    }
    if old.get("storageClassName") != new.get("storageClassName") {
        errors.push(immutable("storageClassName", new.get("storageClassName")));
    }
    errors
}

/// A `*metav1.LabelSelector` as its generated `String()` prints it.
fn go_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return "nil".into();
    };
    let mut labels: Vec<(String, String)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: Vec<String> = items(sel, "matchExpressions")
        .iter()
        .map(|e| {
            let values: Vec<&str> = items(e, "values")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}}",
                str_at(e, "key").unwrap_or_default(),
                str_at(e, "operator").unwrap_or_default(),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{}}},MatchExpressions:[]LabelSelectorRequirement{{{}}},}}",
        labels.join(""),
        exprs.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn csi_findings() {
        let driver = json!({"spec": {"attachRequired": true, "podInfoOnMount": false,
            "storageCapacity": false, "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"],
            "fsGroupPolicy": "ReadWriteOnceWithFSType"}});
        assert!(csi_driver(&driver).is_empty());
        let mut changed = driver.clone();
        changed["spec"]["attachRequired"] = json!(false);
        changed["spec"]["volumeLifecycleModes"] = json!(["Sometimes"]);
        assert_eq!(
            found(&csi_driver_update(&driver, &changed)),
            vec![
                ("spec.volumeLifecycleModes", "Unsupported value: \"Sometimes\": supported values: \"Persistent\", \"Ephemeral\""),
                ("spec.attachedRequired", "Invalid value: false: field is immutable"),
                ("spec.volumeLifecycleModes", "Invalid value: []storage.VolumeLifecycleMode{\"Sometimes\"}: field is immutable"),
            ]
        );
        let va = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n1", "source": {}}});
        assert_eq!(
            found(&volume_attachment(&va)),
            vec![(
                "spec.source",
                "Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
            )]
        );
        let node = json!({"spec": {"drivers": [{"name": "a.example.com", "nodeID": ""},
            {"name": "a.example.com", "nodeID": "x"}]}});
        assert_eq!(
            found(&csi_node(&node)),
            vec![
                ("spec.drivers[0].nodeID", "Required value"),
                ("spec.drivers[1].name", "Duplicate value: \"a.example.com\""),
            ]
        );
        let cap = json!({"storageClassName": "Fast", "capacity": "-1Gi"});
        assert_eq!(found(&csi_storage_capacity(&cap)).len(), 2);
    }
}
