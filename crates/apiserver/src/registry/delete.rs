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
//!   `foregroundDeletion` finalizers (so does orphanDependents=true), as
//!   upstream; the garbage collector acts on them.
//! - A namespace is marked Terminating (no new content); the namespace
//!   controller deletes its content and finalizes it, then it goes.

use serde_json::{json, Value};

use crate::catalog::{Kind, Resource};
use crate::object::{self, with_revision};
use crate::registry::finalize::finalizers;
use crate::registry::write::{Outcome, Stored};
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

/// The longest grace period accepted (about 31 years).
pub const MAX_GRACE_SECONDS: i64 = 1 << 30;

/// The kinds upstream's options scheme (meta/internalversion) knows
/// besides DeleteOptions: a body naming one of them decodes, but is not
/// DeleteOptions.
const OTHER_OPTIONS: &[&str] = &[
    "ListOptions",
    "GetOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "TableOptions",
    "PartialObjectMetadata",
    "PartialObjectMetadataList",
    "Table",
    "Status",
    "WatchEvent",
];

/// Refuses a DELETE body that names another kind than DeleteOptions (a
/// Pod sent as the body, say), as upstream's decoder does, before
/// anything is deleted. A body without a kind is DeleteOptions.
fn check_options_kind(body: &Value) -> ApiResult<()> {
    // Go's decoder reads `Kind` or `APIVERSION` as well: every spelling
    // counts.
    let (mut kind, mut version) = (None, None);
    for (key, value) in object::type_fields(body) {
        let field = if key.eq_ignore_ascii_case("kind") {
            "kind"
        } else {
            "apiVersion"
        };
        let text = match value {
            Value::Null => continue,
            Value::String(v) if v.is_empty() => continue,
            Value::String(v) => v.as_str(),
            other => {
                return Err(ApiError::bad_request(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{field} of type string",
                    skiff_api::patch::go_type(other)
                )))
            }
        };
        if field == "apiVersion" {
            if text.matches('/').count() > 1 {
                return Err(ApiError::bad_request(format!(
                    "unexpected GroupVersion string: {text}"
                )));
            }
            version = Some(text);
        } else if text != "DeleteOptions" {
            kind = Some(text);
        }
    }
    let Some(kind) = kind else {
        return Ok(());
    };
    if OTHER_OPTIONS.contains(&kind) {
        return Err(ApiError::bad_request(
            "decoded object cannot be converted to DeleteOptions",
        ));
    }
    let version = version.unwrap_or("meta.k8s.io/v1");
    Err(ApiError::bad_request(format!(
        "no kind \"{kind}\" is registered for version \"{version}\" in scheme \"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28\""
    )))
}

