//! REST handlers for every resource in the table: get, list, watch,
//! create, update, delete and deletecollection, routed from the URL by
//! hand (upstream's paths overlap in ways a route table cannot express:
//! `/api/v1/namespaces/NAME` vs `/api/v1/namespaces/NS/PLURAL`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};
use skiff_store::{EventKind, ListOptions};

use crate::delete::DeleteOptions;
use crate::filter::Filter;
use crate::object::{self, with_revision};
use crate::resources::{self, Resource};
use crate::status::{ApiError, ApiResult};
use crate::table;
use crate::write::WriteOptions;
use crate::AppState;

/// Largest request body accepted (upstream's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A parsed resource URL.
#[derive(Debug)]
struct Target {
    resource: &'static Resource,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_target(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let lookup = |plural: &str| resources::find(group, version, plural);
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !(tail.is_empty() && matches!(*plural, "status" | "finalize")) =>
        {
            (Some(ns.to_string()), *plural, tail.first(), tail.get(1))
        }
        [plural, tail @ ..] => (None, *plural, tail.first(), tail.get(1)),
        [] => return None,
    };
    if rest.len() > 5 || (namespace.is_none() && rest.len() > 3) {
        return None;
    }
    let resource = lookup(plural)?;
    if namespace.is_some() && !resource.namespaced {
        return None;
    }
    if let Some(sub) = sub {
        if !resource.subresources.contains(sub) {
            return None;
        }
    }
    Some(Target {
        resource,
        namespace,
        name: name.map(|s| s.to_string()),
        subresource: sub.map(|s| s.to_string()),
    })
}

/// The upstream Forbidden message for a resource request, when `path` is
/// one: `pods "web" is forbidden: User "u" cannot get resource "pods" in
/// API group "" in the namespace "default"`.
pub fn forbidden_message(
    user: &str,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Option<String> {
    let target = parse_target(path)?;
    let q: HashMap<String, String> = query
        .map(|q| url_pairs(q).into_iter().collect())
        .unwrap_or_default();
    let verb = match (method, target.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if is_true(q.get("watch")) => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => return None,
    };
    let r = target.resource;
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", r.plural),
        None => r.plural.to_string(),
    };
    let subject = match &target.name {
        Some(name) => format!("{} \"{name}\"", r.qualified()),
        None => r.qualified(),
    };
    let scope = match &target.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    Some(format!(
        "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{}\" {scope}",
        r.group
    ))
}

fn query(req: &Request) -> HashMap<String, String> {
    req.uri()
        .query()
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default()
}

