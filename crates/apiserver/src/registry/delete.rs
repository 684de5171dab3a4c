//! Deletion: DeleteOptions (grace period, preconditions, propagation
//! policy), graceful pod deletion, finalizers, and namespaces taking their
//! contents with them.
//!
//! - A bound pod with a grace period > 0 is only marked: deletionTimestamp
//!   = now + grace and deletionGracePeriodSeconds; its node deletes it with
//!   grace 0 once the containers are gone. An unbound or finished pod, or
//!   grace 0 (`--force --grace-period=0`), goes at once.
//! - An object with finalizers is marked and stays until an update empties
//!   them. `Orphan` and `Foreground` propagation add the `orphan` and
//!   `foregroundDeletion` finalizers, as upstream; the garbage collector
//!   that acts on them comes with the controllers.
//! - A namespace is marked Terminating (no new content), its objects are
//!   deleted, then the namespace itself.

use serde_json::{json, Value};
use skiff_store::ListOptions;

use crate::object::{self, with_revision};
use crate::registry::write::{Outcome, Stored};
use crate::resources::Resource;
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

/// The longest grace period accepted (about 31 years).
pub const MAX_GRACE_SECONDS: i64 = 1 << 30;

/// The parts of metav1.DeleteOptions we act on.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    /// `dryRun=All`: check everything, change nothing.
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = self.dry_run || dry_run;
        self
    }

    /// From the request body (may be empty) and query parameters.
    pub fn parse(
        body: &[u8],
        q: &std::collections::HashMap<String, String>,
    ) -> ApiResult<DeleteOptions> {
        let mut opts = DeleteOptions::default();
        if !body.iter().all(u8::is_ascii_whitespace) {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("json: cannot decode DeleteOptions: {e}"))
            })?;
            let typed: k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions =
                crate::decode::typed::decode_as(&v).map_err(ApiError::bad_request)?;
            opts.grace_period_seconds = typed.grace_period_seconds;
            opts.propagation_policy = typed.propagation_policy;
            if let Some(p) = typed.preconditions {
                opts.precondition_uid = p.uid;
                opts.precondition_resource_version = p.resource_version;
            }
            for value in typed.dry_run.unwrap_or_default() {
                if value != "All" {
                    return Err(options_invalid(
                        "FieldValueNotSupported",
                        "dryRun",
                        format!("Unsupported value: \"{value}\": supported values: \"All\""),
                    ));
                }
                opts.dry_run = true;
            }
            if typed.orphan_dependents.is_some() && opts.propagation_policy.is_some() {
                return Err(options_invalid(
                    "FieldValueInvalid",
                    "propagationPolicy",
                    format!(
                        "Invalid value: \"{}\": orphanDependents and deletionPropagation cannot be both set",
                        opts.propagation_policy.as_deref().unwrap_or_default()
                    ),
                ));
            }
        }
        if let Some(g) = q.get("gracePeriodSeconds") {
            opts.grace_period_seconds =
                Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}"))
                })?);
        }
        if let Some(p) = q.get("propagationPolicy") {
            opts.propagation_policy = Some(p.clone());
        }
        if let Some(p) = &opts.propagation_policy {
            if !["Foreground", "Background", "Orphan"].contains(&p.as_str()) {
                return Err(options_invalid(
                    "FieldValueNotSupported",
                    "propagationPolicy",
                    format!(
                        "Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                    ),
                ));
            }
        }
        if opts.grace_period_seconds.is_some_and(|g| g < 0) {
            opts.grace_period_seconds = Some(0);
        }
        // Far beyond any real grace period (and chrono's range): refuse.
        if opts
            .grace_period_seconds
            .is_some_and(|g| g > MAX_GRACE_SECONDS)
        {
            return Err(ApiError::bad_request(format!(
                "gracePeriodSeconds must be at most {MAX_GRACE_SECONDS}"
            )));
        }
        Ok(opts)
    }
}

