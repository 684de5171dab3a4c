//! Write rules of custom objects, as upstream's `customresource/strategy.go`
//! and its codec hold them: on decoding a request (served form) unknown
//! fields are pruned and `default`s applied with the served version's
//! structural schema ([`normalize`]); strict field validation names the
//! pruned fields ([`unknown_fields`]); the object is validated against the
//! schema on create and update; with a status subresource, create drops
//! status and a main-resource update keeps the stored one.

use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use super::Served;
use crate::catalog::Strategy;
use crate::status::ApiResult;

/// The pruned paths of `obj` (served form) under `served`'s schema,
/// metadata's unknown fields included.
fn prune(served: &Served, obj: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let unknown: Vec<String> = meta
            .keys()
            .filter(|k| !skiff_api::crd::OBJECT_META.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            meta.remove(&k);
            pruned.push(format!("metadata.{k}"));
        }
    }
    if let Some(schema) = &served.schema {
        // apiVersion, kind and metadata are not the schema's to prune.
        let keep: Vec<(&str, Value)> = ["apiVersion", "kind", "metadata"]
            .into_iter()
            .filter_map(|k| obj.get(k).cloned().map(|v| (k, v)))
            .collect();
        pruned.extend(
            schema
                .prune(obj)
                .into_iter()
                .filter(|p| !matches!(p.as_str(), "apiVersion" | "kind" | "metadata")),
        );
        for (k, v) in keep {
            crate::object::set(obj, k, v);
        }
    }
    pruned
}

/// Prunes and defaults a custom object in the form version `version`
/// serves (upstream's decoding of a request body), checking metadata's
/// types as ObjectMeta.
pub fn normalize(served: &Served, obj: Value, at: (&str, &str)) -> ApiResult<Value> {
    let mut obj = obj;
    crate::decode::typed::check_metadata(&obj, at)?;
    prune(served, &mut obj);
    if let Some(schema) = &served.schema {
        schema.default(&mut obj);
    }
    Ok(obj)
}

/// The fields pruning would drop from `obj` (`unknown field "spec.foo"`).
pub fn unknown_fields(served: &Served, obj: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    prune(served, &mut copy)
        .into_iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect()
}

/// Stored form → served form: the apiVersion of the served version (the
/// `None` conversion) and the served version's defaults (upstream
/// defaults on read from storage too).
pub fn to_served(served: &Served, mut obj: Value) -> Value {
    crate::object::set(
        &mut obj,
        "apiVersion",
        json!(served.resource.group_version()),
    );
    if let Some(schema) = &served.schema {
        schema.default(&mut obj);
    }
    obj
}

/// Served form → stored form: the storage version's apiVersion.
pub fn to_stored(served: &Served, mut obj: Value) -> Value {
    let gv = format!("{}/{}", served.resource.group, served.storage_version);
    crate::object::set(&mut obj, "apiVersion", json!(gv));
    obj
}

/// Each served version is its own strategy (resolved once per request).
impl Strategy for Served {
    fn prepare_for_create(&self, obj: &mut Value) {
        if self.status {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        crate::object::meta(obj).insert("generation".into(), json!(1));
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let served = self;
        let mut errors = Vec::new();
        if let Some(schema) = &served.schema {
            // The schema speaks of the served version's object.
            let mut at_version = obj.clone();
            crate::object::set(
                &mut at_version,
                "apiVersion",
                json!(served.resource.group_version()),
            );
            errors.extend(schema.validate(&at_version));
        }
        if let Some(scale) = &served.scale {
            errors.extend(scale_errors(scale, obj));
        }
        errors
    }

    /// Validation ratcheting (upstream CRDValidationRatcheting, on in
    /// 1.33): an error at a path whose value the update left as it was is
    /// not the update's fault and does not refuse it.
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        self.validate(new)
            .into_iter()
            .filter(|e| value_at(old, &e.field) != value_at(new, &e.field))
            .collect()
    }

    fn keeps_status(&self) -> bool {
        self.status
    }

    fn converts(&self) -> bool {
        true
    }

    fn to_served(&self, obj: Value) -> Value {
        to_served(self, obj)
    }

    fn to_stored(&self, obj: Value) -> Value {
        to_stored(self, obj)
    }
}

/// The value at a field path as errors name it (`spec.list[0].name`).
fn value_at<'a>(obj: &'a Value, field: &str) -> Option<&'a Value> {
    let mut at = obj;
    for part in field.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (part.get(..i)?, part.get(i..)?),
            None => (part, ""),
        };
        if !key.is_empty() {
            at = at.as_object()?.get(key)?;
        }
        for index in indexes.split(']').filter(|s| !s.is_empty()) {
            let index = index.strip_prefix('[')?;
            at = match index.parse::<usize>() {
                Ok(i) => at.as_array()?.get(i)?,
                // A map key as `[key]`.
                Err(_) => at.as_object()?.get(index.trim_matches('"'))?,
            };
        }
    }
    Some(at)
}

/// The scale subresource's replicas must be integers (upstream
/// validateScaleSpec/validateScaleStatus).
fn scale_errors(scale: &super::ScalePaths, obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for path in [&scale.spec_replicas, &scale.status_replicas] {
        let Some(value) = super::engine::Structural::column(obj, path) else {
            continue;
        };
        let field = path.trim_start_matches('.').to_string();
        let detail = match value.as_i64() {
            Some(n) if (0..=i64::from(i32::MAX)).contains(&n) => continue,
            Some(n) if n < 0 => "should be a non-negative integer",
            _ => "should be an integer",
        };
        errors.push(FieldError {
            reason: "FieldValueInvalid",
            field,
            message: format!("Invalid value: {value}: {detail}"),
        });
    }
    errors
}

/// Creates are refused while the CRD is being deleted (upstream's
/// `create not allowed while custom resource definition is terminating`).
pub fn check_create(served: Option<&Served>) -> ApiResult<()> {
    if served.is_some_and(|s| s.terminating) {
        let mut e = crate::status::ApiError::method_not_allowed();
        e.message = "create not allowed while custom resource definition is terminating".into();
        return Err(e);
    }
    Ok(())
}
