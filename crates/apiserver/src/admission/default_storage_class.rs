//! DefaultStorageClass: a PersistentVolumeClaim created without a class
//! (no `spec.storageClassName`, not even `""`, and no beta class
//! annotation) gets the default StorageClass's name — the newest class
//! annotated `storageclass.kubernetes.io/is-default-class: "true"` —
//! as upstream's plugin of the same name does. Without a default class the
//! claim is left alone. Classes are read from the watch cache once it has
//! caught up with the store, else from the store.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::Context;
use super::{Attributes, Operation, Plugin};
use crate::object;
use crate::resources;
use crate::status::{ApiError, ApiResult};

/// How long a claim's creation waits for the cache to catch up before the
/// store is asked instead.
const CACHE_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct DefaultStorageClass;

/// Whether a claim names a class (upstream `PersistentVolumeClaimHasClass`).
fn has_class(claim: &Value) -> bool {
    let annotated = claim
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(skiff_api::validation::BETA_STORAGE_CLASS_ANNOTATION));
    annotated
        || claim
            .pointer("/spec/storageClassName")
            .is_some_and(|c| !c.is_null())
}

/// Every StorageClass, from a cache as fresh as the store or the store.
async fn storage_classes(state: &Context<'_>) -> ApiResult<Vec<Value>> {
    let Some(r) = resources::find_builtin("storage.k8s.io", "v1", "storageclasses") else {
        return Ok(Vec::new());
    };
    let prefix = object::prefix(r, None);
    let revision = state.store.current_revision().await?;
    let cache = state.cache(r);
    if cache.wait_for(revision, CACHE_WAIT).await {
        if let Ok((_, items)) = cache.list(&prefix) {
            return Ok(items.iter().filter_map(|c| c.object()).collect());
        }
    }
    let page = state
        .store
        .list(&prefix, skiff_store::ListOptions::default())
        .await?;
    page.items
        .iter()
        .map(|kv| {
            serde_json::from_slice(&kv.value)
                .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
        })
        .collect()
}

#[async_trait]
impl Plugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> ApiResult<()> {
        let r = attrs.resource;
        if attrs.operation != Operation::Create
            || !r.group.is_empty()
            || r.plural != "persistentvolumeclaims"
            || attrs.subresource.is_some()
            || has_class(object)
        {
            return Ok(());
        }
        let classes = storage_classes(attrs.state).await?;
        let Some(name) = skiff_api::defaults::default_storage_class(&classes)
            .and_then(|c| c.pointer("/metadata/name"))
            .and_then(Value::as_str)
        else {
            return Ok(());
        };
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("storageClassName".into(), json!(name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claims_without_any_class_are_defaulted() {
        assert!(!has_class(&json!({"spec": {}})));
        assert!(!has_class(&json!({"spec": {"storageClassName": null}})));
        assert!(has_class(&json!({"spec": {"storageClassName": ""}})));
        assert!(has_class(&json!({"spec": {"storageClassName": "fast"}})));
        assert!(has_class(&json!({"metadata": {"annotations":
            {"volume.beta.kubernetes.io/storage-class": ""}}, "spec": {}})));
    }
}
