//! `skiff-bench node`: what the node agent adds on top of containerd, in
//! one run on one machine.
//!
//! - Two raw CRI floors, each a private containerd started with
//!   skiff-node's own config ([`ContainerdConfig`]), its own CNI bridge
//!   and /24, and the built-in pause and busybox imported as the agent
//!   imports them ([`floor`]): the minimal floor (bare sandbox and
//!   container configs on a plain bridge + host-local conflist) and the
//!   own-config floor (the very configs the agent sends for the same Pod
//!   object, on the conflist it writes). Their pods are started with
//!   RunPodSandbox, CreateContainer and StartContainer and torn down with
//!   StopContainer(0), StopPodSandbox, RemoveContainer and
//!   RemovePodSandbox.
//! - `skiff server` (API server, scheduler, agent, its own containerd):
//!   idle RSS, then the same pods created through the API with a kube
//!   client, timed from the create request to Running and to Ready as seen
//!   by a watch; deleted with grace 0 and timed to the object's
//!   disappearance (watch) and to its sandbox's removal from containerd
//!   (CRI list on the server's socket); RSS with the burst running.
//! - `podman kube play` of the same pod, if podman is installed.
//!
//! The containerds run side by side: one-at-a-time pods take turns between
//! the two floors and skiff (the machines are shared, and interleaving
//! keeps drifts in background load out of the ratios); each burst (own
//! floor and skiff only) runs with the other sides idle and podless.
//! `--floor-variants` runs the floors' bisect instead: each setting the
//! agent adds, alone, beside the minimal floor ([`floor::run`]). containerd's own log gives each CRI call's begin
//! and end, so the time between the calls is what the agent (and the API
//! server, scheduler and watch) adds.
//!
//! Everything it starts is stopped by PID, and `skiff reset` clears both
//! data dirs, bridges and CNI state, also on errors and Ctrl-C. Every wait
//! is bounded. It prints figures and never asserts them.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Client;
use serde_json::{json, Value};
use skiff_node::images::{builtin, import};
use skiff_node::observed;
use skiff_node::pod_worker::sync::observe;
use skiff_node::runtime::containerd::{Config as ContainerdConfig, Containerd};
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::Runtime as _;

use crate::stats::{percentile, print_grid};

mod counts;
mod floor;
use floor::{Chain, Variant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// Pods started one at a time (and deleted one at a time).
    #[arg(long, default_value_t = 20)]
    pods: usize,
    /// Pods created at once.
    #[arg(long, default_value_t = 50)]
    burst: usize,
    /// SKIFF_LOG of the server.
    #[arg(long, default_value = "info,kube=warn,tower=warn,hyper=warn,h2=warn")]
    log: String,
    /// Copy the server's log and both containerd logs into this directory
    /// before cleaning up.
    #[arg(long)]
    keep_logs: Option<PathBuf>,
    /// Skip podman even when it is installed.
    #[arg(long)]
    no_podman: bool,
    /// Instead of the comparison: the floor's bisect. Each variant's pods
    /// (all, or the keys given) are started and removed one at a time,
    /// `--pods` rounds, variants interleaved; prints each one's
    /// RunPodSandbox/CreateContainer/StartContainer medians from
    /// containerd's log beside the minimal floor's.
    #[arg(long, num_args = 0.., value_delimiter = ',', value_name = "KEY")]
    floor_variants: Option<Vec<String>>,
    /// Pods started and deleted alone at the end, each counted: the
    /// agent's CRI calls by method and the API's pod and Event writes per
    /// start and per deletion (medians; deterministic, unlike the times).
    /// 0: not counted.
    #[arg(long, default_value_t = 5)]
    counts: usize,
    /// Only the counts (`--counts` pods on `skiff server`): no floors, no
    /// timings, no podman. Quick, and meaningful on a loaded machine or
    /// with a debug build.
    #[arg(long)]
    counts_only: bool,
}

const IMAGE: &str = "docker.io/library/busybox:latest";
/// The API namespace of the benchmark pods, and the CRI metadata namespace
/// of the floor's.
const NS: &str = "bench";
const FLOOR_NS: &str = "floor";
pub(crate) const NODE: &str = "skiff-bench";
/// Bounds of the waits.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const POD_TIMEOUT: Duration = Duration::from_secs(90);
const BURST_TIMEOUT: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------- helpers

/// A moment, both monotonic and wall-clock (to line up with containerd's
/// log).
#[derive(Debug, Clone, Copy)]
struct Stamp {
    at: Instant,
    wall: i128,
}

impl Stamp {
    fn now() -> Self {
        Self {
            at: Instant::now(),
            wall: Timestamp::now().as_nanosecond(),
        }
    }
}

/// `b - a` of wall-clock nanoseconds (zero when negative).
fn span(a: i128, b: i128) -> Duration {
    Duration::from_nanos(u64::try_from((b - a).max(0)).unwrap_or(u64::MAX))
}

#[derive(Debug, Default, Clone)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, d: Duration) {
        self.0.push(d);
    }
    fn p(&self, p: f64) -> Option<Duration> {
        if self.0.is_empty() {
            return None;
        }
        Some(percentile(&mut self.0.clone(), p))
    }
    fn max(&self) -> Option<Duration> {
        self.0.iter().max().copied()
    }
}

impl FromIterator<Duration> for Samples {
    fn from_iter<I: IntoIterator<Item = Duration>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

fn ms(d: Option<Duration>) -> String {
    match d {
        Some(d) if d.as_secs_f64() >= 10.0 => format!("{:.2} s", d.as_secs_f64()),
        Some(d) => format!("{:.1} ms", d.as_secs_f64() * 1e3),
        None => "-".into(),
    }
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b > Duration::ZERO).then(|| a.as_secs_f64() / b.as_secs_f64())
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}×"))
}

fn target_text(r: Option<f64>, target: f64) -> String {
    match r {
        Some(r) if r <= target => format!("≤ {target}× (met)"),
        Some(_) => format!("≤ {target}× (MISSED)"),
        None => format!("≤ {target}×"),
    }
}

/// Bounds a CRI call (or any fallible future) by [`CALL_TIMEOUT`].
pub(crate) async fn bounded<T, E>(
    what: &str,
    f: impl Future<Output = Result<T, E>>,
) -> anyhow::Result<T>
where
    E: Into<anyhow::Error>,
{
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r.map_err(Into::into).with_context(|| what.to_string()),
        Err(_) => bail!("{what}: no answer within {CALL_TIMEOUT:?}"),
    }
}

/// Runs `cmd` to its end, killing it after `timeout`; its exit status.
fn run_bounded(cmd: &mut Command, timeout: Duration) -> anyhow::Result<std::process::ExitStatus> {
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{cmd:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A /16 of 10.0.0.0/8 held through the lock files the end-to-end tests
/// use (crates/skiff/tests/cluster), so a test running meanwhile never
/// gets the same range or bridge.
pub(crate) struct Lease {
    pub(crate) octet: u8,
    path: PathBuf,
}

impl Lease {
    pub(crate) fn take(from: u8) -> anyhow::Result<Self> {
        let dir = Path::new("/tmp/skiff-test-cidrs");
        std::fs::create_dir_all(dir)?;
        for octet in from..=250u8 {
            let path = dir.join(format!("10.{octet}.lock"));
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write as _;
                    f.write_all(std::process::id().to_string().as_bytes())?;
                    return Ok(Self { octet, path });
                }
                Err(_) => {
                    let owner = std::fs::read_to_string(&path).unwrap_or_default();
                    if !owner.trim().is_empty()
                        && !Path::new(&format!("/proc/{}", owner.trim())).exists()
                    {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
        bail!("no free pod CIDR in 10.{from}-250.0.0/16 (see /tmp/skiff-test-cidrs)")
    }

    pub(crate) fn bridge(&self) -> String {
        format!("skbench{}", self.octet)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Runs `skiff reset` on a data dir when dropped.
struct ResetOnDrop {
    skiff: PathBuf,
    data_dir: PathBuf,
    bridge: String,
    log: PathBuf,
}

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log);
        let (out, err) = match log.and_then(|l| Ok((l.try_clone()?, l))) {
            Ok((a, b)) => (Stdio::from(a), Stdio::from(b)),
            Err(_) => (Stdio::null(), Stdio::null()),
        };
        let result = run_bounded(
            Command::new(&self.skiff)
                .arg("reset")
                .arg("--data-dir")
                .arg(&self.data_dir)
                .args(["--bridge-name", &self.bridge])
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err),
            Duration::from_secs(180),
        );
        match result {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!(
                "skiff reset of {} failed ({s}); see {}",
                self.data_dir.display(),
                self.log.display()
            ),
            Err(e) => eprintln!("skiff reset of {}: {e}", self.data_dir.display()),
        }
    }
}

/// `/proc/PID/status` field `field` (kB).
fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// `/proc/PID/smaps_rollup` field `Pss:` (kB): resident memory with
/// shared pages divided among the processes sharing them.
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// containerd-shim processes whose command line names `needle` (the data
/// dir, in their `-address`): how many, and their VmRSS and PSS summed
/// (kB).
fn shims(needle: &Path) -> (usize, u64, u64) {
    let needle = needle.display().to_string();
    let mut count = 0;
    let mut kib = 0;
    let mut pss = 0;
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains("containerd-shim") && text.contains(&needle) {
            count += 1;
            kib += proc_kib(pid, "VmRSS:");
            pss += pss_kib(pid);
        }
    }
    (count, kib, pss)
}

/// Memory of one side at one moment (kB).
#[derive(Debug, Default, Clone, Copy)]
struct Mem {
    server_rss: u64,
    server_hwm: u64,
    containerd_rss: u64,
    containerd_hwm: u64,
    shims: usize,
    shims_rss: u64,
    shims_pss: u64,
}

fn mem(server: Option<u32>, containerd: Option<u32>, shim_needle: &Path) -> Mem {
    let (shims, shims_rss, shims_pss) = shims(shim_needle);
    Mem {
        server_rss: server.map_or(0, |p| proc_kib(p, "VmRSS:")),
        server_hwm: server.map_or(0, |p| proc_kib(p, "VmHWM:")),
        containerd_rss: containerd.map_or(0, |p| proc_kib(p, "VmRSS:")),
        containerd_hwm: containerd.map_or(0, |p| proc_kib(p, "VmHWM:")),
        shims,
        shims_rss,
        shims_pss,
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The benchmark pod: busybox `sleep 3600`, grace 0.
fn pod_json(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "skiff-bench"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "sleep",
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
            }],
        },
    })
}

