//! events.k8s.io/v1 Events: a view of core Events, stored once under /registry/events/.

use k8s_openapi::api::events::v1::Event;
use serde_json::Value;
use skiff_api::validation::FieldError;

use super::{resource, Kind, Strategy, Typed, NONE};
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
    strategy: &EventV1Strategy,
    typed: &Typed::<Event>::NEW,
};

#[derive(Debug)]
struct EventV1Strategy;

impl Strategy for EventV1Strategy {
    fn validate_served(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::events_v1_create(obj)
    }
}
