//! DefaultIngressClass: an Ingress created without a class (no
//! `spec.ingressClassName` and no `kubernetes.io/ingress.class`
//! annotation) gets the default IngressClass's name, as upstream's plugin
//! of the same name does: the classes annotated
//! `ingressclass.kubernetes.io/is-default-class: "true"`, the newest
//! first (by creation time, then name). Without a default class the
//! Ingress is left alone. Classes are read from the watch cache once it
//! has caught up with the store, else from the store.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::Context;
use super::{Attributes, Operation, Plugin};
use crate::object;
use crate::resources;
use crate::status::{ApiError, ApiResult};

/// The annotation that makes a class the default.
pub const IS_DEFAULT_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";
/// How long a create waits for the cache before asking the store.
const CACHE_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct DefaultIngressClass;

/// Whether an Ingress names a class already.
fn has_class(ingress: &Value) -> bool {
    let annotated = ingress
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| {
            a.contains_key(skiff_api::validation::networking::INGRESS_CLASS_ANNOTATION)
        });
    annotated
        || ingress
            .pointer("/spec/ingressClassName")
            .is_some_and(|c| !c.is_null())
}

/// upstream `getDefaultClass`: the newest default class.
fn default_class(classes: &[Value]) -> Option<&str> {
    let mut defaults: Vec<(&str, &str)> = classes
        .iter()
        .filter(|c| {
            c.pointer("/metadata/annotations")
                .and_then(|a| a.get(IS_DEFAULT_CLASS))
                .and_then(Value::as_str)
                == Some("true")
        })
        .filter_map(|c| {
            let name = c.pointer("/metadata/name").and_then(Value::as_str)?;
            let created = c
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Some((created, name))
        })
        .collect();
    // RFC 3339 UTC timestamps of one form sort as their times do.
    defaults.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(b.1)));
    defaults.first().map(|(_, name)| *name)
}

async fn ingress_classes(state: &Context<'_>) -> ApiResult<Vec<Value>> {
    let Some(r) = resources::find_builtin("networking.k8s.io", "v1", "ingressclasses") else {
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
impl Plugin for DefaultIngressClass {
    fn name(&self) -> &'static str {
        "DefaultIngressClass"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> ApiResult<()> {
        let r = attrs.resource;
        if attrs.operation != Operation::Create
            || r.group != "networking.k8s.io"
            || r.plural != "ingresses"
            || attrs.subresource.is_some()
            || has_class(object)
        {
            return Ok(());
        }
        let classes = ingress_classes(attrs.state).await?;
        let Some(name) = default_class(&classes) else {
            return Ok(());
        };
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("ingressClassName".into(), json!(name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: bool) -> Value {
        let annotations = if default {
            json!({IS_DEFAULT_CLASS: "true"})
        } else {
            json!({})
        };
        json!({"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}})
    }

    #[test]
    fn newest_default_wins() {
        let classes = vec![
            class("old", "2026-01-01T00:00:00Z", true),
            class("plain", "2026-01-03T00:00:00Z", false),
            class("new", "2026-01-02T00:00:00Z", true),
            class("also-new", "2026-01-02T00:00:00Z", true),
        ];
        assert_eq!(default_class(&classes), Some("also-new"));
        assert_eq!(default_class(&classes[1..2]), None);
        assert!(has_class(&json!({"spec": {"ingressClassName": "x"}})));
        assert!(has_class(
            &json!({"metadata": {"annotations": {"kubernetes.io/ingress.class": "x"}}, "spec": {}})
        ));
        assert!(!has_class(&json!({"spec": {}})));
    }
}
