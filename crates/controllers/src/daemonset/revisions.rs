//! A DaemonSet's ControllerRevisions (upstream's `constructHistory` and
//! `cleanupHistory`): the revision of the current template made, or the
//! existing one renumbered to be the newest; duplicates removed; old ones
//! past `revisionHistoryLimit` that no pod uses pruned. A name taken by
//! another template raises the set's `collisionCount`.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

use super::{conflict, not_found, selector, template_hash, write, Error, State};
use crate::workload::history::{self, POD_REVISION_LABEL};
use crate::workload::ownership;

/// Finds or makes the revision of the current template (upstream's
/// `constructHistory`): the hash of the current template and the other
/// revisions.
pub(super) async fn construct_history(
    ds: &DaemonSet,
    state: &State,
    api: &Api<ControllerRevision>,
) -> Result<(String, Vec<Arc<ControllerRevision>>), Error> {
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let name = ds.metadata.name.clone().unwrap_or_default();
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    let hash = template_hash(ds, collisions);
    let patch = history::template_patch(&serde_json::to_value(ds).unwrap_or_default());
    let patch_value: serde_json::Value = serde_json::from_slice(&patch).unwrap_or_default();
    let in_ns: Vec<Arc<ControllerRevision>> = state
        .revisions
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()))
        .collect();
    let mut all = history::claim(
        api,
        in_ns,
        ownership::controller_ref(ds),
        &selector(ds)?,
        false,
    )
    .await
    .map_err(write(format!(
        "claiming the controllerrevisions of {ns}/{name}"
    )))?;
    history::sort(&mut all);
    let is_current = |r: &ControllerRevision| {
        r.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_REVISION_LABEL))
            == Some(&hash)
            || history::data_of(r) == patch_value
    };
    let (current, old): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| is_current(r));
    let max_old = old.iter().map(|r| r.revision).max().unwrap_or(0);
    match current.last() {
        None => {
            let mut labels: BTreeMap<String, String> = ds
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            labels.insert(POD_REVISION_LABEL.into(), hash.clone());
            let revision = ControllerRevision {
                metadata: ObjectMeta {
                    name: Some(history::revision_name(&name, &hash)),
                    namespace: Some(ns.clone()),
                    labels: Some(labels),
                    annotations: ds.metadata.annotations.clone(),
                    owner_references: Some(vec![ownership::controller_ref(ds)]),
                    ..Default::default()
                },
                data: Some(RawExtension(patch_value.clone())),
                revision: max_old + 1,
            };
            let revision_name = revision.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), &revision).await {
                Ok(_) => {}
                Err(e) if conflict(&e) => {
                    let existing = api.get(&revision_name).await.map_err(write(format!(
                        "reading controllerrevision {ns}/{revision_name}"
                    )))?;
                    let ours = ownership::is_controlled_by(&existing.metadata, &uid);
                    if !(ours && history::data_of(&existing) == patch_value) {
                        let sets: Api<DaemonSet> =
                            Api::namespaced(state.context.client.clone(), &ns);
                        let next = collisions.unwrap_or(0).saturating_add(1);
                        sets.patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": {"collisionCount": next}})),
                        )
                        .await
                        .map_err(write(format!(
                            "updating the collision count of {ns}/{name}"
                        )))?;
                        return Err(Error::Collision(revision_name));
                    }
                }
                Err(e) => {
                    return Err(write(format!(
                        "creating controllerrevision {ns}/{revision_name}"
                    ))(e))
                }
            }
        }
        Some(cur) => {
            // Duplicates of the current template go; it gets the highest number.
            for dup in &current[..current.len() - 1] {
                let dup_name = dup.metadata.name.clone().unwrap_or_default();
                match api.delete(&dup_name, &DeleteParams::default()).await {
                    Err(e) if !not_found(&e) => {
                        return Err(write("deleting a duplicate controllerrevision")(e))
                    }
                    _ => {}
                }
            }
            if cur.revision <= max_old {
                history::renumber(api, cur, max_old + 1)
                    .await
                    .map_err(write(format!(
                        "renumbering a controllerrevision of {ns}/{name}"
                    )))?;
            }
        }
    }
    Ok((hash, old))
}

/// Deletes old revisions past `revisionHistoryLimit` that no pod uses.
pub(super) async fn cleanup_history(
    ds: &DaemonSet,
    api: &Api<ControllerRevision>,
    pods: &[Arc<Pod>],
    hash: &str,
    old: Vec<Arc<ControllerRevision>>,
) -> Result<(), Error> {
    let limit = ds
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(history::DEFAULT_HISTORY_LIMIT);
    let mut live: HashSet<String> = pods
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get(POD_REVISION_LABEL).cloned())
        .collect();
    live.insert(hash.to_string());
    // Live here is by hash label; map revisions to their hash for the check.
    let by_hash: Vec<Arc<ControllerRevision>> = old
        .into_iter()
        .filter(|r| {
            let h = r
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(POD_REVISION_LABEL));
            h.is_none_or(|h| !live.contains(h))
        })
        .collect();
    for r in history::to_prune(&by_hash, &HashSet::new(), limit) {
        let name = r.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Err(e) if !not_found(&e) => {
                return Err(write(format!("deleting controllerrevision {name}"))(e))
            }
            _ => {}
        }
    }
    Ok(())
}
