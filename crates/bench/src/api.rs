//! `skiff-bench api`: the API server (a real `skiff server` process with
//! its embedded store) with 1,000 pods stored, 100 writes/s of churn and
//! 1,000 concurrent watchers. Prints p50/p99 of create, update, get and
//! list, p99 watch delivery, the time to LIST 10,000 pods, and the
//! server's RSS per 10,000 stored pods, beside the targets and upstream's
//! 1 s mutating-call SLO.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::{AsyncBufReadExt, StreamExt};
use kube::Client;
use serde_json::{json, Value};

use crate::cluster::{cpu_seconds, create_namespace, request, rss_kib, start_server};
use crate::stats::{ms, percentile, print_table};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Pods stored before the churn starts.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) pods: usize,
    /// Concurrent watchers on the churned namespace.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) watchers: usize,
    /// Writes per second during the churn.
    #[arg(long, default_value_t = 100)]
    pub(crate) writes_per_sec: u64,
    /// Length of the churn.
    #[arg(long, default_value_t = 20)]
    pub(crate) seconds: u64,
    /// Pods for the big LIST and the RSS measurement.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) list_pods: usize,
    /// Only the node-watcher phase, against this server and against the
    /// `skiff` binary at PATH (e.g. a build of an earlier commit), side by
    /// side: `--watchers 5000 --baseline /tmp/before/skiff`.
    #[arg(long)]
    pub(crate) baseline: Option<std::path::PathBuf>,
    /// Only the RBAC comparison: the same churn as the admin and as a
    /// user holding 50 bindings, and the authorizer's decisions per second
    /// (`--watchers` is 10 there).
    #[arg(long)]
    pub(crate) rbac: bool,
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn pod(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "bench", "tier": "web"},
            "annotations": {"skiff-bench/sent": now_ns().to_string()}},
        // The ServiceAccount named and its token not mounted, so an update
        // that sends this body again changes only what it means to.
        "spec": {"serviceAccountName": "default", "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "registry.local/bench/app:1.0",
            "ports": [{"containerPort": 8080}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            "env": [{"name": "MODE", "value": "bench"}]}]},
    })
}

async fn timed<T>(
    f: impl std::future::Future<Output = kube::Result<T>>,
) -> anyhow::Result<(Duration, T)> {
    let start = Instant::now();
    let out = f.await?;
    Ok((start.elapsed(), out))
}

