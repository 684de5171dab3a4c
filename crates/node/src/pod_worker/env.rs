//! A container's environment as the kubelet builds it
//! (`makeEnvironmentVariables`): `envFrom` (ConfigMaps and Secrets, with
//! prefixes) first, then `env` in order, each value either literal with
//! `$(VAR)` expansion, or from a ConfigMap or Secret key, a field of the
//! pod (`fieldRef`) or a resource of the container (`resourceFieldRef`);
//! then `$(VAR)` expansion of command and args.
//!
//! A reference that cannot be resolved and is not optional is an error in
//! upstream's words (`configmap "NAME" not found`, `couldn't find key K in
//! ConfigMap NS/NAME`), which the worker reports as
//! CreateContainerConfigError. Objects are read through [`Objects`]; this
//! module does no other I/O.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, PersistentVolume, PersistentVolumeClaim, Pod};

use crate::api_error::ApiError;

/// Reads the ConfigMaps, Secrets and claims a pod refers to.
#[async_trait]
pub trait Objects: Send + Sync + std::fmt::Debug {
    /// A ConfigMap's `data`, `None` when it does not exist.
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ApiError>;
    /// A Secret's `data` (decoded), `None` when it does not exist.
    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError>;
    /// The Service environment variables of a pod in `namespace`
    /// (see [`super::service_env`]); none by default (no Services known).
    /// An error while the Services have not been listed yet (upstream
    /// does not start a container without them either).
    async fn service_env(
        &self,
        namespace: &str,
        enable_service_links: bool,
    ) -> Result<Vec<(String, String)>, String> {
        let _ = (namespace, enable_service_links);
        Ok(vec![])
    }
    /// A PersistentVolumeClaim, `None` when it does not exist (the
    /// default: no claims).
    async fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PersistentVolumeClaim>, ApiError> {
        let _ = (namespace, name);
        Ok(None)
    }
    /// The PersistentVolume a claim is bound to (one that does not exist
    /// is an error: the claim names it).
    async fn volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        Err(ApiError::NotFound(format!(
            "persistentvolumes \"{name}\" not found"
        )))
    }
    /// A token for `key` (TokenRequest bound to the pod) and when to ask
    /// again (Unix seconds); none by default (no TokenRequest API).
    async fn service_account_token(
        &self,
        key: &super::tokens::Key,
    ) -> Result<(String, i64), String> {
        let _ = key;
        Err("serviceAccountToken projections need the TokenRequest API, which this cluster does not serve".to_string())
    }
    /// Whether the token for `key` is cached and not yet due for refresh.
    fn token_fresh(&self, key: &super::tokens::Key) -> bool {
        let _ = key;
        false
    }
    /// Forgets what was cached for pod `uid` (it is gone).
    fn forget_pod(&self, uid: &str) {
        let _ = uid;
    }
}

/// What else a value may come from.
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub node_name: &'a str,
    pub host_ip: &'a str,
    /// The sandbox's IP (the node's for hostNetwork pods).
    pub pod_ip: Option<&'a str>,
    /// The node's allocatable CPU (millicores) and memory (bytes): what
    /// `limits.*` resolve to when the container sets none.
    pub node_cpu_milli: i64,
    pub node_memory: i64,
}

/// The resolved environment and the expanded command and args.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub env: Vec<(String, String)>,
    pub command: Vec<String>,
    pub args: Vec<String>,
    /// Keys skipped from `envFrom` because they are not valid variable
    /// names, per source (for upstream's InvalidEnvironmentVariableNames
    /// event).
    pub invalid: Vec<(String, Vec<String>)>,
}

