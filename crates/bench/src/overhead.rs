//! `skiff-bench overhead`: what recording and exporting cost, in one run
//! on one machine. Two `skiff server`s run side by side, each with its own
//! data dir, ports, bridge, pod and Service ranges and containerd:
//!
//! - **on**: as shipped (startup timelines and metrics recorded, `/metrics`
//!   served, metrics.k8s.io scraped);
//! - **off**: `--startup-timelines=false --metrics=false`.
//!
//! Each also has a `skiff sim` beside it (simulated nodes, as `skiff-bench
//! sim`). Every round measures, on both sides:
//!
//! - (a) pods started one at a time on the real node (busybox, pinned
//!   with a nodeSelector; scheduled by the server's scheduler), timed from
//!   the create request to Running and to Ready as a watch sees them,
//!   pods alternating between the sides (the order flips pod by pod);
//! - (b) the sim benchmark's shape: P pods created by C HTTP/2 clients
//!   onto the simulated nodes, timed from the first create until the
//!   watch sees all Running; one side, then the other.
//!
//! `--sides` picks the sides in the order they are started (the first
//! takes the first address lease): `off,on` swaps them, and `on,on` is a
//! control run, where any difference is the sides' own.
//!
//! Rounds alternate which side goes first (on,off then off,on, …), so a
//! drift in the machine's background load falls on both; a warm-up round
//! comes first and is not counted, and each phase starts only once the
//! previous one's teardown is over (no sandbox or container left in either
//! containerd, then both sides quiet, children and sims included). It
//! prints per round figures, their median, spread (min–max) and the on/off
//! ratio, also by which side went first and balanced over the order,
//! beside counts that must not drift between the sides (pod writes and
//! Events per pod) and the servers' CPU. It never asserts timings.
//!
//! Everything it starts is stopped by PID and both data dirs are cleared
//! with `skiff reset` (bridges, CNI state, containers), also on errors
//! and Ctrl-C.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use kube::Client;
use serde_json::{json, Value};

use skiff_node::runtime::cri::CriRuntime;
use skiff_node::runtime::Runtime as _;

use crate::h2::H2;
use crate::node::{bounded, on_path, wait_node_ready, Lease, Server, NODE};
use crate::stats::{percentile, print_grid};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Rounds run first and not counted (the first sim phase of a fresh
    /// server fills its caches and the store's pages).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Pods started one at a time per side per round (a).
    #[arg(long, default_value_t = 10)]
    pods: usize,
    /// Simulated nodes beside each server (at most 64).
    #[arg(long, default_value_t = 50)]
    sim_nodes: usize,
    /// Pods created onto the simulated nodes per side per round (b).
    #[arg(long, default_value_t = 500)]
    sim_pods: usize,
    /// Concurrent API clients creating and deleting the simulated pods.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// SKIFF_LOG of the servers.
    #[arg(long, default_value = "warn")]
    log: String,
    /// Copy both servers' logs into this directory before cleaning up.
    #[arg(long)]
    keep_logs: Option<PathBuf>,
    /// The two sides, in the order they are started (the first takes the
    /// first address lease): `on,off` (default), `off,on` to swap which
    /// side is started first, `on,on` or `off,off` for a control run
    /// where any difference is the sides' own, not the flags'.
    #[arg(long, default_value = "on,off", value_parser = parse_sides)]
    sides: [bool; 2],
}

/// `--sides`: whether each side runs with recording and exporting off.
fn parse_sides(s: &str) -> Result<[bool; 2], String> {
    let flag = |w: &str| match w.trim() {
        "on" => Ok(false),
        "off" => Ok(true),
        other => Err(format!("{other:?}: each side is on or off")),
    };
    match s.split_once(',') {
        Some((a, b)) => Ok([flag(a)?, flag(b)?]),
        None => Err("two sides, as on,off".into()),
    }
}

/// The sides' labels: on and off, numbered when both are alike.
fn side_labels(off: [bool; 2]) -> [String; 2] {
    let word = |o: bool| if o { "off" } else { "on" };
    if off[0] == off[1] {
        [format!("{}1", word(off[0])), format!("{}2", word(off[1]))]
    } else {
        [word(off[0]).to_string(), word(off[1]).to_string()]
    }
}

