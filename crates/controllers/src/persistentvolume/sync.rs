//! What the PV controller does next for one claim or one volume: upstream
//! `syncClaim` / `syncVolume` (pkg/controller/volume/persistentvolume,
//! `pv_controller.go`) as pure functions from the object and the
//! controller's [`View`] to the next [`Step`]: at most one write, the
//! event that goes with it, other objects to look at, and whether to try
//! again later.
//!
//! This module owns those decisions and their wording (reasons and
//! messages are upstream's). It does no I/O: the controller executes a
//! step, puts what the API returned into its view and asks again, until
//! a step writes nothing, so a multi-write operation such as binding
//! (volume claimRef, volume phase, claim volumeName, claim phase, in
//! upstream's order) is one write per step, each from fresh state.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeStatus,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::helpers::{
    annotation, claim_class, claim_has_class, claim_key, claim_phase, claim_ref, claim_ref_key,
    claim_volume_name, cmp_quantity, default_class, find_matching_volume, has_annotation,
    is_delay_binding, is_volume_bound_to_claim, name, phase, reference_to, set_annotation,
    volume_mode_mismatch, volume_phase, volume_unsatisfying, ANN_BETA_STORAGE_PROVISIONER,
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
};
use super::local_path::{self, ProvisionError};

/// What the controller knows: every claim (by `namespace/name`), volume,
/// class and node (by name), as last listed, watched or written.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Claims by `namespace/name`.
    pub claims: BTreeMap<String, PersistentVolumeClaim>,
    /// Volumes by name.
    pub volumes: BTreeMap<String, PersistentVolume>,
    /// Classes by name.
    pub classes: BTreeMap<String, StorageClass>,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Node>,
}

/// An object to sync.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// A claim, `namespace/name`.
    Claim(String),
    /// A volume, by name.
    Volume(String),
}

/// One API write.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// PUT a volume (metadata and spec).
    UpdateVolume(PersistentVolume),
    /// PUT a volume's status.
    UpdateVolumeStatus(PersistentVolume),
    /// POST a provisioned volume.
    CreateVolume(PersistentVolume),
    /// DELETE a volume (UID precondition); its finalizers keep it until
    /// whoever owns them is done.
    DeleteVolume(PersistentVolume),
    /// PUT a claim (metadata and spec).
    UpdateClaim(PersistentVolumeClaim),
    /// PUT a claim's status.
    UpdateClaimStatus(PersistentVolumeClaim),
}

/// Something the view says is gone, to confirm with the API before a
/// write that would be wrong if the view lagged (upstream re-reads the
/// claim before releasing a volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// No claim `namespace/name` with this UID.
    Claim {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The UID the volume was bound to.
        uid: String,
    },
    /// No volume of this name.
    Volume(String),
}

/// An event to record (after the step's write, if any, succeeded).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// What it is about.
    pub regarding: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

/// What to do next for one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// Confirm this with the API first; if it is not gone after all, the
    /// view is updated and the step dropped.
    pub confirm: Option<Absent>,
    /// The write, if any.
    pub write: Option<Write>,
    /// Events, recorded after the write.
    pub events: Vec<Event>,
    /// Other objects to sync.
    pub enqueue: Vec<Key>,
    /// Sync this object again later even if nothing changes.
    pub retry: bool,
}

impl Step {
    fn write(write: Write) -> Self {
        Self {
            write: Some(write),
            ..Self::default()
        }
    }

    fn with_event(mut self, event: Event) -> Self {
        self.events.push(event);
        self
    }

    fn retrying(mut self) -> Self {
        self.retry = true;
        self
    }
}

/// Upstream's event reasons (pkg/controller/volume/events).
pub mod reason {
    /// A delayed-binding claim nobody uses yet.
    pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
    /// No volume and no class.
    pub const FAILED_BINDING: &str = "FailedBinding";
    /// A requested volume does not fit.
    pub const VOLUME_MISMATCH: &str = "VolumeMismatch";
    /// Provisioning could not happen.
    pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    /// A volume was provisioned.
    pub const PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
    /// Another provisioner is to provision.
    pub const EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
    /// Deleting a released volume failed.
    pub const VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
    /// Recycling is not available.
    pub const VOLUME_FAILED_RECYCLE: &str = "VolumeFailedRecycle";
    /// An unknown reclaim policy.
    pub const VOLUME_UNKNOWN_RECLAIM_POLICY: &str = "VolumeUnknownReclaimPolicy";
    /// A bound claim's volume is gone.
    pub const CLAIM_LOST: &str = "ClaimLost";
    /// Two claims on one volume.
    pub const CLAIM_MISBOUND: &str = "ClaimMisbound";
}