/// Decodes `a=b&c=d` with percent-decoding.
fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_true(v: Option<&String>) -> bool {
    v.is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

pub(crate) fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

/// The fallback handler: every resource request lands here.
pub async fn dispatch(State(state): State<AppState>, req: Request) -> Response {
    match handle(state, req).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// The body whatever its media type (PATCH names its own).
async fn read_raw_body(req: Request) -> ApiResult<Bytes> {
    let deadline = req
        .extensions()
        .get::<crate::serve::BodyTimeout>()
        .map(|t| t.0);
    let read = axum::body::to_bytes(req.into_body(), MAX_BODY);
    let read = match deadline {
        Some(d) => tokio::time::timeout(d, read)
            .await
            .map_err(|_| ApiError::request_timeout("the request body was not received in time"))?,
        None => read.await,
    };
    read.map_err(|_| ApiError::too_large("Request entity too large: limit is 3145728"))
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
    let Some(target) = parse_target(req.uri().path()) else {
        return Err(ApiError::not_found_path());
    };
    let q = query(&req);
    crate::params::check(&q, req.headers())?;
    let method = req.method().clone();
    let r = target.resource;
    let ns = target.namespace.as_deref();
    let out = Output {
        table: table::wanted(req.headers()).then(|| table::Include::parse(q.get("includeObject"))),
    };
    match (
        method,
        target.name.as_deref(),
        target.subresource.as_deref(),
    ) {
        (Method::GET, Some(name), None | Some("status")) => get(&state, r, ns, name, out).await,
        (Method::GET, None, None) if is_true(q.get("watch")) => watch(&state, r, ns, &q, out).await,
        (Method::GET, None, None) => match list_mode(&q)? {
            ListMode::Any => list_from_cache(&state, r, ns, &q, out, None).await,
            ListMode::Consistent => {
                // Consistent read from the cache once it has caught up with
                // the store; the store itself if it does not in time.
                let current = state.store.current_revision().await?;
                if state.cache(r).wait_for(current, CONSISTENT_WAIT).await {
                    list_from_cache(&state, r, ns, &q, out, Some(current)).await
                } else {
                    list(&state, r, ns, &q, out).await
                }
            }
            ListMode::NotOlderThan(revision) => {
                if state.cache(r).wait_for(revision, CONSISTENT_WAIT).await {
                    list_from_cache(&state, r, ns, &q, out, Some(revision)).await
                } else {
                    Err(ApiError::timeout(format!(
                        "Too large resource version: {revision}, current: {}",
                        state.store.current_revision().await?
                    )))
                }
            }
            ListMode::Exact => list(&state, r, ns, &q, out).await,
        },
        (Method::GET, Some(name), Some("scale")) => crate::scale::get(&state, r, ns, name).await,
        (Method::POST, Some(name), Some("binding")) => {
            let body = read_body(req).await?;
            bind(&state, r, ns, name, &body).await
        }
        (Method::POST, Some(name), Some("eviction")) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            crate::scale::evict(&state, r, ns, name, &body, &opts).await
        }
        (Method::POST, None, None) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            create(&state, r, ns, &body, &opts).await
        }
        (Method::PUT, Some(name), Some("scale")) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            crate::scale::update(&state, r, ns, name, &body, &opts).await
        }
        (Method::PUT, Some(name), sub @ (None | Some("status"))) => {
            let opts = WriteOptions::parse(&q)?;
            let body = read_body(req).await?;
            update(&state, r, ns, name, sub, &body, &opts).await
        }
        (Method::PATCH, Some(name), Some("scale")) => {
            let opts = WriteOptions::parse(&q)?;
            let ct = content_type(req.headers());
            let body = read_raw_body(req).await?;
            crate::scale::patch(&state, r, ns, name, &ct, &body, &opts).await
        }
        (Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
            let opts = WriteOptions::parse(&q)?;
            let ct = content_type(req.headers());
            let body = read_raw_body(req).await?;
            let body = PatchBody {
                content_type: &ct,
                bytes: &body,
            };
            patch(&state, r, ns, name, sub, body, &opts).await
        }
        (Method::DELETE, Some(name), None) => {
            let dry_run = WriteOptions::parse(&q)?.dry_run;
            let body = read_body(req).await?;
            delete(
                &state,
                r,
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
            delete_collection(&state, r, ns, &q, &opts).await
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// Admission: a namespaced object needs its namespace to exist and not be
/// terminating (upstream NamespaceLifecycle).
pub(crate) async fn namespace_admits(
    state: &AppState,
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
    let namespace = match state.cache(ns_resource).get(&key) {
        Some(cached) => cached.object(),
        None => match state.store.get(&key).await {
            Ok(kv) => parse_stored(&kv.value)?,
            Err(skiff_store::Error::NotFound { .. }) => {
                return Err(ApiError::not_found("", "namespaces", ns))
            }
            Err(e) => return Err(e.into()),
        },
    };
    let terminating = namespace.pointer("/status/phase").and_then(Value::as_str)
        == Some("Terminating")
        || namespace.pointer("/metadata/deletionTimestamp").is_some();
    if terminating {
        return Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            r.qualified(),
            name,
        )));
    }
    Ok(())
}

fn parse_stored(value: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(value)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))
}

/// How long a consistent list waits for the watch cache before asking the
/// store instead.
const CONSISTENT_WAIT: Duration = Duration::from_secs(3);