/// Kubernetes' `$(VAR)` expansion: a defined `$(VAR)` is replaced, an
/// undefined one stays as written, `$$` is a literal `$`.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(rest.get(..i).unwrap_or_default());
        let after = rest.get(i + 1..).unwrap_or_default();
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('(') {
            match tail.find(')') {
                Some(end) => {
                    let name = tail.get(..end).unwrap_or_default();
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = tail.get(end + 1..).unwrap_or_default();
                }
                None => {
                    out.push_str("$(");
                    rest = tail;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A C identifier-like name as upstream's IsEnvVarName accepts
/// (`[-._a-zA-Z][-._a-zA-Z0-9]*`).
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || "-._".contains(c))
        && chars.all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
}

fn set(env: &mut Vec<(String, String)>, name: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name.to_string(), value)),
    }
}

/// A `fieldRef` path's value.
pub(crate) fn field(pod: &Pod, facts: &Facts<'_>, path: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    if let Some(v) = keyed("metadata.labels['", &meta.labels) {
        return Ok(v);
    }
    if let Some(v) = keyed("metadata.annotations['", &meta.annotations) {
        return Ok(v);
    }
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| facts.node_name.to_string()),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.to_string(),
        "status.podIP" | "status.podIPs" => facts.pod_ip.unwrap_or_default().to_string(),
        other => return Err(format!("unsupported fieldPath: {other}")),
    })
}

/// A `resourceFieldRef`'s value, divided by its divisor and rounded up.
pub(crate) fn resource(
    pod: &Pod,
    c: &Container,
    facts: &Facts<'_>,
    r: &k8s_openapi::api::core::v1::ResourceFieldSelector,
) -> Result<String, String> {
    let target = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|x| x.name == name))
            .ok_or_else(|| format!("container {name} not found"))?,
        None => c,
    };
    let res = target.resources.as_ref();
    let get = |kind: &str, name: &str, milli: bool| -> Option<i64> {
        let map = match kind {
            "limits" => res.and_then(|r| r.limits.as_ref()),
            _ => res.and_then(|r| r.requests.as_ref()),
        };
        if milli {
            crate::podspec::quantity_milli(map, name)
        } else {
            crate::podspec::quantity_value(map, name)
        }
    };
    let divisor = r.divisor.as_ref().map(|d| d.0.as_str()).unwrap_or("1");
    let ceil_div = |a: i64, b: i64| if b <= 0 { a } else { (a + b - 1) / b };
    match r.resource.as_str() {
        "limits.cpu" | "requests.cpu" => {
            let kind = r.resource.split('.').next().unwrap_or_default();
            let milli = get(kind, "cpu", true).unwrap_or(if kind == "limits" {
                facts.node_cpu_milli
            } else {
                0
            });
            let d = skiff_api::quantity::parse_milli(divisor).map_err(|e| e.to_string())?;
            Ok(ceil_div(milli, d).to_string())
        }
        "limits.memory"
        | "requests.memory"
        | "limits.ephemeral-storage"
        | "requests.ephemeral-storage" => {
            let (kind, name) = r.resource.split_once('.').unwrap_or_default();
            let bytes = get(kind, name, false).unwrap_or(if kind == "limits" && name == "memory" {
                facts.node_memory
            } else {
                0
            });
            let d = skiff_api::quantity::parse_value(divisor).map_err(|e| e.to_string())?;
            Ok(ceil_div(bytes, d).to_string())
        }
        other => Err(format!("unsupported container resource: {other}")),
    }
}