/// The message of a claim waiting for its first consumer.
pub const WAIT_FOR_FIRST_CONSUMER_MESSAGE: &str =
    "waiting for first consumer to be created before binding";

const NORMAL: &str = "Normal";
const WARNING: &str = "Warning";

fn event(
    regarding: ObjectReference,
    type_: &'static str,
    reason: &'static str,
    message: String,
) -> Event {
    Event {
        regarding,
        type_,
        reason,
        message,
    }
}

fn about_volume(volume: &PersistentVolume) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolume".into()),
        name: volume.metadata.name.clone(),
        uid: volume.metadata.uid.clone(),
        resource_version: volume.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// The next step for a claim (upstream `syncClaim`).
pub fn plan_claim(claim: &PersistentVolumeClaim, view: &View) -> Step {
    if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
        bound_claim(claim, view)
    } else {
        unbound_claim(claim, view)
    }
}

fn unbound_claim(claim: &PersistentVolumeClaim, view: &View) -> Step {
    if claim_phase(claim).is_empty() {
        // A claim the API created without a phase: Pending first.
        return pending(claim);
    }
    let volume_name = claim_volume_name(claim);
    if volume_name.is_empty() {
        let delay = is_delay_binding(claim, &view.classes);
        if let Some(volume) = find_matching_volume(claim, view.volumes.values(), delay) {
            return bind(volume, claim);
        }
        if !claim_has_class(claim) {
            // Retroactive default class (upstream assignDefaultStorageClass).
            if let Some(class) = default_class(&view.classes) {
                let mut updated = claim.clone();
                updated
                    .spec
                    .get_or_insert_with(Default::default)
                    .storage_class_name = Some(name(&class.metadata).to_string());
                return Step::write(Write::UpdateClaim(updated));
            }
        }
        if delay && !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
            // The scheduler has seen no pod using it yet.
            return pending(claim).with_event(event(
                reference_to(claim),
                NORMAL,
                reason::WAIT_FOR_FIRST_CONSUMER,
                WAIT_FOR_FIRST_CONSUMER_MESSAGE.into(),
            ));
        }
        if !claim_class(claim).is_empty() {
            return provision(claim, view);
        }
        return pending(claim).with_event(event(
            reference_to(claim),
            NORMAL,
            reason::FAILED_BINDING,
            "no persistent volumes available for this claim and no storage class is set".into(),
        ));
    }
    // The user asked for a specific volume.
    let Some(volume) = view.volumes.get(volume_name) else {
        return pending(claim);
    };
    if claim_ref(volume).is_none() {
        return match volume_unsatisfying(volume, claim) {
            Some(why) => pending(claim).with_event(event(
                reference_to(claim),
                WARNING,
                reason::VOLUME_MISMATCH,
                format!("Cannot bind to requested volume {volume_name:?}: {why}"),
            )),
            None => bind(volume, claim),
        };
    }
    if is_volume_bound_to_claim(volume, claim) {
        return bind(volume, claim);
    }
    pending(claim).with_event(event(
        reference_to(claim),
        WARNING,
        reason::FAILED_BINDING,
        format!("volume {volume_name:?} already bound to a different claim."),
    ))
}

fn bound_claim(claim: &PersistentVolumeClaim, view: &View) -> Step {
    let volume_name = claim_volume_name(claim);
    if volume_name.is_empty() {
        return lost(
            claim,
            reason::CLAIM_LOST,
            "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
        );
    }
    let Some(volume) = view.volumes.get(volume_name) else {
        let mut step = lost(
            claim,
            reason::CLAIM_LOST,
            "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
        );
        if step.write.is_some() {
            step.confirm = Some(Absent::Volume(volume_name.to_string()));
        }
        return step;
    };
    match claim_ref(volume) {
        None => bind(volume, claim),
        Some(r) if r.uid == claim.metadata.uid => bind(volume, claim),
        Some(_) => lost(
            claim,
            reason::CLAIM_MISBOUND,
            "Two claims are bound to the same volume, this one is bound incorrectly",
        ),
    }
}

/// Phase Lost with a Warning, once (upstream `updateClaimStatusWithEvent`).
fn lost(claim: &PersistentVolumeClaim, reason: &'static str, message: &str) -> Step {
    if claim_phase(claim) == phase::LOST {
        return Step::default();
    }
    match claim_status(claim, phase::LOST, None) {
        Some(updated) => Step::write(Write::UpdateClaimStatus(updated)).with_event(event(
            reference_to(claim),
            WARNING,
            reason,
            message.into(),
        )),
        None => Step::default(),
    }
}

