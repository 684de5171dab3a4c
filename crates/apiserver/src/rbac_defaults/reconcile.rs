//! Reconciling one bootstrap object with what the store holds, as
//! upstream's `pkg/registry/rbac/reconciliation` does at server start (in
//! its union mode: nothing is ever taken away).
//!
//! - Absent: created.
//! - Present with `rbac.authorization.kubernetes.io/autoupdate: "false"`:
//!   left alone.
//! - A role: missing labels and annotations are added (existing values
//!   win); the bootstrap rules the stored rules do not cover are appended,
//!   broken down to one verb on one resource (upstream's `Covers`), and
//!   extra rules stay. An aggregated role gets only its missing
//!   aggregation selectors (the aggregation controller owns its rules); a
//!   stored aggregation rule the bootstrap role does not have is removed.
//! - A binding: missing labels, annotations and subjects are added, extra
//!   subjects stay; a different `roleRef` (which cannot be updated) makes
//!   it deleted and created again with the bootstrap `roleRef`.
//!
//! Writes compare-and-swap on the stored revision; a conflict, or the
//! object appearing or vanishing meanwhile, starts over, up to
//! [`ATTEMPTS`] times.

use bytes::Bytes;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::{json, Value};
use skiff_store::{Error, Store};

use super::AUTOUPDATE;
use crate::authz::rbac::escalation::uncovered;
use crate::object;

/// How many times one object is read and written before giving up.
const ATTEMPTS: usize = 5;

/// What reconciling one stored object asks for.
#[derive(Debug, PartialEq)]
pub(super) enum Plan {
    /// Up to date, or protected.
    Keep,
    Update(Value),
    /// Delete the stored object and create this one.
    Recreate(Value),
}

/// Whether an admin turned reconciliation off for `existing`.
fn protected(existing: &Value) -> bool {
    existing
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(AUTOUPDATE))
        .and_then(Value::as_str)
        == Some("false")
}