const IMAGE: &str = "docker.io/library/busybox:latest";
const NS: &str = "bench";
const SIM_NS: &str = "bench-sim";
const POD_TIMEOUT: Duration = Duration::from_secs(90);
const SIM_TIMEOUT: Duration = Duration::from_secs(300);
/// After each pod the bench waits this long, so that what a side does
/// after its pod is up (events, a second status sync) does not slow the
/// other side's next pod.
const SETTLE: Duration = Duration::from_millis(300);
/// After the one-at-a-time pods are deleted (their objects gone), the
/// agents still tear their sandboxes down, and after a sim phase the sim
/// and the server clean up: the next phase waits until both containerds
/// have no sandbox and no container of ours left ([`torn_down`]), then
/// until both sides are quiet ([`quiet`]: under their idle rate plus
/// [`QUIET_CPU`] of a core over [`QUIET_WINDOW`]), each at most
/// [`TEARDOWN`], so that one side's phase does not run beside the other's
/// leftover work.
///
/// The CPU counted is the servers', the containerds' and the sims', each
/// with its reaped children's (runc, the CNI plugins and iptables run as
/// containerd's children: while it waits for them containerd itself is
/// idle). When only the servers' and containerds' own CPU was counted, the
/// first sim phase of a round could start beside the real pods' teardown:
/// the likely reason it was the slower one in most rounds, whichever side
/// it was.
const TEARDOWN: Duration = Duration::from_secs(30);
const QUIET_WINDOW: Duration = Duration::from_millis(500);
const QUIET_CPU: f64 = 0.05;

