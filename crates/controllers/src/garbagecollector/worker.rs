//! The garbage collector's workers: attempt-to-delete (look the owners of
//! an object up, then keep it, drop references, or delete it; finish an
//! owner's foreground deletion) and attempt-to-orphan (remove the
//! references to an owner from its dependents, then its `orphan`
//! finalizer). Everything is read and written as metadata through the
//! API; an owner is looked up where it can live (a namespaced owner in
//! its dependent's namespace) and counts as absent when the object there
//! has another uid.
//!
//! This module owns the requests; the decisions are `decide`'s.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    DeleteParams, DynamicObject, PartialObjectMeta, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use kube::Api;
use serde_json::json;
use skiff_client::recorder::EventType;
use skiff_client::{is_conflict, is_not_found};
use tokio::sync::watch;

use super::decide::{self, Decision, OwnerState, Policy};
use super::discovery::Served;
use super::graph::{refers_to, Facts, Identity, FOREGROUND, ORPHAN};
use super::Shared;
use crate::runner::Chain;

/// Errors of one attempt (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Discovery does not (yet) know the kind.
    #[error("unable to get REST mapping for {api_version}/{kind}")]
    UnknownKind {
        /// apiVersion.
        api_version: String,
        /// kind.
        kind: String,
    },
    /// A request failed.
    #[error("{what} {identity}")]
    Request {
        /// What was asked.
        what: &'static str,
        /// About which object.
        identity: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Conflicts kept coming.
    #[error("{identity} kept changing")]
    Conflicts {
        /// The object.
        identity: String,
    },
}

/// A cluster-scoped object naming a namespaced owner: an error retrying
/// cannot mend (upstream's namespacedOwnerOfClusterScopedObjectErr).
struct InvalidOwner;

fn request<'a>(
    what: &'static str,
    identity: &'a Identity,
) -> impl FnOnce(kube::Error) -> Error + 'a {
    move |source| Error::Request {
        what,
        identity: identity.to_string(),
        source,
    }
}

async fn wait_synced(shared: &Shared, mut synced: watch::Receiver<bool>) {
    let waited = tokio::time::timeout(shared.sync_timeout, synced.wait_for(|s| *s)).await;
    if waited.is_err() {
        tracing::warn!("garbage collector: not all resource monitors synced; proceeding anyway");
    }
}

/// Works the attempt-to-delete queue.
pub(super) async fn deleter(shared: Arc<Shared>, synced: watch::Receiver<bool>) {
    wait_synced(&shared, synced).await;
    let failures = &shared.delete_failures;
    loop {
        let uid = shared.attempt_to_delete.next().await;
        match attempt_to_delete(&shared, &uid).await {
            Ok(()) => failures.forget(&uid),
            Err(e) => {
                tracing::debug!(uid, error = %Chain(&e), "garbage collector: attempt to delete failed");
                requeue(&shared, uid.clone(), failures.next_delay(&uid), false);
            }
        }
        shared.attempt_to_delete.done(&uid);
    }
}

/// Works the attempt-to-orphan queue.
pub(super) async fn orphaner(shared: Arc<Shared>, synced: watch::Receiver<bool>) {
    wait_synced(&shared, synced).await;
    let failures = &shared.orphan_failures;
    loop {
        let uid = shared.attempt_to_orphan.next().await;
        match attempt_to_orphan(&shared, &uid).await {
            Ok(()) => failures.forget(&uid),
            Err(e) => {
                tracing::debug!(uid, error = %Chain(&e), "garbage collector: orphaning failed");
                requeue(&shared, uid.clone(), failures.next_delay(&uid), true);
            }
        }
        shared.attempt_to_orphan.done(&uid);
    }
}

fn requeue(shared: &Arc<Shared>, uid: String, after: Duration, orphan: bool) {
    let shared = Arc::downgrade(shared);
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        if let Some(shared) = shared.upgrade() {
            if orphan {
                shared.attempt_to_orphan.add(uid);
            } else {
                shared.attempt_to_delete.add(uid);
            }
        }
    });
}

fn resolve(shared: &Shared, api_version: &str, kind: &str) -> Result<Served, Error> {
    shared
        .resources()
        .resolve(api_version, kind)
        .cloned()
        .ok_or_else(|| Error::UnknownKind {
            api_version: api_version.into(),
            kind: kind.into(),
        })
}

fn api_of(shared: &Shared, identity: &Identity) -> Result<Api<DynamicObject>, Error> {
    let served = resolve(shared, &identity.api_version, &identity.kind)?;
    Ok(served.api(&shared.client, &identity.namespace))
}

/// The object's current metadata, `None` when it is gone or another
/// object now has its name.
async fn latest(
    api: &Api<DynamicObject>,
    identity: &Identity,
) -> Result<Option<PartialObjectMeta<DynamicObject>>, Error> {
    let found = api
        .get_metadata_opt(&identity.name)
        .await
        .map_err(request("getting", identity))?;
    Ok(found.filter(|m| m.metadata.uid.as_deref() == Some(identity.uid.as_str())))
}

