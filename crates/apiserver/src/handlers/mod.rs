//! REST handlers for every resource in the table: get, list, watch,
//! create, update, delete and deletecollection, routed from the URL by
//! hand (upstream's paths overlap in ways a route table cannot express:
//! `/api/v1/namespaces/NAME` vs `/api/v1/namespaces/NS/PLURAL`).

use std::collections::HashMap;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::catalog::Kind;
use crate::registry::delete::DeleteOptions;
use crate::registry::write::WriteOptions;
use crate::status::{ApiError, ApiResult};
use crate::AppState;

pub mod apply;
mod binding;

use crate::request::{is_true, parse_target};
use crate::table;
mod componentstatuses;
mod create;
mod delete;
pub mod eviction;
mod exec;
mod get;
mod list;
pub mod log;
pub mod params;
mod patch;
mod portforward;
pub mod scale;
mod token_request;
mod update;
mod watch;

use crate::response::{json_response, MAX_BODY};

use binding::bind;
use create::create;
use delete::{delete, delete_collection};
use get::get;
use list::{list, list_from_cache, list_mode, ListMode, CONSISTENT_WAIT};
pub(crate) use patch::patch_error;
use patch::{content_type, patch, PatchBody};
use update::update;
use watch::watch;

fn query(req: &Request) -> HashMap<String, String> {
    crate::request::query_map(req.uri().query())
}

/// The fallback handler: every resource request lands here.
pub async fn dispatch(State(state): State<AppState>, req: Request) -> Response {
    let req = match buffered(req).await {
        Ok(req) => req,
        Err(response) => return response,
    };
    // The requesting user, for strategies that record it (CSRs).
    let user = req.extensions().get::<crate::authn::User>().cloned();
    // A deprecated custom resource version warns.
    let deprecated = if state.catalog.custom_kinds().any_deprecated() {
        parse_target(&state.catalog, req.uri().path())
            .and_then(|t| state.catalog.deprecation(t.resource))
    } else {
        None
    };
    let mut response = match crate::authn::requester::scope(user, handle(state, req)).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    };
    if let Some(warning) = deprecated {
        let value = format!(
            "299 - {}",
            serde_json::to_string(&warning).unwrap_or_default()
        );
        if let Ok(v) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// The whole body of a request that may carry one, read before anything
/// else answers: a reply that leaves a body unread makes HTTP/2 reset the
/// stream (curl: `Stream error in the HTTP/2 framing layer`) instead of
/// delivering, say, a 404. A transfer coding other than chunked is a 501,
/// as Go's server answers.
async fn buffered(req: Request) -> Result<Request, Response> {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(req);
    }
    if let Some(te) = req.headers().get(header::TRANSFER_ENCODING) {
        let te = te.to_str().unwrap_or("").trim().to_ascii_lowercase();
        if te != "chunked" {
            return Err((
                StatusCode::NOT_IMPLEMENTED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "Unsupported transfer encoding",
            )
                .into_response());
        }
    }
    if waits_for_continue_over_limit(&req) {
        // The client has sent nothing yet and will send nothing until told
        // to: answering first spares it (and us) the body.
        return Err(too_large().into_response());
    }
    let (parts, body) = req.into_parts();
    let deadline = parts
        .extensions
        .get::<crate::serve::BodyTimeout>()
        .map(|t| t.0);
    let bytes = read_limited(body, deadline)
        .await
        .map_err(IntoResponse::into_response)?;
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Whether `req` is an HTTP/1.1 request waiting for `100 Continue` before
/// it sends a body its Content-Length says is over [`MAX_BODY`].
fn waits_for_continue_over_limit(req: &Request) -> bool {
    let header_is = |name: header::HeaderName, want: &dyn Fn(&str) -> bool| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(want)
    };
    req.version() < axum::http::Version::HTTP_2
        && header_is(header::EXPECT, &|v| v.eq_ignore_ascii_case("100-continue"))
        && header_is(header::CONTENT_LENGTH, &|v| {
            v.trim().parse::<u64>().is_ok_and(|n| n > MAX_BODY as u64)
        })
}

