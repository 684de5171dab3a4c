//! VolumeBinding: a pod's PersistentVolumeClaims must be bound, or
//! bindable on the node (upstream `plugins/volumebinding`).
//!
//! PreFilter rejects a pod whose claim is missing, being deleted, lost or
//! unbound with an `Immediate` class (the PV controller binds those; the
//! pod is retried when a claim or volume changes). Filter checks a bound
//! claim's volume node affinity against the node, and for each unbound
//! `WaitForFirstConsumer` claim finds an Available volume the node can
//! reach (smallest first, upstream `FindMatchingVolume`) or else a class
//! whose provisioner can provision there. Reserve turns the chosen node's
//! answer into the PreBind work: pre-bind the matched volumes (claimRef),
//! annotate the claims to provision with `volume.kubernetes.io/selected-node`,
//! then wait until all of them are bound; the binder does that work.
//!
//! Not here (yet): CSI storage capacity and volume limits, scoring, and
//! upstream's assume cache (a second pod sharing an unbound claim in the
//! same burst can be placed before the first one's annotation is seen;
//! its PreBind then fails and it is retried).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, Pod, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skiff_api::quantity::ParsedQuantity;
use skiff_client::selectors::{NodeSelectorMatcher, Selector};

use super::names;
use crate::framework::{
    ClaimRef, Code, CycleState, FilterPlugin, NodeInfo, Plugin, PreBind, PreBindPlugin,
    PreFilterPlugin, PreFilterResult, ReservePlugin, Snapshot, Status, StorageInfo, VolumeBindings,
};

/// Upstream `ErrReasonBindConflict`.
pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
/// Upstream `ErrReasonNodeConflict`.
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// Upstream `ErrReasonPVNotExist`.
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// Upstream's PreFilter reason for claims the PV controller has not bound.
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// How long PreBind waits for the claims to be bound by default (upstream
/// `bindTimeoutSeconds` is 600; provisioning here is an API write).
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(120);

const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

const PRE_FILTER_KEY: &str = "PreFilterVolumeBinding";
const RESERVE_KEY: &str = "ReserveVolumeBinding";

/// The VolumeBinding plugin.
#[derive(Debug, Clone, Copy)]
pub struct VolumeBinding {
    bind_timeout: Duration,
}

impl Default for VolumeBinding {
    fn default() -> Self {
        Self::new(DEFAULT_BIND_TIMEOUT)
    }
}

impl VolumeBinding {
    /// PreBind waits up to `bind_timeout` for the claims to be bound.
    pub fn new(bind_timeout: Duration) -> Self {
        Self { bind_timeout }
    }
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        names::VOLUME_BINDING
    }
    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }
    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
}

/// A claim with its volume (absent: the claim points at none we know).
#[derive(Debug)]
struct BoundClaim {
    affinity: Option<NodeSelectorMatcher>,
    volume_found: bool,
}

/// An unbound claim of a `WaitForFirstConsumer` class.
#[derive(Debug)]
struct UnboundClaim {
    claim: Arc<PersistentVolumeClaim>,
    class: Option<Arc<StorageClass>>,
    /// The volumes of its class, by name.
    candidates: Vec<Arc<PersistentVolume>>,
}

/// What Filter decided for one node.
#[derive(Debug, Clone, Default)]
struct NodeVolumes {
    /// Matched volumes and their claims.
    bindings: Vec<(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>)>,
    /// Claims to provision on the node.
    provisions: Vec<Arc<PersistentVolumeClaim>>,
}

/// PreFilter's findings, with Filter's answers per node (a lock because
/// Filter sees the state shared, as upstream's `stateData`).
#[derive(Debug)]
struct PodVolumes {
    bound: Vec<BoundClaim>,
    /// Smallest request first (upstream sorts by size before matching).
    unbound: Vec<UnboundClaim>,
    by_node: Mutex<HashMap<String, NodeVolumes>>,
}

