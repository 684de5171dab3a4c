//! LIST: from the watch cache (resourceVersion=0, NotOlderThan, consistent once the cache has caught up) or the store (Exact, paging), with selectors, limit/continue and Tables.

use std::collections::HashMap;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use skiff_store::ListOptions;

use crate::catalog::Kind;
use crate::object::{self, with_revision};
use crate::status::{ApiError, ApiResult};
use crate::watchcache::filter::Filter;
use crate::AppState;

use super::{json_response, parse_stored, Output};

/// How long a consistent list waits for the watch cache before asking the
/// store instead.
pub(super) const CONSISTENT_WAIT: Duration = Duration::from_secs(3);

/// Where a list is served from.
pub(super) enum ListMode {
    /// `resourceVersion=0`: any recent state (the cache, as is).
    Any,
    /// No resourceVersion: the latest state (the cache once caught up).
    Consistent,
    /// `resourceVersion=N` (NotOlderThan, the default match): the cache
    /// once it has reached N.
    NotOlderThan(i64),
    /// `resourceVersionMatch=Exact` or a continue token: that snapshot
    /// (the store).
    Exact,
}

pub(super) fn list_mode(q: &HashMap<String, String>) -> ApiResult<ListMode> {
    if q.get("continue").is_some_and(|c| !c.is_empty()) {
        return Ok(ListMode::Exact);
    }
    let matching = q
        .get("resourceVersionMatch")
        .map(String::as_str)
        .unwrap_or("");
    if !matches!(matching, "" | "Exact" | "NotOlderThan") {
        return Err(ApiError::bad_request(format!(
            "resourceVersionMatch: Unsupported value: \"{matching}\": supported values: \"Exact\", \"NotOlderThan\""
        )));
    }
    Ok(
        match (q.get("resourceVersion").map(String::as_str), matching) {
            (None | Some(""), "") => ListMode::Consistent,
            (None | Some(""), _) => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ))
            }
            (Some("0"), "Exact") => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
                ))
            }
            (Some("0"), _) => ListMode::Any,
            (Some(_), "Exact") => ListMode::Exact,
            (Some(rv), _) => {
                ListMode::NotOlderThan(rv.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv}"))
                })?)
            }
        },
    )
}

pub(super) async fn list(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
) -> ApiResult<Response> {
    let r = kind.resource;
    let limit = q.get("limit").and_then(|l| l.parse::<usize>().ok());
    let revision = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let opts = ListOptions {
        limit,
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        revision,
    };
    let filter = Filter::parse(r, state.catalog.selectable_fields(r), q)?;
    let view = state.catalog.selectable_for_storage(r.storage);
    let page = state.store.list(&object::prefix(r, ns), opts).await?;
    let mut items = Vec::with_capacity(page.items.len());
    for kv in &page.items {
        let obj = parse_stored(&kv.value)?;
        if filter.matches_object(r, view, &obj) {
            items.push(with_revision(obj, kv.mod_revision));
        }
    }
    let mut metadata = json!({ "resourceVersion": page.revision.to_string() });
    if let Some(token) = page.continue_token {
        crate::object::set(&mut metadata, "continue", json!(token));
    }
    Ok(json_response(
        StatusCode::OK,
        &out.list(kind, items, metadata),
    ))
}

/// A list served from the watch cache. With `limit`, the first page comes
/// from memory and the continue token points the next pages at the store
/// snapshot of the same revision.
pub(super) async fn list_from_cache(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
    at_least: Option<i64>,
) -> ApiResult<Response> {
    let r = kind.resource;
    let filter = Filter::parse(r, state.catalog.selectable_fields(r), q)?;
    let cache = state.cache(r);
    if !cache.wait_for(at_least.unwrap_or(0), CONSISTENT_WAIT).await {
        return Err(ApiError::unavailable("the watch cache is not ready yet"));
    }
    let prefix = object::prefix(r, ns);
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0 && at_least.is_some());
    // Objects whose stored bytes do not parse are left out.
    let page = cache
        .page(&prefix, limit, |item| {
            item.selectable()
                .is_some_and(|s| filter.is_everything() || filter.matches(s))
        })
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    let (revision, items) = (page.revision, page.items);
    let continue_token = match items.last() {
        Some(last) if page.more => Some(skiff_store::encode_continue(&prefix, &last.key, revision)),
        _ => None,
    };
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if let Some(token) = &continue_token {
        crate::object::set(&mut metadata, "continue", json!(token));
    }
    if out.table.is_some() || crate::registry::convert::needed(kind) {
        let objects = items.iter().filter_map(|i| i.object()).collect();
        return Ok(json_response(
            StatusCode::OK,
            &out.list(kind, objects, metadata),
        ));
    }
    // The common case: splice the cached JSON, no re-serialization.
    let head = json!({
        "kind": format!("{}List", r.kind),
        "apiVersion": r.group_version(),
        "metadata": metadata,
    });
    let head = serde_json::to_vec(&head).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut body = Vec::with_capacity(
        items
            .iter()
            .filter_map(|i| i.json())
            .map(|j| j.len() + 1)
            .sum::<usize>()
            + head.len()
            + 16,
    );
    // The head without its closing brace.
    body.extend_from_slice(head.strip_suffix(b"}").unwrap_or(&head));
    body.extend_from_slice(b",\"items\":[");
    for (i, json) in items.iter().filter_map(|i| i.json()).enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(json);
    }
    body.extend_from_slice(b"]}");
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}
