//! Pods and nodes as the scheduler's watches decode them: everything but
//! `metadata.managedFields`, which no plugin reads (upstream's scheduler
//! drops it with an informer transform). Skipping it while decoding,
//! rather than after, saves a tree of small maps per object: a third of
//! the memory a decoded benchmark pod took, for two decodes per pod.
//!
//! [`Trimmed<K>`] is the type the kube-rs watchers decode; it is the same
//! resource as `K` to the API and turns back into a `K` with
//! [`Trimmed::into_inner`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// A `K` decoded without `metadata.managedFields`.
#[derive(Clone, Debug)]
pub struct Trimmed<K>(K);

impl<K> Trimmed<K> {
    /// The object.
    pub fn into_inner(self) -> K {
        self.0
    }
}

/// Objects made of metadata, spec and status.
pub trait Parts: Sized {
    /// The spec type.
    type Spec: DeserializeOwned;
    /// The status type.
    type Status: DeserializeOwned;
    /// Builds the object.
    fn from_parts(
        metadata: ObjectMeta,
        spec: Option<Self::Spec>,
        status: Option<Self::Status>,
    ) -> Self;
}

impl Parts for Pod {
    type Spec = PodSpec;
    type Status = PodStatus;
    fn from_parts(metadata: ObjectMeta, spec: Option<PodSpec>, status: Option<PodStatus>) -> Self {
        Pod {
            metadata,
            spec,
            status,
        }
    }
}

impl Parts for Node {
    type Spec = NodeSpec;
    type Status = NodeStatus;
    fn from_parts(
        metadata: ObjectMeta,
        spec: Option<NodeSpec>,
        status: Option<NodeStatus>,
    ) -> Self {
        Node {
            metadata,
            spec,
            status,
        }
    }
}

/// `ObjectMeta` without `managedFields`; unknown keys are skipped unparsed.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[derive(Deserialize)]
#[serde(bound = "S: DeserializeOwned, T: DeserializeOwned")]
struct Wire<S, T> {
    #[serde(default)]
    metadata: Option<Meta>,
    #[serde(default)]
    spec: Option<S>,
    #[serde(default)]
    status: Option<T>,
}

impl<'de, K: Parts> Deserialize<'de> for Trimmed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::<K::Spec, K::Status>::deserialize(d)?;
        Ok(Trimmed(K::from_parts(
            w.metadata.unwrap_or_default().into(),
            w.spec,
            w.status,
        )))
    }
}

impl<K: k8s_openapi::Resource> k8s_openapi::Resource for Trimmed<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> k8s_openapi::Metadata for Trimmed<K> {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        self.0.metadata()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.0.metadata_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_like_the_full_type_without_managed_fields() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web", "namespace": "d", "uid": "u1", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "creationTimestamp": "2026-11-30T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u0", "controller": true}],
                "finalizers": ["f"], "generateName": "web-", "generation": 2,
                "deletionTimestamp": "2026-11-30T00:01:00Z", "deletionGracePeriodSeconds": 30,
                "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:containers": {}}}}],
                "someFutureField": {"x": [1, 2]},
            },
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending"},
        });
        let full: Pod = serde_json::from_value(pod.clone()).unwrap();
        let trimmed: Trimmed<Pod> = serde_json::from_value(pod).unwrap();
        let mut want = full;
        want.metadata.managed_fields = None;
        assert_eq!(trimmed.into_inner(), want);

        let node: Trimmed<Node> = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "managedFields": []},
            "spec": {"unschedulable": true},
            "status": {"allocatable": {"cpu": "4"}},
        }))
        .unwrap();
        let node = node.into_inner();
        assert_eq!(node.metadata.name.as_deref(), Some("n1"));
        assert_eq!(node.metadata.managed_fields, None);
        assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true));

        // Missing and null parts decode as absent, as with the full type.
        let bare: Trimmed<Pod> = serde_json::from_value(json!({"metadata": null})).unwrap();
        assert_eq!(bare.into_inner(), Pod::default());
        // Wrong types are still errors.
        assert!(serde_json::from_value::<Trimmed<Pod>>(json!({"spec": 3})).is_err());
    }

    #[test]
    fn is_the_same_api_resource() {
        use kube::Resource;
        assert_eq!(Trimmed::<Pod>::plural(&()), "pods");
        assert_eq!(Trimmed::<Node>::kind(&()), "Node");
        assert_eq!(
            Trimmed::<Pod>::url_path(&(), Some("d")),
            Pod::url_path(&(), Some("d"))
        );
    }
}
