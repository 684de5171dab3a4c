//! CPU time and working-set memory read from the cgroup filesystem, as
//! the kubelet's resource metrics (through cAdvisor) read them: cgroup
//! v2's `cpu.stat` (`usage_usec`) and `memory.current` less the
//! `inactive_file` of `memory.stat`; on a host still on cgroup v1 (or
//! hybrid, v2 mounted at `unified` without controllers), `cpu.stat` of the
//! unified tree or `cpuacct.usage`, and `memory.usage_in_bytes` less
//! `total_inactive_file`. The node's own figures come from the root
//! cgroup, memory from `/proc/meminfo` where the root has no usage file.
//!
//! The files are reached only through the [`Fs`] trait: [`RealFs`] reads
//! the real ones, [`FakeFs`] serves a tree given as text in tests. It
//! reads; it never writes a cgroup.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// What the reader needs of the filesystem.
pub trait Fs: Send + Sync + std::fmt::Debug {
    fn read(&self, path: &Path) -> io::Result<String>;
    /// The names of the directories in `path`.
    fn sub_dirs(&self, path: &Path) -> io::Result<Vec<String>>;
}

/// The real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl Fs for RealFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn sub_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        Ok(std::fs::read_dir(path)?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect())
    }
}

/// Files given as (path, contents); directories are the paths' parents.
#[derive(Debug, Clone, Default)]
pub struct FakeFs(pub BTreeMap<PathBuf, String>);

impl FakeFs {
    pub fn with(mut self, path: &str, contents: &str) -> Self {
        self.0.insert(PathBuf::from(path), contents.to_string());
        self
    }
}

impl Fs for FakeFs {
    fn read(&self, path: &Path) -> io::Result<String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn sub_dirs(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut dirs: Vec<String> = self
            .0
            .keys()
            .filter_map(|k| k.strip_prefix(path).ok())
            .filter(|rest| rest.components().count() > 1)
            .filter_map(|rest| rest.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        dirs.dedup();
        if dirs.is_empty() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        Ok(dirs)
    }
}

/// One cgroup's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_seconds: Option<f64>,
    pub working_set_bytes: Option<f64>,
}

/// Where the hierarchies are mounted.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The cgroup filesystem (`/sys/fs/cgroup`).
    pub root: PathBuf,
    /// `/proc/meminfo`, for the node's memory.
    pub meminfo: PathBuf,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            root: PathBuf::from("/sys/fs/cgroup"),
            meminfo: PathBuf::from("/proc/meminfo"),
        }
    }
}

/// `key value` lines: the value of `key`.
fn keyed(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(char::is_whitespace)?;
        (k == key).then(|| v.trim().parse::<f64>().ok()).flatten()
    })
}

/// `/proc/meminfo`'s value of `key` in bytes.
fn meminfo(text: &str, key: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix(':')?;
        let kib = v.trim().trim_end_matches("kB").trim().parse::<f64>().ok()?;
        Some(kib * 1024.0)
    })
}

impl Layout {
    /// The hierarchy the pods' directories are listed in and CPU read
    /// from: the v2 root, or the unified tree of a hybrid host, or v1's
    /// `cpu,cpuacct`.
    fn cpu_tree(&self, fs: &dyn Fs) -> PathBuf {
        if fs.read(&self.root.join("cgroup.controllers")).is_ok() {
            self.root.clone()
        } else if fs
            .read(&self.root.join("unified/cgroup.controllers"))
            .is_ok()
        {
            self.root.join("unified")
        } else {
            self.root.join("cpuacct")
        }
    }

    /// CPU seconds of the cgroup at `rel` (relative to the hierarchy).
    fn cpu_seconds(&self, fs: &dyn Fs, rel: &str) -> Option<f64> {
        let dir = self.cpu_tree(fs).join(rel.trim_matches('/'));
        if let Some(usec) = fs
            .read(&dir.join("cpu.stat"))
            .ok()
            .and_then(|s| keyed(&s, "usage_usec"))
        {
            return Some(usec / 1e6);
        }
        let v1 = self.root.join("cpuacct").join(rel.trim_matches('/'));
        let ns = fs.read(&v1.join("cpuacct.usage")).ok()?;
        ns.trim().parse::<f64>().ok().map(|ns| ns / 1e9)
    }

    /// Working-set bytes of the cgroup at `rel`: usage less inactive
    /// file pages, never below zero.
    fn working_set(&self, fs: &dyn Fs, rel: &str) -> Option<f64> {
        let rel = rel.trim_matches('/');
        let v2 = self.root.join(rel);
        if let Ok(current) = fs.read(&v2.join("memory.current")) {
            let usage = current.trim().parse::<f64>().ok()?;
            let inactive = fs
                .read(&v2.join("memory.stat"))
                .ok()
                .and_then(|s| keyed(&s, "inactive_file"))
                .unwrap_or(0.0);
            return Some((usage - inactive).max(0.0));
        }
        let v1 = self.root.join("memory").join(rel);
        let usage = fs
            .read(&v1.join("memory.usage_in_bytes"))
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        let inactive = fs
            .read(&v1.join("memory.stat"))
            .ok()
            .and_then(|s| keyed(&s, "total_inactive_file"))
            .unwrap_or(0.0);
        Some((usage - inactive).max(0.0))
    }