/// CPU seconds of `pid` and of its children it has waited for (utime,
/// stime, cutime, cstime).
fn cpu_with_children(pid: Option<u32>) -> f64 {
    let Some(pid) = pid else { return 0.0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')';
    // utime, stime, cutime, cstime are fields 14 to 17 (11 to 14 after it).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    (11..=14)
        .filter_map(|i| fields.get(i)?.parse::<f64>().ok())
        .sum::<f64>()
        / 100.0
}

/// Waits until neither side's containerd has a sandbox or a container of
/// the benchmark's pods (at most [`TEARDOWN`]).
async fn torn_down(sides: &[Side; 2]) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + TEARDOWN;
    loop {
        let ours = |labels: &HashMap<String, String>| {
            labels
                .get("io.kubernetes.pod.namespace")
                .map(String::as_str)
                == Some(NS)
        };
        let mut left = 0;
        for s in sides {
            let sandboxes = bounded("ListPodSandbox", s.cri.list_pod_sandboxes()).await?;
            let containers = bounded("ListContainers", s.cri.list_containers()).await?;
            left += sandboxes.iter().filter(|x| ours(&x.labels)).count();
            left += containers.iter().filter(|x| ours(&x.labels)).count();
        }
        if left == 0 {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            eprintln!("{left} sandboxes and containers still there after {TEARDOWN:?}; going on");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long the sides' idle CPU is measured, before the first round.
const IDLE_WINDOW: Duration = Duration::from_secs(3);

/// The share of a core both sides (servers, containerds and sims, with
/// their children) use together over [`IDLE_WINDOW`]: their idle rate
/// (Leases and Node status of the simulated nodes), measured once before
/// the first round.
async fn idle_rate(sides: &[Side; 2]) -> f64 {
    let used = || sides.iter().map(Side::all_cpu).sum::<f64>();
    let before = used();
    // The measuring window, not a wait standing in for a condition.
    tokio::time::sleep(IDLE_WINDOW).await;
    (used() - before) / IDLE_WINDOW.as_secs_f64()
}

/// Waits until both sides (servers, containerds and sims, with their
/// children) together use under their idle rate plus [`QUIET_CPU`] of a
/// core over [`QUIET_WINDOW`] (at most [`TEARDOWN`]).
async fn quiet(sides: &[Side; 2], idle: f64) {
    let deadline = std::time::Instant::now() + TEARDOWN;
    let used = || sides.iter().map(Side::all_cpu).sum::<f64>();
    let mut before = used();
    while std::time::Instant::now() < deadline {
        // The measuring window, not a wait standing in for a condition.
        tokio::time::sleep(QUIET_WINDOW).await;
        let now = used();
        if now - before < (idle + QUIET_CPU) * QUIET_WINDOW.as_secs_f64() {
            return;
        }
        before = now;
    }
    eprintln!("the servers were still busy after {TEARDOWN:?}; going on");
}

/// The flags that turn recording and exporting off.
const OFF_FLAGS: [&str; 2] = ["--startup-timelines=false", "--metrics=false"];

// ------------------------------------------------------------- the watch

/// What the watch saw of one pod (the first time of each).
#[derive(Debug, Default, Clone)]
struct Seen {
    events: u32,
    running: Option<Instant>,
    ready: Option<Instant>,
}

#[derive(Default)]
struct State {
    pods: HashMap<String, Seen>,
    /// Pods present that have been seen Running.
    running: usize,
    /// Every ADDED and MODIFIED event (pod writes the watch saw).
    events: u64,
}

/// A kube-runtime watcher of one namespace's pods.
struct Watch {
    state: Arc<Mutex<State>>,
    tick: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Watch {
    async fn start(client: Client, ns: &str) -> anyhow::Result<Self> {
        let api: Api<Pod> = Api::namespaced(client, ns);
        let state: Arc<Mutex<State>> = Arc::default();
        let (tx, tick) = tokio::sync::watch::channel(0u64);
        let (synced_tx, mut synced) = tokio::sync::watch::channel(false);
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                {
                    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                    match event {
                        Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                            let Some(name) = pod.metadata.name.clone() else {
                                continue;
                            };
                            s.events += 1;
                            let status = pod.status.as_ref();
                            let running =
                                status.and_then(|s| s.phase.as_deref()) == Some("Running");
                            let ready =
                                status
                                    .and_then(|s| s.conditions.as_ref())
                                    .is_some_and(|cs| {
                                        cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                    });
                            let seen = s.pods.entry(name).or_default();
                            seen.events += 1;
                            let newly_running = running && seen.running.is_none();
                            if running {
                                seen.running.get_or_insert(now);
                            }
                            if ready {
                                seen.ready.get_or_insert(now);
                            }
                            if newly_running {
                                s.running += 1;
                            }
                        }
                        Ok(watcher::Event::Delete(pod)) => {
                            if let Some(name) = pod.metadata.name {
                                if let Some(seen) = s.pods.remove(&name) {
                                    s.running -= usize::from(seen.running.is_some());
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            synced_tx.send_replace(true);
                        }
                        Ok(watcher::Event::Init) => {}
                        Err(e) => eprintln!("pod watch: {e}"),
                    }
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced.wait_for(|s| *s))
            .await
            .map_err(|_| anyhow!("the pod watch did not sync within 30 s"))??;
        Ok(Self { state, tick, task })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, name: &str) -> Seen {
        self.lock().pods.get(name).cloned().unwrap_or_default()
    }

    async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&State) -> bool,
    ) -> anyhow::Result<()> {
        let mut tick = self.tick.clone();
        let state = self.state.clone();
        tokio::time::timeout(
            timeout,
            tick.wait_for(|_| cond(&state.lock().unwrap_or_else(|e| e.into_inner()))),
        )
        .await
        .map_err(|_| anyhow!("timed out after {timeout:?} waiting for {what}"))?
        .map_err(|_| anyhow!("the pod watch ended while waiting for {what}"))?;
        Ok(())
    }
}

// ------------------------------------------------------------- processes

/// A `skiff sim` beside a server, stopped by PID when dropped.
struct Sim {
    child: Option<Child>,
}

impl Sim {
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            crate::cluster::stop_child(&mut child, Duration::from_secs(10));
        }
    }
}

/// One server, its sim and what the bench uses of them; fields drop in
/// order: the watches end, the sim stops, then the server is stopped and
/// reset.
struct Side {
    name: String,
    watch: Watch,
    sim_watch: Watch,
    pods: Api<Pod>,
    client: Client,
    h2: H2,
    /// The server's containerd, for [`torn_down`].
    cri: CriRuntime,
    sim: Sim,
    server: Server,
}

impl Side {
    fn server_cpu(&self) -> f64 {
        cpu_of(self.server.pid())
    }

    /// The server's and its containerd's CPU seconds.
    fn node_cpu(&self) -> f64 {
        cpu_of(self.server.pid()) + cpu_of(self.server.containerd_pid())
    }

    /// The server's, its containerd's and the sim's CPU seconds, each
    /// with its reaped children's.
    fn all_cpu(&self) -> f64 {
        [
            self.server.pid(),
            self.server.containerd_pid(),
            self.sim.pid(),
        ]
        .into_iter()
        .map(cpu_with_children)
        .sum()
    }
}

fn cpu_of(pid: Option<u32>) -> f64 {
    pid.map_or(0.0, |p| crate::cluster::cpu_seconds(&p.to_string()))
}

/// The `i`-th address of a `/17` starting at `base` (`10.o.128.0`).
fn service_ip(octet: u8, i: u8) -> String {
    format!("10.{octet}.128.{i}")
}

async fn start_side(
    args: &Args,
    skiff: &Path,
    work: &Path,
    lease: &Lease,
    name: &str,
    off: bool,
) -> anyhow::Result<Side> {
    let o = lease.octet;
    // The pod range's lower half is the real node's (IPAM gives it the
    // first /24); the simulated nodes register with /24s of the upper
    // quarter. Services get the other /17.
    let cidr = format!("10.{o}.0.0/17");
    let service_cidr = format!("10.{o}.128.0/17");
    let mut extra = vec!["--service-cidr", service_cidr.as_str()];
    if off {
        extra.extend(OFF_FLAGS);
    }
    let dir = work.join(name);
    std::fs::create_dir_all(&dir)?;
    let mut server = Server::spawn_with(
        skiff,
        dir.join("server"),
        &cidr,
        &lease.bridge(),
        &args.log,
        dir.join("server.log"),
        &work.join("reset.log"),
        &extra,
    )?;
    let client = server.client(Duration::from_secs(60)).await?;
    wait_node_ready(&client, Duration::from_secs(120)).await?;
    eprintln!(
        "{name}: node {NODE} Ready (bridge {}, {cidr}{})",
        lease.bridge(),
        if off {
            format!(", {}", OFF_FLAGS.join(" "))
        } else {
            String::new()
        }
    );
    for ns in [NS, SIM_NS] {
        crate::cluster::create_namespace(&client, ns).await?;
    }

    use std::os::unix::process::CommandExt as _;
    let sim_log = std::fs::File::create(dir.join("sim.log"))?;
    let child = Command::new(skiff)
        .arg("sim")
        .arg("--kubeconfig")
        .arg(server.data_dir.join("admin.kubeconfig"))
        .args(["--nodes", &args.sim_nodes.to_string()])
        .args(["--name-prefix", &format!("sim-{name}-")])
        .args(["--pod-cidr-range", &format!("10.{o}.64.0/18")])
        .args(["--cluster-dns", &service_ip(o, 10)])
        .arg("--data-dir")
        .arg(dir.join("sim"))
        .env("SKIFF_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(sim_log)
        // Its own process group: Ctrl-C reaches the bench, which stops it.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {} sim", skiff.display()))?;
    let sim = Sim { child: Some(child) };
    wait_sim_nodes(&client, args.sim_nodes, Duration::from_secs(120)).await?;
    eprintln!("{name}: {} simulated nodes Ready", args.sim_nodes);
    let watch = Watch::start(client.clone(), NS).await?;
    let sim_watch = Watch::start(client.clone(), SIM_NS).await?;
    let h2 = H2::connect(
        &server.data_dir.join("admin.kubeconfig"),
        crate::h2::CONNECTIONS,
    )
    .await?;
    let cri = CriRuntime::new(server.containerd_dir().join("containerd.sock"))?;
    Ok(Side {
        name: name.to_string(),
        watch,
        sim_watch,
        pods: Api::namespaced(client.clone(), NS),
        client,
        h2,
        cri,
        sim,
        server,
    })
}

async fn wait_sim_nodes(client: &Client, want: usize, timeout: Duration) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        let list = nodes
            .list(&ListParams::default().labels("type=skiff-sim"))
            .await?;
        let ready = list
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= want {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready}/{want} simulated nodes Ready after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ----------------------------------------------------------------- pods

/// The one-at-a-time pod: busybox `sleep 3600`, grace 0, on the real
/// node.
fn real_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "skiff-bench"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [{
                "name": "sleep",
                "image": IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sleep", "3600"],
            }],
        },
    })
}

