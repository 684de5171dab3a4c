//! The write path every mutating verb shares: create, update (PUT),
//! PATCH of every type and the scale and status subresources. It runs
//! field validation, defaulting, validation, admission and managedFields
//! bookkeeping, honours `dryRun=All` (everything runs, nothing is stored),
//! and retries an update on a revision conflict unless the caller pinned a
//! resourceVersion (upstream's GuaranteedUpdate).

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::admission;
use crate::catalog::{Catalog, Kind, NothingPending, Pending, Resource};
use crate::decode::strict::{self, FieldValidation};
use crate::object::{self, with_revision};
use crate::status::{ApiError, ApiResult, Cause};
use crate::AppState;

/// Attempts of an update before a conflict is returned to the client.
const UPDATE_ATTEMPTS: usize = 16;

/// Query parameters of a write.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub validation: FieldValidation,
    pub force: bool,
}

impl WriteOptions {
    pub fn parse(q: &HashMap<String, String>) -> ApiResult<WriteOptions> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value: {other}: supported values: \"All\""
                )))
            }
        };
        let validation =
            FieldValidation::parse(q.get("fieldValidation")).map_err(ApiError::bad_request)?;
        let field_manager = q.get("fieldManager").filter(|m| !m.is_empty()).cloned();
        if field_manager.as_ref().is_some_and(|m| m.len() > 128) {
            return Err(ApiError::bad_request(
                "fieldManager: Too long: must have at most 128 bytes",
            ));
        }
        let force = q.get("force").is_some_and(|f| f == "true" || f == "1");
        Ok(WriteOptions {
            dry_run,
            field_manager,
            validation,
            force,
        })
    }
}

/// What a write produced.
#[derive(Debug)]
pub struct Outcome {
    /// The object in stored form, resourceVersion included.
    pub object: Value,
    /// What was stored for it; None for a dry run.
    pub stored: Option<Stored>,
    pub status: StatusCode,
    /// `Warning: 299` header values.
    pub warnings: Vec<String>,
}

/// The bytes a write stored (no resourceVersion), its revision and where
/// the resourceVersion goes: the answer is made from them instead of
/// serializing the object again.
#[derive(Debug)]
pub struct Stored {
    pub bytes: bytes::Bytes,
    pub revision: i64,
    pub slot: Option<object::RevisionSlot>,
}

impl Stored {
    /// Bytes read from the store, answered at `revision` (the slot is found
    /// by parsing them).
    pub fn read(bytes: bytes::Bytes, revision: i64) -> Self {
        Stored {
            bytes,
            revision,
            slot: None,
        }
    }
}

/// Serializes `obj` for the store.
pub(crate) fn encode(obj: &Value) -> ApiResult<(bytes::Bytes, Option<object::RevisionSlot>)> {
    let (bytes, slot) =
        object::encode_stored(obj).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok((bytes.into(), slot))
}

/// Field validation of a request body: a 400 under Strict, warnings under
/// Warn, nothing under Ignore.
pub fn check_fields(
    catalog: &Catalog,
    r: &Resource,
    raw: &[u8],
    obj: &Value,
    opts: &WriteOptions,
) -> ApiResult<Vec<String>> {
    if opts.validation == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or(r.kind);
    let findings = catalog.field_findings(r.group, kind, raw, obj);
    verdict(r, kind, findings, opts)
}

/// A create body after field validation.
#[derive(Debug)]
pub struct Checked {
    /// `Warning: 299` values (Warn).
    pub warnings: Vec<String>,
    pub body: Body,
}

/// A create body's tree.
#[derive(Debug)]
pub enum Body {
    /// As sent: the create path normalizes it through its type.
    Sent(Value),
    /// As its type encodes it: one typed decode of the bytes served both
    /// field validation and normalizing (see `resources::decode_one_pass`).
    Typed(Value),
}