// ------------------------------------------------------ containerd's log

/// When containerd began and ended each CRI call for one pod (wall ns),
/// from its log (`time="…" level=info msg="RunPodSandbox for …"`).
#[derive(Debug, Default, Clone)]
struct Calls {
    run_sandbox: Call,
    create: Call,
    start: Call,
    stop_container: Call,
    stop_sandbox: Call,
    remove_container: Call,
    remove_sandbox: Call,
}

#[derive(Debug, Default, Clone, Copy)]
struct Call {
    begin: Option<i128>,
    end: Option<i128>,
}

impl Call {
    fn mark(&mut self, end: bool, at: i128) {
        let slot = if end { &mut self.end } else { &mut self.begin };
        if slot.is_none() {
            *slot = Some(at);
        }
    }
    fn took(&self) -> Option<Duration> {
        Some(span(self.begin?, self.end?))
    }
}

/// The first `"…"` in `s`.
fn first_quoted(s: &str) -> Option<&str> {
    let rest = s.split_once('"')?.1;
    Some(rest.split_once('"')?.0)
}

/// The quoted string after the last occurrence of `marker`.
fn quoted_after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    let i = s.rfind(marker)? + marker.len();
    first_quoted(s.get(i - 1..)?)
}

/// `Key:value,` inside containerd's Go struct dump.
fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    s.get(i..)?.split([',', '}']).next()
}

/// Per pod name (CRI metadata namespace `namespace`), its CRI calls.
fn parse_containerd_log(path: &Path, namespace: &str) -> HashMap<String, Calls> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut pods: HashMap<String, Calls> = HashMap::new();
    let mut sandbox_pod: HashMap<String, String> = HashMap::new();
    let mut container_pod: HashMap<String, String> = HashMap::new();
    for line in text.lines() {
        let Some(time) = line
            .strip_prefix("time=\"")
            .and_then(|r| r.split_once('"'))
            .map(|(t, _)| t)
        else {
            continue;
        };
        let Ok(at) = time.parse::<Timestamp>() else {
            continue;
        };
        let at = at.as_nanosecond();
        let Some((_, raw)) = line.split_once(" msg=\"") else {
            continue;
        };
        // The message runs to the first unescaped quote.
        let mut msg = String::new();
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        msg.push(n);
                    }
                }
                '"' => break,
                c => msg.push(c),
            }
        }
        let done = msg.contains("returns");
        if let Some(meta) = msg.strip_prefix("RunPodSandbox for &PodSandboxMetadata{") {
            if field(meta, "Namespace:") != Some(namespace) {
                continue;
            }
            let Some(name) = field(meta, "Name:") else {
                continue;
            };
            pods.entry(name.to_string())
                .or_default()
                .run_sandbox
                .mark(done, at);
            if let Some(id) = quoted_after(&msg, "returns sandbox id \"") {
                sandbox_pod.insert(id.to_string(), name.to_string());
            }
        } else if let Some(rest) = msg.strip_prefix("CreateContainer within sandbox ") {
            let Some(pod) = first_quoted(rest)
                .and_then(|sb| sandbox_pod.get(sb))
                .cloned()
            else {
                continue;
            };
            if let Some(id) = quoted_after(&msg, "returns container id \"") {
                container_pod.insert(id.to_string(), pod.clone());
            }
            pods.entry(pod).or_default().create.mark(done, at);
        } else {
            type Pick = fn(&mut Calls) -> &mut Call;
            let kinds: [(&str, bool, Pick); 5] = [
                ("StartContainer for ", false, |c| &mut c.start),
                ("StopContainer for ", false, |c| &mut c.stop_container),
                ("RemoveContainer for ", false, |c| &mut c.remove_container),
                ("StopPodSandbox for ", true, |c| &mut c.stop_sandbox),
                ("RemovePodSandbox ", true, |c| &mut c.remove_sandbox),
            ];
            for (prefix, sandbox, pick) in kinds {
                let Some(rest) = msg.strip_prefix(prefix) else {
                    continue;
                };
                let ids = if sandbox {
                    &sandbox_pod
                } else {
                    &container_pod
                };
                if let Some(pod) = first_quoted(rest).and_then(|id| ids.get(id)) {
                    let calls = pods.entry(pod.clone()).or_default();
                    pick(calls).mark(done, at);
                }
                break;
            }
        }
    }
    pods
}

// -------------------------------------------------------------- the floor

/// A pod started by direct CRI calls.
#[derive(Debug, Clone)]
struct FloorPod {
    name: String,
    uid: String,
    sandbox: String,
    container: String,
    /// In a pod cgroup the floor made (removed after the pod).
    cgroup: bool,
    began: Stamp,
    done: Stamp,
}

/// The floor's private containerd. Its `skiff reset` is the caller's (a
/// [`ResetOnDrop`] that does not depend on every clone being gone).
struct Floor {
    runtime: CriRuntime,
    containerd: Option<Containerd>,
    dir: PathBuf,
    log_root: PathBuf,
    /// The agent's mount sources (hosts, termination-log, token files).
    volumes: PathBuf,
    cgroups: skiff_node::pod_worker::qos::PodCgroups,
}

