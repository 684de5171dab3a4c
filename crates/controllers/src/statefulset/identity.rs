//! A StatefulSet pod's identity and storage (upstream's
//! `stateful_set_utils.go`): the name `<set>-<ordinal>`, the labels
//! `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`,
//! hostname and subdomain, the claims `<template>-<set>-<ordinal>` and
//! the owner references the claim retention policy asks for.
//!
//! Pure functions; no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::workload::history::POD_REVISION_LABEL;
use crate::workload::{ownership, pods};

/// The pod-name label.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The pod-index label.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// The parent name and ordinal a pod name spells (`web-3` → `web`, 3).
pub fn parent_and_ordinal(name: &str) -> Option<(&str, i32)> {
    let (parent, ordinal) = name.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((parent, ordinal.parse().ok()?))
}

/// The ordinal of a pod of `set` (`None`: not a member by name).
pub fn ordinal_of(set_name: &str, pod: &Pod) -> Option<i32> {
    let (parent, ordinal) = parent_and_ordinal(pod.metadata.name.as_deref()?)?;
    (parent == set_name).then_some(ordinal)
}

/// `spec.ordinals.start` (0 when unset).
pub fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
}

/// `spec.replicas` (1 when unset).
pub fn replicas(set: &StatefulSet) -> i32 {
    set.spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0)
}

/// Whether `ordinal` is within `[start, start + replicas)`.
pub fn in_range(set: &StatefulSet, ordinal: i32) -> bool {
    let start = start_ordinal(set);
    ordinal >= start && ordinal < start.saturating_add(replicas(set))
}

/// `<set>-<ordinal>`.
pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", name(set))
}

fn name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// `<claim template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &StatefulSet, ordinal: i32) -> String {
    format!("{template}-{}-{ordinal}", name(set))
}

/// The claims of the pod with `ordinal`, keyed by template name: the
/// template's labels with the set's `matchLabels` over them.
pub fn claims(set: &StatefulSet, ordinal: i32) -> BTreeMap<String, PersistentVolumeClaim> {
    let Some(spec) = set.spec.as_ref() else {
        return BTreeMap::new();
    };
    let match_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|t| {
            let template = t.metadata.name.clone().unwrap_or_default();
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(&template, set, ordinal));
            claim.metadata.namespace = set.metadata.namespace.clone();
            claim.metadata.resource_version = None;
            claim.metadata.uid = None;
            claim.status = None;
            let labels = claim.metadata.labels.get_or_insert_with(Default::default);
            labels.extend(match_labels.clone());
            (template, claim)
        })
        .collect()
}

/// A new pod of `set` (whose template is `template`) with `ordinal` at
/// `revision` (upstream's `newStatefulSetPod` and `setPodRevision`).
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, ordinal: i32, revision: &str) -> Pod {
    let namespace = set.metadata.namespace.as_deref().unwrap_or_default();
    let mut pod = pods::from_template(
        template,
        namespace,
        &format!("{}-", name(set)),
        Some(ownership::controller_ref(set)),
    );
    let pod_name = pod_name(set, ordinal);
    pod.metadata.name = Some(pod_name.clone());
    let labels = pod.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(POD_REVISION_LABEL.into(), revision.into());
    let service = set.spec.as_ref().and_then(|s| s.service_name.clone());
    let claims = claims(set, ordinal);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(pod_name);
    spec.subdomain = service.filter(|s| !s.is_empty());
    let mut volumes: Vec<Volume> = claims
        .iter()
        .map(|(template, claim)| Volume {
            name: template.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.metadata.name.clone().unwrap_or_default(),
                read_only: None,
            }),
            ..Default::default()
        })
        .collect();
    volumes.extend(
        spec.volumes
            .take()
            .into_iter()
            .flatten()
            .filter(|v| !claims.contains_key(&v.name)),
    );
    spec.volumes = (!volumes.is_empty()).then_some(volumes);
    pod
}

/// The revision label of a pod.
pub fn revision_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(POD_REVISION_LABEL))
        .map(String::as_str)
        .unwrap_or_default()
}

/// Whether the pod's identity labels are right (upstream's
/// `identityMatches`); `None` when they are, else the labels to set.
pub fn identity_fix(set: &StatefulSet, pod: &Pod) -> Option<BTreeMap<String, String>> {
    let ordinal = ordinal_of(name(set), pod)?;
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let want = BTreeMap::from([
        (POD_NAME_LABEL.to_string(), pod_name),
        (POD_INDEX_LABEL.to_string(), ordinal.to_string()),
    ]);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let ok = want.iter().all(|(k, v)| labels.get(k) == Some(v));
    (!ok).then_some(want)
}

/// The claim retention policy: (whenDeleted, whenScaled) are `Delete`.
pub fn retention(set: &StatefulSet) -> (bool, bool) {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    let delete = |v: Option<&String>| v.is_some_and(|v| v == "Delete");
    (
        delete(policy.and_then(|p| p.when_deleted.as_ref())),
        delete(policy.and_then(|p| p.when_scaled.as_ref())),
    )
}

fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

fn refers_to(r: &OwnerReference, kind: &str, grp: &str, name: &str) -> bool {
    r.kind == kind && group(&r.api_version) == grp && r.name == name
}

