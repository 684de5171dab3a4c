//! `skiff-bench scheduler`: upstream scheduler_perf's SchedulingBasic shape
//! on Skiff. For each size, a `skiff server` gets N Node objects with
//! capacity; then M pods are created through the API server by 64
//! concurrent clients, and the time from the first pod created to the last
//! binding observed (by a watch) gives pods scheduled per second. CPU
//! seconds are read from /proc. Each size runs in up to three modes:
//! `in-process` (`skiff server` as users run it, the scheduler inside it
//! on the loopback; upstream's scheduler_perf also runs scheduler and API
//! server in one process), `process` (`skiff server --disable-scheduler`
//! plus a separate `skiff scheduler --kubeconfig` over HTTPS), and
//! `create-only` (no scheduler: how fast this machine can create the pods
//! at all, the ceiling for the other two).

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use kube::Client;
use serde_json::{json, Value};

use crate::cluster::{cpu_seconds, create_namespace, request, rss_kib, sibling, start_server};
use crate::h2::H2;
use crate::stats::print_table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODESxPODS cases.
    #[arg(long, value_delimiter = ',', default_value = "500x1000,5000x10000")]
    sizes: Vec<String>,
    /// Concurrent pod creators.
    #[arg(long, default_value_t = 64)]
    creators: usize,
    /// Runs of each case; the table shows the median and the range (the
    /// machines are noisy).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where the scheduler runs: in-process, process, create-only.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "create-only,in-process,process"
    )]
    modes: Vec<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// No scheduler: only creating the pods.
    CreateOnly,
    /// `skiff server` with its in-process scheduler.
    InProcess,
    /// A separate `skiff scheduler` process.
    Process,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::CreateOnly => "no scheduler, pods created/s (ceiling)",
            Mode::InProcess => "scheduler in skiff server, pods/s end to end",
            Mode::Process => "scheduler as its own process, pods/s end to end",
        }
    }
}

