//! Object builders for storage tests: `claim("data").class("fast")
//! .request("1Gi")`, `volume("pv1").capacity("5Gi").available()`,
//! `class("fast", "skiff.dev/local-path").wait_for_first_consumer()`,
//! `ready_node("n1").local_path_dir("/var/lib/skiff/storage")`.
//!
//! This module owns test fixtures only (unit tests here, the integration
//! tests of this crate and the scheduler's): typed k8s-openapi objects
//! with just what a test states. Nothing in the controllers uses it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, Node, NodeCondition, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, VolumeNodeAffinity, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use crate::persistentvolume::{LOCAL_PATH_DIR_ANNOTATION, LOCAL_PATH_PROVISIONER};

/// Starts a claim in namespace `default` asking for ReadWriteOnce and
/// 1Gi, with uid `uid-<name>`, no class.
pub fn claim(name: &str) -> ClaimBuilder {
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                limits: None,
            }),
            ..Default::default()
        }),
        status: None,
    };
    ClaimBuilder { claim }
}

/// Builds a [`PersistentVolumeClaim`].
#[derive(Debug, Clone)]
pub struct ClaimBuilder {
    claim: PersistentVolumeClaim,
}

impl ClaimBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeClaimSpec {
        self.claim.spec.get_or_insert_with(Default::default)
    }

    /// Its namespace.
    pub fn ns(mut self, namespace: &str) -> Self {
        self.claim.metadata.namespace = Some(namespace.into());
        self
    }

    /// Its uid (`None` for a claim to create).
    pub fn uid(mut self, uid: &str) -> Self {
        self.claim.metadata.uid = (!uid.is_empty()).then(|| uid.into());
        self
    }

    /// `spec.storageClassName` (`""`: explicitly none).
    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }

    /// The storage request.
    pub fn request(mut self, quantity: &str) -> Self {
        self.spec()
            .resources
            .get_or_insert_with(Default::default)
            .requests
            .get_or_insert_with(BTreeMap::new)
            .insert("storage".into(), Quantity(quantity.into()));
        self
    }

    /// The access modes.
    pub fn modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }

    /// `spec.volumeName`.
    pub fn volume_name(mut self, volume: &str) -> Self {
        self.spec().volume_name = Some(volume.into());
        self
    }

    /// `spec.volumeMode: Block`.
    pub fn block(mut self) -> Self {
        self.spec().volume_mode = Some("Block".into());
        self
    }

    /// A selector `key=value` on volume labels.
    pub fn selector(mut self, key: &str, value: &str) -> Self {
        self.spec().selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(key.into(), value.into())])),
            match_expressions: None,
        });
        self
    }

    /// An annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.claim
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// `volume.kubernetes.io/selected-node`.
    pub fn selected_node(self, node: &str) -> Self {
        self.annotation("volume.kubernetes.io/selected-node", node)
    }

    /// `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.claim
            .status
            .get_or_insert_with(PersistentVolumeClaimStatus::default)
            .phase = Some(phase.into());
        self
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.claim.metadata.resource_version = Some(rv.into());
        self
    }

    /// The claim.
    pub fn build(self) -> PersistentVolumeClaim {
        self.claim
    }
}

/// Starts a volume with ReadWriteOnce, 1Gi, reclaim Retain, a hostPath,
/// no class and no phase.
pub fn volume(name: &str) -> VolumeBuilder {
    let volume = PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
            host_path: Some(HostPathVolumeSource {
                path: format!("/mnt/{name}"),
                type_: None,
            }),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            ..Default::default()
        }),
        status: None,
    };
    VolumeBuilder { volume }
}

/// Builds a [`PersistentVolume`].
#[derive(Debug, Clone)]
pub struct VolumeBuilder {
    volume: PersistentVolume,
}

