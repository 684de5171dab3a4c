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

/// A `K` decoded without `metadata.managedFields`. An object whose
/// parts do not decode as `K`'s (one stored before the API server checked
/// types) still decodes: its name, namespace, uid and resourceVersion are
/// kept, and [`Trimmed::broken`] says what was wrong, so a watcher skips
/// it instead of failing its whole list or watch.
#[derive(Clone, Debug)]
pub struct Trimmed<K> {
    inner: K,
    broken: Option<String>,
}

/// Objects that did not decode as their type, since the process started.
static UNDECODABLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many watched objects did not decode as their type.
pub fn undecodable_total() -> u64 {
    UNDECODABLE.load(std::sync::atomic::Ordering::Relaxed)
}

impl<K> Trimmed<K> {
    /// The object.
    pub fn into_inner(self) -> K {
        self.inner
    }

    /// Why the object did not decode as its type, if it did not.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
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

/// The parts of an object, kept raw until each is decoded on its own.
#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    metadata: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    spec: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    status: Option<Box<serde_json::value::RawValue>>,
}

/// What is kept of metadata that does not decode: the identity fields,
/// when they are strings.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Identity {
    name: Option<serde_json::Value>,
    namespace: Option<serde_json::Value>,
    uid: Option<serde_json::Value>,
    resource_version: Option<serde_json::Value>,
}

fn string(v: Option<serde_json::Value>) -> Option<String> {
    match v {
        Some(serde_json::Value::String(s)) => Some(s),
        _ => None,
    }
}

/// Decodes one raw part; `None` for an absent or null part.
fn part<T: DeserializeOwned>(
    raw: Option<&serde_json::value::RawValue>,
    what: &str,
    broken: &mut Option<String>,
) -> Option<T> {
    let raw = raw?;
    match serde_json::from_str::<Option<T>>(raw.get()) {
        Ok(v) => v,
        Err(e) => {
            broken.get_or_insert_with(|| format!("{what}: {e}"));
            None
        }
    }
}

impl<'de, K: Parts> Deserialize<'de> for Trimmed<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        let mut broken = None;
        let meta: ObjectMeta = match part::<Meta>(w.metadata.as_deref(), "metadata", &mut broken) {
            Some(m) => m.into(),
            None if broken.is_some() => {
                let id: Identity = w
                    .metadata
                    .as_deref()
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or_default();
                ObjectMeta {
                    name: string(id.name),
                    namespace: string(id.namespace),
                    uid: string(id.uid),
                    resource_version: string(id.resource_version),
                    ..ObjectMeta::default()
                }
            }
            None => ObjectMeta::default(),
        };
        let spec = part::<K::Spec>(w.spec.as_deref(), "spec", &mut broken);
        let status = part::<K::Status>(w.status.as_deref(), "status", &mut broken);
        if broken.is_some() {
            UNDECODABLE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(Trimmed {
                inner: K::from_parts(meta, None, None),
                broken,
            });
        }
        Ok(Trimmed {
            inner: K::from_parts(meta, spec, status),
            broken,
        })
    }
}

/// What [`untrim`] makes of a changed object that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Forget it, as if deleted, rather than keep an older version (the
    /// scheduler: a pod it cannot read should not hold a node's room).
    Forget,
    /// Skip the change and keep the version last seen (a node agent: a pod
    /// it cannot read is not a pod to stop).
    Keep,
}

