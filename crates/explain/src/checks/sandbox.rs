//! The pod's sandbox (its network namespace and pause container) that
//! the runtime or the CNI plugin could not make: the pod stays in
//! ContainerCreating.

use crate::facts::{describe_event, Facts};
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    if !f.scheduled() || f.pod.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Pending") {
        return Vec::new();
    }
    let Some(e) = f.events_with("FailedCreatePodSandBox").last().copied() else {
        return Vec::new();
    };
    let message = e.message.as_deref().unwrap_or_default();
    let network = ["network", "CNI", "cni", "plugin type=", "IP address"]
        .iter()
        .any(|m| message.contains(m));
    let mut finding = Finding::new(
        Stage::Sandbox,
        if network {
            "the pod's network cannot be set up, so it stays in ContainerCreating"
        } else {
            "the pod's sandbox cannot be created, so it stays in ContainerCreating"
        },
    )
    .evidence(describe_event(e));
    if let Some(back) = f.last_event("SandboxChanged", "") {
        finding = finding.evidence(describe_event(back));
    }
    finding = finding.fix(format!(
        "this is the node's side ({}): look at its agent's log (skiff logs agent) and, for network \
         errors, its CNI configuration and the pod CIDR; the agent retries by itself once it is fixed",
        f.node_name()
    ));
    vec![finding]
}
