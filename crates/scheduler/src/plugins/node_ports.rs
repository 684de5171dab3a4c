//! NodePorts: a pod's host ports must be free on the node.

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    host_ports, CycleState, FilterPlugin, NodeInfo, Plugin, PreFilterPlugin, PreFilterResult,
    Snapshot, Status,
};

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't have free ports for the requested pod ports";

const PRE_FILTER_KEY: &str = "PreFilterNodePorts";

/// (host IP, protocol, host port) the pod wants.
type WantedPorts = Vec<(Option<String>, Option<String>, i32)>;

/// The NodePorts plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodePorts;

impl Plugin for NodePorts {
    fn name(&self) -> &'static str {
        names::NODE_PORTS
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for NodePorts {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        _snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let wanted: WantedPorts = host_ports(pod)
            .into_iter()
            .map(|p| {
                (
                    p.host_ip.clone(),
                    p.protocol.clone(),
                    p.host_port.unwrap_or(0),
                )
            })
            .collect();
        if wanted.is_empty() {
            return Ok(PreFilterResult::Skip);
        }
        state.write(PRE_FILTER_KEY, wanted);
        Ok(PreFilterResult::AllNodes)
    }
}

impl FilterPlugin for NodePorts {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let wanted: &WantedPorts = match state.require(PRE_FILTER_KEY) {
            Ok(w) => w,
            Err(s) => return s,
        };
        let used = node.used_ports();
        if wanted
            .iter()
            .any(|(ip, proto, port)| used.conflicts(ip.as_deref(), proto.as_deref(), *port))
        {
            Status::unschedulable(ERR_REASON)
        } else {
            Status::success()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use skiff_client::testing::{node, pod};

    #[test]
    fn filter() {
        let mut n = NodeInfo::new(node("n1").build());
        n.add_pod(pod("web").host_port(80).build());
        n.add_pod(pod("dns").host_port_on(53, "UDP", "10.0.0.1").build());
        let cases = [
            ("free port", pod("p").host_port(8080).build(), Code::Success),
            (
                "taken port",
                pod("p").host_port(80).build(),
                Code::Unschedulable,
            ),
            (
                "other protocol",
                pod("p").host_port_on(80, "UDP", "").build(),
                Code::Success,
            ),
            (
                "wildcard vs specific",
                pod("p").host_port_on(53, "UDP", "").build(),
                Code::Unschedulable,
            ),
            (
                "other ip",
                pod("p").host_port_on(53, "UDP", "10.0.0.2").build(),
                Code::Success,
            ),
            ("no host ports", pod("p").build(), Code::Success),
        ];
        for (name, p, want) in cases {
            let mut state = CycleState::new();
            match NodePorts.pre_filter(&mut state, &p, &Snapshot::default()) {
                Ok(PreFilterResult::Skip) => {
                    assert_eq!(want, Code::Success, "{name}");
                    continue;
                }
                other => assert_eq!(other, Ok(PreFilterResult::AllNodes), "{name}"),
            }
            let s = NodePorts.filter(&state, &p, &n);
            assert_eq!(s.code, want, "{name}");
            if want != Code::Success {
                assert_eq!(s.reasons, vec![ERR_REASON]);
            }
        }
    }
}
