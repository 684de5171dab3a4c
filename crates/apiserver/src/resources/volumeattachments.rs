//! VolumeAttachments (storage.k8s.io/v1): cluster-scoped, with status
//! (upstream `registry/storage/volumeattachment`): create starts with an
//! empty status, the spec is read-only afterwards.

use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde_json::{json, Value};
use skiff_api::validation::FieldError;

use crate::catalog::{resource, KindDef, Strategy, Typed, NONE};

pub static KIND: KindDef = KindDef {
    group: "storage.k8s.io",
    kind: "VolumeAttachment",
    resource: Some(resource(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "volumeattachment",
        "VolumeAttachment",
        false,
        NONE,
        NONE,
        &["status"],
    )),
    selectable_fields: &[],
    strategy: &VolumeAttachmentStrategy,
    typed: &Typed::<VolumeAttachment>::NEW,
};

#[derive(Debug)]
struct VolumeAttachmentStrategy;

impl Strategy for VolumeAttachmentStrategy {
    fn prepare_for_create(&self, obj: &mut Value) {
        crate::object::set(obj, "status", json!({"attached": false}));
    }
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::volume_attachment(obj)
    }
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<FieldError> {
        skiff_api::validation::csi::volume_attachment_update(old, new)
    }
}
