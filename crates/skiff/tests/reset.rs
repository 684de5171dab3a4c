//! End to end, as root, on real containerd, runc and CNI: nothing outlives
//! `skiff reset`. The server runs as systemd runs a unit (its own process
//! group and cgroup); it is stopped as `systemctl stop` does with the
//! default `KillMode=control-group` (SIGKILL to all of the unit's cgroup):
//! the server, its containerd and the shims die, the pods' processes (in
//! their own cgroups under `skiff/NODE`) outlive them. `skiff reset` must
//! then leave no process, cgroup, network namespace, veth, mount, runc
//! state or shim socket of the node behind.

mod cluster;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cluster::{wait_for, Cluster, Options, SKIFF};
use skiff_node::runtime::containerd::{shim_socket, RUNC_STATE_DIR};

/// A cgroup of the v2 hierarchy (the unified one of a hybrid host) that
/// stands for a systemd unit's.
struct UnitCgroup(PathBuf);

impl UnitCgroup {
    fn new(name: &str) -> Self {
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = info
            .lines()
            .find(|l| {
                l.split(" - ")
                    .nth(1)
                    .is_some_and(|t| t.starts_with("cgroup2 "))
            })
            .and_then(|l| l.split(' ').nth(4))
            .expect("a cgroup2 mount");
        let dir = Path::new(mount).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.0.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILL to everything in it (systemd's control-group kill), until
    /// it is empty.
    fn kill_all(&self) {
        wait_for(
            "the unit's cgroup to be empty",
            Duration::from_secs(20),
            || {
                let procs = self.procs();
                if procs.is_empty() {
                    return Some(());
                }
                if std::fs::write(self.0.join("cgroup.kill"), "1").is_err() {
                    // Kernels before 5.14 have no cgroup.kill.
                    for pid in procs {
                        signal_kill(&pid.to_string());
                    }
                }
                None
            },
        );
    }
}

impl Drop for UnitCgroup {
    fn drop(&mut self) {
        if !self.procs().is_empty() {
            let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
            for pid in self.procs() {
                signal_kill(&pid.to_string());
            }
        }
        let _ = wait_until(Duration::from_secs(10), || self.procs().is_empty());
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn signal_kill(target: &str) {
    let _ = Command::new("kill").args(["-KILL", "--", target]).status();
}

/// Polls `f` every 100 ms until it holds or `timeout` passes; whether it held.
fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `pid` is a live process (a zombie is not: it holds nothing and
/// waits for PID 1 to reap it).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
        })
        .unwrap_or(false)
}

/// Every cgroup hierarchy's root (the v1 controllers', the unified one).
fn hierarchies() -> Vec<PathBuf> {
    let fs = Path::new("/sys/fs/cgroup");
    if fs.join("cgroup.controllers").exists() {
        return vec![fs.to_path_buf()];
    }
    std::fs::read_dir(fs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists())
        .collect()
}

/// The node's cgroup in every hierarchy that has one.
fn node_cgroups(node: &str) -> Vec<PathBuf> {
    hierarchies()
        .into_iter()
        .map(|h| h.join("skiff").join(node))
        .filter(|d| d.is_dir())
        .collect()
}

fn collect_pids(dir: &Path, pids: &mut BTreeSet<i32>) {
    if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_pids(&e.path(), pids);
        }
    }
}

/// The pinned network namespaces (/run/netns) that `pids` are in.
fn netns_of(pids: &BTreeSet<i32>) -> BTreeSet<PathBuf> {
    let inodes: BTreeSet<String> = pids
        .iter()
        .filter_map(|p| std::fs::read_link(format!("/proc/{p}/ns/net")).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .collect();
    std::fs::read_dir("/run/netns")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::metadata(e.path())
                .is_ok_and(|m| inodes.contains(&format!("net:[{}]", m.ino())))
        })
        .map(|e| e.path())
        .collect()
}

/// The mount points under `dir`.
fn mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| Path::new(p).starts_with(dir))
        .map(str::to_string)
        .collect()
}