/// The owner references a claim of `pod` should have under the set's
/// retention policy (upstream's `updateClaimOwnerRefForSetAndPod`): refs
/// to the set and the pod are replaced by controller references as the
/// policy says (the set while the pod is in range and whenDeleted is
/// Delete; the pod once scaled down with whenScaled Delete). `None` when
/// nothing is to change: the refs are right, or the claim is someone
/// else's (another controller, or stale refs to an older set or pod).
pub fn claim_owners(
    claim: &PersistentVolumeClaim,
    set: &StatefulSet,
    pod: &Pod,
) -> Option<Vec<OwnerReference>> {
    let set_ref = ownership::controller_ref(set);
    let pod_ref = ownership::controller_ref(pod);
    let existing = claim.metadata.owner_references.clone().unwrap_or_default();
    let ours = |r: &OwnerReference| {
        refers_to(r, "StatefulSet", "apps", &set_ref.name) || refers_to(r, "Pod", "", &pod_ref.name)
    };
    if existing
        .iter()
        .any(|r| ours(r) && r.uid != set_ref.uid && r.uid != pod_ref.uid)
    {
        return None; // stale: left to whoever manages it
    }
    let unexpected = existing
        .iter()
        .any(|r| r.controller == Some(true) && r.uid != set_ref.uid && r.uid != pod_ref.uid);
    let mut refs: Vec<OwnerReference> = existing.iter().filter(|r| !ours(r)).cloned().collect();
    if !unexpected {
        let (when_deleted, when_scaled) = retention(set);
        let scaled_down = ordinal_of(name(set), pod).is_none_or(|o| !in_range(set, o));
        if when_scaled && scaled_down {
            refs.push(pod_ref);
        } else if when_deleted && !scaled_down {
            refs.push(set_ref);
        }
    }
    (refs != existing).then_some(refs)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{
        StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    };
    use kube::api::ObjectMeta;
    use serde_json::json;

    use super::*;

    fn set(replicas: i32, policy: (&str, &str)) -> StatefulSet {
        let mut s: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid"},
            "spec": {
                "replicas": replicas,
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "www", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www", "labels": {"tier": "db"}}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
            },
        }))
        .unwrap();
        let spec: &mut StatefulSetSpec = s.spec.as_mut().unwrap();
        spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some(policy.0.into()),
                when_scaled: Some(policy.1.into()),
            });
        s
    }

    #[test]
    fn ordinals_are_parsed_from_names() {
        assert_eq!(parent_and_ordinal("web-12"), Some(("web", 12)));
        assert_eq!(parent_and_ordinal("my-web-0"), Some(("my-web", 0)));
        assert_eq!(parent_and_ordinal("web"), None);
        assert_eq!(parent_and_ordinal("web-x1"), None);
        assert_eq!(parent_and_ordinal("web-"), None);
    }

    #[test]
    fn a_new_pod_has_its_identity_and_claims() {
        let s = set(3, ("Retain", "Retain"));
        let template = s.spec.as_ref().unwrap().template.clone();
        let pod = new_pod(&s, &template, 2, "web-abc");
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[POD_NAME_LABEL], "web-2");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        assert_eq!(labels[POD_REVISION_LABEL], "web-abc");
        assert_eq!(labels["app"], "web");
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(
            volumes.len(),
            2,
            "the template's www is replaced by the claim"
        );
        let www = volumes.iter().find(|v| v.name == "www").unwrap();
        assert_eq!(
            www.persistent_volume_claim.as_ref().unwrap().claim_name,
            "www-web-2"
        );
        let refs = pod.metadata.owner_references.as_ref().unwrap();
        assert_eq!(refs[0].kind, "StatefulSet");
        assert_eq!(refs[0].controller, Some(true));
        let claims = claims(&s, 2);
        let claim = &claims["www"];
        let labels = claim.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["tier"], "db");
        assert_eq!(labels["app"], "web");
        assert!(identity_fix(&s, &pod).is_none());
        let mut broken = pod.clone();
        broken
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(POD_INDEX_LABEL);
        assert_eq!(identity_fix(&s, &broken).unwrap()[POD_INDEX_LABEL], "2");
    }

    fn pod(ordinal: i32) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("web-{ordinal}")),
                uid: Some(format!("pod-{ordinal}")),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owners(claim_refs: Option<Vec<OwnerReference>>) -> Vec<(String, String)> {
        claim_refs
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.kind, r.name))
            .collect()
    }

    #[test]
    fn claim_owners_follow_the_retention_policy() {
        let claim = PersistentVolumeClaim::default();
        // Retain/Retain: no refs, nothing to do.
        assert!(claim_owners(&claim, &set(2, ("Retain", "Retain")), &pod(0)).is_none());
        // whenDeleted Delete: the set owns claims of pods in range.
        let s = set(2, ("Delete", "Retain"));
        let refs = claim_owners(&claim, &s, &pod(1));
        assert_eq!(owners(refs.clone()), [("StatefulSet".into(), "web".into())]);
        assert_eq!(refs.as_ref().unwrap()[0].controller, Some(true));
        // ... and not of pods scaled away (whenScaled Retain).
        assert!(claim_owners(&claim, &s, &pod(2)).is_none());
        // whenScaled Delete: the pod owns the claim once scaled down.
        let s = set(2, ("Delete", "Delete"));
        let mut owned = claim.clone();
        owned.metadata.owner_references = claim_owners(&claim, &s, &pod(1));
        assert!(claim_owners(&owned, &s, &pod(1)).is_none(), "already right");
        let s1 = set(1, ("Delete", "Delete"));
        assert_eq!(
            owners(claim_owners(&owned, &s1, &pod(1))),
            [("Pod".into(), "web-1".into())]
        );
        // Someone else's controller: our refs are only scrubbed.
        let mut foreign = claim.clone();
        foreign.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Thing".into(),
            name: "t".into(),
            uid: "other".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        assert!(claim_owners(&foreign, &s, &pod(0)).is_none());
    }
}
