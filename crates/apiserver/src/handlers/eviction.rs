//! `pods/eviction` (policy/v1 Eviction), as upstream's EvictionREST
//! (pkg/registry/core/pod/storage/eviction.go): a pod that is Pending,
//! finished or already terminating is deleted at once; otherwise the one
//! PodDisruptionBudget whose selector matches it must allow a disruption,
//! which is taken (status.disruptionsAllowed decremented, the pod
//! recorded in disruptedPods) before the pod gets the DisruptionTarget
//! condition and is deleted. A budget that allows none answers 429
//! `Cannot evict pod as it would violate the pod's disruption budget.`
//! (with the DisruptionBudget cause); one the disruption controller has
//! not seen yet answers 429 with a 10 s retry; two budgets answer 500.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use skiff_api::selectors::LabelSelector;

use crate::catalog::Kind;
use crate::object;
use crate::registry::delete::DeleteOptions;
use crate::registry::write::{self, WriteOptions};
use crate::response::json_response;
use crate::status::{ApiError, ApiResult};
use crate::AppState;

/// Attempts of the budget's compare-and-swap (upstream `EvictionsRetry`).
const ATTEMPTS: usize = 5;

fn success() -> Response {
    json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

fn too_many_requests(cause: String, retry_after: i64) -> ApiError {
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError {
        code: StatusCode::TOO_MANY_REQUESTS,
        reason: "TooManyRequests",
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        details: Some(details),
        causes: Vec::new(),
    }
}

fn pdb_forbidden(name: &str, detail: &str) -> ApiError {
    ApiError::forbidden(format!(
        "poddisruptionbudget.policy \"{name}\" is forbidden: {detail}"
    ))
}

/// Upstream `canIgnorePDB`.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed" | "Pending") | None
    ) || pod.pointer("/metadata/deletionTimestamp").is_some()
}

pub fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn int(v: &Value, path: &str) -> i64 {
    v.pointer(path).and_then(Value::as_i64).unwrap_or(0)
}

/// The budgets of the pod's namespace whose (non-empty) selector
/// matches it.
async fn budgets(state: &AppState, pod: &Value, ns: &str) -> ApiResult<Vec<Value>> {
    let all = crate::admission::objects::list_of(
        &state.admission_context(),
        "policy",
        "v1",
        "poddisruptionbudgets",
        Some(ns),
    )
    .await?;
    Ok(all
        .into_iter()
        .filter(|pdb| {
            pdb.pointer("/spec/selector")
                .and_then(|s| LabelSelector::from_json(s).ok())
                .is_some_and(|s| !s.is_empty() && !s.is_nothing() && s.matches_object(pod))
        })
        .collect())
}

