//! Conversion between the stored form and the form a resource serves,
//! where they differ: each kind's strategy says whether it converts and
//! how (events.k8s.io/v1 Events and autoscaling/v1 HorizontalPodAutoscalers
//! are views of the stored core/v1 and autoscaling/v2 objects; custom
//! resources are served in every version of their CRD with the `None`
//! conversion, `crate::customresources::strategy`).

use serde_json::Value;

use crate::catalog::Kind;

/// Does `kind` need conversion at all? (Custom resources always: their
/// stored objects may be of another version, and defaults apply on read.)
pub fn needed(kind: &Kind) -> bool {
    kind.strategy().converts()
}

/// Stored form → the form `kind` serves.
pub fn to_served(kind: &Kind, obj: Value) -> Value {
    kind.strategy().to_served(obj)
}

/// The form `kind` serves → stored form.
pub fn to_stored(kind: &Kind, obj: Value) -> Value {
    kind.strategy().to_stored(obj)
}
