//! One request's audit record, from its arrival to its answer, as
//! upstream's `WithAuditInit`, `WithAudit`, `WithFailedAuthenticationAudit`
//! and the authorization filter's annotations build it. The request
//! filters (`crate::serve::filters`) call the steps in order, each with
//! `&mut Option<Record>` (none when auditing is off, so that each step is
//! one branch):
//!
//! 1. [`Auditor::receive`](super::Auditor::receive), before
//!    authentication, notes the audit ID (the client's `Audit-ID` header,
//!    else a new UUID), the URI, source IPs, user agent and arrival time;
//! 2. [`authenticated`] notes the user and the request's attributes, asks
//!    the policy for the level, and writes the RequestReceived event;
//! 3. [`impersonated`] notes the impersonated user;
//! 4. [`authorized`] adds the `authorization.k8s.io/decision` annotation;
//! 5. [`handling`] (Request and RequestResponse levels) copies the body as
//!    the handler reads it (at most [`MAX_OBJECT`]);
//! 6. [`respond`] adds the `Audit-ID` response header and writes
//!    ResponseStarted (long-running requests) and ResponseComplete, with
//!    the Status of a failure, the objects the level asks for, and a
//!    create's name;
//! 7. [`panicked`] ends a record [`respond`] never saw with a Panic event.
//!
//! A long-running request's (watch, exec, attach, port-forward, logs,
//! proxy) ResponseComplete is written when its response body ends. A
//! request the client abandons before the handler answers (its future
//! dropped) gets no ResponseComplete. Bodies are recorded when JSON or
//! protobuf (written as JSON, as upstream) and at most [`MAX_OBJECT`]
//! bytes; nothing here changes a request or answer beyond the copy and
//! the header. Nothing here can fail, so this
//! module has no error type.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::{Body, BodyDataStream, Bytes, HttpBody as _};
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::response::Response;
use chrono::Utc;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::event::{self, Event, ObjectRef, ResponseStatus, UserInfo};
use super::policy::{Decision, Level, Stage, Stages};
use super::Auditor;
use crate::authn::{PeerUser, User};
use crate::authz::Attributes;

/// The largest request or response body recorded as an object
/// (upstream's request body limit).
pub const MAX_OBJECT: usize = crate::response::MAX_BODY;

/// The request and response header carrying the audit ID.
const AUDIT_ID: &str = "audit-id";

/// Subresources whose requests are long-running (kube-apiserver's
/// `BasicLongRunningRequestCheck`, with the verbs `watch` and `proxy`).
const LONG_RUNNING: &[&str] = &["attach", "exec", "proxy", "log", "portforward"];

/// One request's record.
#[derive(Debug)]
pub struct Record {
    auditor: Arc<Auditor>,
    event: Event,
    method: Method,
    /// What the policy said, once the user is known (none: authentication
    /// failed or has not happened yet).
    decision: Option<Decision>,
    /// Credentials the request tried (for a failed authentication's
    /// message): basic, bearer, x509.
    attempted: Vec<&'static str>,
    impersonating: bool,
    long_running: bool,
    /// The request body as the handler read it.
    body: Option<Arc<Mutex<BodyCopy>>>,
}

