//! The local-path provisioner (what k3s ships as rancher's
//! local-path-provisioner), built into the PV controller: a claim of a
//! class with provisioner `skiff.dev/local-path` gets a hostPath volume in
//! a directory on one node, `<dir>/pvc-<claim uid>_<namespace>_<claim>`,
//! pinned there by required node affinity on `kubernetes.io/hostname`.
//!
//! This module owns choosing the node of an Immediate claim and building
//! the PersistentVolume object, both pure. `<dir>` is the node's
//! `skiff.dev/local-path-dir` annotation, set by the node agent when it
//! registers; the agent also creates the directory when a pod mounts the
//! volume (`DirectoryOrCreate`), and removes it, then the
//! `skiff.dev/local-path-cleanup` finalizer, once the volume is deleted.
//! Writing the volume and the events is the controller's job.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, PersistentVolumeStatus,
    VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::helpers::{
    annotation, claim_class, name, phase, reference_to, requested, set_annotation,
    ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED,
};

/// The provisioner name classes use.
pub const PROVISIONER: &str = "skiff.dev/local-path";
/// The Node annotation naming the directory volumes are made in.
pub const DIR_ANNOTATION: &str = "skiff.dev/local-path-dir";
/// The finalizer the node agent removes once the directory is gone.
pub const CLEANUP_FINALIZER: &str = "skiff.dev/local-path-cleanup";
/// The node label volumes are pinned with.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Why a claim cannot be provisioned (the text after upstream's `Failed to
/// provision volume with StorageClass "<class>": `, local-path's wording
/// where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvisionError {
    /// A selector on volume labels cannot be honoured by a new volume.
    #[error("claim.Spec.Selector is not supported")]
    Selector,
    /// Block volumes are not directories.
    #[error("{PROVISIONER} does not support block volume provisioning")]
    Block,
    /// Only single-node access modes.
    #[error("NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) access modes")]
    AccessMode,
    /// hostPath volumes take no mount options.
    #[error("mount options are not supported by {PROVISIONER}")]
    MountOptions,
    /// The claim asks for no storage.
    #[error("claim has no storage request")]
    NoRequest,
    /// No node to put an Immediate claim's volume on.
    #[error("no Ready node to provision the volume on")]
    NoNode,
    /// The node has no directory for volumes (the agent did not set it).
    #[error("node {node:?} has no {DIR_ANNOTATION} annotation")]
    NoDir {
        /// The node.
        node: String,
    },
}

/// The volume's name for a claim (upstream's `pvc-<claim uid>`).
pub fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node's `kubernetes.io/hostname` (its name when unlabelled), what
/// the volume's node affinity names.
pub fn hostname(node: &Node) -> &str {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HOSTNAME_LABEL))
        .map_or_else(|| name(&node.metadata), String::as_str)
}

/// The hostname a volume of ours is pinned to.
pub fn pinned_hostname(volume: &PersistentVolume) -> Option<&str> {
    let terms = &volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .find(|r| r.key == HOSTNAME_LABEL && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first())
        .map(String::as_str)
}

/// The node for an Immediate claim: a Ready node, preferring one with a
/// volume directory, then an uncordoned one, then the one holding fewest
/// of our volumes, then by name (deterministic).
pub fn choose_node<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    volumes: impl IntoIterator<Item = &'a PersistentVolume> + Clone,
) -> Option<&'a Node> {
    nodes
        .into_iter()
        .filter(|n| is_ready(n) && n.metadata.deletion_timestamp.is_none())
        .min_by_key(|n| {
            let host = hostname(n);
            let held = volumes
                .clone()
                .into_iter()
                .filter(|v| {
                    annotation(&v.metadata, ANN_DYNAMICALLY_PROVISIONED) == Some(PROVISIONER)
                })
                .filter(|v| pinned_hostname(v) == Some(host))
                .count();
            let cordoned = n
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false);
            (
                annotation(&n.metadata, DIR_ANNOTATION).is_none(),
                cordoned,
                held,
                name(&n.metadata).to_string(),
            )
        })
}