/// The claim name of each of the pod's claim-backed volumes, and whether
/// it is a generic ephemeral volume (claim `<pod>-<volume>`).
fn pod_claims(pod: &Pod) -> Vec<(String, bool)> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some((c.claim_name.clone(), false))
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| (format!("{pod_name}-{}", v.name), true))
            }
        })
        .collect()
}

fn annotation<'a>(claim: &'a PersistentVolumeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    annotation(claim, ANN_BETA_STORAGE_CLASS)
        .or_else(|| claim.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

fn volume_class(volume: &PersistentVolume) -> &str {
    volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
        .map(String::as_str)
        .or_else(|| volume.spec.as_ref()?.storage_class_name.as_deref())
        .unwrap_or_default()
}

fn volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// Bound as far as the scheduler cares: a volume named and the binding
/// completed (upstream `isPVCFullyBound`).
fn fully_bound(claim: &PersistentVolumeClaim) -> bool {
    !volume_name(claim).is_empty() && annotation(claim, ANN_BIND_COMPLETED).is_some()
}

fn is_delay_binding(class: Option<&StorageClass>) -> bool {
    class.and_then(|c| c.volume_binding_mode.as_deref()) == Some("WaitForFirstConsumer")
}

fn storage_quantity(q: Option<&Quantity>) -> Option<ParsedQuantity> {
    ParsedQuantity::parse(q.map_or("0", |q| q.0.as_str())).ok()
}

fn cmp_quantity(a: Option<&Quantity>, b: Option<&Quantity>) -> Ordering {
    match (storage_quantity(a), storage_quantity(b)) {
        (Some(a), Some(b)) => a.cmp_value(&b),
        _ => Ordering::Equal,
    }
}

fn request(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
}

fn capacity(volume: &PersistentVolume) -> Option<&Quantity> {
    volume.spec.as_ref()?.capacity.as_ref()?.get("storage")
}

fn affinity(volume: &PersistentVolume) -> Option<NodeSelectorMatcher> {
    let required = volume
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?;
    Some(NodeSelectorMatcher::new(required))
}

/// upstream `CheckNodeAffinity`: no required node affinity fits anywhere.
fn volume_fits_node(volume: &PersistentVolume, node: &Node) -> bool {
    affinity(volume).is_none_or(|m| m.matches(node))
}

/// Whether the volume is pre-bound or bound to the claim (upstream
/// `IsVolumeBoundToClaim`).
fn bound_to(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name != claim.metadata.name || r.namespace != claim.metadata.namespace {
        return false;
    }
    match r.uid.as_deref() {
        Some(uid) if !uid.is_empty() => claim.metadata.uid.as_deref() == Some(uid),
        _ => true,
    }
}

fn volume_mode(mode: Option<&str>) -> &str {
    mode.unwrap_or("Filesystem")
}

/// upstream `FindMatchingVolume` on the scheduler's path: among the
/// claim's class's volumes not `excluded`, one pre-bound to the claim
/// (if the node can reach it), else the smallest Available one that fits
/// the claim and the node.
fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    candidates: &'a [Arc<PersistentVolume>],
    node: &Node,
    excluded: &HashSet<String>,
) -> Option<&'a Arc<PersistentVolume>> {
    let spec = claim.spec.as_ref();
    let selector = spec
        .and_then(|s| s.selector.as_ref())
        .map(|s| Selector::from_label_selector(Some(s)));
    let wanted_modes = spec
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    let claim_mode = volume_mode(spec.and_then(|s| s.volume_mode.as_deref()));
    let mut smallest: Option<&Arc<PersistentVolume>> = None;
    for volume in candidates {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        if excluded.contains(name) {
            continue;
        }
        let vspec = volume.spec.as_ref();
        if vspec.and_then(|s| s.claim_ref.as_ref()).is_some() && !bound_to(volume, claim) {
            continue;
        }
        if cmp_quantity(capacity(volume), request(claim)) == Ordering::Less {
            continue;
        }
        if volume_mode(vspec.and_then(|s| s.volume_mode.as_deref())) != claim_mode
            || volume.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        let reachable = volume_fits_node(volume, node);
        if bound_to(volume, claim) {
            // Pre-bound: this one or none.
            return reachable.then_some(volume);
        }
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Available") {
            continue;
        }
        match &selector {
            Some(Ok(s)) if !s.matches(volume.metadata.labels.as_ref()) => continue,
            Some(Err(_)) => continue,
            _ => {}
        }
        if volume_class(volume) != claim_class(claim) || !reachable {
            continue;
        }
        let offered = vspec
            .and_then(|s| s.access_modes.as_deref())
            .unwrap_or_default();
        if !wanted_modes.iter().all(|m| offered.contains(m)) {
            continue;
        }
        if smallest.is_none_or(|s| cmp_quantity(capacity(s), capacity(volume)) == Ordering::Greater)
        {
            smallest = Some(volume);
        }
    }
    smallest
}

