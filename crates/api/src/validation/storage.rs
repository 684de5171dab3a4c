//! Storage kinds: PersistentVolume and PersistentVolumeClaim (upstream
//! `ValidatePersistentVolume*` / `ValidatePersistentVolumeClaim*` in
//! pkg/apis/core/validation) and StorageClass (pkg/apis/storage/validation),
//! the common findings with upstream's field paths and wording, for
//! Kubernetes 1.33 with its default feature gates (VolumeAttributesClass
//! off, RecoverVolumeExpansionFailure on). Works on stored-form JSON after
//! defaulting; does not default or drop anything itself.
//!
//! Upstream appends a `cmp.Diff` of the two specs to its immutability
//! errors; cmp's output is deliberately unstable, so [`spec_diff`] writes
//! a similar listing of the changed fields with JSON values instead.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::{invalid, names, not_supported, required, FieldError};
use crate::quantity::{parse_value, ParsedQuantity};

/// Access modes, sorted as upstream's `sets.List` prints them.
const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const PV_RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const SC_RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
/// The hostPath types (a PV's and a pod volume's).
pub(crate) const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];
/// The beta annotation that names a claim's or volume's class.
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// At most this many StorageClass parameters, of at most this many bytes.
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;

/// The volume sources of a PersistentVolume (`PersistentVolumeSource`), in
/// Go's field order, with their Go field names (for the diff).
const PV_SOURCES: &[(&str, &str)] = &[
    ("gcePersistentDisk", "GCEPersistentDisk"),
    ("awsElasticBlockStore", "AWSElasticBlockStore"),
    ("hostPath", "HostPath"),
    ("glusterfs", "Glusterfs"),
    ("nfs", "NFS"),
    ("rbd", "RBD"),
    ("iscsi", "ISCSI"),
    ("cinder", "Cinder"),
    ("cephfs", "CephFS"),
    ("fc", "FC"),
    ("flocker", "Flocker"),
    ("flexVolume", "FlexVolume"),
    ("azureFile", "AzureFile"),
    ("vsphereVolume", "VsphereVolume"),
    ("quobyte", "Quobyte"),
    ("azureDisk", "AzureDisk"),
    ("photonPersistentDisk", "PhotonPersistentDisk"),
    ("portworxVolume", "PortworxVolume"),
    ("scaleIO", "ScaleIO"),
    ("local", "Local"),
    ("storageos", "StorageOS"),
    ("csi", "CSI"),
];

/// The fields of a PersistentVolumeClaimSpec, in Go's order.
const PVC_SPEC_FIELDS: &[(&str, &str)] = &[
    ("accessModes", "AccessModes"),
    ("selector", "Selector"),
    ("resources", "Resources"),
    ("volumeName", "VolumeName"),
    ("storageClassName", "StorageClassName"),
    ("volumeMode", "VolumeMode"),
    ("dataSource", "DataSource"),
    ("dataSourceRef", "DataSourceRef"),
    ("volumeAttributesClassName", "VolumeAttributesClassName"),
];

fn forbidden(field: impl Into<String>, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    }
}

fn required_because(field: impl Into<String>, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field: field.into(),
        message: format!("Required value: {detail}"),
    }
}

fn str_at<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

/// `field.Invalid(path, newValue, "field is immutable")` for an optional
/// string (a nil pointer shows as `"null"`).
fn immutable(field: &str, value: Option<&str>) -> FieldError {
    invalid(
        field.into(),
        &Value::from(value.unwrap_or("null")),
        "field is immutable",
    )
}

/// Whether an object is set in Go terms: present, not null.
fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// `apiequality.Semantic.DeepEqual` on wire-form JSON: absent, null and
/// empty lists or maps are the same (Go's nil and empty), and the
/// quantities of `requests`, `limits` and `capacity` maps compare by value
/// (`quantity_map`: `a` and `b` are such maps).
fn semantic_eq(a: Option<&Value>, b: Option<&Value>, quantity_map: bool) -> bool {
    let empty = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    };
    if empty(a) && empty(b) {
        return true;
    }
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
            keys.all(|k| {
                let nested = k == "requests" || k == "limits" || k == "capacity";
                if quantity_map {
                    return match (x.get(k), y.get(k)) {
                        (Some(Value::String(p)), Some(Value::String(q))) => {
                            crate::quantity::equal(p, q) || p == q
                        }
                        (p, q) => semantic_eq(p, q, false),
                    };
                }
                semantic_eq(x.get(k), y.get(k), nested)
            })
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(p, q)| semantic_eq(Some(p), Some(q), false))
        }
        (a, b) => a == b,
    }
}

