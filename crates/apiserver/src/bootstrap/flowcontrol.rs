//! The API priority and fairness configuration upstream's
//! `priority-and-fairness-config-producer` post-start hook keeps present:
//! the mandatory `exempt` and `catch-all` PriorityLevelConfigurations and
//! FlowSchemas and the suggested ones (specs from
//! `skiff_api::defaults::flowcontrol`), each annotated
//! `apf.kubernetes.io/autoupdate-spec: "true"`. [`ensure`]
//! creates those that are absent, at start and then every minute as
//! upstream's ensurer does ([`run`]; a deleted one comes back), and
//! leaves existing ones alone (validation keeps the mandatory ones' specs
//! fixed; upstream would also rewrite suggested ones still annotated for
//! auto-update, which is not done here).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use skiff_api::defaults::flowcontrol::{
    mandatory_flow_schema_spec, mandatory_priority_level_spec, suggested_flow_schemas,
    suggested_priority_levels, AUTO_UPDATE_ANNOTATION, MANDATORY_NAMES,
};
use skiff_store::Store;
use tokio_util::sync::CancellationToken;

use crate::object;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";

fn object_of(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "kind": kind,
        "apiVersion": format!("{GROUP}/v1"),
        "metadata": {
            "name": name,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now(),
            "generation": 1,
            "annotations": {AUTO_UPDATE_ANNOTATION: "true"},
        },
        "spec": spec,
        "status": {},
    })
}

/// The mandatory objects: (plural, object), levels first.
pub fn mandatory() -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for name in MANDATORY_NAMES {
        if let Some(spec) = mandatory_priority_level_spec(name) {
            out.push((
                "prioritylevelconfigurations",
                object_of("PriorityLevelConfiguration", name, spec),
            ));
        }
    }
    for name in MANDATORY_NAMES {
        if let Some(spec) = mandatory_flow_schema_spec(name) {
            out.push(("flowschemas", object_of("FlowSchema", name, spec)));
        }
    }
    out
}

/// The suggested objects: (plural, object), levels first.
pub fn suggested() -> Vec<(&'static str, Value)> {
    let levels = suggested_priority_levels().into_iter().map(|(name, spec)| {
        (
            "prioritylevelconfigurations",
            object_of("PriorityLevelConfiguration", name, spec),
        )
    });
    let schemas = suggested_flow_schemas()
        .into_iter()
        .map(|(name, spec)| ("flowschemas", object_of("FlowSchema", name, spec)));
    levels.chain(schemas).collect()
}

/// Creates the mandatory and suggested objects that are absent.
pub async fn ensure(store: &dyn Store) -> Result<(), (String, skiff_store::Error)> {
    for (plural, obj) in mandatory().into_iter().chain(suggested()) {
        let Some(r) = crate::resources::find_builtin(GROUP, "v1", plural) else {
            continue;
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let body = serde_json::to_vec(&obj).unwrap_or_default();
        match store
            .create(&object::key(r, None, &name), body.into())
            .await
        {
            Ok(_) | Err(skiff_store::Error::AlreadyExists { .. }) => {}
            Err(e) => return Err((format!("{plural}/{name}"), e)),
        }
    }
    Ok(())
}

/// How often the mandatory objects are checked after start.
const ENSURE_EVERY: Duration = Duration::from_secs(60);

/// Re-creates deleted mandatory objects every minute until `shutdown`.
pub async fn run(store: Arc<dyn Store>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(ENSURE_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err((name, e)) = ensure(store.as_ref()).await {
            tracing::warn!(%name, error = %e, "APF bootstrap ensurer ran into error, will retry later");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mandatory_objects_validate() {
        assert_eq!(mandatory().len(), 4);
        let objects: Vec<_> = mandatory().into_iter().chain(suggested()).collect();
        assert_eq!(objects.len(), 21);
        for (plural, obj) in &objects {
            let errors = if *plural == "flowschemas" {
                skiff_api::validation::flowcontrol::flow_schema(obj)
            } else {
                skiff_api::validation::flowcontrol::priority_level_configuration(obj)
            };
            assert!(errors.is_empty(), "{plural}: {errors:?}");
        }
    }
}
