//! GET|POST pods/NAME/exec and pods/NAME/attach, as kube-apiserver's
//! ExecREST and AttachREST: PodExecOptions / PodAttachOptions from the
//! query (`command` repeated, `container`, `stdin`, `stdout`, `stderr`,
//! `tty`, booleans as upstream's converter reads them), then
//! `streamLocation`: the pod (404 `pods "x" not found`), its container
//! (`validateContainer`: the only one, else a 400 naming the choices;
//! a wrong name a 400), its node (a 400 `pod x does not have a host
//! assigned` when it has none) and that node's agent (a 400 when the
//! agent's URL, escaped as Go's `url.Values` writes it, would be longer
//! than a URL may be: `proxy::check_agent_target`). Only then is the
//! connection upgraded (a request that is no upgrade is a 400 `Upgrade
//! request required`): a WebSocket offering `v5.channel.k8s.io` is
//! translated to SPDY here (`streaming::translate`), SPDY/3.1 and the
//! older WebSocket channel protocols go to the agent's
//! `/exec|attach/NS/POD/CONTAINER` unchanged (`streaming::proxy`), and
//! whatever the agent says about the container (`container not found`)
//! reaches the client in the agent's words.
//!
//! Authorization ran before (`pods/exec` with verb get for GET, create
//! for POST, as upstream's RequestInfo). The container is not defaulted
//! from `kubectl.kubernetes.io/default-container` here: kubectl reads that
//! annotation and sends `container=`, and the API server does not (its
//! `validateContainer` knows no annotation).
//!
//! It reads pods and nodes from the store and never writes.

use axum::extract::Request;
use axum::response::Response;
use serde_json::Value;

use crate::catalog::Kind;
use crate::object;
use crate::request::url_pairs;
use crate::status::{ApiError, ApiResult};
use crate::streaming::proxy::{self, Agent};
use crate::streaming::translate::{self, Streams};
use crate::streaming::websocket;
use crate::AppState;

use super::log::{choose_container, encode, node_agent};
use super::parse_stored;

/// PodExecOptions (and PodAttachOptions, which have no command) as the
/// query carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    pub container: Option<String>,
    pub command: Vec<String>,
    pub streams: Streams,
}

/// A boolean as upstream's `Convert_Slice_string_To_bool` reads the
/// first value: present and not `0` or `false` is true.
fn flag(values: &[&str]) -> bool {
    values
        .first()
        .is_some_and(|v| !(*v == "0" || v.eq_ignore_ascii_case("false")))
}

impl ExecOptions {
    /// From the raw query (`command` may repeat).
    pub fn parse(query: &str) -> Self {
        let pairs = url_pairs(query);
        let values = |name: &str| -> Vec<&str> {
            pairs
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        ExecOptions {
            container: values("container")
                .first()
                .filter(|c| !c.is_empty())
                .map(|c| c.to_string()),
            command: values("command").into_iter().map(str::to_string).collect(),
            streams: Streams {
                stdin: flag(&values("stdin")),
                stdout: flag(&values("stdout")),
                stderr: flag(&values("stderr")),
                tty: flag(&values("tty")),
            },
        }
    }

    /// The agent's query, as upstream's streamParams builds it and Go's
    /// `url.Values.Encode` writes it (keys sorted, commands in order).
    pub fn agent_query(&self, with_command: bool) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if with_command {
            pairs.extend(self.command.iter().map(|c| ("command", c.as_str())));
        }
        let s = self.streams;
        for (name, on) in [
            ("stderr", s.stderr),
            ("stdin", s.stdin),
            ("stdout", s.stdout),
            ("tty", s.tty),
        ] {
            if on {
                pairs.push((name, "1"));
            }
        }
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// The pod `name`, or its 404.
pub(super) async fn get_pod(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<Value> {
    let r = kind.resource;
    match state.store.get(&object::key(r, ns, name)).await {
        Ok(kv) => parse_stored(&kv.value),
        Err(skiff_store::Error::NotFound { .. }) => {
            Err(ApiError::not_found(r.group, r.plural, name))
        }
        Err(e) => Err(e.into()),
    }
}

/// The agent of the node the pod is on (a 400 when it is on none yet).
pub(super) async fn pod_agent(state: &AppState, pod: &Value, name: &str) -> ApiResult<Agent> {
    let Some(node_name) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    else {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    };
    node_agent(state, node_name).await
}

/// GET|POST pods/NAME/exec (`sub` "exec") or pods/NAME/attach.
pub(super) async fn exec(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    sub: &str,
    req: Request,
) -> ApiResult<Response> {
    let opts = ExecOptions::parse(req.uri().query().unwrap_or(""));
    let pod = get_pod(state, kind, ns, name).await?;
    let container = choose_container(&pod, opts.container.as_deref(), name)?;
    let agent = pod_agent(state, &pod, name).await?;
    let mut path = format!(
        "/{sub}/{}/{}/{}",
        encode(ns.unwrap_or("default")),
        encode(name),
        encode(&container)
    );
    let query = opts.agent_query(sub == "exec");
    if !query.is_empty() {
        path = format!("{path}?{query}");
    }
    proxy::check_agent_target(&path)?;
    if !proxy::is_upgrade(req.headers()) {
        return Err(proxy::upgrade_required());
    }
    if websocket::offers_v5(req.headers()) {
        return translate::remote_command(agent, path, opts.streams, req);
    }
    proxy::pass_through(&agent, &path, req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_pass_on_as_upstream() {
        // kubectl exec -i p -- sh -c 'exit 3'
        let o = ExecOptions::parse(
            "command=sh&command=-c&command=exit%203&container=app&stdin=true&stdout=true&stderr=true",
        );
        assert_eq!(o.command, ["sh", "-c", "exit 3"]);
        assert_eq!(o.container.as_deref(), Some("app"));
        assert_eq!(
            o.streams,
            Streams {
                stdin: true,
                stdout: true,
                stderr: true,
                tty: false
            }
        );
        assert_eq!(
            o.agent_query(true),
            "command=sh&command=-c&command=exit%203&stderr=1&stdin=1&stdout=1"
        );
        assert_eq!(o.agent_query(false), "stderr=1&stdin=1&stdout=1");
        let o = ExecOptions::parse("stdout=1&stderr=false&tty=0&stdin=False&container=");
        assert_eq!(o.container, None);
        assert_eq!(
            o.streams,
            Streams {
                stdout: true,
                ..Streams::default()
            }
        );
        assert_eq!(ExecOptions::parse("").agent_query(true), "");
    }
}
