//! `skiff-bench probes`: what readiness probes cost, issue [lifecycle]
//! deliverable 10. One `skiff server` (API server, scheduler and agent in
//! one process, with the node's own containerd) runs `--pods` busybox pods
//! serving `httpd -f -p 8080`, in these phases, each measured over
//! `--window-secs` once every pod is Ready and `--settle-secs` have passed:
//!
//! - (c) pods with a readinessProbe exec `true` every second (first, so
//!   that (e) knows the rate it achieved);
//! - (a) the pods with no probes: the baseline;
//! - (d) the same pods, and the bench itself calling CRI ExecSync `true`
//!   (timeout 1 s, as the prober does) on every container once a second,
//!   straight at the node's containerd socket: the floor of an exec probe;
//! - (e) only if the prober fell behind (100 exec probes a second are more
//!   than a 2-core machine runs): the floor again, paced to (c)'s rate;
//! - (b) pods with a readinessProbe httpGet :8080 every second.
//!
//! Probes cannot be added to a running pod, so the pods are deleted (and
//! their sandboxes awaited gone from containerd) before the next set.
//!
//! It measures CPU seconds, not wall time (the machines are shared, and a
//! process's CPU seconds hold up under load): utime+stime+cutime+cstime
//! from /proc/PID/stat of the skiff server (the agent is in it), of the
//! node's containerd, of its `containerd-shim-runc-v2` processes (found as
//! `skiff reset` finds them: their command line names the data dir; runc
//! and the exec'd commands are their reaped children, so they land in the
//! shims' cutime/cstime), of the pods' own processes (the shims' live
//! children: pause, httpd and its per-connection forks) and of the bench.
//!
//! Probes performed are measured, not assumed: httpGet by the TCP passive
//! opens in each pod's network namespace (/proc/PID/net/snmp), exec by the
//! PIDs used in each container's PID namespace between two marker execs
//! (`sh -c 'echo $$'` before and after the window), in units of the PIDs
//! one ExecSync uses, from (a)'s markers (nothing runs between them),
//! cross-checked on (d) and (e), where the calls are counted.
//!
//! Everything runs under guards from `node`: the server is stopped by PID
//! and `skiff reset` clears its data dir, bridge and shims, also on errors
//! and Ctrl-C. Every wait is bounded. It prints figures and never asserts
//! them.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use skiff_node::images::builtin::BUSYBOX_IMAGE;
use skiff_node::observed::POD_NAMESPACE;
use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::Runtime as _;

use crate::node::{bounded, grace_zero, on_path, wait_node_ready, Lease, Server};
use crate::stats::{percentile, print_grid};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// Pods in each phase.
    #[arg(long, default_value_t = 100)]
    pods: usize,
    /// The measured window of each phase, in seconds.
    #[arg(long, default_value_t = 30)]
    window_secs: u64,
    /// Quiet seconds between all pods Ready and the window.
    #[arg(long, default_value_t = 10)]
    settle_secs: u64,
    /// SKIFF_LOG of the server.
    #[arg(long, default_value = "info,kube=warn,tower=warn,hyper=warn,h2=warn")]
    log: String,
    /// Copy the server's and containerd's logs into this directory before
    /// cleaning up.
    #[arg(long)]
    keep_logs: Option<PathBuf>,
}

/// The API namespace of the benchmark pods.
const NS: &str = "probes";
const APP: &str = "skiff-bench-probes";
const PORT: u16 = 8080;
/// Requests in flight while creating or deleting pods.
const CONCURRENCY: usize = 10;
const READY_TIMEOUT: Duration = Duration::from_secs(600);
/// How long pods may stay not Ready once all are running.
const READY_GRACE: Duration = Duration::from_secs(120);
const GONE_TIMEOUT: Duration = Duration::from_secs(300);
/// /proc/PID/stat counts in clock ticks (USER_HZ, 100 on Linux).
const CLK_TCK: f64 = 100.0;

// ------------------------------------------------------------------ pods

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    None,
    HttpGet,
    Exec,
}

