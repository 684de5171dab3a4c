//! Controller references (upstream's `ControllerRefManager`): which of a
//! namespace's objects an owner controls, which orphans it adopts (they
//! match its selector and nobody controls them) and which it releases
//! (it controls them but they no longer match), and the writes that adopt
//! and release, each a merge PATCH guarded by the object's
//! resourceVersion so a concurrent change is never overwritten.
//!
//! [`plan`] is pure; [`adopt`] and [`release`] write.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde_json::json;
use skiff_client::selectors::Selector;

/// The controller reference of an object (`controller: true`), if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// Whether `meta` is controlled by the object with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

/// The owners of kind `K` a change of the object with `meta` concerns:
/// its controller when that is a `K`; for an orphan, every `K` of its
/// namespace whose selector (`selector`: none when invalid) is not empty
/// and matches it, since that owner may adopt it.
pub fn owners_of<K>(
    owners: &Store<K>,
    meta: &ObjectMeta,
    selector: impl Fn(&K) -> Option<Selector>,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let ns = meta.namespace.as_deref().unwrap_or_default();
    if let Some(owner) = controller_of(meta) {
        return if owner.kind == K::kind(&()) {
            vec![ObjectRef::new(&owner.name).within(ns)]
        } else {
            Vec::new()
        };
    }
    owners
        .state()
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(ns))
        .filter(|o| {
            selector(o).is_some_and(|sel| !sel.is_empty() && sel.matches(meta.labels.as_ref()))
        })
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// A controller reference to `owner` (`controller` and
/// `blockOwnerDeletion` true, as every workload controller sets them).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What an owner does with the candidates of its namespace.
#[derive(Debug)]
pub struct Claim<T> {
    /// Controlled and matching: the owner's.
    pub owned: Vec<Arc<T>>,
    /// Orphans that match: to adopt (then the owner's).
    pub adopt: Vec<Arc<T>>,
    /// Controlled but no longer matching: to release.
    pub release: Vec<Arc<T>>,
}

/// Sorts `candidates` for the owner with `owner_uid` and `selector`
/// (upstream's `ClaimObject`): an owner being deleted adopts and releases
/// nothing, and objects being deleted are not adopted.
pub fn plan<T: Resource>(
    candidates: impl IntoIterator<Item = Arc<T>>,
    owner_uid: &str,
    selector: &Selector,
    owner_deleting: bool,
) -> Claim<T> {
    let mut claim = Claim {
        owned: Vec::new(),
        adopt: Vec::new(),
        release: Vec::new(),
    };
    for object in candidates {
        let meta = object.meta();
        let matches = selector.matches(meta.labels.as_ref());
        match controller_of(meta) {
            Some(r) if r.uid != owner_uid => {}
            Some(_) if matches => claim.owned.push(object),
            Some(_) if owner_deleting => {}
            Some(_) => claim.release.push(object),
            None if !matches || owner_deleting || meta.deletion_timestamp.is_some() => {}
            None => claim.adopt.push(object),
        }
    }
    claim
}

/// Makes `owner` the controller of `object` (still an orphan at its
/// resourceVersion): its other owner references are kept.
pub async fn adopt<T>(api: &Api<T>, object: &T, owner: OwnerReference) -> kube::Result<T>
where
    T: Resource + Clone + DeserializeOwned + Debug,
{
    let meta = object.meta();
    let mut refs = meta.owner_references.clone().unwrap_or_default();
    refs.retain(|r| r.uid != owner.uid);
    refs.push(owner);
    patch_owners(api, meta, refs).await
}

/// Removes the reference to the owner with `owner_uid` from `object`.
pub async fn release<T>(api: &Api<T>, object: &T, owner_uid: &str) -> kube::Result<T>
where
    T: Resource + Clone + DeserializeOwned + Debug,
{
    let meta = object.meta();
    let mut refs = meta.owner_references.clone().unwrap_or_default();
    refs.retain(|r| r.uid != owner_uid);
    patch_owners(api, meta, refs).await
}

async fn patch_owners<T>(
    api: &Api<T>,
    meta: &ObjectMeta,
    refs: Vec<OwnerReference>,
) -> kube::Result<T>
where
    T: Resource + Clone + DeserializeOwned + Debug,
{
    let refs = if refs.is_empty() {
        serde_json::Value::Null
    } else {
        json!(refs)
    };
    let patch = json!({
        "metadata": {
            "ownerReferences": refs,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
        }
    });
    api.patch(
        meta.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn pod(name: &str, app: &str, controller: Option<&str>) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                owner_references: controller.map(|uid| {
                    vec![OwnerReference {
                        uid: uid.into(),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<&str> {
        pods.iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect()
    }

    #[test]
    fn owned_orphans_and_strays_are_told_apart() {
        let selector = Selector::from_set(&[("app".to_string(), "web".to_string())].into());
        let mut deleting = (*pod("deleting-orphan", "web", None)).clone();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        let candidates = vec![
            pod("mine", "web", Some("me")),
            pod("orphan", "web", None),
            pod("other-app-orphan", "db", None),
            pod("strayed", "db", Some("me")),
            pod("someone-elses", "web", Some("other")),
            Arc::new(deleting),
        ];
        let claim = plan(candidates.clone(), "me", &selector, false);
        assert_eq!(names(&claim.owned), ["mine"]);
        assert_eq!(names(&claim.adopt), ["orphan"]);
        assert_eq!(names(&claim.release), ["strayed"]);
        // An owner being deleted neither adopts nor releases.
        let claim = plan(candidates, "me", &selector, true);
        assert_eq!(names(&claim.owned), ["mine"]);
        assert!(claim.adopt.is_empty() && claim.release.is_empty());
    }
}
