//! `skiff-bench services`: Services at scale ([#36]), each figure beside
//! its baseline or target in one run on one machine:
//!
//! 1. Proxy sync: a [`Proxier`] with N ClusterIP Services of 2 endpoints
//!    each (N = 50 and N = `--services`), fully synced into a real
//!    nftables table in a private network namespace, then K changes of
//!    one endpoint IP of one Service, each timed from `apply_slice` to
//!    `nft -f` returning (plan, then nft). Beside them, three tiny
//!    batches at both sizes (an empty one, one element added to our
//!    table, one to another tiny table) to show whether nft's own cache
//!    load grows with the table.
//! 2. DNS: our server (a `skiff-bench services dns-serve` process on
//!    [`Records`] of N Services) beside dnsmasq with the same N names in
//!    a hosts file, both pinned to core 1, loaded by dnsperf pinned to
//!    core 0; each is checked to answer the right address first.
//! 3. Memory: a fresh `skiff-bench services mem-probe` process (jemalloc
//!    returning freed pages at once) reads its VmRSS before and after
//!    building the objects, a [`Records`] and a [`Proxier`] (after one full
//!    plan and commit) of N Services and 2N endpoints.
//! 4. ClusterIP beside direct: a `skiff server` with its node, a
//!    Deployment of 3 busybox httpd pods behind a ClusterIP Service and a
//!    busybox client pod (created with kubectl), and closed-loop
//!    HTTP/1.0 GETs (a new connection each) from the client pod's network
//!    namespace (a `skiff-bench services load` process started with
//!    `ip netns exec` in the pod's `cni-*` namespace: pod → Service, the
//!    path the issue means) to (a) the ClusterIP, (b) the pod IPs
//!    round-robin and (c) the pod IPs picked at random (as the proxy's
//!    `numgen random` picks), interleaved a b c a b c; requests of 0.5 s
//!    or more (a lost SYN is retried after 1 s) are counted. Beside them,
//!    for information, (a) and (b) from this process on the host, whose
//!    ClusterIP traffic the proxy masquerades (`fully-random`) as
//!    kube-proxy does. Skipped with `--skip-cluster`.
//! 5. Idle memory: a fresh `skiff server` with its node (agent, proxy,
//!    DNS, controllers, scheduler) left idle for `--idle-seconds` after
//!    its node is Ready, its VmRSS (file-backed and anonymous) beside the
//!    same build with `--disable-kube-proxy --disable-cluster-dns` and,
//!    with `--base`, an older build; the issue's target is 64 MiB.
//!    Skipped with `--skip-cluster`.
//!
//! Owns nothing else: the network namespaces, processes, server (stopped
//! by PID, then `skiff reset`) and directories it makes are removed also
//! on errors and Ctrl-C. Every wait is bounded. It prints figures and
//! never asserts them.
//!
//! [#36]: https://github.com/skiff/skiff/issues/36

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::json;
use skiff_dns::{Records, SharedRecords};
use skiff_proxy::nft::{Nft as _, NftCommand};
use skiff_proxy::rules::Skeleton;
use skiff_proxy::sync::Proxier;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use crate::cluster;
use crate::node::{wait_node_ready, Lease};
use crate::stats::{percentile, print_grid};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// Services in the large case (proxy, DNS and memory).
    #[arg(long, default_value_t = 5000)]
    services: usize,
    /// Services in the small proxy case.
    #[arg(long, default_value_t = 50)]
    small: usize,
    /// Endpoint changes timed at each size.
    #[arg(long, default_value_t = 30)]
    changes: usize,
    /// Seconds of each dnsperf run.
    #[arg(long, default_value_t = 10)]
    dns_seconds: u64,
    /// dnsperf runs per server (alternating ours, dnsmasq).
    #[arg(long, default_value_t = 2)]
    dns_rounds: usize,
    /// dnsperf clients (`-c`).
    #[arg(long, default_value_t = 4)]
    dns_clients: usize,
    /// dnsperf's rate cap (`-Q`); high enough that the server or dnsperf
    /// itself is the limit.
    #[arg(long, default_value_t = 1_000_000)]
    dns_max_qps: u64,
    /// Concurrent HTTP workers (closed loop).
    #[arg(long, default_value_t = 8)]
    http_workers: usize,
    /// Seconds of each HTTP load phase.
    #[arg(long, default_value_t = 10)]
    http_seconds: u64,
    /// Skip parts 4 and 5 (the live clusters).
    #[arg(long)]
    skip_cluster: bool,
    /// Seconds an idle server settles after its node is Ready before its
    /// RSS is read (part 5).
    #[arg(long, default_value_t = 20)]
    idle_seconds: u64,
    /// An older build's `skiff`, whose idle RSS part 5 prints beside
    /// this build's.
    #[arg(long)]
    base: Option<PathBuf>,
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// The kubectl binary.
    #[arg(long, default_value = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33")]
    kubectl: PathBuf,
}

/// The benchmark's helper processes (not for people).
#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Serves `--names` Services' names with skiff-dns until killed.
    #[command(hide = true)]
    DnsServe {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        names: usize,
        #[arg(long, default_value_t = 1)]
        workers: usize,
    },
    /// Prints the RSS growth of building the objects, Records and a
    /// Proxier of `--services` Services.
    #[command(hide = true)]
    MemProbe {
        #[arg(long)]
        services: usize,
    },
    /// Closed-loop HTTP/1.0 GETs to `--target` for `--seconds`; prints
    /// one JSON line (a [`LoadReport`]). Part 4 runs it in a client pod's
    /// network namespace.
    #[command(hide = true)]
    Load {
        #[arg(long, value_delimiter = ',', required = true)]
        target: Vec<SocketAddr>,
        #[arg(long, value_enum, default_value_t = Pick::Roundrobin)]
        mode: Pick,
        #[arg(long, default_value_t = 8)]
        workers: usize,
        #[arg(long, default_value_t = 10)]
        seconds: u64,
    },
}

/// How a load spreads over its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Pick {
    /// One shared counter, each request the next target.
    Roundrobin,
    /// Each worker picks at random (as the proxy's `numgen random`).
    Random,
}

impl Pick {
    fn arg(self) -> &'static str {
        match self {
            Pick::Roundrobin => "roundrobin",
            Pick::Random => "random",
        }
    }
}

const NAMESPACE: &str = "bench";
const DOMAIN: &str = "cluster.local";
const NODE: &str = "skiff-bench";
const TABLE: &str = "skiff-bench";
/// The tiny table beside ours that the probes also write to.
const PROBE_TABLE: &str = "skiff-bench-probe";
const NETNS_PREFIX: &str = "skiff-bench-svc-";
/// Tiny batches timed per kind and size.
const PROBES: usize = 15;
/// Our DNS server and dnsmasq listen on these loopback addresses.
const OURS_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 37, 1);
const DNSMASQ_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 37, 2);

// ------------------------------------------------------------ objects

fn add(base: Ipv4Addr, n: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(base) + u32::try_from(n).unwrap_or(u32::MAX))
}

fn cluster_ip(i: usize) -> Ipv4Addr {
    add(Ipv4Addr::new(10, 96, 0, 1), i)
}

fn endpoint_ips(i: usize) -> [Ipv4Addr; 2] {
    let base = Ipv4Addr::new(10, 64, 0, 1);
    [add(base, 2 * i), add(base, 2 * i + 1)]
}

/// The new address of the `k`-th changed endpoint.
fn moved_ip(k: usize) -> Ipv4Addr {
    add(Ipv4Addr::new(10, 80, 0, 1), k)
}

fn svc_name(i: usize) -> String {
    format!("svc-{i}")
}

fn fqdn(i: usize) -> String {
    format!("svc-{i}.{NAMESPACE}.svc.{DOMAIN}")
}

