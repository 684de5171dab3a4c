//! The on-disk layout of a pod's volumes (`<volumes root>/<pod uid>/`,
//! and under it a directory per API-backed volume) and upstream's atomic
//! writer, which swaps a ConfigMap's or Secret's files in with one
//! rename, plus the selection of the files an object's `items` ask for.
//!
//! It writes only the directories it is given; what goes in them is
//! [`super::volume_sources`]'s, and mounting is [`super::volumes`]'s.

use std::path::{Path, PathBuf};

/// The directory of pod `uid`'s emptyDir volumes.
pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join(uid)
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
