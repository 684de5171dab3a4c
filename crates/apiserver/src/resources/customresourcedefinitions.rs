//! CustomResourceDefinitions (apiextensions.k8s.io/v1): cluster-scoped,
//! with a status subresource, short names `crd`/`crds` and category
//! `api-extensions`, printed with the default NAME and CREATED AT columns
//! (upstream `registry/customresourcedefinition`). Defaults and validation
//! are skiff-api's (`crd::default_crd`, `validate_crd`,
//! `validate_crd_update`); create starts the status with the storage
//! version as the only stored version, and an update that moves storage
//! to another version adds it there. Conditions and accepted names are
//! the CRD controller's (`crate::crd::controller`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed};

pub static KIND: KindDef = KindDef {
    group: "apiextensions.k8s.io",
    kind: "CustomResourceDefinition",
    resource: Some(resource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        &["api-extensions"],
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &CrdStrategy,
    typed: &Typed::<CustomResourceDefinition>::NEW,
};

#[derive(Debug)]
struct CrdStrategy;

/// The version `spec.versions` marks as the storage one.
fn storage_version(obj: &Value) -> Option<&str> {
    obj.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()
}

/// Adds the storage version to status.storedVersions if absent.
fn record_stored_version(obj: &mut Value) {
    let Some(storage) = storage_version(obj).map(String::from) else {
        return;
    };
    let mut stored: Vec<Value> = obj
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if stored.iter().any(|v| v.as_str() == Some(&storage)) {
        return;
    }
    stored.push(json!(storage));
    if !obj.get("status").is_some_and(Value::is_object) {
        crate::object::set(obj, "status", json!({}));
    }
    if let Some(status) = obj.get_mut("status") {
        crate::object::set(status, "storedVersions", json!(stored));
    }
}

impl Strategy for CrdStrategy {
    /// Its objects go first (`crate::crd::cleanup`): the cleanup
    /// finalizer and the Terminating condition.
    fn prepare_for_delete(&self, obj: &mut Value, finalizers: &mut Vec<String>) {
        mark(obj, finalizers);
    }
    fn defaults(&self, obj: &mut Value) {
        skiff_api::crd::default_crd(obj);
        // On update the stored status is in place: a new storage version
        // joins storedVersions (upstream PrepareForUpdate).
        if obj.get("status").is_some() {
            record_stored_version(obj);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(
            obj,
            "status",
            json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}),
        );
        record_stored_version(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::crd::validate_crd(obj)
    }

    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::crd::validate_crd_update(old, new)
    }
}

/// The finalizer a CRD carries while its objects are removed.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// On the first delete of a CRD: the finalizer (into `fins`, which the
/// delete writes) and the Terminating condition.
fn mark(obj: &mut Value, fins: &mut Vec<String>) {
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    if !fins.iter().any(|f| f == CLEANUP_FINALIZER) {
        fins.push(CLEANUP_FINALIZER.to_string());
    }
    set_condition(
        obj,
        &Condition::new(
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        ),
    );
}

/// One condition (type, status, reason, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

impl Condition {
    pub fn new(type_: &'static str, status: &'static str, reason: &str, message: &str) -> Self {
        Condition {
            type_,
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The conditions of a stored CRD.
pub fn conditions(crd: &Value) -> Vec<(Condition, Option<String>)> {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    let type_ = match c.get("type").and_then(Value::as_str)? {
                        "NamesAccepted" => "NamesAccepted",
                        "Established" => "Established",
                        "Terminating" => "Terminating",
                        "NonStructuralSchema" => "NonStructuralSchema",
                        "KubernetesAPIApprovalPolicyConformant" => {
                            "KubernetesAPIApprovalPolicyConformant"
                        }
                        _ => return None,
                    };
                    let status = match c.get("status").and_then(Value::as_str)? {
                        "True" => "True",
                        "False" => "False",
                        _ => "Unknown",
                    };
                    Some((
                        Condition::new(
                            type_,
                            status,
                            c.get("reason").and_then(Value::as_str).unwrap_or_default(),
                            c.get("message").and_then(Value::as_str).unwrap_or_default(),
                        ),
                        c.get("lastTransitionTime")
                            .and_then(Value::as_str)
                            .map(String::from),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Sets `c` among `crd`'s conditions as upstream's SetCRDCondition does:
/// a new type is appended; the transition time changes only with the
/// status. Returns whether anything changed.
pub fn set_condition(crd: &mut Value, c: &Condition) -> bool {
    let now = crate::object::now();
    if !crd.get("status").is_some_and(Value::is_object) {
        crate::object::set(crd, "status", json!({}));
    }
    let Some(status) = crd.get_mut("status") else {
        return false;
    };
    if !status.get("conditions").is_some_and(Value::is_array) {
        crate::object::set(status, "conditions", json!([]));
    }
    let Some(list) = status.get_mut("conditions").and_then(Value::as_array_mut) else {
        return false;
    };
    let entry = json!({
        "type": c.type_,
        "status": c.status,
        "lastTransitionTime": now,
        "reason": c.reason,
        "message": c.message,
    });
    match list
        .iter_mut()
        .find(|x| x.get("type").and_then(Value::as_str) == Some(c.type_))
    {
        None => {
            list.push(entry);
            true
        }
        Some(existing) => {
            let same_status = existing.get("status").and_then(Value::as_str) == Some(c.status);
            let same = same_status
                && existing.get("reason").and_then(Value::as_str) == Some(c.reason.as_str())
                && existing.get("message").and_then(Value::as_str) == Some(c.message.as_str());
            if same {
                return false;
            }
            let time = if same_status {
                existing.get("lastTransitionTime").cloned()
            } else {
                None
            };
            *existing = entry;
            if let Some(t) = time {
                crate::object::set(existing, "lastTransitionTime", t);
            }
            true
        }
    }
}

/// Whether `crd` has condition `type_` with status True.
pub fn is_true(crd: &Value, type_: &str) -> bool {
    conditions(crd)
        .iter()
        .any(|(c, _)| c.type_ == type_ && c.status == "True")
}
