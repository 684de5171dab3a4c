//! What the Deployment controller reads of a ReplicaSet, and the pure
//! arithmetic of upstream's `deployment/util`: the maxSurge/maxUnavailable
//! fenceposts (percentages rounded up for surge, down for unavailable,
//! never both zero), the pod-template-hash, the revision annotations and
//! their history, finding the new ReplicaSet (same template but for the
//! hash label), and counts over several ReplicaSets.
//!
//! Pure; no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

/// The label and selector key each ReplicaSet of a Deployment adds.
pub const HASH_LABEL: &str = "pod-template-hash";
/// The revision of a ReplicaSet (and the Deployment's current one).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a revived ReplicaSet had, comma-separated.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's replicas when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The Deployment's replicas plus maxSurge then.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Annotations of the Deployment that are not copied to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];
/// The longest revision-history annotation (upstream's 2,000 characters).
const MAX_HISTORY_CHARS: usize = 2000;

/// A ReplicaSet as the rollout arithmetic sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    pub name: String,
    pub uid: String,
    pub created: Option<Timestamp>,
    /// spec.replicas.
    pub replicas: i32,
    /// status.replicas.
    pub actual: i32,
    pub ready: i32,
    pub available: i32,
    pub annotations: BTreeMap<String, String>,
    pub deleting: bool,
    pub generation: i64,
    pub observed_generation: i64,
    /// Its `ReplicaFailure` condition: (status, reason, message).
    pub failure: Option<(String, String, String)>,
}

impl Set {
    /// Reads `rs`.
    pub fn of(rs: &ReplicaSet) -> Self {
        let status = rs.status.clone().unwrap_or_default();
        Set {
            name: rs.metadata.name.clone().unwrap_or_default(),
            uid: rs.metadata.uid.clone().unwrap_or_default(),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            replicas: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            actual: status.replicas,
            ready: status.ready_replicas.unwrap_or(0),
            available: status.available_replicas.unwrap_or(0),
            annotations: rs.metadata.annotations.clone().unwrap_or_default(),
            deleting: rs.metadata.deletion_timestamp.is_some(),
            generation: rs.metadata.generation.unwrap_or(0),
            observed_generation: status.observed_generation.unwrap_or(0),
            failure: status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "ReplicaFailure")
                .map(|c| {
                    (
                        c.status.clone(),
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default(),
                    )
                }),
        }
    }

    /// The revision annotation as a number (0 when absent or unreadable).
    pub fn revision(&self) -> i64 {
        self.annotations
            .get(REVISION)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    }

    /// The desired-replicas annotation.
    pub fn desired_annotation(&self) -> Option<i32> {
        self.annotations.get(DESIRED_REPLICAS)?.parse().ok()
    }

    /// The max-replicas annotation.
    pub fn max_annotation(&self) -> Option<i32> {
        self.annotations.get(MAX_REPLICAS)?.parse().ok()
    }
}

/// spec.replicas of a Deployment (default 1).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Whether the strategy is RollingUpdate (the default).
pub fn is_rolling(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// `value` of `total` (a number, or a percentage rounded up or down).
pub fn scaled(value: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    match value {
        None => 0,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return s.parse().unwrap_or(0);
            };
            let product = percent * i64::from(total);
            let n = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(n).unwrap_or(i32::MAX)
        }
    }
}

/// (maxSurge, maxUnavailable) resolved against the replicas: if both come
/// to zero, one pod may be unavailable.
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    if !is_rolling(d) {
        return (0, 0);
    }
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let desired = replicas(d);
    let surge = scaled(rolling.and_then(|r| r.max_surge.as_ref()), desired, true);
    let mut unavailable = scaled(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        desired,
        false,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    (surge, unavailable)
}

/// maxSurge as a count.
pub fn max_surge(d: &Deployment) -> i32 {
    fenceposts(d).0
}

/// maxUnavailable as a count (at most the replicas).
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

/// A template without the hash label, for comparing templates.
fn without_hash(template: &PodTemplateSpec) -> serde_json::Value {
    let mut t = template.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(HASH_LABEL);
    }
    serde_json::to_value(&t).unwrap_or_default()
}

