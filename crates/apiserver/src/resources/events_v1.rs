//! events.k8s.io/v1 Events: a view of core Events, stored once under /registry/events/.

use k8s_openapi::api::events::v1::Event;

use super::{resource, Kind, Typed, NONE};
use crate::resources::Resource;

pub static KIND: Kind = Kind {
    group: "events.k8s.io",
    kind: "Event",
    resource: Some(Resource {
        storage: "events",
        ..resource(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            NONE,
            NONE,
        )
    }),
    selectable_fields: &[
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    ],
    typed: &Typed::<Event>::NEW,
};
