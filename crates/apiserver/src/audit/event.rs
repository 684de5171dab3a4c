//! One audit record as upstream writes it: the `audit.k8s.io/v1` `Event`
//! (field names, order and omissions as Go's encoder gives them), and the
//! small readers that fill it from a request and its answer: source IPs,
//! a Status body, an object's metadata. This module owns the shape of an
//! event; it must not decide levels (`super::policy`) or write anything
//! (`super::log`). Nothing here can fail, so it has no error type.

use std::collections::BTreeMap;
use std::net::IpAddr;

use axum::http::HeaderMap;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::policy::{Level, Stage};
use crate::authn::User;
use crate::authz::Attributes;

/// The annotation upstream's authorization filter sets: `allow` or
/// `forbid`. (Its `authorization.k8s.io/reason` needs the authorizers to
/// give reasons, which Skiff's do not yet.)
pub const DECISION: &str = "authorization.k8s.io/decision";

/// An `audit.k8s.io/v1` Event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: Level,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    #[serde(serialize_with = "micro_time")]
    pub request_received_timestamp: DateTime<Utc>,
    #[serde(serialize_with = "micro_time")]
    pub stage_timestamp: DateTime<Utc>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<&'static str, String>,
}

/// Who (upstream's `authentication/v1.UserInfo`; Skiff's users carry no
/// uid or extra).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl From<&User> for UserInfo {
    fn from(user: &User) -> Self {
        UserInfo {
            username: user.name.clone(),
            groups: user.groups.clone(),
        }
    }
}

/// What was acted on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

impl ObjectRef {
    /// A resource request's coordinates; none for a non-resource request.
    pub fn of(attrs: &Attributes<'_>) -> Option<ObjectRef> {
        attrs.resource_request.then(|| ObjectRef {
            resource: attrs.resource.clone(),
            namespace: attrs.namespace.clone(),
            name: attrs.name.clone(),
            api_group: attrs.api_group.clone(),
            api_version: attrs.api_version.clone(),
            subresource: attrs.subresource.clone(),
            ..ObjectRef::default()
        })
    }

    /// Fills what the request's URL did not say from the object's
    /// metadata, as upstream's `LogRequestObject` does (a create's name).
    pub fn complete_from(&mut self, object: &Value) {
        let meta = |key: &str| {
            object
                .pointer(&format!("/metadata/{key}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        for (field, key) in [
            (&mut self.namespace, "namespace"),
            (&mut self.name, "name"),
            (&mut self.uid, "uid"),
            (&mut self.resource_version, "resourceVersion"),
        ] {
            if field.is_empty() {
                *field = meta(key);
            }
        }
    }
}

/// The answer's status (upstream's bounded copy of a `metav1.Status`):
/// always the code; status, message, reason and details when the answer
/// was a Status.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseStatus {
    /// Always `{}`, as Go writes an empty ListMeta.
    pub metadata: Metadata,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub code: u16,
}

/// An empty `metadata: {}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Metadata {}

impl ResponseStatus {
    pub fn code(code: u16) -> Self {
        ResponseStatus {
            code,
            ..ResponseStatus::default()
        }
    }

    /// The status of an answer with `code` and `body`: the Status fields
    /// when the body is a JSON Status.
    pub fn of(code: u16, body: Option<&Value>) -> Self {
        let mut status = ResponseStatus::code(code);
        if let Some(body) = body.filter(|b| b.get("kind").and_then(Value::as_str) == Some("Status"))
        {
            let text = |key: &str| {
                body.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            status.status = text("status");
            status.message = text("message");
            status.reason = text("reason");
            status.details = body.get("details").filter(|d| !d.is_null()).cloned();
        }
        status
    }
}

/// `2006-01-02T15:04:05.000000Z`: Go's `metav1.MicroTime`.
fn micro_time<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&t.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
}

/// Upstream's `utilnet.SourceIPs`: the X-Forwarded-For chain, then
/// X-Real-Ip if not already in it, then the connection's peer unless it
/// is the chain's last address.
pub fn source_ips(headers: &HeaderMap, peer: Option<IpAddr>) -> Vec<String> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let mut ips: Vec<IpAddr> = header("x-forwarded-for")
        .split(',')
        .filter_map(|part| part.trim().parse().ok())
        .collect();
    if let Ok(real) = header("x-real-ip").trim().parse() {
        if !ips.contains(&real) {
            ips.push(real);
        }
    }
    if let Some(peer) = peer {
        if ips.last() != Some(&peer) {
            ips.push(peer);
        }
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// `object` without `metadata.managedFields` (nor its items', for a list),
/// as upstream's `omitManagedFields`.
pub fn strip_managed_fields(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
        }
    }
}

