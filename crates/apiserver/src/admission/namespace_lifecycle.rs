//! NamespaceLifecycle: an object is only created in a namespace that
//! exists and is not terminating (upstream's plugin of the same name,
//! which also keeps the system namespaces; their deletion is refused
//! elsewhere).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;

use super::Context;
use super::{Attributes, Operation, Plugin};
use crate::catalog::Resource;
use crate::object;
use crate::resources;
use crate::status::{ApiError, ApiResult};

#[derive(Debug)]
pub struct NamespaceLifecycle;

#[async_trait]
impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    async fn validate(&self, attrs: &Attributes<'_>, _object: &Value) -> ApiResult<()> {
        if attrs.operation != Operation::Create {
            return Ok(());
        }
        namespace_admits(attrs.state, attrs.resource, attrs.namespace, attrs.name).await
    }
}

/// Admission: a namespaced object needs its namespace to exist and not be
/// terminating (upstream NamespaceLifecycle).
async fn namespace_admits(
    state: &Context<'_>,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<()> {
    let (true, Some(ns)) = (r.namespaced, ns) else {
        return Ok(());
    };
    let ns_resource = resources::namespaces();
    let key = object::key(ns_resource, None, ns);
    // The watch cache answers almost always; a namespace created a moment
    // ago may not be there yet, so a miss asks the store.
    let cached = state.cache(ns_resource).get(&key);
    let memo = &state.admission.namespaces;
    let lifecycle = match cached.as_ref().and_then(|c| Some((c.revision, c.json()?))) {
        Some((revision, json)) => memo.get_or_decode(&key, revision, || Lifecycle::of(json))?,
        None => match state.store.get(&key).await {
            Ok(kv) => memo.get_or_decode(&key, kv.mod_revision, || Lifecycle::of(&kv.value))?,
            Err(skiff_store::Error::NotFound { .. }) => {
                return Err(ApiError::not_found("", "namespaces", ns))
            }
            Err(e) => return Err(e.into()),
        },
    };
    let terminating = lifecycle.status.phase.as_ref().and_then(Value::as_str)
        == Some("Terminating")
        || lifecycle.metadata.deletion_timestamp.is_some();
    if terminating {
        return Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            r.qualified(),
            name,
        )));
    }
    Ok(())
}

/// The two fields of a Namespace this plugin reads, decoded without the
/// rest (it runs on every create of a namespaced object).
#[derive(Debug, Deserialize, Default)]
#[serde(default)]
pub(super) struct Lifecycle {
    metadata: LifecycleMeta,
    status: LifecycleStatus,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct LifecycleMeta {
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct LifecycleStatus {
    phase: Option<Value>,
}

impl Lifecycle {
    fn of(json: &[u8]) -> ApiResult<Self> {
        serde_json::from_slice(json)
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
    }
}