pub(crate) async fn create_many(
    client: &Client,
    ns: &str,
    count: usize,
    prefix: &str,
    nodes: usize,
) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for w in 0..32 {
        let (client, ns, prefix) = (client.clone(), ns.to_string(), prefix.to_string());
        tasks.push(tokio::spawn(async move {
            for i in (w..count).step_by(32) {
                let mut body = pod(&ns, &format!("{prefix}-{i}"));
                body["spec"]["nodeName"] = json!(format!("node-{}", i % nodes.max(1)));
                client
                    .request_text(request(
                        "POST",
                        &format!("/api/v1/namespaces/{ns}/pods"),
                        Some(&body),
                    ))
                    .await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Latency samples and CPU use of one churn phase.
#[derive(Default)]
pub(crate) struct Phase {
    pub(crate) creates: Vec<Duration>,
    pub(crate) updates: Vec<Duration>,
    pub(crate) gets: Vec<Duration>,
    pub(crate) lists: Vec<Duration>,
    pub(crate) delivery: Vec<Duration>,
    pub(crate) server_cpu: f64,
    pub(crate) client_cpu: f64,
}

impl Phase {
    /// The samples and CPU of several runs together.
    pub(crate) fn merge(phases: Vec<Phase>) -> Phase {
        let mut phases = phases.into_iter();
        let mut all = phases.next().unwrap_or_default();
        for p in phases {
            all.creates.extend(p.creates);
            all.updates.extend(p.updates);
            all.gets.extend(p.gets);
            all.lists.extend(p.lists);
            all.delivery.extend(p.delivery);
            all.server_cpu += p.server_cpu;
            all.client_cpu += p.client_cpu;
        }
        all
    }
}

/// Starts `count` watchers on the churn namespace. With `per_node`, each
/// watches only the pods bound to its own node (as node agents do);
/// otherwise every watcher sees every change.
async fn start_watchers(
    client: &Client,
    count: usize,
    per_node: bool,
    rv: &str,
    latencies: &Arc<Mutex<Vec<Duration>>>,
) -> Vec<tokio::task::JoinHandle<anyhow::Result<()>>> {
    let mut watchers = Vec::new();
    let (connected_tx, mut connected) = tokio::sync::mpsc::channel::<()>(count.max(1));
    for i in 0..count {
        let (client, latencies, connected_tx) =
            (client.clone(), latencies.clone(), connected_tx.clone());
        let selector = if per_node {
            format!("&fieldSelector=spec.nodeName%3Dnode-{i}")
        } else {
            String::new()
        };
        let uri = format!(
            "/api/v1/namespaces/churn/pods?watch=true&resourceVersion={rv}&timeoutSeconds=600{selector}"
        );
        watchers.push(tokio::spawn(async move {
            let stream = client.request_stream(request("GET", &uri, None)).await?;
            let _ = connected_tx.send(()).await;
            drop(connected_tx);
            let mut lines = stream.lines();
            let mut local = Vec::new();
            let marker = "\"skiff-bench/sent\":\"";
            while let Some(line) = lines.next().await {
                let line = line?;
                let received = now_ns();
                let sent = line.find(marker).and_then(|at| {
                    line[at + marker.len()..]
                        .split('"')
                        .next()?
                        .parse::<u128>()
                        .ok()
                });
                if let Some(sent) = sent {
                    local.push(Duration::from_nanos(received.saturating_sub(sent) as u64));
                    if local.len() >= 64 {
                        latencies
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .append(&mut local);
                    }
                }
            }
            latencies
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .append(&mut local);
            anyhow::Ok(())
        }));
    }
    // The churn starts once every watch is established (TLS handshakes
    // and all), so it measures steady state.
    drop(connected_tx);
    for _ in 0..count {
        if connected.recv().await.is_none() {
            break;
        }
    }
    watchers
}

fn take<T>(m: &Arc<Mutex<Vec<T>>>) -> anyhow::Result<Vec<T>> {
    Ok(std::mem::take(
        &mut *m.lock().map_err(|_| anyhow::anyhow!("poisoned"))?,
    ))
}

/// One churn phase: `writes_per_sec` alternating creates and updates for
/// `seconds`, while a reader measures get and list, with the watchers
/// started first.
pub(crate) async fn churn(
    client: &Client,
    pid: u32,
    args: &Args,
    per_node: bool,
    nodes: usize,
    tag: &str,
) -> anyhow::Result<Phase> {
    let latencies = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let list: Value = serde_json::from_str(
        &client
            .request_text(request(
                "GET",
                "/api/v1/namespaces/churn/pods?limit=1",
                None,
            ))
            .await?,
    )?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let watchers = start_watchers(client, args.watchers, per_node, &rv, &latencies).await;
    // Controller-style watchers that see everything, beside node agents.
    let mut watchers = watchers;
    if per_node {
        watchers.extend(start_watchers(client, 10, false, &rv, &latencies).await);
    }

    let creates = Arc::new(Mutex::new(Vec::new()));
    let updates = Arc::new(Mutex::new(Vec::new()));
    let churn_end = Instant::now() + Duration::from_secs(args.seconds);
    let (server_cpu0, client_cpu0) = (cpu_seconds(&pid.to_string()), cpu_seconds("self"));
    let reader = {
        let client = client.clone();
        let pods = args.pods;
        tokio::spawn(async move {
            let (mut gets, mut lists) = (Vec::new(), Vec::new());
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            let mut i = 0usize;
            while Instant::now() < churn_end {
                tick.tick().await;
                let uri = format!("/api/v1/namespaces/churn/pods/p-{}", i % pods);
                let (d, _) = timed(client.request_text(request("GET", &uri, None))).await?;
                gets.push(d);
                if i.is_multiple_of(10) {
                    let uri = "/api/v1/namespaces/churn/pods?limit=500";
                    let (d, _) = timed(client.request_text(request("GET", uri, None))).await?;
                    lists.push(d);
                }
                i += 1;
            }
            anyhow::Ok((gets, lists))
        })
    };
    let mut tick = tokio::time::interval(Duration::from_nanos(
        1_000_000_000 / args.writes_per_sec.max(1),
    ));
    let mut writes = Vec::new();
    let mut n = 0usize;
    while Instant::now() < churn_end {
        tick.tick().await;
        let (client, creates, updates) = (client.clone(), creates.clone(), updates.clone());
        let (i, pods, tag) = (n, args.pods, tag.to_string());
        n += 1;
        writes.push(tokio::spawn(async move {
            let node = format!("node-{}", i % nodes);
            if i.is_multiple_of(2) {
                let mut body = pod("churn", &format!("c{tag}-{i}"));
                body["spec"]["nodeName"] = json!(node);
                let uri = "/api/v1/namespaces/churn/pods";
                let (d, _) = timed(client.request_text(request("POST", uri, Some(&body)))).await?;
                creates
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?
                    .push(d);
            } else {
                let name = format!("p-{}", i % pods);
                let uri = format!("/api/v1/namespaces/churn/pods/{name}");
                let mut body = pod("churn", &name);
                body["spec"]["nodeName"] = json!(format!("node-{}", (i % pods) % nodes));
                body["spec"]["containers"][0]["image"] =
                    json!(format!("registry.local/bench/app:{i}"));
                let (d, _) = timed(client.request_text(request("PUT", &uri, Some(&body)))).await?;
                updates
                    .lock()
                    .map_err(|_| anyhow::anyhow!("poisoned"))?
                    .push(d);
            }
            anyhow::Ok(())
        }));
    }
    for w in writes {
        w.await??;
    }
    let (gets, lists) = reader.await??;
    let server_cpu = cpu_seconds(&pid.to_string()) - server_cpu0;
    let client_cpu = cpu_seconds("self") - client_cpu0;
    // Give the last events a moment to arrive, then stop the watchers.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for w in &watchers {
        w.abort();
    }
    Ok(Phase {
        creates: take(&creates)?,
        updates: take(&updates)?,
        gets,
        lists,
        delivery: take(&latencies)?,
        server_cpu,
        client_cpu,
    })
}

pub(crate) fn p50_p99(samples: &mut [Duration]) -> String {
    format!(
        "{} / {}",
        ms(percentile(samples, 50.0)),
        ms(percentile(samples, 99.0))
    )
}

fn phase_rows(name: &str, args: &Args, p: &mut Phase) -> Vec<(String, String, String, String)> {
    let mut mutating: Vec<Duration> = p.creates.iter().chain(p.updates.iter()).copied().collect();
    let row = |m: String, v: String, t: &str, slo: &str| (m, v, t.to_string(), slo.to_string());
    vec![
        row(
            format!("[{name}] create p50 / p99"),
            p50_p99(&mut p.creates),
            "p99 ≤ 25 ms",
            "p99 ≤ 1 s",
        ),
        row(
            format!("[{name}] update p50 / p99"),
            p50_p99(&mut p.updates),
            "p99 ≤ 25 ms",
            "p99 ≤ 1 s",
        ),
        row(
            format!("[{name}] mutating p99"),
            ms(percentile(&mut mutating, 99.0)),
            "≤ 25 ms",
            "≤ 1 s",
        ),
        row(
            format!("[{name}] get p50 / p99"),
            p50_p99(&mut p.gets),
            "-",
            "p99 ≤ 1 s",
        ),
        row(
            format!("[{name}] list {} pods (limit 500) p50 / p99", args.pods),
            p50_p99(&mut p.lists),
            "-",
            "p99 ≤ 30 s",
        ),
        row(
            format!(
                "[{name}] watch delivery p50 / p99 ({} events)",
                p.delivery.len()
            ),
            p50_p99(&mut p.delivery),
            "p99 ≤ 50 ms",
            "-",
        ),
        row(
            format!("[{name}] CPU in {} s: server / bench client", args.seconds),
            format!("{:.1} s / {:.1} s", p.server_cpu, p.client_cpu),
            "-",
            "-",
        ),
    ]
}

/// The node-watcher phase on one server binary.
async fn node_phase(binary: Option<&std::path::Path>, args: &Args) -> anyhow::Result<Phase> {
    let (server, client) = match binary {
        Some(b) => crate::cluster::start_server_binary(b, &[]).await?,
        None => start_server(&[]).await?,
    };
    let pid = server.child.id();
    create_namespace(&client, "churn").await?;
    create_many(&client, "churn", args.pods, "p", args.watchers).await?;
    let phase = churn(&client, pid, args, true, args.watchers, "a").await?;
    drop(server);
    Ok(phase)
}

/// This build beside a baseline binary, node watchers only, twice each,
/// interleaved (the machine's speed drifts).
async fn against_baseline(args: &Args, baseline: &std::path::Path) -> anyhow::Result<()> {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for round in 0..2 {
        eprintln!("round {round}: baseline {}", baseline.display());
        theirs.push(node_phase(Some(baseline), args).await?);
        eprintln!("round {round}: this build");
        ours.push(node_phase(None, args).await?);
    }
    let (mut a, mut b) = (Phase::merge(ours), Phase::merge(theirs));
    let ra = phase_rows("node watchers", args, &mut a);
    let rb = phase_rows("node watchers", args, &mut b);
    let rows: Vec<_> = ra
        .into_iter()
        .zip(rb)
        .map(|((m, ours, target, _), (_, base, _, _))| (m, ours, base, target))
        .collect();
    print_table(
        &format!(
            "Node-watcher fan-out: {} watchers each on spec.nodeName=<own node> (+10 on all), {} writes/s for {} s, 2 interleaved runs each, {} cores",
            args.watchers,
            args.writes_per_sec,
            args.seconds,
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        ),
        ["metric", "this build", "baseline", "target"],
        &rows,
    );
    Ok(())
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if args.rbac {
        return crate::api_rbac::run(&Args {
            watchers: 10,
            ..args.clone()
        })
        .await;
    }
    if let Some(baseline) = args.baseline.clone() {
        return against_baseline(&args, &baseline).await;
    }
    let (server, client) = start_server(&[]).await?;
    let pid = server.child.id();
    create_namespace(&client, "churn").await?;
    create_namespace(&client, "big").await?;
    create_many(&client, "churn", args.pods, "p", args.watchers).await?;
    eprintln!("stored {} pods", args.pods);

    let mut rows = Vec::new();
    eprintln!(
        "phase 1: {} node-style watchers (own pods only) + 10 watching all",
        args.watchers
    );
    let mut node_style = churn(&client, pid, &args, true, args.watchers, "a").await?;
    rows.extend(phase_rows("node watchers", &args, &mut node_style));
    eprintln!(
        "phase 2: {} watchers that each see every change",
        args.watchers
    );
    let mut fan_out = churn(&client, pid, &args, false, args.watchers, "b").await?;
    rows.extend(phase_rows("all see all", &args, &mut fan_out));

    // 10,000 pods: LIST time and RSS per 10,000 stored pods.
    let rss_before = rss_kib(pid);
    create_many(&client, "big", args.list_pods, "b", args.watchers).await?;
    let rss_after = rss_kib(pid);
    let mut list_store = Vec::new();
    let mut list_cache = Vec::new();
    for _ in 0..5 {
        let uri = "/api/v1/namespaces/big/pods";
        let (d, body) = timed(client.request_text(request("GET", uri, None))).await?;
        anyhow::ensure!(body.len() > args.list_pods * 500, "short LIST");
        list_store.push(d);
        let uri = "/api/v1/namespaces/big/pods?resourceVersion=0";
        let (d, _) = timed(client.request_text(request("GET", uri, None))).await?;
        list_cache.push(d);
    }
    let n = args.list_pods;
    rows.push((
        format!("LIST {n} pods (consistent)"),
        ms(percentile(&mut list_store, 50.0)),
        "≤ 150 ms".into(),
        "-".into(),
    ));
    rows.push((
        format!("LIST {n} pods (resourceVersion=0)"),
        ms(percentile(&mut list_cache, 50.0)),
        "≤ 150 ms".into(),
        "-".into(),
    ));
    rows.push((
        format!("RSS per {n} stored pods"),
        format!(
            "{:.1} MiB",
            rss_after.saturating_sub(rss_before) as f64 / 1024.0
        ),
        "-".into(),
        "-".into(),
    ));
    rows.push((
        "server RSS at the end".into(),
        format!("{:.1} MiB", rss_after as f64 / 1024.0),
        "-".into(),
        "-".into(),
    ));
    print_table(
        &format!(
            "API benchmark: {} pods stored, {} writes/s for {} s per phase, {} watchers, {} cores (client and server share them)",
            args.pods,
            args.writes_per_sec,
            args.seconds,
            args.watchers,
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        ),
        ["metric", "skiff", "target", "upstream SLO"],
        &rows,
    );
    drop(server);
    Ok(())
}
