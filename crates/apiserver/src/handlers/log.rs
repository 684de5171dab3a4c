//! GET pods/NAME/log: the container's log, streamed from the node agent
//! that runs the pod, as kube-apiserver's pod log REST (`LogREST` and
//! `LogLocation`): PodLogOptions from the query, validated (a 422 on
//! PodLogOptions); the container from `container=` or the pod's only one
//! (a 400 naming the choices otherwise); no node yet is an empty answer;
//! the node's address from its status (InternalIP, ExternalIP, Hostname,
//! … as kubeadm's `--kubelet-preferred-address-types`) and its
//! `daemonEndpoints.kubeletEndpoint.Port` (10250 when unset).
//!
//! It connects to the agent's `/containerLogs/NS/POD/CONTAINER` over
//! HTTPS with the API server's kubelet-client certificate, without
//! verifying the agent's serving certificate (upstream's default without
//! `--kubelet-certificate-authority`), and passes the body through chunk
//! by chunk (a follow streams). An agent's error answer becomes a Status
//! as upstream's `GenericHttpResponseChecker` words it: a 400 keeps the
//! agent's text (`previous terminated container "c" in pod "web" not
//! found`).
//!
//! It reads pods and nodes from the store and never writes.

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use crate::agents::dial::{
    connect_agent, join_host_port, kubelet_endpoint, unknown, MAX_ERROR_BODY,
};
use crate::agents::Agent;
use crate::catalog::Kind;
use crate::object;
use crate::resources;
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

use super::parse_stored;

/// PodLogOptions as the query carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLogOptions {
    pub container: Option<String>,
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    /// RFC3339, to the second (as upstream passes it on).
    pub since_time: Option<chrono::DateTime<chrono::Utc>>,
    pub tail_lines: Option<i64>,
    pub limit_bytes: Option<i64>,
}

fn parse_int(value: &str) -> ApiResult<i64> {
    value.parse::<i64>().map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!("strconv.ParseInt: parsing {value:?}: {why}"))
    })
}

/// A boolean query parameter as upstream's converter reads one: present
/// and not `0` or `false` is true.
fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name)
        .is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
}

impl PodLogOptions {
    /// From the query; a number or time that does not parse is a 400.
    pub fn parse(q: &HashMap<String, String>) -> ApiResult<Self> {
        let int = |name: &str| q.get(name).map(|v| parse_int(v)).transpose();
        let since_time = q
            .get("sinceTime")
            .map(|v| {
                chrono::DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&chrono::Utc))
                    .map_err(|_| {
                        ApiError::bad_request(format!(
                            "parsing time {v:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse {v:?} as \"2006\""
                        ))
                    })
            })
            .transpose()?;
        Ok(PodLogOptions {
            container: q.get("container").filter(|c| !c.is_empty()).cloned(),
            follow: flag(q, "follow"),
            previous: flag(q, "previous"),
            timestamps: flag(q, "timestamps"),
            since_seconds: int("sinceSeconds")?,
            since_time,
            tail_lines: int("tailLines")?,
            limit_bytes: int("limitBytes")?,
        })
    }

    /// Upstream's ValidatePodLogOptions: a 422 on PodLogOptions `name`.
    pub fn validate(&self, name: &str) -> ApiResult<()> {
        let invalid = |field: &str, value: i64, why: &str| Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
        };
        let mut causes = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            causes.push(invalid(
                "tailLines",
                n,
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            causes.push(invalid("limitBytes", n, "must be greater than 0"));
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => causes.push(Cause {
                reason: "FieldValueForbidden",
                field: String::new(),
                message: "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
                    .into(),
            }),
            (Some(n), None) if n < 1 => {
                causes.push(invalid("sinceSeconds", n, "must be greater than 0"))
            }
            _ => {}
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid("", "PodLogOptions", name, causes))
        }
    }

    /// The agent's query, in the order Go's `url.Values.Encode` writes.
    pub fn kubelet_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if self.follow {
            pairs.push(("follow", "true".into()));
        }
        if let Some(n) = self.limit_bytes {
            pairs.push(("limitBytes", n.to_string()));
        }
        if self.previous {
            pairs.push(("previous", "true".into()));
        }
        if let Some(n) = self.since_seconds {
            pairs.push(("sinceSeconds", n.to_string()));
        }
        if let Some(t) = self.since_time {
            pairs.push((
                "sinceTime",
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            ));
        }
        if let Some(n) = self.tail_lines {
            pairs.push(("tailLines", n.to_string()));
        }
        if self.timestamps {
            pairs.push(("timestamps", "true".into()));
        }
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={}", encode(&v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn names<'a>(pod: &'a Value, list: &str) -> impl Iterator<Item = &'a str> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
}