/// The parts of metav1.DeleteOptions we act on.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    /// The deprecated orphanDependents flag.
    pub orphan_dependents: Option<bool>,
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
            check_options_kind(&v)?;
            let typed: k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions =
                crate::decode::typed::decode_as(&v).map_err(ApiError::bad_request)?;
            opts.grace_period_seconds = typed.grace_period_seconds;
            opts.propagation_policy = typed.propagation_policy;
            opts.orphan_dependents = typed.orphan_dependents;
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
        if let Some(o) = q.get("orphanDependents") {
            opts.orphan_dependents = Some(o == "true");
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

/// Deletes (or marks for deletion) one object; returns the response body.
pub async fn delete_one(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<Outcome> {
    let r = kind.resource;
    let key = object::key(r, ns, name);
    let is_namespace = r.group.is_empty() && r.plural == "namespaces";
    // The first attempt starts from the watch cache's copy, as upstream's
    // GuaranteedUpdate does with its cached existing object: every write
    // below is a compare-and-swap at that copy's revision, so a stale copy
    // costs a conflict, a failed precondition or a no-op, and each of
    // those tries again from the store. Retries on conflicts with
    // concurrent writers re-read the store.
    let mut from_cache = !is_namespace && !opts.dry_run;
    loop {
        let cached = if std::mem::take(&mut from_cache) {
            cached_current(state, r, &key)
        } else {
            None
        };
        let is_cached = cached.is_some();
        let (mut obj, revision, bytes) = match cached {
            Some((obj, revision)) => (obj, revision, None),
            None => {
                let kv = match state.store.get(&key).await {
                    Ok(kv) => kv,
                    Err(skiff_store::Error::NotFound { .. }) => {
                        return Err(ApiError::not_found(r.group, r.plural, name))
                    }
                    Err(e) => return Err(e.into()),
                };
                let obj: Value = serde_json::from_slice(&kv.value)
                    .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
                (obj, kv.mod_revision, Some(kv.value))
            }
        };
        if let Err(e) = check_preconditions(r, name, &obj, revision, opts) {
            if is_cached {
                continue;
            }
            return Err(e);
        }
        crate::admission::node_restriction::check_pod_delete(r.plural, r.group, &obj)?;
        // What to answer with: the bytes read, when they were.
        let read_at = |revision: i64| bytes.clone().map(|b| Stored::read(b, revision));

        if is_namespace {
            if ["default", "kube-system", "kube-public"].contains(&name) {
                return Err(ApiError::forbidden(format!(
                    "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                )));
            }
            if opts.dry_run {
                return Ok(answer(with_revision(obj, revision), None));
            }
            // A conflict (the namespace controller wrote meanwhile) reads
            // it again, as every other delete does.
            match delete_namespace(state, kind, name, obj, revision, opts).await? {
                Some(obj) => return Ok(answer(obj, None)),
                None => continue,
            }
        }

        let mut fins = finalizers(&obj);
        if !opts.dry_run {
            // A CRD's objects go first (crate::crd::cleanup).
            kind.strategy().prepare_for_delete(&mut obj, &mut fins);
        }
        // Every served kind defaults to Background: the kinds upstream
        // orphans by default are only in API versions not served here
        // (extensions/v1beta1, apps/v1beta1, apps/v1beta2).
        let gc = gc_finalizers(&fins, opts, false);
        if sorted(&gc) != sorted(&fins) {
            fins = gc;
        }
        let grace = if r.group.is_empty() && r.plural == "pods" {
            pod_grace(&obj, opts)
        } else {
            0
        };
        if opts.dry_run {
            return Ok(answer(with_revision(obj, revision), None));
        }
        if fins.is_empty() && grace == 0 {
            return match state.store.delete(&key, Some(revision)).await {
                Ok(d) => {
                    super::observe::deleted(state, kind, &obj).await;
                    // Answered with the bytes it had, at the delete's revision.
                    let stored = read_at(d.revision);
                    Ok(answer(with_revision(obj, d.revision), stored))
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
            if is_cached {
                // Nothing to write: answer what the store holds.
                continue;
            }
            let stored = read_at(revision);
            return Ok(answer(with_revision(obj, revision), stored));
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
        match state.store.update(&key, value.clone(), revision).await {
            Ok(kv) => {
                let stored = Stored {
                    bytes: value,
                    revision: kv.mod_revision,
                    slot,
                };
                return Ok(answer(with_revision(obj, kv.mod_revision), Some(stored)));
            }
            // Gone meanwhile (or a cached copy of one already gone): the
            // store's read words the 404.
            Err(skiff_store::Error::Conflict { .. } | skiff_store::Error::NotFound { .. }) => {
                continue
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn sorted(v: &[String]) -> Vec<&String> {
    let mut v: Vec<&String> = v.iter().collect();
    v.sort();
    v
}

/// The watch cache's copy of `key` in stored form (no resourceVersion)
/// and its revision; `None` when the cache has none that parses.
fn cached_current(state: &AppState, r: &Resource, key: &str) -> Option<(Value, i64)> {
    let cached = state.cache(r).get(key)?;
    let mut obj = cached.object()?;
    object::meta(&mut obj).remove("resourceVersion");
    Some((obj, cached.revision))
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

/// The first DELETE of a namespace marks it (deletionTimestamp, phase
/// Terminating, the garbage collector's finalizers as the options ask)
/// and answers it: the namespace controller deletes its content, then
/// removes `kubernetes` from spec.finalizers through `finalize`, and the
/// update that leaves both finalizer lists empty deletes it
/// (crate::registry::finalize). A later DELETE deletes it once both are
/// empty, as upstream's namespace REST does. `None` when the stored
/// namespace changed since it was read (the caller reads it again).
async fn delete_namespace(
    state: &AppState,
    kind: &Kind,
    name: &str,
    mut obj: Value,
    revision: i64,
    opts: &DeleteOptions,
) -> ApiResult<Option<Value>> {
    let r = kind.resource;
    let key = object::key(r, None, name);
    let fins = finalizers(&obj);
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        let spec_finalizers = obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if spec_finalizers || !fins.is_empty() {
            return Ok(Some(with_revision(obj, revision)));
        }
        return match state.store.delete(&key, Some(revision)).await {
            Ok(d) => {
                super::observe::deleted(state, kind, &obj).await;
                Ok(Some(with_revision(obj, d.revision)))
            }
            Err(skiff_store::Error::Conflict { .. }) => Ok(None),
            Err(skiff_store::Error::NotFound { .. }) => {
                Err(ApiError::not_found(r.group, r.plural, name))
            }
            Err(e) => Err(e.into()),
        };
    }
    // Terminating: admission now refuses new content.
    crate::object::set(&mut obj, "status", json!({"phase": "Terminating"}));
    let gc_finalizers = gc_finalizers(&fins, opts, false);
    let meta = object::meta(&mut obj);
    meta.insert("deletionTimestamp".into(), json!(object::now()));
    if !gc_finalizers.is_empty() {
        meta.insert("finalizers".into(), json!(gc_finalizers));
    }
    let (value, _) = crate::registry::write::encode(&obj)?;
    match state.store.update(&key, value, revision).await {
        Ok(kv) => Ok(Some(with_revision(obj, kv.mod_revision))),
        Err(skiff_store::Error::Conflict { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The finalizers an object keeps when deleted with `opts`, as upstream's
/// deletionFinalizersForGarbageCollection: `orphan` when orphanDependents
/// is true, the policy is Orphan, or (neither given) it already has it or
/// its kind defaults to orphaning; `foregroundDeletion` when the policy is
/// Foreground or (nothing given) it already has it.
fn gc_finalizers(current: &[String], opts: &DeleteOptions, orphan_by_default: bool) -> Vec<String> {
    let has = |f: &str| current.iter().any(|c| c == f);
    let policy = opts.propagation_policy.as_deref();
    let orphan = match (opts.orphan_dependents, policy) {
        (Some(orphan), _) => orphan,
        (None, Some(p)) => p == "Orphan",
        (None, None) if has("orphan") => true,
        (None, None) if has("foregroundDeletion") => false,
        (None, None) => orphan_by_default,
    };
    let foreground = match (opts.orphan_dependents, policy) {
        (Some(_), _) => false,
        (None, Some(p)) => p == "Foreground",
        (None, None) => has("foregroundDeletion"),
    };
    let mut out: Vec<String> = current
        .iter()
        .filter(|f| *f != "orphan" && *f != "foregroundDeletion")
        .cloned()
        .collect();
    if orphan {
        out.push("orphan".into());
    }
    if foreground {
        out.push("foregroundDeletion".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use skiff_store::sqlite::{Config, SqliteStore};
    use skiff_store::Store;

    use super::*;

    fn pod(labels: Value) -> bytes::Bytes {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u1", "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running"},
        });
        serde_json::to_vec(&pod).expect("json").into()
    }

    /// A server state over a fresh SQLite store whose watch cache is fed
    /// only by hand, so a test can hold it behind the store.
    fn state(dir: &tempfile::TempDir) -> (AppState, Arc<SqliteStore>) {
        let store =
            Arc::new(SqliteStore::open(dir.path().join("db"), Config::default()).expect("store"));
        let state = AppState::new(
            store.clone(),
            "https://127.0.0.1:6443".into(),
            std::time::Duration::from_secs(60),
        );
        (state, store)
    }

    #[test]
    fn gc_finalizers_follow_upstreams_rules() {
        let opts = |policy: Option<&str>, orphan: Option<bool>| DeleteOptions {
            propagation_policy: policy.map(String::from),
            orphan_dependents: orphan,
            ..DeleteOptions::default()
        };
        let fins = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // kubectl's default (Background) and no options: nothing added.
        assert!(gc_finalizers(&[], &opts(Some("Background"), None), false).is_empty());
        assert!(gc_finalizers(&[], &opts(None, None), false).is_empty());
        assert_eq!(
            gc_finalizers(&[], &opts(Some("Orphan"), None), false),
            fins(&["orphan"])
        );
        assert_eq!(
            gc_finalizers(&[], &opts(Some("Foreground"), None), false),
            fins(&["foregroundDeletion"])
        );
        // The old flag.
        assert_eq!(
            gc_finalizers(&[], &opts(None, Some(true)), false),
            fins(&["orphan"])
        );
        assert!(gc_finalizers(&fins(&["orphan"]), &opts(None, Some(false)), false).is_empty());
        // An explicit policy replaces the finalizers of an earlier one;
        // without one, they stay.
        assert_eq!(
            gc_finalizers(
                &fins(&["x", "orphan"]),
                &opts(Some("Background"), None),
                false
            ),
            fins(&["x"])
        );
        assert_eq!(
            gc_finalizers(&fins(&["orphan"]), &opts(Some("Foreground"), None), false),
            fins(&["foregroundDeletion"])
        );
        assert_eq!(
            gc_finalizers(&fins(&["foregroundDeletion"]), &opts(None, None), true),
            fins(&["foregroundDeletion"])
        );
        // A kind orphaning by default (none served here) without options.
        assert_eq!(
            gc_finalizers(&[], &opts(None, None), true),
            fins(&["orphan"])
        );
    }

    #[tokio::test]
    async fn a_stale_cached_copy_is_tried_again_from_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (state, store) = state(&dir);
        let r = crate::resources::find_builtin("", "v1", "pods").expect("pods");
        let key = object::key(r, Some("default"), "p");
        let first = store
            .create(&key, pod(json!({"v": "1"})))
            .await
            .expect("create");
        state
            .cache(r)
            .apply_for_test(&key, &pod(json!({"v": "1"})), first.mod_revision);
        // The store moves on; the cache does not see it.
        let second = store
            .update(&key, pod(json!({"v": "2"})), first.mod_revision)
            .await
            .expect("update");

        // A precondition on the store's version holds, though the cached
        // copy is older.
        let opts = DeleteOptions {
            precondition_resource_version: Some(second.mod_revision.to_string()),
            ..DeleteOptions::default()
        };
        let out = delete_one(
            &state,
            &state.catalog.resolve(r),
            Some("default"),
            "p",
            &opts,
        )
        .await
        .expect("a precondition on the current version holds");
        // The mark is written on the store's version, not the cached one.
        assert_eq!(out.object.pointer("/metadata/labels/v"), Some(&json!("2")));
        assert!(out.object.pointer("/metadata/deletionTimestamp").is_some());
        let stored: Value =
            serde_json::from_slice(&store.get(&key).await.expect("get").value).expect("json");
        assert_eq!(stored.pointer("/metadata/labels/v"), Some(&json!("2")));
        assert_eq!(
            stored.pointer("/metadata/deletionGracePeriodSeconds"),
            Some(&json!(30))
        );

        // A precondition that fails against the store too is a conflict.
        let opts = DeleteOptions {
            precondition_uid: Some("another".into()),
            ..DeleteOptions::default()
        };
        let err = delete_one(
            &state,
            &state.catalog.resolve(r),
            Some("default"),
            "p",
            &opts,
        )
        .await
        .expect_err("wrong uid");
        assert_eq!(err.code, axum::http::StatusCode::CONFLICT);
    }

    #[tokio::test]
    async fn a_cached_copy_of_an_object_gone_from_the_store_is_not_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (state, store) = state(&dir);
        let r = crate::resources::find_builtin("", "v1", "pods").expect("pods");
        let key = object::key(r, Some("default"), "p");
        let created = store.create(&key, pod(json!({}))).await.expect("create");
        state
            .cache(r)
            .apply_for_test(&key, &pod(json!({})), created.mod_revision);
        store
            .delete(&key, Some(created.mod_revision))
            .await
            .expect("delete");
        for grace in [None, Some(0)] {
            let opts = DeleteOptions {
                grace_period_seconds: grace,
                ..DeleteOptions::default()
            };
            let err = delete_one(
                &state,
                &state.catalog.resolve(r),
                Some("default"),
                "p",
                &opts,
            )
            .await
            .expect_err("gone");
            assert_eq!(
                err.code,
                axum::http::StatusCode::NOT_FOUND,
                "grace {grace:?}"
            );
        }
    }
}
