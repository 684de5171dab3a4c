//! The schema engine for CustomResourceDefinitions, after upstream's
//! k8s.io/apiextensions-apiserver: a structural schema built from a CRD
//! version's `openAPIV3Schema` ([`Structural`]), and with it defaulting,
//! pruning, validation of custom objects and the JSONPath evaluation that
//! additionalPrinterColumns use; plus validation and defaulting of the
//! CustomResourceDefinition object itself ([`validate_crd`]).
//!
//! Pure logic on `serde_json::Value`s; the serving side (registry,
//! discovery, OpenAPI, handlers) lives in the API server. Upstream's
//! order, for callers: a request body is pruned ([`Structural::prune`])
//! and then defaulted ([`Structural::default`]); a stored object is
//! defaulted on read; create validates with [`Structural::validate`],
//! update with [`Structural::validate_update`] (ratcheting). A CRD is
//! defaulted ([`default_crd`]) before [`validate_crd`]. CEL rules
//! (x-kubernetes-validations) are checked for shape only, never run.

use serde_json::Value;

use crate::validation::FieldError;

mod crd_parts;
mod crd_validation;
mod default;
mod embedded;
mod errors;
mod formats;
mod jsonpath;
mod listtype;
mod openapi_checks;
mod prune;
mod regex;
mod schema_checks;
mod schema_shape;
mod structural;
mod validate;

#[cfg(test)]
mod tests;

pub use crd_validation::{
    default_crd, validate_crd, validate_crd_status_update, validate_crd_update,
};
pub use prune::OBJECT_META;

/// Drops the keys a v1 JSONSchemaProps does not have from a CRD version's
/// `openAPIV3Schema` at `base` (upstream's typed decoding loses them),
/// returning their paths as strict field validation names them
/// (`spec.versions[0].schema.openAPIV3Schema.properties.spec.foo`).
pub fn prune_schema(schema: &mut Value, base: &str) -> Vec<String> {
    schema_shape::prune_schema(schema, base)
}

/// A structural schema built from a CRD version's `schema.openAPIV3Schema`
/// (JSON, as stored).
#[derive(Debug, Clone)]
pub struct Structural {
    /// The structural skeleton (types, properties, items, defaults,
    /// extensions): what defaulting and pruning walk.
    root: structural::Node,
    /// The schema as given: what value validation walks (allOf, anyOf,
    /// oneOf and not included).
    raw: Value,
}

impl Structural {
    /// Parses and checks the schema; errors are the CRD validation messages
    /// upstream gives, with field paths under `base` (e.g.
    /// "spec.versions[0].schema.openAPIV3Schema").
    pub fn new(schema: &Value, base: &str) -> Result<Structural, Vec<FieldError>> {
        let errors = schema_checks::check(schema, base);
        if !errors.is_empty() {
            return Err(errors);
        }
        let root = structural::Node::parse(schema);
        Ok(Structural {
            root,
            raw: schema.clone(),
        })
    }

    /// Builds the skeleton without any checks (for schemas stored before
    /// the checks, or read back from storage, where upstream never rejects).
    pub fn unchecked(schema: &Value) -> Structural {
        Structural {
            root: structural::Node::parse(schema),
            raw: schema.clone(),
        }
    }

    /// The schema as given (for publishing it, e.g. in OpenAPI).
    pub fn schema(&self) -> &Value {
        &self.raw
    }

    /// Applies `default`s (upstream's defaulting: on read from storage and
    /// on create/update).
    pub fn default(&self, obj: &mut Value) {
        default::apply(&self.root, obj);
    }

    /// Drops fields the schema does not know (unless
    /// x-kubernetes-preserve-unknown-fields / embedded resources); returns
    /// the paths pruned, e.g. `spec.foo`, `spec.list[0].bar` (upstream's
    /// strict field validation words them `unknown field "spec.foo"`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune(&self.root, obj)
    }

    /// Validates a custom object against the schema, with upstream's
    /// messages and field paths.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate::validate(&self.raw, &self.root, obj)
    }

    /// Validates an updated custom object with upstream's ratcheting
    /// (CRDValidationRatcheting, on by default in 1.33): errors on values
    /// unchanged from `old` (objects correlated by key, list-type map items
    /// by their keys, set items by value) are not reported.
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate::validate_update(&self.raw, &self.root, new, old)
    }

    /// The value at a JSONPath as additionalPrinterColumns use it
    /// (`.spec.replicas`, `.status.conditions[?(@.type=="Ready")].status`).
    pub fn column(obj: &Value, json_path: &str) -> Option<Value> {
        jsonpath::column(obj, json_path)
    }
}
