//! The writes of a StatefulSet sync with their events (upstream's
//! `StatefulPodControl`): pods and their claims created, pods deleted,
//! identity labels and claim owners put right; and the claim facts the
//! plan asks about, read from the informer's store.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use serde_json::json;
use skiff_client::recorder::{reference_to, EventType};

use super::{conflict, identity, not_found, write, Error, State};

/// Whether a pod's claims carry the owners the policy asks for (and, for
/// a pending pod, all exist).
pub(super) fn claims_ok(
    store: &Store<PersistentVolumeClaim>,
    set: &StatefulSet,
    pod: &Pod,
) -> bool {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let ns = set.metadata.namespace.as_deref().unwrap_or_default();
    let Some(ordinal) = identity::ordinal_of(name, pod) else {
        return true;
    };
    let pending = crate::workload::pods::phase(pod) == "Pending";
    identity::claims(set, ordinal).values().all(|want| {
        let claim_name = want.metadata.name.as_deref().unwrap_or_default();
        match store.get(&ObjectRef::new(claim_name).within(ns)) {
            None => !pending,
            Some(claim) => identity::claim_owners(&claim, set, pod).is_none(),
        }
    })
}

/// Whether a claim of the pod with `ordinal` (not existing now) still has
/// an older pod of that name as owner (upstream's `PodClaimIsStale`).
pub(super) fn claims_stale(
    store: &Store<PersistentVolumeClaim>,
    set: &StatefulSet,
    ordinal: i32,
) -> bool {
    let ns = set.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = identity::pod_name(set, ordinal);
    identity::claims(set, ordinal).values().any(|want| {
        let claim_name = want.metadata.name.as_deref().unwrap_or_default();
        store
            .get(&ObjectRef::new(claim_name).within(ns))
            .is_some_and(|c| {
                c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.kind == "Pod" && r.name == pod_name)
            })
    })
}

/// The writes of one sync, with their events.
pub(super) struct Writer<'a> {
    pub(super) state: &'a State,
    pub(super) set: &'a StatefulSet,
    pub(super) key: &'a str,
    pub(super) pod_api: &'a Api<Pod>,
}