/// Phase Pending without capacity or access modes, if not so already.
fn pending(claim: &PersistentVolumeClaim) -> Step {
    match claim_status(claim, phase::PENDING, None) {
        Some(updated) => Step::write(Write::UpdateClaimStatus(updated)),
        None => Step::default(),
    }
}

/// The claim with status `phase` (access modes and, when it becomes
/// bound, capacity from `volume`; none without one), or `None` when that
/// is what it has (upstream `updateClaimStatus`).
fn claim_status(
    claim: &PersistentVolumeClaim,
    target: &str,
    volume: Option<&PersistentVolume>,
) -> Option<PersistentVolumeClaim> {
    let mut updated = claim.clone();
    let status = updated
        .status
        .get_or_insert_with(PersistentVolumeClaimStatus::default);
    let mut dirty = false;
    if status.phase.as_deref() != Some(target) {
        status.phase = Some(target.into());
        dirty = true;
    }
    match volume {
        None => {
            if status.access_modes.take().is_some() {
                dirty = true;
            }
            if status.capacity.take().is_some() {
                dirty = true;
            }
        }
        Some(volume) => {
            let spec = volume.spec.as_ref();
            let modes = spec.and_then(|s| s.access_modes.clone());
            if status.access_modes != modes {
                status.access_modes = modes;
                dirty = true;
            }
            // Capacity only as the claim becomes bound: a difference later
            // may be a resize in progress.
            if claim_phase(claim) != target {
                let capacity = spec.and_then(|s| s.capacity.as_ref());
                let current = status.capacity.as_ref().and_then(|c| c.get("storage"));
                let wanted = capacity.and_then(|c| c.get("storage"));
                if current.is_none() || cmp_quantity(current, wanted) != std::cmp::Ordering::Equal {
                    status.capacity = capacity.cloned();
                    dirty = true;
                }
            }
        }
    }
    dirty.then_some(updated)
}

/// The next write of binding `volume` and `claim` (upstream `bind`): the
/// volume's claimRef, its phase, the claim's volumeName and
/// annotations, its phase.
fn bind(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Step {
    if let Some(updated) = bind_volume_to_claim(volume, claim) {
        return Step::write(Write::UpdateVolume(updated));
    }
    if volume_phase(volume) != phase::BOUND {
        return Step::write(Write::UpdateVolumeStatus(volume_with_phase(
            volume,
            phase::BOUND,
            None,
        )));
    }
    if let Some(updated) = bind_claim_to_volume(claim, volume) {
        return Step::write(Write::UpdateClaim(updated));
    }
    match claim_status(claim, phase::BOUND, Some(volume)) {
        Some(updated) => Step::write(Write::UpdateClaimStatus(updated)),
        None => Step::default(),
    }
}

/// upstream `GetBindVolumeToClaim`: the volume pointing at the claim (UID
/// included), marked bound by the controller unless the user pre-bound
/// it; `None` when it already is.
pub fn bind_volume_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let set_bound_by_controller = !is_volume_bound_to_claim(volume, claim);
    let mut updated = volume.clone();
    let mut dirty = false;
    let same = claim_ref(volume).is_some_and(|r| {
        r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
            && r.uid == claim.metadata.uid
    });
    if !same {
        updated.spec.get_or_insert_with(Default::default).claim_ref = Some(reference_to(claim));
        dirty = true;
    }
    if set_bound_by_controller && !has_annotation(&updated.metadata, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        dirty = true;
    }
    dirty.then_some(updated)
}

/// upstream `bindClaimToVolume`: the claim naming the volume, with
/// bound-by-controller (when the controller chose it) and bind-completed.
fn bind_claim_to_volume(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
) -> Option<PersistentVolumeClaim> {
    let mut updated = claim.clone();
    let mut dirty = false;
    let volume_name = name(&volume.metadata);
    if claim_volume_name(claim) != volume_name {
        updated
            .spec
            .get_or_insert_with(Default::default)
            .volume_name = Some(volume_name.into());
        if !has_annotation(&updated.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut updated.metadata, ANN_BOUND_BY_CONTROLLER, "yes");
        }
        dirty = true;
    }
    if !has_annotation(&updated.metadata, ANN_BIND_COMPLETED) {
        set_annotation(&mut updated.metadata, ANN_BIND_COMPLETED, "yes");
        dirty = true;
    }
    dirty.then_some(updated)
}

