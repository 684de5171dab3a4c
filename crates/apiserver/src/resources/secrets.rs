//! Secrets.

use k8s_openapi::api::core::v1::Secret;

use super::{resource, Kind, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Secret",
    resource: Some(resource(
        "", "v1", "secrets", "secret", "Secret", true, NONE, NONE, NONE,
    )),
    selectable_fields: &["type"],
    typed: &Typed::<Secret>::NEW,
};
