//! ConfigMaps.

use k8s_openapi::api::core::v1::ConfigMap;

use super::{resource, Kind, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "",
    kind: "ConfigMap",
    resource: Some(resource(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        NONE,
        NONE,
    )),
    selectable_fields: &[],
    typed: &Typed::<ConfigMap>::NEW,
};