async fn attempt_to_delete(shared: &Shared, uid: &str) -> Result<(), Error> {
    let identity = {
        let graph = shared.graph();
        let Some(node) = graph.observed(uid) else {
            return Ok(());
        };
        if node.facts.being_deleted && !node.facts.deleting_dependents() {
            return Ok(());
        }
        node.identity.clone()
    };
    let api = api_of(shared, &identity)?;
    let Some(latest) = latest(&api, &identity).await? else {
        return Ok(());
    };
    let facts = Facts::of(&latest.metadata);
    if facts.deleting_dependents() {
        return finish_foreground(shared, &api, &identity).await;
    }
    if facts.being_deleted || facts.owners.is_empty() {
        return Ok(());
    }
    let mut owners = Vec::new();
    for owner in &facts.owners {
        match classify(shared, &identity, owner).await? {
            Ok(state) => owners.push((owner.uid.clone(), state)),
            Err(InvalidOwner) => return Ok(()),
        }
    }
    let (has_dependents, dependent_deleting_dependents) = {
        let graph = shared.graph();
        let dependents = graph.dependents(uid);
        (
            !dependents.is_empty(),
            dependents.iter().any(|d| d.facts.deleting_dependents()),
        )
    };
    let rv = latest.metadata.resource_version.clone().unwrap_or_default();
    match decide::attempt_to_delete(
        &facts,
        &owners,
        has_dependents,
        dependent_deleting_dependents,
    ) {
        Decision::Keep => Ok(()),
        Decision::RemoveReferences(uids) => {
            tracing::debug!(object = %identity, owners = ?uids, "garbage collector: removing references to absent or deleting owners");
            let remaining: Vec<&OwnerReference> = facts
                .owners
                .iter()
                .filter(|o| !uids.contains(&o.uid))
                .collect();
            patch_owners(&api, &identity, &remaining, &rv)
                .await
                .map(drop)
        }
        Decision::Delete {
            policy,
            unblock_first,
        } => {
            let mut rv = rv;
            if unblock_first {
                let unblocked: Vec<OwnerReference> = facts
                    .owners
                    .iter()
                    .cloned()
                    .map(|mut o| {
                        if o.block_owner_deletion == Some(true) {
                            o.block_owner_deletion = Some(false);
                        }
                        o
                    })
                    .collect();
                let refs: Vec<&OwnerReference> = unblocked.iter().collect();
                rv = patch_owners(&api, &identity, &refs, &rv).await?;
            }
            delete(&api, &identity, &rv, policy).await
        }
    }
}