/// The container whose log is asked for, as upstream's validateContainer
/// picks it.
pub fn choose_container(pod: &Value, requested: Option<&str>, name: &str) -> ApiResult<String> {
    // Upstream's VisitContainers order: init, regular, ephemeral.
    let all: Vec<&str> = names(pod, "initContainers")
        .chain(names(pod, "containers"))
        .chain(names(pod, "ephemeralContainers"))
        .collect();
    if let Some(requested) = requested.filter(|c| !c.is_empty()) {
        return if all.contains(&requested) {
            Ok(requested.to_string())
        } else {
            Err(ApiError::bad_request(format!(
                "container {requested} is not valid for pod {name}"
            )))
        };
    }
    let regular: Vec<&str> = names(pod, "containers").collect();
    match regular.as_slice() {
        [only] => Ok(only.to_string()),
        [] => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}"
        ))),
        _ => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            all.join(" ")
        ))),
    }
}

/// An agent's error answer as upstream's GenericHttpResponseChecker
/// turns it into a Status for `pods/log` `name`.
pub fn kubelet_error(code: StatusCode, body: &str, name: &str) -> ApiError {
    match code.as_u16() {
        400 => return ApiError::bad_request(body),
        500 => {
            let mut e = ApiError::internal(format!("Internal error occurred: {body}"));
            e.details = Some(json!({"causes": [{"message": body}]}));
            return e;
        }
        _ => {}
    }
    let (reason, message) = match code.as_u16() {
        404 => ("NotFound", "the server could not find the requested resource".to_string()),
        401 => (
            "Unauthorized",
            "the server has asked for the client to provide credentials".to_string(),
        ),
        403 => ("Forbidden", body.to_string()),
        405 => (
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".to_string(),
        ),
        409 => ("Conflict", "the server reported a conflict".to_string()),
        422 => (
            "Invalid",
            "the server rejected our request due to an error in our request".to_string(),
        ),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later"
                .to_string(),
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request"
                .to_string(),
        ),
        c if c >= 500 => (
            "InternalError",
            format!("an error on the server ({body:?}) has prevented the request from succeeding"),
        ),
        c => (
            "",
            format!("the server responded with the status code {c} but did not return more information"),
        ),
    };
    ApiError {
        code,
        reason,
        // The verb is empty in upstream's call, hence `( pods/log NAME)`.
        message: format!("{message} ( pods/log {name})"),
        details: Some(json!({"name": name, "kind": "pods/log"})),
        causes: Vec::new(),
    }
}

/// Aborts the agent connection's task when the proxied body is dropped
/// (the client went away), which closes the connection and so ends the
/// agent's follow.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// GETs `path` from the agent at `host:port`.
async fn get_from_agent(
    agent: &Agent,
    path: &str,
) -> Result<(Response<hyper::body::Incoming>, AbortOnDrop), String> {
    let host_port = join_host_port(&agent.host, agent.port);
    let stream = connect_agent(agent).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let task = tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "node agent connection ended with an error");
        }
    });
    let guard = AbortOnDrop(task.abort_handle());
    let request = Request::get(path)
        .header(header::HOST, &host_port)
        .header(header::USER_AGENT, "skiff-apiserver")
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    Ok((response, guard))
}

