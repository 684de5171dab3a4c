//! Reading objects for admission: one resource's objects (of a
//! namespace, or all) from its watch cache once that has caught up with
//! the store, else from the store, so a plugin sees every write
//! acknowledged before the request it admits.

use std::time::Duration;

use serde_json::Value;

use super::Context;
use crate::catalog::Resource;
use crate::object;
use crate::status::{ApiError, ApiResult};

/// How long a plugin waits for the cache before asking the store.
const CACHE_WAIT: Duration = Duration::from_secs(1);

/// Every object of `r` in `ns` (all namespaces for none), as fresh as
/// the store.
pub async fn list(state: &Context<'_>, r: &Resource, ns: Option<&str>) -> ApiResult<Vec<Value>> {
    let prefix = object::prefix(r, ns);
    let revision = state.store.current_revision().await?;
    let cache = state.cache(r);
    if cache.wait_for(revision, CACHE_WAIT).await {
        if let Ok((_, items)) = cache.list(&prefix) {
            return Ok(items.iter().filter_map(|c| c.object()).collect());
        }
    }
    list_store(state, &prefix).await
}

/// Every object of `r` in `ns` as the watch cache has them now (as
/// upstream's plugins read their informers' listers: a write of a moment
/// ago may be missing), from the store while the cache is not ready.
/// Cheap enough for every write.
pub async fn list_cached(
    state: &Context<'_>,
    r: &Resource,
    ns: Option<&str>,
) -> ApiResult<Vec<Value>> {
    let prefix = object::prefix(r, ns);
    if let Ok((_, items)) = state.cache(r).list(&prefix) {
        return Ok(items.iter().filter_map(|c| c.object()).collect());
    }
    list_store(state, &prefix).await
}

async fn list_store(state: &Context<'_>, prefix: &str) -> ApiResult<Vec<Value>> {
    store_items(state, prefix)
        .await?
        .iter()
        .map(|kv| {
            serde_json::from_slice(&kv.value)
                .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
        })
        .collect()
}

/// Every stored key under `prefix`, page by page at one revision.
async fn store_items(state: &Context<'_>, prefix: &str) -> ApiResult<Vec<skiff_store::KeyValue>> {
    let mut out = Vec::new();
    let mut opts = skiff_store::ListOptions::default();
    loop {
        let page = state.store.list(prefix, opts.clone()).await?;
        out.extend(page.items);
        match page.continue_token {
            Some(token) => {
                opts.continue_token = Some(token);
                opts.revision = Some(page.revision);
            }
            None => return Ok(out),
        }
    }
}

/// [`list_cached`] for the resource served at `group`/`version`/`plural`
/// (none when it is not served).
pub async fn list_of(
    state: &Context<'_>,
    group: &str,
    version: &str,
    plural: &str,
    ns: Option<&str>,
) -> ApiResult<Vec<Value>> {
    match crate::resources::find_builtin(group, version, plural) {
        Some(r) => list_cached(state, r, ns).await,
        None => Ok(Vec::new()),
    }
}

/// One object's version as stored (`resourceVersion` not necessarily set).
#[derive(Debug, Clone)]
pub struct Version {
    pub key: String,
    pub revision: i64,
    pub json: bytes::Bytes,
}

/// The versions of every object of the resource served at
/// `group`/`version`/`plural` in `ns` (all namespaces for none) as the
/// watch cache has them now, for a plugin that decodes them through a
/// [`super::memo::Memo`]; from the store while the cache is not ready.
pub async fn versions_of(
    state: &Context<'_>,
    group: &str,
    version: &str,
    plural: &str,
    ns: Option<&str>,
) -> ApiResult<Vec<Version>> {
    let Some(r) = crate::resources::find_builtin(group, version, plural) else {
        return Ok(Vec::new());
    };
    let prefix = object::prefix(r, ns);
    if let Ok((_, items)) = state.cache(r).list(&prefix) {
        return Ok(items
            .iter()
            .filter_map(|c| {
                Some(Version {
                    key: c.key.clone(),
                    revision: c.revision,
                    json: c.json()?.clone(),
                })
            })
            .collect());
    }
    Ok(store_items(state, &prefix)
        .await?
        .into_iter()
        .map(|kv| Version {
            key: kv.key,
            revision: kv.mod_revision,
            json: kv.value,
        })
        .collect())
}

/// `<plural> "<name>" is forbidden: <detail>`, as admission.NewForbidden.
pub fn forbidden(r: &Resource, name: &str, detail: &str) -> ApiError {
    ApiError::forbidden(format!(
        "{} \"{name}\" is forbidden: {detail}",
        r.qualified()
    ))
}
