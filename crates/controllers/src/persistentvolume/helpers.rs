//! The storage helpers the PV controller decides with, as upstream's
//! `component-helpers/storage/volume` has them: the annotations, a claim's
//! class and binding mode, whether a volume is bound to a claim, and
//! `FindMatchingVolume` (smallest Available volume of the claim's class
//! with the access modes, capacity, selector and volume mode it asks for).
//!
//! This module owns these pure functions over API objects only; it does no
//! I/O and decides nothing about when to act.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use skiff_api::quantity::ParsedQuantity;
use skiff_client::selectors::Selector;

/// On claims: the binding has completed once (upstream `AnnBindCompleted`).
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On volumes and claims: the controller made the binding.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On claims: the node the scheduler chose for a delayed-binding claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On claims: who is to provision the volume.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The beta spelling of [`ANN_STORAGE_PROVISIONER`], still written.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On volumes: who provisioned it.
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";
/// The beta class annotation, which wins over `spec.storageClassName`.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// On classes: the default class.
pub const ANN_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// Its beta spelling.
pub const ANN_BETA_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// A class whose volumes are never provisioned.
pub const NOT_SUPPORTED_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// Volume phases.
pub mod phase {
    /// Not bound to a claim (or pre-bound, waiting).
    pub const AVAILABLE: &str = "Available";
    /// Bound to a claim (volumes and claims).
    pub const BOUND: &str = "Bound";
    /// Its claim is gone; the reclaim policy applies.
    pub const RELEASED: &str = "Released";
    /// Reclaiming failed.
    pub const FAILED: &str = "Failed";
    /// A claim not bound yet.
    pub const PENDING: &str = "Pending";
    /// A bound claim whose volume is gone.
    pub const LOST: &str = "Lost";
}

/// `namespace/name`.
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `namespace/name` of the claim a volume points to.
pub fn claim_ref_key(r: &ObjectReference) -> String {
    format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default()
    )
}

/// The object's name.
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// Whether `meta` carries annotation `key` (any value).
pub fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(key))
}

/// The value of annotation `key`.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Sets annotation `key` to `value`.
pub fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), value.to_string());
}

/// The claim's class: the beta annotation, else `spec.storageClassName`,
/// else `""` (upstream `GetPersistentVolumeClaimClass`).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS) {
        return class;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// Whether the claim names a class at all (`""` counts: "no class").
pub fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    has_annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS)
        || claim
            .spec
            .as_ref()
            .is_some_and(|s| s.storage_class_name.is_some())
}

/// The volume's class (`spec.storageClassName`, or `""`).
pub fn volume_class(volume: &PersistentVolume) -> &str {
    if let Some(class) = annotation(&volume.metadata, ANN_BETA_STORAGE_CLASS) {
        return class;
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or_default()
}

/// `volumeBindingMode: WaitForFirstConsumer` (upstream `IsDelayBindingMode`:
/// a claim without a class, or whose class is unknown, binds at once).
pub fn is_delay_binding(
    claim: &PersistentVolumeClaim,
    classes: &BTreeMap<String, StorageClass>,
) -> bool {
    let class = claim_class(claim);
    if class.is_empty() {
        return false;
    }
    classes
        .get(class)
        .and_then(|c| c.volume_binding_mode.as_deref())
        == Some("WaitForFirstConsumer")
}

/// The default class (annotated `is-default-class: "true"`); with several,
/// the newest, as upstream's `GetDefaultClass`.
pub fn default_class(classes: &BTreeMap<String, StorageClass>) -> Option<&StorageClass> {
    classes
        .values()
        .filter(|c| {
            [ANN_DEFAULT_CLASS, ANN_BETA_DEFAULT_CLASS]
                .iter()
                .any(|k| annotation(&c.metadata, k) == Some("true"))
        })
        .max_by(|a, b| {
            let created = |c: &StorageClass| {
                c.metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.as_second())
            };
            created(a)
                .cmp(&created(b))
                .then_with(|| name(&b.metadata).cmp(name(&a.metadata)))
        })
}

/// The claim's storage request.
pub fn requested(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
}

/// The volume's storage capacity.
pub fn capacity(volume: &PersistentVolume) -> Option<&Quantity> {
    volume.spec.as_ref()?.capacity.as_ref()?.get("storage")
}