impl VolumeBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeSpec {
        self.volume.spec.get_or_insert_with(Default::default)
    }

    /// Its uid (`None` for a volume to create).
    pub fn uid(mut self, uid: &str) -> Self {
        self.volume.metadata.uid = (!uid.is_empty()).then(|| uid.into());
        self
    }

    /// `spec.storageClassName`.
    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.into());
        self
    }

    /// The capacity.
    pub fn capacity(mut self, quantity: &str) -> Self {
        self.spec().capacity = Some(BTreeMap::from([(
            "storage".into(),
            Quantity(quantity.into()),
        )]));
        self
    }

    /// The access modes.
    pub fn modes(mut self, modes: &[&str]) -> Self {
        self.spec().access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }

    /// `spec.volumeMode: Block`.
    pub fn block(mut self) -> Self {
        self.spec().volume_mode = Some("Block".into());
        self
    }

    /// `spec.persistentVolumeReclaimPolicy`.
    pub fn reclaim(mut self, policy: &str) -> Self {
        self.spec().persistent_volume_reclaim_policy = Some(policy.into());
        self
    }

    /// A claimRef (`uid` may be empty: pre-bound).
    pub fn claim_ref(mut self, namespace: &str, name: &str, uid: &str) -> Self {
        self.spec().claim_ref = Some(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: (!uid.is_empty()).then(|| uid.into()),
            ..Default::default()
        });
        self
    }

    /// Required node affinity `kubernetes.io/hostname In [node]`.
    pub fn on_node(mut self, node: &str) -> Self {
        self.spec().node_affinity = Some(VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: "In".into(),
                        values: Some(vec![node.into()]),
                    }]),
                    match_fields: None,
                }],
            }),
        });
        self
    }

    /// A label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.volume
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// An annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.volume
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// `status.phase`.
    pub fn phase(mut self, phase: &str) -> Self {
        self.volume
            .status
            .get_or_insert_with(PersistentVolumeStatus::default)
            .phase = Some(phase.into());
        self
    }

    /// `status.phase: Available`.
    pub fn available(self) -> Self {
        self.phase("Available")
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(mut self, rv: &str) -> Self {
        self.volume.metadata.resource_version = Some(rv.into());
        self
    }

    /// The volume.
    pub fn build(self) -> PersistentVolume {
        self.volume
    }
}

/// Starts a class with `provisioner`, Immediate binding and reclaim
/// Delete (what the API defaults).
pub fn class(name: &str, provisioner: &str) -> ClassBuilder {
    ClassBuilder {
        class: StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            reclaim_policy: Some("Delete".into()),
            volume_binding_mode: Some("Immediate".into()),
            ..Default::default()
        },
    }
}

/// A class of the local-path provisioner.
pub fn local_path_class(name: &str) -> ClassBuilder {
    class(name, LOCAL_PATH_PROVISIONER)
}

/// Builds a [`StorageClass`].
#[derive(Debug, Clone)]
pub struct ClassBuilder {
    class: StorageClass,
}

impl ClassBuilder {
    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub fn wait_for_first_consumer(mut self) -> Self {
        self.class.volume_binding_mode = Some("WaitForFirstConsumer".into());
        self
    }

    /// `reclaimPolicy`.
    pub fn reclaim(mut self, policy: &str) -> Self {
        self.class.reclaim_policy = Some(policy.into());
        self
    }

    /// `mountOptions`.
    pub fn mount_options(mut self, options: &[&str]) -> Self {
        self.class.mount_options = Some(options.iter().map(|o| o.to_string()).collect());
        self
    }

    /// Annotated as the default class.
    pub fn default_class(mut self) -> Self {
        self.class
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                "storageclass.kubernetes.io/is-default-class".into(),
                "true".into(),
            );
        self
    }

    /// `metadata.creationTimestamp`, seconds after the epoch.
    pub fn created(mut self, seconds: i64) -> Self {
        self.class.metadata.creation_timestamp = Timestamp::from_second(seconds).ok().map(Time);
        self
    }

    /// The class.
    pub fn build(self) -> StorageClass {
        self.class
    }
}

/// Starts a node with the Ready condition True and the
/// `kubernetes.io/hostname` label an agent sets (the name).
pub fn ready_node(name: &str) -> NodeBuilder {
    let mut node = skiff_client::testing::node(name)
        .label("kubernetes.io/hostname", name)
        .build();
    node.status.get_or_insert_with(Default::default).conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        ..Default::default()
    }]);
    NodeBuilder { node }
}

/// Builds a [`Node`] for storage tests.
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    node: Node,
}

impl NodeBuilder {
    /// The `skiff.dev/local-path-dir` annotation the node agent sets.
    pub fn local_path_dir(mut self, dir: &str) -> Self {
        self.node
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(LOCAL_PATH_DIR_ANNOTATION.into(), dir.into());
        self
    }

    /// The Ready condition False.
    pub fn not_ready(mut self) -> Self {
        if let Some(conditions) = self
            .node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
        {
            conditions
                .iter_mut()
                .for_each(|c| c.status = "False".into());
        }
        self
    }

    /// Cordoned.
    pub fn unschedulable(mut self) -> Self {
        self.node
            .spec
            .get_or_insert_with(Default::default)
            .unschedulable = Some(true);
        self
    }

    /// The node.
    pub fn build(self) -> Node {
        self.node
    }
}
