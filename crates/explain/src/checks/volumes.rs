//! Volumes: claims missing or not bound, and volumes that cannot be
//! mounted (FailedMount: a ConfigMap or Secret that does not exist).

use crate::facts::{describe_event, Facts};
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    let ns = f.namespace();
    for (name, claim) in &f.claims {
        match claim {
            None => out.push(
                Finding::new(Stage::Volumes, format!("persistentvolumeclaim \"{name}\" not found"))
                    .evidence(format!("the pod's volumes name claim {name}, which does not exist in {ns}"))
                    .fix(format!(
                        "create it, e.g.\n  kubectl apply -n {ns} -f - <<EOF\n  apiVersion: v1\n  kind: PersistentVolumeClaim\n  metadata:\n    name: {name}\n  spec:\n    accessModes: [ReadWriteOnce]\n    resources:\n      requests:\n        storage: 1Gi\n  EOF"
                    )),
            ),
            Some(pvc) => {
                let phase = pvc
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.as_deref())
                    .unwrap_or("Pending");
                if phase == "Bound" {
                    continue;
                }
                let class = pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_deref());
                let mut finding = Finding::new(
                    Stage::Volumes,
                    format!("persistentvolumeclaim {name} is {phase}, not Bound"),
                )
                .evidence(format!(
                    "claim {name}: phase {phase}, storageClassName {}",
                    class.map(|c| format!("{c:?}")).unwrap_or_else(|| "unset".into())
                ));
                finding = finding.fix(match class {
                    Some("") => format!(
                        "storageClassName \"\" asks for a pre-made PersistentVolume: create one that \
                         matches the claim's size and access modes, or set storageClassName to a class \
                         that provisions (kubectl get storageclass) when recreating claim {name}"
                    ),
                    Some(c) => format!(
                        "no PersistentVolume of class {c} matches and none was provisioned: check the \
                         class exists (kubectl get storageclass {c}) and kubectl describe pvc {name} -n {ns}"
                    ),
                    None => format!(
                        "the claim names no class and there is no default StorageClass: mark one default \
                         (kubectl annotate storageclass NAME storageclass.kubernetes.io/is-default-class=true) \
                         or recreate claim {name} with storageClassName set"
                    ),
                });
                out.push(finding);
            }
        }
    }
    if f.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
        return out;
    }
    if let Some(e) = f.events_with("FailedMount").last() {
        let message = e.message.clone().unwrap_or_default();
        let mut finding = Finding::new(
            Stage::Volumes,
            "a volume cannot be mounted, so no container starts",
        )
        .evidence(describe_event(e));
        if let Some((kind, name)) = missing_object(&message) {
            finding = finding.fix(format!(
                "create the {kind}, e.g.\n  kubectl create {} {name} -n {ns} --from-literal=KEY=VALUE\n\
                 or mark the volume's {kind} optional: true in {}'s pod spec",
                if kind == "secret" { "secret generic" } else { "configmap" },
                f.owner_ref()
            ));
        } else if !message.contains("persistentvolumeclaim") {
            finding = finding.fix(format!(
                "the node's agent could not set the volume up: kubectl describe pod {} -n {ns}, and the agent's log (skiff logs agent)",
                f.name()
            ));
        }
        if !out
            .iter()
            .any(|o| o.problem.contains("persistentvolumeclaim"))
        {
            out.push(finding);
        }
    }
    out
}

/// `configmap "NAME" not found` or `secret "NAME" not found` in a message.
pub(super) fn missing_object(message: &str) -> Option<(&'static str, String)> {
    for kind in ["configmap", "secret"] {
        let marker = format!("{kind} \"");
        let mut rest = message;
        while let Some(at) = rest.find(&marker) {
            let after = &rest[at + marker.len()..];
            if let Some(end) = after.find('"') {
                if after[end..].starts_with("\" not found") {
                    return Some((kind, after[..end].to_string()));
                }
            }
            rest = after;
        }
    }
    None
}
