//! `skiff reset --data-dir DIR`: what `kubeadm reset` plus clearing
//! /etc/cni/net.d does upstream. It stops and removes every pod sandbox and
//! container the node's containerd has (CNI DEL frees their IPs and
//! iptables rules), stops that containerd and its shims, then sweeps what
//! containerd no longer knows of (pods that outlived their shims when the
//! server's whole cgroup was killed, or a containerd that cannot start):
//! it ends every process in the node's cgroup tree and removes the tree,
//! removes the pods' `cni-*` network namespaces and veths, the iptables
//! rules the CNI plugins made for the node's network, unmounts what is
//! mounted under the data dir, deletes the CNI bridge and the CNI cache
//! entries of the node's network, runc's state and the shims' sockets of
//! its containers (in /run/containerd), removes the service proxy's
//! nftables table, and removes the data dir.
//!
//! What belongs to this node is told by what the node recorded, never by
//! a name pattern alone: its cgroup root (`cgroup-root` in the data dir),
//! the network namespaces its pods' processes are in or its CNI cache
//! entries name, the veths on its bridge, the iptables rules whose comment
//! names its network. Other nodes on the same host keep theirs.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use skiff_node::pod_worker::qos::PodCgroups;
use skiff_node::runtime::containerd::Config as ContainerdConfig;
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::Runtime as _;

use crate::cli::ResetArgs;

/// How long the processes of the node's cgroup tree get to die.
const END_TIMEOUT: Duration = Duration::from_secs(10);

/// Where network namespaces are pinned (`ip netns`, containerd's `cni-*`).
const NETNS_DIR: &str = "/run/netns";

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
    // The sandboxes and containers gone, whose runtime state outside the
    // data dir may be left (a killed shim leaves its socket).
    let mut removed = BTreeSet::new();
    for dir in containerd_dirs(&data_dir) {
        // Whatever containerd cannot remove, the sweep below does.
        if let Err(e) = runtime.block_on(remove_pods(&dir, &mut removed)) {
            eprintln!("cannot remove the pods through containerd: {e:#}");
        }
        stop_containerd(&dir);
    }
    remove_runtime_state(&data_dir, &removed);
    kill_shims(&data_dir);
    if let Some(node) = runtime.block_on(leave_overlay(&data_dir)) {
        eprintln!(
            "node {node} left the pod network: the other nodes drop its routes at their next sync"
        );
    }
    let cache = CniCache::read(&args.bridge_name);
    let mut netns = cache.netns.clone();
    let mut ended = 0;
    for cgroups in node_cgroups(&data_dir) {
        let pids = cgroups.node_pids();
        let containers = cgroups.container_ids();
        netns.extend(netns_of(&pids));
        let left = cgroups.end_node(END_TIMEOUT);
        ended += pids.len().saturating_sub(left.len());
        if left.is_empty() {
            remove_runtime_state(&data_dir, &containers);
        } else {
            eprintln!(
                "processes {left:?} in the node's cgroup {} did not die in {END_TIMEOUT:?}",
                cgroups.root
            );
        }
    }
    let mut veths = cache.veths.clone();
    veths.extend(bridge_ports(&args.bridge_name));
    let veths = remove_veths(&veths);
    let netns = remove_netns(&netns);
    // Before the rules that list them go.
    let routes = remove_overlay_routes(&args.bridge_name);
    let rules = remove_iptables_rules(&args.bridge_name);
    let tables = remove_proxy_tables(&data_dir);
    unmount_under(&data_dir);
    skiff_node::network::remove_bridge(&args.bridge_name);
    // The overlay's device; its routes, ARP and forwarding entries go
    // with it.
    skiff_node::network::remove_bridge(&skiff_node::network::overlay::plan::device_for_bridge(
        &args.bridge_name,
    ));
    remove_cni_cache(&args.bridge_name);
    std::fs::remove_dir_all(&data_dir)
        .with_context(|| format!("cannot remove {}", data_dir.display()))?;
    eprintln!(
        "ended {ended} leftover pod processes; removed {netns} network namespaces, {veths} veths, {routes} overlay routes, {rules} iptables rules, {tables} nftables tables"
    );
    eprintln!(
        "reset {}: pods, containerd state, CNI state and the data dir are gone",
        data_dir.display()
    );
    Ok(())
}

