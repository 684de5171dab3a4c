//! The CRD controller of one API server: follows the CRDs in the watch
//! cache and, on every change, (1) accepts names and sets NamesAccepted
//! and Established in each CRD's status (oldest CRD first, so the first
//! to claim a name keeps it), (2) runs the cleanup of CRDs marked for
//! deletion, and (3) replaces the served custom resources in the
//! registry, so discovery, OpenAPI and routing follow within the same
//! pass. Status is written to the store with compare-and-swap on the
//! cached revision; a conflict is settled by the change event it caused.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::names::{self, Claimed, CrdNames};
use crate::object;
use crate::AppState;

/// How often a CRD whose objects are not all gone yet (finalizers) is
/// looked at again.
const CLEANUP_RETRY: Duration = Duration::from_millis(500);

/// Runs until `shutdown`.
pub async fn run(state: AppState, shutdown: CancellationToken) {
    let Some(r) = super::crd_resource() else {
        return;
    };
    run_as(&state, r, &shutdown).await;
    // This server no longer serves its custom resources.
    state.crds.replace(Vec::new());
}

async fn run_as(
    state: &AppState,
    r: &'static crate::catalog::Resource,
    shutdown: &CancellationToken,
) {
    loop {
        if shutdown.is_cancelled() {
            return;
        }
        let cache = state.cache(r);
        if !cache.wait_for(0, Duration::from_secs(1)).await {
            continue;
        }
        let Ok(sub) = cache.subscribe(&object::prefix(r, None), None, None, None) else {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
            }
        };
        let mut live = sub.live;
        let mut pending = reconcile(state).await;
        loop {
            let retry = async {
                if pending {
                    tokio::time::sleep(CLEANUP_RETRY).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                event = live.recv() => {
                    if event.is_none() {
                        // The cache relisted: subscribe again.
                        break;
                    }
                    while live.try_recv().is_ok() {}
                }
                _ = retry => {}
            }
            pending = reconcile(state).await;
        }
    }
}

/// One pass over every CRD; true when a cleanup still waits for objects.
async fn reconcile(state: &AppState) -> bool {
    let Some(r) = super::crd_resource() else {
        return false;
    };
    let Ok((_, items)) = state.cache(r).list(&object::prefix(r, None)) else {
        return false;
    };
    let mut crds: Vec<(Value, i64)> = items
        .iter()
        .filter_map(|c| Some((c.object()?, c.revision)))
        .collect();
    crds.sort_by(|(a, _), (b, _)| {
        let key = |o: &Value| {
            (
                o.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                object::name_of(o).unwrap_or_default().to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    // Names claimed per group, as accepted so far in this pass.
    let mut claimed: std::collections::HashMap<String, Claimed> = Default::default();
    for (crd, _) in &crds {
        let group = text(crd, "/spec/group");
        let accepted = CrdNames::from_json(crd.pointer("/status/acceptedNames"));
        claimed.entry(group).or_default().add(&accepted);
    }
    let mut entries = Vec::new();
    let mut writes = Vec::new();
    let mut pending = false;
    for (mut crd, revision) in crds {
        let group = text(&crd, "/spec/group");
        let requested = CrdNames::from_json(crd.pointer("/spec/names"));
        let accepted = CrdNames::from_json(crd.pointer("/status/acceptedNames"));
        let mut next = crd.clone();
        let settled = requested == accepted
            && names::is_true(&crd, "NamesAccepted")
            && names::is_true(&crd, "Established");
        if !settled {
            let group_claims = claimed.entry(group).or_default();
            let (new_names, accepted_condition) =
                names::accept(&requested, &accepted, group_claims);
            group_claims.add(&new_names);
            let old_established = names::conditions(&crd)
                .into_iter()
                .map(|(c, _)| c)
                .find(|c| c.type_ == "Established");
            let established = names::established(
                old_established.as_ref(),
                accepted_condition.status == "True",
            );
            if let Some(status) = next.get_mut("status") {
                crate::object::set(status, "acceptedNames", new_names.to_json());
            } else {
                crate::object::set(
                    &mut next,
                    "status",
                    json!({"acceptedNames": new_names.to_json()}),
                );
            }
            names::set_condition(&mut next, &accepted_condition);
            names::set_condition(&mut next, &established);
        }
        if next.pointer("/metadata/deletionTimestamp").is_some() {
            match super::cleanup::step(state, &mut next).await {
                super::cleanup::Step::Waiting => pending = true,
                super::cleanup::Step::Done => {
                    crd = next.clone();
                    // Finished: the CRD is gone (or goes with this write).
                    super::cleanup::finish(state, &crd, revision).await;
                    continue;
                }
                super::cleanup::Step::NotOurs => {}
            }
        }
        let accepted_now = CrdNames::from_json(next.pointer("/status/acceptedNames"));
        entries.extend(super::build::entries(&state.crds, &next, &accepted_now));
        if next != crd {
            writes.push((next, revision));
        }
    }
    // Served first: a client that sees Established can use the resource.
    state.crds.replace(entries);
    for (crd, revision) in writes {
        super::write::write_status(state, &crd, revision).await;
    }
    pending
}

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