/// Where a list is served from.
enum ListMode {
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

fn list_mode(q: &HashMap<String, String>) -> ApiResult<ListMode> {
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

/// How a read answers: plain objects, or Tables.
#[derive(Debug, Clone, Copy)]
struct Output {
    table: Option<table::Include>,
}

impl Output {
    /// One object (converted to the served version), as itself or a Table.
    fn object(&self, r: &Resource, obj: Value) -> Value {
        let obj = crate::convert::to_served(r, obj);
        match self.table {
            Some(include) => table::table(r.kind, &[&obj], json!({}), include),
            None => obj,
        }
    }

    /// A list response from objects in stored form.
    fn list(&self, r: &Resource, items: Vec<Value>, metadata: Value) -> Value {
        let items: Vec<Value> = items
            .into_iter()
            .map(|o| crate::convert::to_served(r, o))
            .collect();
        match self.table {
            Some(include) => {
                let refs: Vec<&Value> = items.iter().collect();
                table::table(r.kind, &refs, metadata, include)
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

async fn get(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    out: Output,
) -> ApiResult<Response> {
    match state.store.get(&object::key(r, ns, name)).await {
        Ok(kv) => Ok(json_response(
            StatusCode::OK,
            &out.object(r, with_revision(parse_stored(&kv.value)?, kv.mod_revision)),
        )),
        Err(skiff_store::Error::NotFound { .. }) => {
            Err(ApiError::not_found(r.group, r.plural, name))
        }
        Err(e) => Err(e.into()),
    }
}

async fn list(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
) -> ApiResult<Response> {
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
    let filter = Filter::parse(r, q)?;
    let page = state.store.list(&object::prefix(r, ns), opts).await?;
    let mut items = Vec::with_capacity(page.items.len());
    for kv in &page.items {
        let obj = parse_stored(&kv.value)?;
        if filter.matches_object(r, &obj) {
            items.push(with_revision(obj, kv.mod_revision));
        }
    }
    let mut metadata = json!({ "resourceVersion": page.revision.to_string() });
    if let Some(token) = page.continue_token {
        crate::object::set(&mut metadata, "continue", json!(token));
    }
    Ok(json_response(StatusCode::OK, &out.list(r, items, metadata)))
}

/// A write's answer: the object (served form), with any field-validation
/// warnings as `Warning: 299` headers.
pub(crate) fn written(r: &Resource, outcome: crate::write::Outcome) -> Response {
    let mut response = json_response(
        outcome.status,
        &crate::convert::to_served(r, outcome.object),
    );
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

async fn create(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let obj = object::decode(body)?;
    let warnings = crate::write::check_fields(r, body, &obj, opts)?;
    let outcome = crate::write::create(state, r, ns, obj, opts, warnings).await?;
    Ok(written(r, outcome))
}

async fn update(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let obj = object::decode(body)?;
    let warnings = crate::write::check_fields(r, body, &obj, opts)?;
    let mut outcome =
        crate::write::update(state, r, ns, name, subresource, opts, |_| Ok(obj.clone())).await?;
    outcome.warnings = warnings;
    Ok(written(r, outcome))
}

/// The media type of a request body.
fn content_type(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

pub(crate) fn patch_error(e: skiff_api::patch::PatchError) -> ApiError {
    let mut error = match e.status_code() {
        415 => ApiError::unsupported_media_type(&e.to_string(), skiff_api::patch::PATCH_TYPES),
        422 => ApiError::invalid_message(e.to_string()),
        _ => ApiError::bad_request(e.to_string()),
    };
    if e.status_code() == 415 {
        error.message = e.to_string();
    }
    error
}

/// A PATCH request body with its media type.
struct PatchBody<'a> {
    content_type: &'a str,
    bytes: &'a [u8],
}

async fn patch(
    state: &AppState,
    r: &'static Resource,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    patch: PatchBody<'_>,
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let (content_type, body) = (patch.content_type, patch.bytes);
    use skiff_api::patch::{apply_patch, PatchType};
    let Some(patch_type) = PatchType::from_content_type(content_type) else {
        return Err(ApiError::unsupported_media_type(
            content_type,
            skiff_api::patch::PATCH_TYPES,
        ));
    };
    if patch_type == PatchType::Apply {
        return crate::apply::server_side_apply(state, r, ns, name, body, opts).await;
    }
    let mut warnings = Vec::new();
    if patch_type != PatchType::Json && opts.validation != crate::strict::FieldValidation::Ignore {
        // Unknown or duplicate fields in the patch itself.
        if let Ok(patch_obj) = serde_json::from_slice::<Value>(body) {
            let mut typed = patch_obj.clone();
            if typed.is_object() {
                crate::object::set(&mut typed, "apiVersion", json!(r.group_version()));
                crate::object::set(&mut typed, "kind", json!(r.kind));
            }
            warnings = if patch_type == PatchType::StrategicMerge {
                let fields = skiff_api::patch::without_directives(typed);
                let raw = serde_json::to_vec(&fields).unwrap_or_default();
                crate::write::check_fields(r, &raw, &fields, opts)?
            } else {
                crate::write::check_fields(r, body, &typed, opts)?
            };
        }
    }
    let kind = r.kind;
    let mut outcome = crate::write::update(state, r, ns, name, subresource, opts, |current| {
        apply_patch(kind, current, patch_type, body).map_err(patch_error)
    })
    .await?;
    outcome.warnings = warnings;
    Ok(written(r, outcome))
}

async fn delete(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Response> {
    let obj = crate::delete::delete_one(state, r, ns, name, opts).await?;
    Ok(json_response(
        StatusCode::OK,
        &crate::convert::to_served(r, obj),
    ))
}

async fn delete_collection(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    opts: &DeleteOptions,
) -> ApiResult<Response> {
    let filter = Filter::parse(r, q)?;
    let page = state
        .store
        .list(&object::prefix(r, ns), ListOptions::default())
        .await?;
    let mut items = Vec::new();
    for kv in page.items {
        let obj = parse_stored(&kv.value)?;
        if !filter.matches_object(r, &obj) {
            continue;
        }
        let name = object::name_of(&obj).unwrap_or_default().to_string();
        let obj_ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        match crate::delete::delete_one(state, r, obj_ns.as_deref(), &name, opts).await {
            Ok(obj) => items.push(obj),
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

/// POST pods/NAME/binding: sets spec.nodeName once, and PodScheduled.
async fn bind(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let binding = object::decode(body)?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "",
                "Binding",
                name,
                vec![crate::status::Cause {
                    reason: "FieldValueRequired",
                    field: "target.name".into(),
                    message: "Required value".into(),
                }],
            )
        })?
        .to_string();
    let key = object::key(r, ns, name);
    for attempt in 0.. {
        let (mut pod, revision, _) =
            crate::write::current_for_update(state, r, ns, name, attempt).await?;
        // Stored form: no resourceVersion.
        object::meta(&mut pod).remove("resourceVersion");
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(current) = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::conflict_message(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{current}\""
            )));
        }
        let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
            return Err(ApiError::internal(format!("stored pod {name} has no spec")));
        };
        object::set(spec, "nodeName", json!(node));
        let conditions = pod
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
            .unwrap_or_default();
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"))
            .collect();
        conditions.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": object::now(),
        }));
        if !pod.get("status").is_some_and(Value::is_object) {
            crate::object::set(&mut pod, "status", json!({}));
        }
        if let Some(status) = pod.get_mut("status") {
            object::set(status, "conditions", json!(conditions));
        }
        let value = serde_json::to_vec(&pod).map_err(|e| ApiError::internal(e.to_string()))?;
        match state.store.update(&key, value.into(), revision).await {
            Ok(_) => break,
            Err(skiff_store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

fn watch_line(kind: &str, object: &Value) -> Bytes {
    let mut line =
        serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Most bytes of queued watch events sent in one chunk. Kept under the
/// allocator's medium size: larger chunks each took fresh (huge) pages that
/// the kernel had to zero, which cost more CPU than the batching saved.
const MAX_WATCH_BATCH: usize = 64 * 1024;

/// A BOOKMARK event: an object of the kind with only a resourceVersion
/// (and, after the initial events, the initial-events-end annotation).
fn bookmark_line(r: &Resource, revision: i64, initial_end: bool) -> Bytes {
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if initial_end {
        crate::object::set(
            &mut metadata,
            "annotations",
            json!({ "k8s.io/initial-events-end": "true" }),
        );
    }
    watch_line(
        "BOOKMARK",
        &json!({ "kind": r.kind, "apiVersion": r.group_version(), "metadata": metadata }),
    )
}

fn stream_response(body: Body) -> ApiResult<Response> {
    // A streamed body: hyper sends it chunked on HTTP/1.1, as frames on h2.
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// A list served from the watch cache. With `limit`, the first page comes
/// from memory and the continue token points the next pages at the store
/// snapshot of the same revision.
async fn list_from_cache(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
    at_least: Option<i64>,
) -> ApiResult<Response> {
    let filter = Filter::parse(r, q)?;
    let cache = state.cache(r);
    if !cache.wait_for(at_least.unwrap_or(0), CONSISTENT_WAIT).await {
        return Err(ApiError::unavailable("the watch cache is not ready yet"));
    }
    let prefix = object::prefix(r, ns);
    let (revision, mut items) = cache
        .list(&prefix)
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    if !filter.is_everything() {
        items.retain(|item| filter.matches(&item.selectable));
    }
    let limit = q
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0 && at_least.is_some());
    let mut continue_token = None;
    if let Some(limit) = limit {
        if items.len() > limit {
            items.truncate(limit);
            if let Some(last) = items.last() {
                continue_token = Some(skiff_store::encode_continue(&prefix, &last.key, revision));
            }
        }
    }
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if let Some(token) = &continue_token {
        crate::object::set(&mut metadata, "continue", json!(token));
    }
    if out.table.is_some() || crate::convert::needed(r) {
        let objects = items.iter().map(|i| i.object()).collect();
        return Ok(json_response(
            StatusCode::OK,
            &out.list(r, objects, metadata),
        ));
    }
    // The common case: splice the cached JSON, no re-serialization.
    let head = json!({
        "kind": format!("{}List", r.kind),
        "apiVersion": r.group_version(),
        "metadata": metadata,
    });
    let head = serde_json::to_vec(&head).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut body =
        Vec::with_capacity(items.iter().map(|i| i.json.len() + 1).sum::<usize>() + head.len() + 16);
    // The head without its closing brace.
    body.extend_from_slice(head.strip_suffix(b"}").unwrap_or(&head));
    body.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&item.json);
    }
    body.extend_from_slice(b"]}");
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

async fn watch(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    q: &HashMap<String, String>,
    out: Output,
) -> ApiResult<Response> {
    let prefix = object::prefix(r, ns);
    let filter = Filter::parse(r, q)?;
    let plain = out.table.is_none() && !crate::convert::needed(r);
    let resource: &'static Resource =
        resources::find(r.group, r.version, r.plural).ok_or_else(ApiError::not_found_path)?;
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .map(Duration::from_secs)
        .unwrap_or(Duration::from_secs(1800));
    // No resourceVersion (or 0): start with the current state as ADDED.
    let after = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let cache = state.cache(r);
    if !cache.wait_for(0, CONSISTENT_WAIT).await {
        return Err(ApiError::unavailable("the watch cache is not ready yet"));
    }
    let interest: Option<crate::cache::Interest> = (!filter.is_everything()).then(|| {
        let filter = filter.clone();
        Arc::new(move |e: &crate::cache::CachedEvent| {
            filter.matches(&e.item.selectable)
                || e.prev
                    .as_ref()
                    .is_some_and(|p| filter.matches(&p.selectable))
        }) as crate::cache::Interest
    });
    // Streaming lists: the full current state first, whatever the
    // resourceVersion, then the initial-events-end bookmark.
    let send_initial = is_true(q.get("sendInitialEvents"));
    if send_initial {
        let current = state.store.current_revision().await?;
        let target = current.max(after.unwrap_or(0));
        if !cache.wait_for(target, CONSISTENT_WAIT).await {
            return Err(ApiError::unavailable("the watch cache is not ready yet"));
        }
    }
    let after = if send_initial { None } else { after };
    let subscription = match cache.subscribe(&prefix, after, interest, filter.index_key()) {
        Ok(s) => s,
        Err(crate::cache::Error::TooOld { requested, oldest }) => {
            let status =
                ApiError::gone(format!("too old resource version: {requested} ({oldest})"))
                    .status_body();
            return stream_response(Body::from(watch_line("ERROR", &status)));
        }
        Err(e) => return Err(ApiError::unavailable(e.to_string())),
    };
    let after = after.unwrap_or(0);
    let to_line = move |e: crate::cache::CachedEvent| -> Option<Bytes> {
        if e.revision <= after {
            return None;
        }
        let line = |kind: EventKind| {
            // An object leaving the selector is reported as its previous
            // state, at the revision of the change (as upstream does).
            let leaving = kind == EventKind::Deleted && e.kind == EventKind::Modified;
            if plain && !leaving {
                // The common case: the line built once for every watcher.
                return e.item.line(kind);
            }
            let object = match (&e.prev, leaving) {
                (Some(prev), true) => with_revision(prev.object(), e.revision),
                _ => e.item.object(),
            };
            watch_line(crate::cache::kind_name(kind), &out.object(resource, object))
        };
        if filter.is_everything() {
            return Some(line(e.kind));
        }
        // With a selector, an object entering it is ADDED and one leaving
        // it is DELETED, as upstream's cacher reports them.
        let now = filter.matches(&e.item.selectable);
        let before = e
            .prev
            .as_ref()
            .is_some_and(|p| filter.matches(&p.selectable));
        let kind = match (e.kind, before, now) {
            (EventKind::Modified, true, true) => EventKind::Modified,
            (EventKind::Modified, false, true) => EventKind::Added,
            (EventKind::Modified, true, false) => EventKind::Deleted,
            (kind, _, true) if kind != EventKind::Modified => kind,
            _ => return None,
        };
        Some(line(kind))
    };
    let to_line_live = to_line.clone();
    let bookmarks = is_true(q.get("allowWatchBookmarks"));
    let initial_end =
        is_true(q.get("sendInitialEvents")).then(|| bookmark_line(r, subscription.revision, true));
    let initial = futures::stream::iter(
        subscription
            .initial
            .into_iter()
            .filter_map(to_line)
            .chain(initial_end),
    );
    // The live feed, with a BOOKMARK every `bookmark_every` when asked for.
    // A bookmark names the newest revision this stream has fully handled,
    // so resuming from it can never skip an event still queued here.
    let every = state.bookmark_every;
    let ticker =
        bookmarks.then(|| tokio::time::interval_at(tokio::time::Instant::now() + every, every));
    let live_state = (subscription.live, subscription.revision, ticker);
    let cache_for_bookmarks = cache.clone();
    let live = futures::stream::unfold(live_state, move |(mut rx, mut seen, mut ticker)| {
        let to_line = to_line_live.clone();
        let cache_for_bookmarks = cache_for_bookmarks.clone();
        async move {
            loop {
                let event = match ticker.as_mut() {
                    Some(t) => tokio::select! {
                        e = rx.recv() => e,
                        _ = t.tick() => {
                            // Events this watcher did not want never reach
                            // its queue; with the queue empty, everything up
                            // to the cache's revision has been handled.
                            if rx.is_empty() {
                                seen = seen.max(cache_for_bookmarks.revision());
                            }
                            return Some((bookmark_line(resource, seen, false), (rx, seen, ticker)));
                        }
                    },
                    None => rx.recv().await,
                };
                let event = event?;
                seen = seen.max(event.revision);
                let Some(first) = to_line(event) else {
                    continue;
                };
                // Send whatever else is already queued in the same write:
                // under load, one TLS record and syscall carry many events.
                let mut batch: Option<Vec<u8>> = None;
                while let Ok(event) = rx.try_recv() {
                    seen = seen.max(event.revision);
                    if let Some(line) = to_line(event) {
                        batch
                            .get_or_insert_with(|| {
                                // Sized once for what is queued (lines of
                                // one resource are of similar size).
                                let queued = first.len() * (rx.len() + 2);
                                let mut b = Vec::with_capacity(
                                    queued.min(MAX_WATCH_BATCH + 2 * first.len()),
                                );
                                b.extend_from_slice(&first);
                                b
                            })
                            .extend_from_slice(&line);
                        if batch.as_ref().is_some_and(|b| b.len() >= MAX_WATCH_BATCH) {
                            break;
                        }
                    }
                }
                let out = batch.map(Bytes::from).unwrap_or(first);
                return Some((out, (rx, seen, ticker)));
            }
        }
    });
    let lines = initial
        .chain(live)
        .map(Ok::<_, Infallible>)
        .take_until(tokio::time::sleep(timeout));
    stream_response(Body::from_stream(lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let t = parse_target("/api/v1/namespaces/default/pods/web/status").unwrap();
        assert_eq!(
            (
                t.resource.plural,
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("pods", Some("default"), Some("web"), Some("status"))
        );
        let t = parse_target("/api/v1/namespaces/kube-system").unwrap();
        assert_eq!(
            (t.resource.plural, t.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let t = parse_target("/api/v1/namespaces/foo/status").unwrap();
        assert_eq!(
            (
                t.resource.plural,
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("status"))
        );
        let t = parse_target("/apis/apps/v1/deployments").unwrap();
        assert_eq!((t.resource.kind, t.namespace), ("Deployment", None));
        assert!(parse_target("/api/v1/namespaces/default/nodes").is_none());
        assert!(parse_target("/api/v1/widgets").is_none());
    }

    #[test]
    fn decode_query() {
        assert_eq!(percent_decode("metadata.name%3Dweb"), "metadata.name=web");
        assert_eq!(percent_decode("a+b%2"), "a b%2");
    }
}
