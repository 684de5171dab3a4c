//! A pod's volumes on this node and the mounts a container gets from its
//! volumeMounts: hostPath (with upstream's type checks) and emptyDir (a
//! directory per pod under the agent's data dir, removed with the pod).
//! Other volume kinds are refused with the message the worker reports.
//!
//! It owns `<volumes root>/<pod uid>/`; it never touches a hostPath's
//! contents beyond creating what DirectoryOrCreate/FileOrCreate ask for.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use crate::runtime::api;

/// The directory of pod `uid`'s emptyDir volumes.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join(uid)
}

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

/// Where volume `v` of the pod lives on the host (preparing it).
fn host_dir(v: &Volume, root: &Path, uid: &str) -> Result<PathBuf, String> {
    if let Some(hp) = &v.host_path {
        let path = PathBuf::from(&hp.path);
        host_path_ready(&path, hp.type_.as_deref().unwrap_or(""))?;
        return Ok(path);
    }
    if v.empty_dir.is_some() {
        let dir = pod_dir(root, uid).join("empty-dir").join(&v.name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        return Ok(dir);
    }
    Err("only hostPath and emptyDir volumes are supported on this node yet".to_string())
}

/// The CRI mounts for `c`'s volumeMounts; an error is (volume, what is
/// wrong), which upstream reports as a FailedMount event.
pub fn mounts(pod: &Pod, c: &Container, root: &Path) -> Result<Vec<api::Mount>, (String, String)> {
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
        let mut host = host_dir(v, root, uid).map_err(|e| (v.name.clone(), e))?;
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
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
        out.push(api::Mount {
            container_path: m.mount_path.clone(),
            host_path: host.display().to_string(),
            readonly: m.read_only.unwrap_or(false),
            ..Default::default()
        });
    }
    Ok(out)
}

/// Removes pod `uid`'s emptyDirs.
pub fn remove(root: &Path, uid: &str) {
    let dir = pod_dir(root, uid);
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
        let m = mounts(&pod, c, root.path()).unwrap();
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
                         "volumes": [{"name": "x", "configMap": {"name": "cm"}}]}
            }))
            .unwrap(),
            &serde_json::from_value(serde_json::json!({"name": "c", "volumeMounts": [{"name": "x", "mountPath": "/x"}]})).unwrap(),
            Path::new("/tmp"),
        )
        .is_err());
        assert_eq!(
            err,
            "hostPath type check failed: /nonexistent/x is not a directory"
        );
    }
}