/// A ClusterIP Service with one named port, as the API server returns it.
fn service(i: usize) -> anyhow::Result<Arc<Service>> {
    let ip = cluster_ip(i).to_string();
    let name = svc_name(i);
    Ok(Arc::new(serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": NAMESPACE,
            "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": name},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": ip, "clusterIPs": [ip],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "selector": {"app": name},
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
        },
        "status": {"loadBalancer": {}},
    }))?))
}

/// The EndpointSlice of Service `i` with two ready endpoints at `ips`.
fn slice(i: usize, ips: [Ipv4Addr; 2]) -> anyhow::Result<Arc<EndpointSlice>> {
    let name = svc_name(i);
    let endpoints: Vec<_> = ips
        .iter()
        .enumerate()
        .map(|(j, ip)| {
            json!({
                "addresses": [ip.to_string()],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "nodeName": format!("node-{j}"),
                "targetRef": {"kind": "Pod", "namespace": NAMESPACE,
                              "name": format!("{name}-pod-{j}"),
                              "uid": format!("00000000-0000-4000-9000-{:012}", 2 * i + j)},
            })
        })
        .collect();
    Ok(Arc::new(serde_json::from_value(json!({
        "metadata": {
            "name": format!("{name}-x7k2p"), "namespace": NAMESPACE,
            "uid": format!("00000000-0000-4000-a000-{i:012}"),
            "resourceVersion": (100_000 + i).to_string(),
            "generateName": format!("{name}-"),
            "labels": {"kubernetes.io/service-name": name,
                       "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                                 "uid": format!("00000000-0000-4000-8000-{i:012}"),
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))?))
}

fn skeleton() -> Skeleton {
    Skeleton {
        table: TABLE.into(),
        node_ips: vec![Ipv4Addr::new(192, 0, 2, 1)],
        cluster_cidr: Some("10.64.0.0/12".into()),
        service_cidr: Some("10.96.0.0/12".into()),
    }
}

// ------------------------------------------------------------ helpers

fn p(samples: &[Duration], q: f64) -> Duration {
    percentile(&mut samples.to_vec(), q)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite()).then(|| a / b)
}

fn times(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}×"))
}

/// "≤ 2× (met)" / "(MISSED)"; `at_most` says which side the target is.
fn verdict(r: Option<f64>, target: f64, at_most: bool) -> String {
    let sign = if at_most { "≤" } else { "≥" };
    match r {
        Some(r) if (at_most && r <= target) || (!at_most && r >= target) => "met".into(),
        Some(_) => "MISSED".into(),
        None => format!("{sign} {target}×: no figure"),
    }
}

fn kib_text(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A child process killed (SIGKILL, by its PID) and reaped on drop.
#[derive(Debug)]
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A small deterministic shuffle (xorshift), so runs query in the same
/// order.
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = usize::try_from(seed % (i as u64 + 1)).unwrap_or(0);
        v.swap(i, j);
    }
}

// ------------------------------------------------------- 1. proxy sync

/// A network namespace of ours, removed on drop.
#[derive(Debug)]
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> anyhow::Result<Self> {
        Self::remove_stale();
        let name = format!("{NETNS_PREFIX}{}-{tag}", std::process::id());
        let status = Command::new("ip")
            .args(["netns", "add", &name])
            .stderr(Stdio::inherit())
            .status()
            .context("cannot run ip")?;
        anyhow::ensure!(status.success(), "ip netns add {name}: {status}");
        Ok(Self(name))
    }

    /// Namespaces left by a run that was killed (its PID is gone).
    fn remove_stale() {
        for e in std::fs::read_dir("/run/netns")
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(NETNS_PREFIX)
                .and_then(|rest| rest.split('-').next())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = Command::new("ip").args(["netns", "del", &name]).status();
            }
        }
    }

    fn nft(&self) -> NftCommand {
        NftCommand::with_prefix(&["ip", "netns", "exec", &self.0])
    }

    /// How many chains `table` has (`nft -t list table`).
    fn chains(&self, table: &str) -> usize {
        Command::new("ip")
            .args([
                "netns", "exec", &self.0, "nft", "-t", "list", "table", "ip", table,
            ])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.trim_start().starts_with("chain "))
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[derive(Debug, Default)]
struct SyncFigures {
    services: usize,
    chains: usize,
    full_plan: Duration,
    full_nft: Duration,
    full_bytes: usize,
    /// Per change: apply_slice → nft returned; its plan part; its nft part.
    total: Vec<Duration>,
    plan: Vec<Duration>,
    nft: Vec<Duration>,
    bytes: Vec<usize>,
    /// `nft -f` of: nothing; one element into our table; one element
    /// into a tiny table beside it.
    empty: Vec<Duration>,
    one_element: Vec<Duration>,
    other_table: Vec<Duration>,
}

fn timed(f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn proxy_sync(n: usize, changes: usize) -> anyhow::Result<SyncFigures> {
    let ns = Netns::new(&n.to_string())?;
    let nft = ns.nft();
    let mut f = SyncFigures {
        services: n,
        ..SyncFigures::default()
    };
    let mut proxier = Proxier::new(skeleton(), NODE);
    let mut ips: Vec<[Ipv4Addr; 2]> = (0..n).map(endpoint_ips).collect();
    for (i, eps) in ips.iter().enumerate() {
        proxier.apply_service(service(i)?);
        proxier.apply_slice(slice(i, *eps)?);
    }
    let started = Instant::now();
    let plan = proxier.plan().context("no full plan")?;
    f.full_plan = started.elapsed();
    f.full_bytes = plan.script.len();
    f.full_nft = timed(|| nft.apply(&plan.script).context("the full batch"))?;
    proxier.commit(plan);
    nft.apply(&format!(
        "add table ip {PROBE_TABLE}\nadd set ip {PROBE_TABLE} s {{ type ipv4_addr; }}\n"
    ))?;

    // Different Services, spread over the table (7919 is prime, so the
    // first `n` picks are distinct).
    for k in 0..changes {
        let i = (k * 7919 + 13) % n;
        ips[i][0] = moved_ip(k);
        let changed = slice(i, ips[i])?;
        let t0 = Instant::now();
        proxier.apply_slice(changed);
        let plan = proxier.plan().context("no plan for a change")?;
        let t1 = Instant::now();
        nft.apply(&plan.script)
            .with_context(|| format!("change {k}:\n{}", plan.script))?;
        let t2 = Instant::now();
        f.bytes.push(plan.script.len());
        proxier.commit(plan);
        f.total.push(t2 - t0);
        f.plan.push(t1 - t0);
        f.nft.push(t2 - t1);
    }
    for k in 0..PROBES {
        let ip = add(Ipv4Addr::new(10, 127, 0, 1), k);
        f.empty.push(timed(|| Ok(nft.apply("")?))?);
        f.one_element.push(timed(|| {
            Ok(nft.apply(&format!("add element ip {TABLE} cluster-ips {{ {ip} }}\n"))?)
        })?);
        f.other_table.push(timed(|| {
            Ok(nft.apply(&format!("add element ip {PROBE_TABLE} s {{ {ip} }}\n"))?)
        })?);
    }
    f.chains = ns.chains(TABLE);
    Ok(f)
}

// -------------------------------------------------------------- 2. DNS

/// What dnsperf printed, and the server's CPU meanwhile.
#[derive(Debug, Default, Clone)]
struct Perf {
    qps: f64,
    /// Seconds.
    latency: f64,
    sent: u64,
    lost: u64,
    codes: String,
    /// CPU seconds of the server per second of the run.
    cpu: f64,
}

fn parse_dnsperf(text: &str) -> anyhow::Result<Perf> {
    let field = |key: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.trim_start().strip_prefix(key))
            .map(str::trim)
    };
    let first =
        |key: &str| -> Option<&str> { field(key).and_then(|v| v.split_whitespace().next()) };
    let parsed = Perf {
        qps: first("Queries per second:")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("no \"Queries per second\" in dnsperf's output:\n{text}"))?,
        latency: first("Average Latency (s):")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("no \"Average Latency\" in dnsperf's output:\n{text}"))?,
        sent: first("Queries sent:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        lost: first("Queries lost:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        codes: field("Response codes:").unwrap_or("").to_string(),
        cpu: 0.0,
    };
    Ok(parsed)
}