/// Up to [`MAX_ERROR_BODY`] bytes of an error answer.
async fn error_text(body: hyper::body::Incoming) -> String {
    let mut stream = Body::new(body).into_data_stream();
    let mut out: Vec<u8> = Vec::new();
    while out.len() < MAX_ERROR_BODY {
        match stream.next().await {
            Some(Ok(chunk)) => out.extend_from_slice(&chunk),
            _ => break,
        }
    }
    out.truncate(MAX_ERROR_BODY);
    String::from_utf8_lossy(&out).into_owned()
}

fn plain(status: StatusCode, body: Body) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

/// The agent of node `node_name`: the client TLS for it, its host and
/// port (upstream's `GetConnectionInfo`: a missing node is its 404).
pub(crate) async fn node_agent(state: &AppState, node_name: &str) -> ApiResult<Agent> {
    let nodes = resources::find_builtin("", "v1", "nodes")
        .ok_or_else(|| ApiError::internal("nodes are not served"))?;
    let node = match state.store.get(&object::key(nodes, None, node_name)).await {
        Ok(kv) => parse_stored(&kv.value)?,
        Err(skiff_store::Error::NotFound { .. }) => {
            return Err(ApiError::not_found(nodes.group, nodes.plural, node_name))
        }
        Err(e) => return Err(e.into()),
    };
    let (host, port) = kubelet_endpoint(&node)?;
    let tls = state
        .kubelet_tls
        .clone()
        .ok_or_else(|| ApiError::unavailable("no client credentials for node agents"))?;
    Ok(Agent {
        tls,
        host,
        port,
        local: state.local_agents.get(node_name),
    })
}

