//! Binding: the body of pods/binding.

use k8s_openapi::api::core::v1::Binding;

use crate::catalog::{KindDef, Plain, Typed};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "Binding",
    resource: None,
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<Binding>::NEW,
};
