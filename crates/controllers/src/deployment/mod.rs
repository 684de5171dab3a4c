//! The Deployment controller (upstream's `deployment`, component
//! `deployment-controller`): a Deployment owns ReplicaSets, one per pod
//! template (named `<deployment>-<pod-template-hash>`); it rolls from the
//! old ones to the new one with RollingUpdate ([`plan::rolling_new`],
//! [`plan::rolling_old`]) or Recreate, scales them in proportion when
//! spec.replicas changes mid-rollout, stops rolling while paused, keeps
//! revisionHistoryLimit old ReplicaSets, numbers revisions in the
//! `deployment.kubernetes.io/*` annotations that `kubectl rollout
//! history|undo` read, and reports progress in its status and conditions
//! ([`progress`]). Events: ScalingReplicaSet, FailedCreate, SelectingAll.
//!
//! This module owns the reconcile and its writes; the arithmetic is in
//! [`sets`], [`plan`] and [`progress`]. It never touches pods: the
//! ReplicaSet controller makes each ReplicaSet's pods.

pub mod plan;
pub mod progress;
pub mod sets;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};
use serde_json::json;
use skiff_client::informer::Change;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use skiff_client::selectors::Selector;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner::{self, Failures};
use crate::workload::{ownership, pods};
use plan::Scale;
use sets::Set;

/// Concurrent syncs (upstream's --concurrent-deployment-syncs).
const WORKERS: u16 = 5;

/// Errors of one sync (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The selector does not parse.
    #[error("invalid selector")]
    Selector(#[source] skiff_client::selectors::SelectorError),
    /// A write to the API failed.
    #[error("{action} {name}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// Of what.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The new ReplicaSet's name is taken by another; the collision count
    /// went up and the next sync tries another hash.
    #[error("hash collision for replicaset {0}")]
    Collision(String),
}

fn api<'a>(action: &'static str, name: &'a str) -> impl FnOnce(kube::Error) -> Error + 'a {
    move |source| Error::Api {
        action,
        name: name.to_string(),
        source,
    }
}

struct State {
    context: Context,
    sets: Store<ReplicaSet>,
    pods: Store<Pod>,
    recorder: Recorder,
    failures: Failures,
}

/// Starts the Deployment controller.
pub(crate) fn start(context: Context, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let deployments = context.informers.get::<Deployment>();
        let replicasets = context.informers.get::<ReplicaSet>();
        let pods = context.informers.get::<Pod>();
        let orphan_store = deployments.store();
        let set_store = replicasets.store();
        // A Recreate waits for the old pods to be gone: their deletion
        // wakes the Deployment that owns their ReplicaSet.
        let deleted_pods = pods.changes().filter_map(|c| async move {
            match c {
                Change::Deleted(p) => Some(Ok((*p).clone())),
                _ => None,
            }
        });
        let controller = Controller::for_stream(deployments.objects(), deployments.store())
            .owns_stream(replicasets.objects())
            .watches_stream(replicasets.objects(), move |rs: ReplicaSet| {
                orphan_owners(&orphan_store, &rs)
            })
            .watches_stream(deleted_pods, move |pod: Pod| owner_of_pod(&set_store, &pod));
        let state = Arc::new(State {
            recorder: context.recorder("deployment-controller"),
            sets: replicasets.store(),
            pods: pods.store(),
            context,
            failures: Failures::default(),
        });
        replicasets.ready().await;
        pods.ready().await;
        runner::run(
            "deployment",
            &deployments,
            controller,
            WORKERS,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

/// The Deployments whose selector matches an orphaned ReplicaSet.
fn orphan_owners(deployments: &Store<Deployment>, rs: &ReplicaSet) -> Vec<ObjectRef<Deployment>> {
    if ownership::controller_of(&rs.metadata).is_some() {
        return Vec::new();
    }
    deployments
        .state()
        .iter()
        .filter(|d| d.metadata.namespace == rs.metadata.namespace)
        .filter(|d| {
            selector(d).is_ok_and(|s| !s.is_empty() && s.matches(rs.metadata.labels.as_ref()))
        })
        .map(|d| ObjectRef::from_obj(&**d))
        .collect()
}

/// The Deployment that controls the ReplicaSet that controls `pod`.
fn owner_of_pod(sets: &Store<ReplicaSet>, pod: &Pod) -> Option<ObjectRef<Deployment>> {
    let rs_ref = ownership::controller_of(&pod.metadata)?;
    if rs_ref.kind != "ReplicaSet" {
        return None;
    }
    let ns = pod.metadata.namespace.as_deref()?;
    let rs = sets.get(&ObjectRef::new(&rs_ref.name).within(ns))?;
    let d_ref = ownership::controller_of(&rs.metadata)?;
    (d_ref.kind == "Deployment").then(|| ObjectRef::new(&d_ref.name).within(ns))
}

fn selector(d: &Deployment) -> Result<Selector, skiff_client::selectors::SelectorError> {
    match d.spec.as_ref() {
        Some(spec) => Selector::from_label_selector(Some(&spec.selector)),
        None => Ok(Selector::nothing()),
    }
}

fn key(d: &Deployment) -> String {
    format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any())
}

/// One sync's view: the Deployment as last written, and its ReplicaSets.
struct Sync<'a> {
    state: &'a State,
    d: Deployment,
    sets: Vec<ReplicaSet>,
    rs_api: Api<ReplicaSet>,
    d_api: Api<Deployment>,
}

