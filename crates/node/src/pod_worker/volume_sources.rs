//! The pod volumes whose content comes from the API: configMap, secret,
//! downwardAPI and projected volumes are written (again on every sync, so
//! updates reach running containers) with the atomic `..data` layout of
//! [`super::volume_files::write_atomically`]; persistentVolumeClaim volumes are
//! looked up (claim → bound PersistentVolume → its directory on this
//! node).
//!
//! A projection's `serviceAccountToken` is a TokenRequest bound to the
//! pod, cached and refreshed by [`super::tokens`] (through [`Objects`]):
//! each sync writes the volume again, with a fresh token once
//! [`Prepared::refresh_tokens_at`] has passed.
//!
//! It reads objects through [`Objects`] and writes only under the pod's
//! volume dir; mounting is [`super::volumes`]'s.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use super::env::{Facts, Objects};
use super::volume_files::{object_dir, select, write_atomically, Files};

/// What preparing a pod's volumes found out for mounting them.
#[derive(Debug, Default, Clone)]
pub struct Prepared {
    /// The host directory of each persistentVolumeClaim volume, by volume name.
    pub claims: HashMap<String, PathBuf>,
    /// When the earliest service-account token written needs refreshing
    /// (Unix seconds).
    pub refresh_tokens_at: Option<i64>,
}

/// Whether writing the pod's volumes needs its IP: a downwardAPI item
/// (alone or projected) naming `status.podIP(s)`. Upstream's validation
/// refuses those paths in volumes, ours does not, so the worker prepares
/// such a pod's volumes only once its sandbox has an IP, and every other
/// pod's while the sandbox is being made.
pub fn needs_pod_ip(pod: &Pod) -> bool {
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    let names_ip = |items: Option<&Vec<DownwardAPIVolumeFile>>| {
        items.into_iter().flatten().any(|i| {
            i.field_ref
                .as_ref()
                .is_some_and(|f| f.field_path.starts_with("status.podIP"))
        })
    };
    volumes.iter().any(|v| {
        names_ip(v.downward_api.as_ref().and_then(|d| d.items.as_ref()))
            || v.projected.as_ref().is_some_and(|p| {
                p.sources
                    .iter()
                    .flatten()
                    .any(|s| names_ip(s.downward_api.as_ref().and_then(|d| d.items.as_ref())))
            })
    })
}

/// A volume that cannot be set up: its name and the FailedMount event's text.
pub type Failure = (String, String);

fn set_up_failed(volume: &str, msg: &str) -> Failure {
    (
        volume.to_string(),
        format!("MountVolume.SetUp failed for volume \"{volume}\" : {msg}"),
    )
}

/// Where a kind of API-backed volume is written under the pod's dir.
pub fn kind_dir(v: &Volume) -> Option<&'static str> {
    if v.config_map.is_some() {
        Some("configmap")
    } else if v.secret.is_some() {
        Some("secret")
    } else if v.downward_api.is_some() {
        Some("downward-api")
    } else if v.projected.is_some() {
        Some("projected")
    } else {
        None
    }
}

/// Go's `%q` for the strings labels and annotations hold.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A map as upstream's downward API writes it: `key="value"` lines in key
/// order, no trailing newline.
pub fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", quoted(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of downwardAPI `items`.
fn downward_files(
    pod: &Pod,
    facts: &Facts<'_>,
    items: &[DownwardAPIVolumeFile],
    default_mode: Option<i32>,
) -> Result<Files, String> {
    let mode = default_mode.unwrap_or(0o644) as u32;
    let mut out = vec![];
    for item in items {
        let value = if let Some(f) = &item.field_ref {
            match f.field_path.as_str() {
                "metadata.labels" => format_map(pod.metadata.labels.as_ref()),
                "metadata.annotations" => format_map(pod.metadata.annotations.as_ref()),
                path => super::env::field(pod, facts, path)?,
            }
        } else if let Some(r) = &item.resource_field_ref {
            let containers: &[Container] = pod
                .spec
                .as_ref()
                .map(|s| s.containers.as_slice())
                .unwrap_or(&[]);
            let name = r.container_name.as_deref().unwrap_or_default();
            let c = containers
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| format!("container {name} not found"))?;
            super::env::resource(pod, c, facts, r)?
        } else {
            continue;
        };
        out.push((
            item.path.clone(),
            value.into_bytes(),
            item.mode.map(|m| m as u32).unwrap_or(mode),
        ));
    }
    Ok(out)
}

async fn config_map_files(
    objects: &dyn Objects,
    ns: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    mode: Option<i32>,
    optional: bool,
) -> Result<Files, String> {
    let data: BTreeMap<String, Vec<u8>> = match objects
        .config_map(ns, name)
        .await
        .map_err(|e| e.to_string())?
    {
        Some(d) => d.into_iter().map(|(k, v)| (k, v.into_bytes())).collect(),
        None if optional => Default::default(),
        None => return Err(format!("configmap \"{name}\" not found")),
    };
    select(&data, items, mode, optional, "configmap")
}

