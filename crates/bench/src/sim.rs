//! `skiff-bench sim`: the shape of kwok's CI benchmark against `skiff sim`.
//!
//! Starts `skiff server --disable-agent` on a fresh data dir and a
//! `skiff sim --nodes N` beside it, then times, through kube-rs watches:
//! all N Nodes Ready from the sim's start; P pods (created by 32 clients,
//! placed by our scheduler) from the first create to all Running; and
//! their deletion (32 clients, default grace) until all are gone; the
//! clients are HTTP/2 streams, as client-go's are. Prints the figures
//! beside kwok's CI limits and our targets, with the server's and the
//! sim's CPU and peak RSS, its memory per simulated node and per simulated
//! pod, the API server's write rate (store revisions per phase, and the
//! pod writes the pod watch observed), the events/s delivered to the
//! benchmark's watches, and the host's speed before and after the run.
//! Owns nothing else: it stops the processes it starts and removes their
//! directories.
//! `SKIFF_BENCH_SERVER_LOG=FILE` and `SKIFF_BENCH_SIM_LOG=FILE` keep the
//! server's and the sim's warnings.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt as _};
use serde_json::json;

use crate::cluster;
use crate::h2::H2;
use crate::stats::print_grid;

/// The server's --cluster-cidr, which the simulated nodes' podCIDRs come
/// from (a /8: 65,536 nodes' /24s).
const CLUSTER_CIDR: &str = "10.0.0.0/8";
const NAMESPACE: &str = "bench-sim";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Simulated nodes.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Pods to create (and then delete).
    #[arg(long, default_value_t = 10000)]
    pods: usize,
    /// Concurrent API clients for creates and deletes.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// More flags for the server (repeat it), e.g.
    /// `--server-arg=--disable-controller-manager` to see what the
    /// controllers cost.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
}

/// What a watch has seen: objects present, how many meet the phase's
/// condition, and events delivered per second since the benchmark began.
#[derive(Default)]
struct Seen {
    objects: HashMap<String, (bool, bool)>,
    matched: usize,
    /// How many meet the secondary condition (pods: bound to a node).
    aux: usize,
    events: u64,
    per_second: Vec<u64>,
}

struct Watch {
    seen: Arc<Mutex<Seen>>,
    tick: tokio::sync::watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A snapshot of a watch at a phase boundary.
#[derive(Clone, Copy)]
struct Mark {
    at: Instant,
    events: u64,
}

impl Watch {
    async fn start<K>(
        api: Api<K>,
        config: watcher::Config,
        epoch: Instant,
        cond: fn(&K) -> bool,
        aux: fn(&K) -> bool,
    ) -> anyhow::Result<Self>
    where
        K: kube::Resource
            + Clone
            + std::fmt::Debug
            + k8s_openapi::serde::de::DeserializeOwned
            + Send
            + 'static,
    {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let (tx, tick) = tokio::sync::watch::channel(0u64);
        let (synced_tx, mut synced) = tokio::sync::watch::channel(false);
        let state = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
            while let Some(event) = stream.next().await {
                let second = epoch.elapsed().as_secs() as usize;
                {
                    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
                    let count = |s: &mut Seen| {
                        s.events += 1;
                        if s.per_second.len() <= second {
                            s.per_second.resize(second + 1, 0);
                        }
                        s.per_second[second] += 1;
                    };
                    match event {
                        Ok(watcher::Event::Apply(obj)) | Ok(watcher::Event::InitApply(obj)) => {
                            count(&mut s);
                            let name = obj.meta().name.clone().unwrap_or_default();
                            let now = (cond(&obj), aux(&obj));
                            let before = s.objects.insert(name, now).unwrap_or_default();
                            match (before.0, now.0) {
                                (false, true) => s.matched += 1,
                                (true, false) => s.matched -= 1,
                                _ => {}
                            }
                            match (before.1, now.1) {
                                (false, true) => s.aux += 1,
                                (true, false) => s.aux -= 1,
                                _ => {}
                            }
                        }
                        Ok(watcher::Event::Delete(obj)) => {
                            count(&mut s);
                            let name = obj.meta().name.clone().unwrap_or_default();
                            if let Some((matched, aux)) = s.objects.remove(&name) {
                                s.matched -= usize::from(matched);
                                s.aux -= usize::from(aux);
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            synced_tx.send_replace(true);
                        }
                        Ok(watcher::Event::Init) => {}
                        Err(e) => eprintln!("watch: {e}"),
                    }
                }
                tx.send_modify(|n| *n += 1);
            }
        });
        tokio::time::timeout(Duration::from_secs(60), synced.wait_for(|s| *s))
            .await
            .map_err(|_| anyhow::anyhow!("a watch did not sync within 60 s"))??;
        Ok(Self { seen, tick, task })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mark(&self) -> Mark {
        Mark {
            at: Instant::now(),
            events: self.lock().events,
        }
    }

