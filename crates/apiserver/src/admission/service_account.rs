//! ServiceAccount (upstream's `plugin/pkg/admission/serviceaccount`): a
//! new pod runs as a ServiceAccount that exists (`spec.serviceAccountName`,
//! default `default`), and unless `automountServiceAccountToken` is false
//! on the pod or its ServiceAccount, gets the projected volume
//! `kube-api-access-xxxxx` (a bound token refreshed by the node agent,
//! the cluster CA from the `kube-root-ca.crt` ConfigMap and the pod's
//! namespace) mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container and
//! init container that has nothing mounted there. Mirror pods are left
//! alone.
//!
//! The ServiceAccount is looked up in the watch cache, then the store; the
//! `default` one of a namespace created a moment ago is waited for a few
//! seconds (upstream retries its lookup too), since the ServiceAccount
//! controller creates it just after the namespace.
//!
//! It changes only new pods and writes nothing itself.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{Attributes, Context, Operation, Plugin};
use crate::status::{ApiError, ApiResult};

/// The ServiceAccount of a pod that names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Where the token, CA and namespace are mounted.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The volume's name prefix (a 5-character suffix follows).
pub const VOLUME_PREFIX: &str = "kube-api-access-";
/// Upstream's `WarnOnlyBoundTokenExpirationSeconds`: an hour and 7 s.
pub const TOKEN_SECONDS: i64 = 3607;
/// The ConfigMap the root CA controller keeps in every namespace.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// How long the `default` ServiceAccount of a new namespace is waited for.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// Upstream's `SimpleNameGenerator` alphabet (no vowels, no look-alikes).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Why a ServiceAccount lookup failed (the plugin's one error type; it
/// becomes a Forbidden in upstream's words).
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("serviceaccount \"{0}\" not found")]
    NotFound(String),
    #[error("{0}")]
    Store(#[source] skiff_store::Error),
}

#[derive(Debug)]
pub struct ServiceAccount;

/// The one field of a ServiceAccount the plugin reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Account {
    automount_service_account_token: Option<bool>,
}

/// The ServiceAccount `namespace/name`, from the cache or the store.
async fn lookup(ctx: &Context<'_>, namespace: &str, name: &str) -> Result<Account, Error> {
    let key = format!("/registry/serviceaccounts/{namespace}/{name}");
    let deadline = tokio::time::Instant::now()
        + if name == DEFAULT_SERVICE_ACCOUNT {
            DEFAULT_WAIT
        } else {
            Duration::ZERO
        };
    loop {
        let cached = ctx
            .caches
            .get("serviceaccounts")
            .and_then(|c| c.get(&key))
            .and_then(|c| c.json().cloned());
        let found = match cached {
            Some(json) => Some(json.to_vec()),
            None => match ctx.store.get(&key).await {
                Ok(kv) => Some(kv.value.to_vec()),
                Err(skiff_store::Error::NotFound { .. }) => None,
                Err(e) => return Err(Error::Store(e)),
            },
        };
        if let Some(bytes) = found {
            return Ok(serde_json::from_slice(&bytes).unwrap_or_default());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::NotFound(name.to_string()));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `kube-api-access-` and 5 characters of upstream's alphabet.
fn volume_name() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes
        .iter()
        .take(5)
        .map(|b| {
            let i = usize::from(*b) % ALPHABET.len();
            char::from(ALPHABET.get(i).copied().unwrap_or(b'x'))
        })
        .collect();
    format!("{VOLUME_PREFIX}{suffix}")
}

/// The projected volume upstream's plugin adds.
pub fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
}

/// Mounts the token volume in every container without a mount at
/// [`MOUNT_PATH`], adding the volume if one needed it (upstream's
/// `mountServiceAccountToken`, which reuses a `kube-api-access-` volume
/// the pod already has).
pub fn mount_token(spec: &mut serde_json::Map<String, Value>, new_name: impl FnOnce() -> String) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .filter_map(|v| v.get("name").and_then(Value::as_str))
                .find(|n| n.starts_with(VOLUME_PREFIX))
        })
        .map(String::from);
    let name = existing.clone().unwrap_or_else(new_name);
    let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            if mounts.is_null() {
                *mounts = json!([]);
            }
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            let taken = mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(MOUNT_PATH));
            if !taken {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if needed && existing.is_none() {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if volumes.is_null() {
            *volumes = json!([]);
        }
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(token_volume(&name));
        }
    }
}

#[async_trait]
impl Plugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    async fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> ApiResult<()> {
        if attrs.operation != Operation::Create
            || attrs.subresource.is_some()
            || !attrs.resource.group.is_empty()
            || attrs.resource.plural != "pods"
        {
            return Ok(());
        }
        if object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(MIRROR_ANNOTATION))
            .is_some()
        {
            return Ok(());
        }
        let namespace = attrs.namespace.unwrap_or("default").to_string();
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let named = |k: &str| {
            spec.get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let account = named("serviceAccountName")
            .or_else(|| named("serviceAccount"))
            .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_string());
        spec.insert("serviceAccountName".into(), json!(account));
        spec.insert("serviceAccount".into(), json!(account));
        let found = lookup(attrs.state, &namespace, &account)
            .await
            .map_err(|e| {
                let name = if attrs.name.is_empty() {
                    "pods".to_string()
                } else {
                    format!("pods \"{}\"", attrs.name)
                };
                ApiError::forbidden(format!(
                    "{name} is forbidden: error looking up service account {namespace}/{account}: {e}"
                ))
            })?;
        let automount = spec
            .get("automountServiceAccountToken")
            .and_then(Value::as_bool)
            .or(found.automount_service_account_token)
            .unwrap_or(true);
        if automount {
            mount_token(spec, volume_name);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_container_without_the_path_mounts_one_volume() {
        let mut s = spec(json!({
            "initContainers": [{"name": "i"}],
            "containers": [
                {"name": "a", "volumeMounts": [{"name": "x", "mountPath": "/x"}]},
                {"name": "b", "volumeMounts": [{"name": "mine", "mountPath": MOUNT_PATH}]},
            ],
        }));
        mount_token(&mut s, || "kube-api-access-abcde".into());
        let mounts = |list: &str, i: usize| s[list][i]["volumeMounts"].clone();
        assert_eq!(
            mounts("initContainers", 0),
            json!([{"name": "kube-api-access-abcde", "readOnly": true, "mountPath": MOUNT_PATH}])
        );
        assert_eq!(mounts("containers", 0).as_array().unwrap().len(), 2);
        assert_eq!(
            mounts("containers", 1),
            json!([{"name": "mine", "mountPath": MOUNT_PATH}])
        );
        let volumes = s["volumes"].as_array().unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(volumes[0], token_volume("kube-api-access-abcde"));
        assert_eq!(volumes[0]["projected"]["defaultMode"], 420);
        // Again (an update would not, but the function is idempotent).
        mount_token(&mut s, || unreachable!("the volume exists"));
        assert_eq!(s["volumes"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn no_volume_when_every_container_has_the_path() {
        let mut s = spec(json!({"containers": [
            {"name": "b", "volumeMounts": [{"name": "mine", "mountPath": MOUNT_PATH}]},
        ]}));
        mount_token(&mut s, || "kube-api-access-abcde".into());
        assert!(s.get("volumes").is_none());
    }

    #[test]
    fn volume_names_look_like_upstreams() {
        for _ in 0..20 {
            let name = volume_name();
            let suffix = name.strip_prefix(VOLUME_PREFIX).unwrap();
            assert_eq!(suffix.len(), 5);
            assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)), "{name}");
        }
    }
}