/// A listing in the shape of upstream's `cmp.Diff(old, new)` of the
/// struct `type_name` whose fields (JSON name, Go name) are `fields`.
fn spec_diff(type_name: &str, fields: &[(&str, &str)], old: &Value, new: &Value) -> String {
    let mut out = format!("  {type_name}{{\n");
    let mut same = 0;
    let show = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "nil".to_string(),
        Some(v) => v.to_string(),
    };
    for (json_name, go_name) in fields {
        let (a, b) = (old.get(*json_name), new.get(*json_name));
        if semantic_eq(a, b, false) {
            same += 1;
            continue;
        }
        out.push_str(&format!("- \t{go_name}: {},\n", show(a)));
        out.push_str(&format!("+ \t{go_name}: {},\n", show(b)));
    }
    if same > 0 {
        out.push_str(&format!("  \t... // {same} identical fields\n"));
    }
    out.push_str("  }\n");
    out
}

/// Access modes: required, supported, ReadWriteOncePod alone.
fn access_modes(spec: &Value, path: &str, required_detail: Option<&str>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let at = format!("{path}.accessModes");
    let modes = spec
        .get("accessModes")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if modes.is_empty() {
        errors.push(match required_detail {
            Some(d) => required_because(at.clone(), d),
            None => required(at.clone()),
        });
    }
    let (mut rwop, mut other) = (false, false);
    for mode in modes {
        let m = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&m) {
            errors.push(not_supported(at.clone(), m, ACCESS_MODES));
        } else if m == "ReadWriteOncePod" {
            rwop = true;
        } else {
            other = true;
        }
    }
    if rwop && other {
        errors.push(forbidden(
            at,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
    errors
}

/// `ValidatePositiveQuantityValue`: `Invalid value: "0": must be greater
/// than zero` for zero and below.
fn positive_quantity(q: &str, field: &str) -> Option<FieldError> {
    let parsed = ParsedQuantity::parse(q).ok()?;
    let zero = ParsedQuantity::parse("0").ok()?;
    (parsed.cmp_value(&zero) != Ordering::Greater)
        .then(|| invalid(field.into(), &Value::from(q), "must be greater than zero"))
}

/// `ValidateClassName` (a DNS subdomain) of a class name at `field`.
fn class_name(name: &str, field: &str) -> Vec<FieldError> {
    names::dns1123_subdomain(name)
        .into_iter()
        .map(|m| invalid(field.into(), &Value::from(name), &m))
        .collect()
}

/// `Invalid value: "a/../b": must not contain '..'`.
fn no_backsteps(p: &str, field: &str) -> Option<FieldError> {
    p.split('/')
        .any(|part| part == "..")
        .then(|| invalid(field.into(), &Value::from(p), "must not contain '..'"))
}

/// The checks of the volume sources Skiff can serve (hostPath, local,
/// nfs, csi); the others only count as a volume type.
fn volume_source(name: &str, source: &Value, spec: &Value, errors: &mut Vec<FieldError>) {
    let at = format!("spec.{name}");
    let path = str_at(source, "path").unwrap_or_default();
    match name {
        "hostPath" => {
            if path.is_empty() {
                errors.push(required(format!("{at}.path")));
                return;
            }
            errors.extend(no_backsteps(path, &format!("{at}.path")));
            if let Some(t) = str_at(source, "type") {
                if !HOST_PATH_TYPES.contains(&t) {
                    errors.push(not_supported(format!("{at}.type"), t, HOST_PATH_TYPES));
                }
            }
        }
        "local" => {
            if path.is_empty() {
                errors.push(required(format!("{at}.path")));
            } else {
                errors.extend(no_backsteps(path, &format!("{at}.path")));
            }
            if !present(spec.get("nodeAffinity")) {
                errors.push(required_because(
                    "spec.nodeAffinity",
                    "Local volume requires node affinity",
                ));
            }
        }
        "nfs" => {
            if str_at(source, "server").is_none_or(str::is_empty) {
                errors.push(required(format!("{at}.server")));
            }
            if path.is_empty() {
                errors.push(required(format!("{at}.path")));
            }
            if !path.starts_with('/') {
                errors.push(invalid(
                    format!("{at}.path"),
                    &Value::from(path),
                    "must be an absolute path",
                ));
            }
        }
        "csi" => {
            let driver = str_at(source, "driver").unwrap_or_default();
            if driver.is_empty() {
                errors.push(required(format!("{at}.driver")));
            }
            if driver.len() > 63 {
                errors.push(too_long_bytes(format!("{at}.driver"), 63));
            }
            for m in names::dns1123_subdomain(&driver.to_ascii_lowercase()) {
                errors.push(invalid(format!("{at}.driver"), &Value::from(driver), &m));
            }
            if str_at(source, "volumeHandle").is_none_or(str::is_empty) {
                errors.push(required(format!("{at}.volumeHandle")));
            }
        }
        _ => {}
    }
}

/// `Too long: may not be more than N bytes` (1.33's `field.TooLong`).
fn too_long_bytes(field: String, limit: usize) -> FieldError {
    FieldError {
        reason: "FieldValueTooLong",
        field,
        message: format!("Too long: may not be more than {limit} bytes"),
    }
}

/// A PersistentVolume (upstream ValidatePersistentVolume, not inline).
pub fn persistent_volume(obj: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut errors = access_modes(spec, "spec", None);
    let capacity = spec.get("capacity").and_then(Value::as_object);
    if capacity.is_none_or(Map::is_empty) {
        errors.push(required("spec.capacity".into()));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        errors.push(FieldError {
            reason: "FieldValueNotSupported",
            field: "spec.capacity".into(),
            message: format!(
                "Unsupported value: {}: supported values: \"storage\"",
                go_resource_list(capacity)
            ),
        });
    }
    for (name, q) in capacity.into_iter().flatten() {
        let at = format!("spec.capacity[{name}]");
        let Some(q) = q.as_str() else { continue };
        if let Ok(v) = parse_value(q) {
            if v < 0 {
                errors.push(invalid(
                    at.clone(),
                    &Value::from(v),
                    "must be a valid resource quantity",
                ));
            }
        }
        errors.extend(positive_quantity(q, &at));
    }
    if let Some(policy) = str_at(spec, "persistentVolumeReclaimPolicy") {
        if !policy.is_empty() && !PV_RECLAIM_POLICIES.contains(&policy) {
            errors.push(not_supported(
                "spec.persistentVolumeReclaimPolicy".into(),
                policy,
                PV_RECLAIM_POLICIES,
            ));
        }
    }
    if let Some(affinity) = spec.get("nodeAffinity").filter(|a| !a.is_null()) {
        match affinity.get("required").filter(|r| !r.is_null()) {
            None => errors.push(required_because(
                "spec.nodeAffinity.required",
                "must specify required node constraints",
            )),
            Some(req) => {
                if req
                    .get("nodeSelectorTerms")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty)
                {
                    errors.push(required_because(
                        "spec.nodeAffinity.required.nodeSelectorTerms",
                        "must have at least one node selector term",
                    ));
                }
            }
        }
    }
    let mut volumes = 0;
    for (name, _) in PV_SOURCES {
        let Some(source) = spec.get(*name).filter(|s| !s.is_null()) else {
            continue;
        };
        // Upstream counts a flexVolume without checking for another.
        if volumes > 0 && *name != "flexVolume" {
            errors.push(forbidden(
                format!("spec.{name}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        volumes += 1;
        volume_source(name, source, spec, &mut errors);
    }
    if volumes == 0 {
        errors.push(required_because("spec", "must specify a volume type"));
    }
    let host_root = spec
        .pointer("/hostPath/path")
        .and_then(Value::as_str)
        .is_some_and(|p| p.starts_with('/') && p.split('/').all(|s| s.is_empty() || s == "."));
    if host_root && str_at(spec, "persistentVolumeReclaimPolicy") == Some("Recycle") {
        errors.push(forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    if let Some(class) = str_at(spec, "storageClassName").filter(|c| !c.is_empty()) {
        errors.extend(class_name(class, "spec.storageClassName"));
    }
    if let Some(mode) = str_at(spec, "volumeMode") {
        if !VOLUME_MODES.contains(&mode) {
            errors.push(not_supported("spec.volumeMode".into(), mode, VOLUME_MODES));
        }
    }
    errors
}

/// A PersistentVolume update: the new object, then its volume source and
/// mode are immutable.
pub fn persistent_volume_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = persistent_volume(new);
    let empty = Value::Object(Map::new());
    let old_spec = old.get("spec").unwrap_or(&empty);
    let new_spec = new.get("spec").unwrap_or(&empty);
    // A CSI volume may gain a controllerExpandSecretRef.
    let mut new_cmp = new_spec.clone();
    if old_spec.pointer("/csi/controllerExpandSecretRef").is_none() {
        if let Some(csi) = new_cmp.get_mut("csi").and_then(Value::as_object_mut) {
            csi.remove("controllerExpandSecretRef");
        }
    }
    let changed = PV_SOURCES
        .iter()
        .any(|(f, _)| !semantic_eq(old_spec.get(*f), new_cmp.get(*f), false));
    if changed {
        errors.push(forbidden(
            "spec.persistentvolumesource",
            &format!(
                "spec.persistentvolumesource is immutable after creation\n{}",
                spec_diff(
                    "core.PersistentVolumeSource",
                    PV_SOURCES,
                    old_spec,
                    &new_cmp
                )
            ),
        ));
    }
    let (old_mode, new_mode) = (
        str_at(old_spec, "volumeMode"),
        str_at(new_spec, "volumeMode"),
    );
    if old_mode != new_mode {
        errors.push(immutable("volumeMode", new_mode));
    }
    errors
}

/// A PersistentVolumeClaim (upstream ValidatePersistentVolumeClaim).
pub fn persistent_volume_claim(obj: &Value) -> Vec<FieldError> {
    let empty = Value::Object(Map::new());
    let spec = obj.get("spec").unwrap_or(&empty);
    let mut errors = access_modes(spec, "spec", Some("at least 1 access mode is required"));
    let at = "spec.resources[storage]";
    match spec.pointer("/resources/requests/storage") {
        None | Some(Value::Null) => errors.push(required(at.into())),
        Some(q) => {
            if let Some(e) = q.as_str().and_then(|q| positive_quantity(q, at)) {
                errors.push(e);
            }
        }
    }
    if let Some(class) = str_at(spec, "storageClassName").filter(|c| !c.is_empty()) {
        errors.extend(class_name(class, "spec.storageClassName"));
    }
    if let Some(mode) = str_at(spec, "volumeMode") {
        if !VOLUME_MODES.contains(&mode) {
            errors.push(not_supported("spec.volumeMode".into(), mode, VOLUME_MODES));
        }
    }
    for field in ["dataSource", "dataSourceRef"] {
        let Some(source) = spec.get(field).filter(|s| !s.is_null()) else {
            continue;
        };
        let at = format!("spec.{field}");
        if str_at(source, "name").is_none_or(str::is_empty) {
            errors.push(required(format!("{at}.name")));
        }
        let kind = str_at(source, "kind").unwrap_or_default();
        if kind.is_empty() {
            errors.push(required(format!("{at}.kind")));
        }
        let group = str_at(source, "apiGroup").unwrap_or_default();
        if group.is_empty() && kind != "PersistentVolumeClaim" {
            errors.push(invalid(
                at.clone(),
                &Value::from(kind),
                "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
            ));
        }
        if !group.is_empty() {
            for m in names::dns1123_subdomain(group) {
                errors.push(invalid(format!("{at}.apiGroup"), &Value::from(group), &m));
            }
        }
    }
    errors
}

/// Whether a claim's storage class went from unset to a name, which
/// upstream allows once (retroactive default class assignment).
fn class_set_from_nil(old: &Value, new: &Value) -> bool {
    let annotated = old
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(BETA_STORAGE_CLASS_ANNOTATION));
    !annotated
        && !present(old.pointer("/spec/storageClassName"))
        && new
            .pointer("/spec/storageClassName")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
}

/// A PersistentVolumeClaim update (upstream
/// ValidatePersistentVolumeClaimUpdate): the spec is immutable except the
/// storage request of a bound claim, a volumeName set once and a class
/// set where there was none; the beta class annotation is immutable; the
/// request may shrink down to what the status shows.
pub fn persistent_volume_claim_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = persistent_volume_claim(new);
    let empty = Value::Object(Map::new());
    let old_spec = old.get("spec").unwrap_or(&empty);
    let new_spec = new.get("spec").unwrap_or(&empty);
    let mut old_cmp = old_spec.clone();
    let mut new_cmp = new_spec.clone();
    for spec in [&mut old_cmp, &mut new_cmp] {
        if let Some(o) = spec.as_object_mut() {
            // A non-pointer string: "" is Go's zero value.
            if o.get("volumeName").and_then(Value::as_str) == Some("") {
                o.remove("volumeName");
            }
        }
    }
    let set = |spec: &mut Value, field: &str, v: Option<Value>| {
        if let Some(o) = spec.as_object_mut() {
            match v {
                Some(v) => o.insert(field.to_string(), v),
                None => o.remove(field),
            };
        }
    };
    if str_at(old_spec, "volumeName").is_none_or(str::is_empty) {
        let v = new_cmp.get("volumeName").cloned();
        set(&mut old_cmp, "volumeName", v);
    }
    let annotation = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let (old_annotation, new_annotation) = (annotation(old), annotation(new));
    let new_class = str_at(new_spec, "storageClassName");
    // The upgrade from the beta annotation to the field.
    let upgrade = old_annotation.is_some()
        && !present(old_spec.get("storageClassName"))
        && new_class == old_annotation.as_deref()
        && (new_annotation.is_none() || new_annotation == old_annotation);
    if upgrade {
        set(&mut new_cmp, "storageClassName", None);
    } else {
        if old_annotation.as_deref().unwrap_or_default()
            != new_annotation.as_deref().unwrap_or_default()
        {
            errors.push(invalid(
                format!("metadata.annotations.{BETA_STORAGE_CLASS_ANNOTATION}"),
                &Value::from(new_annotation.unwrap_or_default()),
                "field is immutable",
            ));
        }
        if class_set_from_nil(old, new) {
            let v = old_cmp.get("storageClassName").cloned();
            set(&mut new_cmp, "storageClassName", v);
        }
    }
    let bound = new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound && present(new_cmp.pointer("/resources/requests")) {
        let v = old_spec.pointer("/resources/requests/storage").cloned();
        if let Some(requests) = new_cmp
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            match v {
                Some(v) => requests.insert("storage".into(), v),
                None => requests.remove("storage"),
            };
        }
    }
    let v = old_cmp.get("volumeAttributesClassName").cloned();
    set(&mut new_cmp, "volumeAttributesClassName", v);
    if !semantic_eq(Some(&old_cmp), Some(&new_cmp), false) {
        errors.push(forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                spec_diff("core.PersistentVolumeClaimSpec", PVC_SPEC_FIELDS, &old_cmp, &new_cmp)
            ),
        ));
    }
    let size = |spec: &Value, p: &str| {
        spec.pointer(p)
            .and_then(Value::as_str)
            .and_then(|s| ParsedQuantity::parse(s).ok())
    };
    let zero = ParsedQuantity::parse("0").ok();
    let old_size = size(old_spec, "/resources/requests/storage").or(zero);
    let new_size = size(new_spec, "/resources/requests/storage").or(zero);
    let status_size = size(old, "/status/capacity/storage").or(zero);
    if let (Some(o), Some(n), Some(s)) = (old_size, new_size, status_size) {
        if n.cmp_value(&o) == Ordering::Less && n.cmp_value(&s) != Ordering::Greater {
            errors.push(forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    let (old_mode, new_mode) = (
        str_at(old_spec, "volumeMode"),
        str_at(new_spec, "volumeMode"),
    );
    if old_mode != new_mode {
        errors.push(immutable("volumeMode", new_mode));
    }
    errors
}

/// A StorageClass (upstream ValidateStorageClass).
pub fn storage_class(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let provisioner = str_at(obj, "provisioner").unwrap_or_default();
    if provisioner.is_empty() {
        errors.push(required("provisioner".into()));
    } else {
        let lower = provisioner.to_ascii_lowercase();
        for m in names::qualified_name(&lower) {
            errors.push(invalid(
                "provisioner".into(),
                &Value::from(lower.as_str()),
                &m,
            ));
        }
    }
    if let Some(params) = obj.get("parameters").and_then(Value::as_object) {
        if params.len() > MAX_PARAMETERS {
            errors.push(too_long_bytes("parameters".into(), MAX_PARAMETERS));
        } else {
            let mut size = 0;
            for (k, v) in params {
                if k.is_empty() {
                    errors.push(invalid(
                        "parameters".into(),
                        &Value::from(""),
                        "field can not be empty.",
                    ));
                }
                size += k.len() + v.as_str().map_or(0, str::len);
            }
            if size > MAX_PARAMETERS_SIZE {
                errors.push(too_long_bytes("parameters".into(), MAX_PARAMETERS_SIZE));
            }
        }
    }
    if let Some(policy) = str_at(obj, "reclaimPolicy") {
        if !policy.is_empty() && !SC_RECLAIM_POLICIES.contains(&policy) {
            errors.push(not_supported(
                "reclaimPolicy".into(),
                policy,
                SC_RECLAIM_POLICIES,
            ));
        }
    }
    match str_at(obj, "volumeBindingMode") {
        None => errors.push(required("volumeBindingMode".into())),
        Some(mode) if !BINDING_MODES.contains(&mode) => errors.push(not_supported(
            "volumeBindingMode".into(),
            mode,
            BINDING_MODES,
        )),
        Some(_) => {}
    }
    errors
}

/// A StorageClass update: the new object, then parameters, provisioner,
/// reclaimPolicy and volumeBindingMode are immutable.
pub fn storage_class_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = storage_class(new);
    if !semantic_eq(old.get("parameters"), new.get("parameters"), false) {
        errors.push(forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if str_at(old, "provisioner") != str_at(new, "provisioner") {
        errors.push(forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if str_at(old, "reclaimPolicy") != str_at(new, "reclaimPolicy") {
        errors.push(forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    let (old_mode, new_mode) = (
        str_at(old, "volumeBindingMode"),
        str_at(new, "volumeBindingMode"),
    );
    if old_mode != new_mode {
        errors.push(immutable("volumeBindingMode", new_mode));
    }
    errors
}

/// A `core.ResourceList` as Go's `%#v` starts it: `core.ResourceList(nil)`
/// or `core.ResourceList{}`; with entries, their names and strings (Go
/// would print each Quantity's internals).
fn go_resource_list(list: Option<&Map<String, Value>>) -> String {
    match list {
        None => "core.ResourceList(nil)".into(),
        Some(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{k:?}:{}",
                        v.as_str().map_or(v.to_string(), |s| format!("{s:?}"))
                    )
                })
                .collect();
            format!("core.ResourceList{{{}}}", items.join(", "))
        }
    }
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

    fn pv(spec: Value) -> Value {
        json!({"metadata": {"name": "pv1"}, "spec": spec})
    }

    fn good_pv() -> Value {
        pv(json!({
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "volumeMode": "Filesystem",
            "hostPath": {"path": "/data/pv1", "type": ""},
        }))
    }

    fn pvc(spec: Value) -> Value {
        json!({"metadata": {"name": "data", "namespace": "default"}, "spec": spec})
    }

    fn good_pvc() -> Value {
        pvc(json!({
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeMode": "Filesystem",
            "storageClassName": "local-path",
        }))
    }

    #[test]
    fn a_volume_needs_capacity_modes_and_one_source() {
        assert_eq!(persistent_volume(&good_pv()), vec![]);
        let errors = persistent_volume(&pv(json!({})));
        assert_eq!(
            found(&errors),
            vec![
                ("spec.accessModes", "Required value"),
                ("spec.capacity", "Required value"),
                (
                    "spec.capacity",
                    "Unsupported value: core.ResourceList(nil): supported values: \"storage\""
                ),
                ("spec", "Required value: must specify a volume type"),
            ]
        );
        let two = pv(
            json!({"capacity": {"storage": "-1Gi"}, "accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"],
            "hostPath": {"path": "/a/../b", "type": "Bogus"}, "nfs": {"server": "s", "path": "/x"},
            "persistentVolumeReclaimPolicy": "Keep", "volumeMode": "Raw", "storageClassName": "Bad_Class"}),
        );
        assert_eq!(
            found(&persistent_volume(&two)),
            vec![
                ("spec.accessModes", "Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""),
                ("spec.accessModes", "Forbidden: may not use ReadWriteOncePod with other access modes"),
                ("spec.capacity[storage]", "Invalid value: -1073741824: must be a valid resource quantity"),
                ("spec.capacity[storage]", "Invalid value: \"-1Gi\": must be greater than zero"),
                ("spec.persistentVolumeReclaimPolicy", "Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\""),
                ("spec.hostPath.path", "Invalid value: \"/a/../b\": must not contain '..'"),
                ("spec.hostPath.type", "Unsupported value: \"Bogus\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\""),
                ("spec.nfs", "Forbidden: may not specify more than 1 volume type"),
                ("spec.storageClassName", "Invalid value: \"Bad_Class\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
                ("spec.volumeMode", "Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\""),
            ]
        );
        let local = pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "local": {"path": "/mnt/disk"}}),
        );
        assert_eq!(
            found(&persistent_volume(&local)),
            vec![(
                "spec.nodeAffinity",
                "Required value: Local volume requires node affinity"
            )]
        );
        let root = pv(
            json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/"}, "persistentVolumeReclaimPolicy": "Recycle"}),
        );
        assert_eq!(
            persistent_volume(&root)[0].message,
            "Forbidden: may not be 'recycle' for a hostPath mount of '/'"
        );
    }

    #[test]
    fn a_volume_source_and_mode_are_immutable() {
        let old = good_pv();
        let mut grown = old.clone();
        grown["spec"]["capacity"]["storage"] = json!("2Gi");
        grown["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
        assert_eq!(persistent_volume_update(&old, &grown), vec![]);
        let mut moved = old.clone();
        moved["spec"]["hostPath"]["path"] = json!("/elsewhere");
        moved["spec"]["volumeMode"] = json!("Block");
        let errors = persistent_volume_update(&old, &moved);
        assert_eq!(errors[0].field, "spec.persistentvolumesource");
        assert!(errors[0].message.starts_with(
            "Forbidden: spec.persistentvolumesource is immutable after creation\n  core.PersistentVolumeSource{\n- \tHostPath: {\"path\":\"/data/pv1\",\"type\":\"\"},\n+ \tHostPath: {\"path\":\"/elsewhere\",\"type\":\"\"},\n"
        ), "{}", errors[0].message);
        assert_eq!(
            found(&errors[1..]),
            vec![("volumeMode", "Invalid value: \"Block\": field is immutable")]
        );
    }

    #[test]
    fn a_claim_needs_modes_and_a_positive_storage_request() {
        assert_eq!(persistent_volume_claim(&good_pvc()), vec![]);
        assert_eq!(
            found(&persistent_volume_claim(&pvc(json!({})))),
            vec![
                (
                    "spec.accessModes",
                    "Required value: at least 1 access mode is required"
                ),
                ("spec.resources[storage]", "Required value"),
            ]
        );
        let zero = pvc(
            json!({"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "0"}},
            "dataSource": {"kind": "Snapshot", "name": "s"}}),
        );
        assert_eq!(
            found(&persistent_volume_claim(&zero)),
            vec![
                (
                    "spec.resources[storage]",
                    "Invalid value: \"0\": must be greater than zero"
                ),
                (
                    "spec.dataSource",
                    "Invalid value: \"Snapshot\": must be 'PersistentVolumeClaim' when referencing the default apiGroup"
                ),
            ]
        );
    }

    #[test]
    fn a_claim_spec_is_immutable_but_for_binding_and_expansion() {
        let old = good_pvc();
        // Binding: volumeName set once; status is the old one's.
        let mut bound = old.clone();
        bound["spec"]["volumeName"] = json!("pv1");
        assert_eq!(persistent_volume_claim_update(&old, &bound), vec![]);
        let mut rebound = bound.clone();
        rebound["spec"]["volumeName"] = json!("pv2");
        assert_eq!(
            persistent_volume_claim_update(&bound, &rebound)[0].field,
            "spec"
        );
        // Expansion only once bound.
        let mut bigger = old.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        let errors = persistent_volume_claim_update(&old, &bigger);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.starts_with(
            "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n  core.PersistentVolumeClaimSpec{\n- \tResources: {\"requests\":{\"storage\":\"1Gi\"}},\n+ \tResources: {\"requests\":{\"storage\":\"2Gi\"}},\n  \t... // 8 identical fields\n  }\n"
        ), "{}", errors[0].message);
        let mut bound_old = bound.clone();
        bound_old["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}});
        let mut bigger = bound_old.clone();
        bigger["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(persistent_volume_claim_update(&bound_old, &bigger), vec![]);
        // Shrinking below what the volume has is refused.
        let mut smaller = bigger.clone();
        smaller["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
        assert_eq!(
            found(&persistent_volume_claim_update(&bigger, &smaller)),
            vec![(
                "spec.resources.requests.storage",
                "Forbidden: field can not be less than status.capacity"
            )]
        );
        // The same quantity written otherwise is no change.
        let mut same = old.clone();
        same["spec"]["resources"]["requests"]["storage"] = json!("1024Mi");
        assert_eq!(persistent_volume_claim_update(&old, &same), vec![]);
        // A class may be set where there was none, not changed.
        let mut classless = old.clone();
        classless["spec"]
            .as_object_mut()
            .unwrap()
            .remove("storageClassName");
        assert_eq!(persistent_volume_claim_update(&classless, &old), vec![]);
        let mut other = old.clone();
        other["spec"]["storageClassName"] = json!("fast");
        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        for new in [other, modes] {
            assert_eq!(persistent_volume_claim_update(&old, &new)[0].field, "spec");
        }
    }

    #[test]
    fn a_class_needs_a_provisioner_and_keeps_its_settings() {
        let sc = json!({"metadata": {"name": "fast"}, "provisioner": "example.com/fast",
            "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate", "parameters": {"type": "ssd"}});
        assert_eq!(storage_class(&sc), vec![]);
        let bad = json!({"metadata": {"name": "x"}, "reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        assert_eq!(
            found(&storage_class(&bad)),
            vec![
                ("provisioner", "Required value"),
                (
                    "reclaimPolicy",
                    "Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\""
                ),
                (
                    "volumeBindingMode",
                    "Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\""
                ),
            ]
        );
        let mut changed = sc.clone();
        changed["provisioner"] = json!("example.com/slow");
        changed["parameters"] = json!({"type": "hdd"});
        changed["reclaimPolicy"] = json!("Retain");
        changed["volumeBindingMode"] = json!("WaitForFirstConsumer");
        assert_eq!(
            found(&storage_class_update(&sc, &changed)),
            vec![
                (
                    "parameters",
                    "Forbidden: updates to parameters are forbidden."
                ),
                (
                    "provisioner",
                    "Forbidden: updates to provisioner are forbidden."
                ),
                (
                    "reclaimPolicy",
                    "Forbidden: updates to reclaimPolicy are forbidden."
                ),
                (
                    "volumeBindingMode",
                    "Invalid value: \"WaitForFirstConsumer\": field is immutable"
                ),
            ]
        );
        let mut labelled = sc.clone();
        labelled["allowVolumeExpansion"] = json!(true);
        assert_eq!(storage_class_update(&sc, &labelled), vec![]);
    }
}