/// The iptables rules the CNI plugins made for `network` (their comment
/// names it).
fn cni_rules(network: &str) -> Vec<String> {
    let needle = format!(r#"name: \"{network}\" id: \""#);
    let mut rules = vec![];
    for table in ["nat", "filter"] {
        let out = Command::new("iptables-save")
            .args(["-t", table])
            .output()
            .unwrap();
        rules.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.contains(&needle))
                .map(str::to_string),
        );
    }
    rules
}

/// The shims of the node's containerd.
fn shims(data_dir: &Path) -> Vec<i32> {
    let needle = data_dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (text.contains("containerd-shim") && text.contains(&needle)).then_some(pid)
        })
        .collect()
}

/// The names of `dir`'s descendants that are container IDs: runc names a
/// container's cgroup after it.
fn collect_ids(dir: &Path, ids: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                ids.insert(name);
            }
            collect_ids(&e.path(), ids);
        }
    }
}

/// What containerd keeps outside the data dir for containers `ids` of
/// the node whose containerd listens on `socket`: runc's state dirs and
/// the shims' sockets.
fn runtime_state(socket: &Path, ids: &BTreeSet<String>) -> Vec<PathBuf> {
    ids.iter()
        .flat_map(|id| {
            [
                Path::new(RUNC_STATE_DIR).join(id),
                shim_socket(socket, "k8s.io", id),
            ]
        })
        .filter(|p| p.exists())
        .collect()
}

/// What the node's pods had while they ran.
#[derive(Debug)]
struct Pods {
    pids: BTreeSet<i32>,
    /// runc's state and the shims' sockets, in /run/containerd.
    runtime_state: Vec<PathBuf>,
    cgroups: Vec<PathBuf>,
    netns: BTreeSet<PathBuf>,
    veths: BTreeSet<String>,
}

/// Starts a server as a unit, runs a busybox pod to Running, records its
/// processes, cgroups, network namespaces and veths, then kills the unit
/// (the server's process group, then all of its cgroup) and checks the
/// pods outlived it.
fn run_a_pod_and_kill_the_unit(unit: &UnitCgroup) -> (Cluster, Pods) {
    let mut c = Cluster::start(Options {
        cgroup: Some(unit.0.clone()),
        ..Options::default()
    });
    // A memory emptyDir: a tmpfs under the data dir.
    c.apply(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: survivor
spec:
  containers:
  - name: survivor
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    volumeMounts:
    - name: scratch
      mountPath: /scratch
  volumes:
  - name: scratch
    emptyDir:
      medium: Memory
"#,
    );
    c.wait("pod/survivor", "condition=Ready", 60);
    assert_eq!(c.pod_field("survivor", "{.status.phase}"), "Running");

    let cgroups = node_cgroups(&c.node());
    assert!(!cgroups.is_empty(), "the node has no cgroup");
    let mut pids = BTreeSet::new();
    for dir in &cgroups {
        collect_pids(dir, &mut pids);
    }
    assert!(pids.len() >= 2, "pause and sleep run: {pids:?}");
    let mut ids = BTreeSet::new();
    for dir in &cgroups {
        collect_ids(dir, &mut ids);
    }
    let runtime_state = runtime_state(&c.data_dir.join("node/containerd/containerd.sock"), &ids);
    // The sandbox's and the container's runc state, the sandbox's shim.
    assert_eq!(
        runtime_state.len(),
        3,
        "runc state and shim socket of {ids:?}: {runtime_state:?}"
    );
    let netns = netns_of(&pids);
    assert!(!netns.is_empty(), "the pod's network namespace is pinned");
    let veths: BTreeSet<String> = std::fs::read_dir(format!("/sys/class/net/{}/brif", c.bridge))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!veths.is_empty(), "the pod's veth is on the bridge");
    let mounts = mounts_under(&c.data_dir);
    assert!(
        mounts.iter().any(|m| m.ends_with("/scratch")),
        "the pod's tmpfs emptyDir is mounted under the data dir: {mounts:?}"
    );
    assert!(
        !cni_rules(&c.bridge).is_empty(),
        "the bridge plugin masquerades the pod"
    );
    assert!(!shims(&c.data_dir).is_empty(), "the pod has a shim");

    // As systemctl stop with KillMode=control-group: the main process's
    // group first, then everything left in the unit's cgroup.
    let mut server = c.child.take().expect("the server");
    signal_kill(&format!("-{}", server.id()));
    server.wait().unwrap();
    unit.kill_all();

    assert!(
        shims(&c.data_dir).is_empty(),
        "the shims died with the unit"
    );
    let dead: Vec<&i32> = pids.iter().filter(|p| !alive(**p)).collect();
    assert!(
        dead.is_empty(),
        "the pods' processes outlive the unit (in their own cgroups); gone: {dead:?}"
    );
    (
        c,
        Pods {
            pids,
            runtime_state,
            cgroups,
            netns,
            veths,
        },
    )
}