impl Probe {
    fn prefix(self) -> &'static str {
        match self {
            Probe::None => "base",
            Probe::HttpGet => "http",
            Probe::Exec => "exec",
        }
    }

    /// The readinessProbe (every second; other fields defaulted).
    fn readiness(self) -> Option<Value> {
        match self {
            Probe::None => None,
            Probe::HttpGet => {
                Some(json!({"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 1}))
            }
            Probe::Exec => Some(json!({"exec": {"command": ["true"]}, "periodSeconds": 1})),
        }
    }
}

/// busybox httpd on :8080 serving an index.html (busybox httpd answers
/// 404 for a directory without one), grace 0.
fn pod_json(name: &str, probe: Probe) -> Value {
    let mut container = json!({
        "name": "web",
        "image": BUSYBOX_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", format!(
            "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p {PORT} -h /www"
        )],
        "ports": [{"containerPort": PORT}],
    });
    if let Some(p) = probe.readiness() {
        container["readinessProbe"] = p;
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": APP}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [container]},
    })
}

fn selector() -> ListParams {
    ListParams::default().labels(&format!("app={APP}"))
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The CRI ID of the pod's container, once it has one.
fn container_id(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    let id = status.container_id.as_deref()?;
    Some(id.split_once("://").map_or(id, |(_, id)| id).to_string())
}

async fn create_pods(pods: &Api<Pod>, probe: Probe, n: usize) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("{}-{i}", probe.prefix())).collect();
    futures::stream::iter(names.clone())
        .map(|name| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod_json(&name, probe))?;
                bounded("creating a pod", pods.create(&PostParams::default(), &pod)).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(names)
}

