//! A pod's volumes on this node and the mounts a container gets from its
//! volumeMounts (subPath, subPathExpr, readOnly): hostPath (with
//! upstream's type checks), emptyDir (a directory per pod under the
//! agent's data dir, a tmpfs for medium Memory, removed with the pod), the
//! API-backed volumes [`super::volume_sources`] wrote, and claims' volume
//! directories. Other volume kinds are refused with the message the
//! worker reports.
//!
//! It owns `<volumes root>/<pod uid>/`; it never touches a hostPath's
//! contents beyond creating what DirectoryOrCreate/FileOrCreate ask for.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use super::volume_files::{object_dir, pod_dir};
use super::volume_sources::Prepared;
use crate::runtime::api;

fn host_path_ready(path: &Path, kind: &str) -> Result<(), String> {
    let meta = std::fs::metadata(path);
    let not = |what: &str| {
        Err(format!(
            "hostPath type check failed: {} is not a {what}",
            path.display()
        ))
    };
    match kind {
        "" => Ok(()),
        "DirectoryOrCreate" => {
            if meta.is_err() {
                std::fs::create_dir_all(path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            }
            Ok(())
        }
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = path.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                std::fs::File::create(path)
                    .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            }
            Ok(())
        }
        "Directory" => match meta {
            Ok(m) if m.is_dir() => Ok(()),
            _ => not("directory"),
        },
        "File" => match meta {
            Ok(m) if m.is_file() => Ok(()),
            _ => not("file"),
        },
        "Socket" | "CharDevice" | "BlockDevice" => {
            use std::os::unix::fs::FileTypeExt as _;
            let t = meta.map(|m| m.file_type()).ok();
            let ok = match kind {
                "Socket" => t.is_some_and(|t| t.is_socket()),
                "CharDevice" => t.is_some_and(|t| t.is_char_device()),
                _ => t.is_some_and(|t| t.is_block_device()),
            };
            if ok {
                Ok(())
            } else {
                not(match kind {
                    "Socket" => "socket",
                    "CharDevice" => "character device",
                    _ => "block device",
                })
            }
        }
        other => Err(format!("invalid HostPathType {other:?}")),
    }
}

/// Whether `path` is a mount point (its device differs from its parent's).
fn is_mount_point(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let (Ok(me), Some(Ok(parent))) = (
        std::fs::metadata(path),
        path.parent().map(std::fs::metadata),
    ) else {
        return false;
    };
    me.dev() != parent.dev()
}

