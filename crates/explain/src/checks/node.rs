//! The node under the pod: not Ready, or the pod evicted from it.

use crate::facts::Facts;
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    let status = f.pod.status.as_ref();
    if status.and_then(|s| s.reason.as_deref()) == Some("Evicted") {
        out.push(
            Finding::new(Stage::Node, "the node evicted the pod")
                .evidence(format!(
                    "status.reason=Evicted: {}",
                    status.and_then(|s| s.message.as_deref()).unwrap_or_default()
                ))
                .fix(format!(
                    "the node ran short of what the message names: set requests (and limits) on {} \
                     near its real use so the scheduler places it where it fits; its controller makes \
                     a new pod, a bare pod must be recreated",
                    f.owner_ref()
                )),
        );
    }
    let Some(node) = &f.node else { return out };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status == "True" => {}
        Some(c) => out.push(
            Finding::new(Stage::Node, format!("node {} is not Ready", f.node_name()))
                .evidence(format!(
                    "node condition Ready={} ({}): {}",
                    c.status,
                    c.reason.as_deref().unwrap_or("?"),
                    c.message.as_deref().unwrap_or_default()
                ))
                .fix(format!(
                    "the node's agent has stopped reporting or reports a problem: check it on the \
                     node (skiff logs agent), or kubectl drain {} to move its pods",
                    f.node_name()
                )),
        ),
        None => {}
    }
    out
}
