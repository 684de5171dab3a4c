//! Quality of service on this node, as the kubelet's QoS and pod cgroup
//! managers do it: each pod gets its own cgroup under the node's
//! (`kubepods/pod<uid>` for Guaranteed, `kubepods/burstable/pod<uid>`,
//! `kubepods/besteffort/pod<uid>`), holding the pod-level limits (the
//! sum of its containers' when each has one), and each container an OOM
//! score by class.
//!
//! The computing half is pure; [`PodCgroups`] owns the pod directories in
//! the cgroup filesystem (v1 per-controller hierarchies or v2 unified)
//! and never touches a cgroup it did not create.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::podspec::{quantity_milli, quantity_value};

/// The pod's QoS class: the API server's status value, computed when absent.
pub fn class(pod: &Pod) -> String {
    if let Some(q) = pod.status.as_ref().and_then(|s| s.qos_class.clone()) {
        return q;
    }
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_default();
    skiff_api::defaults::qos_class(&spec).to_string()
}

/// The OOM score adjustment of container `c` (upstream's
/// GetContainerOOMScoreAdjust): -997 for Guaranteed, 1000 for
/// BestEffort, and for Burstable 1000 less the share of the node's memory
/// it requests, kept within 2..=999.
pub fn oom_score_adj(pod: &Pod, c: &Container, memory_capacity: i64) -> i64 {
    match class(pod).as_str() {
        "Guaranteed" => -997,
        "BestEffort" => 1000,
        _ => {
            let request = quantity_value(
                c.resources.as_ref().and_then(|r| r.requests.as_ref()),
                "memory",
            )
            .unwrap_or(0);
            if memory_capacity <= 0 {
                return 999;
            }
            let adj = 1000 - (1000 * request) / memory_capacity;
            if adj < 3 {
                2
            } else if adj >= 1000 {
                999
            } else {
                adj
            }
        }
    }
}

/// The pod's cgroup, relative to the node's cgroup root.
pub fn pod_cgroup(pod: &Pod) -> String {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    match class(pod).as_str() {
        "Guaranteed" => format!("kubepods/pod{uid}"),
        "Burstable" => format!("kubepods/burstable/pod{uid}"),
        _ => format!("kubepods/besteffort/pod{uid}"),
    }
}

/// The pod-level limits written on its cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PodLimits {
    /// cpu shares from the sum of CPU requests (at least 2).
    pub cpu_shares: u64,
    /// CFS quota (µs per 100 ms period) when every container has a CPU limit.
    pub cpu_quota: Option<i64>,
    /// Bytes, when every container has a memory limit.
    pub memory: Option<i64>,
}

/// The sum of the containers' limits when each has one, else `None`.
fn sum_all(cs: &[Container], f: impl Fn(&Container) -> Option<i64>) -> Option<i64> {
    cs.iter().map(f).sum()
}

/// The pod cgroup's limits (upstream's ResourceConfigForPod, init
/// containers counted as their largest one).
pub fn pod_limits(pod: &Pod) -> PodLimits {
    let spec = pod.spec.as_ref();
    let cs = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let inits = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let limits = |c: &Container| c.resources.as_ref().and_then(|r| r.limits.clone());
    let requests = |c: &Container| c.resources.as_ref().and_then(|r| r.requests.clone());
    let cpu_request = |c: &Container| {
        quantity_milli(requests(c).as_ref(), "cpu").or(quantity_milli(limits(c).as_ref(), "cpu"))
    };
    let max_init = |f: &dyn Fn(&Container) -> Option<i64>| inits.iter().filter_map(f).max();
    let requested: i64 = cs.iter().filter_map(cpu_request).sum();
    let requested = requested.max(max_init(&cpu_request).unwrap_or(0));
    let cpu_limit = |c: &Container| quantity_milli(limits(c).as_ref(), "cpu");
    let mem_limit = |c: &Container| quantity_value(limits(c).as_ref(), "memory");
    let cpu = sum_all(cs, cpu_limit).map(|m| m.max(max_init(&cpu_limit).unwrap_or(0)));
    let memory = sum_all(cs, mem_limit).map(|m| m.max(max_init(&mem_limit).unwrap_or(0)));
    PodLimits {
        cpu_shares: ((requested * 1024 / 1000).max(2)) as u64,
        cpu_quota: cpu.map(|m| (m * 100).max(1000)),
        memory,
    }
}