fn volume_with_phase(
    volume: &PersistentVolume,
    target: &str,
    message: Option<String>,
) -> PersistentVolume {
    let mut updated = volume.clone();
    let status = updated
        .status
        .get_or_insert_with(PersistentVolumeStatus::default);
    status.phase = Some(target.into());
    status.message = message;
    updated
}

/// Phase `target`, if not so already.
fn volume_phase_step(volume: &PersistentVolume, target: &str) -> Step {
    if volume_phase(volume) == target {
        return Step::default();
    }
    Step::write(Write::UpdateVolumeStatus(volume_with_phase(
        volume, target, None,
    )))
}

/// Phase Failed with a Warning, once (upstream
/// `updateVolumePhaseWithEvent`).
fn volume_failed(volume: &PersistentVolume, reason: &'static str, message: String) -> Step {
    if volume_phase(volume) == phase::FAILED {
        return Step::default();
    }
    Step::write(Write::UpdateVolumeStatus(volume_with_phase(
        volume,
        phase::FAILED,
        Some(message.clone()),
    )))
    .with_event(event(about_volume(volume), WARNING, reason, message))
}

/// Provisioning a claim of a class with a provisioner (upstream
/// `provisionClaim`): ours here, any other is left to its external
/// provisioner after annotating the claim for it.
fn provision(claim: &PersistentVolumeClaim, view: &View) -> Step {
    let class_name = claim_class(claim);
    let Some(class) = view.classes.get(class_name) else {
        return Step::default().with_event(event(
            reference_to(claim),
            WARNING,
            reason::PROVISIONING_FAILED,
            format!("storageclass.storage.k8s.io {class_name:?} not found"),
        ));
    };
    let provisioner = class.provisioner.as_str();
    if provisioner != local_path::PROVISIONER && provisioner.starts_with("kubernetes.io/") {
        // An in-tree plugin we do not have (kubernetes.io/no-provisioner).
        return Step::default().with_event(event(
            reference_to(claim),
            WARNING,
            reason::PROVISIONING_FAILED,
            format!("no volume plugin matched name: {provisioner}"),
        ));
    }
    if annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) != Some(provisioner)
        || annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER) != Some(provisioner)
    {
        let mut updated = claim.clone();
        set_annotation(&mut updated.metadata, ANN_STORAGE_PROVISIONER, provisioner);
        set_annotation(
            &mut updated.metadata,
            ANN_BETA_STORAGE_PROVISIONER,
            provisioner,
        );
        return Step::write(Write::UpdateClaim(updated));
    }
    if provisioner != local_path::PROVISIONER {
        return Step::default().with_event(event(
            reference_to(claim),
            NORMAL,
            reason::EXTERNAL_PROVISIONING,
            format!(
                "Waiting for a volume to be created either by the external provisioner '{provisioner}' \
                 or manually by the system administrator. If volume creation is delayed, please verify \
                 that the provisioner is running and correctly registered."
            ),
        ));
    }
    let pv_name = local_path::volume_name(claim);
    if view.volumes.contains_key(&pv_name) {
        // Provisioned already (and being deleted, or not matching).
        return Step::default();
    }
    let node = match annotation(&claim.metadata, ANN_SELECTED_NODE) {
        Some(selected) => match view.nodes.get(selected) {
            Some(node) => Ok(node),
            None => {
                return reschedule(claim).retrying().with_event(event(
                    reference_to(claim),
                    WARNING,
                    reason::PROVISIONING_FAILED,
                    format!("Failed to get target node: node {selected:?} not found"),
                ));
            }
        },
        None => local_path::check_claim(claim, class).and_then(|()| {
            local_path::choose_node(view.nodes.values(), view.volumes.values())
                .ok_or(ProvisionError::NoNode)
        }),
    };
    match node.and_then(|node| local_path::build_volume(claim, class, node)) {
        Ok(volume) => {
            let message = format!(
                "Successfully provisioned volume {} using {}",
                name(&volume.metadata),
                local_path::PROVISIONER
            );
            Step::write(Write::CreateVolume(volume)).with_event(event(
                reference_to(claim),
                NORMAL,
                reason::PROVISIONING_SUCCEEDED,
                message,
            ))
        }
        Err(e) => {
            let retry = matches!(e, ProvisionError::NoNode | ProvisionError::NoDir { .. });
            let mut step = reschedule(claim).with_event(event(
                reference_to(claim),
                WARNING,
                reason::PROVISIONING_FAILED,
                format!("Failed to provision volume with StorageClass {class_name:?}: {e}"),
            ));
            step.retry = retry;
            step
        }
    }
}