impl Floor {
    async fn start(dir: PathBuf, bridge: &str, cidr: &str, chain: Chain) -> anyhow::Result<Self> {
        for p in skiff_node::network::prepare_host() {
            eprintln!("host prerequisite: {p}");
        }
        let config = ContainerdConfig::new(&dir, builtin::PAUSE_IMAGE);
        let ipam_dir = dir.join("cni").join("ipam");
        std::fs::create_dir_all(&ipam_dir)?;
        std::fs::create_dir_all(&config.cni_conf_dir)?;
        std::fs::write(
            config.cni_conf_dir.join(skiff_node::network::CONFLIST),
            chain.conflist(bridge, cidr, &ipam_dir)?,
        )?;
        if chain == Chain::Agent {
            // The node's masquerade rule, as the agent writes it with its
            // conflist (`skiff reset` removes it).
            skiff_node::network::CniConfig {
                bridge: bridge.to_string(),
                pod_cidr: cidr.to_string(),
                ipam_dir: ipam_dir.clone(),
                ..Default::default()
            }
            .masquerade()?;
        }
        let cgroups = floor::floor_cgroups(&dir, bridge)?;
        let socket = config.socket();
        let containerd =
            bounded("starting the floor's containerd", Containerd::start(config)).await?;
        let runtime = CriRuntime::new(socket.clone())?;
        let mut present = HashSet::new();
        for name in [builtin::PAUSE_IMAGE, builtin::BUSYBOX_IMAGE] {
            if runtime.image_status(name).await.ok().flatten().is_some() {
                present.insert(name.to_string());
            }
        }
        let imported = tokio::time::timeout(
            import::IMPORT_TIMEOUT,
            import::ensure_builtin(Path::new("ctr"), &socket, &dir, None, |n: &str| {
                present.contains(n)
            }),
        )
        .await
        .map_err(|_| anyhow!("importing the built-in images timed out"))??;
        if let Some((what, e)) = imported.failed.first() {
            bail!("the floor's containerd could not import {what}: {e}");
        }
        anyhow::ensure!(
            runtime.image_status(IMAGE).await?.is_some(),
            "{IMAGE} is not in the floor's containerd (install busybox-static)"
        );
        // NetworkReady once containerd has read the conflist.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = runtime.status().await?;
            let ready = status
                .status
                .map(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.r#type == "NetworkReady" && c.status)
                })
                .unwrap_or(false);
            if ready {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the floor's containerd never reported NetworkReady"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Self {
            runtime,
            containerd: Some(containerd),
            log_root: dir.join("pods"),
            volumes: dir.join("volumes"),
            cgroups,
            dir,
        })
    }

    fn pod(name: &str) -> anyhow::Result<Pod> {
        let mut v = pod_json(FLOOR_NS, name);
        v["metadata"]["uid"] = json!(uuid::Uuid::new_v4().to_string());
        Ok(serde_json::from_value(v)?)
    }

    /// RunPodSandbox, CreateContainer, StartContainer with `variant`'s
    /// configs for this pod (see [`floor`]).
    async fn up(&self, name: &str, variant: &Variant) -> anyhow::Result<FloorPod> {
        let pod = Self::pod(name)?;
        let began = Stamp::now();
        let ctx = floor::Ctx {
            log_root: &self.log_root,
            volumes: &self.volumes,
            cgroups: &self.cgroups,
        };
        let (sandbox_cfg, container_cfg) = variant.configs(&pod, &ctx)?;
        // As the agent does before RunPodSandbox.
        std::fs::create_dir_all(&sandbox_cfg.log_directory)?;
        let sandbox = bounded(
            "RunPodSandbox",
            self.runtime
                .run_pod_sandbox(sandbox_cfg.clone(), String::new()),
        )
        .await?;
        let container = bounded(
            "CreateContainer",
            self.runtime
                .create_container(&sandbox, container_cfg, sandbox_cfg),
        )
        .await?;
        bounded("StartContainer", self.runtime.start_container(&container)).await?;
        Ok(FloorPod {
            name: name.to_string(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            sandbox,
            container,
            cgroup: variant.uses_cgroups(),
            began,
            done: Stamp::now(),
        })
    }

    /// StopContainer(0), StopPodSandbox, RemoveContainer, RemovePodSandbox
    /// (the agent's order); when it began and ended.
    async fn down(&self, p: &FloorPod) -> anyhow::Result<(Stamp, Stamp)> {
        let began = Stamp::now();
        bounded(
            "StopContainer",
            self.runtime.stop_container(&p.container, 0),
        )
        .await?;
        bounded("StopPodSandbox", self.runtime.stop_pod_sandbox(&p.sandbox)).await?;
        bounded(
            "RemoveContainer",
            self.runtime.remove_container(&p.container),
        )
        .await?;
        bounded(
            "RemovePodSandbox",
            self.runtime.remove_pod_sandbox(&p.sandbox),
        )
        .await?;
        let done = Stamp::now();
        if p.cgroup {
            self.cgroups.remove(&p.uid);
        }
        let _ = std::fs::remove_dir_all(self.volumes.join(&p.uid));
        Ok((began, done))
    }

    fn log_path(&self) -> PathBuf {
        ContainerdConfig::new(&self.dir, "").log_path()
    }

    fn mem(&self) -> Mem {
        mem(
            None,
            self.containerd.as_ref().and_then(Containerd::pid),
            &self.dir,
        )
    }

    async fn stop(&mut self) {
        if let Some(c) = self.containerd.take() {
            c.stop().await;
        }
    }
}

// ------------------------------------------------------------ skiff server

pub(crate) struct Server {
    child: Option<Child>,
    pub(crate) data_dir: PathBuf,
    /// The agent's port (its `/metrics`).
    pub(crate) kubelet_port: u16,
    kubeconfig: PathBuf,
    pub(crate) log: PathBuf,
    _reset: ResetOnDrop,
}

impl Server {
    #[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
    pub(crate) fn spawn(
        skiff: &Path,
        data_dir: PathBuf,
        cidr: &str,
        bridge: &str,
        log_filter: &str,
        log: PathBuf,
        reset_log: &Path,
    ) -> anyhow::Result<Self> {
        Self::spawn_with(
            skiff,
            data_dir,
            cidr,
            bridge,
            log_filter,
            log,
            reset_log,
            &[],
        )
    }