/// Decodes and field-validates a create body, straight into its type
/// where it can: the bytes are then read once, not once for a tree, once
/// for unknown fields and once for the typed form. The typed decoder
/// refuses a body naming another kind or apiVersion (k8s-openapi checks
/// both), and malformed JSON; those take the general path, which words
/// the error as before.
pub fn check_create_body(
    catalog: &Catalog,
    r: &Resource,
    raw: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Checked> {
    check_numbers(r, raw)?;
    let unknown = opts.validation != FieldValidation::Ignore;
    // A `Kind` or `APIVERSION` key is skipped by the typed decoder but read
    // by Go's: such a body takes the general path, which checks them.
    let one_pass = !has_type_key_variants(raw);
    if let Some(one) = one_pass
        .then(|| catalog.decode_one_pass(r.group, r.kind, raw, unknown))
        .flatten()
    {
        return Ok(Checked {
            warnings: verdict(r, r.kind, one.findings, opts)?,
            body: Body::Typed(one.object),
        });
    }
    let obj = object::decode(raw)?;
    catalog.check_duplicated_types(r.group, r.kind, (r.kind, r.version), raw)?;
    Ok(Checked {
        warnings: check_fields(catalog, r, raw, &obj, opts)?,
        body: Body::Sent(obj),
    })
}

/// Whether the JSON text `raw` has a key spelling `kind` or `apiVersion`
/// in another case (`"Kind"`, `"APIVERSION"`).
fn has_type_key_variants(raw: &[u8]) -> bool {
    let variant = |at: usize, name: &[u8]| {
        raw.get(at + 1..at + 1 + name.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(name) && w != name)
            && raw.get(at + 1 + name.len()) == Some(&b'"')
    };
    raw.iter()
        .enumerate()
        .any(|(i, b)| *b == b'"' && (variant(i, b"kind") || variant(i, b"apiVersion")))
}

/// Refuses an object body holding a number no float64 holds, wherever it
/// stands (see `decode::numbers`): the typed decoders skip unknown fields
/// without reading them.
pub fn check_numbers(r: &Resource, raw: &[u8]) -> ApiResult<()> {
    match crate::decode::numbers::out_of_range(raw) {
        Some(detail) => Err(crate::decode::typed::cannot_handle(
            (r.kind, r.version),
            &detail,
        )),
        None => Ok(()),
    }
}

/// What field validation's findings come to under `opts`: a 400 under
/// Strict, the warnings under Warn.
fn verdict(
    r: &Resource,
    kind: &str,
    findings: Vec<String>,
    opts: &WriteOptions,
) -> ApiResult<Vec<String>> {
    if findings.is_empty() || opts.validation == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    if opts.validation == FieldValidation::Strict {
        return Err(ApiError::bad_request(strict::strict_message(
            kind, r.version, &findings,
        )));
    }
    Ok(findings)
}

/// 422 Invalid from validation findings, if any.
pub fn check_valid(
    r: &Resource,
    name: &str,
    errors: Vec<skiff_api::validation::FieldError>,
) -> ApiResult<()> {
    if errors.is_empty() {
        return Ok(());
    }
    let causes = errors
        .into_iter()
        .map(|e| Cause {
            reason: e.reason,
            field: e.field,
            message: e.message,
        })
        .collect();
    Err(ApiError::invalid(r.group, r.kind, name, causes))
}

/// Creates `body` (served form, not yet checked).
pub async fn create(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    body: Body,
    opts: &WriteOptions,
    warnings: Vec<String>,
) -> ApiResult<Outcome> {
    let r = kind.resource;
    let strategy = kind.strategy();
    let served = kind.served();
    let (mut tree, typed) = match body {
        Body::Typed(tree) => (tree, true),
        Body::Sent(tree) => (tree, false),
    };
    let name = object::prepare_create(kind, ns, &mut tree)?;
    let obj = if typed {
        crate::catalog::prepared_typed(r.kind, served, tree)?
    } else {
        state.catalog.normalize(r.group, r.kind, served, tree)?
    };
    check_valid(r, &name, strategy.validate_served(&obj))?;
    let mut obj = crate::registry::convert::to_stored(kind, obj);
    strategy.defaults(&mut obj);
    strategy.prepare_for_create(&mut obj);
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(String::from);
    let admission = state.admission_context();
    let attrs = admission::Attributes {
        state: &admission,
        resource: r,
        namespace: ns.as_deref(),
        name: &name,
        operation: admission::Operation::Create,
        subresource: None,
        old: None,
    };
    admission::mutate(&attrs, &mut obj).await?;
    let mut errors = skiff_api::validation::object_meta(&obj);
    errors.extend(strategy.validate(&obj));
    check_valid(r, &name, errors)?;
    // Held until the object is stored and the quotas recounted.
    let _quota = match ns.as_deref() {
        Some(ns) if r.namespaced && !opts.dry_run => {
            admission::resource_quota::serialize(&admission, ns).await?
        }
        _ => None,
    };
    admission::validate(&attrs, &obj).await?;
    if let Some(manager) = &opts.field_manager {
        obj = crate::registry::managed::record_update(r, None, obj, manager);
    } else {
        obj = skiff_api::apply::keep_decodable_managed_fields(None, obj);
    }
    // The kind's storage hooks (a Service's ClusterIPs and NodePorts,
    // given back if the create fails).
    let pending: Box<dyn Pending> = match kind.hooks() {
        Some(hooks) => hooks.begin_create(&mut obj, opts.dry_run).await?,
        None => Box::new(NothingPending),
    };
    if opts.dry_run {
        return Ok(Outcome {
            object: obj,
            stored: None,
            status: StatusCode::CREATED,
            warnings,
        });
    }
    let key = object::key(r, ns.as_deref(), &name);
    let (value, slot) = encode(&obj)?;
    let created = state.store.create(&key, value.clone()).await;
    if created.is_ok() {
        super::observe::created_or_deleted(state, r, &obj).await;
    }
    pending.finish(created.is_ok()).await;
    match created {
        Ok(kv) => Ok(Outcome {
            object: with_revision(obj, kv.mod_revision),
            stored: Some(Stored {
                bytes: value,
                revision: kv.mod_revision,
                slot,
            }),
            status: StatusCode::CREATED,
            warnings,
        }),
        Err(skiff_store::Error::AlreadyExists { .. }) => {
            Err(ApiError::already_exists(r.group, r.plural, &name))
        }
        Err(e) => Err(e.into()),
    }
}

/// Reads the current object (stored form, with resourceVersion) or 404.
pub async fn current(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
) -> ApiResult<(Value, i64)> {
    match state.store.get(&object::key(r, ns, name)).await {
        Ok(kv) => {
            let obj: Value = serde_json::from_slice(&kv.value)
                .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
            Ok((with_revision(obj, kv.mod_revision), kv.mod_revision))
        }
        Err(skiff_store::Error::NotFound { .. }) => {
            Err(ApiError::not_found(r.group, r.plural, name))
        }
        Err(e) => Err(e.into()),
    }
}

/// The object an update starts from on attempt `attempt`: the first try
/// takes the watch cache's copy when it has one (upstream's
/// GuaranteedUpdate does the same with its cached existing object),
/// saving a store read on the hot path; a stale copy only costs a
/// conflicting compare-and-swap, after which every retry reads the store.
/// Returns the object with resourceVersion, its revision, and whether it
/// came from the cache.
pub async fn current_for_update(
    state: &AppState,
    r: &Resource,
    ns: Option<&str>,
    name: &str,
    attempt: usize,
) -> ApiResult<(Value, i64, bool)> {
    if attempt == 0 {
        let cached = state.cache(r).get(&object::key(r, ns, name));
        if let Some((object, revision)) = cached.and_then(|c| Some((c.object()?, c.revision))) {
            return Ok((object, revision, true));
        }
    }
    let (obj, revision) = current(state, r, ns, name).await?;
    Ok((obj, revision, false))
}

/// Kinds whose status update may skip normalizing the fields it does not
/// read: every top-level field of their types but metadata is optional,
/// so the candidate without them goes through the type exactly when the
/// whole one does.
/// A status update's candidate in normal form, as far as the update reads
/// it: its metadata (preconditions, name and namespace) and status. The
/// other top-level fields the mutation left as they are in `base` (the
/// stored object, already in normal form; the kubelet's
/// `{"metadata":{"uid":…},"status":{…}}` patch leaves the whole spec so)
/// are dropped instead of going through the type again. When one of
/// them changed, the whole candidate is normalized, so a bad field is
/// refused as before.
fn normalize_for_status(
    catalog: &Catalog,
    kind: &Kind,
    base: &Value,
    mut candidate: Value,
) -> ApiResult<Value> {
    let r = kind.resource;
    let served = (r.kind, r.version);
    let read = |k: &str| matches!(k, "apiVersion" | "kind" | "metadata" | "status");
    let untouched = kind.strategy().status_reads_less()
        && !crate::registry::convert::needed(kind)
        && match (candidate.as_object(), base.as_object()) {
            (Some(c), Some(b)) => c.iter().all(|(k, v)| read(k) || b.get(k) == Some(v)),
            _ => false,
        };
    if untouched {
        if let Some(fields) = candidate.as_object_mut() {
            fields.retain(|k, _| read(k));
        }
    }
    catalog.normalize(r.group, r.kind, served, candidate)
}

/// Whether `new` (stored form, without resourceVersion) is `old` (as
/// read, with its resourceVersion) unchanged.
fn unchanged(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return false;
    };
    old.len() == new.len()
        && old
            .iter()
            .all(|(key, value)| match (key.as_str(), new.get(key)) {
                ("metadata", Some(meta)) => same_metadata(value, meta),
                (_, Some(other)) => value == other,
                (_, None) => false,
            })
}