impl Writer<'_> {
    fn set_name(&self) -> &str {
        self.set.metadata.name.as_deref().unwrap_or_default()
    }

    /// Upstream's `recordPodEvent`.
    fn pod_event(&self, verb: &str, pod: &str, err: Option<&kube::Error>) {
        let title = format!("{}{}", verb[..1].to_uppercase(), &verb[1..]);
        let reference = reference_to(self.set);
        let set = self.set_name();
        match err {
            None => self.state.recorder.record_for(
                &reference,
                EventType::Normal,
                &format!("Successful{title}"),
                &title,
                &format!("{verb} Pod {pod} in StatefulSet {set} successful"),
            ),
            Some(e) => self.state.recorder.record_for(
                &reference,
                EventType::Warning,
                &format!("Failed{title}"),
                &title,
                &format!("{verb} Pod {pod} in StatefulSet {set} failed error: {e}"),
            ),
        }
    }

    /// Upstream's `recordClaimEvent`.
    fn claim_event(&self, claim: &str, pod: &str, err: Option<&kube::Error>) {
        let reference = reference_to(self.set);
        let set = self.set_name();
        match err {
            None => self.state.recorder.record_for(
                &reference,
                EventType::Normal,
                "SuccessfulCreate",
                "Create",
                &format!("create Claim {claim} Pod {pod} in StatefulSet {set} success"),
            ),
            Some(e) => self.state.recorder.record_for(
                &reference,
                EventType::Warning,
                "FailedCreate",
                "Create",
                &format!(
                    "create Claim {claim} for Pod {pod} in StatefulSet {set} failed error: {e}"
                ),
            ),
        }
    }

    /// Creates the claims of the pod with `ordinal` that are missing;
    /// returns them all.
    async fn ensure_claims(
        &self,
        ordinal: i32,
        pod_name: &str,
    ) -> Result<Vec<PersistentVolumeClaim>, Error> {
        let ns = self.set.metadata.namespace.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.state.context.client.clone(), &ns);
        let mut out = Vec::new();
        for want in identity::claims(self.set, ordinal).into_values() {
            let claim_name = want.metadata.name.clone().unwrap_or_default();
            if let Some(existing) = self
                .state
                .claims
                .get(&ObjectRef::new(&claim_name).within(&ns))
            {
                if existing.metadata.deletion_timestamp.is_some() {
                    return Err(Error::ClaimDeleting(claim_name));
                }
                out.push((*existing).clone());
                continue;
            }
            match api.create(&PostParams::default(), &want).await {
                Ok(created) => {
                    self.claim_event(&claim_name, pod_name, None);
                    out.push(created);
                }
                Err(e) if conflict(&e) => {
                    if let Ok(existing) = api.get(&claim_name).await {
                        out.push(existing);
                    }
                }
                Err(e) => {
                    self.claim_event(&claim_name, pod_name, Some(&e));
                    return Err(write(format!("failed to create PVC {claim_name}"))(e));
                }
            }
        }
        Ok(out)
    }

    /// Puts a claim's owner references right for `pod`.
    async fn own_claims(&self, claims: &[PersistentVolumeClaim], pod: &Pod) -> Result<(), Error> {
        let ns = self.set.metadata.namespace.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.state.context.client.clone(), &ns);
        for claim in claims {
            let Some(refs) = identity::claim_owners(claim, self.set, pod) else {
                continue;
            };
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            let refs = if refs.is_empty() {
                json!(null)
            } else {
                json!(refs)
            };
            let patch = json!({"metadata": {
                "ownerReferences": refs,
                "resourceVersion": claim.metadata.resource_version,
            }});
            match api
                .patch(&claim_name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Err(e) if !not_found(&e) => {
                    return Err(write(format!(
                        "updating the owners of PVC {ns}/{claim_name}"
                    ))(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) async fn create(&mut self, pod: Pod, ordinal: i32) -> Result<(), Error> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let claims = match self.ensure_claims(ordinal, &pod_name).await {
            Ok(c) => c,
            Err(e) => {
                if let Error::Write { source, .. } = &e {
                    self.pod_event("create", &pod_name, Some(source));
                }
                return Err(e);
            }
        };
        match self.pod_api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                self.state
                    .expectations
                    .expect(self.key, [pod_name.clone()], []);
                self.pod_event("create", &pod_name, None);
                self.own_claims(&claims, &created).await
            }
            Err(e) if conflict(&e) => Ok(()),
            Err(e) => {
                self.pod_event("create", &pod_name, Some(&e));
                Err(write(format!("creating pod {pod_name}"))(e))
            }
        }
    }

    pub(super) async fn delete(&mut self, pod: &Pod) -> Result<(), Error> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        match self
            .pod_api
            .delete(&pod_name, &DeleteParams::default())
            .await
        {
            Ok(_) => {
                self.state
                    .expectations
                    .expect(self.key, [], [(pod_name.clone(), uid)]);
                self.pod_event("delete", &pod_name, None);
                Ok(())
            }
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => {
                self.pod_event("delete", &pod_name, Some(&e));
                Err(write(format!("deleting pod {pod_name}"))(e))
            }
        }
    }

    pub(super) async fn fix_identity(&mut self, pod: &Pod) -> Result<(), Error> {
        let Some(labels) = identity::identity_fix(self.set, pod) else {
            return Ok(());
        };
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let patch = json!({"metadata": {"labels": labels, "resourceVersion": pod.metadata.resource_version}});
        match self
            .pod_api
            .patch(&pod_name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                self.pod_event("update", &pod_name, None);
                Ok(())
            }
            Err(e) if not_found(&e) || conflict(&e) => Ok(()),
            Err(e) => {
                self.pod_event("update", &pod_name, Some(&e));
                Err(write(format!("updating pod {pod_name}"))(e))
            }
        }
    }

    pub(super) async fn fix_claims(&mut self, pod: &Pod) -> Result<(), Error> {
        let name = self.set_name().to_string();
        let Some(ordinal) = identity::ordinal_of(&name, pod) else {
            return Ok(());
        };
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let claims = self.ensure_claims(ordinal, &pod_name).await?;
        self.own_claims(&claims, pod).await
    }
}
