//! GET|POST pods/NAME/portforward, as kube-apiserver's PortForwardREST:
//! PodPortForwardOptions from the query (`ports`, repeated or
//! comma-separated, each a 16-bit number: a 400 in the converter's words
//! otherwise), the pod (404), its node (a 400 `pod x does not have a host
//! assigned`) and that node's agent; then the upgrade (none: a 400
//! `Upgrade request required`). A WebSocket tunnelling SPDY
//! (`SPDY/3.1+portforward.k8s.io`, kubectl 1.31+) is spliced to a SPDY
//! upgrade of the agent's `/portForward/NS/POD` here
//! (`streaming::translate::tunnel`); SPDY/3.1 (kubectl before 1.31, and
//! its fallback) and the WebSocket channel protocols (the Python client's
//! `v4.channel.k8s.io`) go to the agent unchanged. Which ports answer,
//! and the error of one that does not, are the agent's.
//!
//! It reads pods and nodes from the store and never writes.

use axum::extract::Request;
use axum::response::Response;

use crate::request::url_pairs;
use crate::resources::Resource;
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
            let port = p.parse::<u16>().map_err(|e| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow => "value out of range",
                    _ => "invalid syntax",
                };
                ApiError::bad_request(format!(
                    "cannot convert to []int32: strconv.ParseUint: parsing {p:?}: {why}"
                ))
            })?;
            ports.push(port);
        }
    }
    Ok(ports)
}

/// GET|POST pods/NAME/portforward.
pub(super) async fn portforward(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    req: Request,
) -> ApiResult<Response> {
    let ports = parse_ports(req.uri().query().unwrap_or(""))?;
    let pod = get_pod(state, r, ns, name).await?;
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
    }
}