/// One A query over UDP: the response code and the addresses.
async fn query_a(server: SocketAddr, name: &str) -> anyhow::Result<(ResponseCode, Vec<Ipv4Addr>)> {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
    let mut msg = Message::query();
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(Name::from_ascii(name)?, RecordType::A));
    socket.send_to(&msg.to_vec()?, server).await?;
    let mut buf = vec![0u8; 4096];
    let (n, _) = tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf))
        .await
        .map_err(|_| anyhow!("no answer from {server} within 1 s"))??;
    let reply = Message::from_vec(&buf[..n])?;
    anyhow::ensure!(
        reply.metadata.id == msg.metadata.id,
        "an answer to another query"
    );
    let ips = reply
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(a.0),
            _ => None,
        })
        .collect();
    Ok((reply.metadata.response_code, ips))
}

/// Waits until `server` answers Service `i`'s name with its ClusterIP,
/// then checks a few more names.
async fn check_dns(
    what: &str,
    server: SocketAddr,
    names: usize,
    proc: &mut Killed,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = proc.0.try_wait()? {
            bail!("{what} exited ({status}) before answering");
        }
        let last = match query_a(server, &fqdn(0)).await {
            Ok((ResponseCode::NoError, ips)) if ips == [cluster_ip(0)] => break,
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("{e:#}"),
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what} at {server} did not answer {} within 30 s (last: {last})",
            fqdn(0)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in [names / 2, names - 1] {
        let (code, ips) = query_a(server, &fqdn(i)).await?;
        anyhow::ensure!(
            code == ResponseCode::NoError && ips == [cluster_ip(i)],
            "{what}: {} answered {code:?} {ips:?}, not {}",
            fqdn(i),
            cluster_ip(i)
        );
    }
    let (code, _) = query_a(server, &format!("nosuch.{NAMESPACE}.svc.{DOMAIN}")).await?;
    eprintln!("{what} at {server}: answers correctly (a missing name: {code:?})");
    Ok(())
}

#[derive(Debug, Default)]
struct DnsFigures {
    ours: Vec<Perf>,
    dnsmasq: Vec<Perf>,
    ours_rss: u64,
    dnsmasq_rss: u64,
}

fn mean(v: &[Perf], f: fn(&Perf) -> f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.iter().map(f).sum::<f64>() / v.len() as f64
}

/// Server CPU microseconds per answered query, over all rounds.
fn cpu_per_query(v: &[Perf]) -> f64 {
    mean(v, |p| p.cpu) / mean(v, |p| p.qps) * 1e6
}

async fn dnsperf(
    args: &Args,
    server: SocketAddr,
    queries: &Path,
    pid: u32,
) -> anyhow::Result<Perf> {
    let cpu0 = cluster::cpu_seconds(&pid.to_string());
    let t = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(args.dns_seconds + 60),
        tokio::process::Command::new("taskset")
            .args(["-c", "0", "dnsperf", "-s"])
            .arg(server.ip().to_string())
            .args(["-p", &server.port().to_string(), "-d"])
            .arg(queries)
            .args(["-l", &args.dns_seconds.to_string()])
            .args(["-c", &args.dns_clients.to_string()])
            .args(["-Q", &args.dns_max_qps.to_string()])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| anyhow!("dnsperf did not finish"))?
    .context("cannot run dnsperf (Debian dnsperf)")?;
    let secs = t.elapsed().as_secs_f64();
    let cpu1 = cluster::cpu_seconds(&pid.to_string());
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "dnsperf failed ({}): {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let mut perf = parse_dnsperf(&text)?;
    perf.cpu = (cpu1 - cpu0) / secs.max(1e-9);
    Ok(perf)
}

async fn dns(args: &Args) -> anyhow::Result<DnsFigures> {
    let n = args.services;
    let dir = tempfile::Builder::new()
        .prefix("skiff-bench-dns-")
        .tempdir()?;
    let hosts = dir.path().join("hosts");
    let queries = dir.path().join("queries");
    {
        let mut h = std::io::BufWriter::new(std::fs::File::create(&hosts)?);
        for i in 0..n {
            writeln!(h, "{} {}", cluster_ip(i), fqdn(i))?;
        }
        h.flush()?;
        let mut order: Vec<usize> = (0..n).collect();
        shuffle(&mut order, 0x9e37_79b9_7f4a_7c15);
        let mut q = std::io::BufWriter::new(std::fs::File::create(&queries)?);
        for i in order {
            writeln!(q, "{} A", fqdn(i))?;
        }
        q.flush()?;
    }
    let ours_addr = SocketAddr::V4(SocketAddrV4::new(OURS_IP, skiff_testkit::free_port()?));
    let dnsmasq_addr = SocketAddr::V4(SocketAddrV4::new(DNSMASQ_IP, skiff_testkit::free_port()?));
    let exe = std::env::current_exe()?;
    let mut ours = Killed(
        Command::new("taskset")
            .args(["-c", "1"])
            .arg(&exe)
            .args(["services", "dns-serve", "--listen", &ours_addr.to_string()])
            .args(["--names", &n.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot run taskset")?,
    );
    let mut dnsmasq = Killed(
        Command::new("taskset")
            .args([
                "-c",
                "1",
                "dnsmasq",
                "--keep-in-foreground",
                "--conf-file=/dev/null",
            ])
            .args(["--no-resolv", "--no-hosts"])
            .arg(format!("--addn-hosts={}", hosts.display()))
            .arg(format!("--listen-address={DNSMASQ_IP}"))
            .arg("--bind-interfaces")
            .arg(format!("--port={}", dnsmasq_addr.port()))
            .args(["--cache-size=10000", "--user=root", "--pid-file="])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot run dnsmasq (Debian dnsmasq-base)")?,
    );
    check_dns("skiff-dns", ours_addr, n, &mut ours).await?;
    check_dns("dnsmasq", dnsmasq_addr, n, &mut dnsmasq).await?;
    let mut f = DnsFigures::default();
    for round in 0..args.dns_rounds {
        let a = dnsperf(args, ours_addr, &queries, ours.0.id()).await?;
        eprintln!(
            "dns round {}: skiff-dns {:.0} QPS, {:.3} ms",
            round + 1,
            a.qps,
            a.latency * 1e3
        );
        f.ours.push(a);
        let b = dnsperf(args, dnsmasq_addr, &queries, dnsmasq.0.id()).await?;
        eprintln!(
            "dns round {}: dnsmasq   {:.0} QPS, {:.3} ms",
            round + 1,
            b.qps,
            b.latency * 1e3
        );
        f.dnsmasq.push(b);
    }
    f.ours_rss = cluster::rss_kib(ours.0.id());
    f.dnsmasq_rss = cluster::rss_kib(dnsmasq.0.id());
    Ok(f)
}

/// `services dns-serve`: Records of `names` Services, served until
/// killed.
async fn dns_serve(listen: SocketAddr, names: usize, workers: usize) -> anyhow::Result<()> {
    let services: Vec<Arc<Service>> = (0..names).map(service).collect::<anyhow::Result<_>>()?;
    let mut records = Records::try_new(DOMAIN, 5)?;
    for s in &services {
        records.apply_service(s);
    }
    drop(services);
    let mut config = skiff_dns::Config::new(vec![listen], DOMAIN);
    config.workers = workers;
    let bound = skiff_dns::bind(&config).await?;
    bound
        .serve(SharedRecords::new(records), CancellationToken::new())
        .await;
    Ok(())
}

// ----------------------------------------------------------- 3. memory

#[derive(Debug, Default)]
struct MemFigures {
    objects: u64,
    records: u64,
    proxier: u64,
    peak: u64,
    script_bytes: u64,
}

/// `services mem-probe`: prints `key=value` lines (KiB, bytes).
fn mem_probe(n: usize) -> anyhow::Result<()> {
    let me = std::process::id();
    let rss = || cluster::rss_kib(me);
    let r0 = rss();
    let services: Vec<Arc<Service>> = (0..n).map(service).collect::<anyhow::Result<_>>()?;
    let slices: Vec<Arc<EndpointSlice>> = (0..n)
        .map(|i| slice(i, endpoint_ips(i)))
        .collect::<anyhow::Result<_>>()?;
    let r1 = rss();
    let records = Records::from_objects(
        DOMAIN,
        5,
        services.iter().map(|s| s.as_ref()),
        slices.iter().map(|s| s.as_ref()),
    );
    let r2 = rss();
    let mut proxier = Proxier::new(skeleton(), NODE);
    for s in &services {
        proxier.apply_service(s.clone());
    }
    for s in &slices {
        proxier.apply_slice(s.clone());
    }
    let plan = proxier.plan().context("no full plan")?;
    let script_bytes = plan.script.len();
    proxier.commit(plan);
    let r3 = rss();
    std::hint::black_box((&records, &proxier));
    println!("objects={}", r1.saturating_sub(r0));
    println!("records={}", r2.saturating_sub(r1));
    println!("proxier={}", r3.saturating_sub(r2));
    println!(
        "peak={}",
        cluster::status_kib(me, "VmHWM:").saturating_sub(r0)
    );
    println!("script_bytes={script_bytes}");
    Ok(())
}

fn memory(n: usize) -> anyhow::Result<MemFigures> {
    let out = Command::new(std::env::current_exe()?)
        .args(["services", "mem-probe", "--services", &n.to_string()])
        // jemalloc (prefixed in tikv-jemallocator) returns freed pages at
        // once, so RSS follows what is live rather than what was freed.
        .env("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "mem-probe failed ({})", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok(MemFigures {
        objects: get("objects"),
        records: get("records"),
        proxier: get("proxier"),
        peak: get("peak"),
        script_bytes: get("script_bytes"),
    })
}

// -------------------------------------------------- 4. live ClusterIP

/// Runs `skiff reset` on a data dir when dropped.
#[derive(Debug)]
struct Reset {
    skiff: PathBuf,
    data_dir: PathBuf,
    bridge: String,
    log: PathBuf,
}

impl Drop for Reset {
    fn drop(&mut self) {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .and_then(|f| Ok((Stdio::from(f.try_clone()?), Stdio::from(f))));
        let (stdout, stderr) = out.unwrap_or_else(|_| (Stdio::null(), Stdio::null()));
        let child = Command::new(&self.skiff)
            .arg("reset")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--bridge-name", &self.bridge])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("cannot run skiff reset on {}", self.data_dir.display());
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            match child.try_wait() {
                Ok(Some(s)) if s.success() => return,
                Ok(Some(s)) => {
                    eprintln!("skiff reset failed ({s}); see {}", self.log.display());
                    return;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    eprintln!("skiff reset did not finish within 180 s");
                    return;
                }
            }
        }
    }
}