fn node(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i}"), "labels": {"kubernetes.io/hostname": format!("node-{i}")}},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "sched"},
        "spec": {"containers": [{"name": "pause", "image": "registry.local/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    })
}

/// Creates `objects` at `uri`, `workers` requests at a time.
async fn create_all(h2: &H2, uri: &str, objects: Vec<Value>, workers: usize) -> anyhow::Result<()> {
    let objects = std::sync::Arc::new(objects);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (h2, objects, uri) = (h2.clone(), objects.clone(), uri.to_string());
        tasks.push(tokio::spawn(async move {
            for i in (w..objects.len()).step_by(workers) {
                let body = serde_json::to_vec(&objects[i])?;
                h2.post(&uri, body.into()).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Watches the benchmark namespace and reports, each time, how many
/// distinct pods have been seen with a node.
async fn watch_bindings(
    client: Client,
    until: usize,
) -> anyhow::Result<tokio::sync::watch::Receiver<usize>> {
    let list: Value = serde_json::from_str(
        &client
            .request_text(request(
                "GET",
                "/api/v1/namespaces/sched/pods?limit=1",
                None,
            ))
            .await?,
    )?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let uri = format!(
        "/api/v1/namespaces/sched/pods?watch=true&resourceVersion={rv}&timeoutSeconds=3600"
    );
    let stream = client.request_stream(request("GET", &uri, None)).await?;
    let (tx, rx) = tokio::sync::watch::channel(0usize);
    tokio::spawn(async move {
        let mut lines = stream.lines();
        let mut bound = HashSet::new();
        while let Some(Ok(line)) = lines.next().await {
            if !line.contains("\"nodeName\":\"") {
                continue;
            }
            let name = line
                .split("\"name\":\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_default()
                .to_string();
            if bound.insert(name) {
                tx.send_replace(bound.len());
                if bound.len() >= until {
                    return;
                }
            }
        }
    });
    Ok(rx)
}

/// Waits until `count` `Scheduled` events exist in the benchmark
/// namespace: a watch from resourceVersion 0 lists them as ADDED, then
/// follows new ones.
async fn wait_for_events(client: Client, count: usize) -> anyhow::Result<()> {
    let uri = "/api/v1/namespaces/sched/events?watch=true&resourceVersion=0&fieldSelector=reason%3DScheduled&timeoutSeconds=600";
    let stream = client.request_stream(request("GET", uri, None)).await?;
    let mut lines = stream.lines();
    let mut seen = 0;
    while let Some(line) = lines.next().await {
        if line?.contains("\"type\":\"ADDED\"") {
            seen += 1;
            if seen >= count {
                return Ok(());
            }
        }
    }
    anyhow::bail!("events watch ended after {seen} of {count} Scheduled events")
}

struct Figures {
    seconds: f64,
    /// CPU seconds of the `skiff server` process (with the scheduler in
    /// it, in-process mode).
    server_cpu: f64,
    /// CPU seconds of the separate scheduler process, if any.
    scheduler_cpu: Option<f64>,
    /// Seconds from the first create until every pod's `Scheduled` event
    /// was written (events are written in the background), and the CPU
    /// seconds of the scheduler and server up to then.
    events_done: Option<(f64, f64)>,
}

/// A separate `skiff scheduler` process, killed on drop.
struct SchedulerProcess(std::process::Child);

impl Drop for SchedulerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn one(nodes: usize, pods: usize, creators: usize, mode: Mode) -> anyhow::Result<Figures> {
    let flags: &[&str] = match mode {
        Mode::InProcess => &[],
        Mode::Process | Mode::CreateOnly => &["--disable-scheduler"],
    };
    let (server, client) = start_server(flags).await?;
    let server_pid = server.child.id().to_string();
    create_namespace(&client, "sched").await?;
    let h2 = H2::connect(&server.kubeconfig, crate::h2::CONNECTIONS).await?;
    create_all(&h2, "/api/v1/nodes", (0..nodes).map(node).collect(), 32).await?;
    eprintln!("{nodes} nodes created ({mode:?})");

    let scheduler = match mode {
        Mode::Process => Some(SchedulerProcess(
            Command::new(sibling("skiff")?)
                .args(["scheduler", "--leader-elect=false", "--kubeconfig"])
                .arg(&server.kubeconfig)
                .env("SKIFF_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?,
        )),
        Mode::InProcess | Mode::CreateOnly => None,
    };
    let scheduler_pid = scheduler.as_ref().map(|s| s.0.id().to_string());

    if mode != Mode::CreateOnly {
        // A probe pod tells us the scheduler's caches have synced.
        let mut probe = watch_bindings(client.clone(), 1).await?;
        create_all(&h2, "/api/v1/namespaces/sched/pods", vec![pod("probe")], 1).await?;
        tokio::time::timeout(Duration::from_secs(120), probe.wait_for(|n| *n >= 1)).await??;
    }

    let mut bound = watch_bindings(client.clone(), pods).await?;
    let rss0 = rss_kib(server.child.id());
    let scheduler_rss0 = scheduler.as_ref().map(|s| rss_kib(s.0.id()));
    let server_cpu0 = cpu_seconds(&server_pid);
    let scheduler_cpu0 = scheduler_pid.as_deref().map(cpu_seconds);
    let start = Instant::now();
    let objects = (0..pods).map(|i| pod(&format!("pod-{i}"))).collect();
    create_all(&h2, "/api/v1/namespaces/sched/pods", objects, creators).await?;
    let created = start.elapsed();
    if mode != Mode::CreateOnly {
        tokio::time::timeout(Duration::from_secs(600), bound.wait_for(|n| *n >= pods)).await??;
    }
    let seconds = start.elapsed().as_secs_f64();
    let server_cpu = cpu_seconds(&server_pid) - server_cpu0;
    let scheduler_cpu = scheduler_pid
        .as_deref()
        .zip(scheduler_cpu0)
        .map(|(pid, before)| cpu_seconds(pid) - before);
    let events_done = if mode == Mode::CreateOnly {
        None
    } else {
        // The probe pod's event and one per benchmark pod.
        wait_for_events(client.clone(), pods + 1).await?;
        let cpu = cpu_seconds(&server_pid) - server_cpu0
            + scheduler_pid
                .as_deref()
                .zip(scheduler_cpu0)
                .map_or(0.0, |(pid, before)| cpu_seconds(pid) - before);
        Some((start.elapsed().as_secs_f64(), cpu))
    };
    let figures = Figures {
        seconds,
        server_cpu,
        scheduler_cpu,
        events_done,
    };
    let rss_growth_mib = (rss_kib(server.child.id()) as f64 - rss0 as f64) / 1024.0;
    if let Some((s, before)) = scheduler.as_ref().zip(scheduler_rss0) {
        let grew = (rss_kib(s.0.id()) as f64 - before as f64) / 1024.0;
        eprintln!("scheduler process RSS grew by {grew:.0} MiB");
    }
    eprintln!(
        "{nodes} nodes / {pods} pods ({mode:?}): created in {:.2} s, done after {seconds:.2} s, server RSS grew by {rss_growth_mib:.0} MiB",
        created.as_secs_f64()
    );
    drop(scheduler);
    drop(server);
    Ok(figures)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for size in &args.sizes {
        let (nodes, pods) = size
            .split_once('x')
            .and_then(|(n, p)| Some((n.parse().ok()?, p.parse().ok()?)))
            .ok_or_else(|| anyhow::anyhow!("size {size}: expected NODESxPODS"))?;
        for &mode in &args.modes {
            let mut runs = Vec::new();
            for _ in 0..args.repeat.max(1) {
                runs.push(one(nodes, pods, args.creators, mode).await?);
            }
            runs.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
            let rate = |f: &Figures| pods as f64 / f.seconds;
            let median = &runs[runs.len() / 2];
            let (low, high) = (rate(&runs[0]), rate(&runs[runs.len() - 1]));
            let (target, floor) = match mode {
                Mode::CreateOnly => ("-", "-"),
                _ if nodes >= 5000 => ("≥ 5000", "680 (CI floor), ~1000 (workstation)"),
                _ => ("≥ 5000", "-"),
            };
            rows.push((
                format!("{nodes} nodes, {pods} pods, {}", mode.label()),
                format!("{:.0} ({low:.0}–{high:.0})", rate(median)),
                target.to_string(),
                floor.to_string(),
            ));
            let cpu = match median.scheduler_cpu {
                Some(s) => format!("{:.1} (server) + {s:.1} (scheduler)", median.server_cpu),
                None => format!("{:.1}", median.server_cpu),
            };
            rows.push((
                format!(
                    "{nodes} nodes, {pods} pods, {:?}: CPU seconds (median run)",
                    mode
                ),
                cpu,
                "-".to_string(),
                "-".to_string(),
            ));
            if let Some((secs, cpu)) = median.events_done {
                rows.push((
                    format!(
                        "{nodes} nodes, {pods} pods, {:?}: all Scheduled events written (median run)",
                        mode
                    ),
                    format!("after {secs:.2} s, {cpu:.1} CPU-s"),
                    "-".to_string(),
                    "-".to_string(),
                ));
            }
        }
    }
    print_table(
        &format!(
            "Scheduler benchmark (SchedulingBasic shape), {} cores shared by API server, scheduler and client; median of {} runs (slowest–fastest)",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            args.repeat.max(1)
        ),
        ["metric", "skiff", "target", "upstream kube-scheduler"],
        &rows,
    );
    Ok(())
}