impl Auditor {
    /// Step 1: a new record for `req`, before authentication.
    pub fn receive(self: &Arc<Self>, req: &Request) -> Record {
        let headers = req.headers();
        let audit_id = headers
            .get(AUDIT_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map_or_else(|| uuid::Uuid::new_v4().to_string(), String::from);
        let uri = req.uri().path_and_query().map_or_else(
            || req.uri().path().to_string(),
            |pq| pq.as_str().to_string(),
        );
        let mut event = Event::new(audit_id, uri, Utc::now());
        let peer = req.extensions().get::<super::PeerAddr>().map(|p| p.0.ip());
        event.source_ips = event::source_ips(headers, peer);
        event.user_agent = headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let mut attempted = Vec::new();
        let scheme = authorization.split(' ').next().unwrap_or_default();
        if scheme.eq_ignore_ascii_case("basic") {
            attempted.push("basic");
        }
        if scheme.eq_ignore_ascii_case("bearer") {
            attempted.push("bearer");
        }
        if req
            .extensions()
            .get::<PeerUser>()
            .is_some_and(|p| p.0.is_some())
        {
            attempted.push("x509");
        }
        Record {
            auditor: self.clone(),
            event,
            method: req.method().clone(),
            decision: None,
            attempted,
            impersonating: headers
                .keys()
                .any(|k| k.as_str().starts_with("impersonate-")),
            long_running: false,
            body: None,
        }
    }
}

/// Step 2: the request passed authentication (a public path may have no
/// user: it is recorded as `system:anonymous`).
pub fn authenticated(audit: &mut Option<Record>, req: &Request) {
    let Some(record) = audit else { return };
    let anonymous;
    let user = match req.extensions().get::<User>() {
        Some(user) => user,
        None => {
            anonymous = User {
                name: "system:anonymous".into(),
                groups: vec!["system:unauthenticated".into()],
            };
            &anonymous
        }
    };
    let attrs = Attributes::of_request(user, req.method(), req.uri().path(), req.uri().query());
    let decision = record.auditor.policy.decide(&attrs);
    record.decision = Some(decision);
    record.event.level = decision.level;
    if decision.level == Level::None {
        return;
    }
    record.event.verb = attrs.verb.clone();
    record.event.user = UserInfo::from(user);
    record.event.object_ref = ObjectRef::of(&attrs);
    record.long_running = attrs.verb == "watch"
        || attrs.verb == "proxy"
        || LONG_RUNNING.contains(&attrs.subresource.as_str());
    record.emit(Stage::RequestReceived);
}

/// Step 3: impersonation passed; the user the request now acts as.
pub fn impersonated(audit: &mut Option<Record>, req: &Request) {
    let Some(record) = audit.as_mut().filter(|r| r.recording()) else {
        return;
    };
    if record.impersonating {
        record.event.impersonated_user = req.extensions().get::<User>().map(UserInfo::from);
    }
}

/// Step 4: the authorizers' decision.
pub fn authorized<T, E>(audit: &mut Option<Record>, result: &Result<T, E>) {
    let Some(record) = audit.as_mut().filter(|r| r.recording()) else {
        return;
    };
    let decision = if result.is_ok() { "allow" } else { "forbid" };
    record
        .event
        .annotations
        .insert(event::DECISION, decision.into());
}

/// Step 5: the request as the handler gets it: for Request and
/// RequestResponse, its body copied as it is read (chunks shared, not
/// copied, up to [`MAX_OBJECT`]).
pub fn handling(audit: &mut Option<Record>, req: Request) -> Request {
    let Some(record) = audit.as_mut().filter(|r| r.recording()) else {
        return req;
    };
    let has_body = matches!(
        record.method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if record.event.level < Level::Request || record.long_running || !has_body {
        return req;
    }
    let copy = Arc::new(Mutex::new(BodyCopy::default()));
    record.body = Some(copy.clone());
    let (parts, body) = req.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        if let Ok(bytes) = &chunk {
            if let Ok(mut copy) = copy.lock() {
                copy.add(bytes);
            }
        }
        chunk
    });
    Request::from_parts(parts, Body::from_stream(body))
}

/// Step 6: the handler's (or a filter's) answer, with the `Audit-ID`
/// header; the record's response events are written (a long-running
/// request's ResponseComplete when its body ends).
pub async fn respond(audit: &mut Option<Record>, response: Response) -> Response {
    match audit.take() {
        None => response,
        Some(record) => record.respond(response).await,
    }
}

/// Step 7: a record still open after the filters and handler ran means
/// they panicked (`response` is the panic guard's 500): a Panic event.
pub async fn panicked(audit: Option<Record>, response: Response) -> Response {
    match audit {
        None => response,
        Some(record) => record.panicked(response).await,
    }
}

/// A body as it went by: its chunks, none once over [`MAX_OBJECT`].
#[derive(Debug, Default)]
struct BodyCopy {
    chunks: Option<Vec<Bytes>>,
    size: usize,
    over: bool,
}

impl BodyCopy {
    fn add(&mut self, bytes: &Bytes) {
        self.size = self.size.saturating_add(bytes.len());
        if self.over || self.size > MAX_OBJECT {
            self.over = true;
            self.chunks = None;
            return;
        }
        self.chunks.get_or_insert_with(Vec::new).push(bytes.clone());
    }

    fn bytes(&self) -> Option<Vec<u8>> {
        (!self.over).then(|| self.chunks.as_deref().unwrap_or_default().concat())
    }
}

impl Record {
    /// Whether the policy asked for this request (known after step 2).
    fn recording(&self) -> bool {
        self.event.level > Level::None && self.decision.is_some()
    }

