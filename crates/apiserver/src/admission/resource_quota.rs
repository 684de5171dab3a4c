//! ResourceQuota: a new object in a namespace with quotas is refused
//! (403) when it would take a quota's usage past its hard limits, in
//! upstream's words (`exceeded quota: q, requested: pods=1, used:
//! pods=2, limited: pods=2`), and a pod that does not state the cpu or
//! memory a quota constrains is refused (`failed quota: q: must specify
//! ...`). Usage is counted from the namespace's stored objects of the
//! kind being created (fresh, so deletions are seen at once); once a
//! create or delete is stored (never for dry runs) the write path calls
//! [`recount`], which writes the kind's usage into the quotas'
//! status.used; the resource quota controller recomputes everything in
//! the background (upstream plugin/pkg/admission/resourcequota, without
//! scopes).

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{json, Value};
use skiff_api::quota::{self, Amount, Usage};

use super::objects::{forbidden, list, list_of};
use super::Context;
use super::{Attributes, Operation, Plugin};
use crate::object;
use crate::status::ApiResult;

#[derive(Debug)]
pub struct ResourceQuota;

/// After a create or delete of a `r` object in `ns` was stored: the
/// quotas of `ns` that count `r` get its current usage in status.used.
pub async fn recount(state: &Context<'_>, r: &crate::catalog::Resource, ns: &str) {
    let Ok(quotas) = list_of(state, "", "v1", "resourcequotas", Some(ns)).await else {
        return;
    };
    let kind = (r.group.to_string(), r.plural.to_string());
    let counts = |name: &String| quota::counted_kind(name).as_ref() == Some(&kind);
    let relevant: Vec<&Value> = quotas
        .iter()
        .filter(|q| {
            q.pointer("/spec/hard")
                .and_then(Value::as_object)
                .is_some_and(|h| h.keys().any(counts))
        })
        .collect();
    if relevant.is_empty() {
        return;
    }
    let Ok(objects) = list(state, r, Some(ns)).await else {
        return;
    };
    let mut usage = Usage::new();
    for o in &objects {
        usage = quota::add(&usage, &quota::object_usage(r.group, r.plural, o));
    }
    for q in relevant {
        let used: Usage = q
            .pointer("/spec/hard")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|h| h.keys())
            .filter(|k| counts(k))
            .map(|k| (k.clone(), usage.get(k).copied().unwrap_or(Amount::ZERO)))
            .collect();
        charge(state, ns, name_of(q), &used).await;
    }
}

/// A create in `ns` holds this from its quota check until it is stored
/// when the namespace has quotas, so that creates racing each other are
/// each checked against the usage the others left (upstream charges the
/// quota's status with compare-and-swap for the same reason). `None`
/// without quotas: creates elsewhere stay concurrent.
pub async fn serialize(
    state: &Context<'_>,
    ns: &str,
) -> ApiResult<Option<tokio::sync::OwnedMutexGuard<()>>> {
    if list_of(state, "", "v1", "resourcequotas", Some(ns))
        .await?
        .is_empty()
    {
        return Ok(None);
    }
    Ok(Some(state.admission.quota_locks.lock(ns).await))
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Sets status.hard to spec.hard and `used` into status.used, compare
/// and swap; a concurrent writer wins (the controller recomputes).
async fn charge(state: &Context<'_>, ns: &str, quota_name: &str, used: &Usage) {
    let Some(r) = crate::resources::find_builtin("", "v1", "resourcequotas") else {
        return;
    };
    let key = object::key(r, Some(ns), quota_name);
    let Ok(kv) = state.store.get(&key).await else {
        return;
    };
    let Ok(mut q) = serde_json::from_slice::<Value>(&kv.value) else {
        return;
    };
    let hard = q
        .pointer("/spec/hard")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut now = quota::parse_list(q.pointer("/status/used"));
    for (k, v) in used {
        now.insert(k.clone(), *v);
    }
    let status = json!({"hard": hard, "used": quota::to_json(&now)});
    if q.get("status") == Some(&status) {
        return;
    }
    object::set(&mut q, "status", status);
    let Ok(bytes) = serde_json::to_vec(&q) else {
        return;
    };
    if let Err(e) = state
        .store
        .update(&key, bytes.into(), kv.mod_revision)
        .await
    {
        tracing::debug!(quota = quota_name, error = %e, "charging quota usage");
    }
}

#[async_trait]
impl Plugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
        let r = attrs.resource;
        let (Operation::Create, None, true, Some(ns)) = (
            attrs.operation,
            attrs.subresource,
            r.namespaced,
            attrs.namespace,
        ) else {
            return Ok(());
        };
        let quotas = list_of(attrs.state, "", "v1", "resourcequotas", Some(ns)).await?;
        if quotas.is_empty() {
            return Ok(());
        }
        let requested = quota::object_usage(r.group, r.plural, obj);
        let is_pod = r.group.is_empty() && r.plural == "pods";
        let mut existing: Option<Usage> = None;
        for q in &quotas {
            let hard = quota::parse_list(q.pointer("/spec/hard"));
            let hard_names: BTreeSet<String> = hard.keys().cloned().collect();
            if is_pod {
                if let Some(missing) = quota::pod_constraints(&hard_names, obj) {
                    return Err(forbidden(
                        r,
                        attrs.name,
                        &format!("failed quota: {}: {missing}", name_of(q)),
                    ));
                }
            }
            let relevant: BTreeSet<String> = requested
                .keys()
                .filter(|k| hard_names.contains(*k))
                .cloned()
                .collect();
            if relevant.is_empty() {
                continue;
            }
            // What the namespace's objects of this kind use now.
            if existing.is_none() {
                let mut total = Usage::new();
                for o in list(attrs.state, r, Some(ns)).await? {
                    total = quota::add(&total, &quota::object_usage(r.group, r.plural, &o));
                }
                existing = Some(total);
            }
            let mut used = quota::mask(existing.as_ref().unwrap_or(&Usage::new()), &relevant);
            for k in &relevant {
                used.entry(k.clone()).or_insert(Amount::ZERO);
            }
            let want = quota::mask(&requested, &relevant);
            let after = quota::add(&used, &want);
            let over = quota::exceeded(&after, &hard);
            if !over.is_empty() {
                return Err(forbidden(
                    r,
                    attrs.name,
                    &format!(
                        "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                        name_of(q),
                        quota::pretty(&quota::mask(&want, &over)),
                        quota::pretty(&quota::mask(&used, &over)),
                        quota::pretty(&quota::mask(&hard, &over)),
                    ),
                ));
            }
        }
        Ok(())
    }
}