/// A pod for the simulated nodes (as `skiff-bench sim`'s, grace 0).
fn sim_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": SIM_NS, "labels": {"app": "bench-sim"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"type": "skiff-sim"},
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}],
        },
    })
}

/// Creates a pod on `side` and waits until it is Running and Ready;
/// (to Running, to Ready) from the create request.
async fn start_one(side: &Side, name: &str) -> anyhow::Result<(Duration, Duration)> {
    let pod: Pod = serde_json::from_value(real_pod(name))?;
    let created = Instant::now();
    bounded(
        "creating a pod",
        side.pods.create(&PostParams::default(), &pod),
    )
    .await?;
    side.watch
        .wait(
            &format!("{} pod {name} Ready", side.name),
            POD_TIMEOUT,
            |s| {
                s.pods
                    .get(name)
                    .is_some_and(|p| p.running.is_some() && p.ready.is_some())
            },
        )
        .await?;
    let seen = side.watch.get(name);
    let (Some(running), Some(ready)) = (seen.running, seen.ready) else {
        bail!("{name}: not seen Running and Ready");
    };
    Ok((running - created, ready - created))
}

/// Deletes `names` (grace 0) on `side` and waits until the watch has
/// seen them all go.
async fn delete_all(side: &Side, watch: &Watch, ns: &str, names: &[String]) -> anyhow::Result<()> {
    let collection = format!("/api/v1/namespaces/{ns}/pods");
    futures::stream::iter(names)
        .map(|name| {
            let path = format!("{collection}/{name}");
            async move { side.h2.delete(&path).await }
        })
        .buffer_unordered(16)
        .try_collect::<()>()
        .await?;
    watch
        .wait(
            &format!("{} pods in {ns} gone", side.name),
            SIM_TIMEOUT,
            |s| names.iter().all(|n| !s.pods.contains_key(n)),
        )
        .await
}

