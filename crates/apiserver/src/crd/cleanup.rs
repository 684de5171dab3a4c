//! Deleting a CustomResourceDefinition removes its objects first, as
//! upstream's CRD registry and CRDFinalizer do: the first delete marks the
//! CRD (deletionTimestamp, the `customresourcecleanup.apiextensions.k8s.io`
//! finalizer, Terminating True `InstanceDeletionPending`) while its
//! resource keeps being served without creates; the controller then
//! deletes every object (honouring their own finalizers; Terminating
//! `InstanceDeletionInProgress`), and once none is left sets Terminating
//! False `InstanceDeletionCompleted`, drops the finalizer and the CRD goes.

use serde_json::{json, Value};
use skiff_store::ListOptions;

use super::names::{self, Condition, CrdNames};
use crate::catalog::Resource;
use crate::customresources::{intern, Names};
use crate::object;
use crate::registry::delete::DeleteOptions;
use crate::resources::customresourcedefinitions::CLEANUP_FINALIZER;
use crate::AppState;

/// Where a cleanup stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The CRD does not carry our finalizer (any more).
    NotOurs,
    /// Objects remain (they have finalizers of their own).
    Waiting,
    /// Every object is gone; the finalizer is dropped from `crd`.
    Done,
}

/// The resource a CRD's objects are stored under (its storage version).
fn storage_resource(crd: &Value, accepted: &CrdNames) -> &'static Resource {
    let text = |p: &str| {
        crd.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let version = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|v| {
            v.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    intern(&Names {
        group: text("/spec/group"),
        version,
        plural: accepted.plural.clone(),
        singular: accepted.singular.clone(),
        kind: accepted.kind.clone(),
        namespaced: text("/spec/scope") != "Cluster",
        short_names: Vec::new(),
        categories: Vec::new(),
        subresources: Vec::new(),
    })
}

/// One cleanup step for a CRD marked for deletion (`crd` is changed in
/// place: conditions, finalizers).
pub async fn step(state: &AppState, crd: &mut Value) -> Step {
    let mut fins = crate::registry::finalize::finalizers(crd);
    if !fins.iter().any(|f| f == CLEANUP_FINALIZER) {
        return Step::NotOurs;
    }
    let accepted = CrdNames::from_json(crd.pointer("/status/acceptedNames"));
    let done = if accepted.plural.is_empty() || !names::is_true(crd, "Established") {
        Condition::new(
            "Terminating",
            "False",
            "NeverEstablished",
            "resource was never established",
        )
    } else {
        names::set_condition(
            crd,
            &Condition::new(
                "Terminating",
                "True",
                "InstanceDeletionInProgress",
                "CustomResource deletion is in progress",
            ),
        );
        let r = storage_resource(crd, &accepted);
        match delete_all(state, r).await {
            Ok(true) => Condition::new(
                "Terminating",
                "False",
                "InstanceDeletionCompleted",
                "removed all instances",
            ),
            Ok(false) => return Step::Waiting,
            Err(e) => {
                names::set_condition(
                    crd,
                    &Condition::new(
                        "Terminating",
                        "True",
                        "InstanceDeletionFailed",
                        &format!("could not issue all deletes: {}", e.message),
                    ),
                );
                return Step::Waiting;
            }
        }
    };
    names::set_condition(crd, &done);
    fins.retain(|f| f != CLEANUP_FINALIZER);
    object::meta(crd).insert("finalizers".into(), json!(fins));
    if fins.is_empty() {
        object::meta(crd).remove("finalizers");
    }
    Step::Done
}

/// Deletes every object of `r`; true when none is left.
async fn delete_all(state: &AppState, r: &'static Resource) -> crate::status::ApiResult<bool> {
    let prefix = object::prefix(r, None);
    let page = state.store.list(&prefix, ListOptions::default()).await?;
    for kv in &page.items {
        let Some(rest) = kv.key.strip_prefix(&prefix) else {
            continue;
        };
        let (ns, name) = match rest.split_once('/') {
            Some((ns, name)) if r.namespaced => (Some(ns), name),
            _ => (None, rest),
        };
        let kind = state.catalog.resolve(r);
        match crate::registry::delete::delete_one(state, &kind, ns, name, &DeleteOptions::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.code == axum::http::StatusCode::NOT_FOUND => {}
            Err(e) => return Err(e),
        }
    }
    let left = state.store.list(&prefix, ListOptions::default()).await?;
    Ok(left.items.is_empty())
}

/// Writes the finished CRD (finalizer dropped) and deletes it when no
/// finalizer is left.
pub async fn finish(state: &AppState, crd: &Value, revision: i64) {
    let Some(r) = super::crd_resource() else {
        return;
    };
    let Some(name) = object::name_of(crd) else {
        return;
    };
    // Serving stops before the CRD is gone, so nobody sees it deleted and
    // its resource still served (a failed write below brings it back on
    // the next pass).
    state.crds.remove(name);
    let Some(written) = super::write::write_status(state, crd, revision).await else {
        return;
    };
    let key = object::key(r, None, name);
    let kind = state.catalog.resolve(r);
    if let Err(e) =
        crate::registry::finalize::finish_if_done(state, &kind, &key, crd, written).await
    {
        tracing::warn!(crd = %name, error = %e.message, "cannot remove deleted CRD");
    }
}