/// The pod cgroups of one node, under `root` in the cgroup filesystem.
#[derive(Debug, Clone)]
pub struct PodCgroups {
    /// The cgroup filesystem (`/sys/fs/cgroup`; a temp dir in tests).
    pub fs: PathBuf,
    /// The node's cgroup, relative to the hierarchy roots (`skiff/NODE`).
    pub root: String,
}

/// The controllers whose v1 hierarchies hold a pod directory the agent
/// makes; runc makes the others (cpuset needs its parent's values).
const V1_CONTROLLERS: &[&str] = &["cpu", "memory", "pids"];
/// Every v1 hierarchy runc may have made a pod directory in.
const V1_ALL: &[&str] = &[
    "blkio",
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "net_cls",
    "net_prio",
    "perf_event",
    "pids",
    "rdma",
    "misc",
    "systemd",
    // The v2 hierarchy of a hybrid host (cgroup v1 controllers with
    // /sys/fs/cgroup/unified): runc makes every container's cgroup there too.
    "unified",
];

/// How often [`PodCgroups::end_node`] looks again while processes are
/// still leaving.
const END_POLL: Duration = Duration::from_millis(20);

impl PodCgroups {
    fn unified(&self) -> bool {
        self.fs.join("cgroup.controllers").exists()
    }

    /// The cgroup parent for the pod's sandbox and containers (CRI's
    /// `cgroup_parent`).
    pub fn parent(&self, pod: &Pod) -> String {
        format!("/{}/{}", self.root.trim_matches('/'), pod_cgroup(pod))
    }

    fn dirs(&self, relative: &str, controllers: &[&str]) -> Vec<PathBuf> {
        let rel = relative.trim_start_matches('/');
        if self.unified() {
            vec![self.fs.join(rel)]
        } else {
            controllers
                .iter()
                .map(|c| self.fs.join(c))
                .filter(|h| h.is_dir())
                .map(|h| h.join(rel))
                .collect()
        }
    }