/// Polls until every pod in `names` is running with a container and
/// Ready, or, once all are running, [`READY_GRACE`] has passed (exec
/// probes at 1/s can be more than a 2-core machine runs in time, so some
/// may never be Ready together); their container IDs, in the order of
/// `names`.
async fn wait_ready(pods: &Api<Pod>, names: &[String]) -> anyhow::Result<Vec<String>> {
    let began = Instant::now();
    let mut said = Instant::now();
    let mut all_running: Option<Instant> = None;
    loop {
        let list = bounded("listing pods", pods.list(&selector())).await?;
        let by_name: HashMap<&str, &Pod> = list
            .items
            .iter()
            .filter_map(|p| Some((p.metadata.name.as_deref()?, p)))
            .collect();
        let running: Vec<Option<String>> = names
            .iter()
            .map(|n| {
                by_name
                    .get(n.as_str())
                    .filter(|p| is_running(p))
                    .and_then(|p| container_id(p))
            })
            .collect();
        let count = names
            .iter()
            .filter(|n| by_name.get(n.as_str()).is_some_and(|p| is_ready(p)))
            .count();
        if running.iter().all(Option::is_some) {
            let since = *all_running.get_or_insert_with(Instant::now);
            if count == names.len() || since.elapsed() > READY_GRACE {
                eprintln!(
                    "  {count} of {} pods Ready after {:.0} s",
                    names.len(),
                    began.elapsed().as_secs_f64()
                );
                return running
                    .into_iter()
                    .map(|r| r.ok_or_else(|| anyhow!("no container ID")))
                    .collect();
            }
        }
        if began.elapsed() > READY_TIMEOUT {
            let example = names
                .iter()
                .zip(&running)
                .find(|(_, r)| r.is_none())
                .and_then(|(n, _)| by_name.get(n.as_str()))
                .map(|p| serde_json::to_string(&p.status).unwrap_or_default())
                .unwrap_or_default();
            bail!(
                "only {} of {} pods running after {READY_TIMEOUT:?}; a status: {example}",
                running.iter().filter(|r| r.is_some()).count(),
                names.len()
            );
        }
        if said.elapsed() > Duration::from_secs(15) {
            eprintln!("  {count} of {} pods Ready", names.len());
            said = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Deletes every benchmark pod (grace 0) and waits until the API has none
/// and the node's containerd has no sandbox of the namespace.
async fn delete_all(pods: &Api<Pod>, cri: &CriRuntime) -> anyhow::Result<()> {
    let began = Instant::now();
    let list = bounded("listing pods", pods.list(&selector())).await?;
    let names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    futures::stream::iter(names)
        .map(|name| {
            let pods = pods.clone();
            async move {
                bounded("deleting a pod", pods.delete(&name, &grace_zero())).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    loop {
        let left = bounded("listing pods", pods.list(&selector()))
            .await?
            .items
            .len();
        let sandboxes = bounded("ListPodSandbox", cri.list_pod_sandboxes())
            .await?
            .iter()
            .filter(|s| s.labels.get(POD_NAMESPACE).map(String::as_str) == Some(NS))
            .count();
        if left == 0 && sandboxes == 0 {
            eprintln!(
                "  pods deleted and sandboxes gone after {:.0} s",
                began.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        anyhow::ensure!(
            began.elapsed() < GONE_TIMEOUT,
            "{left} pods and {sandboxes} sandboxes left after {GONE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Ready pods now, and the Unhealthy events of the namespace so far
/// (their counts summed).
async fn readiness(client: &Client) -> anyhow::Result<(usize, i64)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let ready = bounded("listing pods", pods.list(&selector()))
        .await?
        .items
        .iter()
        .filter(|p| is_ready(p))
        .count();
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let unhealthy = bounded("listing events", events.list(&ListParams::default()))
        .await?
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Unhealthy"))
        .map(|e| i64::from(e.count.unwrap_or(1).max(1)))
        .sum();
    Ok((ready, unhealthy))
}

// --------------------------------------------------------------- /proc

/// (ppid, CPU seconds: utime+stime of the process and cutime+cstime of
/// its reaped children) from /proc/PID/stat.
fn stat_of(pid: u32) -> Option<(u32, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let ppid = fields.get(1)?.parse().ok()?;
    // utime, stime, cutime, cstime are fields 14-17 (11-14 after ')').
    Some((
        ppid,
        (ticks(11) + ticks(12) + ticks(13) + ticks(14)) / CLK_TCK,
    ))
}

fn cpu_of(pid: Option<u32>) -> f64 {
    pid.and_then(stat_of).map_or(0.0, |(_, cpu)| cpu)
}

/// `PassiveOpens` of the TCP MIB of the network namespace `pid` is in.
fn passive_opens(pid: u32) -> Option<u64> {
    let snmp = std::fs::read_to_string(format!("/proc/{pid}/net/snmp")).ok()?;
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "PassiveOpens")
        .and_then(|(_, v)| v.parse().ok())
}

/// Busy and total jiffies of the whole machine, from /proc/stat.
fn machine() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    // user nice system idle iowait irq softirq steal (guest is in user).
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy, busy + at(3) + at(4))
}

/// CPU seconds so far of everything measured, at one moment.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    server: f64,
    containerd: f64,
    /// The node's shims, by PID.
    shims: HashMap<u32, f64>,
    /// The shims' live children (the pods' processes), by PID.
    pods: HashMap<u32, f64>,
    /// TCP passive opens per pod network namespace.
    opens: HashMap<String, u64>,
    bench: f64,
    machine_busy: f64,
}

fn snapshot(server: Option<u32>, containerd: Option<u32>, needle: &str) -> Snapshot {
    let mut procs = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Some((ppid, cpu)) = stat_of(pid) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let shim = text.contains("containerd-shim") && text.contains(needle);
        procs.push((pid, ppid, cpu, shim));
    }
    let shim_pids: HashSet<u32> = procs.iter().filter(|p| p.3).map(|p| p.0).collect();
    let shims = procs.iter().filter(|p| p.3).map(|p| (p.0, p.2)).collect();
    // The shims' children in the pods' network namespaces: pause, httpd
    // and exec'd commands, not runc (in the host's, and reaped by the
    // shim, so its CPU is the shim's).
    let netns = |pid: u32| {
        std::fs::read_link(format!("/proc/{pid}/ns/net"))
            .ok()
            .map(|l| l.display().to_string())
    };
    let host = netns(std::process::id());
    let mut pods = HashMap::new();
    let mut opens = HashMap::new();
    for &(pid, ppid, cpu, shim) in &procs {
        if shim || !shim_pids.contains(&ppid) {
            continue;
        }
        let Some(ns) = netns(pid).filter(|ns| Some(ns) != host.as_ref()) else {
            continue;
        };
        pods.insert(pid, cpu);
        if let std::collections::hash_map::Entry::Vacant(e) = opens.entry(ns) {
            if let Some(n) = passive_opens(pid) {
                e.insert(n);
            }
        }
    }
    Snapshot {
        at: Instant::now(),
        server: cpu_of(server),
        containerd: cpu_of(containerd),
        shims,
        pods,
        opens,
        bench: cpu_of(Some(std::process::id())),
        machine_busy: machine().0 / CLK_TCK,
    }
}

/// CPU seconds used between two snapshots.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    secs: f64,
    server: f64,
    containerd: f64,
    shims: f64,
    shim_count: usize,
    pods: f64,
    pod_procs: usize,
    bench: f64,
    machine: f64,
    tcp_opens: u64,
}

impl Usage {
    fn between(a: &Snapshot, b: &Snapshot) -> Self {
        // Processes present at both ends (long-lived: shims, pause, httpd).
        let both = |x: &HashMap<u32, f64>, y: &HashMap<u32, f64>| -> f64 {
            y.iter()
                .filter_map(|(pid, v)| x.get(pid).map(|u| (v - u).max(0.0)))
                .sum()
        };
        Self {
            secs: (b.at - a.at).as_secs_f64(),
            server: b.server - a.server,
            containerd: b.containerd - a.containerd,
            shims: both(&a.shims, &b.shims),
            shim_count: b.shims.len(),
            pods: both(&a.pods, &b.pods),
            pod_procs: b.pods.keys().filter(|p| a.pods.contains_key(p)).count(),
            bench: b.bench - a.bench,
            machine: b.machine_busy - a.machine_busy,
            tcp_opens: b
                .opens
                .iter()
                .filter_map(|(ns, v)| a.opens.get(ns).map(|u| v.saturating_sub(*u)))
                .sum(),
        }
    }

    fn runtime(&self) -> f64 {
        self.containerd + self.shims
    }
}

// ---------------------------------------------------------------- execs

/// Per container: the PID a marker `sh -c 'echo $$'` got in its PID
/// namespace, and when (the middle of the call); `None` where the marker
/// failed (retried twice: exec probes can keep the runtime saturated).
async fn markers(cri: &CriRuntime, containers: &[String]) -> Vec<Option<(u64, Instant)>> {
    futures::stream::iter(containers.to_vec())
        .map(|id| {
            let cri = cri.clone();
            async move {
                let mut last = None;
                for _ in 0..3 {
                    match marker(&cri, &id).await {
                        Ok(m) => return Some(m),
                        Err(e) => last = Some(e),
                    }
                }
                if let Some(e) = last {
                    eprintln!("  marker exec in {id}: {e:#}");
                }
                None
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

async fn marker(cri: &CriRuntime, id: &str) -> anyhow::Result<(u64, Instant)> {
    let before = Instant::now();
    let (code, out, err) = bounded(
        "ExecSync marker",
        cri.exec_sync(id, vec!["sh".into(), "-c".into(), "echo $$".into()], 30),
    )
    .await?;
    let after = Instant::now();
    let text = String::from_utf8_lossy(&out);
    let pid = text.trim().parse::<u64>().map_err(|_| {
        anyhow!(
            "exit {code}, stdout {text:?}, stderr {:?}",
            String::from_utf8_lossy(&err)
        )
    })?;
    Ok((pid, before + (after - before) / 2))
}

/// What the bench's own ExecSync loop did.
#[derive(Debug, Default, Clone)]
struct RawExec {
    /// Calls per container (exit 0, other).
    ok: Vec<u64>,
    failed: Vec<u64>,
    latency: Vec<Duration>,
}

/// Every container gets ExecSync `true` (timeout 1 s) every `period`, each
/// on its own timer, the timers spread over the period as the prober's
/// (started as pods came up) are, for `window`.
async fn raw_exec_loop(
    cri: &CriRuntime,
    containers: &[String],
    window: Duration,
    period: Duration,
) -> RawExec {
    let start = tokio::time::Instant::now();
    let end = start + window;
    let n = containers.len().max(1) as u32;
    let tasks: Vec<_> = containers
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let (cri, id) = (cri.clone(), id.clone());
            let offset = period * i as u32 / n;
            tokio::spawn(async move {
                let (mut ok, mut failed, mut latency) = (0u64, 0u64, Vec::new());
                // As the prober's interval with MissedTickBehavior::Delay,
                // but never sleeping past the end of the window.
                let mut next = start + offset;
                while next < end {
                    tokio::time::sleep_until(next).await;
                    next = (next + period).max(tokio::time::Instant::now());
                    let t = Instant::now();
                    let r = tokio::time::timeout(
                        Duration::from_secs(10),
                        cri.exec_sync(&id, vec!["true".into()], 1),
                    )
                    .await;
                    latency.push(t.elapsed());
                    match r {
                        Ok(Ok((0, _, _))) => ok += 1,
                        _ => failed += 1,
                    }
                }
                (ok, failed, latency)
            })
        })
        .collect();
    let mut raw = RawExec::default();
    // The window is the same length as the others'.
    tokio::time::sleep_until(end).await;
    for t in tasks {
        let (ok, failed, latency) = t.await.unwrap_or_default();
        raw.ok.push(ok);
        raw.failed.push(failed);
        raw.latency.extend(latency);
    }
    raw
}

// ------------------------------------------------------------ the phases

#[derive(Debug, Clone)]
struct Phase {
    label: String,
    usage: Usage,
    /// Per container: PIDs used in its namespace between the markers, and
    /// the seconds between them (`None` where a marker failed).
    pids: Vec<Option<(u64, f64)>>,
    raw: Option<RawExec>,
    /// Ready pods after the window, of how many.
    ready: usize,
    pods: usize,
    /// Unhealthy events during the window.
    unhealthy: i64,
}

/// The server and what the bench uses of it.
struct Cluster {
    client: Client,
    pods: Api<Pod>,
    cri: CriRuntime,
    server: Server,
    needle: String,
}

impl Cluster {
    fn snapshot(&self) -> Snapshot {
        snapshot(
            self.server.pid(),
            self.server.containerd_pid(),
            &self.needle,
        )
    }
}

/// Markers, the window (idle, or with the bench's ExecSync loop), markers.
async fn window(
    c: &Cluster,
    args: &Args,
    label: String,
    containers: &[String],
    raw: Option<Duration>,
) -> anyhow::Result<Phase> {
    let (_, unhealthy0) = readiness(&c.client).await?;
    let m1 = markers(&c.cri, containers).await;
    let window = Duration::from_secs(args.window_secs);
    let s0 = c.snapshot();
    let raw = if let Some(period) = raw {
        Some(raw_exec_loop(&c.cri, containers, window, period).await)
    } else {
        tokio::time::sleep(window).await;
        None
    };
    let s1 = c.snapshot();
    let m2 = markers(&c.cri, containers).await;
    let (ready, unhealthy1) = readiness(&c.client).await?;
    let pids = m1
        .iter()
        .zip(&m2)
        .map(|(a, b)| {
            let (a, b) = (a.as_ref()?, b.as_ref()?);
            Some((b.0.checked_sub(a.0)?, (b.1 - a.1).as_secs_f64()))
        })
        .collect();
    let usage = Usage::between(&s0, &s1);
    eprintln!(
        "  {label}: server {:.2} s, containerd+shims {:.2} s CPU in {:.1} s",
        usage.server,
        usage.runtime(),
        usage.secs
    );
    Ok(Phase {
        label,
        usage,
        pids,
        raw,
        ready,
        pods: containers.len(),
        unhealthy: unhealthy1 - unhealthy0,
    })
}

async fn set_up(c: &Cluster, args: &Args, probe: Probe) -> anyhow::Result<Vec<String>> {
    eprintln!("{} pods ({}):", args.pods, probe.prefix());
    let names = create_pods(&c.pods, probe, args.pods).await?;
    let containers = wait_ready(&c.pods, &names).await?;
    tokio::time::sleep(Duration::from_secs(args.settle_secs)).await;
    Ok(containers)
}

/// PIDs one ExecSync uses in a container's PID namespace (runc init and
/// its threads), from a phase with no exec between its markers but the
/// first marker itself.
fn pids_per_exec(idle: &Phase) -> Option<f64> {
    let pids: Vec<u64> = idle.pids.iter().flatten().map(|(p, _)| *p).collect();
    (!pids.is_empty()).then(|| pids.iter().sum::<u64>() as f64 / pids.len() as f64)
}

/// Execs per second in a phase (all its pods), from its markers, one exec
/// using `k` PIDs.
fn exec_rate(p: &Phase, k: Option<f64>) -> Option<f64> {
    let k = k.filter(|k| *k > 0.0)?;
    let rates: Vec<f64> = p
        .pids
        .iter()
        .flatten()
        .filter(|(_, secs)| *secs > 0.0)
        .map(|(pids, secs)| (*pids as f64 / k - 1.0).max(0.0) / secs)
        .collect();
    // Scaled to all pods where some markers failed.
    (!rates.is_empty()).then(|| rates.iter().sum::<f64>() * p.pods as f64 / rates.len() as f64)
}

/// Exec probes first, so that the raw ExecSync floor can also run at the
/// rate the prober achieved (100 pods' exec probes ask more than a 2-core
/// machine runs); then the baseline and the floor on its pods, at one
/// call per container per second (d) and, if the prober fell behind, at
/// its rate (e); then httpGet.
async fn measure(c: &Cluster, args: &Args) -> anyhow::Result<Vec<Phase>> {
    let n = args.pods;
    let mut phases = Vec::new();
    let containers = set_up(c, args, Probe::Exec).await?;
    let exec = window(
        c,
        args,
        format!("(c) {n} pods, readiness exec [true] every 1 s"),
        &containers,
        None,
    )
    .await?;
    delete_all(&c.pods, &c.cri).await?;

    let containers = set_up(c, args, Probe::None).await?;
    let base = window(
        c,
        args,
        format!("(a) {n} pods, no probes"),
        &containers,
        None,
    )
    .await?;
    let literal = window(
        c,
        args,
        "(d) (a) + bench's raw ExecSync `true` on each every 1 s".to_string(),
        &containers,
        Some(Duration::from_secs(1)),
    )
    .await?;
    // When the prober fell behind, the floor once more at its rate.
    let achieved = exec_rate(&exec, pids_per_exec(&base)).filter(|r| *r > 0.0);
    let paced = match achieved {
        Some(r) if r < 0.95 * n as f64 => {
            let period = n as f64 / r;
            eprintln!("  raw ExecSync paced to (c)'s {r:.1}/s: every {period:.2} s");
            Some(
                window(
                    c,
                    args,
                    format!("(e) (a) + raw ExecSync paced to (c)'s rate, every {period:.2} s"),
                    &containers,
                    Some(Duration::from_secs_f64(period)),
                )
                .await?,
            )
        }
        _ => None,
    };
    phases.extend([base, exec, literal]);
    phases.extend(paced);
    delete_all(&c.pods, &c.cri).await?;

    let containers = set_up(c, args, Probe::HttpGet).await?;
    phases.push(
        window(
            c,
            args,
            format!("(b) {n} pods, readiness httpGet :{PORT} every 1 s"),
            &containers,
            None,
        )
        .await?,
    );
    Ok(phases)
}

// --------------------------------------------------------------- report

fn pct(cpu: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        cpu / secs * 100.0
    } else {
        0.0
    }
}

impl RawExec {
    fn calls(&self) -> u64 {
        self.ok.iter().sum::<u64>() + self.failed.iter().sum::<u64>()
    }
}

fn report(args: &Args, phases: &[Phase]) {
    let find = |tag: &str| phases.iter().find(|p| p.label.starts_with(tag));
    let (Some(a), Some(b), Some(c)) = (find("(a)"), find("(b)"), find("(c)")) else {
        return;
    };
    // The raw ExecSync phases, (d) and (e).
    let raws: Vec<(&Phase, &RawExec)> = phases
        .iter()
        .filter_map(|p| Some((p, p.raw.as_ref()?)))
        .collect();
    // PIDs per exec from (a)'s markers; cross-checked on the raw phases,
    // where each container got the counted calls between its markers.
    let per_exec = pids_per_exec(a);
    let (pid_sum, exec_sum) = raws
        .iter()
        .flat_map(|(p, raw)| p.pids.iter().zip(raw.ok.iter().zip(&raw.failed)))
        .filter_map(|(m, calls)| Some((m.as_ref()?.0, calls)))
        .fold((0u64, 0u64), |(p, e), (pids, (ok, failed))| {
            (p + pids, e + ok + failed + 1)
        });
    let per_exec_raw = (exec_sum > 0).then(|| pid_sum as f64 / exec_sum as f64);
    let exec_rate = |p: &Phase| exec_rate(p, per_exec);
    let http_rate = |p: &Phase| p.usage.tcp_opens as f64 / p.usage.secs.max(1e-9);
    let raw_rate = |p: &Phase| {
        p.raw
            .as_ref()
            .map_or(0.0, |r| r.calls() as f64 / p.usage.secs.max(1e-9))
    };

    let mut ordered = vec![a, b, c];
    ordered.extend(raws.iter().map(|(p, _)| *p));
    let base = &a.usage;
    let rows: Vec<Vec<String>> = ordered
        .iter()
        .map(|p| {
            let u = &p.usage;
            // In (b) the PIDs are httpd's forks, one per probe; (a)'s
            // markers are the unit.
            let exec = if p.raw.is_some() {
                format!(
                    "{:.1} (counted; ≈{:.1})",
                    raw_rate(p),
                    exec_rate(p).unwrap_or(0.0)
                )
            } else if std::ptr::eq(*p, b) || std::ptr::eq(*p, a) {
                "-".into()
            } else {
                exec_rate(p).map_or("-".into(), |r| format!("≈{r:.1}"))
            };
            let delta = |x: f64, y: f64| {
                if std::ptr::eq(*p, a) {
                    "-".to_string()
                } else {
                    format!("{:+.2} %", pct(x, u.secs) - pct(y, base.secs))
                }
            };
            vec![
                p.label.clone(),
                format!("{:.1}", http_rate(p)),
                exec,
                format!("{:.2} %", pct(u.server, u.secs)),
                delta(u.server, base.server),
                format!("{:.2} %", pct(u.containerd, u.secs)),
                format!("{:.2} % ({})", pct(u.shims, u.secs), u.shim_count),
                delta(u.runtime(), base.runtime()),
                format!("{:.2} % ({})", pct(u.pods, u.secs), u.pod_procs),
                format!("{:.2} %", pct(u.bench, u.secs)),
                format!("{:.2}", u.machine / u.secs),
                format!("{}/{} · {}", p.ready, p.pods, p.unhealthy),
            ]
        })
        .collect();
    print_grid(
        &format!(
            "Readiness probes: CPU % of one core over a {} s window per phase (/proc/PID/stat utime+stime+cutime+cstime)",
            args.window_secs
        ),
        &[
            "phase",
            "httpGet/s (TCP opens)",
            "exec/s (PIDs used)",
            "skiff server",
            "Δ server",
            "containerd",
            "shims+runc (n)",
            "Δ containerd+shims",
            "pods' processes (n)",
            "bench",
            "machine busy (cores)",
            "Ready · Unhealthy",
        ],
        &rows,
    );

    // Per probe: the deltas over the baseline, divided by the rate.
    let per = |cpu: f64, secs: f64, base: f64, base_secs: f64, rate: f64| -> String {
        if rate <= 0.0 {
            return "-".into();
        }
        let extra = cpu / secs - base / base_secs; // cores
        format!("{:.2} ms", extra / rate * 1e3)
    };
    let rb = http_rate(b);
    let rc = exec_rate(c).unwrap_or(0.0);
    let mut rated = vec![(b, rb), (c, rc)];
    rated.extend(raws.iter().map(|(p, _)| (*p, raw_rate(p))));
    let cost_rows = rated
        .iter()
        .map(|(p, r)| {
            let u = &p.usage;
            let mut lat = p
                .raw
                .as_ref()
                .map(|r| r.latency.clone())
                .unwrap_or_default();
            vec![
                p.label.clone(),
                format!("{r:.1}"),
                per(u.server, u.secs, base.server, base.secs, *r),
                per(u.runtime(), u.secs, base.runtime(), base.secs, *r),
                per(u.pods, u.secs, base.pods, base.secs, *r),
                per(u.bench, u.secs, base.bench, base.secs, *r),
                if lat.is_empty() {
                    "-".into()
                } else {
                    format!(
                        "{:.0} / {:.0} ms, {} of {} failed",
                        percentile(&mut lat, 50.0).as_secs_f64() * 1e3,
                        percentile(&mut lat, 99.0).as_secs_f64() * 1e3,
                        p.raw.as_ref().map_or(0, |r| r.failed.iter().sum::<u64>()),
                        p.raw.as_ref().map_or(0, RawExec::calls),
                    )
                },
            ]
        })
        .collect::<Vec<_>>();
    print_grid(
        "CPU per probe (delta over (a), divided by the measured rate)",
        &[
            "phase",
            "probes/s",
            "skiff server",
            "containerd+shims+runc",
            "pods' processes",
            "bench",
            "ExecSync p50 / p99",
        ],
        &cost_rows,
    );

    let d_server = |p: &Phase| pct(p.usage.server, p.usage.secs) - pct(base.server, base.secs);
    let d_runtime =
        |p: &Phase| pct(p.usage.runtime(), p.usage.secs) - pct(base.runtime(), base.secs);
    let d_pods = |p: &Phase| pct(p.usage.pods, p.usage.secs) - pct(base.pods, base.secs);
    let d_bench = |p: &Phase| pct(p.usage.bench, p.usage.secs) - pct(base.bench, base.secs);
    let x = d_server(b);
    println!(
        "\nhttpGet probes: {x:.2} % of one core (target < 5 %: {}) at {rb:.1} probes/s; \
         containerd+shims {:+.2} %, pods' httpd {:+.2} %",
        if x < 5.0 { "met" } else { "MISSED" },
        d_runtime(b),
        d_pods(b),
    );
    let ratio = |p: f64, q: f64| {
        if q > 0.0 {
            format!("{:.2}×", p / q)
        } else {
            "-".into()
        }
    };
    // Per call (ms of CPU), for rates that differ.
    let each = |pct: f64, rate: f64| if rate > 0.0 { pct * 10.0 / rate } else { 0.0 };
    let (y, z) = (d_server(c), d_runtime(c));
    println!(
        "exec probes: agent {y:.2} % + runtime {z:.2} % at ≈{rc:.1} probes/s ({} asked); per \
         probe agent {:.2} ms + runtime {:.1} ms",
        c.pods,
        each(y, rc),
        each(z, rc),
    );
    for (p, _) in &raws {
        let (w, v, rd) = (d_runtime(p), d_bench(p), raw_rate(p));
        let tag = p.label.split_whitespace().next().unwrap_or_default();
        println!(
            "  vs raw ExecSync {tag} at {rd:.1}/s: runtime {w:.2} % (+ bench client {v:.2} %); \
             runtime ratio {}, total ratio {}; per call runtime {:.1} ms ({} of it), client \
             {:.2} ms",
            ratio(z, w),
            ratio(y + z, w + v),
            each(w, rd),
            ratio(each(z, rc), each(w, rd)),
            each(v, rd),
        );
    }
    println!(
        "one exec uses ≈{} PIDs in the container's namespace by (a)'s markers (the exec/s \
         column's unit), ≈{} by the raw phases' counted calls",
        per_exec.map_or("-".into(), |k| format!("{k:.2}")),
        per_exec_raw.map_or("-".into(), |k| format!("{k:.2}")),
    );
    println!(
        "CPU % is of one core; the machine has {} cores, and \"machine busy\" is everything on it \
         (other builds included). containerd+shims: the node's containerd and its shims, with runc \
         and the exec'd commands (reaped by the shims); pods' processes: pause and httpd.",
        std::thread::available_parallelism().map_or(0, |n| n.get())
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
        args.pods > 0 && args.window_secs > 0,
        "--pods and --window-secs must be > 0"
    );
    for binary in ["containerd", "ctr", "runc"] {
        anyhow::ensure!(on_path(binary).is_some(), "{binary} is not installed");
    }
    // Locals drop in reverse order: the server is stopped and reset before
    // the lease and the work dir go.
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-probes-")
        .tempdir()?;
    let lease = Lease::take(240)?;
    skiff_node::network::remove_bridge(&lease.bridge());
    eprintln!("work dir {}", work.path().display());
    let cidr = format!("10.{}.0.0/16", lease.octet);
    let data_dir = work.path().join("server");
    let mut server = Server::spawn(
        &skiff,
        data_dir.clone(),
        &cidr,
        &lease.bridge(),
        &args.log,
        work.path().join("server.log"),
        &work.path().join("reset.log"),
    )?;
    let client = server.client(Duration::from_secs(60)).await?;
    wait_node_ready(&client, Duration::from_secs(120)).await?;
    eprintln!("skiff: node Ready (bridge {}, {cidr})", lease.bridge());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    bounded(
        "creating the namespace",
        namespaces.create(&PostParams::default(), &ns),
    )
    .await?;
    let cri = CriRuntime::new(server.containerd_dir().join("containerd.sock"))?;
    let cluster = Cluster {
        pods: Api::namespaced(client.clone(), NS),
        client,
        cri,
        needle: data_dir.display().to_string(),
        server,
    };
    let result = measure(&cluster, args).await;
    if let Some(dir) = &args.keep_logs {
        std::fs::create_dir_all(dir)?;
        for (from, to) in [
            (cluster.server.log.clone(), "skiff-server.log"),
            (
                cluster.server.containerd_dir().join("containerd.log"),
                "skiff-containerd.log",
            ),
        ] {
            let _ = std::fs::copy(from, dir.join(to));
        }
    }
    let phases = match result {
        Ok(p) => p,
        Err(e) => {
            return Err(e.context(format!("server log tail:\n{}", cluster.server.log_tail())));
        }
    };
    drop(cluster); // SIGTERM, then skiff reset
    report(args, &phases);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_passive_opens_of_our_own_namespace() {
        assert!(passive_opens(std::process::id()).is_some());
    }

    #[test]
    fn reads_our_own_cpu() {
        let (ppid, cpu) = stat_of(std::process::id()).expect("own stat");
        assert!(ppid > 0);
        assert!(cpu >= 0.0);
    }

    #[test]
    fn pods_carry_the_probe() {
        let p = pod_json("x", Probe::Exec);
        assert_eq!(
            p["spec"]["containers"][0]["readinessProbe"]["exec"]["command"][0],
            "true"
        );
        assert!(pod_json("x", Probe::None)["spec"]["containers"][0]
            .get("readinessProbe")
            .is_none());
    }
}
