//! Controller history (upstream's `pkg/controller/history`): the
//! ControllerRevisions a StatefulSet or DaemonSet keeps of its pod
//! template. A revision's `data` is a strategic merge patch that puts the
//! template back (`{"spec":{"template":{"$patch":"replace",...}}}`, keys
//! sorted as Go's encoder writes them), which is what `kubectl rollout
//! undo` applies to the owner; its name is `<owner>-<hash>`, the hash
//! FNV-1 (32 bit) of the data and the collision count, written with
//! upstream's "safe" alphabet; `revision` numbers grow by one per new
//! template, and a template seen before gets its old revision renumbered
//! instead of a new one.
//!
//! The pure parts (hashing, naming, the patch, picking equal revisions and
//! the ones to prune) are functions here; [`create`] and [`renumber`]
//! write. This module does not decide which revision is current.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

/// The label a revision's hash is kept in (upstream's
/// `history.ControllerRevisionHashLabel`).
pub const HASH_LABEL: &str = "controller.kubernetes.io/hash";
/// The label pods and DaemonSet revisions carry their revision in
/// (`apps/v1` `ControllerRevisionHashLabelKey`).
pub const POD_REVISION_LABEL: &str = "controller-revision-hash";
/// `revisionHistoryLimit` when unset.
pub const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// FNV-1, 32 bit (Go's `hash/fnv.New32`).
pub fn fnv32(chunks: &[&[u8]]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for chunk in chunks {
        for b in *chunk {
            h = h.wrapping_mul(0x0100_0193);
            h ^= u32::from(*b);
        }
    }
    h
}

/// Upstream's `rand.SafeEncodeString`: each byte to a letter or digit of
/// an alphabet without vowels, so no words are spelt.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// The hash of a revision's data with the collision count.
pub fn hash(data: &[u8], collision_count: Option<i32>) -> String {
    let probe = collision_count.map(|c| c.to_string());
    let mut chunks: Vec<&[u8]> = vec![data];
    if let Some(p) = &probe {
        chunks.push(p.as_bytes());
    }
    safe_encode(&fnv32(&chunks).to_string())
}

/// `<prefix>-<hash>`, the prefix cut to 223 bytes.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let mut end = prefix.len().min(223);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{hash}", &prefix[..end])
}

/// The patch that restores an owner's pod template: its `spec.template`
/// (as the owner serializes) with `$patch: replace`, keys sorted.
pub fn template_patch(owner: &Value) -> Vec<u8> {
    let mut template = owner
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(t) = template.as_object_mut() {
        t.insert("$patch".into(), json!("replace"));
    }
    // serde_json's maps are ordered by key, like Go's map encoding.
    serde_json::to_vec(&json!({"spec": {"template": template}})).unwrap_or_default()
}

/// The pod template a revision stores, if its data has one.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    template.as_object_mut()?.remove("$patch");
    serde_json::from_value(template).ok()
}

/// The data as JSON (what equality is decided on).
pub fn data_of(revision: &ControllerRevision) -> Value {
    revision
        .data
        .as_ref()
        .map(|d| d.0.clone())
        .unwrap_or(Value::Null)
}

/// A revision of `owner` (namespace, name, controller reference) holding
/// `data`, labelled with the template's labels and the hash (upstream's
/// `NewControllerRevision`).
pub fn new_revision(
    namespace: &str,
    owner_name: &str,
    owner: OwnerReference,
    template_labels: Option<&BTreeMap<String, String>>,
    data: &[u8],
    revision: i64,
    collision_count: Option<i32>,
) -> ControllerRevision {
    let hash = hash(data, collision_count);
    let mut labels = template_labels.cloned().unwrap_or_default();
    labels.insert(HASH_LABEL.into(), hash.clone());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(owner_name, &hash)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(
            serde_json::from_slice(data).unwrap_or(Value::Null),
        )),
        revision,
    }
}

/// Sorts by revision number, then name (upstream's stable sort).
pub fn sort(revisions: &mut [Arc<ControllerRevision>]) {
    revisions.sort_by(|a, b| {
        a.revision
            .cmp(&b.revision)
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
}

/// One more than the highest revision number (1 for none).
pub fn next_revision(revisions: &[Arc<ControllerRevision>]) -> i64 {
    revisions.iter().map(|r| r.revision).max().unwrap_or(0) + 1
}

/// Whether two revisions hold the same data (upstream's `EqualRevision`,
/// which first compares the hash labels when both have one).
pub fn equal(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let label = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(HASH_LABEL))
            .cloned()
    };
    if let (Some(x), Some(y)) = (label(a), label(b)) {
        if x != y && x.parse::<u32>().is_ok() && y.parse::<u32>().is_ok() {
            return false;
        }
    }
    data_of(a) == data_of(b)
}

/// The revisions (sorted) holding the same data as `needle`.
pub fn find_equal(
    revisions: &[Arc<ControllerRevision>],
    needle: &ControllerRevision,
) -> Vec<Arc<ControllerRevision>> {
    revisions
        .iter()
        .filter(|r| equal(r, needle))
        .cloned()
        .collect()
}

/// The oldest revisions past `limit` among those no live pod, nor the
/// current or update revision, uses (`revisions` sorted).
pub fn to_prune(
    revisions: &[Arc<ControllerRevision>],
    live: &HashSet<String>,
    limit: i32,
) -> Vec<Arc<ControllerRevision>> {
    let history: Vec<_> = revisions
        .iter()
        .filter(|r| !live.contains(r.metadata.name.as_deref().unwrap_or_default()))
        .cloned()
        .collect();
    let Ok(limit) = usize::try_from(limit) else {
        return Vec::new();
    };
    if history.len() <= limit {
        return Vec::new();
    }
    history[..history.len() - limit].to_vec()
}