/// upstream `MatchTopologySelectorTerms`: no terms match every node.
fn topology_matches(terms: Option<&[TopologySelectorTerm]>, node: &Node) -> bool {
    let Some(terms) = terms.filter(|t| !t.is_empty()) else {
        return true;
    };
    let labels = node.metadata.labels.as_ref();
    terms.iter().any(|term| {
        term.match_label_expressions.iter().flatten().all(|e| {
            labels
                .and_then(|l| l.get(&e.key))
                .is_some_and(|v| e.values.contains(v))
        })
    })
}

/// Why a claim cannot be used at all, in upstream's words (the lister's
/// not-found error, ...).
fn claim_problem(
    claim: Option<&Arc<PersistentVolumeClaim>>,
    name: &str,
    ephemeral: bool,
) -> Result<Arc<PersistentVolumeClaim>, String> {
    let Some(claim) = claim else {
        return Err(if ephemeral {
            format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}")
        } else {
            format!("persistentvolumeclaim {name:?} not found")
        });
    };
    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
        return Err(format!(
            "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
            volume_name(claim)
        ));
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
    }
    Ok(claim.clone())
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &Pod,
        snapshot: &Snapshot,
    ) -> Result<PreFilterResult, Status> {
        let names = pod_claims(pod);
        if names.is_empty() {
            return Ok(PreFilterResult::Skip);
        }
        let storage: &StorageInfo = snapshot.storage();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut claims = Vec::with_capacity(names.len());
        for (name, ephemeral) in &names {
            let claim = claim_problem(storage.claim(namespace, name), name, *ephemeral)
                .map_err(Status::unresolvable)?;
            claims.push(claim);
        }
        let mut bound = Vec::new();
        let mut unbound = Vec::new();
        let mut immediate = 0;
        for claim in claims {
            if fully_bound(&claim) {
                let volume = storage.volume(volume_name(&claim));
                bound.push(BoundClaim {
                    affinity: volume.and_then(|v| affinity(v)),
                    volume_found: volume.is_some(),
                });
                continue;
            }
            let class_name = claim_class(&claim);
            let class = (!class_name.is_empty())
                .then(|| storage.class(class_name).cloned())
                .flatten();
            // A claim naming its volume is bound by the PV controller.
            if is_delay_binding(class.as_deref()) && volume_name(&claim).is_empty() {
                let candidates = storage
                    .volumes()
                    .filter(|v| volume_class(v) == class_name)
                    .cloned()
                    .collect();
                unbound.push(UnboundClaim {
                    claim,
                    class,
                    candidates,
                });
            } else {
                immediate += 1;
            }
        }
        if immediate > 0 {
            // Retried once the PV controller binds them (claim events).
            return Err(Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
        }
        unbound.sort_by(|a, b| cmp_quantity(request(&a.claim), request(&b.claim)));
        state.write(
            PRE_FILTER_KEY,
            PodVolumes {
                bound,
                unbound,
                by_node: Mutex::new(HashMap::new()),
            },
        );
        Ok(PreFilterResult::AllNodes)
    }
}