/// Adds to `result`'s `metadata.<field>` the entries of `expected`'s it
/// lacks.
fn merge_missing(result: &mut Value, expected: &Value, field: &str) {
    let Some(wanted) = expected
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
    else {
        return;
    };
    let entry = object::meta(result)
        .entry(field)
        .or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    if let Some(map) = entry.as_object_mut() {
        for (k, v) in wanted {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}

fn array(obj: &Value, field: &str) -> Vec<Value> {
    obj.get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn policy_rules(rules: &[Value]) -> Vec<PolicyRule> {
    rules
        .iter()
        .filter_map(|r| serde_json::from_value(r.clone()).ok())
        .collect()
}

fn selectors(obj: &Value) -> Vec<Value> {
    obj.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The stored role `existing` reconciled with the bootstrap `expected`;
/// `None` when nothing is to be written.
pub(super) fn reconciled_role(existing: &Value, expected: &Value) -> Option<Value> {
    if protected(existing) {
        return None;
    }
    let mut result = existing.clone();
    merge_missing(&mut result, expected, "annotations");
    merge_missing(&mut result, expected, "labels");
    let aggregated = |o: &Value| o.get("aggregationRule").is_some_and(|a| !a.is_null());
    if aggregated(expected) {
        let mut have = selectors(existing);
        let missing: Vec<Value> = selectors(expected)
            .into_iter()
            .filter(|s| !have.contains(s))
            .collect();
        if !missing.is_empty() {
            have.extend(missing);
            object::set(
                &mut result,
                "aggregationRule",
                json!({"clusterRoleSelectors": have}),
            );
        }
    } else {
        let mut rules = array(existing, "rules");
        let missing = uncovered(
            &policy_rules(&rules),
            &policy_rules(&array(expected, "rules")),
        );
        let mut added = false;
        for r in missing.iter().filter_map(|r| serde_json::to_value(r).ok()) {
            if !rules.contains(&r) {
                rules.push(r);
                added = true;
            }
        }
        if added {
            object::set(&mut result, "rules", json!(rules));
        }
        if aggregated(existing) {
            if let Some(map) = result.as_object_mut() {
                map.remove("aggregationRule");
            }
        }
    }
    (result != *existing).then_some(result)
}

/// Two subjects are the same when kind, API group, name and namespace are.
fn same_subject(a: &Value, b: &Value) -> bool {
    ["kind", "apiGroup", "name", "namespace"].iter().all(|f| {
        a.get(*f).and_then(Value::as_str).unwrap_or("")
            == b.get(*f).and_then(Value::as_str).unwrap_or("")
    })
}

fn role_ref(obj: &Value) -> [&str; 3] {
    ["apiGroup", "kind", "name"].map(|f| {
        obj.get("roleRef")
            .and_then(|r| r.get(f))
            .and_then(Value::as_str)
            .unwrap_or("")
    })
}

/// What the stored binding `existing` needs to match the bootstrap
/// `expected`.
pub(super) fn reconciled_binding(existing: &Value, expected: &Value) -> Plan {
    if protected(existing) {
        return Plan::Keep;
    }
    let mut result = existing.clone();
    merge_missing(&mut result, expected, "annotations");
    merge_missing(&mut result, expected, "labels");
    let recreate = role_ref(existing) != role_ref(expected);
    if recreate {
        object::set(
            &mut result,
            "roleRef",
            expected.get("roleRef").cloned().unwrap_or(Value::Null),
        );
    }
    let mut subjects = array(existing, "subjects");
    let missing: Vec<Value> = array(expected, "subjects")
        .into_iter()
        .filter(|s| !subjects.iter().any(|h| same_subject(h, s)))
        .collect();
    if !missing.is_empty() {
        subjects.extend(missing);
        object::set(&mut result, "subjects", json!(subjects));
    }
    if recreate {
        Plan::Recreate(result)
    } else if result != *existing {
        Plan::Update(result)
    } else {
        Plan::Keep
    }
}

/// `obj` as a new object: its own uid and creation time, none of the
/// server-set fields of an object it replaces.
fn fresh(obj: &Value) -> Value {
    let mut obj = obj.clone();
    let meta = object::meta(&mut obj);
    for f in [
        "resourceVersion",
        "generation",
        "managedFields",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        meta.remove(f);
    }
    meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    meta.insert("creationTimestamp".into(), json!(object::now()));
    obj
}

/// The stored form: JSON without a resourceVersion (the store keeps it).
fn encode(obj: &Value) -> Bytes {
    let mut obj = obj.clone();
    object::meta(&mut obj).remove("resourceVersion");
    serde_json::to_vec(&obj).unwrap_or_default().into()
}

/// Reconciles the ClusterRole or Role `expected` stored at `key`.
pub(super) async fn role(store: &dyn Store, key: &str, expected: &Value) -> Result<(), Error> {
    apply(store, key, expected, |existing| {
        reconciled_role(existing, expected).map_or(Plan::Keep, Plan::Update)
    })
    .await
}

/// Reconciles the ClusterRoleBinding or RoleBinding `expected` stored at
/// `key`.
pub(super) async fn binding(store: &dyn Store, key: &str, expected: &Value) -> Result<(), Error> {
    apply(store, key, expected, |existing| {
        reconciled_binding(existing, expected)
    })
    .await
}

/// Creates `expected` at `key`, or writes what `plan` makes of the stored
/// object, retrying when the store moved in between.
async fn apply(
    store: &dyn Store,
    key: &str,
    expected: &Value,
    plan: impl Fn(&Value) -> Plan,
) -> Result<(), Error> {
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let outcome = match store.get(key).await {
            Err(Error::NotFound { .. }) => {
                store.create(key, encode(&fresh(expected))).await.map(drop)
            }
            Err(e) => return Err(e),
            Ok(kv) => {
                // A value that is not JSON has nothing to merge into.
                let Ok(existing) = serde_json::from_slice::<Value>(&kv.value) else {
                    return Ok(());
                };
                match plan(&existing) {
                    Plan::Keep => return Ok(()),
                    Plan::Update(obj) => store
                        .update(key, encode(&obj), kv.mod_revision)
                        .await
                        .map(drop),
                    Plan::Recreate(obj) => match store.delete(key, Some(kv.mod_revision)).await {
                        Ok(_) | Err(Error::NotFound { .. }) => {
                            store.create(key, encode(&fresh(&obj))).await.map(drop)
                        }
                        Err(e) => Err(e),
                    },
                }
            }
        };
        match outcome {
            Ok(()) => return Ok(()),
            Err(
                e @ (Error::Conflict { .. } | Error::NotFound { .. } | Error::AlreadyExists { .. }),
            ) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(Error::Conflict {
        key: key.to_string(),
        expected: 0,
        actual: 0,
    }))
}