    /// Waits until `cond(what the watch has seen)`; false on timeout.
    async fn wait(&self, timeout: Duration, cond: impl Fn(&Seen) -> bool) -> bool {
        let mut tick = self.tick.clone();
        let seen = self.seen.clone();
        let r = tokio::time::timeout(
            timeout,
            tick.wait_for(|_| {
                let s = seen.lock().unwrap_or_else(|e| e.into_inner());
                cond(&s)
            }),
        )
        .await;
        matches!(r, Ok(Ok(_)))
    }

    /// Events between two marks, their rate, and the busiest second's.
    fn rate(&self, epoch: Instant, from: Mark, to: Mark) -> (u64, f64, u64) {
        let n = to.events - from.events;
        let secs = to.at.duration_since(from.at).as_secs_f64().max(1e-3);
        let s = self.lock();
        let a = from.at.duration_since(epoch).as_secs() as usize;
        let b = to.at.duration_since(epoch).as_secs() as usize;
        let peak = s
            .per_second
            .iter()
            .skip(a)
            .take(b.saturating_sub(a) + 1)
            .copied()
            .max()
            .unwrap_or(0);
        (n, n as f64 / secs, peak)
    }
}

fn node_ready(node: &View<Node>) -> bool {
    node.ready
}

fn never<K>(_: &K) -> bool {
    false
}

fn pod_bound(pod: &View<Pod>) -> bool {
    pod.node_name.as_deref().is_some_and(|n| !n.is_empty())
}

fn pod_running(pod: &View<Pod>) -> bool {
    pod.phase.as_deref() == Some("Running")
}

/// What the benchmark reads of a Pod or a Node: its name and
/// resourceVersion, and the one or two fields its conditions look at.
/// Decoding every object whole (managedFields, the whole spec) cost the
/// benchmark's process, on the same two cores as what it measures, a
/// core-second per phase; the rest of each object is skipped unread.
#[derive(Clone, Debug, Default)]
struct View<K> {
    metadata: ObjectMeta,
    /// spec.nodeName (pods).
    node_name: Option<String>,
    /// status.phase (pods).
    phase: Option<String>,
    /// Whether status.conditions has Ready=True (nodes).
    ready: bool,
    kind: std::marker::PhantomData<fn() -> K>,
}

impl<'de, K> serde::Deserialize<'de> for View<K> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Spec {
            node_name: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Condition {
            #[serde(rename = "type")]
            type_: String,
            status: String,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Status {
            phase: Option<String>,
            conditions: Vec<Condition>,
        }
        #[derive(serde::Deserialize)]
        struct Raw {
            metadata: Meta,
            #[serde(default)]
            spec: Spec,
            #[serde(default)]
            status: Status,
        }
        let raw = Raw::deserialize(d)?;
        Ok(View {
            metadata: ObjectMeta {
                name: raw.metadata.name,
                namespace: raw.metadata.namespace,
                resource_version: raw.metadata.resource_version,
                ..ObjectMeta::default()
            },
            node_name: raw.spec.node_name,
            phase: raw.status.phase,
            ready: raw
                .status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            kind: std::marker::PhantomData,
        })
    }
}

impl<K> kube::Resource for View<K>
where
    K: kube::Resource<DynamicType = ()>,
{
    type DynamicType = ();
    type Scope = K::Scope;
    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Peak RSS (VmHWM) of a process in KiB.
fn hwm_kib(pid: u32) -> u64 {
    crate::cluster::status_kib(pid, "VmHWM:")
}

struct Sim {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU seconds of the server and the sim at one moment.
#[derive(Clone, Copy, Default)]
struct Cpu {
    server: f64,
    sim: f64,
}

fn cpu(server: u32, sim: u32) -> Cpu {
    Cpu {
        server: cluster::cpu_seconds(&server.to_string()),
        sim: cluster::cpu_seconds(&sim.to_string()),
    }
}

fn pod_body(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench-sim"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}],
        },
    }))?)
}