async fn reconcile(d: Arc<Deployment>, state: Arc<State>) -> Result<Action, Error> {
    let key = key(&d);
    let namespace = d.namespace().unwrap_or_default();
    let mut sync = Sync {
        state: &state,
        d: (*d).clone(),
        sets: Vec::new(),
        rs_api: Api::namespaced(state.context.client.clone(), &namespace),
        d_api: Api::namespaced(state.context.client.clone(), &namespace),
    };
    let selector = selector(&d).map_err(Error::Selector)?;
    if selector.is_empty() {
        state.recorder.record_for(
            &reference_to(&*d),
            EventType::Warning,
            "SelectingAll",
            "Sync",
            "This deployment is selecting all pods. A non-empty selector is required.",
        );
        let mut status = d.status.clone().unwrap_or_default();
        if status.observed_generation != d.metadata.generation {
            status.observed_generation = d.metadata.generation;
            sync.write_status(status).await?;
        }
        return Ok(Action::await_change());
    }
    sync.claim(&selector).await?;
    let action = if d.metadata.deletion_timestamp.is_some() {
        // Only the status, while it is being deleted.
        let (new, old) = sync.new_and_old(false).await?;
        sync.sync_status(new.as_ref(), &old, false).await?
    } else {
        if let Some(status) = progress::paused(&sync.d, Timestamp::now()) {
            sync.write_status(status).await?;
        }
        let paused = sync.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let (new, old) = sync.new_and_old(false).await?;
        if paused || plan::is_scaling_event(&sync.d, new.as_ref(), &old) {
            sync.scale_only(paused).await?
        } else if sets::is_rolling(&sync.d) {
            sync.rolling().await?
        } else {
            sync.recreate().await?
        }
    };
    state.failures.forget(&key);
    Ok(action)
}