/// 422 for DeleteOptions, as upstream's ValidateDeleteOptions answers.
fn options_invalid(reason: &'static str, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        "DeleteOptions",
        "",
        vec![Cause {
            reason,
            field: field.into(),
            message,
        }],
    )
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes (or marks for deletion) one object; returns the response body.
pub async fn delete_one(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Outcome> {
    let key = object::key(r, ns, name);
    // Retry on conflicts with concurrent writers; every attempt re-reads.
    loop {
        let kv = match state.store.get(&key).await {
            Ok(kv) => kv,
            Err(skiff_store::Error::NotFound { .. }) => {
                return Err(ApiError::not_found(r.group, r.plural, name))
            }
            Err(e) => return Err(e.into()),
        };
        let mut obj: Value = serde_json::from_slice(&kv.value)
            .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
        check_preconditions(r, name, &obj, kv.mod_revision, opts)?;

        if r.group.is_empty() && r.plural == "namespaces" {
            if ["default", "kube-system", "kube-public"].contains(&name) {
                return Err(ApiError::forbidden(format!(
                    "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                )));
            }
            if opts.dry_run {
                return Ok(answer(with_revision(obj, kv.mod_revision), None));
            }
            return delete_namespace(state, r, name, obj, kv.mod_revision)
                .await
                .map(|obj| answer(obj, None));
        }

        let mut fins = finalizers(&obj);
        if crate::crd::is_crd(r) && !opts.dry_run {
            // Its objects go first (crate::crd::cleanup).
            crate::crd::cleanup::mark(&mut obj, &mut fins);
        }
        match opts.propagation_policy.as_deref() {
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            _ => {}
        }
        let grace = if r.group.is_empty() && r.plural == "pods" {
            pod_grace(&obj, opts)
        } else {
            0
        };
        if opts.dry_run {
            return Ok(answer(with_revision(obj, kv.mod_revision), None));
        }
        if fins.is_empty() && grace == 0 {
            return match state.store.delete(&key, Some(kv.mod_revision)).await {
                Ok(d) => {
                    crate::allocators::services::on_deleted(state, r, &obj).await;
                    // Answered with the bytes it had, at the delete's revision.
                    let stored = Stored::read(kv.value.clone(), d.revision);
                    Ok(answer(with_revision(obj, d.revision), Some(stored)))
                }
                Err(skiff_store::Error::Conflict { .. }) => continue,
                Err(skiff_store::Error::NotFound { .. }) => {
                    Err(ApiError::not_found(r.group, r.plural, name))
                }
                Err(e) => Err(e.into()),
            };
        }
        // Mark: deletionTimestamp (kept if an earlier, sooner one exists).
        let existing = obj
            .pointer("/metadata/deletionGracePeriodSeconds")
            .and_then(Value::as_i64);
        if existing.is_some_and(|g| g <= grace) && finalizers(&obj) == fins {
            let stored = Stored::read(kv.value.clone(), kv.mod_revision);
            return Ok(answer(with_revision(obj, kv.mod_revision), Some(stored)));
        }
        let when = chrono::TimeDelta::try_seconds(grace)
            .and_then(|d| chrono::Utc::now().checked_add_signed(d))
            .ok_or_else(|| ApiError::bad_request(format!("invalid grace period: {grace}")))?;
        let meta = object::meta(&mut obj);
        meta.insert(
            "deletionTimestamp".into(),
            json!(when.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        );
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
        if !fins.is_empty() {
            meta.insert("finalizers".into(), json!(fins));
        }
        let (value, slot) = crate::registry::write::encode(&obj)?;
        match state
            .store
            .update(&key, value.clone(), kv.mod_revision)
            .await
        {
            Ok(kv) => {
                let stored = Stored {
                    bytes: value,
                    revision: kv.mod_revision,
                    slot,
                };
                return Ok(answer(with_revision(obj, kv.mod_revision), Some(stored)));
            }
            Err(skiff_store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// A deletion's answer: the object as deleted or marked (stored form,
/// resourceVersion included) and, when it was written or read as bytes,
/// those bytes to answer from.
fn answer(object: Value, stored: Option<Stored>) -> Outcome {
    Outcome {
        object,
        stored,
        status: axum::http::StatusCode::OK,
        warnings: Vec::new(),
    }
}

/// The grace period a pod deletion gets: none when unbound or finished.
fn pod_grace(pod: &Value, opts: &DeleteOptions) -> i64 {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    if !bound || matches!(phase, Some("Succeeded" | "Failed")) {
        return 0;
    }
    opts.grace_period_seconds
        .unwrap_or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30)
        })
        .clamp(0, MAX_GRACE_SECONDS)
}

fn check_preconditions(
    r: &Resource,
    name: &str,
    obj: &Value,
    revision: i64,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    let conflict = |message: String| {
        let mut e = ApiError::conflict(r.group, r.plural, name);
        e.message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {message}",
            r.qualified()
        );
        e
    };
    if let Some(uid) = &opts.precondition_uid {
        let actual = obj
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("");
        if uid != actual {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
            )));
        }
    }
    if let Some(rv) = &opts.precondition_resource_version {
        if *rv != revision.to_string() {
            return Err(conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {revision}"
            )));
        }
    }
    Ok(())
}