/// The sim benchmark's phase on `side`: `n` pods created by
/// `concurrency` clients until all are Running; the time from the first
/// create, and the server's CPU seconds meanwhile.
async fn sim_phase(
    side: &Side,
    round: usize,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<(Duration, f64, u64, i64)> {
    let collection = format!("/api/v1/namespaces/{SIM_NS}/pods");
    let names: Vec<String> = (0..n).map(|i| format!("r{round}-{i}")).collect();
    let bodies: Vec<bytes::Bytes> = names
        .iter()
        .map(|name| Ok(serde_json::to_vec(&sim_pod(name))?.into()))
        .collect::<anyhow::Result<_>>()?;
    let r0 = crate::sim::revision(&side.client).await?;
    let events0 = side.sim_watch.lock().events;
    let cpu0 = side.server_cpu();
    let began = Instant::now();
    futures::stream::iter(bodies)
        .map(|body| {
            let collection = &collection;
            async move { side.h2.post(collection, body).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    side.sim_watch
        .wait(
            &format!("{} sim pods Running", side.name),
            SIM_TIMEOUT,
            |s| s.running >= n,
        )
        .await?;
    let took = began.elapsed();
    let cpu = side.server_cpu() - cpu0;
    let events = side.sim_watch.lock().events - events0;
    let writes = crate::sim::revision(&side.client).await? - r0;
    delete_all(side, &side.sim_watch, SIM_NS, &names).await?;
    Ok((took, cpu, events, writes))
}

// ---------------------------------------------------------- measurement

/// One side's figures in one round.
#[derive(Debug, Default, Clone)]
struct Figures {
    running: Vec<Duration>,
    ready: Vec<Duration>,
    /// Server + containerd CPU seconds over the round's one-at-a-time
    /// pods (both sides' pods alternate in that window).
    cpu_a: f64,
    /// Pod watch events (creates, binds, status writes) over those pods.
    events_a: u64,
    /// Store writes over those pods (also the background: Leases, Node
    /// status, the simulated nodes').
    writes_a: i64,
    sim_running: Duration,
    sim_cpu: f64,
    sim_events: u64,
    sim_writes: i64,
}

impl Figures {
    fn p50(v: &[Duration]) -> Duration {
        percentile(&mut v.to_vec(), 50.0)
    }
}

async fn measure(args: &Args, sides: &[Side; 2]) -> anyhow::Result<Vec<[Figures; 2]>> {
    let idle = idle_rate(sides).await;
    eprintln!(
        "idle: both sides use {:.1}% of a core together",
        idle * 100.0
    );
    let mut rounds = Vec::new();
    for round in 0..args.warmup + args.rounds {
        // The measured rounds go on,off then off,on, …
        let counted = round.checked_sub(args.warmup);
        let first = counted.unwrap_or(round) % 2;
        let mut figures: [Figures; 2] = Default::default();
        let mut names: [Vec<String>; 2] = Default::default();
        let before: Vec<(f64, u64, i64)> = {
            let mut v = Vec::new();
            for s in sides {
                let events = s.watch.lock().events;
                v.push((s.node_cpu(), events, crate::sim::revision(&s.client).await?));
            }
            v
        };
        for i in 0..args.pods {
            let a = (first + i) % 2;
            for k in [a, 1 - a] {
                let name = format!("r{round}-{i}");
                let (running, ready) = start_one(&sides[k], &name).await?;
                figures[k].running.push(running);
                figures[k].ready.push(ready);
                names[k].push(name);
                tokio::time::sleep(SETTLE).await;
            }
        }
        for (k, s) in sides.iter().enumerate() {
            figures[k].cpu_a = s.node_cpu() - before[k].0;
            figures[k].events_a = s.watch.lock().events - before[k].1;
            figures[k].writes_a = crate::sim::revision(&s.client).await? - before[k].2;
        }
        for (k, s) in sides.iter().enumerate() {
            delete_all(s, &s.watch, NS, &names[k]).await?;
        }
        torn_down(sides).await?;
        quiet(sides, idle).await;
        for k in [first, 1 - first] {
            let (took, cpu, events, writes) =
                sim_phase(&sides[k], round, args.sim_pods, args.concurrency).await?;
            figures[k].sim_running = took;
            figures[k].sim_cpu = cpu;
            figures[k].sim_events = events;
            figures[k].sim_writes = writes;
            quiet(sides, idle).await;
        }
        let label = match counted {
            Some(r) => format!("round {}/{}", r + 1, args.rounds),
            None => format!("warm-up round {}/{} (not counted)", round + 1, args.warmup),
        };
        eprintln!(
            "{label} ({} first): pod start p50 to Running {} {} / {} {}, to Ready {} / {}; sim pods Running {:.2} s / {:.2} s",
            sides[first].name,
            ms(Figures::p50(&figures[0].running)),
            sides[0].name,
            ms(Figures::p50(&figures[1].running)),
            sides[1].name,
            ms(Figures::p50(&figures[0].ready)),
            ms(Figures::p50(&figures[1].ready)),
            figures[0].sim_running.as_secs_f64(),
            figures[1].sim_running.as_secs_f64(),
        );
        if counted.is_some() {
            rounds.push(figures);
        }
    }
    Ok(rounds)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

fn median_f(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// (median, min, max) of the per-round values.
fn summary(v: &[f64]) -> (f64, f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median_f(v.to_vec()), min, max)
}

fn report(args: &Args, rounds: &[[Figures; 2]], counts: &[Counts; 2], speed: (Duration, Duration)) {
    // Per-round figures, in ms (pod start) and s (sim).
    type Metric = (&'static str, fn(&Figures) -> f64, fn(f64) -> String);
    let metrics: [Metric; 3] = [
        (
            "pod start → Running p50",
            |f| Figures::p50(&f.running).as_secs_f64() * 1e3,
            |v| format!("{v:.0} ms"),
        ),
        (
            "pod start → Ready p50",
            |f| Figures::p50(&f.ready).as_secs_f64() * 1e3,
            |v| format!("{v:.0} ms"),
        ),
        (
            "sim pods all Running",
            |f| f.sim_running.as_secs_f64(),
            |v| format!("{v:.2} s"),
        ),
    ];
    let [l0, l1] = side_labels(args.sides);
    let mut headers = vec!["round (first)".to_string()];
    for (name, _, _) in &metrics {
        headers.push(format!("{name}: {l0}"));
        headers.push(l1.clone());
    }
    let mut rows: Vec<Vec<String>> = rounds
        .iter()
        .enumerate()
        .map(|(r, f)| {
            let mut row = vec![format!(
                "{} ({})",
                r + 1,
                if r % 2 == 0 { &l0 } else { &l1 }
            )];
            for (_, get, fmt) in &metrics {
                row.push(fmt(get(&f[0])));
                row.push(fmt(get(&f[1])));
            }
            row
        })
        .collect();
    let per_side = |get: fn(&Figures) -> f64, k: usize| -> Vec<f64> {
        rounds.iter().map(|f| get(&f[k])).collect()
    };
    let mut median = vec!["median".to_string()];
    let mut spread = vec!["spread (min–max)".to_string()];
    let mut spread_pct = vec!["spread / median".to_string()];
    let mut ratio = vec![format!("{l0}/{l1} (medians)")];
    // Per-round ratios by which side went first: their difference is what
    // the order still does; their geometric mean is free of it (an odd
    // number of rounds has one order once more).
    let mut ratio_on_first = vec![format!("{l0}/{l1}, rounds with {l0} first (median)")];
    let mut ratio_off_first = vec![format!("{l0}/{l1}, rounds with {l1} first (median)")];
    let mut balanced = vec![format!(
        "{l0}/{l1}, order-balanced (geometric mean of the two)"
    )];
    for (_, get, _) in &metrics {
        let by_order = |first: usize| -> Vec<f64> {
            rounds
                .iter()
                .enumerate()
                .filter(|(r, _)| r % 2 == first)
                .map(|(_, f)| get(&f[0]) / get(&f[1]).max(1e-9))
                .collect()
        };
        let (a, b) = (by_order(0), by_order(1));
        let (ma, mb) = (median_f(a.clone()), median_f(b.clone()));
        ratio_on_first.push(format!("{ma:.3} ({} rounds)", a.len()));
        ratio_on_first.push(String::new());
        ratio_off_first.push(format!("{mb:.3} ({} rounds)", b.len()));
        ratio_off_first.push(String::new());
        balanced.push(if a.is_empty() || b.is_empty() {
            "-".into()
        } else {
            format!("{:.3}", (ma * mb).sqrt())
        });
        balanced.push(String::new());
    }
    for (_, get, fmt) in &metrics {
        let on = summary(&per_side(*get, 0));
        let off = summary(&per_side(*get, 1));
        for s in [on, off] {
            median.push(fmt(s.0));
            spread.push(format!("{}–{}", fmt(s.1), fmt(s.2)));
            spread_pct.push(format!("{:.0}%", (s.2 - s.1) / s.0.max(1e-9) * 100.0));
        }
        ratio.push(format!("{:.3}", on.0 / off.0.max(1e-9)));
        ratio.push(String::new());
    }
    rows.extend([
        median,
        spread,
        spread_pct,
        ratio,
        ratio_on_first,
        ratio_off_first,
        balanced,
    ]);
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    print_grid(
        &format!(
            "recording and exporting: {l0} vs {l1}, started in that order (on: as shipped; off: {}): {} interleaved rounds after {} warm-up; per round {} pods one at a time per side on the real node (alternating sides), then {} pods on {} simulated nodes by {} clients per side",
            OFF_FLAGS.join(" "),
            args.rounds,
            args.warmup,
            args.pods,
            args.sim_pods,
            args.sim_nodes,
            args.concurrency,
        ),
        &headers,
        &rows,
    );

    // Counts that should not drift, and the CPU the sides used.
    let total = |get: fn(&Figures) -> f64, k: usize| -> f64 { per_side(get, k).iter().sum() };
    let pods = (args.pods * rounds.len()).max(1) as f64;
    let sim_pods = (args.sim_pods * rounds.len()).max(1) as f64;
    let row = |what: &str, on: String, off: String| vec![what.to_string(), on, off];
    let both = |get: fn(&Figures) -> f64, per: f64, fmt: fn(f64) -> String| {
        (fmt(total(get, 0) / per), fmt(total(get, 1) / per))
    };
    let one = |v: f64| format!("{v:.1}");
    let cpu_ms = |v: f64| format!("{:.0} ms", v * 1e3);
    let mut rows = Vec::new();
    let (a, b) = both(|f| f.events_a as f64, pods, one);
    rows.push(row("(a) pod writes per pod (watch events)", a, b));
    let (a, b) = both(|f| f.writes_a as f64, pods, one);
    rows.push(row(
        "(a) store writes per pod (with Leases, Node status)",
        a,
        b,
    ));
    rows.push(row(
        "(a) Events per pod (whole run)",
        format!("{:.1}", counts[0].events as f64 / pods),
        format!("{:.1}", counts[1].events as f64 / pods),
    ));
    let (a, b) = both(|f| f.cpu_a, pods, cpu_ms);
    rows.push(row("(a) server + containerd CPU per pod", a, b));
    let (a, b) = both(|f| f.sim_events as f64, sim_pods, one);
    rows.push(row("(b) pod writes per sim pod (watch events)", a, b));
    let (a, b) = both(|f| f.sim_writes as f64, sim_pods, one);
    rows.push(row("(b) store writes per sim pod", a, b));
    rows.push(row(
        "(b) Events per sim pod (whole run)",
        format!("{:.1}", counts[0].sim_events as f64 / sim_pods),
        format!("{:.1}", counts[1].sim_events as f64 / sim_pods),
    ));
    let (a, b) = both(|f| f.sim_cpu, sim_pods, |v| format!("{:.2} ms", v * 1e3));
    rows.push(row("(b) server CPU per sim pod", a, b));
    rows.push(row(
        "server CPU, whole run",
        format!("{:.1} s", counts[0].cpu),
        format!("{:.1} s", counts[1].cpu),
    ));
    rows.push(row(
        "server peak RSS (VmHWM)",
        format!("{:.0} MiB", counts[0].hwm_kib as f64 / 1024.0),
        format!("{:.0} MiB", counts[1].hwm_kib as f64 / 1024.0),
    ));
    print_grid(
        "counts per pod (should match between the sides) and cost",
        &["figure", &l0, &l1],
        &rows,
    );
    println!(
        "\nhost speed (lower is faster): {} before the run, {} after",
        crate::stats::ms(speed.0),
        crate::stats::ms(speed.1),
    );
}

/// Whole-run figures of one side, read before it stops.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    events: usize,
    sim_events: usize,
    cpu: f64,
    hwm_kib: u64,
}

async fn counts(side: &Side) -> anyhow::Result<Counts> {
    let events = |ns: &'static str| {
        let api: Api<Event> = Api::namespaced(side.client.clone(), ns);
        async move { anyhow::Ok(api.list(&ListParams::default()).await?.items.len()) }
    };
    Ok(Counts {
        events: events(NS).await?,
        sim_events: events(SIM_NS).await?,
        cpu: side.server_cpu(),
        hwm_kib: side
            .server
            .pid()
            .map_or(0, |p| crate::cluster::status_kib(p, "VmHWM:")),
    })
}

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
        args.rounds > 0 && args.pods > 0 && args.sim_pods > 0,
        "--rounds, --pods and --sim-pods must be > 0"
    );
    anyhow::ensure!(
        (1..=64).contains(&args.sim_nodes),
        "--sim-nodes must be 1 to 64 (each takes a /24 of a /18)"
    );
    for binary in ["containerd", "ctr"] {
        anyhow::ensure!(on_path(binary).is_some(), "{binary} is not installed");
    }
    let speed_before = crate::stats::host_speed();
    // Locals drop in reverse order: the sides (sims, then servers, then
    // `skiff reset`) go before the leases and the work dir.
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-overhead-")
        .tempdir()?;
    let first_lease = Lease::take(220)?;
    let second_lease = Lease::take(first_lease.octet + 1)?;
    for lease in [&first_lease, &second_lease] {
        // A bridge of ours left by an interrupted run.
        skiff_node::network::remove_bridge(&lease.bridge());
    }
    eprintln!("work dir {}", work.path().display());
    let labels = side_labels(args.sides);
    let first = start_side(
        args,
        &skiff,
        work.path(),
        &first_lease,
        &labels[0],
        args.sides[0],
    )
    .await?;
    let second = start_side(
        args,
        &skiff,
        work.path(),
        &second_lease,
        &labels[1],
        args.sides[1],
    )
    .await?;
    let sides = [first, second];
    let result = measure(args, &sides).await;
    let mut all_counts = [Counts::default(); 2];
    if result.is_ok() {
        for (k, s) in sides.iter().enumerate() {
            all_counts[k] = counts(s).await?;
        }
    }
    if let Some(dir) = &args.keep_logs {
        std::fs::create_dir_all(dir)?;
        for s in &sides {
            let _ = std::fs::copy(&s.server.log, dir.join(format!("server-{}.log", s.name)));
        }
    }
    let rounds = match result {
        Ok(r) => r,
        Err(e) => {
            let tails: Vec<String> = sides
                .iter()
                .map(|s| format!("{} server log tail:\n{}", s.name, s.server.log_tail()))
                .collect();
            return Err(e.context(tails.join("\n")));
        }
    };
    drop(sides); // SIGTERM by PID, then skiff reset
    let speed = (speed_before, crate::stats::host_speed());
    report(args, &rounds, &all_counts, speed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_median_and_range() {
        assert_eq!(summary(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }

    #[test]
    fn sides_are_parsed_and_labelled() {
        assert_eq!(parse_sides("on,off"), Ok([false, true]));
        assert_eq!(parse_sides("off, on"), Ok([true, false]));
        assert!(parse_sides("on").is_err());
        assert!(parse_sides("on,maybe").is_err());
        assert_eq!(side_labels([false, true]), ["on", "off"]);
        assert_eq!(side_labels([false, false]), ["on1", "on2"]);
    }

    #[test]
    fn pods_stay_on_their_nodes() {
        assert_eq!(
            real_pod("p")["spec"]["nodeSelector"]["kubernetes.io/hostname"],
            NODE
        );
        assert_eq!(sim_pod("p")["spec"]["nodeSelector"]["type"], "skiff-sim");
    }
}