/// Hands a failed delayed-binding claim back to the scheduler by removing
/// the selected node (upstream `rescheduleProvisioning`).
fn reschedule(claim: &PersistentVolumeClaim) -> Step {
    if !has_annotation(&claim.metadata, ANN_SELECTED_NODE) {
        return Step::default();
    }
    let mut updated = claim.clone();
    if let Some(a) = updated.metadata.annotations.as_mut() {
        a.remove(ANN_SELECTED_NODE);
    }
    Step::write(Write::UpdateClaim(updated))
}

/// The next step for a volume (upstream `syncVolume`).
pub fn plan_volume(volume: &PersistentVolume, view: &View) -> Step {
    if volume.metadata.deletion_timestamp.is_some() {
        // Being deleted: its finalizers' owners finish it.
        return Step::default();
    }
    let Some(r) = claim_ref(volume) else {
        return volume_phase_step(volume, phase::AVAILABLE);
    };
    let uid = r.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        // Pre-bound; the claim's sync binds it.
        return volume_phase_step(volume, phase::AVAILABLE);
    }
    let key = claim_ref_key(r);
    let claim = view
        .claims
        .get(&key)
        .filter(|c| c.metadata.uid.as_deref() == Some(uid));
    let Some(claim) = claim else {
        // The claim is gone (or replaced by one of the same name).
        let current = volume_phase(volume);
        if current != phase::RELEASED && current != phase::FAILED {
            let mut step = volume_phase_step(volume, phase::RELEASED);
            step.confirm = Some(Absent::Claim {
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                uid: uid.to_string(),
            });
            return step;
        }
        return reclaim(volume);
    };
    let bound_to = claim_volume_name(claim);
    if bound_to.is_empty() {
        if volume_mode_mismatch(claim, volume) {
            let claim_name = name(&claim.metadata);
            return Step::default()
                .with_event(event(
                    about_volume(volume),
                    WARNING,
                    reason::VOLUME_MISMATCH,
                    format!(
                        "Cannot bind PersistentVolume to requested PersistentVolumeClaim {claim_name:?} due to incompatible volumeMode."
                    ),
                ))
                .with_event(event(
                    reference_to(claim),
                    WARNING,
                    reason::VOLUME_MISMATCH,
                    format!(
                        "Cannot bind PersistentVolume {:?} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                        name(&volume.metadata)
                    ),
                ));
        }
        // Bound on the volume's side only: the claim's sync finishes it.
        return Step {
            enqueue: vec![Key::Claim(claim_key(claim))],
            ..Step::default()
        };
    }
    if bound_to == name(&volume.metadata) {
        return volume_phase_step(volume, phase::BOUND);
    }
    // The claim is bound to another volume.
    if has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)
        && reclaim_policy(volume) == "Delete"
    {
        let current = volume_phase(volume);
        if current != phase::RELEASED && current != phase::FAILED {
            return volume_phase_step(volume, phase::RELEASED);
        }
        return reclaim(volume);
    }
    // Unbind what the controller bound; of a user's pre-binding keep the
    // name, drop the UID.
    let mut updated = volume.clone();
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = updated.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(a) = updated.metadata.annotations.as_mut() {
            a.remove(ANN_BOUND_BY_CONTROLLER);
            if a.is_empty() {
                updated.metadata.annotations = None;
            }
        }
    } else if let Some(r) = updated.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        r.uid = None;
    }
    Step::write(Write::UpdateVolume(updated))
}

fn reclaim_policy(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain")
}

/// A released volume's reclaim policy (upstream `reclaimVolume`).
fn reclaim(volume: &PersistentVolume) -> Step {
    let volume_name = name(&volume.metadata);
    match reclaim_policy(volume) {
        "Retain" => Step::default(),
        "Delete" => match annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED) {
            // Ours: delete the object; the node agent removes the
            // directory, then the cleanup finalizer.
            Some(local_path::PROVISIONER) => Step::write(Write::DeleteVolume(volume.clone())),
            // Another provisioner deletes its volumes.
            Some(_) => Step::default(),
            None => volume_failed(
                volume,
                reason::VOLUME_FAILED_DELETE,
                format!(
                    "error getting deleter volume plugin for volume {volume_name:?}: no deletable volume plugin matched"
                ),
            ),
        },
        "Recycle" => volume_failed(
            volume,
            reason::VOLUME_FAILED_RECYCLE,
            "No recycler plugin found for the volume!".into(),
        ),
        _ => volume_failed(
            volume,
            reason::VOLUME_UNKNOWN_RECLAIM_POLICY,
            "Volume has unrecognized PersistentVolumeReclaimPolicy".into(),
        ),
    }
}

#[cfg(test)]
#[path = "sync_tests.rs"]
mod tests;
