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

use super::{resource, Kind, Strategy, Typed};

pub static KIND: Kind = Kind {
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
    fn defaults(&self, obj: &mut Value) {
        crate::crd::engine::default_crd(obj);
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
        crate::crd::engine::validate_crd(obj)
    }

    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        crate::crd::engine::validate_crd_update(old, new)
    }
}