/// `a` compared with `b`; a quantity that does not parse counts as zero.
pub fn cmp_quantity(a: Option<&Quantity>, b: Option<&Quantity>) -> Ordering {
    let parse = |q: Option<&Quantity>| {
        ParsedQuantity::parse(q.map_or("0", |q| q.0.as_str()))
            .or_else(|_| ParsedQuantity::parse("0"))
    };
    match (parse(a), parse(b)) {
        (Ok(a), Ok(b)) => a.cmp_value(&b),
        _ => Ordering::Equal,
    }
}

fn claim_volume_mode(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem")
}

fn volume_volume_mode(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.volume_mode.as_deref())
        .unwrap_or("Filesystem")
}

/// Whether claim and volume differ in volumeMode (unset is Filesystem).
pub fn volume_mode_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    claim_volume_mode(claim) != volume_volume_mode(volume)
}

/// Whether the volume offers every access mode the claim asks for.
pub fn access_modes_match(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let offered = volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default()
        .iter()
        .all(|m| offered.contains(m))
}

/// The volume's claimRef.
pub fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref()?.claim_ref.as_ref()
}

/// The volume's phase (`""` when it has none yet).
pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The claim's phase (`""` when it has none yet).
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The claim's `spec.volumeName` (`""` when unset).
pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default()
}

/// Whether the volume is pre-bound or bound to the claim: same namespace
/// and name, and the same UID when the reference has one (upstream
/// `IsVolumeBoundToClaim`).
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = claim_ref(volume) else {
        return false;
    };
    if r.name.as_deref() != claim.metadata.name.as_deref()
        || r.namespace.as_deref() != claim.metadata.namespace.as_deref()
    {
        return false;
    }
    match r.uid.as_deref() {
        Some(uid) if !uid.is_empty() => claim.metadata.uid.as_deref() == Some(uid),
        _ => true,
    }
}