async fn secret_files(
    objects: &dyn Objects,
    ns: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    mode: Option<i32>,
    optional: bool,
) -> Result<Files, String> {
    let data = match objects.secret(ns, name).await.map_err(|e| e.to_string())? {
        Some(d) => d,
        None if optional => Default::default(),
        None => return Err(format!("secret \"{name}\" not found")),
    };
    select(&data, items, mode, optional, "secret")
}

/// What the token of a `serviceAccountToken` projection of `pod` is
/// requested for.
fn token_key(
    pod: &Pod,
    t: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
) -> super::tokens::Key {
    super::tokens::Key {
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        service_account: pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        audiences: t
            .audience
            .iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect(),
        expiration_seconds: t.expiration_seconds.unwrap_or(3600),
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// Whether projected volume `v` carries service-account tokens that are
/// all still fresh: it is then left as written (its other sources are
/// read again with the next token, well within the token's life), so a
/// running pod's syncs do not read the root CA ConfigMap every time.
fn tokens_fresh(objects: &dyn Objects, pod: &Pod, v: &Volume) -> bool {
    let Some(p) = &v.projected else {
        return false;
    };
    let mut tokens = p
        .sources
        .iter()
        .flatten()
        .filter_map(|s| s.service_account_token.as_ref())
        .peekable();
    tokens.peek().is_some() && tokens.all(|t| objects.token_fresh(&token_key(pod, t)))
}

/// The token file of a `serviceAccountToken` projection, bound to `pod`;
/// lowers `refresh` to when it must be asked for again.
async fn token_files(
    objects: &dyn Objects,
    pod: &Pod,
    t: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
    mode: Option<i32>,
    refresh: &mut Option<i64>,
) -> Result<Files, String> {
    let key = token_key(pod, t);
    let (token, at) = objects.service_account_token(&key).await?;
    *refresh = Some(refresh.map_or(at, |r| r.min(at)));
    Ok(vec![(
        t.path.clone(),
        token.into_bytes(),
        mode.unwrap_or(0o644) as u32,
    )])
}

/// The files of volume `v`, `None` for volumes not backed by the API.
async fn files(
    objects: &dyn Objects,
    pod: &Pod,
    facts: &Facts<'_>,
    v: &Volume,
    refresh: &mut Option<i64>,
) -> Option<Result<Files, String>> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(cm) = &v.config_map {
        let optional = cm.optional == Some(true);
        return Some(
            config_map_files(
                objects,
                ns,
                &cm.name,
                cm.items.as_deref(),
                cm.default_mode,
                optional,
            )
            .await,
        );
    }
    if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        let optional = s.optional == Some(true);
        return Some(
            secret_files(
                objects,
                ns,
                &name,
                s.items.as_deref(),
                s.default_mode,
                optional,
            )
            .await,
        );
    }
    if let Some(d) = &v.downward_api {
        return Some(downward_files(
            pod,
            facts,
            d.items.as_deref().unwrap_or(&[]),
            d.default_mode,
        ));
    }
    let p = v.projected.as_ref()?;
    let mut all = Files::new();
    for source in p.sources.iter().flatten() {
        // A source's items take the projection's mode unless they say otherwise.
        let part = if let Some(cm) = &source.config_map {
            config_map_files(
                objects,
                ns,
                &cm.name,
                cm.items.as_deref(),
                p.default_mode,
                cm.optional == Some(true),
            )
            .await
        } else if let Some(s) = &source.secret {
            secret_files(
                objects,
                ns,
                &s.name,
                s.items.as_deref(),
                p.default_mode,
                s.optional == Some(true),
            )
            .await
        } else if let Some(d) = &source.downward_api {
            downward_files(
                pod,
                facts,
                d.items.as_deref().unwrap_or(&[]),
                p.default_mode,
            )
        } else if let Some(t) = &source.service_account_token {
            token_files(objects, pod, t, p.default_mode, refresh).await
        } else {
            Err("unsupported projected volume source".to_string())
        };
        match part {
            Ok(files) => all.extend(files),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(all))
}

/// The host directory of the volume bound to claim `name`, or the
/// kubelet's reason it cannot be used (`failed to fetch PVC from API
/// server: ...`, `PVC NS/NAME has non-bound phase ...`).
async fn claim_path(objects: &dyn Objects, namespace: &str, name: &str) -> Result<String, String> {
    let claim = match objects.claim(namespace, name).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(format!(
                "failed to fetch PVC from API server: persistentvolumeclaims \"{name}\" not found"
            ))
        }
        Err(e) => return Err(format!("failed to fetch PVC from API server: {e}")),
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(format!(
            "can't start pod because PVC {namespace}/{name} is being deleted"
        ));
    }
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let volume = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if phase != "Bound" || volume.is_empty() {
        return Err(format!(
                "PVC {namespace}/{name} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume:?})"
            ));
    }
    let pv = objects
        .volume(&volume)
        .await
        .map_err(|e| format!("failed to fetch PV {volume} from API server: {e}"))?;
    let spec = pv.spec.unwrap_or_default();
    spec.host_path
        .map(|h| h.path)
        .or(spec.local.map(|l| l.path))
        .ok_or_else(|| {
            format!("PV {volume}: only hostPath and local volumes can be mounted on this node")
        })
}