/// The tmpfs size of a memory-backed emptyDir: its sizeLimit, else the
/// sum of the pod's memory limits when every container has one (as
/// upstream's SizeMemoryBackedVolumes), else tmpfs's default.
fn tmpfs_size(pod: &Pod, v: &Volume) -> Option<i64> {
    let limit = v
        .empty_dir
        .as_ref()
        .and_then(|e| e.size_limit.as_ref())
        .and_then(|q| skiff_api::quantity::parse_value(&q.0).ok());
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let pod_limit: Option<i64> = containers
        .iter()
        .map(|c| {
            crate::podspec::quantity_value(
                c.resources.as_ref().and_then(|r| r.limits.as_ref()),
                "memory",
            )
        })
        .sum();
    match (limit, pod_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn mount_tmpfs(dir: &Path, size: Option<i64>) -> Result<(), String> {
    if is_mount_point(dir) {
        return Ok(());
    }
    let data = std::ffi::CString::new(match size {
        Some(bytes) => format!("size={bytes}"),
        None => String::new(),
    })
    .map_err(|e| e.to_string())?;
    rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        rustix::mount::MountFlags::NODEV | rustix::mount::MountFlags::NOSUID,
        Some(data.as_c_str()),
    )
    .map_err(|e| format!("cannot mount tmpfs at {}: {e}", dir.display()))
}

/// Where volume `v` of the pod lives on the host (preparing it).
fn host_dir(
    pod: &Pod,
    v: &Volume,
    root: &Path,
    uid: &str,
    prepared: &Prepared,
) -> Result<PathBuf, String> {
    if let Some(hp) = &v.host_path {
        let path = PathBuf::from(&hp.path);
        host_path_ready(&path, hp.type_.as_deref().unwrap_or(""))?;
        return Ok(path);
    }
    if let Some(kind) = super::volume_sources::kind_dir(v) {
        let dir = object_dir(root, uid, kind, &v.name);
        if !dir.join("..data").exists() {
            return Err(format!("{kind} volume is not ready"));
        }
        return Ok(dir);
    }
    if v.persistent_volume_claim.is_some() {
        let path = prepared
            .claims
            .get(&v.name)
            .ok_or_else(|| "the claim's volume is not known yet".to_string())?;
        // A local-path volume's directory is made on first use.
        host_path_ready(path, "DirectoryOrCreate")?;
        return Ok(path.clone());
    }
    if let Some(e) = &v.empty_dir {
        let dir = pod_dir(root, uid).join("empty-dir").join(&v.name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        if e.medium.as_deref() == Some("Memory") {
            mount_tmpfs(&dir, tmpfs_size(pod, v))?;
        }
        return Ok(dir);
    }
    Err("only hostPath, emptyDir, configMap, secret, downwardAPI, projected and persistentVolumeClaim volumes are supported on this node yet".to_string())
}

/// A subPath (or expanded subPathExpr) must stay inside its volume.
fn checked_sub_path(sub: &str) -> Result<&str, String> {
    if sub.starts_with('/') {
        return Err(format!("subpath {sub:?} must be a relative path"));
    }
    if sub.split('/').any(|part| part == "..") {
        return Err(format!("subpath {sub:?} must not contain '..'"));
    }
    Ok(sub)
}

/// The CRI mounts for `c`'s volumeMounts; an error is (volume, what is
/// wrong), which upstream reports as a FailedMount event. `env` is the
/// container's resolved environment, for subPathExpr.
pub fn mounts(
    pod: &Pod,
    c: &Container,
    root: &Path,
    prepared: &Prepared,
    env: &[(String, String)],
) -> Result<Vec<api::Mount>, (String, String)> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[]);
    let mut out = vec![];
    for m in c.volume_mounts.iter().flatten() {
        let v = volumes
            .iter()
            .find(|v| v.name == m.name)
            .ok_or_else(|| (m.name.clone(), "not found in the pod's volumes".to_string()))?;
        let mut host = host_dir(pod, v, root, uid, prepared).map_err(|e| (v.name.clone(), e))?;
        let expanded = m
            .sub_path_expr
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(|expr| {
                super::env::expand(expr, &|name| {
                    env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
                })
            });
        let sub = expanded
            .as_deref()
            .or(m.sub_path.as_deref())
            .filter(|s| !s.is_empty());
        if let Some(sub) = sub {
            let sub = checked_sub_path(sub).map_err(|e| (v.name.clone(), e))?;
            host = host.join(sub);
            if !host.exists() {
                std::fs::create_dir_all(&host).map_err(|e| {
                    (
                        v.name.clone(),
                        format!("cannot create subPath {}: {e}", host.display()),
                    )
                })?;
            }
        }
        let claim_read_only = v
            .persistent_volume_claim
            .as_ref()
            .and_then(|p| p.read_only)
            .unwrap_or(false);
        out.push(api::Mount {
            container_path: m.mount_path.clone(),
            host_path: host.display().to_string(),
            readonly: m.read_only.unwrap_or(false) || claim_read_only,
            ..Default::default()
        });
    }
    Ok(out)
}

/// Removes pod `uid`'s volume dirs, unmounting its memory-backed
/// emptyDirs first.
pub fn remove(root: &Path, uid: &str) {
    let dir = pod_dir(root, uid);
    if let Ok(entries) = std::fs::read_dir(dir.join("empty-dir")) {
        for e in entries.flatten() {
            let path = e.path();
            if is_mount_point(&path) {
                if let Err(err) = rustix::mount::unmount(&path, rustix::mount::UnmountFlags::DETACH)
                {
                    tracing::warn!(dir = %path.display(), error = %err, "cannot unmount an emptyDir");
                    return;
                }
            }
        }
    }
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the pod's volumes");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_and_empty_dirs_become_mounts() {
        let root = tempfile::tempdir().unwrap();
        let host = root.path().join("made");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {
                "containers": [{"name": "c", "volumeMounts": [
                    {"name": "h", "mountPath": "/h", "readOnly": true},
                    {"name": "e", "mountPath": "/e", "subPath": "sub"}
                ]}],
                "volumes": [
                    {"name": "h", "hostPath": {"path": host.display().to_string(), "type": "DirectoryOrCreate"}},
                    {"name": "e", "emptyDir": {}}
                ]
            }
        }))
        .unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let m = mounts(&pod, c, root.path(), &Prepared::default(), &[]).unwrap();
        assert_eq!(m[0].host_path, host.display().to_string());
        assert!(m[0].readonly && host.is_dir());
        assert!(m[1].host_path.ends_with("u1/empty-dir/e/sub"));
        remove(root.path(), "u1");
        assert!(!root.path().join("u1").exists());
    }

    #[test]
    fn type_checks_use_upstreams_words() {
        let err = host_path_ready(Path::new("/nonexistent/x"), "Directory").unwrap_err();
        assert!(mounts(
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "uid": "u"},
                "spec": {"containers": [{"name": "c", "volumeMounts": [{"name": "x", "mountPath": "/x"}]}],
                         "volumes": [{"name": "x", "nfs": {"server": "s", "path": "/"}}]}
            }))
            .unwrap(),
            &serde_json::from_value(serde_json::json!({"name": "c", "volumeMounts": [{"name": "x", "mountPath": "/x"}]})).unwrap(),
            Path::new("/tmp"),
            &Prepared::default(),
            &[],
        )
        .is_err());
        assert_eq!(
            err,
            "hostPath type check failed: /nonexistent/x is not a directory"
        );
    }
}