/// Whether the unbound claims can all be bound on `node`, and how
/// (upstream `FindPodVolumes` for the unbound part). `Err` for an
/// internal inconsistency.
fn unbound_on_node(unbound: &[UnboundClaim], node: &Node) -> Result<Option<NodeVolumes>, Status> {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let mut found = NodeVolumes::default();
    let mut to_match = Vec::new();
    let mut to_provision = Vec::new();
    for u in unbound {
        match annotation(&u.claim, ANN_SELECTED_NODE) {
            // Another node was chosen for it already.
            Some(selected) if selected != node_name => return Ok(None),
            Some(_) => to_provision.push(u),
            None => to_match.push(u),
        }
    }
    let mut satisfied = true;
    let mut chosen = HashSet::new();
    for u in to_match {
        match find_matching_volume(&u.claim, &u.candidates, node, &chosen) {
            Some(volume) => {
                chosen.insert(volume.metadata.name.clone().unwrap_or_default());
                found.bindings.push((volume.clone(), u.claim.clone()));
            }
            None => {
                satisfied = false;
                to_provision.push(u);
            }
        }
    }
    if !to_provision.is_empty() {
        // Unmatched claims may still be provisioned (upstream
        // `checkVolumeProvisions` decides alone).
        for u in to_provision {
            let Some(class) = &u.class else {
                return Err(Status::error(format!(
                    "failed to find storage class {:?}",
                    claim_class(&u.claim)
                )));
            };
            if class.provisioner.is_empty() || class.provisioner == NOT_SUPPORTED_PROVISIONER {
                return Ok(None);
            }
            if !topology_matches(class.allowed_topologies.as_deref(), node) {
                return Ok(None);
            }
            found.provisions.push(u.claim.clone());
        }
        satisfied = true;
    }
    Ok(satisfied.then_some(found))
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        let volumes: &PodVolumes = match state.require(PRE_FILTER_KEY) {
            Ok(v) => v,
            Err(s) => return s,
        };
        let node_obj = node.node();
        let mut affinity_ok = true;
        let mut volumes_found = true;
        for b in &volumes.bound {
            if !b.volume_found {
                volumes_found = false;
                break;
            }
            if b.affinity.as_ref().is_some_and(|m| !m.matches(node_obj)) {
                affinity_ok = false;
                break;
            }
        }
        let unbound = if volumes.unbound.is_empty() {
            Some(NodeVolumes::default())
        } else {
            match unbound_on_node(&volumes.unbound, node_obj) {
                Ok(found) => found,
                Err(status) => return status,
            }
        };
        let mut reasons = Vec::new();
        if !affinity_ok {
            reasons.push(ERR_REASON_NODE_CONFLICT.to_string());
        }
        if unbound.is_none() {
            reasons.push(ERR_REASON_BIND_CONFLICT.to_string());
        }
        if !volumes_found {
            reasons.push(ERR_REASON_PV_NOT_EXIST.to_string());
        }
        if !reasons.is_empty() {
            return Status::with_reasons(Code::UnschedulableAndUnresolvable, reasons);
        }
        if let Some(found) = unbound {
            volumes
                .by_node
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(node.name().to_string(), found);
        }
        Status::success()
    }
}

fn claim_ref(claim: &PersistentVolumeClaim) -> ClaimRef {
    ClaimRef {
        namespace: claim
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: claim.metadata.name.clone().unwrap_or_default(),
        uid: claim.metadata.uid.clone(),
    }
}

