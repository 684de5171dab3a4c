//! Conversion between the stored form and a served version, where they
//! differ. Today that is events.k8s.io/v1 Event, served as a view of core
//! v1 Events (stored once, under /registry/events/): `regarding` ↔
//! `involvedObject`, `note` ↔ `message`, `reportingController` ↔
//! `reportingComponent`, `deprecatedSource` ↔ `source`, and the
//! `deprecated*` timestamps and count. Custom resources are served in
//! every version of their CRD with the `None` conversion: the apiVersion
//! is rewritten (`crate::crd::strategy`).

use serde_json::{Map, Value};

use crate::resources::Resource;

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

fn is_events_v1(r: &Resource) -> bool {
    r.group == "events.k8s.io"
}

/// autoscaling/v1 HorizontalPodAutoscalers, a view of the v2 objects
/// (`resources/horizontalpodautoscalers_v1.rs` converts).
fn is_hpa_v1(r: &Resource) -> bool {
    crate::resources::horizontalpodautoscalers_v1::is_v1(r)
}

/// Does `r` need conversion at all? (Custom resources always: their
/// stored objects may be of another version, and defaults apply on read.)
pub fn needed(r: &Resource) -> bool {
    is_events_v1(r) || crate::crd::is_custom_storage(r.storage) || is_hpa_v1(r)
}

fn rename(obj: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = obj.remove(from) {
        obj.insert(to.to_string(), v);
    }
}

/// Stored form → the form `r` serves.
pub fn to_served(r: &Resource, mut obj: Value) -> Value {
    if is_hpa_v1(r) {
        return crate::resources::horizontalpodautoscalers_v1::to_v1(obj);
    }
    if let Some(custom) = crate::crd::served(r) {
        return crate::crd::strategy::to_served(&custom, obj);
    }
    if is_events_v1(r) {
        if let Some(map) = obj.as_object_mut() {
            for (served, stored) in EVENT_FIELDS {
                rename(map, stored, served);
            }
            map.insert("apiVersion".into(), Value::from("events.k8s.io/v1"));
        }
    }
    obj
}

/// The form `r` serves → stored form.
pub fn to_stored(r: &Resource, mut obj: Value) -> Value {
    if is_hpa_v1(r) {
        return crate::resources::horizontalpodautoscalers_v1::from_v1(obj);
    }
    if let Some(custom) = crate::crd::served(r) {
        return crate::crd::strategy::to_stored(&custom, obj);
    }
    if is_events_v1(r) {
        if let Some(map) = obj.as_object_mut() {
            for (served, stored) in EVENT_FIELDS {
                rename(map, served, stored);
            }
            map.insert("apiVersion".into(), Value::from("v1"));
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip() {
        let r = crate::resources::find("events.k8s.io", "v1", "events").unwrap();
        let core = json!({"apiVersion": "v1", "kind": "Event", "message": "hi",
            "involvedObject": {"name": "p"}, "count": 2});
        let served = to_served(r, core.clone());
        assert_eq!(served["note"], "hi");
        assert_eq!(served["regarding"]["name"], "p");
        assert_eq!(served["deprecatedCount"], 2);
        assert_eq!(served["apiVersion"], "events.k8s.io/v1");
        assert_eq!(to_stored(r, served), core);
    }
}