async fn delete_namespace(
    state: &AppState,
    r: &Resource,
    name: &str,
    mut obj: Value,
    revision: i64,
) -> ApiResult<Value> {
    let key = object::key(r, None, name);
    // Terminating first: admission now refuses new content.
    crate::object::set(&mut obj, "status", json!({"phase": "Terminating"}));
    object::meta(&mut obj).insert("deletionTimestamp".into(), json!(object::now()));
    let value = serde_json::to_vec(&obj).map_err(|e| ApiError::internal(e.to_string()))?;
    let marked = match state.store.update(&key, value.into(), revision).await {
        Ok(kv) => kv,
        Err(skiff_store::Error::Conflict { .. }) => {
            return Err(ApiError::conflict(r.group, r.plural, name))
        }
        Err(e) => return Err(e.into()),
    };
    let mut seen = std::collections::HashSet::new();
    for resource in crate::resources::all().into_iter().filter(|r| r.namespaced) {
        if !seen.insert(resource.storage) {
            continue;
        }
        let prefix = object::prefix(resource, Some(name));
        let page = state.store.list(&prefix, ListOptions::default()).await?;
        for kv in page.items {
            match state.store.delete(&kv.key, None).await {
                Ok(d) => {
                    if let Ok(obj) = serde_json::from_slice::<Value>(&d.prev.value) {
                        crate::allocators::services::on_deleted(state, resource, &obj).await;
                    }
                }
                Err(skiff_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    match state.store.delete(&key, None).await {
        Ok(d) => Ok(with_revision(obj, d.revision)),
        Err(skiff_store::Error::NotFound { .. }) => Ok(with_revision(obj, marked.mod_revision)),
        Err(e) => Err(e.into()),
    }
}

/// After an update: an object marked for deletion whose finalizers are
/// gone (and, for a pod, whose grace period is 0) is removed.
pub async fn finish_if_done(
    state: &AppState,
    r: &Resource,
    key: &str,
    obj: &Value,
    revision: i64,
) -> ApiResult<bool> {
    if obj.pointer("/metadata/deletionTimestamp").is_none() || !finalizers(obj).is_empty() {
        return Ok(false);
    }
    let grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if r.plural == "pods" && r.group.is_empty() && grace > 0 {
        return Ok(false);
    }
    match state.store.delete(key, Some(revision)).await {
        Ok(_) => {
            crate::allocators::services::on_deleted(state, r, obj).await;
            Ok(true)
        }
        Err(skiff_store::Error::NotFound { .. } | skiff_store::Error::Conflict { .. }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
