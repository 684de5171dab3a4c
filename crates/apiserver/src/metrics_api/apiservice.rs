//! The APIService `v1beta1.metrics.k8s.io`, as metrics-server's manifest
//! registers it (group priority 100, version priority 100), but served by
//! this API server itself (no `spec.service`: `kubectl get apiservices`
//! shows it Local). It is not automanaged, so the Local APIServices'
//! sync (`crate::reviews::apiservices`) leaves it alone. Available is
//! False until the scraper has computed the first usage, then True.
//! This module writes only that one object, straight to the store.

use serde_json::{json, Value};
use skiff_store::Store;

use crate::object;
use crate::resources;

/// Its name.
pub const NAME: &str = "v1beta1.metrics.k8s.io";

/// Why it could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("apiservices are not served")]
    NotServed,
    #[error("the stored APIService {NAME} is not JSON: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("APIService {NAME}: {0}")]
    Store(#[from] skiff_store::Error),
}

fn condition(available: bool) -> Value {
    let (status, reason, message) = if available {
        ("True", "Passed", "all checks passed")
    } else {
        (
            "False",
            "MetricsNotScraped",
            "no node's resource metrics have been scraped twice yet",
        )
    };
    json!({
        "type": "Available",
        "status": status,
        "lastTransitionTime": object::now(),
        "reason": reason,
        "message": message,
    })
}

/// The object, new.
pub fn object(available: bool) -> Value {
    json!({
        "kind": "APIService",
        "apiVersion": "apiregistration.k8s.io/v1",
        "metadata": {
            "name": NAME,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": object::now(),
            "labels": {"app.kubernetes.io/managed-by": "skiff-apiserver"},
        },
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
        "status": {"conditions": [condition(available)]},
    })
}

/// Creates it, or sets its Available condition to `available` when it
/// says otherwise.
pub async fn ensure(store: &dyn Store, available: bool) -> Result<(), Error> {
    let r = resources::find_builtin("apiregistration.k8s.io", "v1", "apiservices")
        .ok_or(Error::NotServed)?;
    let key = object::key(r, None, NAME);
    for _ in 0..5 {
        let kv = match store.get(&key).await {
            Ok(kv) => kv,
            Err(skiff_store::Error::NotFound { .. }) => {
                let body = serde_json::to_vec(&object(available))?;
                match store.create(&key, body.into()).await {
                    Ok(_) => return Ok(()),
                    Err(skiff_store::Error::AlreadyExists { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let mut stored: Value = serde_json::from_slice(&kv.value)?;
        let wanted = if available { "True" } else { "False" };
        let current = stored
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .and_then(|c| c["status"].as_str());
        if current == Some(wanted) {
            return Ok(());
        }
        object::set(
            &mut stored,
            "status",
            json!({"conditions": [condition(available)]}),
        );
        let body = serde_json::to_vec(&stored)?;
        match store.update(&key, body.into(), kv.mod_revision).await {
            Ok(_) => return Ok(()),
            Err(skiff_store::Error::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