/// The body whatever its media type (PATCH names its own).
async fn read_raw_body(req: Request) -> ApiResult<Bytes> {
    let deadline = req
        .extensions()
        .get::<crate::serve::BodyTimeout>()
        .map(|t| t.0);
    read_limited(req.into_body(), deadline).await
}

/// A body of at most [`MAX_BODY`] bytes, within `deadline`.
async fn read_limited(body: Body, deadline: Option<Duration>) -> ApiResult<Bytes> {
    let read = collect_limited(body, MAX_BODY, MAX_DRAIN);
    match deadline {
        Some(d) => tokio::time::timeout(d, read)
            .await
            .map_err(|_| ApiError::request_timeout("the request body was not received in time"))?,
        None => read.await,
    }
}

/// How much of a body over the limit is read and thrown away so that the
/// 413 reaches the client (see [`collect_limited`]).
const MAX_DRAIN: usize = 64 * 1024 * 1024;

/// The 413 of a body over [`MAX_BODY`], in upstream's words.
fn too_large() -> ApiError {
    ApiError::too_large("Request entity too large: limit is 3145728")
}

/// Collects `body` if it has at most `limit` bytes. A longer body is a
/// 413, but the rest of it is read (and dropped) first, up to `drain`
/// bytes: an HTTP/2 stream answered before its request body ended is
/// reset by hyper, and the client then sees a framing error instead of
/// the Status (HTTP/1.1 closes the connection after the answer either
/// way). A body that fails in transit is a 400.
async fn collect_limited(body: Body, limit: usize, drain: usize) -> ApiResult<Bytes> {
    use futures::StreamExt;
    let mut stream = body.into_data_stream();
    // Chunks as they came: one chunk (the usual case) is not copied.
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("error reading body: {e}")))?;
        seen = seen.saturating_add(chunk.len());
        if seen > limit {
            chunks.clear();
            if seen > limit.saturating_add(drain) {
                break;
            }
            continue;
        }
        chunks.push(chunk);
    }
    if seen > limit {
        return Err(too_large());
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => chunks.concat().into(),
    })
}

/// The media types of object bodies (create, update, binding, delete).
const BODY_TYPES: &str = "application/json, application/vnd.kubernetes.protobuf";

/// A request body as JSON: JSON as sent (a missing Content-Type is JSON,
/// as the Python client sends it), protobuf (client-go's typed clients,
/// kubectl `create`) converted to JSON; anything else (CBOR, YAML) 415.
async fn read_body(req: Request) -> ApiResult<Bytes> {
    let media = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| ct.split(';').next().unwrap_or("").trim().to_string())
        .unwrap_or_default();
    let protobuf = crate::protobuf::is_protobuf(&media);
    if !(protobuf || media.is_empty() || media == "application/json" || media == "*/*") {
        return Err(ApiError::unsupported_media_type(&media, BODY_TYPES));
    }
    let body = read_raw_body(req).await?;
    // An empty body (a DELETE without options) is no object, whatever
    // its declared type.
    if !protobuf || body.is_empty() {
        return Ok(body);
    }
    let object =
        crate::protobuf::to_json(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(Bytes::from(serde_json::to_vec(&object).unwrap_or_default()))
}

