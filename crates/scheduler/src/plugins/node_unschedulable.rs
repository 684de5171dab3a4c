//! NodeUnschedulable: cordoned nodes take no new pods unless the pod
//! tolerates `node.kubernetes.io/unschedulable:NoSchedule`.

use k8s_openapi::api::core::v1::{Pod, Taint};

use super::{names, taint_toleration};
use crate::framework::{CycleState, FilterPlugin, NodeInfo, Plugin, Status};

/// Upstream `ErrReasonUnschedulable`.
pub const ERR_REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// The NodeUnschedulable filter.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeUnschedulable;

impl Plugin for NodeUnschedulable {
    fn name(&self) -> &'static str {
        names::NODE_UNSCHEDULABLE
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl FilterPlugin for NodeUnschedulable {
    fn filter(&self, _state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status {
        if !node.unschedulable() {
            return Status::success();
        }
        let taint = Taint {
            key: "node.kubernetes.io/unschedulable".to_string(),
            effect: "NoSchedule".to_string(),
            ..Default::default()
        };
        if taint_toleration::pod_tolerations(pod)
            .iter()
            .any(|t| taint_toleration::tolerates(t, &taint))
        {
            return Status::success();
        }
        Status::unresolvable(ERR_REASON_UNSCHEDULABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use skiff_client::testing::{node, pod};

    #[test]
    fn filter() {
        let cases = [
            (
                "schedulable",
                pod("p").build(),
                node("n").build(),
                Code::Success,
            ),
            (
                "cordoned",
                pod("p").build(),
                node("n").unschedulable().build(),
                Code::UnschedulableAndUnresolvable,
            ),
            (
                "tolerates the unschedulable taint",
                pod("p")
                    .toleration(
                        "node.kubernetes.io/unschedulable",
                        "Exists",
                        "",
                        "NoSchedule",
                    )
                    .build(),
                node("n").unschedulable().build(),
                Code::Success,
            ),
            (
                "tolerates everything",
                pod("p").toleration("", "Exists", "", "").build(),
                node("n").unschedulable().build(),
                Code::Success,
            ),
        ];
        for (name, p, n, want) in cases {
            let s = NodeUnschedulable.filter(&CycleState::new(), &p, &NodeInfo::new(n));
            assert_eq!(s.code, want, "{name}");
            if want != Code::Success {
                assert_eq!(s.reasons, vec![ERR_REASON_UNSCHEDULABLE]);
            }
        }
    }
}
