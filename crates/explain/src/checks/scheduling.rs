//! A pod no node can run: the scheduler's reasons (PodScheduled=False,
//! FailedScheduling) read back into taints, resources, selectors, claims
//! and cordons, each with its fix.

use super::yaml;
use crate::facts::{describe_event, Facts};
use crate::report::{Finding, Stage};

const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";

pub fn check(f: &Facts) -> Vec<Finding> {
    if f.scheduled() {
        return Vec::new();
    }
    let Some(cond) = f.condition("PodScheduled").filter(|c| c.status == "False") else {
        return Vec::new();
    };
    let message = cond.message.clone().unwrap_or_default();
    let mut finding = Finding::new(Stage::Scheduling, "no node can run the pod").evidence(format!(
        "condition PodScheduled=False ({}): {message}",
        cond.reason.as_deref().unwrap_or("?")
    ));
    if let Some(e) = f.events_with("FailedScheduling").last() {
        finding = finding.evidence(describe_event(e));
    }
    let spec = f.pod.spec.clone().unwrap_or_default();
    for (key, value) in taints(&message) {
        finding = finding.fix(if key == CONTROL_PLANE {
            format!(
                "the only node(s) are control-plane nodes, tainted {key}:NoSchedule; on a \
                 single-node cluster let workloads run there:\n  \
                 kubectl taint nodes --all {key}:NoSchedule-\nor tolerate the taint in {}'s pod spec:\n{}",
                f.owner_ref(),
                toleration(&key, &value)
            )
        } else {
            format!(
                "tolerate the taint {{{key}: {value}}} in {}'s pod spec, or remove it from the \
                 node (kubectl taint nodes NODE {key}-):\n{}",
                f.owner_ref(),
                toleration(&key, &value)
            )
        });
    }
    for resource in insufficient(&message) {
        let asked: Vec<String> = spec
            .containers
            .iter()
            .filter_map(|c| {
                let q = c.resources.as_ref()?.requests.as_ref()?.get(&resource)?;
                Some(format!("{}={}", c.name, q.0))
            })
            .collect();
        if !asked.is_empty() {
            finding = finding.evidence(format!("{resource} requested: {}", asked.join(", ")));
        }
        finding = finding.fix(format!(
            "no node has {resource} left for the pod's requests: lower \
             spec.containers[*].resources.requests.{resource} of {} below a node's free \
             allocatable (kubectl describe nodes: Allocatable, Allocated resources), or add a node",
            f.owner_ref()
        ));
    }
    if message.contains("didn't match Pod's node affinity/selector")
        || message.contains("[NodeAffinity]")
    {
        if let Some(sel) = spec.node_selector.as_ref().filter(|s| !s.is_empty()) {
            let pairs: Vec<String> = sel.iter().map(|(k, v)| format!("{k}={v}")).collect();
            finding = finding
                .evidence(format!("nodeSelector: {}", pairs.join(", ")))
                .fix(format!(
                    "no node has the labels the pod selects: label one\n  kubectl label nodes NODE {}\n\
                     or change spec.nodeSelector of {} to labels a node has (kubectl get nodes --show-labels)",
                    pairs.join(" "),
                    f.owner_ref()
                ));
        } else {
            finding = finding.fix(format!(
                "no node matches spec.affinity.nodeAffinity of {}: compare it with kubectl get nodes --show-labels",
                f.owner_ref()
            ));
        }
    }
    if message.contains("were unschedulable") {
        finding = finding.fix("the node is cordoned: kubectl uncordon NODE".to_string());
    }
    if message.contains("PersistentVolumeClaim") || message.contains("persistentvolumeclaim") {
        finding = finding.fix(
            "the pod waits for its claims: see the volumes finding (kubectl get pvc)".to_string(),
        );
    }
    if message.contains("didn't have free ports") {
        finding = finding.fix(format!(
            "the hostPort the pod asks for is taken on every node: drop spec.containers[*].ports[*].hostPort of {} or free it",
            f.owner_ref()
        ));
    }
    if message.contains("pod affinity") || message.contains("anti-affinity") {
        finding = finding.fix(format!(
            "spec.affinity.podAffinity/podAntiAffinity of {} cannot be met by the pods running now",
            f.owner_ref()
        ));
    }
    vec![finding]
}

/// The taints named by "had untolerated taint {KEY: VALUE}" parts.
fn taints(message: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(at) = rest.find("untolerated taint {") {
        rest = &rest[at + "untolerated taint {".len()..];
        let Some(end) = rest.find('}') else { break };
        let inner = &rest[..end];
        let (key, value) = inner.split_once(':').unwrap_or((inner, ""));
        let pair = (key.trim().to_string(), value.trim().to_string());
        if !out.contains(&pair) {
            out.push(pair);
        }
        rest = &rest[end..];
    }
    out
}

/// The resources named by "Insufficient RESOURCE" parts.
fn insufficient(message: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in message.split("Insufficient ").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
            .collect();
        let name = name.trim_end_matches('.').to_string();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

fn toleration(key: &str, value: &str) -> String {
    let mut lines = vec![format!("- key: {}", yaml::quoted(key))];
    if value.is_empty() {
        lines.push("  operator: Exists".into());
    } else {
        lines.push("  operator: Equal".into());
        lines.push(format!("  value: {}", yaml::quoted(value)));
    }
    lines.push("  effect: NoSchedule".into());
    yaml::block("  tolerations:", &lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_read_from_the_message() {
        let m = "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 2 node(s) had \
                 untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/3 nodes \
                 are available: 1 No preemption victims found for incoming pod, 2 Preemption is not \
                 helpful for scheduling, 1 node(s) had untolerated taint {dedicated: gpu}.";
        assert_eq!(insufficient(m), vec!["cpu", "memory"]);
        assert_eq!(
            taints(m),
            vec![
                (CONTROL_PLANE.to_string(), String::new()),
                ("dedicated".to_string(), "gpu".to_string())
            ]
        );
    }
}