    /// [`Server::spawn`] with `extra` flags.
    #[allow(clippy::too_many_arguments)] // as spawn
    pub(crate) fn spawn_with(
        skiff: &Path,
        data_dir: PathBuf,
        cidr: &str,
        bridge: &str,
        log_filter: &str,
        log: PathBuf,
        reset_log: &Path,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let reset = ResetOnDrop {
            skiff: skiff.to_path_buf(),
            data_dir: data_dir.clone(),
            bridge: bridge.to_string(),
            log: reset_log.to_path_buf(),
        };
        let kubelet_port = skiff_testkit::free_port()?;
        let file = std::fs::File::create(&log)?;
        use std::os::unix::process::CommandExt as _;
        let child = Command::new(skiff)
            .args([
                "server",
                "--https-listen-port",
                "0",
                "--bind-address",
                "127.0.0.1",
            ])
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--cluster-cidr", cidr])
            .args(["--bridge-name", bridge])
            .args(["--kubelet-port", &kubelet_port.to_string()])
            .args(["--node-ip", "127.0.0.1", "--node-name", NODE])
            .args(extra)
            .env("SKIFF_LOG", log_filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            // Its own process group: Ctrl-C reaches the bench, which stops
            // it in order.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", skiff.display()))?;
        Ok(Self {
            child: Some(child),
            kubelet_port,
            kubeconfig: data_dir.join("admin.kubeconfig"),
            data_dir,
            log,
            _reset: reset,
        })
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub(crate) fn containerd_dir(&self) -> PathBuf {
        self.data_dir.join("node").join("containerd")
    }

    pub(crate) fn containerd_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.containerd_dir().join("containerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }

    fn mem(&self) -> Mem {
        mem(self.pid(), self.containerd_pid(), &self.data_dir)
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// A client once the API answers.
    pub(crate) async fn client(&mut self, timeout: Duration) -> anyhow::Result<Client> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("skiff server exited ({status}):\n{}", self.log_tail());
            }
            if self.kubeconfig.exists() {
                if let Ok(kc) = Kubeconfig::read_from(&self.kubeconfig) {
                    let config =
                        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                            .await?;
                    let client = Client::try_from(config)?;
                    if client.apiserver_version().await.is_ok() {
                        return Ok(client);
                    }
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "skiff server did not answer within {timeout:?}:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM by PID, then SIGKILL after 40 s.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        crate::cluster::stop_child(&mut child, Duration::from_secs(40));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        // then `_reset` runs `skiff reset`.
    }
}

/// What a watch saw of one pod (first time each).
#[derive(Debug, Default, Clone)]
struct Seen {
    uid: Option<String>,
    /// Watch events (ADDED, MODIFIED) seen for it.
    events: u32,
    bound: Option<Stamp>,
    /// The first status the agent wrote (it has container statuses).
    first_status: Option<Stamp>,
    running: Option<Stamp>,
    ready: Option<Stamp>,
    gone: Option<Stamp>,
}

/// A kube-runtime watcher of the benchmark namespace's pods.
struct PodWatch {
    seen: Arc<Mutex<HashMap<String, Seen>>>,
    tick: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PodWatch {
    async fn start(client: Client, ns: &str) -> anyhow::Result<Self> {
        let api: Api<Pod> = Api::namespaced(client, ns);
        let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::default();
        let (tx, tick) = tokio::sync::watch::channel(0u64);
        let (synced_tx, mut synced) = tokio::sync::watch::channel(false);
        let map = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                let now = Stamp::now();
                match event {
                    Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                        let Some(name) = pod.metadata.name.clone() else {
                            continue;
                        };
                        let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                        let s = map.entry(name).or_default();
                        s.events += 1;
                        if s.uid.is_none() {
                            s.uid = pod.metadata.uid.clone();
                        }
                        let spec = pod.spec.as_ref();
                        if spec
                            .and_then(|s| s.node_name.as_deref())
                            .is_some_and(|n| !n.is_empty())
                        {
                            s.bound.get_or_insert(now);
                        }
                        let status = pod.status.as_ref();
                        if status.is_some_and(|s| s.container_statuses.is_some()) {
                            s.first_status.get_or_insert(now);
                        }
                        if status.and_then(|s| s.phase.as_deref()) == Some("Running") {
                            s.running.get_or_insert(now);
                        }
                        let ready = status
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|cs| {
                                cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            });
                        if ready {
                            s.ready.get_or_insert(now);
                        }
                    }
                    Ok(watcher::Event::Delete(pod)) => {
                        if let Some(name) = pod.metadata.name {
                            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                            map.entry(name).or_default().gone.get_or_insert(now);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        synced_tx.send_replace(true);
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => eprintln!("pod watch: {e}"),
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced.wait_for(|s| *s))
            .await
            .map_err(|_| anyhow!("the pod watch did not sync within 30 s"))??;
        Ok(Self { seen, tick, task })
    }

    fn get(&self, name: &str) -> Seen {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&HashMap<String, Seen>) -> bool,
    ) -> anyhow::Result<()> {
        let mut tick = self.tick.clone();
        let seen = self.seen.clone();
        tokio::time::timeout(
            timeout,
            tick.wait_for(|_| cond(&seen.lock().unwrap_or_else(|e| e.into_inner()))),
        )
        .await
        .map_err(|_| anyhow!("timed out after {timeout:?} waiting for {what}"))?
        .map_err(|_| anyhow!("the pod watch ended while waiting for {what}"))?;
        Ok(())
    }
}

/// Whether the server's containerd still has a sandbox of any of `uids`.
async fn has_sandboxes(cri: &CriRuntime, uids: &HashSet<String>) -> anyhow::Result<bool> {
    let sandboxes = bounded("ListPodSandbox", cri.list_pod_sandboxes()).await?;
    Ok(sandboxes
        .iter()
        .any(|s| observed::pod_uid(&s.labels).is_some_and(|u| uids.contains(u))))
}

/// Polls until none of `uids` has a sandbox; when that was seen.
async fn sandboxes_gone(
    cri: &CriRuntime,
    uids: &HashSet<String>,
    timeout: Duration,
) -> anyhow::Result<Stamp> {
    let deadline = Instant::now() + timeout;
    loop {
        if !has_sandboxes(cri, uids).await? {
            return Ok(Stamp::now());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "sandboxes still in containerd after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug, Clone)]
struct SkiffPod {
    name: String,
    created: Stamp,
    seen: Seen,
}

#[derive(Debug, Clone)]
struct SkiffDeletion {
    name: String,
    sent: Stamp,
    gone: Stamp,
    sandbox_gone: Stamp,
}

async fn create_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<Stamp> {
    let pod: Pod = serde_json::from_value(pod_json(NS, name))?;
    let created = Stamp::now();
    bounded("creating a pod", pods.create(&PostParams::default(), &pod)).await?;
    Ok(created)
}

async fn start_one(pods: &Api<Pod>, watch: &PodWatch, name: &str) -> anyhow::Result<SkiffPod> {
    let created = create_pod(pods, name).await?;
    let n = name.to_string();
    watch
        .wait(&format!("pod {name} Ready"), POD_TIMEOUT, |m| {
            m.get(&n)
                .is_some_and(|s| s.ready.is_some() && s.running.is_some())
        })
        .await?;
    Ok(SkiffPod {
        name: name.to_string(),
        created,
        seen: watch.get(name),
    })
}

pub(crate) fn grace_zero() -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    }
}

async fn delete_one(
    pods: &Api<Pod>,
    watch: &PodWatch,
    cri: &CriRuntime,
    name: &str,
) -> anyhow::Result<SkiffDeletion> {
    let uid = watch
        .get(name)
        .uid
        .ok_or_else(|| anyhow!("no UID seen for {name}"))?;
    let sent = Stamp::now();
    bounded("deleting a pod", pods.delete(name, &grace_zero())).await?;
    let n = name.to_string();
    watch
        .wait(&format!("pod {name} gone"), POD_TIMEOUT, |m| {
            m.get(&n).is_some_and(|s| s.gone.is_some())
        })
        .await?;
    let gone = watch
        .get(name)
        .gone
        .ok_or_else(|| anyhow!("{name} not gone"))?;
    let sandbox_gone = sandboxes_gone(cri, &HashSet::from([uid]), POD_TIMEOUT).await?;
    Ok(SkiffDeletion {
        name: name.to_string(),
        sent,
        gone,
        sandbox_gone,
    })
}

pub(crate) async fn wait_node_ready(client: &Client, timeout: Duration) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(node)) = nodes.get_opt(NODE).await {
            let ready = node
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return Ok(());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "node {NODE} not Ready within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ------------------------------------------------------------ measurement

#[derive(Debug, Default)]
struct FloorFigures {
    seq: Vec<FloorPod>,
    seq_down: Vec<(String, Stamp, Stamp)>,
    burst: Vec<FloorPod>,
    burst_began: Option<Stamp>,
    burst_up: Option<Duration>,
    burst_down: Option<Duration>,
    idle: Mem,
    loaded: Mem,
    /// containerd CPU seconds while starting the pods one at a time, and
    /// while starting the burst.
    cpu_seq: f64,
    cpu_burst: f64,
    /// With the burst's pods present: one pod worker's runtime reads
    /// (skiff-node's `observe`) and one relist (both lists, unfiltered):
    /// median latency and containerd CPU seconds per call.
    observe: Option<(Duration, f64)>,
    relist: Option<(Duration, f64)>,
    calls: HashMap<String, Calls>,
}

#[derive(Debug, Default)]
struct SkiffFigures {
    idle: Mem,
    loaded: Mem,
    seq: Vec<SkiffPod>,
    seq_down: Vec<SkiffDeletion>,
    burst: Vec<SkiffPod>,
    burst_up: Option<Duration>,
    burst_down: Option<Duration>,
    /// CPU seconds of the server and of its containerd over the 5 quiet
    /// seconds, while starting the pods one at a time, and while starting
    /// the burst.
    cpu_idle: (f64, f64),
    cpu_seq: (f64, f64),
    cpu_burst: (f64, f64),
    calls: HashMap<String, Calls>,
    /// The calls of one pod start and one deletion ([`counts`]).
    counts: Option<counts::Counts>,
}

fn cpu_of(pid: Option<u32>) -> f64 {
    pid.map_or(0.0, |p| crate::cluster::cpu_seconds(&p.to_string()))
}

/// After each pod the bench waits this long before the next, so that
/// work a side does after its pod is up (events, a second status sync)
/// is counted in its CPU and does not slow the other side's next pod.
const SETTLE: Duration = Duration::from_millis(300);

/// The server and what the bench uses of it; fields drop in order, so the
/// watch ends before the server is stopped (and reset).
struct Skiff {
    watch: PodWatch,
    pods: Api<Pod>,
    cri: CriRuntime,
    server: Server,
}

impl Skiff {
    fn cpu(&self) -> (f64, f64) {
        (
            cpu_of(self.server.pid()),
            cpu_of(self.server.containerd_pid()),
        )
    }
}

fn add(total: &mut (f64, f64), before: (f64, f64), after: (f64, f64)) {
    total.0 += after.0 - before.0;
    total.1 += after.1 - before.1;
}

async fn start_skiff(
    args: &Args,
    skiff: &Path,
    work: &Path,
    lease: &Lease,
) -> anyhow::Result<Skiff> {
    let cidr = format!("10.{}.0.0/16", lease.octet);
    let mut server = Server::spawn(
        skiff,
        work.join("server"),
        &cidr,
        &lease.bridge(),
        &args.log,
        work.join("server.log"),
        &work.join("reset.log"),
    )?;
    let client = server.client(Duration::from_secs(60)).await?;
    wait_node_ready(&client, Duration::from_secs(120)).await?;
    eprintln!(
        "skiff: node {NODE} Ready (bridge {}, {cidr})",
        lease.bridge()
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    bounded(
        "creating the namespace",
        namespaces.create(&PostParams::default(), &ns),
    )
    .await?;
    let watch = PodWatch::start(client.clone(), NS).await?;
    let cri = CriRuntime::new(server.containerd_dir().join("containerd.sock"))?;
    Ok(Skiff {
        watch,
        pods: Api::namespaced(client, NS),
        cri,
        server,
    })
}

/// The measurements, floor and skiff interleaved pod by pod (the machine
/// is shared: pairing them keeps slow drifts in background load out of
/// the ratios). Bursts run one side at a time, each with the other side
/// idle and podless.
async fn measure(
    args: &Args,
    floor: &Arc<Floor>,
    minimal: &Floor,
    s: &Skiff,
    f: &mut FloorFigures,
    m: &mut FloorFigures,
    k: &mut SkiffFigures,
) -> anyhow::Result<()> {
    // Idle: the node is Ready; 5 quiet seconds.
    let c0 = s.cpu();
    tokio::time::sleep(Duration::from_secs(5)).await;
    add(&mut k.cpu_idle, c0, s.cpu());
    k.idle = s.server.mem();
    f.idle = floor.mem();

    // Warm-up: one pod each way, not counted.
    for (fl, v) in [(&**floor, &floor::AGENT), (minimal, &floor::MINIMAL)] {
        let w = fl.up("warmup", v).await?;
        fl.down(&w).await?;
    }
    start_one(&s.pods, &s.watch, "warmup").await?;
    delete_one(&s.pods, &s.watch, &s.cri, "warmup").await?;
    tokio::time::sleep(SETTLE).await;

    let floor_cpu = || cpu_of(floor.containerd.as_ref().and_then(Containerd::pid));
    let min_cpu = || cpu_of(minimal.containerd.as_ref().and_then(Containerd::pid));
    // The three sides take turns, the order rotated pod by pod.
    #[derive(Clone, Copy)]
    enum Side {
        Own,
        Minimal,
        Skiff,
    }
    let turns = |i: usize| {
        let all = [Side::Own, Side::Minimal, Side::Skiff];
        [all[i % 3], all[(i + 1) % 3], all[(i + 2) % 3]]
    };
    for i in 0..args.pods {
        let name = format!("seq-{i}");
        for side in turns(i) {
            match side {
                Side::Own => {
                    let c0 = floor_cpu();
                    f.seq.push(floor.up(&name, &floor::AGENT).await?);
                    tokio::time::sleep(SETTLE).await;
                    f.cpu_seq += floor_cpu() - c0;
                }
                Side::Minimal => {
                    let c0 = min_cpu();
                    m.seq.push(minimal.up(&name, &floor::MINIMAL).await?);
                    tokio::time::sleep(SETTLE).await;
                    m.cpu_seq += min_cpu() - c0;
                }
                Side::Skiff => {
                    let c0 = s.cpu();
                    k.seq.push(start_one(&s.pods, &s.watch, &name).await?);
                    tokio::time::sleep(SETTLE).await;
                    add(&mut k.cpu_seq, c0, s.cpu());
                }
            }
        }
    }
    eprintln!("{} pods one at a time", args.pods);
    for i in 0..args.pods {
        for side in turns(i) {
            match side {
                Side::Own => {
                    let p = &f.seq[i];
                    let (a, b) = floor.down(p).await?;
                    f.seq_down.push((p.name.clone(), a, b));
                }
                Side::Minimal => {
                    let p = &m.seq[i];
                    let (a, b) = minimal.down(p).await?;
                    m.seq_down.push((p.name.clone(), a, b));
                }
                Side::Skiff => {
                    k.seq_down
                        .push(delete_one(&s.pods, &s.watch, &s.cri, &format!("seq-{i}")).await?);
                }
            }
            tokio::time::sleep(SETTLE).await;
        }
    }
    eprintln!("{} pods deleted one at a time", args.pods);

    // The floor's burst.
    let barrier = Arc::new(tokio::sync::Barrier::new(args.burst + 1));
    let tasks: Vec<_> = (0..args.burst)
        .map(|i| {
            let (floor, barrier) = (floor.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                floor.up(&format!("burst-{i}"), &floor::AGENT).await
            })
        })
        .collect();
    let c0 = floor_cpu();
    barrier.wait().await;
    let began = Stamp::now();
    f.burst_began = Some(began);
    for t in tasks {
        let p = tokio::time::timeout(BURST_TIMEOUT, t)
            .await
            .map_err(|_| anyhow!("floor burst: timed out"))???;
        f.burst.push(p);
    }
    f.burst_up = f.burst.iter().map(|p| p.done.at - began.at).max();
    tokio::time::sleep(Duration::from_secs(1)).await;
    f.cpu_burst = floor_cpu() - c0;
    f.loaded = floor.mem();
    // What the agent's reads cost containerd, with as many pods present.
    let rounds = 200;
    let mut took = Samples::default();
    let c0 = floor_cpu();
    for i in 0..rounds {
        let uid = &f.burst[i % f.burst.len()].uid;
        let t = Instant::now();
        bounded("observe", observe(&floor.runtime, uid)).await?;
        took.push(t.elapsed());
    }
    f.observe = took
        .p(50.0)
        .map(|d| (d, (floor_cpu() - c0) / rounds as f64));
    let mut took = Samples::default();
    let c0 = floor_cpu();
    for _ in 0..rounds / 4 {
        let t = Instant::now();
        bounded("ListPodSandbox", floor.runtime.list_pod_sandboxes()).await?;
        bounded("ListContainers", floor.runtime.list_containers()).await?;
        took.push(t.elapsed());
    }
    f.relist = took
        .p(50.0)
        .map(|d| (d, (floor_cpu() - c0) / (rounds / 4) as f64));
    let began = Instant::now();
    let downs: Vec<_> = f
        .burst
        .iter()
        .cloned()
        .map(|p| {
            let floor = floor.clone();
            tokio::spawn(async move { floor.down(&p).await })
        })
        .collect();
    for t in downs {
        tokio::time::timeout(BURST_TIMEOUT, t)
            .await
            .map_err(|_| anyhow!("floor burst teardown: timed out"))???;
    }
    f.burst_down = Some(began.elapsed());
    eprintln!("floor: {} pods at once", args.burst);
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Skiff's burst.
    let barrier = Arc::new(tokio::sync::Barrier::new(args.burst + 1));
    let tasks: Vec<_> = (0..args.burst)
        .map(|i| {
            let (pods, barrier) = (s.pods.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                create_pod(&pods, &format!("burst-{i}")).await
            })
        })
        .collect();
    let c0 = s.cpu();
    barrier.wait().await;
    let began = Instant::now();
    let mut created = Vec::new();
    for t in tasks {
        created.push(t.await??);
    }
    let names: Vec<String> = (0..args.burst).map(|i| format!("burst-{i}")).collect();
    {
        let names = names.clone();
        s.watch
            .wait(
                &format!("{} burst pods Ready", args.burst),
                BURST_TIMEOUT,
                |m| {
                    names.iter().all(|n| {
                        m.get(n)
                            .is_some_and(|s| s.ready.is_some() && s.running.is_some())
                    })
                },
            )
            .await?;
    }
    for (name, created) in names.iter().zip(created) {
        k.burst.push(SkiffPod {
            name: name.clone(),
            created,
            seen: s.watch.get(name),
        });
    }
    k.burst_up = k
        .burst
        .iter()
        .filter_map(|p| p.seen.ready.map(|r| r.at - began))
        .max();
    tokio::time::sleep(Duration::from_secs(1)).await;
    add(&mut k.cpu_burst, c0, s.cpu());
    k.loaded = s.server.mem();
    let uids: HashSet<String> = names.iter().filter_map(|n| s.watch.get(n).uid).collect();
    let began = Instant::now();
    let deletes: Vec<_> = names
        .iter()
        .cloned()
        .map(|n| {
            let pods = s.pods.clone();
            tokio::spawn(
                async move { bounded("deleting a pod", pods.delete(&n, &grace_zero())).await },
            )
        })
        .collect();
    for d in deletes {
        d.await??;
    }
    sandboxes_gone(&s.cri, &uids, BURST_TIMEOUT).await?;
    k.burst_down = Some(began.elapsed());
    eprintln!("skiff: {} pods at once", args.burst);
    if args.counts > 0 {
        k.counts = Some(count_calls(args, s).await?);
    }
    Ok(())
}

/// [`counts::count`] on the server's node.
async fn count_calls(args: &Args, s: &Skiff) -> anyhow::Result<counts::Counts> {
    let scraper = counts::Scraper::new(&s.server.kubeconfig, s.server.kubelet_port).await?;
    let c = counts::count(&scraper, &s.pods, &s.watch, &s.cri, args.counts).await?;
    eprintln!("skiff: {} pods counted", args.counts);
    Ok(c)
}

/// The counts table: per pod start and per deletion, median over the
/// pods counted.
fn print_counts(c: &counts::Counts) {
    let rows: Vec<Vec<String>> = c.rows().into_iter().map(Vec::from).collect();
    print_grid(
        &format!(
            "Calls per pod (skiff; median of {} pods started and deleted alone, the agent's relists, runtime health checks and periodic writes left out; counts, so they do not drift with noise as the times do)",
            c.pods
        ),
        &["call", "per start", "per deletion"],
        &rows,
    );
}

// ------------------------------------------------------------------ podman

#[derive(Debug, Default)]
struct PodmanFigures {
    up: Samples,
    down: Samples,
}

pub(crate) fn on_path(binary: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(binary))
            .find(|p| p.is_file())
    })
}

async fn podman_run(podman: &Path, args: &[&str], file: Option<&Path>) -> anyhow::Result<()> {
    let mut cmd = tokio::process::Command::new(podman);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(f) = file {
        cmd.arg(f);
    }
    let out = tokio::time::timeout(CALL_TIMEOUT, cmd.output())
        .await
        .map_err(|_| anyhow!("podman {args:?} timed out"))??;
    anyhow::ensure!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

async fn podman_phase(args: &Args, work: &Path) -> anyhow::Result<Option<PodmanFigures>> {
    let Some(podman) = on_path("podman") else {
        return Ok(None);
    };
    let dir = work.join("podman");
    std::fs::create_dir_all(&dir)?;
    if podman_run(&podman, &["image", "exists", IMAGE], None)
        .await
        .is_err()
    {
        let busybox = builtin::find_busybox().ok_or_else(|| anyhow!("no host busybox"))?;
        let archive = builtin::busybox_archive(&busybox)?;
        let path = dir.join("busybox.tar");
        std::fs::write(&path, archive)?;
        podman_run(&podman, &["load", "-i"], Some(&path)).await?;
    }
    let mut f = PodmanFigures::default();
    let files: Vec<PathBuf> = (0..=args.pods)
        .map(|i| {
            let name = if i == 0 {
                "skiff-bench-warmup".to_string()
            } else {
                format!("skiff-bench-{i}")
            };
            let mut v = pod_json("default", &name);
            if let Some(m) = v["metadata"].as_object_mut() {
                m.remove("namespace");
            }
            let path = dir.join(format!("{name}.json"));
            std::fs::write(&path, serde_json::to_vec(&v)?)?;
            anyhow::Ok(path)
        })
        .collect::<anyhow::Result<_>>()?;
    let result = async {
        for (i, file) in files.iter().enumerate() {
            let t = Instant::now();
            podman_run(&podman, &["kube", "play"], Some(file)).await?;
            if i > 0 {
                f.up.push(t.elapsed());
            }
        }
        for (i, file) in files.iter().enumerate() {
            let t = Instant::now();
            podman_run(&podman, &["kube", "down"], Some(file)).await?;
            if i > 0 {
                f.down.push(t.elapsed());
            }
        }
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        for file in &files {
            let _ = podman_run(&podman, &["kube", "down"], Some(file)).await;
        }
    }
    result?;
    Ok(Some(f))
}

// ------------------------------------------------------------------ report

/// Startup rows: skiff beside the minimal floor (when measured) and the
/// own-config floor, with both ratios; the target is against the
/// minimal floor when there is one, else against the own-config floor.
#[allow(clippy::too_many_arguments)] // two call sites; a struct would only rename them
fn startup_rows(
    rows: &mut Vec<Vec<String>>,
    label: &str,
    skiff: &[SkiffPod],
    minimal: Option<&[FloorPod]>,
    floor: &[FloorPod],
    floor_began: Option<Stamp>,
    percentiles: &[(&str, f64, Option<f64>)],
    podman: Option<&Samples>,
) {
    let up = |pods: &[FloorPod]| -> Samples {
        pods.iter()
            .map(|p| p.done.at - floor_began.map_or(p.began.at, |b| b.at))
            .collect()
    };
    let floor = up(floor);
    let minimal = minimal.map(up);
    let running: Samples = skiff
        .iter()
        .filter_map(|p| p.seen.running.map(|r| r.at - p.created.at))
        .collect();
    let ready: Samples = skiff
        .iter()
        .filter_map(|p| p.seen.ready.map(|r| r.at - p.created.at))
        .collect();
    for (what, samples) in [("Running", &running), ("Ready", &ready)] {
        for &(name, p, target) in percentiles {
            let pick = |s: &Samples| if name == "max" { s.max() } else { s.p(p) };
            let (s, fl, mi) = (pick(samples), pick(&floor), minimal.as_ref().and_then(pick));
            let (r_min, r_own) = (ratio(s, mi), ratio(s, fl));
            let pm = podman.and_then(pick);
            rows.push(vec![
                format!("{label}: create → {what}, {name}"),
                ms(s),
                ms(mi),
                ms(fl),
                ratio_text(r_min),
                ratio_text(r_own),
                target.map_or("-".into(), |t| {
                    target_text(if minimal.is_some() { r_min } else { r_own }, t)
                }),
                ms(pm),
            ]);
        }
    }
}

/// Median of `f` over the pods for which it is known.
fn median<T>(items: &[T], f: impl Fn(&T) -> Option<Duration>) -> Option<Duration> {
    items.iter().filter_map(f).collect::<Samples>().p(50.0)
}

fn report(
    args: &Args,
    floor: &FloorFigures,
    minimal: &FloorFigures,
    skiff: &SkiffFigures,
    podman: Option<&PodmanFigures>,
    podman_note: &str,
) {
    let n = args.pods;
    let b = args.burst;
    let mut rows = Vec::new();
    startup_rows(
        &mut rows,
        &format!("1 at a time ×{n}"),
        &skiff.seq,
        Some(&minimal.seq),
        &floor.seq,
        None,
        &[
            ("p50", 50.0, Some(1.15)),
            ("p90", 90.0, None),
            ("max", 100.0, None),
        ],
        podman.map(|p| &p.up),
    );
    startup_rows(
        &mut rows,
        &format!("{b} at once"),
        &skiff.burst,
        None,
        &floor.burst,
        floor.burst_began,
        &[
            ("p50", 50.0, None),
            ("p99", 99.0, Some(1.3)),
            ("max", 100.0, None),
        ],
        None,
    );
    let r = ratio(skiff.burst_up, floor.burst_up);
    rows.push(vec![
        format!("{b} at once: all Ready (skiff) / all started (floor)"),
        ms(skiff.burst_up),
        "-".into(),
        ms(floor.burst_up),
        "-".into(),
        ratio_text(r),
        "-".into(),
        "-".into(),
    ]);
    print_grid(
        &format!(
            "Pod startup: busybox `sleep 3600`, image present; skiff = create request → phase Running / Ready condition seen by a watch; floors = RunPodSandbox+CreateContainer+StartContainer on private containerds of the agent's config, same run: minimal = bare configs on a plain bridge, own = the configs and conflist the agent uses (one at a time: the three sides take turns; at once: one side at a time, the others idle; no minimal burst); {} cores",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        ),
        &[
            "metric",
            "skiff",
            "minimal floor",
            "own-config floor",
            "skiff / minimal",
            "skiff / own",
            "target",
            "podman kube play",
        ],
        &rows,
    );
    if let Some(c) = &skiff.counts {
        print_counts(c);
    }

    // Deletion.
    let gone: Samples = skiff
        .seq_down
        .iter()
        .map(|d| d.gone.at - d.sent.at)
        .collect();
    let removed: Samples = skiff
        .seq_down
        .iter()
        .map(|d| d.sandbox_gone.at - d.sent.at)
        .collect();
    let down_of =
        |f: &FloorFigures| -> Samples { f.seq_down.iter().map(|(_, a, b)| b.at - a.at).collect() };
    let (floor_down, min_down) = (down_of(floor), down_of(minimal));
    let pdown = podman.map(|p| &p.down);
    let mut rows = Vec::new();
    for (name, p) in [("p50", 50.0), ("max", 100.0)] {
        let pick = |s: &Samples| if name == "max" { s.max() } else { s.p(p) };
        rows.push(vec![
            format!("1 at a time ×{n}: DELETE grace 0 → object gone (watch), {name}"),
            ms(pick(&gone)),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            ms(pdown.and_then(&pick)),
        ]);
        let (s, mi, fl) = (pick(&removed), pick(&min_down), pick(&floor_down));
        rows.push(vec![
            format!("1 at a time ×{n}: DELETE grace 0 → sandbox removed from containerd, {name}"),
            ms(s),
            ms(mi),
            ms(fl),
            ratio_text(ratio(s, mi)),
            ratio_text(ratio(s, fl)),
            "-".into(),
        ]);
    }
    rows.push(vec![
        format!("{b} at once: DELETE grace 0 → all sandboxes removed"),
        ms(skiff.burst_down),
        "-".into(),
        ms(floor.burst_down),
        "-".into(),
        ratio_text(ratio(skiff.burst_down, floor.burst_down)),
        "-".into(),
    ]);
    print_grid(
        "Pod deletion; floors = StopContainer(timeout 0) + StopPodSandbox + RemoveContainer + RemovePodSandbox",
        &[
            "metric",
            "skiff",
            "minimal floor",
            "own-config floor",
            "skiff / minimal",
            "skiff / own",
            "podman kube down",
        ],
        &rows,
    );

    // Memory.
    let target = |kib: u64| {
        if kib < 64 * 1024 {
            "< 64 MiB (met); k3s idles > 500 MB".to_string()
        } else {
            "< 64 MiB (MISSED); k3s idles > 500 MB".to_string()
        }
    };
    let rows = vec![
        vec![
            "skiff server VmRSS, idle (node Ready + 5 s)".into(),
            mib(skiff.idle.server_rss),
            "-".into(),
            target(skiff.idle.server_rss),
        ],
        vec![
            "skiff server VmHWM, idle".into(),
            mib(skiff.idle.server_hwm),
            "-".into(),
            "-".into(),
        ],
        vec![
            format!("skiff server VmRSS, {b} pods running"),
            mib(skiff.loaded.server_rss),
            "-".into(),
            "-".into(),
        ],
        vec![
            format!("skiff server VmHWM, after {n}+{b} pods"),
            mib(skiff.loaded.server_hwm),
            "-".into(),
            "-".into(),
        ],
        vec![
            "containerd VmRSS, idle".into(),
            mib(skiff.idle.containerd_rss),
            mib(floor.idle.containerd_rss),
            "-".into(),
        ],
        vec![
            format!("containerd VmRSS / VmHWM, {b} pods running"),
            format!(
                "{} / {}",
                mib(skiff.loaded.containerd_rss),
                mib(skiff.loaded.containerd_hwm)
            ),
            format!(
                "{} / {}",
                mib(floor.loaded.containerd_rss),
                mib(floor.loaded.containerd_hwm)
            ),
            "-".into(),
        ],
        vec![
            format!("containerd-shim VmRSS summed (PSS summed), {b} pods running"),
            format!(
                "{} ({}), {} shims",
                mib(skiff.loaded.shims_rss),
                mib(skiff.loaded.shims_pss),
                skiff.loaded.shims
            ),
            format!(
                "{} ({}), {} shims",
                mib(floor.loaded.shims_rss),
                mib(floor.loaded.shims_pss),
                floor.loaded.shims
            ),
            "-".into(),
        ],
    ];
    print_grid(
        "Memory (/proc/PID/status; containerd and its shims are not in the server's figures)",
        &["metric", "skiff", "floor's containerd", "target"],
        &rows,
    );

    // CPU.
    let per = |cpu: f64, pods: usize| format!("{:.1} ms", cpu * 1e3 / pods.max(1) as f64);
    let rows = vec![
        vec![
            "idle (node Ready, 5 quiet seconds), CPU %".into(),
            format!("{:.1} %", skiff.cpu_idle.0 / 5.0 * 100.0),
            format!("{:.1} %", skiff.cpu_idle.1 / 5.0 * 100.0),
            "-".into(),
        ],
        vec![
            format!(
                "1 at a time ×{n}: CPU per pod (until Ready + {} ms)",
                SETTLE.as_millis()
            ),
            per(skiff.cpu_seq.0, n),
            per(skiff.cpu_seq.1, n),
            per(floor.cpu_seq, n),
        ],
        vec![
            format!("{b} at once: CPU per pod (until all Ready + 1 s)"),
            per(skiff.cpu_burst.0, b),
            per(skiff.cpu_burst.1, b),
            per(floor.cpu_burst, b),
        ],
    ];
    let events: Samples = skiff
        .seq
        .iter()
        .map(|p| Duration::from_millis(u64::from(p.seen.events)))
        .collect();
    let mut rows = rows;
    rows.push(vec![
        format!("1 at a time ×{n}: watch events per pod until deleted (median)"),
        events
            .p(50.0)
            .map_or("-".into(), |d| d.as_millis().to_string()),
        "-".into(),
        "-".into(),
    ]);
    for (what, figure) in [
        (
            "one worker sync's reads (`observe`: 2 Lists by UID + 2 Status)",
            floor.observe,
        ),
        ("one relist (2 Lists, whole node)", floor.relist),
    ] {
        rows.push(vec![
            format!("{what}, {b} pods up: p50 latency / CPU per call"),
            "-".into(),
            "-".into(),
            figure.map_or("-".into(), |(d, cpu)| {
                format!("{} / {:.2} ms", ms(Some(d)), cpu * 1e3)
            }),
        ]);
    }
    print_grid(
        "CPU time (/proc/PID/stat utime+stime, 10 ms ticks; shims and runc not included)",
        &[
            "metric",
            "skiff server",
            "skiff's containerd",
            "floor's containerd",
        ],
        &rows,
    );

    // Where the time goes, from containerd's log.
    let steps = |pods: &[SkiffPod]| -> Vec<Option<Duration>> {
        let with: Vec<(&SkiffPod, &Calls)> = pods
            .iter()
            .filter_map(|p| skiff.calls.get(&p.name).map(|c| (p, c)))
            .collect();
        let c = |f: fn(&Calls) -> Option<Duration>| median(&with, |(_, c)| f(c));
        vec![
            median(&with, |(p, _)| {
                Some(span(p.created.wall, p.seen.bound?.wall))
            }),
            median(&with, |(p, _)| {
                Some(span(p.created.wall, p.seen.first_status?.wall))
            }),
            median(&with, |(p, c)| {
                Some(span(p.created.wall, c.run_sandbox.begin?))
            }),
            c(|c| c.run_sandbox.took()),
            c(|c| Some(span(c.run_sandbox.end?, c.create.begin?))),
            c(|c| c.create.took()),
            c(|c| Some(span(c.create.end?, c.start.begin?))),
            c(|c| c.start.took()),
            median(&with, |(p, c)| {
                Some(span(c.start.end?, p.seen.running?.wall))
            }),
            median(&with, |(p, _)| {
                Some(span(p.seen.running?.wall, p.seen.ready?.wall))
            }),
        ]
    };
    let floor_steps =
        |fig: &FloorFigures, pods: &[FloorPod], began: Option<Stamp>| -> Vec<Option<Duration>> {
            let with: Vec<(&FloorPod, &Calls)> = pods
                .iter()
                .filter_map(|p| fig.calls.get(&p.name).map(|c| (p, c)))
                .collect();
            let c = |f: fn(&Calls) -> Option<Duration>| median(&with, |(_, c)| f(c));
            vec![
                None,
                None,
                median(&with, |(p, c)| {
                    Some(span(
                        began.map_or(p.began.wall, |b| b.wall),
                        c.run_sandbox.begin?,
                    ))
                }),
                c(|c| c.run_sandbox.took()),
                c(|c| Some(span(c.run_sandbox.end?, c.create.begin?))),
                c(|c| c.create.took()),
                c(|c| Some(span(c.create.end?, c.start.begin?))),
                c(|c| c.start.took()),
                median(&with, |(p, c)| Some(span(c.start.end?, p.done.wall))),
                None,
            ]
        };
    let labels = [
        "create request → pod bound (scheduler), seen by watch",
        "create request → agent's first status (ContainerCreating) seen by watch",
        "create request → RunPodSandbox begins in containerd",
        "RunPodSandbox (in containerd)",
        "sandbox up → CreateContainer begins",
        "CreateContainer",
        "container created → StartContainer begins",
        "StartContainer",
        "StartContainer done → Running seen by watch (floor: call returned)",
        "Running → Ready seen by watch",
    ];
    let columns = [
        steps(&skiff.seq),
        floor_steps(minimal, &minimal.seq, None),
        floor_steps(floor, &floor.seq, None),
        steps(&skiff.burst),
        floor_steps(floor, &floor.burst, floor.burst_began),
    ];
    let mut rows: Vec<Vec<String>> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut row = vec![l.to_string()];
            row.extend(columns.iter().map(|c| ms(c.get(i).copied().flatten())));
            row
        })
        .collect();