/// Builds `c`'s environment and expands its command and args.
pub async fn resolve(
    objects: &dyn Objects,
    pod: &Pod,
    c: &Container,
    facts: &Facts<'_>,
) -> Result<Resolved, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    // The Services' variables: a fallback for `$(VAR)` and appended
    // after the container's own, which win (upstream's
    // makeEnvironmentVariables).
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let service_env = objects.service_env(ns, links).await?;
    let service_var = |name: &str| {
        service_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut env: Vec<(String, String)> = Vec::new();
    let mut invalid = Vec::new();
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let mut skipped = vec![];
        if let Some(cm) = &from.config_map_ref {
            let name = cm.name.as_str();
            match objects
                .config_map(ns, name)
                .await
                .map_err(|e| e.to_string())?
            {
                Some(data) => {
                    for (k, v) in data {
                        let key = format!("{prefix}{k}");
                        if valid_env_name(&key) {
                            set(&mut env, &key, v);
                        } else {
                            skipped.push(key);
                        }
                    }
                    if !skipped.is_empty() {
                        invalid.push((
                            format!("configMap {ns}/{name}"),
                            std::mem::take(&mut skipped),
                        ));
                    }
                }
                None if cm.optional == Some(true) => {}
                None => return Err(format!("configmap \"{name}\" not found")),
            }
        }
        if let Some(s) = &from.secret_ref {
            let name = s.name.as_str();
            match objects.secret(ns, name).await.map_err(|e| e.to_string())? {
                Some(data) => {
                    for (k, v) in data {
                        let key = format!("{prefix}{k}");
                        if valid_env_name(&key) {
                            set(&mut env, &key, String::from_utf8_lossy(&v).into_owned());
                        } else {
                            skipped.push(key);
                        }
                    }
                    if !skipped.is_empty() {
                        invalid.push((format!("secret {ns}/{name}"), skipped));
                    }
                }
                None if s.optional == Some(true) => {}
                None => return Err(format!("secret \"{name}\" not found")),
            }
        }
    }
    for var in c.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) if !v.is_empty() => {
                let known = env.clone();
                expand(v, &|name| {
                    known
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .or_else(|| service_var(name))
                })
            }
            (_, Some(from)) => {
                if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional == Some(true);
                    match objects
                        .config_map(ns, &r.name)
                        .await
                        .map_err(|e| e.to_string())?
                    {
                        None if optional => continue,
                        None => return Err(format!("configmap \"{}\" not found", r.name)),
                        Some(data) => match data.get(&r.key) {
                            Some(v) => v.clone(),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in ConfigMap {ns}/{}",
                                    r.key, r.name
                                ))
                            }
                        },
                    }
                } else if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional == Some(true);
                    match objects
                        .secret(ns, &r.name)
                        .await
                        .map_err(|e| e.to_string())?
                    {
                        None if optional => continue,
                        None => return Err(format!("secret \"{}\" not found", r.name)),
                        Some(data) => match data.get(&r.key) {
                            Some(v) => String::from_utf8_lossy(v).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in Secret {ns}/{}",
                                    r.key, r.name
                                ))
                            }
                        },
                    }
                } else if let Some(f) = &from.field_ref {
                    field(pod, facts, &f.field_path)?
                } else if let Some(r) = &from.resource_field_ref {
                    resource(pod, c, facts, r)?
                } else {
                    String::new()
                }
            }
            _ => String::new(),
        };
        set(&mut env, &var.name, value);
    }
    for (k, v) in &service_env {
        if !env.iter().any(|(name, _)| name == k) {
            env.push((k.clone(), v.clone()));
        }
    }
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let command = c
        .command
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    let args = c
        .args
        .iter()
        .flatten()
        .map(|s| expand(s, &lookup))
        .collect();
    Ok(Resolved {
        env,
        command,
        args,
        invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Fake {
        config_maps: BTreeMap<String, BTreeMap<String, String>>,
        secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    }

    #[async_trait]
    impl Objects for Fake {
        async fn config_map(
            &self,
            _: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
            Ok(self.config_maps.get(name).cloned())
        }
        async fn secret(
            &self,
            _: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
            Ok(self.secrets.get(name).cloned())
        }
    }

    fn facts() -> Facts<'static> {
        Facts {
            node_name: "n1",
            host_ip: "192.168.0.2",
            pod_ip: Some("10.244.0.7"),
            node_cpu_milli: 2000,
            node_memory: 1 << 30,
        }
    }

    fn pod(container: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [container]}
        }))
        .unwrap()
    }

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |n| {
            pairs
                .iter()
                .find(|(k, _)| *k == n)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn expansion_as_upstream() {
        let l = lookup(&[("A", "1"), ("B", "two")]);
        assert_eq!(expand("$(A)-$(B)", &l), "1-two");
        assert_eq!(expand("$(MISSING)", &l), "$(MISSING)");
        assert_eq!(expand("$$(A)", &l), "$(A)");
        assert_eq!(expand("$A $", &l), "$A $");
        assert_eq!(expand("$(A", &l), "$(A");
        assert_eq!(expand("100$$", &l), "100$");
    }

    #[test]
    fn env_names() {
        assert!(valid_env_name("A_B"));
        assert!(valid_env_name("my.var-1"));
        assert!(!valid_env_name("1A"));
        assert!(!valid_env_name("a b"));
        assert!(!valid_env_name(""));
    }

    #[tokio::test]
    async fn values_from_everywhere_in_order_and_expanded() {
        let mut fake = Fake::default();
        fake.config_maps.insert(
            "cm".into(),
            [
                ("COLOR".into(), "blue".into()),
                ("bad key".into(), "x".into()),
            ]
            .into(),
        );
        fake.secrets
            .insert("s".into(), [("token".into(), b"hunter2".to_vec())].into());
        let p = pod(serde_json::json!({
            "name": "c", "image": "busybox",
            "command": ["sh", "-c", "echo $(GREETING) $$(NOT)"],
            "args": ["$(POD_NAME)"],
            "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
            "env": [
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
                {"name": "GREETING", "value": "hi $(POD_NAME) in $(CM_COLOR)"},
                {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}
            ]
        }));
        let c = &p.spec.as_ref().unwrap().containers[0];
        let r = resolve(&fake, &p, c, &facts()).await.unwrap();
        let get = |k: &str| r.env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CM_COLOR"), Some("blue"));
        assert_eq!(get("POD_NAME"), Some("p"));
        assert_eq!(get("APP"), Some("web"));
        assert_eq!(get("IP"), Some("10.244.0.7"));
        assert_eq!(get("TOKEN"), Some("hunter2"));
        assert_eq!(get("GREETING"), Some("hi p in blue"));
        assert_eq!(get("MEM"), Some("1024"));
        assert_eq!(r.command, ["sh", "-c", "echo hi p in blue $(NOT)"]);
        assert_eq!(r.args, ["p"]);
        assert_eq!(
            r.invalid,
            [(
                "configMap ns/cm".to_string(),
                vec!["CM_bad key".to_string()]
            )]
        );
    }

    #[tokio::test]
    async fn missing_references_are_upstreams_errors_unless_optional() {
        let mut fake = Fake::default();
        fake.config_maps
            .insert("cm".into(), [("a".into(), "1".into())].into());
        let cases = [
            (
                serde_json::json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "a"}}}),
                Some("configmap \"nope\" not found"),
            ),
            (
                serde_json::json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "b"}}}),
                Some("couldn't find key b in ConfigMap ns/cm"),
            ),
            (
                serde_json::json!({"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a"}}}),
                Some("secret \"s\" not found"),
            ),
            (
                serde_json::json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "a", "optional": true}}}),
                None,
            ),
            (
                serde_json::json!({"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "b", "optional": true}}}),
                None,
            ),
        ];
        for (var, want) in cases {
            let p = pod(serde_json::json!({"name": "c", "image": "busybox", "env": [var]}));
            let c = &p.spec.as_ref().unwrap().containers[0];
            let got = resolve(&fake, &p, c, &facts()).await;
            match want {
                Some(msg) => assert_eq!(got.unwrap_err(), msg),
                None => assert!(got.unwrap().env.is_empty()),
            }
        }
        let p = pod(
            serde_json::json!({"name": "c", "image": "busybox", "envFrom": [{"secretRef": {"name": "gone"}}]}),
        );
        let c = &p.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            resolve(&fake, &p, c, &facts()).await.unwrap_err(),
            "secret \"gone\" not found"
        );
    }
}