/// `old` and `new` metadata alike but for `old`'s resourceVersion.
fn same_metadata(old: &Value, new: &Value) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old == new;
    };
    let fields = |m: &'_ serde_json::Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| k.as_str() != "resourceVersion")
            .count()
    };
    fields(old) == fields(new)
        && old
            .iter()
            .filter(|(k, _)| k.as_str() != "resourceVersion")
            .all(|(k, v)| new.get(k) == Some(v))
}

/// Updates one object: `mutate` gets the current object (served form,
/// resourceVersion included) and returns the desired one. `subresource`
/// "status" keeps everything but status, "ephemeralcontainers"
/// everything but spec.ephemeralContainers; otherwise status is kept.
pub async fn update(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    opts: &WriteOptions,
    mut mutate: impl FnMut(&Value) -> ApiResult<Value>,
) -> ApiResult<Outcome> {
    let r = kind.resource;
    let strategy = kind.strategy();
    let key = object::key(r, ns, name);
    let mut warnings = Vec::new();
    for attempt in 0..UPDATE_ATTEMPTS {
        let (old, revision, cached) = current_for_update(state, r, ns, name, attempt).await?;
        // It sees the stored resourceVersion (a JSON patch may `test` it);
        // a version the mutation leaves as it was pins nothing.
        // Only a kind served in another form than stored needs a copy.
        let converted;
        let base = if crate::registry::convert::needed(kind) {
            converted = crate::registry::convert::to_served(kind, old.clone());
            &converted
        } else {
            &old
        };
        let mut candidate = mutate(base)?;
        object::check_type(r, &mut candidate)?;
        if candidate.pointer("/metadata/resourceVersion")
            == base.pointer("/metadata/resourceVersion")
        {
            object::meta(&mut candidate).remove("resourceVersion");
        }
        let candidate = if subresource == Some("status") {
            normalize_for_status(&state.catalog, kind, base, candidate)?
        } else {
            state
                .catalog
                .normalize(r.group, r.kind, (r.kind, r.version), candidate)?
        };
        let mut candidate = crate::registry::convert::to_stored(kind, candidate);
        if !r.namespaced {
            // A cluster-scoped object has no namespace: one set by an
            // update or patch is dropped, as upstream's BeforeUpdate does.
            if let Some(meta) = candidate.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("namespace");
            }
        }
        let given = object::name_of(&candidate).unwrap_or_default();
        if given != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        if let (Some(url_ns), Some(body_ns)) = (
            ns,
            candidate
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty()),
        ) {
            if url_ns != body_ns {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the object ({body_ns}) does not match the namespace on the URL ({url_ns})"
                )));
            }
        }
        // A resourceVersion in the new object is a precondition.
        let pinned =
            match candidate
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                Some(rv) if !rv.is_empty() => Some(rv.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv}"))
                })?),
                _ => None,
            };
        if pinned.is_some_and(|p| p != revision) {
            if cached {
                // The cache may lag the client: check against the store.
                continue;
            }
            return Err(ApiError::conflict(r.group, r.plural, name));
        }
        // A UID in the body is a precondition (the kubelet's status patches
        // carry the pod's): a recreated object of the same name is not it.
        let new_uid = candidate.pointer("/metadata/uid").and_then(Value::as_str);
        let old_uid = old.pointer("/metadata/uid").and_then(Value::as_str);
        if let (Some(want), Some(have)) = (new_uid, old_uid) {
            if !want.is_empty() && want != have {
                return Err(ApiError::conflict_message(format!(
                    "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {want}, UID in object meta: {have}",
                    crate::status::qualified(r.group, r.plural)
                )));
            }
        }
        let mut new = match subresource {
            Some("status") => {
                let mut merged = old.clone();
                let status = candidate
                    .as_object_mut()
                    .and_then(|o| o.remove("status"))
                    .unwrap_or(Value::Null);
                crate::object::set(&mut merged, "status", status);
                strategy.prepare_for_status_update(&old, &mut merged);
                merged
            }
            Some("finalize") => {
                // Namespaces: everything but status, spec.finalizers
                // included (upstream's namespaceFinalizeStrategy).
                let mut obj = candidate;
                match old.get("status") {
                    Some(status) => crate::object::set(&mut obj, "status", status.clone()),
                    None => {
                        if let Some(o) = obj.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                obj
            }
            Some("approval") => {
                // Only the conditions change (CertificateSigningRequests).
                let mut obj = candidate;
                strategy.prepare_for_approval_update(&old, &mut obj);
                obj
            }
            Some("ephemeralcontainers") => {
                // Only spec.ephemeralContainers changes (Pods), defaulted
                // as on any write.
                let mut merged = old.clone();
                strategy.prepare_for_ephemeral_containers_update(&candidate, &mut merged);
                strategy.defaults(&mut merged);
                merged
            }
            _ if !strategy.keeps_status() => {
                // Status is no subresource: the body's status is written.
                let mut obj = candidate;
                strategy.defaults(&mut obj);
                obj
            }
            _ => {
                let mut obj = candidate;
                match old.get("status") {
                    Some(status) => crate::object::set(&mut obj, "status", status.clone()),
                    None => {
                        if let Some(o) = obj.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                strategy.defaults(&mut obj);
                strategy.prepare_for_update(&old, &mut obj);
                obj
            }
        };
        let admission = state.admission_context();
        let attrs = admission::Attributes {
            state: &admission,
            resource: r,
            namespace: ns,
            name,
            operation: admission::Operation::Update,
            subresource,
            old: Some(&old),
        };
        admission::mutate(&attrs, &mut new).await?;
        if let Some(hooks) = kind.hooks() {
            hooks.before_update_validation(&old, &mut new);
        }
        check_valid(r, name, {
            let mut errors = skiff_api::validation::object_meta(&new);
            errors.extend(strategy.validate_subresource_update(subresource, &old, &new));
            errors
        })?;
        admission::validate(&attrs, &new).await?;
        object::prepare_update(&old, &mut new);
        if let Some(ns) = ns {
            object::meta(&mut new).insert("namespace".into(), json!(ns));
        }
        if let Some(manager) = &opts.field_manager {
            new = crate::registry::managed::record_update(r, Some(&old), new, manager);
        } else {
            new = skiff_api::apply::keep_decodable_managed_fields(Some(&old), new);
        }
        let pending: Box<dyn Pending> = match kind.hooks() {
            Some(hooks) => hooks.begin_update(&old, &mut new, opts.dry_run).await?,
            None => Box::new(NothingPending),
        };
        if opts.dry_run {
            return Ok(Outcome {
                object: with_revision(new, revision),
                stored: None,
                status: StatusCode::OK,
                warnings,
            });
        }
        if unchanged(&old, &new) {
            // Upstream's GuaranteedUpdate: an update that leaves the object
            // as stored writes nothing (no new resourceVersion, no watch
            // event), so a controller's idempotent update does not wake it
            // again. A cached copy may be stale: the store confirms first.
            pending.finish(false).await;
            if cached {
                continue;
            }
            super::finalize::finish_if_done(state, kind, &key, &new, revision).await?;
            return Ok(Outcome {
                object: with_revision(new, revision),
                stored: None,
                status: StatusCode::OK,
                warnings: std::mem::take(&mut warnings),
            });
        }
        let (value, slot) = encode(&new)?;
        let stored = state.store.update(&key, value.clone(), revision).await;
        pending.finish(stored.is_ok()).await;
        match stored {
            Ok(kv) => {
                super::finalize::finish_if_done(state, kind, &key, &new, kv.mod_revision).await?;
                return Ok(Outcome {
                    object: with_revision(new, kv.mod_revision),
                    stored: Some(Stored {
                        bytes: value,
                        revision: kv.mod_revision,
                        slot,
                    }),
                    status: StatusCode::OK,
                    warnings: std::mem::take(&mut warnings),
                });
            }
            Err(skiff_store::Error::Conflict { .. }) if pinned.is_none() || cached => continue,
            Err(skiff_store::Error::Conflict { .. }) => {
                return Err(ApiError::conflict(r.group, r.plural, name))
            }
            Err(skiff_store::Error::NotFound { .. }) => {
                return Err(ApiError::not_found(r.group, r.plural, name))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(r.group, r.plural, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_that_changes_nothing_is_told_apart() {
        let old = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "resourceVersion": "7", "labels": {"a": "b"}},
            "data": {"k": "v"}});
        let mut new = old.clone();
        object::meta(&mut new).remove("resourceVersion");
        assert!(unchanged(&old, &new));
        let mut label = new.clone();
        label["metadata"]["labels"]["a"] = json!("c");
        assert!(!unchanged(&old, &label));
        let mut data = new.clone();
        data["data"]["k2"] = json!("v2");
        assert!(!unchanged(&old, &data));
        let mut dropped = new.clone();
        dropped.as_object_mut().unwrap().remove("data");
        assert!(!unchanged(&old, &dropped));
        let mut added = new.clone();
        added["metadata"]["annotations"] = json!({"x": "y"});
        assert!(!unchanged(&old, &added));
    }

    #[test]
    fn a_status_update_normalizes_only_what_it_reads_unless_more_changed() {
        let pods = crate::resources::find_builtin("", "v1", "pods").unwrap();
        let stored = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "d", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        let base = crate::resources::builtin()
            .normalize("", "Pod", ("Pod", "v1"), stored)
            .unwrap();
        // The kubelet's patch: spec as stored, status new (an unknown
        // field dropped by the type, as the whole object's pass drops it).
        let mut candidate = base.clone();
        candidate["status"] = json!({"phase": "Running", "podIP": "10.0.0.2", "bogus": 1});
        let whole =
            crate::resources::builtin().normalize("", "Pod", ("Pod", "v1"), candidate.clone());
        let lean = normalize_for_status(
            crate::resources::builtin(),
            &crate::resources::builtin().resolve(pods),
            &base,
            candidate,
        )
        .unwrap();
        assert_eq!(
            lean.get("spec"),
            None,
            "spec is not put through the type again"
        );
        assert_eq!(lean["status"], whole.as_ref().unwrap()["status"]);
        assert_eq!(lean["metadata"], whole.unwrap()["metadata"]);
        // A spec the patch changed goes through the type: a bad one is
        // refused as before, a good one kept.
        let mut bad = base.clone();
        bad["spec"]["containers"] = json!("not a list");
        let full_err = crate::resources::builtin().normalize("", "Pod", ("Pod", "v1"), bad.clone());
        let lean_err = normalize_for_status(
            crate::resources::builtin(),
            &crate::resources::builtin().resolve(pods),
            &base,
            bad,
        );
        assert_eq!(
            full_err.unwrap_err().to_string(),
            lean_err.unwrap_err().to_string()
        );
        let mut changed = base.clone();
        changed["spec"]["containers"][0]["image"] = json!("nginx");
        let lean = normalize_for_status(
            crate::resources::builtin(),
            &crate::resources::builtin().resolve(pods),
            &base,
            changed,
        )
        .unwrap();
        assert_eq!(lean["spec"]["containers"][0]["image"], "nginx");
        // Other kinds are normalized whole.
        let cms = crate::resources::find_builtin("", "v1", "configmaps").unwrap();
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"k": "v"}});
        let out = normalize_for_status(
            crate::resources::builtin(),
            &crate::resources::builtin().resolve(cms),
            &cm,
            cm.clone(),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"k": "v"}));
    }
}