    // Teardown steps (sequential only).
    let down: Vec<(&SkiffDeletion, &Calls)> = skiff
        .seq_down
        .iter()
        .filter_map(|d| skiff.calls.get(&d.name).map(|c| (d, c)))
        .collect();
    type Down<'a> = Vec<(&'a (String, Stamp, Stamp), &'a Calls)>;
    fn downs_of(fig: &FloorFigures) -> Down<'_> {
        fig.seq_down
            .iter()
            .filter_map(|d| fig.calls.get(&d.0).map(|c| (d, c)))
            .collect()
    }
    let (fdown, mdown) = (downs_of(floor), downs_of(minimal));
    let c = |f: fn(&Calls) -> Option<Duration>| {
        [
            median(&down, |(_, c)| f(c)),
            median(&mdown, |(_, c)| f(c)),
            median(&fdown, |(_, c)| f(c)),
        ]
    };
    let sent = |fd: &[(&(String, Stamp, Stamp), &Calls)]| {
        median(fd, |(d, c)| Some(span(d.1.wall, c.stop_container.begin?)))
    };
    let gone = |fd: &[(&(String, Stamp, Stamp), &Calls)]| {
        median(fd, |(d, c)| Some(span(c.remove_sandbox.end?, d.2.wall)))
    };
    let teardown = vec![
        (
            "DELETE sent → StopContainer begins",
            [
                median(&down, |(d, c)| {
                    Some(span(d.sent.wall, c.stop_container.begin?))
                }),
                sent(&mdown),
                sent(&fdown),
            ],
        ),
        ("StopContainer", c(|c| c.stop_container.took())),
        (
            "StopContainer done → StopPodSandbox begins",
            c(|c| Some(span(c.stop_container.end?, c.stop_sandbox.begin?))),
        ),
        ("StopPodSandbox", c(|c| c.stop_sandbox.took())),
        (
            "StopPodSandbox done → RemovePodSandbox done",
            c(|c| Some(span(c.stop_sandbox.end?, c.remove_sandbox.end?))),
        ),
        (
            "RemovePodSandbox done → seen gone (skiff: CRI list every 20 ms; floor: call returned)",
            [
                median(&down, |(d, c)| {
                    Some(span(c.remove_sandbox.end?, d.sandbox_gone.wall))
                }),
                gone(&mdown),
                gone(&fdown),
            ],
        ),
    ];
    for (label, [s, m, f]) in teardown {
        rows.push(vec![
            format!("deletion: {label}"),
            ms(s),
            ms(m),
            ms(f),
            "-".into(),
            "-".into(),
        ]);
    }
    print_grid(
        "Where the time goes (medians; CRI call begin/end from containerd's own log, other points from the bench's clock)",
        &[
            "step",
            &format!("skiff, 1 at a time ×{n}"),
            &format!("minimal floor, 1 at a time ×{n}"),
            &format!("own-config floor, 1 at a time ×{n}"),
            &format!("skiff, {b} at once"),
            &format!("own-config floor, {b} at once"),
        ],
        &rows,
    );
    if !podman_note.is_empty() {
        println!("\n{podman_note}");
    }
    println!(
        "\nserver log (SKIFF_LOG={}): {}",
        args.log,
        args.keep_logs.as_ref().map_or(
            "removed (pass --keep-logs DIR to keep it)".to_string(),
            |d| d.join("skiff-server.log").display().to_string()
        )
    );
}