/// GET pods/NAME/log.
pub(super) async fn log(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    q: &HashMap<String, String>,
) -> ApiResult<Response> {
    let r = kind.resource;
    let opts = PodLogOptions::parse(q)?;
    opts.validate(name)?;
    let pod = match state.store.get(&object::key(r, ns, name)).await {
        Ok(kv) => parse_stored(&kv.value)?,
        Err(skiff_store::Error::NotFound { .. }) => {
            return Err(ApiError::not_found(r.group, r.plural, name))
        }
        Err(e) => return Err(e.into()),
    };
    let container = choose_container(&pod, opts.container.as_deref(), name)?;
    let Some(node_name) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        // Not scheduled yet: upstream answers with nothing.
        return Ok(plain(StatusCode::OK, Body::empty()));
    };
    let agent = node_agent(state, node_name).await?;
    let namespace = ns.unwrap_or("default");
    let query = opts.kubelet_query();
    let mut path = format!(
        "/containerLogs/{}/{}/{}",
        encode(namespace),
        encode(name),
        encode(&container)
    );
    if !query.is_empty() {
        path = format!("{path}?{query}");
    }
    let (response, guard) = get_from_agent(&agent, &path).await.map_err(|e| {
        unknown(format!(
            "Get \"https://{}{path}\": {e}",
            join_host_port(&agent.host, agent.port)
        ))
    })?;
    let (parts, body) = response.into_parts();
    if !(200..=206).contains(&parts.status.as_u16()) {
        let text = error_text(body).await;
        return Err(kubelet_error(parts.status, &text, name));
    }
    // The guard lives as long as the body does.
    let stream = Body::new(body).into_data_stream().map(move |chunk| {
        let _connection = &guard;
        chunk
    });
    Ok(plain(StatusCode::OK, Body::from_stream(stream)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn options_parse_validate_and_pass_on() {
        let o = PodLogOptions::parse(&q(&[
            ("container", "app"),
            ("follow", "true"),
            ("previous", "false"),
            ("timestamps", ""),
            ("tailLines", "3"),
            ("limitBytes", "100"),
            ("sinceTime", "2024-01-01T10:00:00.5+02:00"),
        ]))
        .unwrap();
        assert_eq!(o.container.as_deref(), Some("app"));
        assert!(o.follow && !o.previous && o.timestamps);
        assert!(o.validate("web").is_ok());
        assert_eq!(
            o.kubelet_query(),
            "follow=true&limitBytes=100&sinceTime=2024-01-01T08%3A00%3A00Z&tailLines=3&timestamps=true"
        );
        assert_eq!(PodLogOptions::default().kubelet_query(), "");

        let e = PodLogOptions::parse(&q(&[("tailLines", "x")])).unwrap_err();
        assert_eq!(e.code, StatusCode::BAD_REQUEST);
        assert_eq!(e.message, "strconv.ParseInt: parsing \"x\": invalid syntax");
        assert_eq!(
            PodLogOptions::parse(&q(&[("sinceTime", "soon")]))
                .unwrap_err()
                .code,
            StatusCode::BAD_REQUEST
        );

        let invalid = |pairs: &[(&str, &str)]| {
            PodLogOptions::parse(&q(pairs))
                .unwrap()
                .validate("web")
                .unwrap_err()
        };
        let e = invalid(&[("tailLines", "-1")]);
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            invalid(&[("limitBytes", "0")]).message,
            "PodLogOptions \"web\" is invalid: limitBytes: Invalid value: 0: must be greater than 0"
        );
        assert_eq!(
            invalid(&[("sinceSeconds", "-5")]).message,
            "PodLogOptions \"web\" is invalid: sinceSeconds: Invalid value: -5: must be greater than 0"
        );
        assert_eq!(
            invalid(&[("sinceSeconds", "5"), ("sinceTime", "2024-01-01T00:00:00Z")]).message,
            "PodLogOptions \"web\" is invalid: : Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"
        );
    }

    #[test]
    fn containers_are_chosen_as_upstream() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(choose_container(&one, None, "web").unwrap(), "app");
        assert_eq!(choose_container(&one, Some(""), "web").unwrap(), "app");
        let e = choose_container(&one, Some("db"), "web").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "container db is not valid for pod web"
            )
        );
        let many = json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b"}],
            "ephemeralContainers": [{"name": "debug"}],
        }});
        assert_eq!(
            choose_container(&many, None, "web").unwrap_err().message,
            "a container name must be specified for pod web, choose one of: [init a b debug]"
        );
        assert_eq!(
            choose_container(&many, Some("init"), "web").unwrap(),
            "init"
        );
        assert_eq!(
            choose_container(&many, Some("debug"), "web").unwrap(),
            "debug"
        );
        assert_eq!(
            choose_container(&json!({"spec": {}}), None, "web")
                .unwrap_err()
                .message,
            "a container name must be specified for pod web"
        );
    }

    #[test]
    fn the_agent_is_found_from_the_node_status() {
        let node = json!({"status": {
            "addresses": [
                {"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.0.0.7"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 12345}},
        }});
        assert_eq!(
            kubelet_endpoint(&node).unwrap(),
            ("10.0.0.7".to_string(), 12345)
        );
        let node = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(
            kubelet_endpoint(&node).unwrap(),
            ("n1".to_string(), crate::agents::dial::DEFAULT_KUBELET_PORT)
        );
        let e = kubelet_endpoint(&json!({"status": {"addresses": []}})).unwrap_err();
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "",
                "no preferred addresses found; known addresses: []"
            )
        );
        assert_eq!(join_host_port("::1", 1), "[::1]:1");
    }

    #[test]
    fn agent_errors_become_upstream_statuses() {
        let e = kubelet_error(
            StatusCode::BAD_REQUEST,
            "previous terminated container \"c\" in pod \"web\" not found",
            "web",
        );
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "previous terminated container \"c\" in pod \"web\" not found"
            )
        );
        let e = kubelet_error(StatusCode::NOT_FOUND, "pod \"web\" does not exist", "web");
        assert_eq!(
            (e.reason, e.message.as_str()),
            (
                "NotFound",
                "the server could not find the requested resource ( pods/log web)"
            )
        );
        let e = kubelet_error(StatusCode::INTERNAL_SERVER_ERROR, "boom", "web");
        assert_eq!(e.message, "Internal error occurred: boom");
        let e = kubelet_error(StatusCode::BAD_GATEWAY, "boom", "web");
        assert_eq!(
            e.message,
            "an error on the server (\"boom\") has prevented the request from succeeding ( pods/log web)"
        );
        let e = kubelet_error(StatusCode::IM_A_TEAPOT, "", "web");
        assert_eq!(e.reason, "");
    }
}
