//! GET|POST pods/NAME/portforward, as kube-apiserver's PortForwardREST:
//! PodPortForwardOptions from the query (`ports`, repeated or
//! comma-separated, each a 16-bit number as Go's `ParseUint` reads it: a
//! 400 in the converter's words otherwise), the pod (404), its node (a 400
//! `pod x does not have a host assigned`) and that node's agent (a 400 if
//! its URL would be too long to send, as `ports=1,1,…` can make it); then
//! the upgrade (none: a 400 `Upgrade request required`). A WebSocket
//! tunnelling SPDY (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+) is
//! spliced to a SPDY upgrade of the agent's `/portForward/NS/POD` here
//! (`streaming::translate::tunnel`); SPDY/3.1 (kubectl before 1.31, and
//! its fallback) and the WebSocket channel protocols (the Python client's
//! `v4.channel.k8s.io`) go to the agent unchanged. Which ports answer,
//! and the error of one that does not, are the agent's.
//!
//! It reads pods and nodes from the store and never writes.

use axum::extract::Request;
use axum::response::Response;

use crate::catalog::Kind;
use crate::request::url_pairs;
use crate::status::{ApiError, ApiResult};
use crate::streaming::{proxy, translate, websocket};
use crate::AppState;

use super::exec::{get_pod, pod_agent};
use super::log::encode;

/// The ports of a port-forward request.
pub fn parse_ports(query: &str) -> ApiResult<Vec<u16>> {
    let mut ports = Vec::new();
    for (k, v) in url_pairs(query) {
        if k != "ports" {
            continue;
        }
        for p in v.split(',') {
            let refuse = |why: &str| {
                ApiError::bad_request(format!(
                    "cannot convert to []int32: strconv.ParseUint: parsing {p:?}: {why}"
                ))
            };
            // Go's ParseUint takes digits only (Rust's parse also takes a
            // leading `+`).
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(refuse("invalid syntax"));
            }
            ports.push(p.parse::<u16>().map_err(|_| refuse("value out of range"))?);
        }
    }
    Ok(ports)
}

/// GET|POST pods/NAME/portforward.
pub(super) async fn portforward(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    req: Request,
) -> ApiResult<Response> {
    let ports = parse_ports(req.uri().query().unwrap_or(""))?;
    let pod = get_pod(state, kind, ns, name).await?;
    let agent = pod_agent(state, &pod, name).await?;
    let mut path = format!(
        "/portForward/{}/{}",
        encode(ns.unwrap_or("default")),
        encode(name)
    );
    if !ports.is_empty() {
        let list: Vec<String> = ports.iter().map(u16::to_string).collect();
        // Upstream's streamParams names it `port` (api.PortHeader).
        path = format!("{path}?port={}", encode(&list.join(",")));
    }
    proxy::check_agent_target(&path)?;
    if !proxy::is_upgrade(req.headers()) {
        return Err(proxy::upgrade_required());
    }
    let tunnelled = websocket::tunnelled_spdy_protocols(req.headers());
    if !tunnelled.is_empty() {
        return translate::tunnel(&agent, &path, &tunnelled, req).await;
    }
    proxy::pass_through(&agent, &path, req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_parse_as_upstream() {
        assert_eq!(
            parse_ports("ports=80%2C1234&ports=8080").unwrap(),
            [80, 1234, 8080]
        );
        assert_eq!(parse_ports("").unwrap(), Vec::<u16>::new());
        let e = parse_ports("ports=http").unwrap_err();
        assert_eq!(
            e.message,
            "cannot convert to []int32: strconv.ParseUint: parsing \"http\": invalid syntax"
        );
        assert_eq!(
            parse_ports("ports=70000").unwrap_err().message,
            "cannot convert to []int32: strconv.ParseUint: parsing \"70000\": value out of range"
        );
        for (query, shown, why) in [
            ("ports=99999", "99999", "value out of range"),
            (
                "ports=99999999999999999999999",
                "99999999999999999999999",
                "value out of range",
            ),
            ("ports=-1", "-1", "invalid syntax"),
            ("ports=%2B80", "+80", "invalid syntax"),
            ("ports=", "", "invalid syntax"),
            ("ports=80,", "", "invalid syntax"),
            ("ports=%ff", "\u{fffd}", "invalid syntax"),
            ("ports=8%200", "8 0", "invalid syntax"),
        ] {
            assert_eq!(
                parse_ports(query).unwrap_err().message,
                format!("cannot convert to []int32: strconv.ParseUint: parsing \"{shown}\": {why}"),
                "{query}"
            );
        }
        // Port 0 converts (upstream leaves it to the kubelet).
        assert_eq!(parse_ports("ports=0&ports=65535").unwrap(), [0, 65535]);
    }
}
