//! NodeName: a pod with `spec.nodeName` fits only that node.

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{CycleState, FilterPlugin, NodeInfo, Plugin, Status};

/// Upstream `ErrReason`.
pub const ERR_REASON: &str = "node(s) didn't match the requested node name";

/// The NodeName filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeName;

impl Plugin for NodeName {
    fn name(&self) -> &'static str {
        names::NODE_NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeName {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        match pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            Some(wanted) if !wanted.is_empty() && wanted != node.name() => {
                Status::unresolvable(ERR_REASON)
            }
            _ => Status::success(),
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
        let n = NodeInfo::new(node("n1").build());
        let cases = [
            ("no node name", pod("p").build(), Code::Success),
            ("same node", pod("p").node_name("n1").build(), Code::Success),
            (
                "other node",
                pod("p").node_name("n2").build(),
                Code::UnschedulableAndUnresolvable,
            ),
        ];
        for (name, p, want) in cases {
            assert_eq!(
                NodeName.filter(&CycleState::new(), &p, &n).code,
                want,
                "{name}"
            );
        }
    }
}