/// Whether two templates are equal but for the hash label.
pub fn same_template(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// The pod-template-hash of `template` with `collisions`: FNV-1a (32 bit)
/// of the template and the collision count, its decimal digits spelled in
/// the alphabet upstream's `SafeEncodeString` uses (no vowels, no
/// look-alike digits).
pub fn template_hash(template: &PodTemplateSpec, collisions: Option<i32>) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(without_hash(template).to_string().as_bytes());
    if let Some(c) = collisions {
        feed(&c.to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(ALPHABET[usize::from(b) % ALPHABET.len()]))
        .collect()
}

/// Sets the revision (keeping the old one in the history, at most 2,000
/// characters of it) and copies the Deployment's annotations onto a
/// ReplicaSet's; whether anything changed.
pub fn set_revision_annotations(
    d: &Deployment,
    annotations: &mut BTreeMap<String, String>,
    revision: i64,
) -> bool {
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) {
            continue;
        }
        if annotations.get(k) != Some(v) {
            annotations.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    let old = annotations.get(REVISION).cloned();
    let old_number: i64 = old.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
    if old_number < revision {
        annotations.insert(REVISION.into(), revision.to_string());
        changed = true;
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            let history = annotations
                .get(REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            let mut entries: Vec<&str> = history.split(',').filter(|e| !e.is_empty()).collect();
            entries.push(&old);
            while entries.join(",").len() > MAX_HISTORY_CHARS && entries.len() > 1 {
                entries.remove(0);
            }
            annotations.insert(REVISION_HISTORY.into(), entries.join(","));
        }
    }
    changed
}

/// Sets desired-replicas and max-replicas; whether they changed.
pub fn set_replicas_annotations(
    annotations: &mut BTreeMap<String, String>,
    desired: i32,
    max: i32,
) -> bool {
    let mut changed = false;
    for (key, value) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let value = value.to_string();
        if annotations.get(key) != Some(&value) {
            annotations.insert(key.into(), value);
            changed = true;
        }
    }
    changed
}

/// The sum of spec.replicas.
pub fn spec_replicas(sets: &[&Set]) -> i32 {
    sets.iter().map(|s| s.replicas).sum()
}

/// The sum of status.replicas.
pub fn actual_replicas(sets: &[&Set]) -> i32 {
    sets.iter().map(|s| s.actual).sum()
}

/// The sum of available replicas.
pub fn available_replicas(sets: &[&Set]) -> i32 {
    sets.iter().map(|s| s.available).sum()
}

/// The sum of ready replicas.
pub fn ready_replicas(sets: &[&Set]) -> i32 {
    sets.iter().map(|s| s.ready).sum()
}

/// Oldest first (by creation, then name), as upstream's
/// `ReplicaSetsByCreationTimestamp`.
pub fn by_age(sets: &mut [Set]) {
    sets.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name)));
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};

    use super::*;

    fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        assert_eq!(fenceposts(&deployment(10, pct("25%"), pct("25%"))), (3, 2));
        assert_eq!(fenceposts(&deployment(4, pct("25%"), pct("25%"))), (1, 1));
        assert_eq!(fenceposts(&deployment(1, pct("25%"), pct("25%"))), (1, 0));
        // Both zero: one may be unavailable.
        assert_eq!(
            fenceposts(&deployment(3, IntOrString::Int(0), pct("10%"))),
            (0, 1)
        );
        assert_eq!(
            fenceposts(&deployment(1000, IntOrString::Int(5), pct("1%"))),
            (5, 10)
        );
        assert_eq!(
            max_unavailable(&deployment(2, IntOrString::Int(0), IntOrString::Int(5))),
            2
        );
    }

    #[test]
    fn the_hash_ignores_the_hash_label_and_follows_collisions() {
        let template: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]},
        }))
        .unwrap();
        let mut labelled = template.clone();
        labelled
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(HASH_LABEL.into(), "x".into());
        let hash = template_hash(&template, None);
        assert_eq!(hash, template_hash(&labelled, None));
        assert!(same_template(&template, &labelled));
        assert_ne!(hash, template_hash(&template, Some(1)));
        assert!(
            hash.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
            "{hash}"
        );
        let mut other = template.clone();
        other.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        assert_ne!(hash, template_hash(&other, None));
        assert!(!same_template(&template, &other));
    }

    #[test]
    fn a_revived_replicaset_keeps_its_old_revisions() {
        let d = Deployment::default();
        let mut a = BTreeMap::new();
        assert!(set_revision_annotations(&d, &mut a, 1));
        assert_eq!(a[REVISION], "1");
        assert!(!a.contains_key(REVISION_HISTORY));
        assert!(set_revision_annotations(&d, &mut a, 3));
        assert_eq!(a[REVISION], "3");
        assert_eq!(a[REVISION_HISTORY], "1");
        assert!(set_revision_annotations(&d, &mut a, 5));
        assert_eq!(a[REVISION_HISTORY], "1,3");
        assert!(!set_revision_annotations(&d, &mut a, 5));
    }
}