    /// The cgroup at `rel`.
    pub fn usage(&self, fs: &dyn Fs, rel: &str) -> Usage {
        Usage {
            cpu_seconds: self.cpu_seconds(fs, rel),
            working_set_bytes: self.working_set(fs, rel),
        }
    }

    /// The node: the root cgroup's CPU; memory from the root's usage
    /// file where it has one (v1), else `/proc/meminfo` (total less free
    /// less inactive file pages, as cAdvisor computes the root's).
    pub fn node(&self, fs: &dyn Fs) -> Usage {
        let working_set_bytes = self.working_set(fs, "").or_else(|| {
            let info = fs.read(&self.meminfo).ok()?;
            let used = meminfo(&info, "MemTotal")? - meminfo(&info, "MemFree")?;
            let inactive = meminfo(&info, "Inactive(file)").unwrap_or(0.0);
            Some((used - inactive).max(0.0))
        });
        Usage {
            cpu_seconds: self.cpu_seconds(fs, ""),
            working_set_bytes,
        }
    }

    /// Each pod cgroup under the node's `kubepods` (`node_root` is
    /// `skiff/NODE`): (pod UID, its path relative to the hierarchy, the
    /// names of its sub-cgroups — runc names a container's after its ID).
    pub fn pods(&self, fs: &dyn Fs, node_root: &str) -> Vec<PodCgroup> {
        let tree = self.cpu_tree(fs);
        let kubepods = format!("{}/kubepods", node_root.trim_matches('/'));
        let mut out = Vec::new();
        for qos in ["", "/burstable", "/besteffort"] {
            let parent = format!("{kubepods}{qos}");
            for dir in fs.sub_dirs(&tree.join(&parent)).unwrap_or_default() {
                let Some(uid) = dir.strip_prefix("pod") else {
                    continue;
                };
                let rel = format!("{parent}/{dir}");
                let children = fs.sub_dirs(&tree.join(&rel)).unwrap_or_default();
                out.push(PodCgroup {
                    uid: uid.to_string(),
                    rel,
                    children,
                });
            }
        }
        out
    }
}

/// A pod's cgroup as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCgroup {
    pub uid: String,
    /// Relative to the hierarchy root.
    pub rel: String,
    /// Its sub-cgroups' names (container and sandbox IDs).
    pub children: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            root: PathBuf::from("/cg"),
            meminfo: PathBuf::from("/proc/meminfo"),
        }
    }

    const POD: &str = "skiff/n1/kubepods/burstable/podu1";

    #[test]
    fn cgroup_v2_cpu_and_working_set() {
        let fs = FakeFs::default()
            .with("/cg/cgroup.controllers", "cpu memory")
            .with("/cg/cpu.stat", "usage_usec 9000000\nuser_usec 1\n")
            .with(&format!("/cg/{POD}/cpu.stat"), "usage_usec 2500000\n")
            .with(&format!("/cg/{POD}/memory.current"), "10485760\n")
            .with(
                &format!("/cg/{POD}/memory.stat"),
                "anon 1\ninactive_file 2097152\n",
            )
            .with(&format!("/cg/{POD}/abc/cpu.stat"), "usage_usec 500000\n")
            .with(
                "/proc/meminfo",
                "MemTotal: 1000 kB\nMemFree: 400 kB\nInactive(file): 100 kB\n",
            );
        let l = layout();
        assert_eq!(
            l.usage(&fs, POD),
            Usage {
                cpu_seconds: Some(2.5),
                working_set_bytes: Some(8_388_608.0)
            }
        );
        assert_eq!(
            l.node(&fs),
            Usage {
                cpu_seconds: Some(9.0),
                working_set_bytes: Some(500.0 * 1024.0)
            }
        );
        assert_eq!(
            l.pods(&fs, "skiff/n1"),
            vec![PodCgroup {
                uid: "u1".into(),
                rel: POD.into(),
                children: vec!["abc".into()],
            }]
        );
        assert_eq!(l.usage(&fs, &format!("{POD}/abc")).cpu_seconds, Some(0.5));
    }

    #[test]
    fn hybrid_hosts_read_unified_cpu_and_v1_memory() {
        let fs = FakeFs::default()
            .with("/cg/unified/cgroup.controllers", "")
            .with(
                &format!("/cg/unified/{POD}/cpu.stat"),
                "usage_usec 1000000\n",
            )
            .with(&format!("/cg/memory/{POD}/memory.usage_in_bytes"), "3000\n")
            .with(
                &format!("/cg/memory/{POD}/memory.stat"),
                "cache 5\ntotal_inactive_file 1000\n",
            );
        let l = layout();
        assert_eq!(
            l.usage(&fs, POD),
            Usage {
                cpu_seconds: Some(1.0),
                working_set_bytes: Some(2000.0)
            }
        );
        assert_eq!(l.pods(&fs, "skiff/n1").len(), 1);
    }

    #[test]
    fn v1_cpuacct_and_missing_files() {
        let fs =
            FakeFs::default().with(&format!("/cg/cpuacct/{POD}/cpuacct.usage"), "2000000000\n");
        let l = layout();
        assert_eq!(
            l.usage(&fs, POD),
            Usage {
                cpu_seconds: Some(2.0),
                working_set_bytes: None
            }
        );
        assert_eq!(l.usage(&fs, "nowhere"), Usage::default());
    }
}