/// A watcher's event as `K`. An object that does not decode as its type
/// is skipped with a warning naming `what` (counted in
/// [`undecodable_total`]): an initial one is left out, so it counts as
/// gone; a changed one goes as `broken` says.
pub fn untrim<K>(
    event: kube::runtime::watcher::Event<Trimmed<K>>,
    what: &str,
    broken: Broken,
) -> Option<kube::runtime::watcher::Event<K>>
where
    K: Parts + k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    use kube::runtime::watcher::Event;
    let skip = |o: &Trimmed<K>| {
        let why = o.broken()?;
        let meta = k8s_openapi::Metadata::metadata(&o.inner);
        tracing::warn!(
            watch = what,
            namespace = meta.namespace.as_deref().unwrap_or(""),
            name = meta.name.as_deref().unwrap_or(""),
            error = why,
            "skipping an object that does not decode as its type"
        );
        Some(())
    };
    Some(match event {
        Event::Apply(o) if skip(&o).is_some() => match broken {
            Broken::Forget => Event::Delete(o.into_inner()),
            Broken::Keep => return None,
        },
        Event::InitApply(o) if skip(&o).is_some() => return None,
        Event::Apply(o) => Event::Apply(o.into_inner()),
        Event::Delete(o) => Event::Delete(o.into_inner()),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.into_inner()),
        Event::InitDone => Event::InitDone,
    })
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
        self.inner.metadata()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.inner.metadata_mut()
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
        let trimmed: Trimmed<Pod> = decode(pod);
        assert_eq!(trimmed.broken(), None);
        let mut want = full;
        want.metadata.managed_fields = None;
        assert_eq!(trimmed.into_inner(), want);

        let node: Trimmed<Node> = decode(json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}, "managedFields": []},
            "spec": {"unschedulable": true},
            "status": {"allocatable": {"cpu": "4"}},
        }));
        let node = node.into_inner();
        assert_eq!(node.metadata.name.as_deref(), Some("n1"));
        assert_eq!(node.metadata.managed_fields, None);
        assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true));

        // Missing and null parts decode as absent, as with the full type.
        let bare: Trimmed<Pod> = decode(json!({"metadata": null}));
        assert_eq!(bare.into_inner(), Pod::default());
    }

    #[test]
    fn untrim_forgets_or_keeps_a_broken_change_and_leaves_out_a_broken_list_item() {
        use kube::runtime::watcher::Event;
        let good = || decode::<Pod>(json!({"metadata": {"name": "ok"}}));
        let bad = || decode::<Pod>(json!({"metadata": {"name": "bad"}, "spec": 3}));
        let name = |e: Option<Event<Pod>>| match e {
            Some(Event::Apply(p)) => format!("apply {}", p.metadata.name.unwrap_or_default()),
            Some(Event::Delete(p)) => format!("delete {}", p.metadata.name.unwrap_or_default()),
            Some(Event::InitApply(p)) => format!("init {}", p.metadata.name.unwrap_or_default()),
            Some(_) => "marker".into(),
            None => "skipped".into(),
        };
        for broken in [Broken::Forget, Broken::Keep] {
            assert_eq!(name(untrim(Event::Apply(good()), "t", broken)), "apply ok");
            assert_eq!(
                name(untrim(Event::InitApply(bad()), "t", broken)),
                "skipped"
            );
            assert_eq!(
                name(untrim(Event::Delete(bad()), "t", broken)),
                "delete bad"
            );
            assert_eq!(name(untrim(Event::InitDone, "t", broken)), "marker");
        }
        assert_eq!(
            name(untrim(Event::Apply(bad()), "t", Broken::Forget)),
            "delete bad"
        );
        assert_eq!(
            name(untrim(Event::Apply(bad()), "t", Broken::Keep)),
            "skipped"
        );
    }

    fn decode<K: Parts>(v: serde_json::Value) -> Trimmed<K> {
        serde_json::from_slice(&serde_json::to_vec(&v).unwrap()).unwrap()
    }

    #[test]
    fn objects_of_the_wrong_shape_keep_their_identity_and_say_why() {
        let before = undecodable_total();
        let bad: Trimmed<Pod> = decode(json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u", "resourceVersion": "9",
                "labels": {"v": 1}},
            "spec": {"containers": []},
        }));
        assert!(
            bad.broken().unwrap().starts_with("metadata: "),
            "{:?}",
            bad.broken()
        );
        let pod = bad.into_inner();
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(pod.spec, None);
        let bad: Trimmed<Pod> = decode(json!({"metadata": {"name": "q"}, "spec": 3}));
        assert!(bad.broken().unwrap().starts_with("spec: "));
        assert!(undecodable_total() >= before + 2);
        // Inside a list and a watch event, as kube-rs decodes them.
        let list: kube::core::ObjectList<Trimmed<Pod>> = serde_json::from_str(
            r#"{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"a","labels":{"v":1}}},{"metadata":{"name":"b"}}]}"#,
        )
        .unwrap();
        assert_eq!(list.items.len(), 2);
        assert!(list.items[0].broken().is_some() && list.items[1].broken().is_none());
        let ev: kube::core::WatchEvent<Trimmed<Pod>> = serde_json::from_str(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","labels":{"v":1}},"spec":"x"}}"#,
        )
        .unwrap();
        assert!(matches!(ev, kube::core::WatchEvent::Added(p) if p.broken().is_some()));
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