struct Phase {
    name: &'static str,
    kwok_limit: &'static str,
    took: Option<Duration>,
    reached: String,
    cpu: Cpu,
    /// (watch, events, events/s, busiest second)
    fanout: Vec<(&'static str, u64, f64, u64)>,
    /// Every write the store took during the phase, of any resource
    /// (pods, bindings, status patches, Events, Leases, Nodes): the
    /// difference of the store revisions at its ends.
    writes: i64,
}

/// The store's current revision: a consistent list's resourceVersion (each
/// write the store takes advances it by one).
pub(crate) async fn revision(client: &kube::Client) -> anyhow::Result<i64> {
    let api = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    let list = api
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await?;
    let rv = list.metadata.resource_version.unwrap_or_default();
    rv.parse()
        .map_err(|e| anyhow::anyhow!("resourceVersion {rv:?} is not a revision: {e}"))
}

fn secs(d: Option<Duration>, reached: &str) -> String {
    match d {
        Some(d) => format!("{:.2} s", d.as_secs_f64()),
        None => format!("timeout ({reached})"),
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout);
    let speed_before = crate::stats::host_speed();
    let mut flags = vec!["--disable-agent", "--cluster-cidr", CLUSTER_CIDR];
    flags.extend(args.server_args.iter().map(String::as_str));
    let (server, client) = cluster::start_server(&flags).await?;
    let server_pid = server.child.id();
    let epoch = Instant::now();
    cluster::create_namespace(&client, NAMESPACE).await?;

    let nodes = Watch::start(
        Api::<View<Node>>::all(client.clone()),
        watcher::Config::default().labels("type=skiff-sim"),
        epoch,
        node_ready,
        never,
    )
    .await?;
    let pods = Watch::start(
        Api::<View<Pod>>::namespaced(client.clone(), NAMESPACE),
        watcher::Config::default(),
        epoch,
        pod_running,
        pod_bound,
    )
    .await?;

    // Phase 1: the sim's nodes Ready.
    let skiff = cluster::sibling("skiff")?;
    // The simulated kubelets' per-pod scratch files (managed /etc/hosts,
    // termination-message files) go to memory when the machine has a
    // tmpfs: the benchmark measures the control plane, not ext4.
    let shm = std::path::Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("skiff-bench-sim-");
    let dir = if shm.is_dir() {
        builder.tempdir_in(shm)?
    } else {
        builder.tempdir()?
    };
    let log = match std::env::var_os("SKIFF_BENCH_SIM_LOG") {
        Some(p) => std::fs::File::create(p)?,
        None => std::fs::File::create(dir.path().join("sim.log"))?,
    };
    let c0 = cpu(server_pid, 0);
    let r0 = revision(&client).await?;
    let (n0, p0) = (nodes.mark(), pods.mark());
    let child = Command::new(&skiff)
        .arg("sim")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["--nodes", &args.nodes.to_string()])
        // Each node registers with its own block of the cluster CIDR (the
        // server's IPAM marks them taken instead of patching each Node).
        .args(["--pod-cidr-range", CLUSTER_CIDR])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("SKIFF_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let sim_pid = child.id();
    let sim = Sim { child, _dir: dir };
    let want = args.nodes;
    let ok = nodes.wait(timeout, |s| s.matched >= want).await;
    let took = ok.then(|| n0.at.elapsed());
    let (n1, p1) = (nodes.mark(), pods.mark());
    let c1 = cpu(server_pid, sim_pid);
    let r1 = revision(&client).await?;
    let rss_nodes = crate::cluster::rss_kib(sim_pid);
    let ready = nodes.lock().matched;
    let mut phases = vec![Phase {
        name: "nodes Ready (from sim start)",
        kwok_limit: "60 s",
        took,
        reached: format!("{ready}/{want}"),
        cpu: Cpu {
            server: c1.server - c0.server,
            sim: c1.sim,
        },
        fanout: vec![
            ("nodes", nodes.rate(epoch, n0, n1)),
            ("pods", pods.rate(epoch, p0, p1)),
        ]
        .into_iter()
        .map(|(w, (n, r, p))| (w, n, r, p))
        .collect(),
        writes: r1 - r0,
    }];
    eprintln!("nodes: {ready}/{want} Ready in {}", secs(took, ""));

    // Phase 2: pods created by `concurrency` clients, until all Running.
    // Requests go as HTTP/2 streams, as client-go's (kubectl's) do:
    // kube-rs' HTTP/1.1 pool cost the load generator several times the CPU
    // it takes here, out of the two cores the cluster is measured on.
    let h2 = H2::connect(&server.kubeconfig, crate::h2::CONNECTIONS).await?;
    let collection = format!("/api/v1/namespaces/{NAMESPACE}/pods");
    let bodies: Vec<bytes::Bytes> = (0..args.pods)
        .map(|i| Ok(serde_json::to_vec(&pod_body(&format!("pod-{i}"))?)?.into()))
        .collect::<anyhow::Result<_>>()?;
    let (n0, p0) = (nodes.mark(), pods.mark());
    let creating = futures::stream::iter(bodies)
        .map(|body| {
            let (h2, collection) = (&h2, &collection);
            async move { h2.post(collection, body).await }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<()>();
    let created = tokio::time::timeout(timeout, creating).await;
    let created_in = p0.at.elapsed();
    match created {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("creating {} pods took over {timeout:?}", args.pods),
    }
    let want = args.pods;
    let bound_in = async {
        pods.wait(timeout, |s| s.aux >= want)
            .await
            .then(|| p0.at.elapsed())
    };
    let running_in = async {
        pods.wait(timeout.saturating_sub(created_in), |s| s.matched >= want)
            .await
            .then(|| p0.at.elapsed())
    };
    let (bound_in, took) = tokio::join!(bound_in, running_in);
    let (n1, p1) = (nodes.mark(), pods.mark());
    let c2 = cpu(server_pid, sim_pid);
    let r2 = revision(&client).await?;
    let rss_pods = crate::cluster::rss_kib(sim_pid);
    let running = pods.lock().matched;
    let pod_rate = pods.rate(epoch, p0, p1);
    phases.push(Phase {
        name: "pods Running (from first create)",
        kwok_limit: "60 s",
        took,
        reached: format!("{running}/{want}"),
        cpu: Cpu {
            server: c2.server - c1.server,
            sim: c2.sim - c1.sim,
        },
        fanout: vec![("nodes", nodes.rate(epoch, n0, n1)), ("pods", pod_rate)]
            .into_iter()
            .map(|(w, (n, r, p))| (w, n, r, p))
            .collect(),
        writes: r2 - r1,
    });
    eprintln!(
        "pods: created in {:.2} s, all bound in {}, {running}/{want} Running in {}",
        created_in.as_secs_f64(),
        secs(bound_in, ""),
        secs(took, "")
    );

    // Phase 3: delete them all (default grace) until the watch sees none.
    let (n0, p0) = (nodes.mark(), pods.mark());
    let deleting = futures::stream::iter(0..args.pods)
        .map(|i| {
            let (h2, collection) = (&h2, &collection);
            async move { h2.delete(&format!("{collection}/pod-{i}")).await }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<()>();
    let deleted = tokio::time::timeout(timeout, deleting).await;
    let deleted_in = p0.at.elapsed();
    match deleted {
        Ok(r) => r?,
        Err(_) => anyhow::bail!("deleting {} pods took over {timeout:?}", args.pods),
    }
    let ok = pods
        .wait(timeout.saturating_sub(deleted_in), |s| s.objects.is_empty())
        .await;
    let took = ok.then(|| p0.at.elapsed());
    let (n1, p1) = (nodes.mark(), pods.mark());
    let c3 = cpu(server_pid, sim_pid);
    let r3 = revision(&client).await?;
    let left = pods.lock().objects.len();
    phases.push(Phase {
        name: "pods deleted (from first delete)",
        kwok_limit: "90 s",
        took,
        reached: format!("{left} left"),
        cpu: Cpu {
            server: c3.server - c2.server,
            sim: c3.sim - c2.sim,
        },
        fanout: vec![
            ("nodes", nodes.rate(epoch, n0, n1)),
            ("pods", pods.rate(epoch, p0, p1)),
        ]
        .into_iter()
        .map(|(w, (n, r, p))| (w, n, r, p))
        .collect(),
        writes: r3 - r2,
    });
    eprintln!(
        "delete: requests done in {:.2} s, all gone in {}",
        deleted_in.as_secs_f64(),
        secs(took, "")
    );

    let server_hwm = hwm_kib(server_pid);
    let sim_hwm = hwm_kib(sim_pid);
    drop(nodes);
    drop(pods);
    drop(sim);
    drop(client);
    drop(server);
    let speed = (speed_before, crate::stats::host_speed());

    report(
        &args,
        &phases,
        (created_in, bound_in, deleted_in),
        pod_rate,
        c3,
        server_hwm,
        sim_hwm,
        (rss_nodes, rss_pods),
        speed,
    );
    Ok(())
}

#[allow(clippy::too_many_arguments)] // one report of one run's figures
fn report(
    args: &Args,
    phases: &[Phase],
    (created_in, bound_in, deleted_in): (Duration, Option<Duration>, Duration),
    pod_rate: (u64, f64, u64),
    total: Cpu,
    server_hwm: u64,
    sim_hwm: u64,
    (rss_nodes, rss_pods): (u64, u64),
    (speed_before, speed_after): (Duration, Duration),
) {
    let rows: Vec<Vec<String>> = phases
        .iter()
        .map(|p| {
            vec![
                p.name.to_string(),
                secs(p.took, &p.reached),
                p.kwok_limit.to_string(),
                "≤ 10 s".to_string(),
                match p.took {
                    Some(d) if d <= Duration::from_secs(10) => "met".to_string(),
                    Some(_) => "missed".to_string(),
                    None => "missed".to_string(),
                },
                format!("{:.1} s", p.cpu.server),
                format!("{:.1} s", p.cpu.sim),
            ]
        })
        .collect();
    print_grid(
        &format!(
            "skiff sim: {} nodes, {} pods, {} clients (kwok CI benchmark shape)",
            args.nodes, args.pods, args.concurrency
        ),
        &[
            "phase",
            "skiff",
            "kwok CI limit",
            "target",
            "vs target",
            "server CPU",
            "sim CPU",
        ],
        &rows,
    );
    println!(
        "\npods created by {} clients in {:.2} s ({:.0} creates/s), all bound (scheduled) at {} from the first create; delete requests done in {:.2} s ({:.0} deletes/s)",
        args.concurrency,
        created_in.as_secs_f64(),
        args.pods as f64 / created_in.as_secs_f64().max(1e-3),
        secs(bound_in, "not all"),
        deleted_in.as_secs_f64(),
        args.pods as f64 / deleted_in.as_secs_f64().max(1e-3),
    );

    print_grid(
        "processes (whole run)",
        &["process", "CPU (utime+stime)", "peak RSS (VmHWM)"],
        &[
            vec![
                "skiff server --disable-agent".to_string(),
                format!("{:.1} s", total.server),
                format!("{:.0} MiB", server_hwm as f64 / 1024.0),
            ],
            vec![
                format!("skiff sim --nodes {}", args.nodes),
                format!("{:.1} s", total.sim),
                format!("{:.0} MiB", sim_hwm as f64 / 1024.0),
            ],
            vec![
                "skiff-bench (its clients and watches)".to_string(),
                format!("{:.1} s", cluster::cpu_seconds("self")),
                format!("{:.0} MiB", hwm_kib(std::process::id()) as f64 / 1024.0),
            ],
        ],
    );

    // Per node: the sim's whole RSS once the nodes are Ready, over the
    // nodes (so it includes the process's own fixed share); per pod: what
    // it grew by until the pods were Running, over the pods.
    println!(
        "\nsim memory (VmRSS): {:.0} MiB with {} nodes Ready = {:.1} KiB per simulated node; \
         {:.0} MiB with {} pods Running = {:.1} KiB per simulated pod on top",
        rss_nodes as f64 / 1024.0,
        args.nodes,
        rss_nodes as f64 / args.nodes.max(1) as f64,
        rss_pods as f64 / 1024.0,
        args.pods,
        rss_pods.saturating_sub(rss_nodes) as f64 / args.pods.max(1) as f64,
    );

    let rows: Vec<Vec<String>> = phases
        .iter()
        .map(|p| {
            let secs = p.took.map_or(0.0, |d| d.as_secs_f64());
            vec![
                p.name.to_string(),
                p.writes.to_string(),
                if secs > 0.0 {
                    format!("{:.0}", p.writes as f64 / secs)
                } else {
                    "-".to_string()
                },
            ]
        })
        .collect();
    print_grid(
        "API server writes (store revisions taken in the phase: pods, bindings, status patches, \
         Events, Leases, Nodes; the server has no /metrics request counters)",
        &["phase", "writes", "writes/s"],
        &rows,
    );
    let (writes, rate, peak) = pod_rate;
    println!(
        "\nof which pod writes in the pod phase (pod watch events = creates + binds + status \
         patches): {writes}, {rate:.0}/s mean, {peak} in the busiest second ({:.1} per pod)",
        writes as f64 / args.pods.max(1) as f64
    );
    let mut rows = Vec::new();
    for p in phases {
        for (watch, n, rate, peak) in &p.fanout {
            rows.push(vec![
                p.name.to_string(),
                format!("{watch} (1 watcher)"),
                n.to_string(),
                format!("{rate:.0}"),
                peak.to_string(),
            ]);
        }
    }
    print_grid(
        "watch fan-out: events delivered to the benchmark's watches (the server does not expose its watcher count)",
        &["phase", "watch", "events", "events/s", "busiest second"],
        &rows,
    );
    // The same work takes a third longer in this machine's slow spells;
    // compare the times of two runs only when these are close.
    println!(
        "\nhost speed (2,000 serialize + parse passes over a pod, one thread; lower is faster): \
         {} before the run, {} after",
        crate::stats::ms(speed_before),
        crate::stats::ms(speed_after),
    );
}