    fn omits(&self) -> Stages {
        self.decision.map(|d| d.omit_stages).unwrap_or_default()
    }

    /// Writes a copy of the event at `stage`, unless the policy omits it.
    fn emit(&self, stage: Stage) {
        if self.omits().contains(stage) {
            return;
        }
        let mut event = self.event.clone();
        event.stage = stage;
        event.stage_timestamp = Utc::now();
        self.auditor.log.write(event);
    }

    fn set_audit_id(&self, response: &mut Response) {
        if let Ok(value) = HeaderValue::from_str(&self.event.audit_id) {
            response.headers_mut().insert(AUDIT_ID, value);
        }
    }

    /// Decides the level of a request that never passed authentication:
    /// the policy sees no user (upstream's failed-authentication audit).
    fn decide_unauthenticated(&mut self) {
        let nobody = User {
            name: String::new(),
            groups: Vec::new(),
        };
        let (path, query) = match self.event.request_uri.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (self.event.request_uri.clone(), None),
        };
        let attrs = Attributes::of_request(&nobody, &self.method, &path, query.as_deref());
        let decision = self.auditor.policy.decide(&attrs);
        self.decision = Some(decision);
        self.event.level = decision.level;
        self.event.verb = attrs.verb.clone();
        self.event.object_ref = ObjectRef::of(&attrs);
    }

    async fn respond(mut self, mut response: Response) -> Response {
        self.set_audit_id(&mut response);
        let code = response.status().as_u16();
        if self.decision.is_none() {
            // Authentication refused it: one ResponseStarted event with the
            // credentials tried, as upstream's.
            self.decide_unauthenticated();
            if self.recording() {
                let mut status = ResponseStatus::code(code);
                status.message = if self.attempted.is_empty() {
                    "Authentication failed, no credentials provided".into()
                } else {
                    format!(
                        "Authentication failed, attempted: {}",
                        self.attempted.join(", ")
                    )
                };
                self.event.response_status = Some(status);
                self.emit(Stage::ResponseStarted);
            }
            return response;
        }
        if !self.recording() {
            return response;
        }
        self.event.response_status = Some(ResponseStatus::code(code));
        if self.long_running {
            self.emit(Stage::ResponseStarted);
            let pending = self.into_pending(Wants::default());
            return tail(response, pending, false);
        }
        self.record_request_object();
        let wants = Wants {
            status: code >= 400,
            object: self.event.level == Level::RequestResponse,
            name: self.event.verb == "create"
                && code < 300
                && self
                    .event
                    .object_ref
                    .as_ref()
                    .is_some_and(|r| r.name.is_empty()),
        };
        let json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.starts_with("application/json") || ct.starts_with(crate::protobuf::MEDIA_TYPE)
            });
        let pending = self.into_pending(wants);
        if !(json && (wants.status || wants.object || wants.name)) {
            pending.finish(None);
            return response;
        }
        match response.body().size_hint().exact() {
            // The whole answer is in memory (the usual case): read it now.
            Some(size) if size <= MAX_OBJECT as u64 => {
                let (parts, body) = response.into_parts();
                let bytes = axum::body::to_bytes(body, MAX_OBJECT)
                    .await
                    .unwrap_or_default();
                pending.finish(Some(&bytes));
                Response::from_parts(parts, Body::from(bytes))
            }
            // Streamed: copied as it goes by, recorded when it ends.
            None if wants.object => tail(response, pending, true),
            _ => {
                pending.finish(None);
                response
            }
        }
    }

    /// The request body as the handler read it, as `requestObject`; it
    /// completes the object reference (a create's name), as upstream's
    /// `LogRequestObject`.
    fn record_request_object(&mut self) {
        let Some(copy) = self.body.take() else { return };
        let bytes = copy.lock().ok().and_then(|c| c.bytes());
        let Some(mut object) = bytes.as_deref().and_then(event::json_object) else {
            return;
        };
        if let Some(object_ref) = &mut self.event.object_ref {
            object_ref.complete_from(&object);
        }
        if self.decision.is_some_and(|d| d.omit_managed_fields) {
            event::strip_managed_fields(&mut object);
        }
        self.event.request_object = Some(object);
    }

    fn into_pending(self, wants: Wants) -> Pending {
        Pending {
            omit_managed_fields: self.decision.is_some_and(|d| d.omit_managed_fields),
            omit_stages: self.omits(),
            auditor: self.auditor,
            event: self.event,
            wants,
        }
    }

    async fn panicked(mut self, mut response: Response) -> Response {
        self.set_audit_id(&mut response);
        if self.decision.is_none() {
            self.decide_unauthenticated();
        }
        if !self.recording() || self.omits().contains(Stage::Panic) {
            return response;
        }
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, MAX_OBJECT)
            .await
            .unwrap_or_default();
        let status = event::json_object(&bytes);
        self.event.response_status =
            Some(ResponseStatus::of(parts.status.as_u16(), status.as_ref()));
        self.emit(Stage::Panic);
        Response::from_parts(parts, Body::from(bytes))
    }
}