/// What `owner` of `dependent` is.
async fn classify(
    shared: &Shared,
    dependent: &Identity,
    owner: &OwnerReference,
) -> Result<Result<OwnerState, InvalidOwner>, Error> {
    let served = resolve(shared, &owner.api_version, &owner.kind)?;
    if served.namespaced && dependent.namespace.is_empty() {
        report_invalid(shared, dependent, owner);
        return Ok(Err(InvalidOwner));
    }
    let namespace = if served.namespaced {
        dependent.namespace.as_str()
    } else {
        ""
    };
    // The graph's copy when it is that very object.
    let elsewhere = {
        let graph = shared.graph();
        match graph.observed(&owner.uid) {
            Some(n)
                if n.identity.namespace == namespace
                    && refers_to(owner, &n.identity, namespace) =>
            {
                return Ok(Ok(state_of(&n.facts)));
            }
            Some(_) => true,
            None => false,
        }
    };
    let api = served.api(&shared.client, namespace);
    let id = Identity {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        namespace: namespace.into(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
    };
    let state = match latest(&api, &id).await? {
        Some(m) => state_of(&Facts::of(&m.metadata)),
        None => {
            if elsewhere {
                report_invalid(shared, dependent, owner);
            }
            OwnerState::Dangling
        }
    };
    Ok(Ok(state))
}

fn state_of(facts: &Facts) -> OwnerState {
    if facts.deleting_dependents() {
        OwnerState::Waiting
    } else {
        OwnerState::Solid
    }
}

/// upstream's OwnerRefInvalidNamespace warning on the dependent.
fn report_invalid(shared: &Shared, dependent: &Identity, owner: &OwnerReference) {
    let invalid = Identity {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        namespace: dependent.namespace.clone(),
        name: owner.name.clone(),
        uid: owner.uid.clone(),
    };
    let reference = ObjectReference {
        api_version: Some(dependent.api_version.clone()),
        kind: Some(dependent.kind.clone()),
        namespace: (!dependent.namespace.is_empty()).then(|| dependent.namespace.clone()),
        name: Some(dependent.name.clone()),
        uid: Some(dependent.uid.clone()),
        ..Default::default()
    };
    shared.recorder.record_for(
        &reference,
        EventType::Warning,
        "OwnerRefInvalidNamespace",
        "",
        &format!(
            "ownerRef {invalid} does not exist in namespace {:?}",
            dependent.namespace
        ),
    );
}

/// Writes `owners` as the object's ownerReferences (at `rv`); returns
/// the new resourceVersion.
async fn patch_owners(
    api: &Api<DynamicObject>,
    identity: &Identity,
    owners: &[&OwnerReference],
    rv: &str,
) -> Result<String, Error> {
    let refs = if owners.is_empty() {
        serde_json::Value::Null
    } else {
        json!(owners)
    };
    let patch = json!({"metadata": {"ownerReferences": refs, "resourceVersion": rv}});
    let patched = api
        .patch_metadata(
            &identity.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(request("patching the ownerReferences of", identity))?;
    Ok(patched.metadata.resource_version.unwrap_or_default())
}

async fn delete(
    api: &Api<DynamicObject>,
    identity: &Identity,
    rv: &str,
    policy: Policy,
) -> Result<(), Error> {
    tracing::debug!(object = %identity, policy = policy.as_str(), "garbage collector: deleting");
    let params = DeleteParams {
        propagation_policy: Some(match policy {
            Policy::Background => PropagationPolicy::Background,
            Policy::Foreground => PropagationPolicy::Foreground,
            Policy::Orphan => PropagationPolicy::Orphan,
        }),
        preconditions: Some(Preconditions {
            uid: Some(identity.uid.clone()),
            resource_version: (!rv.is_empty()).then(|| rv.to_string()),
        }),
        ..DeleteParams::default()
    };
    match api.delete(&identity.name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(request("deleting", identity)(e)),
    }
}

/// An owner deleting in the foreground: its finalizer goes once no
/// blocking dependent is left, else the blocking ones are attempted.
async fn finish_foreground(
    shared: &Shared,
    api: &Api<DynamicObject>,
    identity: &Identity,
) -> Result<(), Error> {
    let blocking: Vec<(String, bool)> = shared
        .graph()
        .blocking_dependents(&identity.uid)
        .iter()
        .map(|d| (d.identity.uid.clone(), d.facts.deleting_dependents()))
        .collect();
    match decide::foreground_step(&blocking) {
        None => remove_finalizer(api, identity, FOREGROUND).await,
        Some(dependents) => {
            for uid in dependents {
                shared.attempt_to_delete.add(uid);
            }
            Ok(())
        }
    }
}

/// Conflicts tolerated in a row before giving the work back to the queue.
const CONFLICT_RETRIES: usize = 5;

/// Removes `finalizer` from the object, re-reading it on conflicts.
async fn remove_finalizer(
    api: &Api<DynamicObject>,
    identity: &Identity,
    finalizer: &str,
) -> Result<(), Error> {
    for _ in 0..CONFLICT_RETRIES {
        let Some(latest) = latest(api, identity).await? else {
            return Ok(());
        };
        let finalizers = latest.metadata.finalizers.unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = json!({"metadata": {
            "finalizers": kept,
            "resourceVersion": latest.metadata.resource_version,
        }});
        match api
            .patch_metadata(
                &identity.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(request("removing a finalizer of", identity)(e)),
        }
    }
    Err(Error::Conflicts {
        identity: identity.to_string(),
    })
}

/// Removes the references to `owner` from `dependent`.
async fn release(shared: &Shared, dependent: &Identity, owner: &str) -> Result<(), Error> {
    let api = api_of(shared, dependent)?;
    for _ in 0..CONFLICT_RETRIES {
        let Some(latest) = latest(&api, dependent).await? else {
            return Ok(());
        };
        let owners = latest.metadata.owner_references.unwrap_or_default();
        let remaining: Vec<&OwnerReference> = owners.iter().filter(|o| o.uid != owner).collect();
        if remaining.len() == owners.len() {
            return Ok(());
        }
        let rv = latest.metadata.resource_version.unwrap_or_default();
        match patch_owners(&api, dependent, &remaining, &rv).await {
            Ok(_) => return Ok(()),
            Err(Error::Request { source, .. }) if is_not_found(&source) => return Ok(()),
            Err(Error::Request { source, .. }) if is_conflict(&source) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Conflicts {
        identity: dependent.to_string(),
    })
}

async fn attempt_to_orphan(shared: &Shared, uid: &str) -> Result<(), Error> {
    let (identity, dependents) = {
        let graph = shared.graph();
        let Some(node) = graph.observed(uid) else {
            return Ok(());
        };
        let dependents: Vec<Identity> = graph
            .dependents(uid)
            .iter()
            .filter(|d| !d.virtual_)
            .map(|d| d.identity.clone())
            .collect();
        (node.identity.clone(), dependents)
    };
    for dependent in &dependents {
        release(shared, dependent, uid).await?;
    }
    let api = api_of(shared, &identity)?;
    remove_finalizer(&api, &identity, ORPHAN).await
}
