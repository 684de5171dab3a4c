//! The Local APIServices: one per served group/version (`v1.` for core,
//! `v1.apps`, ...), as kube-apiserver's autoregister controller keeps
//! them, with upstream's priorities and an `Available=True` condition
//! (reason `Local`). [`sync`] creates the missing ones and removes
//! automanaged ones whose group is no longer served (a CRD's group); it
//! runs at start and before every read of apiservices, so groups served
//! later appear without a controller.

use serde_json::{json, Value};
use skiff_store::{ListOptions, Store};

use crate::object;
use crate::resources;

/// The label upstream marks registered APIServices with.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// kube-apiserver 1.33's (group, version) → (groupPriorityMinimum,
/// versionPriority) for built-in groups.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
];

/// The Local APIService of `group`/`version`.
pub fn local(group: &str, version: &str) -> Value {
    let builtin = PRIORITIES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version);
    // A group that is not built in is a CRD's: upstream registers those
    // with priority 1000/100 and automanaged "true".
    let (gpm, vp, managed) =
        builtin.map_or((1000, 100, "true"), |(_, _, g, v)| (*g, *v, "onstart"));
    let mut spec = json!({"version": version, "groupPriorityMinimum": gpm, "versionPriority": vp});
    if !group.is_empty() {
        object::set(&mut spec, "group", json!(group));
    }
    json!({
        "kind": "APIService",
        "apiVersion": "apiregistration.k8s.io/v1",
        "metadata": {
            "name": format!("{version}.{group}"),
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now(),
            "labels": {AUTOMANAGED: managed},
        },
        "spec": spec,
        "status": {"conditions": [{
            "type": "Available",
            "status": "True",
            "lastTransitionTime": object::now(),
            "reason": "Local",
            "message": "Local APIServices are always available",
        }]},
    })
}

/// Creates the missing Local APIServices and deletes automanaged Local ones
/// of groups no longer served.
pub async fn sync(store: &dyn Store, groups: &[(&str, &str)]) -> Result<(), skiff_store::Error> {
    let Some(r) = resources::find_builtin("apiregistration.k8s.io", "v1", "apiservices") else {
        return Ok(());
    };
    let mut wanted: Vec<(&str, &str)> = vec![("", "v1")];
    wanted.extend_from_slice(groups);
    let names: Vec<String> = wanted.iter().map(|(g, v)| format!("{v}.{g}")).collect();
    let stored = store
        .list(&object::prefix(r, None), ListOptions::default())
        .await?;
    let mut present = Vec::new();
    for kv in &stored.items {
        let Ok(obj) = serde_json::from_slice::<Value>(&kv.value) else {
            continue;
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let managed = obj
            .pointer("/metadata/labels")
            .and_then(|l| l.get(AUTOMANAGED))
            .is_some();
        let is_local = obj.pointer("/spec/service").is_none_or(Value::is_null);
        if managed && is_local && !names.contains(&name) {
            match store.delete(&kv.key, Some(kv.mod_revision)).await {
                Ok(_) | Err(skiff_store::Error::NotFound { .. }) => {}
                Err(skiff_store::Error::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        present.push(name);
    }
    for ((group, version), name) in wanted.iter().zip(&names) {
        if present.contains(name) {
            continue;
        }
        let body = serde_json::to_vec(&local(group, version)).unwrap_or_default();
        match store.create(&object::key(r, None, name), body.into()).await {
            Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