/// Creates `revision`; when its name is taken by other data, counts a
/// collision and tries the next name (upstream's
/// `CreateControllerRevision`). Returns the revision that holds the data
/// (an existing equal one is reused) and the collision count.
pub async fn create(
    api: &Api<ControllerRevision>,
    owner_name: &str,
    mut revision: ControllerRevision,
    mut collision_count: i32,
) -> kube::Result<(ControllerRevision, i32)> {
    let data = serde_json::to_vec(&data_of(&revision)).unwrap_or_default();
    loop {
        let hash = hash(&data, Some(collision_count));
        let name = revision_name(owner_name, &hash);
        revision.metadata.name = Some(name.clone());
        revision
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(HASH_LABEL.into(), hash);
        match api.create(&PostParams::default(), &revision).await {
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let existing = api.get(&name).await?;
                if data_of(&existing) == data_of(&revision) {
                    return Ok((existing, collision_count));
                }
                collision_count = collision_count.saturating_add(1);
            }
            other => return other.map(|r| (r, collision_count)),
        }
    }
}

/// The revisions of the owner with `uid` among `candidates` (one
/// namespace): its own, and orphans its selector matches, which it adopts
/// (upstream's `ClaimControllerRevisions`); revisions it controls that no
/// longer match are released.
pub async fn claim(
    api: &Api<ControllerRevision>,
    candidates: Vec<Arc<ControllerRevision>>,
    owner: OwnerReference,
    selector: &skiff_client::selectors::Selector,
    owner_deleting: bool,
) -> kube::Result<Vec<Arc<ControllerRevision>>> {
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409);
    let plan = super::ownership::plan(candidates, &owner.uid, selector, owner_deleting);
    let mut owned = plan.owned;
    for orphan in plan.adopt {
        match super::ownership::adopt(api, &orphan, owner.clone()).await {
            Ok(r) => owned.push(Arc::new(r)),
            Err(e) if gone(&e) => {}
            Err(e) => return Err(e),
        }
    }
    for stray in plan.release {
        match super::ownership::release(api, &stray, &owner.uid).await {
            Err(e) if !gone(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(owned)
}

/// Gives an existing revision a new number (a rollback to its template).
pub async fn renumber(
    api: &Api<ControllerRevision>,
    revision: &ControllerRevision,
    number: i64,
) -> kube::Result<ControllerRevision> {
    let patch = json!({"revision": number});
    api.patch(
        revision.metadata.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rev(name: &str, number: i64, data: Value) -> Arc<ControllerRevision> {
        Arc::new(ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some(RawExtension(data)),
            revision: number,
        })
    }

    #[test]
    fn fnv_and_safe_encoding_are_gos() {
        // Go: fnv.New32() of "" is the offset basis; of "a" is 0x050c5d7e.
        assert_eq!(fnv32(&[b""]), 0x811c_9dc5);
        assert_eq!(fnv32(&[b"a"]), 0x050c_5d7e);
        assert_eq!(fnv32(&[b"a", b"b"]), fnv32(&[b"ab"]));
        // '0' is byte 48, 48 % 27 = 21 → '4'; '9' is 57 % 27 = 3 → 'f'.
        assert_eq!(safe_encode("09"), "4f");
        let h = hash(b"{}", Some(0));
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        assert_ne!(
            h,
            hash(b"{}", Some(1)),
            "the collision count changes the hash"
        );
        assert_ne!(h, hash(b"{}", None));
    }

    #[test]
    fn names_are_prefix_and_hash_cut_to_fit() {
        assert_eq!(revision_name("web", "abc"), "web-abc");
        let long = "x".repeat(300);
        assert_eq!(revision_name(&long, "h").len(), 225);
    }

    #[test]
    fn the_patch_replaces_the_template_with_sorted_keys() {
        let owner = json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "template": {"spec": {"z": 1, "a": 2}, "metadata": {"labels": {"app": "web"}}}},
        });
        let patch = String::from_utf8(template_patch(&owner)).unwrap();
        assert_eq!(
            patch,
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"web"}},"spec":{"a":2,"z":1}}}}"#
        );
        let r = new_revision(
            "ns",
            "web",
            OwnerReference::default(),
            None,
            patch.as_bytes(),
            1,
            Some(0),
        );
        let template = template_of(&r).unwrap();
        assert_eq!(
            template.metadata.unwrap().labels.unwrap()["app"],
            "web".to_string()
        );
        let labels = r.metadata.labels.unwrap();
        assert_eq!(
            r.metadata.name.unwrap(),
            format!("web-{}", labels[HASH_LABEL])
        );
    }

    #[test]
    fn equal_revisions_are_found_and_old_ones_pruned() {
        let mut revs = vec![
            rev("c", 3, json!({"v": 3})),
            rev("a", 1, json!({"v": 1})),
            rev("b", 2, json!({"v": 2})),
        ];
        sort(&mut revs);
        assert_eq!(next_revision(&revs), 4);
        assert_eq!(next_revision(&[]), 1);
        let found = find_equal(&revs, &rev("x", 9, json!({"v": 2})));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].metadata.name.as_deref(), Some("b"));
        let live: HashSet<String> = ["c".to_string()].into();
        let pruned = to_prune(&revs, &live, 1);
        assert_eq!(pruned.len(), 1);
        assert_eq!(pruned[0].metadata.name.as_deref(), Some("a"));
        assert!(to_prune(&revs, &live, 10).is_empty());
        assert!(to_prune(&revs, &HashSet::new(), 0).len() == 3);
    }
}