/// Writes the pod's API-backed volumes and resolves its claims; the first
/// failure is (volume, event text).
pub async fn prepare(
    objects: &dyn Objects,
    root: &Path,
    pod: &Pod,
    facts: &Facts<'_>,
) -> Result<Prepared, Failure> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    let mut prepared = Prepared::default();
    for v in volumes {
        if let Some(claim) = &v.persistent_volume_claim {
            let path = claim_path(objects, ns, &claim.claim_name)
                .await
                .map_err(|e| {
                    (
                        v.name.clone(),
                        format!(
                            "Unable to attach or mount volumes: unmounted volumes=[{0}], unattached volumes=[], failed to process volumes=[{0}]: error processing PVC {ns}/{1}: {e}",
                            v.name, claim.claim_name
                        ),
                    )
                })?;
            prepared.claims.insert(v.name.clone(), PathBuf::from(path));
            continue;
        }
        if kind_dir(v).is_some_and(|kind| {
            object_dir(root, uid, kind, &v.name).join("..data").exists()
                && tokens_fresh(objects, pod, v)
        }) {
            continue;
        }
        let (Some(kind), Some(result)) = (
            kind_dir(v),
            files(objects, pod, facts, v, &mut prepared.refresh_tokens_at).await,
        ) else {
            continue;
        };
        let files = result.map_err(|e| set_up_failed(&v.name, &e))?;
        let dir = object_dir(root, uid, kind, &v.name);
        write_atomically(&dir, &files)
            .map_err(|e| set_up_failed(&v.name, &format!("cannot write {}: {e}", dir.display())))?;
    }
    Ok(prepared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_error::ApiError;
    use async_trait::async_trait;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

    #[derive(Debug)]
    struct Fake;

    #[async_trait]
    impl Objects for Fake {
        async fn config_map(
            &self,
            _ns: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
            Ok((name == "cm").then(|| BTreeMap::from([("k".to_string(), "v".to_string())])))
        }
        async fn secret(
            &self,
            _ns: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
            Ok((name == "s").then(|| BTreeMap::from([("pw".to_string(), b"x".to_vec())])))
        }
        async fn claim(
            &self,
            _ns: &str,
            name: &str,
        ) -> Result<Option<PersistentVolumeClaim>, ApiError> {
            Ok((name == "data").then(|| {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": "data"},
                    "spec": {"volumeName": "pv1"},
                    "status": {"phase": "Bound"}
                }))
                .unwrap()
            }))
        }
        async fn service_account_token(
            &self,
            key: &crate::pod_worker::tokens::Key,
        ) -> Result<(String, i64), String> {
            assert_eq!(key.service_account, "default");
            assert_eq!(key.pod_uid, "u1");
            Ok((
                format!("token-for-{}-{:?}", key.expiration_seconds, key.audiences),
                1000 + key.expiration_seconds,
            ))
        }
        async fn volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
            assert_eq!(name, "pv1");
            Ok(serde_json::from_value(serde_json::json!({
                "metadata": {"name": "pv1"},
                "spec": {"hostPath": {"path": "/srv/pv1"}}
            }))
            .unwrap())
        }
    }

    fn facts() -> Facts<'static> {
        Facts {
            node_name: "n1",
            host_ip: "10.0.0.1",
            pod_ip: Some("10.1.0.5"),
            node_cpu_milli: 2000,
            node_memory: 1 << 30,
        }
    }

    fn pod(volumes: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "labels": {"b": "2", "a": "say \"hi\""}, "annotations": {"x": "y"}},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"memory": "64Mi"}}}],
                     "volumes": volumes}
        }))
        .unwrap()
    }

    #[test]
    fn maps_are_written_as_upstreams_downward_api() {
        let m = BTreeMap::from([
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "say \"hi\"".to_string()),
        ]);
        assert_eq!(format_map(Some(&m)), "a=\"say \\\"hi\\\"\"\nb=\"2\"");
        assert_eq!(format_map(None), "");
    }

    #[test]
    fn only_a_volume_naming_the_pod_ip_waits_for_the_sandbox() {
        let none = pod(serde_json::json!([
            {"name": "info", "downwardAPI": {"items": [
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "host", "fieldRef": {"fieldPath": "status.hostIP"}}
            ]}},
            {"name": "cm", "configMap": {"name": "cm"}}
        ]));
        assert!(!needs_pod_ip(&none));
        let direct = pod(serde_json::json!([
            {"name": "info", "downwardAPI": {"items": [
                {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}
            ]}}
        ]));
        assert!(needs_pod_ip(&direct));
        let projected = pod(serde_json::json!([
            {"name": "all", "projected": {"sources": [
                {"configMap": {"name": "cm"}},
                {"downwardAPI": {"items": [{"path": "ips", "fieldRef": {"fieldPath": "status.podIPs"}}]}}
            ]}}
        ]));
        assert!(needs_pod_ip(&projected));
    }

    #[tokio::test]
    async fn downward_and_projected_volumes_are_written() {
        let root = tempfile::tempdir().unwrap();
        let p = pod(serde_json::json!([
            {"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}
            ]}},
            {"name": "all", "projected": {"defaultMode": 0o600, "sources": [
                {"configMap": {"name": "cm"}},
                {"secret": {"name": "s", "items": [{"key": "pw", "path": "sub/pw"}]}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
            ]}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
        ]));
        let prepared = prepare(&Fake, root.path(), &p, &facts()).await.unwrap();
        assert_eq!(prepared.claims["data"], PathBuf::from("/srv/pv1"));
        let info = object_dir(root.path(), "u1", "downward-api", "info");
        let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
        assert_eq!(read(&info, "labels"), "a=\"say \\\"hi\\\"\"\nb=\"2\"");
        assert_eq!(read(&info, "name"), "p");
        assert_eq!(read(&info, "mem"), "64");
        let all = object_dir(root.path(), "u1", "projected", "all");
        assert_eq!(read(&all, "k"), "v");
        assert_eq!(read(&all, "sub/pw"), "x");
        assert_eq!(read(&all, "ns"), "ns");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(all.join("..data/k"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[tokio::test]
    async fn token_projections_are_written_with_their_refresh_time() {
        let root = tempfile::tempdir().unwrap();
        let p = pod(serde_json::json!([
            {"name": "kube-api-access-abcde", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 600, "path": "vault"}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
            ]}}
        ]));
        let prepared = prepare(&Fake, root.path(), &p, &facts()).await.unwrap();
        let dir = object_dir(root.path(), "u1", "projected", "kube-api-access-abcde");
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("token"), "token-for-3607-[]");
        assert_eq!(read("vault"), "token-for-600-[\"vault\"]");
        assert_eq!(read("namespace"), "ns");
        // The earlier of the two tokens' refresh times.
        assert_eq!(prepared.refresh_tokens_at, Some(1600));
        // Written, with fresh tokens: left alone by the next sync.
        #[derive(Debug)]
        struct Fresh;
        #[async_trait]
        impl Objects for Fresh {
            async fn config_map(
                &self,
                _: &str,
                _: &str,
            ) -> Result<Option<BTreeMap<String, String>>, ApiError> {
                unreachable!("a volume with fresh tokens is not read again")
            }
            async fn secret(
                &self,
                _: &str,
                _: &str,
            ) -> Result<Option<BTreeMap<String, Vec<u8>>>, ApiError> {
                unreachable!()
            }
            fn token_fresh(&self, _: &crate::pod_worker::tokens::Key) -> bool {
                true
            }
        }
        let before = std::fs::read_link(dir.join("..data")).unwrap();
        prepare(&Fresh, root.path(), &p, &facts()).await.unwrap();
        assert_eq!(std::fs::read_link(dir.join("..data")).unwrap(), before);
    }

    #[tokio::test]
    async fn failures_read_as_upstreams_events() {
        let root = tempfile::tempdir().unwrap();
        let p = pod(serde_json::json!([
            {"name": "all", "projected": {"sources": [{"configMap": {"name": "missing"}}]}}
        ]));
        let (v, msg) = prepare(&Fake, root.path(), &p, &facts()).await.unwrap_err();
        assert_eq!(v, "all");
        assert_eq!(
            msg,
            "MountVolume.SetUp failed for volume \"all\" : configmap \"missing\" not found"
        );
        let p = pod(serde_json::json!([
            {"name": "d", "persistentVolumeClaim": {"claimName": "nope"}}
        ]));
        let (_, msg) = prepare(&Fake, root.path(), &p, &facts()).await.unwrap_err();
        assert_eq!(
            msg,
            "Unable to attach or mount volumes: unmounted volumes=[d], unattached volumes=[], failed to process volumes=[d]: error processing PVC ns/nope: failed to fetch PVC from API server: persistentvolumeclaims \"nope\" not found"
        );
    }
}