// -------------------------------------------------------------------- run

pub async fn run(args: Args) -> anyhow::Result<()> {
    tokio::select! {
        r = run_all(&args) => r,
        _ = tokio::signal::ctrl_c() => {
            // run_all's guards have stopped and reset everything by now.
            bail!("interrupted")
        }
    }
}

async fn run_all(args: &Args) -> anyhow::Result<()> {
    let skiff = crate::cluster::skiff_binary(args.skiff.as_deref())?;
    anyhow::ensure!(
        args.pods > 0 && args.burst > 0,
        "--pods and --burst must be > 0"
    );
    for binary in ["containerd", "ctr"] {
        anyhow::ensure!(on_path(binary).is_some(), "{binary} is not installed");
    }
    // Locals drop in reverse order: the server and the floors are stopped
    // and reset before the leases and the work dir go.
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-node-")
        .tempdir()?;
    if let Some(keys) = &args.floor_variants {
        eprintln!("work dir {}", work.path().display());
        return floor::run(
            &skiff,
            work.path(),
            keys,
            args.pods,
            args.keep_logs.as_deref(),
        )
        .await;
    }
    let server_lease = Lease::take(240)?;
    if args.counts_only {
        anyhow::ensure!(args.counts > 0, "--counts-only needs --counts > 0");
        skiff_node::network::remove_bridge(&server_lease.bridge());
        eprintln!("work dir {}", work.path().display());
        let s = start_skiff(args, &skiff, work.path(), &server_lease).await?;
        let result = count_calls(args, &s).await;
        if let Some(dir) = &args.keep_logs {
            std::fs::create_dir_all(dir)?;
            let _ = std::fs::copy(&s.server.log, dir.join("skiff-server.log"));
        }
        let c =
            result.map_err(|e| e.context(format!("server log tail:\n{}", s.server.log_tail())))?;
        drop(s);
        print_counts(&c);
        return Ok(());
    }
    let floor_lease = Lease::take(server_lease.octet + 1)?;
    let min_lease = Lease::take(floor_lease.octet + 1)?;
    // A bridge of ours left by an interrupted run.
    for lease in [&server_lease, &floor_lease, &min_lease] {
        skiff_node::network::remove_bridge(&lease.bridge());
    }
    eprintln!("work dir {}", work.path().display());

    let floor_dir = work.path().join("floor");
    let _floor_reset = ResetOnDrop {
        skiff: skiff.clone(),
        data_dir: floor_dir.clone(),
        bridge: floor_lease.bridge(),
        log: work.path().join("reset.log"),
    };
    let floor_cidr = format!("10.{}.0.0/24", floor_lease.octet);
    let floor =
        Arc::new(Floor::start(floor_dir, &floor_lease.bridge(), &floor_cidr, Chain::Agent).await?);
    eprintln!(
        "own-config floor: containerd up (bridge {}, {floor_cidr})",
        floor_lease.bridge()
    );
    let min_dir = work.path().join("minimal");
    let _min_reset = ResetOnDrop {
        skiff: skiff.clone(),
        data_dir: min_dir.clone(),
        bridge: min_lease.bridge(),
        log: work.path().join("reset.log"),
    };
    let min_cidr = format!("10.{}.0.0/24", min_lease.octet);
    let minimal = Floor::start(min_dir, &min_lease.bridge(), &min_cidr, Chain::Plain).await?;
    eprintln!(
        "minimal floor: containerd up (bridge {}, {min_cidr})",
        min_lease.bridge()
    );
    let s = start_skiff(args, &skiff, work.path(), &server_lease).await?;

    let mut ff = FloorFigures::default();
    let mut mf = FloorFigures::default();
    let mut sf = SkiffFigures::default();
    let result = measure(args, &floor, &minimal, &s, &mut ff, &mut mf, &mut sf).await;
    ff.calls = parse_containerd_log(&floor.log_path(), FLOOR_NS);
    mf.calls = parse_containerd_log(&minimal.log_path(), FLOOR_NS);
    let skiff_containerd_log = s.server.containerd_dir().join("containerd.log");
    sf.calls = parse_containerd_log(&skiff_containerd_log, NS);
    if let Some(dir) = &args.keep_logs {
        std::fs::create_dir_all(dir)?;
        for (from, to) in [
            (floor.log_path(), "floor-containerd.log"),
            (minimal.log_path(), "minimal-floor-containerd.log"),
            (skiff_containerd_log, "skiff-containerd.log"),
            (s.server.log.clone(), "skiff-server.log"),
        ] {
            let _ = std::fs::copy(from, dir.join(to));
        }
    }
    if let Err(e) = result {
        return Err(e.context(format!("server log tail:\n{}", s.server.log_tail())));
    }
    drop(s); // SIGTERM, then skiff reset
    if let Some(mut floor) = Arc::into_inner(floor) {
        floor.stop().await;
    }
    let mut minimal = minimal;
    minimal.stop().await;
    drop(_floor_reset);
    drop(_min_reset);

    let (podman, note) = if args.no_podman {
        (None, "podman: skipped (--no-podman).".to_string())
    } else {
        match podman_phase(args, work.path()).await {
            Ok(Some(p)) => (Some(p), String::new()),
            Ok(None) => (
                None,
                "podman: not installed, so the `podman kube play` column is empty (apt-get install podman to fill it).".to_string(),
            ),
            Err(e) => (None, format!("podman: failed: {e:#}")),
        }
    };
    report(args, &ff, &mf, &sf, podman.as_ref(), &note);
    Ok(())
}
