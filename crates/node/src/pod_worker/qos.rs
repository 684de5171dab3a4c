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

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::config::{quantity_milli, quantity_value};

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
];

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

    /// Removes the node's cgroups that hold nothing (at reset).
    pub fn remove_node(&self) {
        for dir in self.dirs(self.root.trim_matches('/'), V1_ALL) {
            remove_tree(&dir);
            // `skiff/`, once no node of this machine uses it.
            if let Some(parent) = dir.parent() {
                let _ = std::fs::remove_dir(parent);
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
}