/// Withdraws a joined node (one with the kubeconfig its join wrote) from
/// the pod network: its overlay annotations are removed with its own
/// credentials, so the other nodes remove their entries for it at their
/// next sync while its Node stays (as after `kubeadm reset`). Best effort
/// with a bound: the server may be gone. Returns the node's name.
async fn leave_overlay(data_dir: &Path) -> Option<String> {
    use skiff_node::network::overlay::plan::{BACKEND_DATA, BACKEND_TYPE, PUBLIC_IP};
    let path = data_dir.join(crate::agent::JOINED_KUBECONFIG);
    if !path.exists() {
        return None;
    }
    let leave = async {
        let credential = skiff_client::certificate::kubeconfig::read(&path)?
            .context("the node's kubeconfig has no client certificate")?;
        let info = skiff_client::certificate::authority::inspect(credential.cert_pem.as_bytes())?;
        let node = info
            .common_name
            .strip_prefix("system:node:")
            .context("the node's kubeconfig is not a node's")?
            .to_string();
        let kubeconfig = kube::config::Kubeconfig::read_from(&path)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
        let client = kube::Client::try_from(config)?;
        let patch = serde_json::json!({"metadata": {"annotations": {
            BACKEND_TYPE: null, BACKEND_DATA: null, PUBLIC_IP: null,
        }}});
        kube::Api::<k8s_openapi::api::core::v1::Node>::all(client)
            .patch(
                &node,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await?;
        anyhow::Ok(node)
    };
    match tokio::time::timeout(Duration::from_secs(10), leave).await {
        Ok(Ok(node)) => Some(node),
        Ok(Err(e)) => {
            eprintln!("cannot withdraw the node from the pod network: {e:#}");
            None
        }
        Err(_) => {
            eprintln!(
                "cannot withdraw the node from the pod network: the server did not answer in 10s"
            );
            None
        }
    }
}

/// Removes the service proxy's nftables table the node recorded (a
/// server's node and an agent's); how many were there.
fn remove_proxy_tables(data_dir: &Path) -> usize {
    use skiff_proxy::Nft as _;
    let mut removed = 0;
    for dir in [data_dir.join("node"), data_dir.to_path_buf()] {
        let Some(table) = skiff_node::agent::services::recorded_table(&dir) else {
            continue;
        };
        match skiff_proxy::NftCommand::default().delete_table(&table) {
            Ok(()) => removed += 1,
            Err(e) => eprintln!("cannot remove the nftables table {table}: {e}"),
        }
    }
    removed
}

/// The node's pod cgroups, from the root the agent recorded.
fn node_cgroups(data_dir: &Path) -> Vec<PodCgroups> {
    [data_dir.join("node"), data_dir.to_path_buf()]
        .iter()
        .filter_map(|dir| {
            std::fs::read_to_string(dir.join(skiff_node::agent::CGROUP_ROOT_FILE)).ok()
        })
        .map(|root| PodCgroups {
            fs: PathBuf::from("/sys/fs/cgroup"),
            root: root.trim().to_string(),
        })
        .collect()
}

/// What containerd keeps outside the data dir for the node's containers
/// (`ids`, all dead by now) and removes only when it deletes them: runc's
/// state and the shims' sockets.
fn remove_runtime_state(data_dir: &Path, ids: &BTreeSet<String>) {
    use skiff_node::runtime::containerd::{shim_socket, RUNC_STATE_DIR};
    let sockets = [
        data_dir
            .join("node")
            .join("containerd")
            .join("containerd.sock"),
        data_dir.join("containerd").join("containerd.sock"),
    ];
    for id in ids {
        let _ = std::fs::remove_dir_all(Path::new(RUNC_STATE_DIR).join(id));
        for socket in &sockets {
            let _ = std::fs::remove_file(shim_socket(socket, "k8s.io", id));
        }
    }
}

/// The pinned `cni-*` network namespaces that `pids` are in.
fn netns_of(pids: &[i32]) -> BTreeSet<PathBuf> {
    let inodes: BTreeSet<u64> = pids
        .iter()
        .filter_map(|pid| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok())
        .filter_map(|link| {
            // "net:[4026532301]"
            let link = link.to_string_lossy().into_owned();
            link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect();
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("cni-"))
        // stat of a pinned namespace is the namespace's own inode.
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| inodes.contains(&m.ino())))
        .map(|e| e.path())
        .collect()
}

/// What libcni cached for the node's network (containerd's CNI ADD
/// results, in /var/lib/cni/results, named after the network = bridge).
#[derive(Debug, Default)]
struct CniCache {
    /// The pods' network namespaces (`interfaces[].sandbox`).
    netns: BTreeSet<PathBuf>,
    /// The host ends of the pods' veth pairs.
    veths: BTreeSet<String>,
}

