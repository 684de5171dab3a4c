//! `skiff-bench controllers`: the controller manager at scale. Starts
//! `skiff server --disable-agent` and `skiff sim --nodes N` beside it,
//! creates a Deployment of R replicas and waits until all are available,
//! then rolls it to a new image and waits until the roll is complete.
//! Prints, per phase: the time; the API server's writes (store revisions)
//! per pod; the controller manager's own writes, counted from watches of
//! the benchmark's namespace (pod creates and deletes, ReplicaSet and
//! Deployment changes, the controllers' events); and beside them the time
//! upstream's default client limit (20 QPS, burst 30) alone would need for
//! those writes, and upstream's writes per pod for the same roll, counted
//! from its code. Then the server's RSS idle with the controller manager
//! running, beside a previous build's (`--base`).
//! Owns nothing else: it stops what it starts and removes its directories.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::cluster;
use crate::stats::print_grid;

const NAMESPACE: &str = "bench";
const CLUSTER_CIDR: &str = "10.96.0.0/12";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Simulated nodes.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// The Deployment's replicas.
    #[arg(long, default_value_t = 1000)]
    replicas: i32,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// A previous build's `skiff`, for the idle RSS beside it.
    #[arg(long)]
    base: Option<PathBuf>,
    /// The controller manager's client limit (`--kube-api-qps`) for the
    /// timed server; its default when not given.
    #[arg(long)]
    qps: Option<f32>,
    /// Its burst (`--kube-api-burst`).
    #[arg(long)]
    burst: Option<u32>,
    /// Skip the idle RSS part.
    #[arg(long)]
    no_idle: bool,
    /// How long the idle server settles before its RSS is read.
    #[arg(long, default_value_t = 10)]
    idle_seconds: u64,
}

/// Writes seen in the namespace, by what they were.
#[derive(Default, Debug, Clone)]
struct Counts {
    pod_creates: u64,
    pod_deletes: u64,
    set_writes: u64,
    deployment_writes: u64,
    controller_events: u64,
}

impl Counts {
    fn controller_writes(&self) -> u64 {
        self.pod_creates
            + self.pod_deletes
            + self.set_writes
            + self.deployment_writes
            + self.controller_events
    }

    fn minus(&self, o: &Counts) -> Counts {
        Counts {
            pod_creates: self.pod_creates - o.pod_creates,
            pod_deletes: self.pod_deletes - o.pod_deletes,
            set_writes: self.set_writes - o.set_writes,
            deployment_writes: self.deployment_writes - o.deployment_writes,
            controller_events: self.controller_events - o.controller_events,
        }
    }
}

/// Counts every write of `K` in the namespace seen by a watch.
fn count<K>(
    api: Api<K>,
    counts: Arc<Mutex<Counts>>,
    on: fn(&mut Counts, &watcher::Event<K>, &mut BTreeMap<String, String>),
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(Ok(event)) = stream.next().await {
            let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
            on(&mut c, &event, &mut seen);
        }
    });
}

/// Counts a new resourceVersion of an object once.
fn changed<K: kube::Resource>(seen: &mut BTreeMap<String, String>, obj: &K) -> bool {
    let name = obj.meta().name.clone().unwrap_or_default();
    let rv = obj.meta().resource_version.clone().unwrap_or_default();
    seen.insert(name, rv.clone()).as_deref() != Some(rv.as_str())
}