impl Sync<'_> {
    /// The ReplicaSets this Deployment controls, adopting orphans that
    /// match and releasing those that stopped matching.
    async fn claim(&mut self, selector: &Selector) -> Result<(), Error> {
        let namespace = self.d.namespace();
        let uid = self.d.uid().unwrap_or_default();
        let candidates: Vec<Arc<ReplicaSet>> = self
            .state
            .sets
            .state()
            .into_iter()
            .filter(|rs| rs.metadata.namespace == namespace)
            .collect();
        let deleting = self.d.metadata.deletion_timestamp.is_some();
        let claim = ownership::plan(candidates, &uid, selector, deleting);
        self.sets = claim.owned.iter().map(|rs| (**rs).clone()).collect();
        if !claim.adopt.is_empty() && self.still_adoptable().await? {
            let reference = ownership::controller_ref(&self.d);
            for rs in claim.adopt {
                match ownership::adopt(&self.rs_api, &rs, reference.clone()).await {
                    Ok(adopted) => self.sets.push(adopted),
                    Err(e) if gone_or_changed(&e) => {}
                    Err(e) => return Err(api("adopting replicaset", &rs.name_any())(e)),
                }
            }
        }
        for rs in claim.release {
            match ownership::release(&self.rs_api, &rs, &uid).await {
                Ok(_) => {}
                Err(e) if gone_or_changed(&e) => {}
                Err(e) => return Err(api("releasing replicaset", &rs.name_any())(e)),
            }
        }
        Ok(())
    }

    async fn still_adoptable(&self) -> Result<bool, Error> {
        match self.d_api.get_opt(&self.d.name_any()).await {
            Ok(Some(fresh)) => Ok(fresh.metadata.uid == self.d.metadata.uid
                && fresh.metadata.deletion_timestamp.is_none()),
            Ok(None) => Ok(false),
            Err(e) => Err(api("reading deployment", &self.d.name_any())(e)),
        }
    }

    fn template(&self) -> k8s_openapi::api::core::v1::PodTemplateSpec {
        self.d
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default()
    }

    /// The new ReplicaSet (created now when `create` and missing) and the
    /// old ones, syncing the revision annotations (upstream's
    /// `getAllReplicaSetsAndSyncRevision`).
    async fn new_and_old(&mut self, create: bool) -> Result<(Option<Set>, Vec<Set>), Error> {
        let template = self.template();
        let mut by_age: Vec<&ReplicaSet> = self.sets.iter().collect();
        by_age.sort_by(|a, b| {
            a.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .cmp(&b.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let new_name = by_age
            .iter()
            .find(|rs| {
                rs.spec
                    .as_ref()
                    .and_then(|s| s.template.as_ref())
                    .is_some_and(|t| sets::same_template(t, &template))
            })
            .map(|rs| rs.name_any());
        let old: Vec<Set> = self
            .sets
            .iter()
            .filter(|rs| Some(rs.name_any()) != new_name)
            .map(Set::of)
            .collect();
        let revision = old.iter().map(Set::revision).max().unwrap_or(0) + 1;
        let now = Timestamp::now();
        if let Some(name) = new_name {
            let Some(rs) = self.sets.iter().find(|rs| rs.name_any() == name).cloned() else {
                return Ok((None, old));
            };
            let mut copy = rs.clone();
            let annotations = copy.metadata.annotations.get_or_insert_with(BTreeMap::new);
            let changed = sets::set_revision_annotations(&self.d, annotations, revision);
            let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let spec = copy.spec.get_or_insert_with(ReplicaSetSpec::default);
            let min_ready_changed = spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0);
            spec.min_ready_seconds = min_ready;
            let rs = if changed || min_ready_changed {
                let updated = self
                    .rs_api
                    .replace(&name, &PostParams::default(), &copy)
                    .await
                    .map_err(api("updating replicaset", &name))?;
                self.replace_set(updated.clone());
                updated
            } else {
                rs
            };
            let new = Set::of(&rs);
            self.set_deployment_revision(&new.revision().to_string())
                .await?;
            let status = self.d.status.clone().unwrap_or_default();
            if progress::get(&status, progress::PROGRESSING).is_none()
                && progress::deadline(&self.d).is_some()
            {
                let mut status = status;
                progress::set(
                    &mut status,
                    progress::condition(
                        progress::PROGRESSING,
                        "True",
                        progress::FOUND_NEW_RS,
                        &format!("Found new replica set {name:?}"),
                        now,
                    ),
                );
                self.write_status(status).await?;
            }
            return Ok((Some(new), old));
        }
        if !create {
            return Ok((None, old));
        }
        self.create_new(template, revision, old).await
    }

    /// Creates the ReplicaSet of the current template.
    async fn create_new(
        &mut self,
        template: k8s_openapi::api::core::v1::PodTemplateSpec,
        revision: i64,
        old: Vec<Set>,
    ) -> Result<(Option<Set>, Vec<Set>), Error> {
        let now = Timestamp::now();
        let collisions = self.d.status.as_ref().and_then(|s| s.collision_count);
        let hash = sets::template_hash(&template, collisions);
        let name = format!("{}-{hash}", self.d.name_any());
        let mut template = template;
        template
            .metadata
            .get_or_insert_with(ObjectMeta::default)
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(sets::HASH_LABEL.into(), hash.clone());
        let mut selector: LabelSelector = self
            .d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(BTreeMap::new)
            .insert(sets::HASH_LABEL.into(), hash.clone());
        let desired = sets::replicas(&self.d);
        let mut annotations = BTreeMap::new();
        sets::set_revision_annotations(&self.d, &mut annotations, revision);
        sets::set_replicas_annotations(
            &mut annotations,
            desired,
            desired + sets::max_surge(&self.d),
        );
        let old_refs: Vec<&Set> = old.iter().collect();
        let replicas = plan::new_replicas(&self.d, &old_refs, 0);
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: self.d.namespace(),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![ownership::controller_ref(&self.d)]),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: self.d.spec.as_ref().and_then(|s| s.min_ready_seconds),
                selector,
                template: Some(template.clone()),
            }),
            status: None,
        };
        let (created, existed) = match self.rs_api.create(&PostParams::default(), &rs).await {
            Ok(created) => (created, false),
            Err(e) if skiff_client::status_code(&e) == Some(409) => {
                // Ours already (a sync whose create we did not see yet), or
                // another's: then count a collision and try another name.
                let found = self
                    .rs_api
                    .get(&name)
                    .await
                    .map_err(api("reading replicaset", &name))?;
                let ours =
                    ownership::is_controlled_by(&found.metadata, &self.d.uid().unwrap_or_default())
                        && found
                            .spec
                            .as_ref()
                            .and_then(|s| s.template.as_ref())
                            .is_some_and(|t| sets::same_template(t, &template));
                if !ours {
                    let mut status = self.d.status.clone().unwrap_or_default();
                    status.collision_count = Some(collisions.unwrap_or(0) + 1);
                    self.write_status(status).await?;
                    return Err(Error::Collision(name));
                }
                (found, true)
            }
            Err(e) => {
                let message = format!(
                    "Failed to create new replica set {name:?}: {}",
                    api_message(&e)
                );
                self.state.recorder.record_for(
                    &reference_to(&self.d),
                    EventType::Warning,
                    "FailedCreate",
                    "Create",
                    &message,
                );
                if progress::deadline(&self.d).is_some() {
                    let mut status = self.d.status.clone().unwrap_or_default();
                    progress::set(
                        &mut status,
                        progress::condition(
                            progress::PROGRESSING,
                            "False",
                            progress::FAILED_RS_CREATE,
                            &message,
                            now,
                        ),
                    );
                    self.write_status(status).await?;
                }
                return Err(api("creating replicaset", &name)(e));
            }
        };
        if !existed && replicas > 0 {
            self.state.recorder.record_for(
                &reference_to(&self.d),
                EventType::Normal,
                "ScalingReplicaSet",
                "Scale",
                &format!("Scaled up replica set {name} from 0 to {replicas}"),
            );
        }
        self.sets.push(created.clone());
        self.set_deployment_revision(&revision.to_string()).await?;
        if !existed && progress::deadline(&self.d).is_some() {
            let mut status = self.d.status.clone().unwrap_or_default();
            progress::set(
                &mut status,
                progress::condition(
                    progress::PROGRESSING,
                    "True",
                    progress::NEW_RS_CREATED,
                    &format!("Created new replica set {name:?}"),
                    now,
                ),
            );
            self.write_status(status).await?;
        }
        Ok((Some(Set::of(&created)), old))
    }

    fn replace_set(&mut self, rs: ReplicaSet) {
        if let Some(slot) = self
            .sets
            .iter_mut()
            .find(|s| s.metadata.name == rs.metadata.name)
        {
            *slot = rs;
        }
    }

    /// The Deployment's revision annotation follows its new ReplicaSet's.
    async fn set_deployment_revision(&mut self, revision: &str) -> Result<(), Error> {
        let current = self
            .d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(sets::REVISION));
        if current.map(String::as_str) == Some(revision) {
            return Ok(());
        }
        let patch = json!({"metadata": {
            "annotations": {sets::REVISION: revision},
            "resourceVersion": self.d.metadata.resource_version,
        }});
        self.d = self
            .d_api
            .patch(
                &self.d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
            .map_err(api("annotating deployment", &self.d.name_any()))?;
        Ok(())
    }

    /// Writes `status` unless it is what the Deployment has.
    async fn write_status(&mut self, status: DeploymentStatus) -> Result<(), Error> {
        if self.d.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut d = self.d.clone();
        d.status = Some(status);
        self.d = self
            .d_api
            .replace_status(&d.name_any(), &PostParams::default(), &d)
            .await
            .map_err(api("updating status of deployment", &d.name_any()))?;
        Ok(())
    }

    /// Sets a ReplicaSet's size (and the replicas annotations), with the
    /// ScalingReplicaSet event.
    async fn scale(&mut self, scale: &Scale) -> Result<(), Error> {
        let Some(rs) = self
            .sets
            .iter()
            .find(|rs| rs.name_any() == scale.name)
            .cloned()
        else {
            return Ok(());
        };
        let desired = sets::replicas(&self.d);
        let max = desired + sets::max_surge(&self.d);
        let from = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let mut copy = rs.clone();
        let annotations_changed = sets::set_replicas_annotations(
            copy.metadata.annotations.get_or_insert_with(BTreeMap::new),
            desired,
            max,
        );
        if from == scale.to && !annotations_changed {
            return Ok(());
        }
        copy.spec
            .get_or_insert_with(ReplicaSetSpec::default)
            .replicas = Some(scale.to);
        let updated = self
            .rs_api
            .replace(&scale.name, &PostParams::default(), &copy)
            .await
            .map_err(api("scaling replicaset", &scale.name))?;
        if from != scale.to {
            let direction = if from < scale.to { "up" } else { "down" };
            self.state.recorder.record_for(
                &reference_to(&self.d),
                EventType::Normal,
                "ScalingReplicaSet",
                "Scale",
                &format!(
                    "Scaled {direction} replica set {} from {from} to {}",
                    scale.name, scale.to
                ),
            );
        }
        self.replace_set(updated);
        Ok(())
    }

    async fn scale_all(&mut self, scales: &[Scale]) -> Result<bool, Error> {
        for s in scales {
            self.scale(s).await?;
        }
        Ok(!scales.is_empty())
    }

    fn current(&self, new_name: Option<&str>) -> (Option<Set>, Vec<Set>) {
        let new = new_name
            .and_then(|n| self.sets.iter().find(|rs| rs.name_any() == n))
            .map(Set::of);
        let old = self
            .sets
            .iter()
            .filter(|rs| Some(rs.name_any().as_str()) != new_name)
            .map(Set::of)
            .collect();
        (new, old)
    }

    /// Paused, or spec.replicas changed: scale only (upstream's `sync`).
    async fn scale_only(&mut self, paused: bool) -> Result<Action, Error> {
        let (new, old) = self.new_and_old(false).await?;
        let scales = plan::scale(&self.d, new.as_ref(), &old);
        self.scale_all(&scales).await?;
        let (new, old) = self.current(new.as_ref().map(|n| n.name.as_str()));
        if paused {
            self.cleanup(&old).await?;
        }
        self.sync_status(new.as_ref(), &old, false).await
    }

    async fn rolling(&mut self) -> Result<Action, Error> {
        let (new, _) = self.new_and_old(true).await?;
        let Some(new) = new else {
            return Ok(Action::await_change());
        };
        let (new, old) = self.current(Some(&new.name));
        let new = new.unwrap_or(new_placeholder());
        let all: Vec<&Set> = old.iter().chain([&new]).collect();
        if let Some(s) = plan::rolling_new(&self.d, &all, &new) {
            self.scale(&s).await?;
            let (new, old) = self.current(Some(&new.name));
            return self.sync_status(new.as_ref(), &old, true).await;
        }
        let active: Vec<Set> = old.iter().filter(|s| s.replicas > 0).cloned().collect();
        let scales = plan::rolling_old(&self.d, &all, &active, &new);
        if self.scale_all(&scales).await? {
            let (new, old) = self.current(Some(&new.name));
            return self.sync_status(new.as_ref(), &old, true).await;
        }
        let (new, old) = self.current(Some(&new.name));
        let all: Vec<&Set> = old.iter().chain(new.as_ref()).collect();
        let status = progress::calculate(&self.d, &all, new.as_ref(), Timestamp::now());
        if progress::complete(&self.d, &status) {
            self.cleanup(&old).await?;
        }
        let (new, old) = self.current(new.as_ref().map(|n| n.name.as_str()));
        self.sync_status(new.as_ref(), &old, true).await
    }

    async fn recreate(&mut self) -> Result<Action, Error> {
        let (new, old) = self.new_and_old(false).await?;
        if self.scale_all(&plan::recreate_old(&old)).await? {
            let (new, old) = self.current(new.as_ref().map(|n| n.name.as_str()));
            return self.sync_status(new.as_ref(), &old, true).await;
        }
        if self.old_pods_running(new.as_ref(), &old) {
            return self.sync_status(new.as_ref(), &old, true).await;
        }
        let new = match new {
            Some(n) => n,
            None => match self.new_and_old(true).await? {
                (Some(n), _) => n,
                (None, old) => return self.sync_status(None, &old, true).await,
            },
        };
        let desired = sets::replicas(&self.d);
        if new.replicas != desired {
            self.scale(&Scale {
                name: new.name.clone(),
                to: desired,
            })
            .await?;
        }
        let (new, old) = self.current(Some(&new.name));
        let all: Vec<&Set> = old.iter().chain(new.as_ref()).collect();
        let status = progress::calculate(&self.d, &all, new.as_ref(), Timestamp::now());
        if progress::complete(&self.d, &status) {
            self.cleanup(&old).await?;
        }
        self.sync_status(new.as_ref(), &old, true).await
    }

    /// Pods of old ReplicaSets still exist or run (Recreate waits).
    fn old_pods_running(&self, new: Option<&Set>, old: &[Set]) -> bool {
        if old.iter().map(|s| s.actual).sum::<i32>() > 0 {
            return true;
        }
        let old_uids: Vec<&str> = old.iter().map(|s| s.uid.as_str()).collect();
        let namespace = self.d.namespace();
        self.state.pods.state().iter().any(|p| {
            p.metadata.namespace == namespace
                && ownership::controller_of(&p.metadata).is_some_and(|r| {
                    old_uids.contains(&r.uid.as_str()) && new.is_none_or(|n| n.uid != r.uid)
                })
                && !matches!(pods::phase(p), "Succeeded" | "Failed")
        })
    }

    /// Deletes old ReplicaSets beyond revisionHistoryLimit.
    async fn cleanup(&mut self, old: &[Set]) -> Result<(), Error> {
        for name in plan::history_to_delete(&self.d, old) {
            match self.rs_api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if skiff_client::is_not_found(&e) => {}
                Err(e) => return Err(api("deleting old replicaset", &name)(e)),
            }
        }
        Ok(())
    }

    /// Writes the status (with the rollout's conditions when `rollout`)
    /// and says when to look again for a stuck rollout.
    async fn sync_status(
        &mut self,
        new: Option<&Set>,
        old: &[Set],
        rollout: bool,
    ) -> Result<Action, Error> {
        let now = Timestamp::now();
        let all: Vec<&Set> = old.iter().chain(new).collect();
        let status = if rollout {
            progress::rollout(&self.d, &all, new, now)
        } else {
            progress::calculate(&self.d, &all, new, now)
        };
        let recheck = progress::recheck_after(&self.d, &status, now);
        self.write_status(status).await?;
        Ok(match recheck {
            Some(after) if rollout => Action::requeue(after),
            _ => Action::await_change(),
        })
    }
}

fn new_placeholder() -> Set {
    Set::of(&ReplicaSet::default())
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn gone_or_changed(e: &kube::Error) -> bool {
    skiff_client::is_not_found(e) || skiff_client::is_conflict(e)
}

fn error_policy(d: Arc<Deployment>, error: &Error, state: Arc<State>) -> Action {
    let key = key(&d);
    tracing::debug!(deployment = %key, error = %runner::Chain(error), "sync failed");
    Action::requeue(state.failures.next_delay(&key))
}
