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
    if v.config_map.is_some() || v.secret.is_some() {
        let kind = if v.config_map.is_some() {
            "configmap"
        } else {
            "secret"
        };
        let dir = object_dir(root, uid, kind, &v.name);
        if !dir.join("..data").exists() {
            return Err(format!("{kind} volume is not ready"));
        }
        return Ok(dir);
    }
    if v.empty_dir.is_some() {
        let dir = pod_dir(root, uid).join("empty-dir").join(&v.name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        return Ok(dir);
    }
    Err(
        "only hostPath, emptyDir, configMap and secret volumes are supported on this node yet"
            .to_string(),
    )
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
                         "volumes": [{"name": "x", "nfs": {"server": "s", "path": "/"}}]}
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

/// The files of a ConfigMap or Secret volume: (relative path, bytes, mode).
pub type Files = Vec<(String, Vec<u8>, u32)>;

/// Writes `files` into `dir` as upstream's atomic writer does: a fresh
/// timestamped directory, `..data` pointing at it (swapped with one
/// rename, so readers see the old set or the new one, never a mix), and a
/// top-level symlink per file through `..data`. Unchanged content is left
/// alone.
pub fn write_atomically(dir: &Path, files: &Files) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    let data = dir.join("..data");
    // Unchanged: nothing to do.
    if data.exists() {
        let same = files
            .iter()
            .all(|(p, bytes, _)| std::fs::read(data.join(p)).is_ok_and(|b| &b == bytes))
            && count_files(&data) == files.len();
        if same {
            return Ok(());
        }
    }
    let stamp = format!("..{}", chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S.%f"));
    let fresh = dir.join(&stamp);
    std::fs::create_dir_all(&fresh)?;
    for (path, bytes, mode) in files {
        let file = fresh.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, bytes)?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(*mode))?;
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&stamp, &tmp)?;
    let old = std::fs::read_link(&data).ok();
    std::fs::rename(&tmp, &data)?;
    // Top-level names through ..data, for the files' first path parts.
    let mut tops: Vec<String> = files
        .iter()
        .filter_map(|(p, _, _)| p.split('/').next().map(str::to_string))
        .collect();
    tops.sort();
    tops.dedup();
    for top in &tops {
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(top), &link)?;
        }
    }
    // Names no longer in the set go, and so does the old data dir.
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !tops.contains(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if let Some(old) = old {
        if old != Path::new(&stamp) {
            let _ = std::fs::remove_dir_all(dir.join(old));
        }
    }
    Ok(())
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                count_files(&p)
            } else {
                1
            }
        })
        .sum()
}

/// Where a ConfigMap or Secret volume of pod `uid` is written.
pub fn object_dir(root: &Path, uid: &str, kind: &str, volume: &str) -> PathBuf {
    pod_dir(root, uid).join(kind).join(volume)
}

/// The files of `data` selected by `items` (all keys when none), with
/// `default_mode` unless an item says otherwise. A listed key that is
/// missing is an error unless `optional`.
pub fn select(
    data: &std::collections::BTreeMap<String, Vec<u8>>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
    default_mode: Option<i32>,
    optional: bool,
    what: &str,
) -> Result<Files, String> {
    let mode = default_mode.unwrap_or(0o644) as u32;
    match items {
        None | Some([]) => Ok(data
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), mode))
            .collect()),
        Some(items) => {
            let mut out = vec![];
            for item in items {
                match data.get(&item.key) {
                    Some(v) => out.push((
                        item.path.clone(),
                        v.clone(),
                        item.mode.map(|m| m as u32).unwrap_or(mode),
                    )),
                    None if optional => {}
                    None => {
                        return Err(format!(
                            "configmap references non-existent config key: {}",
                            item.key
                        )
                        .replace("configmap", what))
                    }
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod atomic_tests {
    use super::*;

    #[test]
    fn updates_swap_the_data_link_and_drop_old_names() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("v");
        write_atomically(
            &d,
            &vec![
                ("a".into(), b"1".to_vec(), 0o644),
                ("b".into(), b"2".to_vec(), 0o644),
            ],
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a")).unwrap(), "1");
        let first = std::fs::read_link(d.join("..data")).unwrap();
        write_atomically(&d, &vec![("a".into(), b"3".to_vec(), 0o644)]).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a")).unwrap(), "3");
        assert!(!d.join("b").exists());
        assert_ne!(std::fs::read_link(d.join("..data")).unwrap(), first);
        assert!(!d.join(first).exists(), "the old data dir is removed");
        assert_eq!(
            std::fs::read_link(d.join("a")).unwrap(),
            Path::new("..data/a")
        );
    }
}