/// A body as the object to record (an object, or a JSON patch's array),
/// written as JSON as upstream writes it: a JSON body as it is, a
/// protobuf one (`k8s\0` envelope) decoded; none for an empty body or
/// anything else (YAML, plain text).
pub fn json_object(body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    if body.starts_with(b"k8s\x00") {
        return crate::protobuf::to_json(body).ok();
    }
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
}

impl Event {
    /// The event's JSON line, newline-terminated.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// A new event for a request received at `received`, level and stage
    /// to be decided.
    pub fn new(audit_id: String, request_uri: String, received: DateTime<Utc>) -> Self {
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: Level::Metadata,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri,
            verb: String::new(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: received,
            stage_timestamp: received,
            annotations: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::Method;
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_event_is_upstreams_json() {
        let received = Utc.with_ymd_and_hms(2026, 12, 5, 13, 27, 7).unwrap()
            + chrono::Duration::microseconds(123_456);
        let alice = User {
            name: "alice".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
        };
        let attrs = Attributes::of_request(
            &alice,
            &Method::POST,
            "/api/v1/namespaces/dev/configmaps",
            None,
        );
        let mut event = Event::new(
            "a1".into(),
            "/api/v1/namespaces/dev/configmaps?fieldManager=kubectl-create".into(),
            received,
        );
        event.level = Level::Request;
        event.stage = Stage::ResponseComplete;
        event.verb = attrs.verb.clone();
        event.user = UserInfo::from(&alice);
        event.source_ips = vec!["127.0.0.1".into()];
        event.user_agent = "kubectl/v1.33.0".into();
        let body = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cm", "managedFields": [{}]}});
        let mut object_ref = ObjectRef::of(&attrs).unwrap();
        object_ref.complete_from(&body);
        event.object_ref = Some(object_ref);
        let mut object = body.clone();
        strip_managed_fields(&mut object);
        event.request_object = Some(object);
        event.response_status = Some(ResponseStatus::code(201));
        event.stage_timestamp = received + chrono::Duration::milliseconds(2);
        event.annotations.insert(DECISION, "allow".into());
        let line = event.to_line();
        assert_eq!(line.last(), Some(&b'\n'));
        let text = String::from_utf8(line).unwrap();
        assert_eq!(
            text.trim_end(),
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a1","#,
                r#""stage":"ResponseComplete","requestURI":"/api/v1/namespaces/dev/configmaps?fieldManager=kubectl-create","#,
                r#""verb":"create","user":{"username":"alice","groups":["devs","system:authenticated"]},"#,
                r#""sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.33.0","#,
                r#""objectRef":{"resource":"configmaps","namespace":"dev","name":"cm","apiVersion":"v1"},"#,
                r#""responseStatus":{"metadata":{},"code":201},"#,
                r#""requestObject":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}},"#,
                r#""requestReceivedTimestamp":"2026-12-05T13:27:07.123456Z","#,
                r#""stageTimestamp":"2026-12-05T13:27:07.125456Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"allow"}}"#
            )
        );
    }

    #[test]
    fn a_failure_keeps_the_status_fields_and_a_failed_login_has_no_user() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\"",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403});
        let got = serde_json::to_value(ResponseStatus::of(403, Some(&status))).unwrap();
        assert_eq!(
            got,
            json!({"metadata": {}, "status": "Failure", "message": status["message"],
                "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
        );
        // Not a Status: the code only.
        let got =
            serde_json::to_value(ResponseStatus::of(200, Some(&json!({"kind": "Pod"})))).unwrap();
        assert_eq!(got, json!({"metadata": {}, "code": 200}));
        assert_eq!(
            serde_json::to_value(UserInfo::default()).unwrap(),
            json!({})
        );
    }

    #[test]
    fn source_ips_follow_upstream() {
        let mut headers = HeaderMap::new();
        let peer = Some("10.0.0.9".parse().unwrap());
        assert_eq!(source_ips(&headers, peer), ["10.0.0.9"]);
        assert!(source_ips(&headers, None).is_empty());
        headers.insert(
            "x-forwarded-for",
            "1.2.3.4, bogus, 10.0.0.9".parse().unwrap(),
        );
        headers.insert("x-real-ip", "1.2.3.4".parse().unwrap());
        assert_eq!(source_ips(&headers, peer), ["1.2.3.4", "10.0.0.9"]);
        headers.insert("x-real-ip", "5.6.7.8".parse().unwrap());
        assert_eq!(
            source_ips(&headers, peer),
            ["1.2.3.4", "10.0.0.9", "5.6.7.8", "10.0.0.9"]
        );
    }

    #[test]
    fn only_json_objects_are_recorded() {
        assert!(json_object(b"").is_none());
        assert!(json_object(b"\x0ak8s\x00").is_none());
        assert!(json_object(b"k8s\x00garbage").is_none());
        assert!(json_object(b"1").is_none());
        assert_eq!(json_object(b"[1]"), Some(json!([1])));
        assert_eq!(json_object(br#"{"a":1}"#), Some(json!({"a": 1})));
    }
}