/// `skiff reset` of the cluster's data dir; its stderr.
fn reset(c: &Cluster) -> String {
    let out = Command::new(SKIFF)
        .arg("reset")
        .arg("--data-dir")
        .arg(&c.data_dir)
        .args(["--bridge-name", &c.bridge])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "skiff reset failed: {stderr}");
    stderr
}

fn assert_nothing_left(c: &Cluster, pods: &Pods, said: &str) {
    let alive: Vec<&i32> = pods.pids.iter().filter(|p| alive(**p)).collect();
    assert!(
        alive.is_empty(),
        "pod processes {alive:?} outlived reset; it said: {said}"
    );
    let state: Vec<&PathBuf> = pods.runtime_state.iter().filter(|p| p.exists()).collect();
    assert!(
        state.is_empty(),
        "containerd's {state:?} outlived reset; it said: {said}"
    );
    let cgroups: Vec<&PathBuf> = pods.cgroups.iter().filter(|d| d.exists()).collect();
    assert!(
        cgroups.is_empty(),
        "cgroups {cgroups:?} outlived reset; it said: {said}"
    );
    let netns: Vec<&PathBuf> = pods.netns.iter().filter(|n| n.exists()).collect();
    assert!(
        netns.is_empty(),
        "network namespaces {netns:?} outlived reset; it said: {said}"
    );
    let veths: Vec<&String> = pods
        .veths
        .iter()
        .filter(|v| Path::new("/sys/class/net").join(v).exists())
        .collect();
    assert!(
        veths.is_empty(),
        "veths {veths:?} outlived reset; it said: {said}"
    );
    assert!(
        !Path::new("/sys/class/net").join(&c.bridge).exists(),
        "the bridge outlived reset"
    );
    let mounts = mounts_under(&c.data_dir);
    assert!(
        mounts.is_empty(),
        "mounts {mounts:?} outlived reset; it said: {said}"
    );
    let rules = cni_rules(&c.bridge);
    assert!(
        rules.is_empty(),
        "iptables rules {rules:?} outlived reset; it said: {said}"
    );
    assert!(!c.data_dir.exists(), "the data dir outlived reset");
}

/// The unit killed, `skiff reset` (whose containerd cleans up what it
/// still knows) leaves nothing of the pods.
#[test]
fn nothing_outlives_reset_after_the_unit_is_killed() {
    let unit = UnitCgroup::new(&format!("skiff-test-reset-{}-a", std::process::id()));
    let (c, pods) = run_a_pod_and_kill_the_unit(&unit);
    let said = reset(&c);
    eprintln!("skiff reset said:\n{said}");
    assert_nothing_left(&c, &pods, &said);
}

/// The unit killed and containerd unable to start again (its config is
/// broken here; a removed package or a lost state does the same): reset
/// finds the pods by what the node recorded (its cgroup root, the CNI
/// cache, its bridge) and leaves nothing of them.
#[test]
fn nothing_outlives_reset_when_containerd_cannot_help() {
    let unit = UnitCgroup::new(&format!("skiff-test-reset-{}-b", std::process::id()));
    let (c, pods) = run_a_pod_and_kill_the_unit(&unit);
    std::fs::write(
        c.data_dir.join("node/containerd/config.toml"),
        "this is not TOML",
    )
    .unwrap();
    let said = reset(&c);
    eprintln!("skiff reset said:\n{said}");
    assert!(
        said.contains(&format!("ended {} leftover pod processes", pods.pids.len())),
        "reset ended the pause and sleep processes itself: {said}"
    );
    assert_nothing_left(&c, &pods, &said);
}
