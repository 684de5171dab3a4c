//! events.k8s.io/v1 Events: a view of core v1 Events, stored once under
//! /registry/events/: `regarding` ↔ `involvedObject`, `note` ↔
//! `message`, `reportingController` ↔ `reportingComponent`,
//! `deprecatedSource` ↔ `source`, and the `deprecated*` timestamps and
//! count.

use k8s_openapi::api::events::v1::Event;
use serde_json::{Map, Value};
use skiff_api::validation::FieldError;

use crate::catalog::Resource;
use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
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

    fn converts(&self) -> bool {
        true
    }

    fn to_served(&self, mut obj: Value) -> Value {
        if let Some(map) = obj.as_object_mut() {
            for (served, stored) in EVENT_FIELDS {
                rename(map, stored, served);
            }
            map.insert("apiVersion".into(), Value::from("events.k8s.io/v1"));
        }
        obj
    }

    fn to_stored(&self, mut obj: Value) -> Value {
        if let Some(map) = obj.as_object_mut() {
            for (served, stored) in EVENT_FIELDS {
                rename(map, served, stored);
            }
            map.insert("apiVersion".into(), Value::from("v1"));
        }
        obj
    }
}

/// (events.k8s.io/v1 field, core/v1 field)
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = obj.remove(from) {
        obj.insert(to.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip() {
        let s = &EventV1Strategy;
        let core = json!({"apiVersion": "v1", "kind": "Event", "message": "hi",
            "involvedObject": {"name": "p"}, "count": 2});
        let served = s.to_served(core.clone());
        assert_eq!(served["note"], "hi");
        assert_eq!(served["regarding"]["name"], "p");
        assert_eq!(served["deprecatedCount"], 2);
        assert_eq!(served["apiVersion"], "events.k8s.io/v1");
        assert_eq!(s.to_stored(served), core);
    }
}