impl CniCache {
    fn read(network: &str) -> Self {
        let mut cache = Self::default();
        let prefix = format!("{network}-");
        let Ok(entries) = std::fs::read_dir(CNI_RESULTS) else {
            return cache;
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let Some(doc) = std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            else {
                continue;
            };
            if doc["networkName"].as_str() != Some(network) {
                continue;
            }
            let interfaces = doc["result"]["interfaces"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for i in interfaces {
                let name = i["name"].as_str().unwrap_or_default();
                match i["sandbox"].as_str() {
                    Some(netns) => {
                        cache.netns.insert(PathBuf::from(netns));
                    }
                    None if name != network && !name.is_empty() => {
                        cache.veths.insert(name.to_string());
                    }
                    None => {}
                }
            }
        }
        cache
    }
}

/// The devices plugged into the node's bridge.
fn bridge_ports(bridge: &str) -> BTreeSet<String> {
    std::fs::read_dir(Path::new("/sys/class/net").join(bridge).join("brif"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes the veths among `names` that exist (which takes their pod ends
/// with them); the count.
fn remove_veths(names: &BTreeSet<String>) -> usize {
    names
        .iter()
        .filter(|n| n.starts_with("veth") && !n.contains('/'))
        .filter(|n| Path::new("/sys/class/net").join(n).exists())
        .filter(|n| {
            std::process::Command::new("ip")
                .args(["link", "delete", n])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .count()
}

/// Unpins the `cni-*` network namespaces among `paths` (a namespace goes
/// once no process is left in it); the count.
fn remove_netns(paths: &BTreeSet<PathBuf>) -> usize {
    let mut removed = 0;
    for path in paths {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        // /var/run/netns/X and /run/netns/X are one file.
        if !name.starts_with("cni-") || !path.parent().is_some_and(|p| p.ends_with("run/netns")) {
            continue;
        }
        let path = Path::new(NETNS_DIR).join(&name);
        if !path.exists() {
            continue;
        }
        let _ = rustix::mount::unmount(&path, rustix::mount::UnmountFlags::DETACH);
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Deletes the iptables rules the CNI plugins made for `network` (bridge
/// ipMasq's POSTROUTING jump and its per-pod chain, portmap's DNAT
/// chains: each carries `name: "NETWORK" id: "…"` in its comment) and
/// the per-pod chains; the shared CNI-HOSTPORT-* chains stay. The count of
/// rules deleted.
/// The other nodes' podCIDRs in the node's masquerade chain
/// (`CNI-<bridge>` in `iptables-save -t nat`'s output): the ones its
/// overlay routes (see `skiff_node::network::CniConfig::masquerade_rules`;
/// the own podCIDR is among them, and has no route of ours).
fn overlay_cidrs(nat: &str, bridge: &str) -> Vec<String> {
    let head = format!("-A CNI-{bridge} -d ");
    let comment = format!(r#"name: \"{bridge}\" id: \"skiff-masquerade\""#);
    nat.lines()
        .filter(|l| l.contains(&comment) && l.ends_with("-j ACCEPT"))
        .filter_map(|l| l.strip_prefix(&head)?.split_whitespace().next())
        .filter(|cidr| cidr.contains('/'))
        .map(str::to_string)
        .collect()
}

/// Removes the overlay's routes to the other nodes' podCIDRs (protocol
/// `skiff_node::network::overlay::plan::ROUTE_PROTO`): host-gw's go via
/// the underlay, which stays, so they do not go with the VXLAN device. The
/// podCIDRs are read from the node's masquerade chain, so routes of
/// another cluster in this network namespace (tests) are left alone.
fn remove_overlay_routes(bridge: &str) -> usize {
    let Ok(out) = std::process::Command::new("iptables-save")
        .args(["-t", "nat"])
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return 0;
    };
    let proto = skiff_node::network::overlay::plan::ROUTE_PROTO.to_string();
    overlay_cidrs(&String::from_utf8_lossy(&out.stdout), bridge)
        .iter()
        .filter(|cidr| {
            std::process::Command::new("ip")
                .args(["route", "del", cidr, "proto", &proto])
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .count()
}

fn remove_iptables_rules(network: &str) -> usize {
    let needle = format!(r#"name: \"{network}\" id: \""#);
    let mut removed = 0;
    for table in ["nat", "filter"] {
        let Ok(out) = std::process::Command::new("iptables-save")
            .args(["-t", table])
            .stderr(std::process::Stdio::null())
            .output()
        else {
            return removed;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let rules: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("-A ") && l.contains(&needle))
            .collect();
        let mut chains = BTreeSet::new();
        for rule in &rules {
            let words: Vec<&str> = rule.split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                let chain = if *w == "-A" || *w == "-j" {
                    words.get(i + 1)
                } else {
                    None
                };
                if let Some(c) =
                    chain.filter(|c| c.starts_with("CNI-") && !c.starts_with("CNI-HOSTPORT-"))
                {
                    chains.insert(c.to_string());
                }
            }
        }
        let deletes: Vec<String> = rules.iter().map(|r| format!("-D {}", &r[3..])).collect();
        let drops: Vec<String> = chains
            .iter()
            .flat_map(|c| [format!("-F {c}"), format!("-X {c}")])
            .collect();
        for batch in [&deletes, &drops] {
            if batch.is_empty() || iptables_restore(table, batch) {
                continue;
            }
            // One bad line fails the whole batch: each on its own.
            for line in batch {
                iptables_restore(table, std::slice::from_ref(line));
            }
        }
        removed += rules.len() - remaining(table, &needle).min(rules.len());
    }
    removed
}

/// `iptables-restore --noflush` of `lines` in `table`; whether it took.
fn iptables_restore(table: &str, lines: &[String]) -> bool {
    use std::io::Write as _;
    let Ok(mut child) = std::process::Command::new("iptables-restore")
        .args(["-w", "5", "--noflush"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return false;
    };
    let input = format!("*{table}\n{}\nCOMMIT\n", lines.join("\n"));
    let written = child
        .stdin
        .take()
        .is_some_and(|mut stdin| stdin.write_all(input.as_bytes()).is_ok());
    child.wait().is_ok_and(|s| s.success()) && written
}

/// How many rules of `table` still carry `needle`.
fn remaining(table: &str, needle: &str) -> usize {
    std::process::Command::new("iptables-save")
        .args(["-t", table])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.starts_with("-A ") && l.contains(needle))
                .count()
        })
        .unwrap_or(0)
}

/// Starts the node's containerd if it is not running, then stops and
/// removes every sandbox (which takes its containers and IPs with it);
/// adds the IDs of those it removed to `removed`.
async fn remove_pods(dir: &Path, removed: &mut BTreeSet<String>) -> anyhow::Result<()> {
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
        if cri.remove_container(&c.id).await.is_ok() {
            removed.insert(c.id);
        }
    }
    for s in &sandboxes {
        if let Err(e) = cri.stop_pod_sandbox(&s.id).await {
            eprintln!("cannot stop sandbox {}: {e}", s.id);
        }
        match cri.remove_pod_sandbox(&s.id).await {
            Ok(()) => {
                removed.insert(s.id.clone());
            }
            Err(e) => eprintln!("cannot remove sandbox {}: {e}", s.id),
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

/// Unmounts every mount under `dir` (pod shm and tmpfs emptyDirs,
/// rootfs overlays in containerd's state), deepest first.
fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_path(p)))
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    for p in points {
        let _ = rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH);
    }
}

/// A mountinfo path: the kernel writes space, tab, newline and backslash
/// as octal escapes (`\040`).
fn unescape_mount_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(b) => {
                out.push(b as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where libcni caches its results (outside the data dir: containerd 1.6
/// cannot move it).
const CNI_RESULTS: &str = "/var/lib/cni/results";

/// CNI's cached results for the node's network, named after its bridge.
fn remove_cni_cache(network: &str) {
    let dir = Path::new(CNI_RESULTS);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_cidrs_come_from_the_nodes_own_masquerade_chain() {
        let nat = r#"*nat
:CNI-skb0 - [0:0]
-A POSTROUTING -s 10.9.0.0/24 -m comment --comment "name: \"skb0\" id: \"skiff-masquerade\"" -j CNI-skb0
-A CNI-skb0 -d 10.9.0.0/24 -m comment --comment "name: \"skb0\" id: \"skiff-masquerade\"" -j ACCEPT
-A CNI-skb0 -d 10.9.1.0/24 -m comment --comment "name: \"skb0\" id: \"skiff-masquerade\"" -j ACCEPT
-A CNI-skb0 ! -d 224.0.0.0/4 -m comment --comment "name: \"skb0\" id: \"skiff-masquerade\"" -j MASQUERADE
-A CNI-skb1 -d 10.8.1.0/24 -m comment --comment "name: \"skb1\" id: \"skiff-masquerade\"" -j ACCEPT
COMMIT
"#;
        assert_eq!(overlay_cidrs(nat, "skb0"), ["10.9.0.0/24", "10.9.1.0/24"]);
        assert_eq!(overlay_cidrs(nat, "skb1"), ["10.8.1.0/24"]);
        assert!(overlay_cidrs(nat, "skb2").is_empty());
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/a\\040b/c"), "/a b/c");
        assert_eq!(unescape_mount_path("/plain"), "/plain");
        assert_eq!(unescape_mount_path("/odd\\x"), "/odd\\x");
    }
}
