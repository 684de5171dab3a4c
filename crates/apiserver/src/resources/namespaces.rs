//! Namespaces: cluster-scoped, DNS-label names, the kubernetes finalizer.

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
        &["status"],
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
}