/// `skiff server` with its node; stopped by PID (SIGTERM, then SIGKILL
/// after 40 s) and then reset when dropped.
#[derive(Debug)]
struct ClusterServer {
    child: Option<Child>,
    kubeconfig: PathBuf,
    log: PathBuf,
    _reset: Reset,
}

impl ClusterServer {
    fn spawn(skiff: &Path, work: &Path, lease: &Lease, extra: &[&str]) -> anyhow::Result<Self> {
        let data_dir = work.join("server");
        let log = work.join("server.log");
        let bridge = lease.bridge();
        let reset = Reset {
            skiff: skiff.to_path_buf(),
            data_dir: data_dir.clone(),
            bridge: bridge.clone(),
            log: work.join("reset.log"),
        };
        let kubelet_port = skiff_testkit::free_port()?;
        let o = lease.octet;
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
            .args(["--cluster-cidr", &format!("10.{o}.0.0/17")])
            .args(["--service-cidr", &format!("10.{o}.128.0/17")])
            .args(["--bridge-name", &bridge])
            .args(["--kubelet-port", &kubelet_port.to_string()])
            .args(["--node-ip", "127.0.0.1", "--node-name", NODE])
            .args(extra)
            .env("SKIFF_LOG", "info,kube=warn,tower=warn,hyper=warn,h2=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            // Its own process group: Ctrl-C reaches the bench, which
            // stops it in order.
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", skiff.display()))?;
        Ok(Self {
            child: Some(child),
            kubeconfig: data_dir.join("admin.kubeconfig"),
            log,
            _reset: reset,
        })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    async fn client(&mut self, timeout: Duration) -> anyhow::Result<Client> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("skiff server exited ({status}):\n{}", self.log_tail());
            }
            if let Ok(kc) = Kubeconfig::read_from(&self.kubeconfig) {
                let config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
                let client = Client::try_from(config)?;
                if client.apiserver_version().await.is_ok() {
                    return Ok(client);
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "skiff server did not answer within {timeout:?}:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ClusterServer {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        cluster::stop_child(&mut child, Duration::from_secs(40));
        // then `_reset` runs `skiff reset`.
    }
}

const WEB_YAML: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: bench}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: web
        image: busybox
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "mkdir -p /www && echo 'hello from skiff-bench services' > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: bench}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
"#;

/// The pod whose network namespace the loads run in (pod → Service).
const CLIENT_YAML: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: client, namespace: bench}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: client
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
"#;