/// Checks what local-path cannot serve, before a node is chosen.
pub fn check_claim(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<(), ProvisionError> {
    let spec = claim.spec.as_ref();
    if spec.and_then(|s| s.selector.as_ref()).is_some() {
        return Err(ProvisionError::Selector);
    }
    if spec.and_then(|s| s.volume_mode.as_deref()) == Some("Block") {
        return Err(ProvisionError::Block);
    }
    let modes = spec
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    if modes
        .iter()
        .any(|m| m != "ReadWriteOnce" && m != "ReadWriteOncePod")
    {
        return Err(ProvisionError::AccessMode);
    }
    if class.mount_options.as_ref().is_some_and(|o| !o.is_empty()) {
        return Err(ProvisionError::MountOptions);
    }
    if requested(claim).is_none() {
        return Err(ProvisionError::NoRequest);
    }
    Ok(())
}

/// The volume for `claim` on `node`: a hostPath directory under the
/// node's volume directory, pinned to the node, bound to the claim,
/// with the class's reclaim policy and the cleanup finalizer.
pub fn build_volume(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &Node,
) -> Result<PersistentVolume, ProvisionError> {
    check_claim(claim, class)?;
    let dir = annotation(&node.metadata, DIR_ANNOTATION)
        .filter(|d| !d.is_empty())
        .ok_or_else(|| ProvisionError::NoDir {
            node: name(&node.metadata).to_string(),
        })?;
    let pv_name = volume_name(claim);
    let path = format!(
        "{}/{pv_name}_{}_{}",
        dir.trim_end_matches('/'),
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        name(&claim.metadata)
    );
    let request = requested(claim).cloned().ok_or(ProvisionError::NoRequest)?;
    let mut metadata = ObjectMeta {
        name: Some(pv_name),
        finalizers: Some(vec![CLEANUP_FINALIZER.to_string()]),
        ..Default::default()
    };
    set_annotation(&mut metadata, ANN_BOUND_BY_CONTROLLER, "yes");
    set_annotation(&mut metadata, ANN_DYNAMICALLY_PROVISIONED, PROVISIONER);
    let spec = claim.spec.as_ref();
    Ok(PersistentVolume {
        metadata,
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.and_then(|s| s.access_modes.clone()),
            capacity: Some(BTreeMap::from([("storage".to_string(), request)])),
            claim_ref: Some(reference_to(claim)),
            host_path: Some(HostPathVolumeSource {
                path,
                type_: Some("DirectoryOrCreate".into()),
            }),
            node_affinity: Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: HOSTNAME_LABEL.into(),
                            operator: "In".into(),
                            values: Some(vec![hostname(node).to_string()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            persistent_volume_reclaim_policy: Some(
                class
                    .reclaim_policy
                    .clone()
                    .unwrap_or_else(|| "Delete".into()),
            ),
            storage_class_name: Some(claim_class(claim).to_string()),
            volume_mode: spec.and_then(|s| s.volume_mode.clone()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some(phase::BOUND.into()),
            ..Default::default()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{claim, local_path_class, ready_node, volume};

    #[test]
    fn builds_the_volume_upstream_local_path_would() {
        let c = claim("data")
            .ns("web")
            .uid("1234")
            .class("local")
            .request("2Gi")
            .build();
        let class = local_path_class("local").reclaim("Retain").build();
        let node = ready_node("n1")
            .local_path_dir("/var/lib/skiff/storage/")
            .build();
        let pv = build_volume(&c, &class, &node).expect("volume");
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-1234"));
        assert_eq!(
            pv.metadata.finalizers,
            Some(vec!["skiff.dev/local-path-cleanup".to_string()])
        );
        assert_eq!(
            annotation(&pv.metadata, "pv.kubernetes.io/provisioned-by"),
            Some("skiff.dev/local-path")
        );
        let spec = pv.spec.as_ref().expect("spec");
        let host_path = spec.host_path.as_ref().expect("hostPath");
        assert_eq!(host_path.path, "/var/lib/skiff/storage/pvc-1234_web_data");
        assert_eq!(host_path.type_.as_deref(), Some("DirectoryOrCreate"));
        assert_eq!(pinned_hostname(&pv), Some("n1"));
        assert_eq!(
            spec.capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.as_str()),
            Some("2Gi")
        );
        assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_string()]));
        assert_eq!(
            spec.persistent_volume_reclaim_policy.as_deref(),
            Some("Retain")
        );
        assert_eq!(spec.storage_class_name.as_deref(), Some("local"));
        let r = spec.claim_ref.as_ref().expect("claimRef");
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("web"), Some("data"), Some("1234"))
        );
    }

    #[test]
    fn refuses_what_local_path_cannot_serve() {
        let class = local_path_class("local").build();
        let node = ready_node("n1").local_path_dir("/d").build();
        let cases = [
            (
                claim("c").modes(&["ReadWriteMany"]),
                ProvisionError::AccessMode,
            ),
            (claim("c").block(), ProvisionError::Block),
            (claim("c").selector("a", "b"), ProvisionError::Selector),
        ];
        for (c, want) in cases {
            assert_eq!(
                build_volume(&c.class("local").build(), &class, &node),
                Err(want)
            );
        }
        let bare = ready_node("n2").build();
        let err = build_volume(&claim("c").class("local").build(), &class, &bare);
        assert_eq!(err, Err(ProvisionError::NoDir { node: "n2".into() }));
        assert_eq!(
            ProvisionError::NoDir { node: "n2".into() }.to_string(),
            "node \"n2\" has no skiff.dev/local-path-dir annotation"
        );
        let with_options = local_path_class("local").mount_options(&["ro"]).build();
        assert_eq!(
            build_volume(&claim("c").class("local").build(), &with_options, &node),
            Err(ProvisionError::MountOptions)
        );
    }

    #[test]
    fn an_immediate_claim_goes_to_the_least_loaded_ready_node_with_a_dir() {
        let nodes = [
            ready_node("a").local_path_dir("/d").build(),
            ready_node("b").local_path_dir("/d").build(),
            ready_node("c").build(),
            ready_node("d").local_path_dir("/d").not_ready().build(),
            ready_node("e").local_path_dir("/d").unschedulable().build(),
        ];
        let ours = |n: &str, node: &str| {
            volume(n)
                .annotation("pv.kubernetes.io/provisioned-by", PROVISIONER)
                .on_node(node)
                .build()
        };
        let vols = [ours("v1", "a"), ours("v2", "a"), ours("v3", "b")];
        let pick = |vols: &[PersistentVolume]| {
            choose_node(nodes.iter(), vols.iter()).map(|n| name(&n.metadata).to_string())
        };
        assert_eq!(pick(&vols).as_deref(), Some("b"));
        assert_eq!(pick(&[]).as_deref(), Some("a"));
        // Someone else's volumes do not count.
        let theirs = volume("x").on_node("a").build();
        assert_eq!(pick(&[ours("v3", "b"), theirs]).as_deref(), Some("a"));
        let only_bare = [ready_node("c").build()];
        let chosen = choose_node(only_bare.iter(), vols.iter());
        assert_eq!(chosen.map(|n| name(&n.metadata)), Some("c"));
        let none: [Node; 1] = [ready_node("d").not_ready().build()];
        assert!(choose_node(none.iter(), vols.iter()).is_none());
    }
}
