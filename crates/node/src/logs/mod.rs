//! Container logs as the CRI runtime writes them: where they live
//! (`<log root>/<namespace>_<pod>_<uid>/<container>/<restart>.log`, the
//! kubelet's layout), what a line is ([`format`]: parsing, joining
//! partial lines, the PodLogOptions selection — pure), and reading a file
//! out as a byte stream, following it as it grows ([`stream`]).
//!
//! It owns reading log files. It must not write, rotate or delete them
//! (the runtime writes, the pod worker decides where), and it knows
//! nothing about HTTP ([`crate::server`] serves what it reads) or about
//! pods beyond their names in paths.

pub mod format;
pub mod stream;

use std::path::{Path, PathBuf};

pub use format::{Entry, LogOptions, Stream};
pub use stream::{open, Follow, LogFile};

/// Why a container's log files could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list log directory {path}: {source}")]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A pod's log directory, which CRI's `PodSandboxConfig.log_directory`
/// names: `root/<namespace>_<name>_<uid>`.
pub fn pod_log_dir(root: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root.join(format!("{namespace}_{name}_{uid}"))
}

/// A container's log file relative to its pod's log directory (CRI's
/// `ContainerConfig.log_path`): `<container>/<restart>.log`.
pub fn container_log_file(container: &str, restart: u32) -> PathBuf {
    PathBuf::from(container).join(format!("{restart}.log"))
}

/// The restart numbers that have a `<restart>.log` under
/// `pod_dir/<container>/`, in ascending order; none when the directory
/// does not exist.
pub fn restarts(pod_dir: &Path, container: &str) -> Result<Vec<u32>> {
    let dir = pod_dir.join(container);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(Error::List { path: dir, source }),
    };
    let mut out: Vec<u32> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|entry| restart_of(&entry.file_name().to_string_lossy()))
        .collect();
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `7` for `7.log`; none for anything else (rotated `7.log.20240101-…`).
pub fn restart_of(file_name: &str) -> Option<u32> {
    let n = file_name.strip_suffix(".log")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The current file (highest restart) and the previous one (the one
/// before it) among `restarts` (ascending).
pub fn current_and_previous(restarts: &[u32]) -> (Option<u32>, Option<u32>) {
    let mut it = restarts.iter().rev().copied();
    (it.next(), it.next())
}

/// The log directory of pod `namespace/name` found by scanning `root`
/// for `<namespace>_<name>_<uid>` (the newest when a recreated pod left
/// an older one), for when nobody can say the pod's UID.
pub fn find_pod_dir(root: &Path, namespace: &str, name: &str) -> Option<PathBuf> {
    let prefix = format!("{namespace}_{name}_");
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            // Names and namespaces are DNS names and UIDs hex with dashes:
            // none has an underscore, so the rest is the UID alone.
            file_name
                .strip_prefix(&prefix)
                .is_some_and(|uid| !uid.is_empty() && !uid.contains('_'))
                && entry.file_type().is_ok_and(|t| t.is_dir())
        })
        .max_by_key(|entry| {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
        })
        .map(|entry| entry.path())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_kubelet_layout() {
        assert_eq!(
            pod_log_dir(Path::new("/var/log/pods"), "default", "web", "1-2-3"),
            PathBuf::from("/var/log/pods/default_web_1-2-3")
        );
        assert_eq!(container_log_file("app", 2), PathBuf::from("app/2.log"));
        assert_eq!(restart_of("12.log"), Some(12));
        assert_eq!(restart_of("1.log.20240101-000000"), None);
        assert_eq!(restart_of(".log"), None);
        assert_eq!(restart_of("+1.log"), None);
        assert_eq!(current_and_previous(&[0, 1, 3]), (Some(3), Some(1)));
        assert_eq!(current_and_previous(&[0]), (Some(0), None));
        assert_eq!(current_and_previous(&[]), (None, None));
    }

    #[test]
    fn lists_restarts_and_finds_pod_dirs() {
        let root = tempfile::tempdir().unwrap();
        let pod = pod_log_dir(root.path(), "ns", "web", "u1");
        std::fs::create_dir_all(pod.join("c")).unwrap();
        for f in ["0.log", "10.log", "2.log", "2.log.20240101-000000", "x.log"] {
            std::fs::write(pod.join("c").join(f), "").unwrap();
        }
        assert_eq!(restarts(&pod, "c").unwrap(), vec![0, 2, 10]);
        assert_eq!(restarts(&pod, "missing").unwrap(), Vec::<u32>::new());
        std::fs::create_dir_all(root.path().join("ns_web-2_u2")).unwrap();
        std::fs::create_dir_all(root.path().join("ns_web_a_b")).unwrap();
        assert_eq!(find_pod_dir(root.path(), "ns", "web"), Some(pod));
        assert_eq!(find_pod_dir(root.path(), "ns", "db"), None);
    }
}