/// A reference to the claim, as a volume's claimRef holds it.
pub fn reference_to(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Why a requested volume cannot serve a claim (upstream
/// `checkVolumeSatisfyClaim`), or `None`.
pub fn volume_unsatisfying(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> Option<String> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Some(format!(
            "the volume is marked for deletion {:?}",
            name(&volume.metadata)
        ));
    }
    if cmp_quantity(capacity(volume), requested(claim)) == Ordering::Less {
        return Some("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match".into());
    }
    if volume_mode_mismatch(claim, volume) {
        return Some("incompatible volumeMode".into());
    }
    if !access_modes_match(claim, volume) {
        return Some("incompatible accessMode".into());
    }
    None
}

/// The smallest volume that can serve the claim (upstream
/// `FindMatchingVolume` on the controller's path: no node). A volume
/// pre-bound to the claim wins at once. With `delay_binding` (the claim's
/// class waits for a consumer) only pre-bound volumes are returned: the
/// scheduler picks the others.
pub fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a PersistentVolume>,
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let selector = claim
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .map(|s| Selector::from_label_selector(Some(s)));
    let class = claim_class(claim);
    let request = requested(claim);
    let mut smallest: Option<&PersistentVolume> = None;
    for volume in volumes {
        if claim_ref(volume).is_some() && !is_volume_bound_to_claim(volume, claim) {
            continue;
        }
        if cmp_quantity(capacity(volume), request) == Ordering::Less {
            continue;
        }
        if volume_mode_mismatch(claim, volume) || volume.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if is_volume_bound_to_claim(volume, claim) {
            return Some(volume);
        }
        if delay_binding {
            continue;
        }
        if volume_phase(volume) != phase::AVAILABLE {
            continue;
        }
        match &selector {
            Some(Ok(s)) if !s.matches(volume.metadata.labels.as_ref()) => continue,
            Some(Err(_)) => continue,
            _ => {}
        }
        if volume_class(volume) != class || !access_modes_match(claim, volume) {
            continue;
        }
        if smallest.is_none_or(|s| cmp_quantity(capacity(s), capacity(volume)) == Ordering::Greater)
        {
            smallest = Some(volume);
        }
    }
    smallest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{claim, class, volume};

    #[test]
    fn class_and_binding_mode() {
        let classes: BTreeMap<String, StorageClass> = [
            ("now", class("now", "p").build()),
            (
                "later",
                class("later", "p").wait_for_first_consumer().build(),
            ),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
        assert!(!is_delay_binding(
            &claim("c").class("now").build(),
            &classes
        ));
        assert!(is_delay_binding(
            &claim("c").class("later").build(),
            &classes
        ));
        assert!(!is_delay_binding(
            &claim("c").class("unknown").build(),
            &classes
        ));
        assert!(!is_delay_binding(&claim("c").build(), &classes));
        let mut beta = claim("c").class("now").build();
        set_annotation(&mut beta.metadata, ANN_BETA_STORAGE_CLASS, "later");
        assert_eq!(claim_class(&beta), "later");
        assert!(!claim_has_class(&claim("c").build()));
        assert!(claim_has_class(&claim("c").class("").build()));
    }

    #[test]
    fn the_newest_default_class_wins() {
        let mut classes = BTreeMap::new();
        classes.insert(
            "a".to_string(),
            class("a", "p").default_class().created(10).build(),
        );
        classes.insert(
            "b".to_string(),
            class("b", "p").default_class().created(20).build(),
        );
        classes.insert("c".to_string(), class("c", "p").created(30).build());
        assert_eq!(
            default_class(&classes).map(|c| name(&c.metadata)),
            Some("b")
        );
        classes.remove("b");
        classes.remove("a");
        assert!(default_class(&classes).is_none());
    }

    #[test]
    fn matching_picks_the_smallest_fitting_volume() {
        let c = claim("c")
            .class("fast")
            .request("5Gi")
            .modes(&["ReadWriteOnce"])
            .build();
        let vols = vec![
            volume("big")
                .class("fast")
                .capacity("10Gi")
                .available()
                .build(),
            volume("small")
                .class("fast")
                .capacity("5Gi")
                .available()
                .build(),
            volume("tiny")
                .class("fast")
                .capacity("1Gi")
                .available()
                .build(),
            volume("other-class")
                .class("slow")
                .capacity("5Gi")
                .available()
                .build(),
            volume("rox")
                .class("fast")
                .capacity("5Gi")
                .modes(&["ReadOnlyMany"])
                .available()
                .build(),
            volume("block")
                .class("fast")
                .capacity("5Gi")
                .block()
                .available()
                .build(),
            volume("released")
                .class("fast")
                .capacity("5Gi")
                .phase("Released")
                .build(),
        ];
        let found = find_matching_volume(&c, &vols, false).map(|v| name(&v.metadata));
        assert_eq!(found, Some("small"));
        // Waiting for a consumer: only pre-bound volumes.
        assert!(find_matching_volume(&c, &vols, true).is_none());
    }

    #[test]
    fn a_prebound_volume_wins_and_others_claims_are_skipped() {
        let c = claim("c").uid("u1").class("fast").request("1Gi").build();
        let vols = vec![
            volume("small")
                .class("fast")
                .capacity("1Gi")
                .available()
                .build(),
            volume("mine")
                .class("fast")
                .capacity("8Gi")
                .claim_ref("default", "c", "")
                .build(),
            volume("theirs")
                .class("fast")
                .capacity("1Gi")
                .claim_ref("default", "d", "u2")
                .build(),
        ];
        let found = find_matching_volume(&c, &vols, true).map(|v| name(&v.metadata));
        assert_eq!(found, Some("mine"));
        let stale = volume("stale")
            .class("fast")
            .capacity("1Gi")
            .claim_ref("default", "c", "u0");
        let vols = vec![stale.build()];
        assert!(find_matching_volume(&c, &vols, false).is_none());
    }

    #[test]
    fn a_selector_limits_the_volumes() {
        let c = claim("c")
            .class("")
            .request("1Gi")
            .selector("tier", "gold")
            .build();
        let vols = vec![
            volume("plain")
                .class("")
                .capacity("1Gi")
                .available()
                .build(),
            volume("gold")
                .class("")
                .capacity("2Gi")
                .label("tier", "gold")
                .available()
                .build(),
        ];
        let found = find_matching_volume(&c, &vols, false).map(|v| name(&v.metadata));
        assert_eq!(found, Some("gold"));
    }

    #[test]
    fn why_a_requested_volume_does_not_fit() {
        let c = claim("c")
            .class("fast")
            .request("2Gi")
            .modes(&["ReadWriteOnce"])
            .build();
        let small = volume("v").class("fast").capacity("1Gi").build();
        assert_eq!(
            volume_unsatisfying(&small, &c).as_deref(),
            Some("requested PV is too small")
        );
        let other = volume("v").class("slow").capacity("2Gi").build();
        assert_eq!(
            volume_unsatisfying(&other, &c).as_deref(),
            Some("storageClassName does not match")
        );
        let rox = volume("v")
            .class("fast")
            .capacity("2Gi")
            .modes(&["ReadOnlyMany"])
            .build();
        assert_eq!(
            volume_unsatisfying(&rox, &c).as_deref(),
            Some("incompatible accessMode")
        );
        let fits = volume("v").class("fast").capacity("2048Mi").build();
        assert_eq!(volume_unsatisfying(&fits, &c), None);
    }
}
