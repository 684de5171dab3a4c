//! DELETE of one object and of a collection.

use std::collections::HashMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use skiff_store::ListOptions;

use crate::catalog::Kind;
use crate::object::{self};
use crate::registry::delete::DeleteOptions;
use crate::status::ApiResult;
use crate::watchcache::filter::Filter;
use crate::AppState;

use super::{json_response, parse_stored};

pub(super) async fn delete(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Response> {
    let outcome = crate::registry::delete::delete_one(state, kind, ns, name, opts).await?;
    Ok(super::written(kind, outcome))
}

pub(super) async fn delete_collection(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    opts: &DeleteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    let filter = Filter::parse(r, state.catalog.selectable_fields(r), q)?;
    let view = state.catalog.selectable_for_storage(r.storage);
    let page = state
        .store
        .list(&object::prefix(r, ns), ListOptions::default())
        .await?;
    let mut items = Vec::new();
    for kv in page.items {
        let obj = parse_stored(&kv.value)?;
        if !filter.matches_object(r, view, &obj) {
            continue;
        }
        let name = object::name_of(&obj).unwrap_or_default().to_string();
        let obj_ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        match crate::registry::delete::delete_one(state, kind, obj_ns.as_deref(), &name, opts).await
        {
            Ok(outcome) => items.push(outcome.object),
            Err(e) if e.code == StatusCode::NOT_FOUND => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", r.kind),
            "apiVersion": r.group_version(),
            "metadata": {},
            "items": items,
        }),
    ))
}
