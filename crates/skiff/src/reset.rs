//! `skiff reset --data-dir DIR`: what `kubeadm reset` plus clearing
//! /etc/cni/net.d does upstream. It stops and removes every pod sandbox and
//! container the node's containerd has (CNI DEL frees their IPs and
//! iptables rules), stops that containerd and its shims, removes the
//! node's pod cgroups, unmounts what is
//! mounted under the data dir, deletes the CNI bridge and the CNI cache
//! entries of the node's network, and removes the data dir.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use skiff_node::runtime::containerd::Config as ContainerdConfig;
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::Runtime as _;

use crate::cli::ResetArgs;

/// Where a node's containerd lives for a server data dir and for an agent's.
fn containerd_dirs(data_dir: &Path) -> Vec<PathBuf> {
    [
        data_dir.join("node").join("containerd"),
        data_dir.join("containerd"),
    ]
    .into_iter()
    .filter(|d| d.join("config.toml").exists())
    .collect()
}

pub fn run(args: ResetArgs) -> anyhow::Result<()> {
    let data_dir = std::path::absolute(&args.data_dir)?;
    if !data_dir.exists() {
        eprintln!("{} does not exist; nothing to reset", data_dir.display());
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for dir in containerd_dirs(&data_dir) {
        runtime.block_on(remove_pods(&dir))?;
        stop_containerd(&dir);
    }
    kill_shims(&data_dir);
    remove_cgroups(&data_dir);
    unmount_under(&data_dir);
    skiff_node::network::remove_bridge(&args.bridge_name);
    remove_cni_cache(&args.bridge_name);
    std::fs::remove_dir_all(&data_dir)
        .with_context(|| format!("cannot remove {}", data_dir.display()))?;
    eprintln!(
        "reset {}: pods, containerd state, CNI state and the data dir are gone",
        data_dir.display()
    );
    Ok(())
}

/// Removes the node's pod cgroups (their processes are gone by now),
/// from the root the agent recorded.
fn remove_cgroups(data_dir: &Path) {
    for dir in [data_dir.join("node"), data_dir.to_path_buf()] {
        let Ok(root) = std::fs::read_to_string(dir.join(skiff_node::agent::CGROUP_ROOT_FILE))
        else {
            continue;
        };
        skiff_node::pod_worker::qos::PodCgroups {
            fs: PathBuf::from("/sys/fs/cgroup"),
            root: root.trim().to_string(),
        }
        .remove_node();
    }
}

/// Starts the node's containerd if it is not running, then stops and
/// removes every sandbox (which takes its containers and IPs with it).
async fn remove_pods(dir: &Path) -> anyhow::Result<()> {
    let socket = dir.join("containerd.sock");
    let mut cri = CriRuntime::new(socket.clone())?;
    let mut started = None;
    if cri.version().await.is_err() {
        let mut child = tokio::process::Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("cannot start containerd to remove the pods")?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            cri = CriRuntime::new(socket.clone())?;
            if cri.version().await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() > deadline || child.try_wait()?.is_some() {
                anyhow::bail!("containerd in {} did not start; see its log", dir.display());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started = Some(child);
    }
    let sandboxes = cri.list_pod_sandboxes().await?;
    for c in cri.list_containers().await? {
        let _ = cri.stop_container(&c.id, 0).await;
        let _ = cri.remove_container(&c.id).await;
    }
    for s in &sandboxes {
        if let Err(e) = cri.stop_pod_sandbox(&s.id).await {
            eprintln!("cannot stop sandbox {}: {e}", s.id);
        }
        if let Err(e) = cri.remove_pod_sandbox(&s.id).await {
            eprintln!("cannot remove sandbox {}: {e}", s.id);
        }
    }
    eprintln!("removed {} pod sandboxes", sandboxes.len());
    if let Some(mut child) = started {
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    Ok(())
}

fn signal(pid: i32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

fn stop_containerd(dir: &Path) {
    let config = ContainerdConfig {
        dir: dir.to_path_buf(),
        ..ContainerdConfig::new(dir, "")
    };
    if let Ok(pid) = std::fs::read_to_string(config.pid_path()) {
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("containerd") {
                signal(pid, rustix::process::Signal::TERM);
                for _ in 0..100 {
                    if !Path::new(&format!("/proc/{pid}")).exists() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                signal(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Shims of this node (their command line names its containerd socket).
fn kill_shims(data_dir: &Path) {
    let needle = data_dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains("containerd-shim") && text.contains(&needle) {
            signal(pid, rustix::process::Signal::KILL);
        }
    }
}

/// Unmounts every mount under `dir`, deepest first.
fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = rustix::mount::unmount(p, rustix::mount::UnmountFlags::DETACH);
    }
}

/// CNI's cached results for the node's network, named after its bridge
/// (libcni keeps them outside the data dir, in /var/lib/cni/results).
fn remove_cni_cache(network: &str) {
    let dir = Path::new("/var/lib/cni/results");
    let prefix = format!("{network}-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
