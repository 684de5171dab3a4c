//! Namespaces: cluster-scoped, DNS-label names, the kubernetes finalizer
//! (in spec.finalizers, changed only through the `finalize` subresource).

use k8s_openapi::api::core::v1::Namespace;
use serde_json::Value;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Namespace",
    resource: Some(resource(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        NONE,
        &["finalize", "status"],
    )),
    selectable_fields: &["status.phase"],
    strategy: &NamespaceStrategy,
    typed: &Typed::<Namespace>::NEW,
};

#[derive(Debug)]
struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn defaults(&self, obj: &mut Value) {
        skiff_api::defaults::namespace(obj);
    }
    fn name_errors(&self, name: &str) -> Vec<String> {
        skiff_api::validation::names::dns1123_label(name)
    }
    /// spec.finalizers' names (upstream's ValidateNamespace and, through
    /// `finalize`, ValidateNamespaceFinalizeUpdate).
    fn validate(&self, obj: &Value) -> Vec<skiff_api::validation::FieldError> {
        match obj.pointer("/spec/finalizers").and_then(Value::as_array) {
            Some(f) => skiff_api::validation::meta::finalizer_names(f, "spec.finalizers"),
            None => Vec::new(),
        }
    }
    /// A status write does not check spec.finalizers again (upstream's
    /// ValidateNamespaceStatusUpdate), so one stored before these checks
    /// cannot block the namespace controller's conditions.
    fn validate_status_update(
        &self,
        _old: &Value,
        _new: &Value,
    ) -> Vec<skiff_api::validation::FieldError> {
        Vec::new()
    }
    /// spec.finalizers changes only through `finalize`; status only
    /// through `status` (upstream's namespaceStrategy).
    fn prepare_for_update(&self, old: &Value, new: &mut Value) {
        keep(old, new, "status");
        let finalizers = old.pointer("/spec/finalizers").cloned();
        if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
            match finalizers {
                Some(f) => spec.insert("finalizers".into(), f),
                None => spec.remove("finalizers"),
            };
        }
    }
}

/// Sets `field` of `new` to `old`'s (or removes it).
pub(crate) fn keep(old: &Value, new: &mut Value, field: &str) {
    let Some(obj) = new.as_object_mut() else {
        return;
    };
    match old.get(field) {
        Some(v) => obj.insert(field.into(), v.clone()),
        None => obj.remove(field),
    };
}