    /// Makes the pod's cgroup and writes its limits.
    pub fn ensure(&self, pod: &Pod) -> std::io::Result<()> {
        let parent = self.parent(pod);
        let limits = pod_limits(pod);
        for dir in self.dirs(&parent, V1_CONTROLLERS) {
            std::fs::create_dir_all(&dir)?;
            let write = |file: &str, value: String| -> std::io::Result<()> {
                let path = dir.join(file);
                if path.exists() {
                    std::fs::write(path, value)?;
                }
                Ok(())
            };
            if self.unified() {
                // cpu.weight from shares, as the kubelet converts them.
                let weight = 1 + ((limits.cpu_shares.saturating_sub(2)) * 9999) / 262142;
                write("cpu.weight", weight.to_string())?;
                if let Some(q) = limits.cpu_quota {
                    write("cpu.max", format!("{q} 100000"))?;
                }
                if let Some(m) = limits.memory {
                    write("memory.max", m.to_string())?;
                }
            } else if dir.starts_with(self.fs.join("cpu")) {
                write("cpu.shares", limits.cpu_shares.to_string())?;
                if let Some(q) = limits.cpu_quota {
                    write("cpu.cfs_period_us", "100000".into())?;
                    write("cpu.cfs_quota_us", q.to_string())?;
                }
            } else if dir.starts_with(self.fs.join("memory")) {
                if let Some(m) = limits.memory {
                    write("memory.limit_in_bytes", m.to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Removes pod `uid`'s cgroup wherever it is (its class may be unknown
    /// once the pod is gone); a cgroup still holding processes stays.
    pub fn remove(&self, uid: &str) {
        for qos in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
            let rel = format!("{}/{qos}/pod{uid}", self.root.trim_matches('/'));
            for dir in self.dirs(&rel, V1_ALL) {
                remove_tree(&dir);
            }
        }
    }

    /// Whether `root` names a cgroup below the hierarchy roots that the
    /// node owns (`skiff/NODE`), never a hierarchy's root or a parent of
    /// other nodes' cgroups: [`Self::end_node`] kills what is in it.
    fn root_is_a_node(&self) -> bool {
        let root = self.root.trim_matches('/');
        root.contains('/')
            && root
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
    }

    /// The node's cgroup in every hierarchy that has one.
    fn node_dirs(&self) -> Vec<PathBuf> {
        if !self.root_is_a_node() {
            return vec![];
        }
        self.dirs(self.root.trim_matches('/'), V1_ALL)
            .into_iter()
            .filter(|d| d.is_dir())
            .collect()
    }

    /// Every process in the node's cgroup tree (the pods' processes, and
    /// whatever else was left there), from every hierarchy.
    pub fn node_pids(&self) -> Vec<i32> {
        let mut pids = vec![];
        for dir in self.node_dirs() {
            collect_pids(&dir, &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// The IDs of the containers (sandboxes too) that have a cgroup in the
    /// node's tree: runc names each container's cgroup after its ID.
    pub fn container_ids(&self) -> BTreeSet<String> {
        let mut ids = BTreeSet::new();
        for dir in self.node_dirs() {
            collect_ids(&dir, &mut ids);
        }
        ids
    }

    /// Ends every process in the node's cgroup tree, as systemd stops a
    /// unit: `cgroup.kill` where the v2 hierarchy has it, and SIGKILL to
    /// each PID in `cgroup.procs` (v1, or kernels before 5.14), again
    /// until the tree is empty or `timeout` has passed; then removes the
    /// tree bottom-up. For `skiff reset`, when the pods outlived their
    /// shims and containerd no longer knows them. Returns the processes
    /// still there at the deadline (their cgroups stay).
    pub fn end_node(&self, timeout: Duration) -> Vec<i32> {
        let deadline = Instant::now() + timeout;
        let left = loop {
            let pids = self.node_pids();
            if pids.is_empty() || Instant::now() >= deadline {
                break pids;
            }
            for dir in self.node_dirs() {
                let kill = dir.join("cgroup.kill");
                if kill.exists() {
                    let _ = std::fs::write(&kill, "1");
                }
            }
            for pid in &pids {
                if let Some(pid) = rustix::process::Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(END_POLL);
        };
        self.remove_node();
        left
    }

    /// Removes the node's cgroups that hold nothing (at reset).
    pub fn remove_node(&self) {
        if !self.root_is_a_node() {
            return;
        }
        for dir in self.dirs(self.root.trim_matches('/'), V1_ALL) {
            remove_tree(&dir);
            // `skiff/`, once no node of this machine uses it.
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// The PIDs in `dir`'s `cgroup.procs` and its descendants'.
fn collect_pids(dir: &Path, pids: &mut Vec<i32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_pids(&e.path(), pids);
            }
        }
    }
}

/// The names of `dir`'s descendants that are container IDs (64 hex digits).
fn collect_ids(dir: &Path, ids: &mut BTreeSet<String>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                    ids.insert(name);
                }
                collect_ids(&e.path(), ids);
            }
        }
    }
}

/// rmdir depth first: cgroup directories go with rmdir, not unlink.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(resources: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u1"},
            "spec": {"containers": [
                {"name": "a", "resources": resources.clone()},
                {"name": "b", "resources": resources}
            ]}
        }))
        .unwrap()
    }

    #[test]
    fn classes_cgroups_and_oom_scores_as_upstream() {
        let g = pod(serde_json::json!({"limits": {"cpu": "500m", "memory": "64Mi"}}));
        let b = pod(serde_json::json!({"requests": {"memory": "256Mi"}}));
        let e = pod(serde_json::json!({}));
        assert_eq!(pod_cgroup(&g), "kubepods/podu1");
        assert_eq!(pod_cgroup(&b), "kubepods/burstable/podu1");
        assert_eq!(pod_cgroup(&e), "kubepods/besteffort/podu1");
        let gib = 1 << 30;
        let c = |p: &Pod| p.spec.as_ref().unwrap().containers[0].clone();
        assert_eq!(oom_score_adj(&g, &c(&g), gib), -997);
        assert_eq!(oom_score_adj(&e, &c(&e), gib), 1000);
        // A quarter of the node's memory: 1000 - 250.
        assert_eq!(oom_score_adj(&b, &c(&b), gib), 750);
        let big = pod(serde_json::json!({"requests": {"memory": "2Gi"}}));
        assert_eq!(oom_score_adj(&big, &c(&big), gib), 2);
    }

    #[test]
    fn pod_limits_sum_the_containers() {
        let g = pod(serde_json::json!({"limits": {"cpu": "500m", "memory": "64Mi"}}));
        assert_eq!(
            pod_limits(&g),
            PodLimits {
                cpu_shares: 1024,
                cpu_quota: Some(100_000),
                memory: Some(128 << 20)
            }
        );
        let b = pod(serde_json::json!({"requests": {"cpu": "100m"}}));
        assert_eq!(
            pod_limits(&b),
            PodLimits {
                cpu_shares: 204,
                cpu_quota: None,
                memory: None
            }
        );
    }

    #[test]
    fn v1_pod_cgroups_are_made_limited_and_removed() {
        let fs = tempfile::tempdir().unwrap();
        for h in ["cpu", "memory", "pids", "cpuset"] {
            std::fs::create_dir_all(fs.path().join(h)).unwrap();
        }
        let cg = PodCgroups {
            fs: fs.path().to_path_buf(),
            root: "skiff/n1".into(),
        };
        let g = pod(serde_json::json!({"limits": {"cpu": "500m", "memory": "64Mi"}}));
        assert_eq!(cg.parent(&g), "/skiff/n1/kubepods/podu1");
        // The kernel makes the control files; the fake has to.
        let mem = fs.path().join("memory/skiff/n1/kubepods/podu1");
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::write(mem.join("memory.limit_in_bytes"), "").unwrap();
        cg.ensure(&g).unwrap();
        assert_eq!(
            std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap(),
            (128 << 20).to_string()
        );
        assert!(fs.path().join("cpu/skiff/n1/kubepods/podu1").is_dir());
        assert!(
            !fs.path().join("cpuset/skiff/n1").exists(),
            "runc makes cpuset's"
        );
        std::fs::remove_file(mem.join("memory.limit_in_bytes")).unwrap();
        cg.remove("u1");
        assert!(!mem.exists());
        cg.remove_node();
        assert!(!fs.path().join("cpu/skiff").join("n1").exists());
    }

    #[test]
    fn only_a_node_cgroup_tree_is_swept() {
        let fs = tempfile::tempdir().unwrap();
        let ctr = fs.path().join("pids/skiff/n1/kubepods/podu1/c1");
        std::fs::create_dir_all(&ctr).unwrap();
        std::fs::write(ctr.join("cgroup.procs"), "34\n12\n").unwrap();
        std::fs::write(fs.path().join("pids/skiff/n1/cgroup.procs"), "").unwrap();
        std::fs::write(fs.path().join("pids/cgroup.procs"), "1\n").unwrap();
        let cg = |root: &str| PodCgroups {
            fs: fs.path().to_path_buf(),
            root: root.into(),
        };
        for root in ["skiff/n1", "/skiff/n1/"] {
            assert_eq!(cg(root).node_pids(), [12, 34], "{root}");
        }
        let id = "ab".repeat(32);
        std::fs::create_dir_all(fs.path().join("memory/skiff/n1/kubepods/podu1").join(&id))
            .unwrap();
        assert_eq!(
            cg("skiff/n1")
                .container_ids()
                .into_iter()
                .collect::<Vec<_>>(),
            [id]
        );
        // A hierarchy's root, or a parent of other nodes' trees, is never
        // the node's.
        for root in ["", "/", "skiff", "skiff/../skiff", "skiff//n1", "./skiff"] {
            assert!(cg(root).node_pids().is_empty(), "{root}");
        }
    }
}
