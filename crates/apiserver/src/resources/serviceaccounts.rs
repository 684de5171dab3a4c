//! ServiceAccounts.

use k8s_openapi::api::core::v1::ServiceAccount;

use crate::catalog::{resource, KindDef, Plain, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "",
    kind: "ServiceAccount",
    resource: Some(resource(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        NONE,
        &["token"],
    )),
    selectable_fields: &[],
    strategy: &Plain,
    typed: &Typed::<ServiceAccount>::NEW,
};
