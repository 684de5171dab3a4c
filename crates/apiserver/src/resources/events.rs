//! core/v1 Events (also the stored form of events.k8s.io/v1 Events).

use k8s_openapi::api::core::v1::Event;

use super::{resource, Kind, Plain, Typed, NONE};

pub static KIND: Kind = Kind {
    group: "",
    kind: "Event",
    resource: Some(resource(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        NONE,
        NONE,
    )),
    selectable_fields: &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ],
    strategy: &Plain,
    typed: &Typed::<Event>::NEW,
};