/// Sets the DisruptionAllowed condition from disruptionsAllowed (upstream
/// `UpdateDisruptionAllowedCondition`).
pub fn set_disruption_allowed_condition(pdb: &mut Value) {
    let allowed = int(pdb, "/status/disruptionsAllowed") > 0;
    let observed = int(pdb, "/status/observedGeneration");
    let (status, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let Some(st) = pdb.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    let conditions = st.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let existing = list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionAllowed"));
    match existing {
        Some(c) => {
            if c.get("status").and_then(Value::as_str) != Some(status) {
                c["lastTransitionTime"] = json!(object::now());
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["observedGeneration"] = json!(observed);
        }
        None => list.push(json!({
            "type": "DisruptionAllowed",
            "status": status,
            "reason": reason,
            "message": "",
            "observedGeneration": observed,
            "lastTransitionTime": object::now(),
        })),
    }
}

/// Upstream `checkAndDecrement`, with retries on conflicts.
async fn take_disruption(
    state: &AppState,
    ns: &str,
    pod_name: &str,
    pdb_name: &str,
    dry_run: bool,
) -> ApiResult<()> {
    let Some(r) = crate::resources::find_builtin("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    for _ in 0..ATTEMPTS {
        let (mut pdb, revision) = write::current(state, r, Some(ns), pdb_name).await?;
        if int(&pdb, "/status/observedGeneration") < int(&pdb, "/metadata/generation") {
            return Err(too_many_requests(
                format!("The disruption budget {pdb_name} is still being processed by the server."),
                10,
            ));
        }
        let allowed = int(&pdb, "/status/disruptionsAllowed");
        if allowed < 0 {
            return Err(pdb_forbidden(
                pdb_name,
                "pdb disruptions allowed is negative",
            ));
        }
        let disrupted = pdb
            .pointer("/status/disruptedPods")
            .and_then(Value::as_object)
            .map_or(0, serde_json::Map::len);
        if disrupted > 2000 {
            return Err(pdb_forbidden(
                pdb_name,
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
            ));
        }
        if allowed == 0 {
            return Err(too_many_requests(
                format!(
                    "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                    int(&pdb, "/status/desiredHealthy"),
                    int(&pdb, "/status/currentHealthy"),
                ),
                0,
            ));
        }
        if dry_run {
            return Ok(());
        }
        if let Some(st) = pdb.get_mut("status").and_then(Value::as_object_mut) {
            st.insert("disruptionsAllowed".into(), json!(allowed - 1));
            let pods = st.entry("disruptedPods").or_insert_with(|| json!({}));
            if let Some(p) = pods.as_object_mut() {
                p.insert(pod_name.into(), json!(object::now()));
            }
        }
        if allowed - 1 == 0 {
            set_disruption_allowed_condition(&mut pdb);
        }
        object::meta(&mut pdb).remove("resourceVersion");
        let key = object::key(r, Some(ns), pdb_name);
        let bytes = serde_json::to_vec(&pdb).map_err(|e| ApiError::internal(e.to_string()))?;
        match state.store.update(&key, bytes.into(), revision).await {
            Ok(_) => return Ok(()),
            Err(skiff_store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::timeout(format!(
        "couldn't update PodDisruptionBudget \"{pdb_name}\" due to conflicts"
    )))
}

/// Adds the DisruptionTarget condition (not on dry runs), then deletes.
async fn condition_and_delete(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    if !opts.dry_run {
        let wopts = WriteOptions {
            dry_run: false,
            field_manager: None,
            validation: crate::decode::strict::FieldValidation::Ignore,
            force: false,
        };
        let added = write::update(state, kind, ns, name, Some("status"), &wopts, |pod| {
            let mut pod = pod.clone();
            let condition = json!({
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": object::now(),
            });
            let status = pod
                .as_object_mut()
                .map(|o| o.entry("status").or_insert_with(|| json!({})));
            if let Some(st) = status.and_then(Value::as_object_mut) {
                let list = st.entry("conditions").or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.retain(|c| {
                        c.get("type").and_then(Value::as_str) != Some("DisruptionTarget")
                    });
                    list.push(condition);
                }
            }
            Ok(pod)
        })
        .await;
        if let Err(e) = added {
            if e.code == StatusCode::NOT_FOUND {
                return Err(e);
            }
            tracing::debug!(pod = name, error = %e.message, "adding the DisruptionTarget condition");
        }
    }
    crate::registry::delete::delete_one(state, kind, ns, name, opts).await?;
    Ok(())
}

/// POST pods/NAME/eviction.
pub async fn evict(
    state: &AppState,
    kind: &Kind,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
    opts: &WriteOptions,
) -> ApiResult<Response> {
    let r = kind.resource;
    if !r.subresources.contains(&"eviction") {
        return Err(ApiError::not_found_path());
    }
    let eviction = object::decode(body)?;
    match eviction.get("kind").and_then(Value::as_str) {
        None | Some("Eviction") => {}
        Some(kind) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind (Eviction)"
            )))
        }
    }
    crate::decode::typed::decode_body::<k8s_openapi::api::policy::v1::Eviction>(
        &eviction,
        ("Eviction", "v1"),
    )?;
    if object::name_of(&eviction).is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let delete_options = eviction
        .get("deleteOptions")
        .map(|d| serde_json::to_vec(d).unwrap_or_default())
        .unwrap_or_default();
    let delete_opts =
        DeleteOptions::parse(&delete_options, &Default::default())?.dry_run(opts.dry_run);
    let (pod, _) = write::current(state, r, ns, name).await?;
    if can_ignore_pdb(&pod) {
        condition_and_delete(state, kind, ns, name, &delete_opts).await?;
        return Ok(success());
    }
    let namespace = ns.unwrap_or("default");
    let pdbs = budgets(state, &pod, namespace).await?;
    if pdbs.len() > 1 {
        return Ok(json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                "code": 500,
            }),
        ));
    }
    if let Some(pdb) = pdbs.first() {
        let pdb_name = pdb
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let unhealthy = !pod_ready(&pod);
        let healthy_enough = int(pdb, "/status/currentHealthy")
            >= int(pdb, "/status/desiredHealthy")
            && int(pdb, "/status/desiredHealthy") > 0;
        let always_allow = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            == Some("AlwaysAllow");
        if !(unhealthy && (healthy_enough || always_allow)) {
            take_disruption(state, namespace, name, pdb_name, delete_opts.dry_run).await?;
        }
    }
    condition_and_delete(state, kind, ns, name, &delete_opts).await?;
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_and_finished_pods_skip_budgets() {
        assert!(can_ignore_pdb(&json!({"status": {"phase": "Pending"}})));
        assert!(can_ignore_pdb(&json!({"status": {"phase": "Succeeded"}})));
        assert!(!can_ignore_pdb(&json!({"status": {"phase": "Running"}})));
        assert!(can_ignore_pdb(
            &json!({"metadata": {"deletionTimestamp": "x"}, "status": {"phase": "Running"}})
        ));
    }

    #[test]
    fn the_condition_follows_the_count() {
        let mut pdb = json!({"status": {"disruptionsAllowed": 0, "observedGeneration": 2}});
        set_disruption_allowed_condition(&mut pdb);
        let c = &pdb["status"]["conditions"][0];
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "InsufficientPods");
        pdb["status"]["disruptionsAllowed"] = json!(1);
        set_disruption_allowed_condition(&mut pdb);
        assert_eq!(pdb["status"]["conditions"][0]["reason"], "SufficientPods");
        assert_eq!(pdb["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
