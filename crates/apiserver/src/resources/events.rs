//! core/v1 Events (also the stored form of events.k8s.io/v1 Events).

use k8s_openapi::api::core::v1::Event;
use serde_json::Value;
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
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
    strategy: &EventStrategy,
    typed: &Typed::<Event>::NEW,
};

#[derive(Debug)]
struct EventStrategy;

impl Strategy for EventStrategy {
    /// Created through core/v1 (events.k8s.io/v1 ones are checked in
    /// their served form by their own kind).
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::core_event(obj)
    }
    /// Upstream checks a v1 Event update's metadata only.
    fn validate_update(&self, _old: &Value, _new: &Value) -> Vec<FieldError> {
        Vec::new()
    }
}