/// Waits for pod `name` to be Ready; its IP.
async fn ready_pod_ip(pods: &Api<Pod>, name: &str, timeout: Duration) -> anyhow::Result<Ipv4Addr> {
    let deadline = Instant::now() + timeout;
    loop {
        let status = pods.get(name).await?.status.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if let (true, Some(ip)) = (ready, status.pod_ip.as_deref()) {
            return ip
                .parse()
                .with_context(|| format!("pod {name} has IP {ip:?}"));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "pod {name} not Ready with an IP within {timeout:?} (phase {:?})",
            status.phase
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// kubectl with the cluster's kubeconfig and its own cache dir; stdout.
async fn kubectl(
    args: &Args,
    kubeconfig: &Path,
    cache: &Path,
    argv: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<String> {
    let mut cmd = tokio::process::Command::new(&args.kubectl);
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(argv)
        .env("KUBECACHEDIR", cache)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", args.kubectl.display()))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).await?;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .map_err(|_| anyhow!("kubectl {argv:?} did not finish within 60 s"))??;
    anyhow::ensure!(
        out.status.success(),
        "kubectl {argv:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One HTTP/1.0 GET on a new connection; the whole answer read.
async fn http_get(addr: SocketAddr) -> anyhow::Result<()> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n").await?;
    let mut buf = Vec::with_capacity(512);
    s.read_to_end(&mut buf).await?;
    anyhow::ensure!(
        buf.len() > 12 && buf.starts_with(b"HTTP/1.") && &buf[9..12] == b"200",
        "not a 200: {:?}",
        String::from_utf8_lossy(&buf[..buf.len().min(40)])
    );
    Ok(())
}

/// A closed-loop load's outcome.
#[derive(Debug, Default)]
struct Load {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Load {
    fn merge(&mut self, o: Load) {
        self.requests += o.requests;
        self.errors += o.errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error;
        }
        self.elapsed += o.elapsed;
        self.latencies.extend(o.latencies);
    }

    fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn mean(&self) -> Duration {
        let n = u32::try_from(self.latencies.len())
            .unwrap_or(u32::MAX)
            .max(1);
        self.latencies.iter().sum::<Duration>() / n
    }

    /// Requests that took at least `d` (a lost SYN costs 1 s).
    fn slower_than(&self, d: Duration) -> usize {
        self.latencies.iter().filter(|l| **l >= d).count()
    }
}

/// `workers` loops of GETs for `length`, to `targets` round-robin (or
/// each worker picking at random, as the proxy's `numgen random` does).
async fn load(targets: &[SocketAddr], workers: usize, length: Duration, pick: Pick) -> Load {
    let targets: Arc<Vec<SocketAddr>> = Arc::new(targets.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + length;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..workers {
        let (targets, next) = (targets.clone(), next.clone());
        tasks.spawn(async move {
            let mut l = Load::default();
            let mut seed =
                0x2545_f491_4f6c_dd1d_u64 ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9);
            while Instant::now() < deadline {
                let i = if pick == Pick::Random {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    usize::try_from(seed % targets.len() as u64).unwrap_or(0)
                } else {
                    next.fetch_add(1, Ordering::Relaxed) % targets.len()
                };
                let target = targets[i];
                let t = Instant::now();
                match tokio::time::timeout(Duration::from_secs(5), http_get(target)).await {
                    Ok(Ok(())) => {
                        l.latencies.push(t.elapsed());
                        l.requests += 1;
                    }
                    Ok(Err(e)) => {
                        l.errors += 1;
                        l.first_error
                            .get_or_insert_with(|| format!("{target}: {e:#}"));
                    }
                    Err(_) => {
                        l.errors += 1;
                        l.first_error
                            .get_or_insert_with(|| format!("{target}: no answer in 5 s"));
                    }
                }
            }
            l
        });
    }
    let mut total = Load::default();
    while let Some(done) = tasks.join_next().await {
        if let Ok(l) = done {
            total.merge(Load {
                elapsed: Duration::ZERO,
                ..l
            });
        }
    }
    total.elapsed = started.elapsed();
    total
}

/// What `services load` prints: one JSON line.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LoadReport {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed_us: u64,
    /// Requests that took 0.5 s or more (a lost SYN waits 1 s).
    at_least_500ms: usize,
    /// Every answered request's latency, sorted.
    latencies_us: Vec<u64>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// `services load`: [`load`], printed as a [`LoadReport`].
async fn load_main(
    targets: &[SocketAddr],
    pick: Pick,
    workers: usize,
    seconds: u64,
) -> anyhow::Result<()> {
    anyhow::ensure!(workers >= 1, "--workers must be ≥ 1");
    let mut l = load(targets, workers, Duration::from_secs(seconds), pick).await;
    l.latencies.sort_unstable();
    let report = LoadReport {
        requests: l.requests,
        errors: l.errors,
        first_error: l.first_error.take(),
        elapsed_us: micros(l.elapsed),
        at_least_500ms: l.slower_than(Duration::from_millis(500)),
        latencies_us: l.latencies.iter().map(|d| micros(*d)).collect(),
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// [`load`] run by a `services load` process in network namespace
/// `netns` (`ip netns exec`).
async fn load_in(
    netns: &str,
    targets: &[SocketAddr],
    workers: usize,
    length: Duration,
    pick: Pick,
) -> anyhow::Result<Load> {
    let list: Vec<String> = targets.iter().map(ToString::to_string).collect();
    let child = tokio::process::Command::new("ip")
        .args(["netns", "exec", netns])
        .arg(std::env::current_exe()?)
        .args(["services", "load", "--target", &list.join(",")])
        .args(["--mode", pick.arg()])
        .args(["--workers", &workers.to_string()])
        .args(["--seconds", &length.as_secs().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run ip netns exec")?;
    let limit = length + Duration::from_secs(30);
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| anyhow!("services load in {netns} did not finish within {limit:?}"))??;
    anyhow::ensure!(
        out.status.success(),
        "services load in {netns} failed ({})",
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or_else(|| anyhow!("services load in {netns} printed nothing"))?;
    let r: LoadReport = serde_json::from_str(line)
        .with_context(|| format!("services load in {netns} printed {line:?}"))?;
    Ok(Load {
        requests: r.requests,
        errors: r.errors,
        first_error: r.first_error,
        elapsed: Duration::from_micros(r.elapsed_us),
        latencies: r
            .latencies_us
            .into_iter()
            .map(Duration::from_micros)
            .collect(),
    })
}

/// The pinned network namespace (containerd's `/run/netns/cni-*`) that
/// has `ip` on an interface.
async fn pod_netns(ip: Ipv4Addr) -> anyhow::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir("/run/netns")
        .context("cannot read /run/netns")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cni-"))
        .collect();
    names.sort();
    let needle = format!(" {ip}/");
    for name in names {
        let out = tokio::process::Command::new("ip")
            .args(["netns", "exec", &name, "ip", "-4", "-o", "addr"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .output();
        let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(10), out).await else {
            continue;
        };
        if out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&needle) {
            return Ok(name);
        }
    }
    bail!("no /run/netns/cni-* namespace has {ip}")
}

/// Part 4's loads: `cluster_ip`, `direct` and `random` from the client
/// pod; `host_*` from this process on the host (masqueraded).
#[derive(Debug, Default)]
struct HttpFigures {
    cluster_ip: Load,
    direct: Load,
    /// The pod IPs picked at random (as `numgen random` does), to tell
    /// the spread's share of a difference from the NAT's.
    random: Load,
    host_cluster_ip: Load,
    host_direct: Load,
    pods: Vec<SocketAddr>,
    service: Option<SocketAddr>,
    /// The client pod's IP and network namespace.
    client: Option<(Ipv4Addr, String)>,
}

async fn wait_http(addr: SocketAddr, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match tokio::time::timeout(Duration::from_secs(2), http_get(addr)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => format!("{e:#}"),
            Err(_) => "no answer in 2 s".into(),
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "{addr} did not answer within {timeout:?} ({last})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn live(args: &Args, f: &mut HttpFigures) -> anyhow::Result<()> {
    let skiff = match &args.skiff {
        Some(p) => p.clone(),
        None => cluster::sibling("skiff")?,
    };
    let skiff = std::path::absolute(skiff)?;
    anyhow::ensure!(
        args.kubectl.exists(),
        "{} not found",
        args.kubectl.display()
    );
    // Locals drop in reverse order: the server is stopped and reset
    // before the work dir and the lease go.
    let lease = Lease::take(200)?;
    skiff_node::network::remove_bridge(&lease.bridge());
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-svc-")
        .tempdir()?;
    let mut server = ClusterServer::spawn(&skiff, work.path(), &lease, &[])?;
    let result = async {
        let client = server.client(Duration::from_secs(60)).await?;
        wait_node_ready(&client, Duration::from_secs(120)).await?;
        eprintln!(
            "skiff: node {NODE} Ready (bridge {}, 10.{o}.0.0/17, services 10.{o}.128.0/17)",
            lease.bridge(),
            o = lease.octet
        );
        let cache = work.path().join("kubecache");
        let kc = server.kubeconfig.clone();
        kubectl(args, &kc, &cache, &["create", "namespace", NAMESPACE], None).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while kubectl(
            args,
            &kc,
            &cache,
            &["-n", NAMESPACE, "get", "serviceaccount", "default"],
            None,
        )
        .await
        .is_err()
        {
            anyhow::ensure!(
                Instant::now() < deadline,
                "no default ServiceAccount in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        kubectl(args, &kc, &cache, &["apply", "-f", "-"], Some(WEB_YAML)).await?;
        kubectl(args, &kc, &cache, &["apply", "-f", "-"], Some(CLIENT_YAML)).await?;

        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
        let deadline = Instant::now() + Duration::from_secs(180);
        let pods: Vec<Ipv4Addr> = loop {
            let listed = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await?;
            let mut ready: Vec<Ipv4Addr> = listed
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .filter_map(|e| e.addresses.first()?.parse().ok())
                .collect();
            ready.sort();
            ready.dedup();
            if ready.len() >= 3 {
                break ready;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "only {} ready endpoints after 180 s",
                ready.len()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
        let ip: Ipv4Addr = services
            .get("web")
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .ok_or_else(|| anyhow!("the Service has no ClusterIP"))?
            .parse()?;
        let service = SocketAddr::V4(SocketAddrV4::new(ip, 80));
        let direct: Vec<SocketAddr> = pods
            .iter()
            .map(|ip| SocketAddr::V4(SocketAddrV4::new(*ip, 8080)))
            .collect();
        for addr in direct.iter().chain([&service]) {
            wait_http(*addr, Duration::from_secs(30)).await?;
        }
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let client_ip = ready_pod_ip(&pods_api, "client", Duration::from_secs(120)).await?;
        let netns = pod_netns(client_ip).await?;
        f.client = Some((client_ip, netns.clone()));
        // One second of one worker to every target from the pod: the
        // path works before it is measured.
        let all: Vec<SocketAddr> = [service].into_iter().chain(direct.clone()).collect();
        let check = load_in(&netns, &all, 1, Duration::from_secs(1), Pick::Roundrobin).await?;
        anyhow::ensure!(
            check.requests > 0,
            "no answer from the client pod ({client_ip} in {netns}): {} errors, first {}",
            check.errors,
            check.first_error.as_deref().unwrap_or("-")
        );
        eprintln!(
            "web: 3 ready endpoints {pods:?} behind {service}; client pod {client_ip} in /run/netns/{netns}; load phases a b c (from the pod) a b (from the host), twice"
        );
        f.service = Some(service);
        f.pods = direct.clone();
        let (workers, length) = (args.http_workers, Duration::from_secs(args.http_seconds));
        let slow = Duration::from_millis(500);
        let line = |l: &Load| {
            format!(
                "{:.0} ({}, {})",
                l.rate(),
                l.errors,
                l.slower_than(slow)
            )
        };
        for round in 1..=2 {
            let a = load_in(&netns, &[service], workers, length, Pick::Roundrobin).await?;
            let b = load_in(&netns, &direct, workers, length, Pick::Roundrobin).await?;
            let c = load_in(&netns, &direct, workers, length, Pick::Random).await?;
            let ha = load(&[service], workers, length, Pick::Roundrobin).await;
            let hb = load(&direct, workers, length, Pick::Roundrobin).await;
            eprintln!(
                "round {round}: req/s (errors, ≥ 0.5 s): from the pod: ClusterIP {}, direct {}, direct random {}; from the host: ClusterIP {}, direct {}",
                line(&a),
                line(&b),
                line(&c),
                line(&ha),
                line(&hb),
            );
            f.cluster_ip.merge(a);
            f.direct.merge(b);
            f.random.merge(c);
            f.host_cluster_ip.merge(ha);
            f.host_direct.merge(hb);
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        return Err(e.context(format!("server log tail:\n{}", server.log_tail())));
    }
    drop(server); // SIGTERM, then skiff reset
    Ok(())
}

// ------------------------------------------------------------- report

// ------------------------------------------------------- 5. idle memory

/// One idle server's resident memory, in KiB.
#[derive(Debug, Clone, Copy)]
struct IdleRss {
    total: u64,
    file: u64,
    anon: u64,
}

/// Starts `skiff` as a server with its node and `extra` flags, waits for
/// the node to be Ready, lets it idle `seconds` and reads its memory; the
/// server is stopped and reset before this returns.
async fn idle_rss(skiff: &Path, extra: &[&str], seconds: u64) -> anyhow::Result<IdleRss> {
    let lease = Lease::take(200)?;
    skiff_node::network::remove_bridge(&lease.bridge());
    let work = tempfile::Builder::new()
        .prefix("skiff-bench-idle-")
        .tempdir()?;
    let mut server = ClusterServer::spawn(skiff, work.path(), &lease, extra)?;
    let client = server.client(Duration::from_secs(60)).await?;
    wait_node_ready(&client, Duration::from_secs(120)).await?;
    drop(client);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let child = server.child.as_mut().context("server not running")?;
    if let Some(status) = child.try_wait()? {
        bail!("skiff server exited ({status}):\n{}", server.log_tail());
    }
    let pid = child.id();
    Ok(IdleRss {
        total: cluster::status_kib(pid, "VmRSS:"),
        file: cluster::status_kib(pid, "RssFile:"),
        anon: cluster::status_kib(pid, "RssAnon:"),
    })
}

/// Part 5's servers, one after another: this build with everything, this
/// build without proxy and DNS, and the base build if one was given.
async fn idle(args: &Args) -> anyhow::Result<Vec<(String, IdleRss)>> {
    let skiff = std::path::absolute(match &args.skiff {
        Some(p) => p.clone(),
        None => cluster::sibling("skiff")?,
    })?;
    let mut out = Vec::new();
    let all = idle_rss(&skiff, &[], args.idle_seconds).await?;
    out.push(("this build (agent, proxy, DNS)".to_string(), all));
    let without = idle_rss(
        &skiff,
        &["--disable-kube-proxy", "--disable-cluster-dns"],
        args.idle_seconds,
    )
    .await?;
    out.push((
        "this build, --disable-kube-proxy --disable-cluster-dns".to_string(),
        without,
    ));
    if let Some(base) = &args.base {
        let base = std::path::absolute(base)?;
        anyhow::ensure!(base.exists(), "{} not found", base.display());
        let b = idle_rss(&base, &[], args.idle_seconds).await?;
        out.push((format!("base build ({})", base.display()), b));
    }
    Ok(out)
}

fn report_idle(args: &Args, rows: &[(String, IdleRss)]) {
    let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    let grid: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, r)| vec![name.clone(), mib(r.total), mib(r.file), mib(r.anon)])
        .collect();
    print_grid(
        &format!(
            "5. Idle memory: `skiff server` with its node, {} s after the node is Ready (VmRSS; file-backed is mostly the binary's code)",
            args.idle_seconds
        ),
        &["server", "RSS", "file", "anonymous"],
        &grid,
    );
}

fn report_proxy(small: &SyncFigures, big: &SyncFigures) -> Option<f64> {
    let row = |what: &str, a: String, b: String, r: String| vec![what.to_string(), a, b, r];
    let d = |a: Duration, b: Duration| times(ratio(b.as_secs_f64(), a.as_secs_f64()));
    let med_ratio = ratio(
        p(&big.total, 50.0).as_secs_f64(),
        p(&small.total, 50.0).as_secs_f64(),
    );
    let mut rows = vec![
        row(
            "chains in the table (nft -t list table)",
            small.chains.to_string(),
            big.chains.to_string(),
            String::new(),
        ),
        row(
            "full sync: plan",
            ms(small.full_plan),
            ms(big.full_plan),
            d(small.full_plan, big.full_plan),
        ),
        row(
            "full sync: nft -f",
            ms(small.full_nft),
            ms(big.full_nft),
            d(small.full_nft, big.full_nft),
        ),
        row(
            "full sync: batch size",
            format!("{:.1} KiB", small.full_bytes as f64 / 1024.0),
            format!("{:.1} KiB", big.full_bytes as f64 / 1024.0),
            String::new(),
        ),
    ];
    for (what, s, b) in [
        (
            "one endpoint changed → nft returned",
            &small.total,
            &big.total,
        ),
        (
            "  of which plan (apply_slice + plan)",
            &small.plan,
            &big.plan,
        ),
        ("  of which nft -f", &small.nft, &big.nft),
    ] {
        for q in [50.0, 90.0] {
            rows.push(row(
                &format!("{what}, p{q}"),
                ms(p(s, q)),
                ms(p(b, q)),
                d(p(s, q), p(b, q)),
            ));
        }
    }
    let bytes = |v: &[usize]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    rows.push(row(
        "incremental batch size (median)",
        format!("{} B", bytes(&small.bytes)),
        format!("{} B", bytes(&big.bytes)),
        String::new(),
    ));
    for (what, s, b) in [
        ("nft -f of an empty batch (p50)", &small.empty, &big.empty),
        (
            "nft -f of one element into our table (p50)",
            &small.one_element,
            &big.one_element,
        ),
        (
            "nft -f of one element into a tiny table beside it (p50)",
            &small.other_table,
            &big.other_table,
        ),
    ] {
        rows.push(row(
            what,
            ms(p(s, 50.0)),
            ms(p(b, 50.0)),
            d(p(s, 50.0), p(b, 50.0)),
        ));
    }
    rows.push(row(
        "target: change p50 at the large size ≤ 2× the small",
        String::new(),
        String::new(),
        format!("{} ({})", times(med_ratio), verdict(med_ratio, 2.0, true)),
    ));
    print_grid(
        &format!(
            "1. Proxy sync: ClusterIP Services × 2 ready endpoints in a private netns, real nft ({} changes of one endpoint IP each; nft runs as `ip netns exec NS nft -f -`)",
            big.total.len()
        ),
        &[
            "",
            &format!("{} Services", small.services),
            &format!("{} Services", big.services),
            "large / small",
        ],
        &rows,
    );
    med_ratio
}

fn report_dns(args: &Args, f: &DnsFigures) -> Option<f64> {
    let qps = ratio(mean(&f.ours, |p| p.qps), mean(&f.dnsmasq, |p| p.qps));
    let lat = ratio(
        mean(&f.ours, |p| p.latency),
        mean(&f.dnsmasq, |p| p.latency),
    );
    let mut rows = vec![
        vec![
            "queries per second (mean of rounds)".to_string(),
            format!("{:.0}", mean(&f.ours, |p| p.qps)),
            format!("{:.0}", mean(&f.dnsmasq, |p| p.qps)),
            times(qps),
        ],
        vec![
            "average latency (mean of rounds)".to_string(),
            format!("{:.3} ms", mean(&f.ours, |p| p.latency) * 1e3),
            format!("{:.3} ms", mean(&f.dnsmasq, |p| p.latency) * 1e3),
            times(lat),
        ],
        vec![
            "server CPU (of its one core)".to_string(),
            format!("{:.0} %", mean(&f.ours, |p| p.cpu) * 100.0),
            format!("{:.0} %", mean(&f.dnsmasq, |p| p.cpu) * 100.0),
            String::new(),
        ],
        vec![
            "server CPU per query (below 100 % CPU dnsperf is the limit)".to_string(),
            format!("{:.2} µs", cpu_per_query(&f.ours)),
            format!("{:.2} µs", cpu_per_query(&f.dnsmasq)),
            times(ratio(cpu_per_query(&f.ours), cpu_per_query(&f.dnsmasq))),
        ],
        vec![
            "server RSS after the runs".to_string(),
            kib_text(f.ours_rss),
            kib_text(f.dnsmasq_rss),
            String::new(),
        ],
    ];
    for (i, (a, b)) in f.ours.iter().zip(&f.dnsmasq).enumerate() {
        rows.push(vec![
            format!("  round {}: QPS, latency, lost/sent", i + 1),
            format!(
                "{:.0}, {:.3} ms, {}/{}",
                a.qps,
                a.latency * 1e3,
                a.lost,
                a.sent
            ),
            format!(
                "{:.0}, {:.3} ms, {}/{}",
                b.qps,
                b.latency * 1e3,
                b.lost,
                b.sent
            ),
            String::new(),
        ]);
    }
    if let (Some(a), Some(b)) = (f.ours.first(), f.dnsmasq.first()) {
        rows.push(vec![
            "  response codes (round 1)".into(),
            a.codes.clone(),
            b.codes.clone(),
            String::new(),
        ]);
    }
    rows.push(vec![
        "target: our QPS ≥ 1.0× dnsmasq's".into(),
        String::new(),
        String::new(),
        format!("{} ({})", times(qps), verdict(qps, 1.0, false)),
    ]);
    print_grid(
        &format!(
            "2. DNS: {} ClusterIP names (A), servers on core 1, dnsperf on core 0 (-c {} -l {} -Q {}), {} rounds alternating",
            args.services, args.dns_clients, args.dns_seconds, args.dns_max_qps, args.dns_rounds
        ),
        &["", "skiff-dns", "dnsmasq", "skiff / dnsmasq"],
        &rows,
    );
    qps
}

fn report_memory(n: usize, m: &MemFigures) {
    print_grid(
        &format!(
            "3. Memory: {n} Services and {} endpoints, VmRSS growth of a fresh process (jemalloc with dirty_decay_ms:0, so freed pages do not count)",
            2 * n
        ),
        &["", "RSS"],
        &[
            vec![
                "the objects (Services + EndpointSlices; the informer caches' share)".into(),
                kib_text(m.objects),
            ],
            vec!["DNS: Records::from_objects".into(), kib_text(m.records)],
            vec![
                "proxy: Proxier after a full plan + commit (objects shared)".into(),
                kib_text(m.proxier),
            ],
            vec!["peak above the start (VmHWM)".into(), kib_text(m.peak)],
            vec![
                "the full sync's batch (transient)".into(),
                format!("{:.1} MiB", m.script_bytes as f64 / (1024.0 * 1024.0)),
            ],
        ],
    );
}

struct HttpRatios {
    rate: Option<f64>,
    p99: Option<f64>,
}

fn report_http(args: &Args, f: &HttpFigures) -> HttpRatios {
    let (a, b, c) = (&f.cluster_ip, &f.direct, &f.random);
    let q = |l: &Load, x: f64| p(&l.latencies, x);
    let rate = ratio(a.rate(), b.rate());
    let p99 = ratio(q(a, 99.0).as_secs_f64(), q(b, 99.0).as_secs_f64());
    let err = |l: &Load| match &l.first_error {
        Some(e) => format!("{} ({e})", l.errors),
        None => l.errors.to_string(),
    };
    let row = |what: &str, f: &dyn Fn(&Load) -> String, r: String| {
        vec![what.to_string(), f(a), f(b), f(c), r]
    };
    let latency = |what: &str, x: f64| {
        row(
            what,
            &|l| ms(q(l, x)),
            times(ratio(q(a, x).as_secs_f64(), q(b, x).as_secs_f64())),
        )
    };
    let slow = Duration::from_millis(500);
    let (ha, hb) = (&f.host_cluster_ip, &f.host_direct);
    let host = |what: &str, f: &dyn Fn(&Load) -> String, r: String| {
        vec![what.to_string(), f(ha), f(hb), "-".to_string(), r]
    };
    print_grid(
        &format!(
            "4. ClusterIP beside direct: HTTP/1.0 GET, a new connection each, {} workers closed loop from a client pod's network namespace{} (pod → Service), 2 × {} s each, interleaved a b c a b c; 3 busybox httpd pods",
            args.http_workers,
            f.client
                .as_ref()
                .map_or(String::new(), |(ip, ns)| format!(" ({ip}, {ns})")),
            args.http_seconds
        ),
        &[
            "",
            &format!(
                "a: ClusterIP {}",
                f.service.map_or("-".into(), |s| s.to_string())
            ),
            "b: pod IPs round-robin",
            "c: pod IPs random pick",
            "a / b",
        ],
        &[
            row("requests per second", &|l| format!("{:.0}", l.rate()), times(rate)),
            latency("latency p50", 50.0),
            latency("latency p90", 90.0),
            latency("latency p99", 99.0),
            row(
                "latency mean",
                &|l| ms(l.mean()),
                times(ratio(a.mean().as_secs_f64(), b.mean().as_secs_f64())),
            ),
            row(
                "requests ≥ 0.5 s (a lost SYN waits 1 s)",
                &|l| l.slower_than(slow).to_string(),
                String::new(),
            ),
            row(
                "latency max",
                &|l| ms(l.latencies.iter().max().copied().unwrap_or_default()),
                String::new(),
            ),
            row(
                "requests / errors",
                &|l| format!("{} / {}", l.requests, err(l)),
                String::new(),
            ),
            host(
                "from the host (masqueraded): requests per second",
                &|l| format!("{:.0}", l.rate()),
                times(ratio(ha.rate(), hb.rate())),
            ),
            host(
                "from the host (masqueraded): latency p99",
                &|l| ms(q(l, 99.0)),
                times(ratio(q(ha, 99.0).as_secs_f64(), q(hb, 99.0).as_secs_f64())),
            ),
            host(
                "from the host (masqueraded): requests ≥ 0.5 s / errors",
                &|l| format!("{} / {}", l.slower_than(slow), err(l)),
                String::new(),
            ),
            vec![
                "target: a / b throughput ≥ 0.95×, p99 ≤ 1.1×".into(),
                String::new(),
                String::new(),
                String::new(),
                format!(
                    "{} ({}), {} ({})",
                    times(rate),
                    verdict(rate, 0.95, false),
                    times(p99),
                    verdict(p99, 1.1, true)
                ),
            ],
        ],
    );
    HttpRatios { rate, p99 }
}

// ---------------------------------------------------------------- run

pub async fn run(args: Args) -> anyhow::Result<()> {
    match args.mode {
        Some(Mode::DnsServe {
            listen,
            names,
            workers,
        }) => return dns_serve(listen, names, workers).await,
        Some(Mode::MemProbe { services }) => return mem_probe(services),
        Some(Mode::Load {
            target,
            mode,
            workers,
            seconds,
        }) => return load_main(&target, mode, workers, seconds).await,
        None => {}
    }
    tokio::select! {
        r = run_all(&args) => r,
        _ = tokio::signal::ctrl_c() => {
            // run_all's guards have stopped and removed everything by now.
            bail!("interrupted")
        }
    }
}

async fn run_all(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.services >= 2 && args.small >= 1 && args.services <= 60_000,
        "--services must be 2..=60000 and --small ≥ 1"
    );
    anyhow::ensure!(args.changes >= 1, "--changes must be ≥ 1");
    let load_before = loadavg();
    let speed = crate::stats::host_speed();
    eprintln!("load average {load_before}; host speed {}", ms(speed));

    eprintln!("3. memory ({} Services) …", args.services);
    let mem = memory(args.services)?;

    eprintln!(
        "1. proxy sync, {} then {} Services …",
        args.small, args.services
    );
    let (small, big) = {
        let (small_n, big_n, k) = (args.small, args.services, args.changes);
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            Ok((proxy_sync(small_n, k)?, proxy_sync(big_n, k)?))
        })
        .await??
    };

    eprintln!("2. DNS …");
    let dns_figures = dns(args).await?;

    let idle_result = if args.skip_cluster {
        None
    } else {
        eprintln!("5. idle memory …");
        Some(idle(args).await)
    };

    let mut http = HttpFigures::default();
    let live_result = if args.skip_cluster {
        None
    } else {
        eprintln!("4. ClusterIP beside direct on a live cluster …");
        Some(live(args, &mut http).await)
    };

    println!(
        "\nskiff-bench services: {} cores, load average {load_before} before and {} after, host speed {} (figures on a shared machine are noisy)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg(),
        ms(speed),
    );
    let proxy_ratio = report_proxy(&small, &big);
    let qps_ratio = report_dns(args, &dns_figures);
    report_memory(args.services, &mem);
    if let Some(Ok(rows)) = &idle_result {
        report_idle(args, rows);
    }
    let http_ratios = match &live_result {
        Some(Ok(())) => Some(report_http(args, &http)),
        _ => None,
    };

    let mut rows = vec![
        vec![
            format!(
                "proxy: one endpoint change, p50 at {} Services (p90)",
                args.services
            ),
            format!("{} ({})", ms(p(&big.total, 50.0)), ms(p(&big.total, 90.0))),
            String::new(),
            String::new(),
        ],
        vec![
            format!(
                "proxy: one endpoint change, p50 at {} Services (p90)",
                args.small
            ),
            format!(
                "{} ({})",
                ms(p(&small.total, 50.0)),
                ms(p(&small.total, 90.0))
            ),
            String::new(),
            String::new(),
        ],
        vec![
            "proxy: large / small p50".into(),
            times(proxy_ratio),
            "≤ 2×".into(),
            verdict(proxy_ratio, 2.0, true),
        ],
        vec![
            "DNS: skiff-dns / dnsmasq QPS".into(),
            format!(
                "{} ({:.0} / {:.0})",
                times(qps_ratio),
                mean(&dns_figures.ours, |p| p.qps),
                mean(&dns_figures.dnsmasq, |p| p.qps)
            ),
            "≥ 1.0×".into(),
            verdict(qps_ratio, 1.0, false),
        ],
        vec![
            format!(
                "memory: proxy / DNS for {} Services, {} endpoints",
                args.services,
                2 * args.services
            ),
            format!("{} / {}", kib_text(mem.proxier), kib_text(mem.records)),
            "(informational)".into(),
            String::new(),
        ],
    ];
    match (&live_result, &http_ratios) {
        (Some(Ok(())), Some(h)) => {
            rows.push(vec![
                "ClusterIP / direct throughput (from a pod)".into(),
                times(h.rate),
                "≥ 0.95×".into(),
                verdict(h.rate, 0.95, false),
            ]);
            rows.push(vec![
                "ClusterIP / direct p99 (from a pod)".into(),
                times(h.p99),
                "≤ 1.1×".into(),
                verdict(h.p99, 1.1, true),
            ]);
        }
        (None, _) => rows.push(vec![
            "ClusterIP / direct".into(),
            "skipped (--skip-cluster)".into(),
            "≥ 0.95×, p99 ≤ 1.1×".into(),
            String::new(),
        ]),
        (Some(Err(e)), _) => rows.push(vec![
            "ClusterIP / direct".into(),
            format!("failed: {}", format!("{e:#}").lines().next().unwrap_or("")),
            "≥ 0.95×, p99 ≤ 1.1×".into(),
            String::new(),
        ]),
        (Some(Ok(())), None) => {}
    }
    match &idle_result {
        Some(Ok(idle_rows)) => {
            let total = idle_rows[0].1.total;
            rows.push(vec![
                "idle all-in-one server RSS (agent, proxy, DNS)".into(),
                format!("{:.1} MiB", total as f64 / 1024.0),
                "≤ 64 MiB".into(),
                if total <= 64 * 1024 { "met" } else { "MISSED" }.into(),
            ]);
        }
        Some(Err(e)) => rows.push(vec![
            "idle all-in-one server RSS".into(),
            format!("failed: {}", format!("{e:#}").lines().next().unwrap_or("")),
            "≤ 64 MiB".into(),
            String::new(),
        ]),
        None => {}
    }
    print_grid(
        "Summary (issue #36's targets)",
        &["figure", "value", "target", ""],
        &rows,
    );
    if let Some(Err(e)) = live_result {
        return Err(e.context("part 4 (the live cluster) failed"));
    }
    if let Some(Err(e)) = idle_result {
        return Err(e.context("part 5 (idle memory) failed"));
    }
    Ok(())
}
