//! DefaultPreemption, diagnostics only: reports, in upstream's words, why
//! preemption did not make room. Victim selection and eviction are not
//! implemented yet, so it never nominates a node: nodes whose filter status
//! is `UnschedulableAndUnresolvable` get "Preemption is not helpful for
//! scheduling", the others "No preemption victims found for incoming pod".

use k8s_openapi::api::core::v1::Pod;

use super::names;
use crate::framework::{
    pod_key, Code, CycleState, Diagnosis, FitError, NodeToStatus, Plugin, PostFilterPlugin,
    Snapshot, Status,
};

/// Upstream reason for nodes where removing pods cannot help.
pub const REASON_NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// Upstream reason for nodes without lower-priority pods to evict.
pub const REASON_NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Upstream message for pods that may not preempt.
pub const REASON_NEVER: &str = "not eligible due to preemptionPolicy=Never.";

/// The DefaultPreemption PostFilter plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPreemption;

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        names::DEFAULT_PREEMPTION
    }
    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        _state: &CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> Status {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some("Never")
        {
            return Status::unschedulable(REASON_NEVER);
        }
        let mut inner = NodeToStatus::default();
        for node in snapshot.node_infos() {
            let status = if statuses.get(node.name()).code == Code::UnschedulableAndUnresolvable {
                Status::unresolvable(REASON_NOT_HELPFUL)
            } else {
                Status::unresolvable(REASON_NO_VICTIMS)
            };
            inner.set(node.name(), status);
        }
        let fit = FitError {
            pod: pod_key(pod),
            num_all_nodes: snapshot.len(),
            diagnosis: Diagnosis {
                node_to_status: inner,
                ..Default::default()
            },
        };
        Status::unschedulable(format!("preemption: {fit}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_client::testing::{node, pod};

    #[test]
    fn messages() {
        let snap = Snapshot::new(
            vec![node("n1").build(), node("n2").build(), node("n3").build()],
            vec![],
        );
        let mut statuses = NodeToStatus::default();
        statuses.set("n1", Status::unschedulable("Insufficient cpu"));
        statuses.set(
            "n2",
            Status::unresolvable("node(s) had untolerated taint {a: }"),
        );
        // n3 absent: the default absent status is unresolvable.
        let s =
            DefaultPreemption.post_filter(&CycleState::new(), &pod("p").build(), &snap, &statuses);
        assert_eq!(
            s.message(),
            "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, \
             2 Preemption is not helpful for scheduling."
        );
        let never = pod("p").preemption_never().build();
        let s = DefaultPreemption.post_filter(&CycleState::new(), &never, &snap, &statuses);
        assert_eq!(s.message(), REASON_NEVER);
    }
}