/// What the answer's body is read for.
#[derive(Debug, Clone, Copy, Default)]
struct Wants {
    /// A failure's Status.
    status: bool,
    /// `responseObject` (RequestResponse).
    object: bool,
    /// The name a create's URL did not give.
    name: bool,
}

/// A record whose answer is on its way: ResponseComplete is all that is
/// left.
#[derive(Debug)]
struct Pending {
    auditor: Arc<Auditor>,
    event: Event,
    omit_stages: Stages,
    omit_managed_fields: bool,
    wants: Wants,
}

impl Pending {
    /// Writes ResponseComplete, with what `body` (the whole answer, when
    /// it was read) says.
    fn finish(mut self, body: Option<&[u8]>) {
        if self.omit_stages.contains(Stage::ResponseComplete) {
            return;
        }
        if let Some(mut object) = body.and_then(event::json_object) {
            let code = self.event.response_status.as_ref().map_or(0, |s| s.code);
            self.event.response_status = Some(ResponseStatus::of(code, Some(&object)));
            if self.wants.name {
                if let Some(object_ref) = &mut self.event.object_ref {
                    let meta = |key: &str| {
                        object
                            .pointer(&format!("/metadata/{key}"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    if object_ref.name.is_empty() {
                        object_ref.name = meta("name");
                    }
                    if object_ref.namespace.is_empty() {
                        object_ref.namespace = meta("namespace");
                    }
                }
            }
            if self.wants.object {
                if self.omit_managed_fields {
                    event::strip_managed_fields(&mut object);
                }
                self.event.response_object = Some(object);
            }
        }
        self.event.stage = Stage::ResponseComplete;
        self.event.stage_timestamp = Utc::now();
        self.auditor.log.write(self.event);
    }
}

/// `response` with its body passed through a [`Tail`] that writes the
/// ResponseComplete event when the body ends (or is dropped).
fn tail(response: Response, pending: Pending, copy: bool) -> Response {
    let (parts, body) = response.into_parts();
    let tail = Tail {
        inner: body.into_data_stream(),
        copy: copy.then(BodyCopy::default),
        ended: false,
        pending: Some(pending),
    };
    Response::from_parts(parts, Body::from_stream(tail))
}

/// A response body that records its request's completion when it ends.
struct Tail {
    inner: BodyDataStream,
    copy: Option<BodyCopy>,
    ended: bool,
    pending: Option<Pending>,
}

impl Stream for Tail {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let next = this.inner.poll_next_unpin(cx);
        match &next {
            Poll::Ready(Some(Ok(bytes))) => {
                if let Some(copy) = &mut this.copy {
                    copy.add(bytes);
                }
            }
            Poll::Ready(None) => this.ended = true,
            _ => {}
        }
        next
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            let body = self
                .copy
                .as_ref()
                .filter(|_| self.ended)
                .and_then(BodyCopy::bytes);
            pending.finish(body.as_deref());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use axum::Router;
    use serde_json::json;
    use tower::ServiceExt as _;

    use super::*;
    use crate::audit::{log, Policy};
    use crate::authn::Tokens;
    use crate::authz;
    use crate::serve::filters::{run, Filters};

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*"]
- level: Request
  resources: [{group: "", resources: [configmaps]}]
- level: Metadata
"#;

    /// Filters auditing to `<dir>/audit.log` in front of handlers that
    /// echo a create, panic, and stream a watch.
    fn app(dir: &Path) -> Router {
        let policy_file = dir.join("policy.yaml");
        std::fs::write(&policy_file, POLICY).unwrap();
        let auditor = Auditor::new(
            Policy::load(&policy_file).unwrap(),
            log::Log::open(&log::Options {
                path: dir.join("audit.log"),
                max_size: 0,
                max_backups: 0,
                max_age_days: 0,
            })
            .unwrap(),
        );
        let filters = Arc::new(Filters {
            tokens: Arc::new(Tokens::default()),
            authorizers: Arc::new(vec![Box::new(authz::MastersOnly)]),
            reviews: crate::reviews::Context {
                tokens: Arc::new(Tokens::default()),
                authorizers: Arc::new(Vec::new()),
            },
            audit: Some(Arc::new(auditor)),
            metrics: None,
        });
        async fn echo(body: Bytes) -> Response {
            let mut object: Value = serde_json::from_slice(&body).unwrap();
            object["metadata"]["uid"] = json!("u-1");
            object["metadata"]["managedFields"] = json!([{"manager": "test"}]);
            crate::response::json_response(StatusCode::CREATED, &object)
        }
        #[expect(clippy::panic, reason = "the panic under test")]
        async fn boom() -> &'static str {
            panic!("boom")
        }
        async fn watch() -> Body {
            Body::from_stream(futures::stream::iter([Ok::<_, std::io::Error>(
                Bytes::from_static(b"{\"type\":\"ADDED\"}\n"),
            )]))
        }
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/api/v1/namespaces/{ns}/configmaps", post(echo))
            .route("/api/v1/namespaces/{ns}/pods", post(echo).get(watch))
            .route("/api/v1/panic", get(boom))
            .layer(axum::middleware::from_fn(move |req, next| {
                run(filters.clone(), req, next)
            }))
    }

    fn as_user(
        req: axum::http::request::Builder,
        name: &str,
        groups: &[&str],
    ) -> axum::http::request::Builder {
        req.extension(PeerUser(Some(User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        })))
    }

    fn admin(req: axum::http::request::Builder) -> axum::http::request::Builder {
        as_user(req, "admin", &["system:masters"])
            .extension(super::super::PeerAddr("10.1.2.3:5555".parse().unwrap()))
    }

    async fn send(
        app: &Router,
        req: axum::http::Request<Body>,
    ) -> (StatusCode, Option<String>, Bytes) {
        let resp = app.clone().oneshot(req).await.unwrap();
        let id = resp
            .headers()
            .get(AUDIT_ID)
            .map(|v| v.to_str().unwrap().to_string());
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, id, body)
    }