/// upstream `GetBindVolumeToClaim`: the volume pointing at the claim,
/// marked bound by the controller unless the user pre-bound it; `None`
/// when it already is.
fn volume_bound_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<PersistentVolume> {
    let by_user = bound_to(volume, claim);
    let mut updated = volume.clone();
    let mut dirty = false;
    let same = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            r.name == claim.metadata.name
                && r.namespace == claim.metadata.namespace
                && r.uid == claim.metadata.uid
        });
    if !same {
        updated.spec.get_or_insert_with(Default::default).claim_ref =
            Some(k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.metadata.namespace.clone(),
                name: claim.metadata.name.clone(),
                uid: claim.metadata.uid.clone(),
                resource_version: claim.metadata.resource_version.clone(),
                field_path: None,
            });
        dirty = true;
    }
    let marked = volume
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANN_BOUND_BY_CONTROLLER));
    if !by_user && !marked {
        updated
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANN_BOUND_BY_CONTROLLER.into(), "yes".into());
        dirty = true;
    }
    dirty.then_some(updated)
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, _pod: &Pod, node_name: &str) -> Status {
        let Some(volumes) = state.read::<PodVolumes>(PRE_FILTER_KEY) else {
            // No claims (PreFilter skipped the plugin).
            return Status::success();
        };
        if volumes.unbound.is_empty() {
            return Status::success();
        }
        let found = volumes
            .by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node_name)
            .cloned();
        let Some(found) = found else {
            return Status::error(format!("no pod volumes found for node {node_name:?}"));
        };
        let work = VolumeBindings {
            volumes: found
                .bindings
                .iter()
                .filter_map(|(v, c)| volume_bound_to_claim(v, c))
                .collect(),
            provision: found.provisions.iter().map(|c| claim_ref(c)).collect(),
            wait_for: found
                .bindings
                .iter()
                .map(|(_, c)| c)
                .chain(&found.provisions)
                .map(|c| claim_ref(c))
                .collect(),
            timeout: self.bind_timeout,
        };
        state.write(RESERVE_KEY, Some(work));
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node_name: &str) {
        if state.read::<Option<VolumeBindings>>(RESERVE_KEY).is_some() {
            state.write::<Option<VolumeBindings>>(RESERVE_KEY, None);
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind(
        &self,
        state: &CycleState,
        _pod: &Pod,
        _node_name: &str,
    ) -> Result<Option<PreBind>, Status> {
        Ok(state
            .read::<Option<VolumeBindings>>(RESERVE_KEY)
            .cloned()
            .flatten()
            .map(PreBind::Volumes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::{Framework, ScheduleError};
    use crate::plugins::default_registry;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimVolumeSource, TopologySelectorLabelRequirement, Volume,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use skiff_client::testing::pod;
    use skiff_controllers::testing::{claim, class, local_path_class, ready_node, volume};

    /// A pod with one claim-backed volume per name.
    fn pod_with(claims: &[&str]) -> Pod {
        let mut p = pod("web").build();
        p.spec.as_mut().expect("spec").volumes = Some(
            claims
                .iter()
                .map(|c| Volume {
                    name: format!("vol-{c}"),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: c.to_string(),
                        read_only: None,
                    }),
                    ..Default::default()
                })
                .collect(),
        );
        p
    }

    fn bound(name: &str, volume: &str) -> PersistentVolumeClaim {
        claim(name)
            .class("local")
            .volume_name(volume)
            .annotation(ANN_BIND_COMPLETED, "yes")
            .phase("Bound")
            .build()
    }

    fn snapshot(storage: StorageInfo) -> Snapshot {
        Snapshot::new(
            vec![ready_node("n1").build(), ready_node("n2").build()],
            vec![],
        )
        .with_storage(storage)
    }

    /// PreFilter, then Filter on every node: each node's status.
    fn run(pod: &Pod, snap: &Snapshot) -> Result<(CycleState, Vec<(String, Status)>), Status> {
        let mut state = CycleState::new();
        match VolumeBinding::default().pre_filter(&mut state, pod, snap)? {
            PreFilterResult::Skip => return Ok((state, Vec::new())),
            other => assert_eq!(other, PreFilterResult::AllNodes),
        }
        let statuses = snap
            .node_infos()
            .iter()
            .map(|n| {
                (
                    n.name().to_string(),
                    VolumeBinding::default().filter(&state, pod, n),
                )
            })
            .collect();
        Ok((state, statuses))
    }

    fn reasons(statuses: &[(String, Status)]) -> Vec<(&str, Vec<&str>)> {
        statuses
            .iter()
            .map(|(n, s)| (n.as_str(), s.reasons.iter().map(String::as_str).collect()))
            .collect()
    }

    fn pre_filter_error(pod: &Pod, storage: StorageInfo) -> (Code, String) {
        let s = run(pod, &snapshot(storage)).expect_err("rejected in PreFilter");
        (s.code, s.message())
    }

    #[test]
    fn a_pod_without_claims_skips_the_plugin() {
        let (_, statuses) =
            run(&pod("web").build(), &snapshot(StorageInfo::default())).expect("ok");
        assert!(statuses.is_empty());
        let mut state = CycleState::new();
        assert!(VolumeBinding::default()
            .reserve(&mut state, &pod("web").build(), "n1")
            .is_success());
        assert_eq!(
            VolumeBinding::default().pre_bind(&state, &pod("web").build(), "n1"),
            Ok(None)
        );
    }

    #[test]
    fn a_missing_deleted_or_immediate_claim_rejects_the_pod_everywhere() {
        let unresolvable = Code::UnschedulableAndUnresolvable;
        assert_eq!(
            pre_filter_error(&pod_with(&["data"]), StorageInfo::default()),
            (
                unresolvable,
                "persistentvolumeclaim \"data\" not found".into()
            )
        );
        let mut deleting = bound("data", "pv1");
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert_eq!(
            pre_filter_error(&pod_with(&["data"]), StorageInfo::new([deleting], [], [])),
            (
                unresolvable,
                "persistentvolumeclaim \"data\" is being deleted".into()
            )
        );
        let immediate = StorageInfo::new(
            [claim("data").class("manual").phase("Pending").build()],
            [],
            [class("manual", "kubernetes.io/no-provisioner").build()],
        );
        assert_eq!(
            pre_filter_error(&pod_with(&["data"]), immediate),
            (
                unresolvable,
                "pod has unbound immediate PersistentVolumeClaims".into()
            )
        );
        // No class at all binds at once too; so does an unknown class.
        let classless = StorageInfo::new([claim("data").phase("Pending").build()], [], []);
        assert_eq!(
            pre_filter_error(&pod_with(&["data"]), classless).1,
            "pod has unbound immediate PersistentVolumeClaims"
        );
    }

    #[test]
    fn the_failed_scheduling_message_for_an_unbound_immediate_claim_is_upstreams() {
        let storage = StorageInfo::new(
            [claim("data").class("manual").phase("Pending").build()],
            [],
            [class("manual", "kubernetes.io/no-provisioner").build()],
        );
        let snap = Snapshot::new(vec![ready_node("n1").build()], vec![]).with_storage(storage);
        let err = Framework::new(default_registry())
            .schedule_one(&pod_with(&["data"]), &snap)
            .expect_err("unschedulable");
        let ScheduleError::Unschedulable(fit) = err else {
            panic!("{err:?}");
        };
        // Upstream's FitError ends PostFilter's sentence with another ".".
        assert_eq!(
            fit.to_string(),
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. \
             preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.."
        );
        assert!(fit
            .diagnosis
            .unschedulable_plugins
            .contains(names::VOLUME_BINDING));
    }

    #[test]
    fn a_bound_claim_pins_the_pod_to_its_volumes_node() {
        let storage = StorageInfo::new(
            [bound("data", "pv1")],
            [volume("pv1")
                .class("local")
                .on_node("n1")
                .phase("Bound")
                .build()],
            [local_path_class("local").build()],
        );
        let (mut state, statuses) = run(&pod_with(&["data"]), &snapshot(storage)).expect("ok");
        assert_eq!(
            reasons(&statuses),
            vec![("n1", vec![]), ("n2", vec![ERR_REASON_NODE_CONFLICT])]
        );
        assert_eq!(statuses[1].1.code, Code::UnschedulableAndUnresolvable);
        // Nothing to bind.
        assert!(VolumeBinding::default()
            .reserve(&mut state, &pod_with(&["data"]), "n1")
            .is_success());
        assert_eq!(
            VolumeBinding::default().pre_bind(&state, &pod_with(&["data"]), "n1"),
            Ok(None)
        );
        // A volume without node affinity is reachable from anywhere.
        let storage = StorageInfo::new(
            [bound("data", "pv1")],
            [volume("pv1").class("local").phase("Bound").build()],
            [],
        );
        let (_, statuses) = run(&pod_with(&["data"]), &snapshot(storage)).expect("ok");
        assert!(statuses.iter().all(|(_, s)| s.is_success()));
    }

    #[test]
    fn a_claim_bound_to_a_missing_volume_fits_nowhere() {
        let storage = StorageInfo::new([bound("data", "gone")], [], []);
        let (_, statuses) = run(&pod_with(&["data"]), &snapshot(storage)).expect("ok");
        assert!(statuses
            .iter()
            .all(|(_, s)| s.reasons == vec![ERR_REASON_PV_NOT_EXIST.to_string()]));
    }

    fn wffc(provisioner: &str) -> StorageClass {
        class("local", provisioner)
            .wait_for_first_consumer()
            .build()
    }

    #[test]
    fn a_waiting_claim_of_a_provisioner_fits_every_node_and_is_provisioned_on_the_chosen_one() {
        let storage = StorageInfo::new(
            [claim("data").class("local").phase("Pending").build()],
            [],
            [wffc("skiff.dev/local-path")],
        );
        let p = pod_with(&["data"]);
        let (mut state, statuses) = run(&p, &snapshot(storage)).expect("ok");
        assert!(statuses.iter().all(|(_, s)| s.is_success()), "{statuses:?}");
        let plugin = VolumeBinding::new(Duration::from_secs(7));
        assert!(plugin.reserve(&mut state, &p, "n2").is_success());
        let data = ClaimRef {
            namespace: "default".into(),
            name: "data".into(),
            uid: Some("uid-data".into()),
        };
        assert_eq!(
            plugin.pre_bind(&state, &p, "n2"),
            Ok(Some(PreBind::Volumes(VolumeBindings {
                volumes: vec![],
                provision: vec![data.clone()],
                wait_for: vec![data],
                timeout: Duration::from_secs(7),
            })))
        );
        plugin.unreserve(&mut state, &p, "n2");
        assert_eq!(plugin.pre_bind(&state, &p, "n2"), Ok(None));
    }

    #[test]
    fn a_waiting_claim_without_provisioner_needs_a_volume_the_node_can_reach() {
        let pending = claim("data")
            .class("local")
            .request("5Gi")
            .phase("Pending")
            .build();
        let none = StorageInfo::new(
            [pending.clone()],
            [],
            [wffc("kubernetes.io/no-provisioner")],
        );
        let (_, statuses) = run(&pod_with(&["data"]), &snapshot(none)).expect("ok");
        assert_eq!(
            reasons(&statuses),
            vec![
                ("n1", vec![ERR_REASON_BIND_CONFLICT]),
                ("n2", vec![ERR_REASON_BIND_CONFLICT])
            ]
        );
        let message = {
            let snap = snapshot(StorageInfo::new(
                [pending.clone()],
                [],
                [wffc("kubernetes.io/no-provisioner")],
            ));
            let err = Framework::new(default_registry())
                .schedule_one(&pod_with(&["data"]), &snap)
                .expect_err("unschedulable");
            err.to_string()
        };
        assert_eq!(
            message,
            "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to \
             bind. preemption: 0/2 nodes are available: 2 Preemption is not helpful for \
             scheduling.."
        );

        let local = |name: &str, node: &str, size: &str| {
            volume(name)
                .class("local")
                .capacity(size)
                .on_node(node)
                .available()
                .build()
        };
        let storage = StorageInfo::new(
            [pending],
            [
                local("small-n1", "n1", "1Gi"),
                local("big-n1", "n1", "10Gi"),
                local("fit-n1", "n1", "5Gi"),
            ],
            [wffc("kubernetes.io/no-provisioner")],
        );
        let p = pod_with(&["data"]);
        let (mut state, statuses) = run(&p, &snapshot(storage)).expect("ok");
        assert_eq!(
            reasons(&statuses),
            vec![("n1", vec![]), ("n2", vec![ERR_REASON_BIND_CONFLICT])]
        );
        assert!(VolumeBinding::default()
            .reserve(&mut state, &p, "n1")
            .is_success());
        let Ok(Some(PreBind::Volumes(work))) = VolumeBinding::default().pre_bind(&state, &p, "n1")
        else {
            panic!("no PreBind work");
        };
        assert!(work.provision.is_empty());
        assert_eq!(work.wait_for.len(), 1);
        let [pv] = work.volumes.as_slice() else {
            panic!("{:?}", work.volumes);
        };
        assert_eq!(
            pv.metadata.name.as_deref(),
            Some("fit-n1"),
            "the smallest that fits"
        );
        let r = pv
            .spec
            .as_ref()
            .and_then(|s| s.claim_ref.as_ref())
            .expect("claimRef");
        assert_eq!(
            (r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
            (Some("default"), Some("data"), Some("uid-data"))
        );
        assert_eq!(
            pv.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_BOUND_BY_CONTROLLER))
                .map(String::as_str),
            Some("yes")
        );
        // Reserving a node Filter never passed is an internal error.
        let s = VolumeBinding::default().reserve(&mut state, &p, "n2");
        assert_eq!(s.code, Code::Error);
    }

    #[test]
    fn two_claims_do_not_share_a_volume() {
        let storage = StorageInfo::new(
            [
                claim("a").class("local").phase("Pending").build(),
                claim("b").class("local").phase("Pending").build(),
            ],
            [volume("only")
                .class("local")
                .on_node("n1")
                .available()
                .build()],
            [wffc("kubernetes.io/no-provisioner")],
        );
        let (_, statuses) = run(&pod_with(&["a", "b"]), &snapshot(storage)).expect("ok");
        assert!(statuses
            .iter()
            .all(|(_, s)| s.reasons == vec![ERR_REASON_BIND_CONFLICT.to_string()]));
    }

    #[test]
    fn a_selected_node_and_allowed_topologies_limit_where_a_claim_goes() {
        let selected = StorageInfo::new(
            [claim("data")
                .class("local")
                .selected_node("n1")
                .phase("Pending")
                .build()],
            [],
            [wffc("skiff.dev/local-path")],
        );
        let (_, statuses) = run(&pod_with(&["data"]), &snapshot(selected)).expect("ok");
        assert_eq!(
            reasons(&statuses),
            vec![("n1", vec![]), ("n2", vec![ERR_REASON_BIND_CONFLICT])]
        );

        let mut zoned = wffc("skiff.dev/local-path");
        zoned.allowed_topologies = Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: "kubernetes.io/hostname".into(),
                values: vec!["n2".into()],
            }]),
        }]);
        let storage = StorageInfo::new(
            [claim("data").class("local").phase("Pending").build()],
            [],
            [zoned],
        );
        let (_, statuses) = run(&pod_with(&["data"]), &snapshot(storage)).expect("ok");
        assert_eq!(
            reasons(&statuses),
            vec![("n1", vec![ERR_REASON_BIND_CONFLICT]), ("n2", vec![])]
        );
    }

    #[test]
    fn a_claim_naming_its_volume_is_left_to_the_pv_controller() {
        let storage = StorageInfo::new(
            [claim("data")
                .class("local")
                .volume_name("pv1")
                .phase("Pending")
                .build()],
            [volume("pv1").class("local").available().build()],
            [wffc("skiff.dev/local-path")],
        );
        assert_eq!(
            pre_filter_error(&pod_with(&["data"]), storage).1,
            ERR_REASON_UNBOUND_IMMEDIATE
        );
    }
}