async fn wait_deployment(
    api: &Api<Deployment>,
    timeout: Duration,
    done: impl Fn(&Deployment) -> bool,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        if let Some(d) = api.get_opt("bench").await? {
            if done(&d) {
                return Ok(start.elapsed());
            }
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "the deployment did not get there in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rolled(d: &Deployment, replicas: i32, generation: i64) -> bool {
    let s = d.status.clone().unwrap_or_default();
    s.observed_generation.unwrap_or(0) >= generation
        && s.updated_replicas == Some(replicas)
        && s.replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
}

/// Upstream's writes per replaced pod in a rolling update, counted from
/// its code (kube-controller-manager, kube-scheduler, kubelet 1.33): the
/// ReplicaSet controller's create and delete and their SuccessfulCreate /
/// SuccessfulDelete events (4); the scheduler's binding and Scheduled
/// event (2); the new pod's kubelet status updates (at least 2: pending
/// with conditions, then running and ready) and its Pulled, Created and
/// Started events (3); the old pod's graceful deletion (the DELETE that
/// marks it, the kubelet's status update and final delete: 3) and its
/// Killing event (1). ReplicaSet and Deployment status writes come on top.
const UPSTREAM_WRITES_PER_ROLLED_POD: u64 = 4 + 2 + 2 + 3 + 3 + 1;
/// For a create from nothing: the same without the old pod's 4.
const UPSTREAM_WRITES_PER_CREATED_POD: u64 = 4 / 2 + 2 + 2 + 3;

/// How long a client limited to `qps` after a burst of `burst` needs for
/// `writes` requests.
fn floor(writes: u64, qps: f64, burst: u64) -> Duration {
    Duration::from_secs_f64(writes.saturating_sub(burst) as f64 / qps)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout);
    let mut flags = vec![
        "--disable-agent".to_string(),
        "--cluster-cidr".into(),
        CLUSTER_CIDR.into(),
    ];
    if let Some(qps) = args.qps {
        flags.extend(["--kube-api-qps".into(), qps.to_string()]);
    }
    if let Some(burst) = args.burst {
        flags.extend(["--kube-api-burst".into(), burst.to_string()]);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (server, client) = cluster::start_server(&flags).await?;
    let server_pid = server.child.id();
    cluster::create_namespace(&client, NAMESPACE).await?;

    // The simulated nodes.
    let skiff = cluster::sibling("skiff")?;
    let dir = tempfile::Builder::new()
        .prefix("skiff-bench-ctl-")
        .tempdir_in(if std::path::Path::new("/dev/shm").is_dir() {
            "/dev/shm"
        } else {
            "/tmp"
        })?;
    let mut sim = Command::new(&skiff)
        .arg("sim")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["--nodes", &args.nodes.to_string()])
        .args(["--pod-cidr-range", CLUSTER_CIDR])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("SKIFF_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let nodes: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let ready = nodes
            .list(&ListParams::default().labels("type=skiff-sim"))
            .await?
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= args.nodes {
            break;
        }
        anyhow::ensure!(start.elapsed() < timeout, "only {ready} nodes Ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let counts: Arc<Mutex<Counts>> = Arc::default();
    count::<Pod>(
        Api::namespaced(client.clone(), NAMESPACE),
        counts.clone(),
        |c, e, seen| match e {
            watcher::Event::Apply(p) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                if !seen.contains_key(&name) {
                    c.pod_creates += 1;
                }
                if p.metadata.deletion_timestamp.is_some()
                    && seen.get(&name).is_some_and(|v| v != "deleting")
                {
                    c.pod_deletes += 1;
                    seen.insert(name, "deleting".into());
                } else if p.metadata.deletion_timestamp.is_none() {
                    seen.insert(name, String::new());
                }
            }
            watcher::Event::Delete(p) => {
                let name = p.metadata.name.clone().unwrap_or_default();
                if seen.remove(&name).as_deref() == Some("") {
                    // Deleted at once (never marked).
                    c.pod_deletes += 1;
                }
            }
            _ => {}
        },
    );
    count::<ReplicaSet>(
        Api::namespaced(client.clone(), NAMESPACE),
        counts.clone(),
        |c, e, seen| {
            if let watcher::Event::Apply(rs) = e {
                if changed(seen, rs) {
                    c.set_writes += 1;
                }
            }
        },
    );
    count::<Deployment>(
        Api::namespaced(client.clone(), NAMESPACE),
        counts.clone(),
        |c, e, seen| {
            if let watcher::Event::Apply(d) = e {
                if changed(seen, d) {
                    c.deployment_writes += 1;
                }
            }
        },
    );
    count::<Event>(
        Api::namespaced(client.clone(), NAMESPACE),
        counts.clone(),
        |c, e, seen| {
            if let watcher::Event::Apply(ev) = e {
                let source = ev
                    .source
                    .as_ref()
                    .and_then(|s| s.component.as_deref())
                    .unwrap_or_default();
                if matches!(source, "replicaset-controller" | "deployment-controller")
                    && changed(seen, ev)
                {
                    c.controller_events += 1;
                }
            }
        },
    );

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let body: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": {"app": "bench"}},
            "template": {
                "metadata": {"labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
            },
        },
    }))?;
    let r0 = crate::sim::revision(&client).await?;
    let c0 = counts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cpu0 = cluster::cpu_seconds(&server_pid.to_string());
    deployments.create(&PostParams::default(), &body).await?;
    let available = wait_deployment(&deployments, timeout, |d| rolled(d, args.replicas, 1)).await?;
    let r1 = crate::sim::revision(&client).await?;
    let c1 = counts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cpu1 = cluster::cpu_seconds(&server_pid.to_string());
    deployments
        .patch(
            "bench",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}}})),
        )
        .await?;
    let rolled_in = wait_deployment(&deployments, timeout, |d| rolled(d, args.replicas, 2)).await?;
    // The last deletions of the roll land after the status says so: wait
    // until only the new pods are left, none of them being deleted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let settle = Instant::now();
    loop {
        let left = pods
            .list(&ListParams::default().labels("app=bench"))
            .await?;
        let deleting = left
            .items
            .iter()
            .any(|p| p.metadata.deletion_timestamp.is_some());
        if !deleting && left.items.len() == usize::try_from(args.replicas).unwrap_or(0) {
            break;
        }
        anyhow::ensure!(
            settle.elapsed() < timeout,
            "the old pods were not gone in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r2 = crate::sim::revision(&client).await?;
    let c2 = counts.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let cpu2 = cluster::cpu_seconds(&server_pid.to_string());
    let _ = sim.kill();
    let _ = sim.wait();
    drop(server);

    let n = f64::from(args.replicas);
    let create = c1.minus(&c0);
    let roll = c2.minus(&c1);
    let create_floor = floor(create.controller_writes(), 20.0, 30);
    let roll_floor = floor(roll.controller_writes(), 20.0, 30);
    let s = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let per = |w: u64| format!("{:.2}", w as f64 / n);
    let limit = match (args.qps, args.burst) {
        (None, None) => "default client limit".to_string(),
        (q, b) => format!(
            "client limit {} QPS / burst {}",
            q.map_or("default".into(), |q| q.to_string()),
            b.map_or("default".into(), |b| b.to_string())
        ),
    };
    let title = format!(
        "skiff-bench controllers: a Deployment of {} replicas on {} simulated nodes, {limit} (server and sim on this machine)",
        args.replicas, args.nodes
    );
    print_grid(
        &title,
        &["", "create → all available", "roll to a new image"],
        &[
            vec!["time".into(), s(available), s(rolled_in)],
            vec![
                "upstream's 20 QPS / burst 30 floor for the controllers' writes".into(),
                s(create_floor),
                s(roll_floor),
            ],
            vec![
                "time / floor (target < 0.10 for the roll)".into(),
                format!(
                    "{:.3}",
                    available.as_secs_f64() / create_floor.as_secs_f64().max(1e-9)
                ),
                format!(
                    "{:.3}",
                    rolled_in.as_secs_f64() / roll_floor.as_secs_f64().max(1e-9)
                ),
            ],
            vec![
                "API writes per pod (store revisions, all components)".into(),
                per(u64::try_from(r1 - r0).unwrap_or(0)),
                per(u64::try_from(r2 - r1).unwrap_or(0)),
            ],
            vec![
                "upstream's writes per pod (from its code, before status writes)".into(),
                UPSTREAM_WRITES_PER_CREATED_POD.to_string(),
                UPSTREAM_WRITES_PER_ROLLED_POD.to_string(),
            ],
            vec![
                "controller-manager writes per pod".into(),
                per(create.controller_writes()),
                per(roll.controller_writes()),
            ],
            vec![
                "  pod creates / deletes".into(),
                format!("{} / {}", create.pod_creates, create.pod_deletes),
                format!("{} / {}", roll.pod_creates, roll.pod_deletes),
            ],
            vec![
                "  ReplicaSet / Deployment writes".into(),
                format!("{} / {}", create.set_writes, create.deployment_writes),
                format!("{} / {}", roll.set_writes, roll.deployment_writes),
            ],
            vec![
                "  controller events".into(),
                create.controller_events.to_string(),
                roll.controller_events.to_string(),
            ],
            vec![
                "server CPU".into(),
                format!("{:.1} s", cpu1 - cpu0),
                format!("{:.1} s", cpu2 - cpu1),
            ],
        ],
    );

    if args.no_idle {
        return Ok(());
    }
    // Idle RSS, this build beside the base.
    let mut rows = Vec::new();
    let this = idle_rss(&skiff, args.idle_seconds).await?;
    let base = match &args.base {
        Some(b) => Some(idle_rss(b, args.idle_seconds).await?),
        None => None,
    };
    let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    rows.push(vec![
        format!(
            "server RSS idle after {} s (target ≤ 64 MiB)",
            args.idle_seconds
        ),
        mib(this),
        base.map(mib).unwrap_or_else(|| "(no --base)".into()),
    ]);
    print_grid(
        "idle (server with --disable-agent, controller manager leading)",
        &["", "this build", "base"],
        &rows,
    );
    Ok(())
}

/// The RSS of an all-in-one server (agent off) left idle.
async fn idle_rss(skiff: &std::path::Path, seconds: u64) -> anyhow::Result<u64> {
    let (server, _client) = cluster::start_server_binary(skiff, &["--disable-agent"]).await?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    Ok(cluster::rss_kib(server.child.id()))
}