    /// The log's events once it has `n` (polled: a thread writes them).
    fn events(path: &PathBuf, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if lines.len() >= n {
                return lines;
            }
            assert!(Instant::now() < deadline, "{n} events expected: {text}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[tokio::test]
    async fn each_outcome_is_recorded_as_upstream_records_it() {
        let dir = tempfile::tempdir().unwrap();
        let app = app(dir.path());
        let log = dir.path().join("audit.log");

        // Not audited (level None), but the Audit-ID header still comes back.
        let (status, id, _) =
            send(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
        assert_eq!((status, id.is_some()), (StatusCode::OK, true));

        // Request level: the request object, not the response's; the
        // client's Audit-ID is kept.
        let body = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cm"}});
        let req = admin(Request::post(
            "/api/v1/namespaces/dev/configmaps?fieldManager=x",
        ))
        .header("audit-id", "my-id")
        .header("user-agent", "kubectl/v1.33.0")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
        let (status, id, answer) = send(&app, req).await;
        assert_eq!(
            (status, id.as_deref()),
            (StatusCode::CREATED, Some("my-id"))
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&answer).unwrap()["metadata"]["uid"],
            "u-1"
        );
        let event = events(&log, 1).remove(0);
        assert_eq!(event["kind"], "Event");
        assert_eq!(event["auditID"], "my-id");
        assert_eq!(event["stage"], "ResponseComplete");
        assert_eq!(event["level"], "Request");
        assert_eq!(event["verb"], "create");
        assert_eq!(
            event["requestURI"],
            "/api/v1/namespaces/dev/configmaps?fieldManager=x"
        );
        assert_eq!(
            event["user"],
            json!({"username": "admin", "groups": ["system:masters", "system:authenticated"]})
        );
        assert_eq!(event["sourceIPs"], json!(["10.1.2.3"]));
        assert_eq!(event["userAgent"], "kubectl/v1.33.0");
        assert_eq!(
            event["objectRef"],
            json!({"resource": "configmaps", "namespace": "dev", "name": "cm", "apiVersion": "v1"})
        );
        assert_eq!(
            event["responseStatus"],
            json!({"metadata": {}, "code": 201})
        );
        assert_eq!(event["requestObject"], body);
        assert!(event.get("responseObject").is_none(), "{event}");
        assert_eq!(
            event["annotations"]["authorization.k8s.io/decision"],
            "allow"
        );

        // Metadata level: no objects, but a create's name from the answer.
        let req = admin(Request::post("/api/v1/namespaces/dev/pods"))
            .header("content-type", "application/json")
            .body(Body::from(json!({"metadata": {"name": "p1"}}).to_string()))
            .unwrap();
        assert_eq!(send(&app, req).await.0, StatusCode::CREATED);
        let event = events(&log, 2).remove(1);
        assert_eq!(event["level"], "Metadata");
        assert_eq!(event["objectRef"]["name"], "p1");
        assert!(event.get("requestObject").is_none(), "{event}");
        assert!(
            event.get("objectRef").unwrap().get("uid").is_none(),
            "{event}"
        );

        // Forbidden: the Status's fields and the decision.
        let req = as_user(Request::get("/api/v1/namespaces/dev/secrets"), "bob", &[])
            .body(Body::empty())
            .unwrap();
        assert_eq!(send(&app, req).await.0, StatusCode::FORBIDDEN);
        let event = events(&log, 3).remove(2);
        assert_eq!(event["verb"], "list");
        assert_eq!(event["user"]["username"], "bob");
        assert_eq!(event["responseStatus"]["code"], 403);
        assert_eq!(event["responseStatus"]["status"], "Failure");
        assert_eq!(event["responseStatus"]["reason"], "Forbidden");
        assert!(event["responseStatus"]["message"]
            .as_str()
            .unwrap()
            .contains("User \"bob\" cannot list"));
        assert_eq!(
            event["annotations"]["authorization.k8s.io/decision"],
            "forbid"
        );

        // Impersonation: the admin as jane, who may not.
        let req = admin(Request::get("/api/v1/namespaces/dev/secrets/s"))
            .header("impersonate-user", "jane")
            .body(Body::empty())
            .unwrap();
        assert_eq!(send(&app, req).await.0, StatusCode::FORBIDDEN);
        let event = events(&log, 4).remove(3);
        assert_eq!(event["user"]["username"], "admin");
        assert_eq!(
            event["impersonatedUser"],
            json!({"username": "jane", "groups": ["system:authenticated"]})
        );
        assert_eq!(
            event["annotations"]["authorization.k8s.io/decision"],
            "forbid"
        );

        // No credentials: upstream's failed-authentication event.
        let (status, _, _) = send(
            &app,
            Request::get("/api/v1/pods").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let event = events(&log, 5).remove(4);
        assert_eq!(event["stage"], "ResponseStarted");
        assert_eq!(event["user"], json!({}));
        assert_eq!(
            event["responseStatus"],
            json!({"metadata": {}, "message": "Authentication failed, no credentials provided", "code": 401})
        );
        assert!(event.get("annotations").is_none(), "{event}");

        // A panic.
        let (status, _, _) = send(
            &app,
            admin(Request::get("/api/v1/panic"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        let event = events(&log, 6).remove(5);
        assert_eq!(event["stage"], "Panic");
        assert_eq!(event["responseStatus"]["code"], 500);
        assert!(
            event["responseStatus"]["message"]
                .as_str()
                .unwrap()
                .contains("panicked"),
            "{event}"
        );

        // A watch: ResponseStarted with the headers, ResponseComplete when
        // its body ends.
        let req = admin(Request::get("/api/v1/namespaces/dev/pods?watch=true"))
            .body(Body::empty())
            .unwrap();
        let (status, id, _) = send(&app, req).await;
        assert_eq!(status, StatusCode::OK);
        let events = events(&log, 8);
        let stages: Vec<_> = events[6..]
            .iter()
            .map(|e| (e["stage"].clone(), e["auditID"].clone()))
            .collect();
        let id = json!(id.unwrap());
        assert_eq!(
            stages,
            [
                (json!("ResponseStarted"), id.clone()),
                (json!("ResponseComplete"), id)
            ]
        );
        assert_eq!(events[7]["verb"], "watch");
        assert_eq!(events[7]["responseStatus"]["code"], 200);
    }
}