async fn handle(state: AppState, req: Request) -> ApiResult<Response> {
    // Reviews (create-only, never stored) and the Local APIServices.
    let req = match crate::reviews::intercept(&state, req).await {
        Ok(answer) => return answer,
        Err(req) => req,
    };
    let Some(target) = parse_target(&state.catalog, req.uri().path()) else {
        return Err(ApiError::not_found_path());
    };
    let q = query(&req);
    crate::handlers::params::check(&q, req.headers())?;
    let method = req.method().clone();
    // Resolved once: every stage below takes its rules from `kind`.
    let kind = state.catalog.resolve(target.resource);
    let r = kind.resource;
    let ns = target.namespace.as_deref();
    if componentstatuses::is(r) {
        return componentstatuses::handle(
            &state,
            &kind,
            &method,
            target.name.as_deref(),
            target.subresource.as_deref(),
            &q,
            req.headers(),
        )
        .await;
    }
    let out = Output {
        table: crate::handlers::params::wants_table(req.headers())
            .then(|| table::Include::parse(q.get("includeObject"))),
    };
    match (
        method,
        target.name.as_deref(),
        target.subresource.as_deref(),
    ) {
        (Method::GET, Some(name), None | Some("status")) => get(&state, &kind, ns, name, out).await,
        // Subresources that read as the object and write part of it:
        // a CSR's approval, a pod's ephemeral containers.
        (Method::GET, Some(name), Some(sub @ ("approval" | "ephemeralcontainers")))
            if r.subresources.contains(&sub) =>
        {
            get(&state, &kind, ns, name, out).await
        }
        (Method::PATCH, Some(name), sub @ Some(s @ ("approval" | "ephemeralcontainers")))
            if r.subresources.contains(&s) =>
        {
            let opts = WriteOptions::parse(&q)?;
            let ct = content_type(req.headers());
            let body = read_raw_body(req).await?;
            let body = PatchBody {
                content_type: &ct,
                bytes: &body,
            };
            patch(&state, &kind, ns, name, sub, body, &opts).await
        }
        (Method::PUT, Some(name), sub @ Some(s @ ("approval" | "ephemeralcontainers")))
            if r.subresources.contains(&s) =>
        {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            update(&state, &kind, ns, name, sub, &body, &opts).await
        }
        (Method::PUT, Some(name), sub @ Some("finalize"))
            if r.subresources.contains(&"finalize") =>
        {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            update(&state, &kind, ns, name, sub, &body, &opts).await
        }
        (Method::GET, None, None) if is_true(q.get("watch")) => {
            watch(&state, &kind, ns, &q, out).await
        }
        (Method::GET, None, None) => match list_mode(&q)? {
            ListMode::Any => list_from_cache(&state, &kind, ns, &q, out, None).await,
            ListMode::Consistent => {
                // Consistent read from the cache once it has caught up with
                // the store; the store itself if it does not in time.
                let current = state.store.current_revision().await?;
                if state.cache(r).wait_for(current, CONSISTENT_WAIT).await {
                    list_from_cache(&state, &kind, ns, &q, out, Some(current)).await
                } else {
                    list(&state, &kind, ns, &q, out).await
                }
            }
            ListMode::NotOlderThan(revision) => {
                if state.cache(r).wait_for(revision, CONSISTENT_WAIT).await {
                    list_from_cache(&state, &kind, ns, &q, out, Some(revision)).await
                } else {
                    Err(ApiError::timeout(format!(
                        "Too large resource version: {revision}, current: {}",
                        state.store.current_revision().await?
                    )))
                }
            }
            ListMode::Exact => list(&state, &kind, ns, &q, out).await,
        },
        (Method::GET, Some(name), Some("log")) => log::log(&state, &kind, ns, name, &q).await,
        (Method::GET | Method::POST, Some(name), Some(sub @ ("exec" | "attach"))) => {
            exec::exec(&state, &kind, ns, name, sub, req).await
        }
        (Method::GET | Method::POST, Some(name), Some("portforward")) => {
            portforward::portforward(&state, &kind, ns, name, req).await
        }
        (Method::GET, Some(name), Some("scale")) => {
            crate::handlers::scale::get(&state, &kind, ns, name).await
        }
        (Method::POST, Some(name), Some("binding")) => {
            let body = read_body(req).await?;
            bind(&state, &kind, ns, name, &body).await
        }
        (Method::POST, Some(name), Some("eviction")) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            crate::handlers::eviction::evict(&state, &kind, ns, name, &body, &opts).await
        }
        (Method::POST, Some(name), Some("token")) if r.subresources.contains(&"token") => {
            let body = read_body(req).await?;
            token_request::create_token(&state, &kind, ns, name, &body).await
        }
        (Method::POST, None, None) => {
            crate::customresources::strategy::check_create(crate::customresources::served_of(
                &kind,
            ))?;
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            create(&state, &kind, ns, &body, &opts).await
        }
        (Method::PUT, Some(name), Some("scale")) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            crate::handlers::scale::update(&state, &kind, ns, name, &body, &opts).await
        }
        (Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            update(&state, &kind, ns, name, sub, &body, &opts).await
        }
        (Method::PATCH, Some(name), Some("scale")) => {
            let opts = WriteOptions::parse(&q)?;
            let ct = content_type(req.headers());
            let body = read_raw_body(req).await?;
            crate::handlers::scale::patch(&state, &kind, ns, name, &ct, &body, &opts).await
        }
        (Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let opts = WriteOptions::parse(&q)?;
            let ct = content_type(req.headers());
            let body = read_raw_body(req).await?;
            let body = PatchBody {
                content_type: &ct,
                bytes: &body,
            };
            patch(&state, &kind, ns, name, sub, body, &opts).await
        }
        (Method::DELETE, Some(name), None) => {
            let dry_run = WriteOptions::parse(&q)?.dry_run;
            let body = read_body(req).await?;
            delete(
                &state,
                &kind,
                ns,
                name,
                &DeleteOptions::parse(&body, &q)?.dry_run(dry_run),
            )
            .await
        }
        (Method::DELETE, None, None) => {
            let dry_run = WriteOptions::parse(&q)?.dry_run;
            let body = read_body(req).await?;
            let opts = DeleteOptions::parse(&body, &q)?.dry_run(dry_run);
            delete_collection(&state, &kind, ns, &q, &opts).await
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn parse_stored(value: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(value)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
}

/// How a read answers: plain objects, or Tables.
#[derive(Debug, Clone, Copy)]
struct Output {
    table: Option<table::Include>,
}

impl Output {
    /// One object (converted to the served version), as itself or a Table.
    fn object(&self, kind: &Kind, obj: Value) -> Value {
        let obj = crate::registry::convert::to_served(kind, obj);
        match self.table {
            Some(include) => match crate::customresources::served_of(kind) {
                Some(custom) => {
                    crate::customresources::table::table(custom, &[&obj], json!({}), include)
                }
                None => table::table(kind.resource.kind, &[&obj], json!({}), include),
            },
            None => obj,
        }
    }

    /// A list response from objects in stored form.
    fn list(&self, kind: &Kind, items: Vec<Value>, metadata: Value) -> Value {
        let r = kind.resource;
        let items: Vec<Value> = items
            .into_iter()
            .map(|o| crate::registry::convert::to_served(kind, o))
            .collect();
        match self.table {
            Some(include) => {
                let refs: Vec<&Value> = items.iter().collect();
                match crate::customresources::served_of(kind) {
                    Some(custom) => {
                        crate::customresources::table::table(custom, &refs, metadata, include)
                    }
                    None => table::table(r.kind, &refs, metadata, include),
                }
            }
            None => json!({
                "kind": format!("{}List", r.kind),
                "apiVersion": r.group_version(),
                "metadata": metadata,
                "items": items,
            }),
        }
    }
}

/// A write's answer: the object (served form), with any field-validation
/// warnings as `Warning: 299` headers.
pub(crate) fn written(kind: &Kind, outcome: crate::registry::write::Outcome) -> Response {
    // The stored bytes with the resourceVersion spliced in, when they are
    // the served form: serializing the tree again was most of the cost of
    // answering a write.
    let spliced = match &outcome.stored {
        Some(stored) if !crate::registry::convert::needed(kind) => match stored.slot {
            Some(slot) => crate::object::with_revision_at(&stored.bytes, slot, stored.revision),
            None => {
                crate::watchcache::with_revision_spliced(Vec::new(), &stored.bytes, stored.revision)
            }
        },
        _ => None,
    };
    let mut response = match spliced {
        Some(body) => (
            outcome.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        None => json_response(
            outcome.status,
            &crate::registry::convert::to_served(kind, outcome.object),
        ),
    };
    for warning in outcome.warnings {
        let value = format!(
            "299 - {}",
            serde_json::to_string(&warning).unwrap_or_default()
        );
        if let Ok(v) = header::HeaderValue::from_str(&value) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}
