//! `skiff-bench multinode` (issue [multinode] deliverable 6): TCP
//! throughput and request latency side by side in one run, over three
//! paths on one machine:
//!
//! 1. pod to pod on one node (the node's CNI bridge);
//! 2. pod to pod across nodes, through the overlay (`--backend`, VXLAN
//!    by default: flannel's wire format, UDP between the hosts);
//! 3. host to host over the same veth underlay the overlay rides on.
//!
//! The cluster: a `skiff server --disable-agent` in the root namespace on
//! a bridge the benchmark makes (the underlay, `172.20.<octet>.0/24`),
//! and two "hosts", each a network namespace with a veth into that bridge
//! and its own `skiff agent` joined with the printed token (as
//! crates/skiff/tests/cluster/hosts.rs does for the e2e tests; that
//! harness panics as tests do and is being edited for the fault tests,
//! so the benchmark keeps its own small copy, with errors instead of
//! panics). Three busybox `sleep` pods give the pod network namespaces:
//! the receiver and a client on host 1, a client on host 2.
//!
//! One tool on every path: this binary's hidden `multinode serve` and
//! `multinode client`, started with `nsenter --net=` in the pod's (or
//! host's) network namespace, so only the path differs, not the program,
//! byte count or buffer sizes. The client sends `--mib` MiB on one TCP
//! connection (timed until the receiver acknowledges the last byte),
//! then times request/response round trips of 64 bytes on one
//! connection (netperf's TCP_RR) and connections each carrying one
//! request/response (TCP_CRR). Rounds take the paths in turn, rotating
//! the order, so the machine's swings fall on all three.
//!
//! Then API failover (unless `--skip-failover`): two `skiff server
//! --disable-agent` on a three-member etcd (testkit's `EtcdCluster`), the
//! second joined with the first's token, and a `skiff agent` joined to
//! the first, all on loopback as crates/skiff/tests/ha.rs has them; once
//! the agent's load balancer lists both servers the first is SIGKILLed,
//! and the times from the kill until the agent's next write (its node
//! Lease renewed) is seen through the second, until its load balancer
//! moved, and until the scheduler's Lease changed hands are printed
//! beside the Lease durations (one sample).
//!
//! Everything it makes is removed on exit (Ctrl-C included): agents and
//! server stopped by PID, `skiff reset` run for each (in the host's
//! namespace for agents), namespaces, veths and the bridge deleted, the
//! data dirs removed, the CIDR lease (the e2e tests' lock files) given
//! back. Traffic goes only over loopback, that bridge and those
//! namespaces. Needs root, ip, nsenter, containerd, runc and the CNI
//! plugins.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use serde_json::json;

use crate::cluster;
use crate::node::Lease;
use crate::stats::{percentile, print_grid};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// MiB sent per throughput transfer (the same on every path).
    #[arg(long, default_value_t = 256)]
    mib: u64,
    /// Rounds; each measures every path once, in a rotating order (many
    /// short rounds: each round's pair of transfers runs under about the
    /// same load, and the across/same target is judged on the median of
    /// those pairs).
    #[arg(long, default_value_t = 31)]
    rounds: usize,
    /// Request/response round trips on one connection, per round and path.
    #[arg(long, default_value_t = 2000)]
    round_trips: usize,
    /// Connections (connect, one request/response, close) per round and
    /// path.
    #[arg(long, default_value_t = 200)]
    connects: usize,
    /// The pod network's backend (`--flannel-backend` of server and
    /// agents): vxlan or host-gw.
    #[arg(long, default_value = "vxlan")]
    backend: String,
    /// The skiff binary (default: the one beside skiff-bench).
    #[arg(long)]
    skiff: Option<PathBuf>,
    /// Skip the API failover part (two servers on a three-member etcd).
    #[arg(long)]
    skip_failover: bool,
}

/// The benchmark's helper processes (not for people).
#[derive(Debug, clap::Subcommand)]
enum Mode {
    /// Receives transfers and echoes requests on `--listen` until killed;
    /// prints `ready` once listening.
    #[command(hide = true)]
    Serve {
        #[arg(long)]
        listen: SocketAddr,
    },
    /// One transfer, `--round-trips` round trips and `--connects`
    /// connections to `--target`; prints one JSON line (a [`Report`]).
    #[command(hide = true)]
    Client {
        #[arg(long)]
        target: SocketAddr,
        #[arg(long)]
        bytes: u64,
        #[arg(long)]
        round_trips: usize,
        #[arg(long)]
        connects: usize,
    },
}

/// The port the receivers listen on (in their own namespaces).
const PORT: u16 = 5201;
/// Request and response size of the latency tests.
const REQUEST: usize = 64;
/// The sender's write and the receiver's read size.
const CHUNK: usize = 256 * 1024;
/// A connection's first byte: a transfer, or an echo.
const SINK: u8 = b'S';
const ECHO: u8 = b'E';

pub async fn run(args: Args) -> anyhow::Result<()> {
    match args.mode {
        Some(Mode::Serve { listen }) => return serve(listen),
        Some(Mode::Client {
            target,
            bytes,
            round_trips,
            connects,
        }) => {
            let report = client(target, bytes, round_trips, connects)?;
            let mut out = std::io::stdout().lock();
            serde_json::to_writer(&mut out, &report)?;
            writeln!(out)?;
            return Ok(out.flush()?);
        }
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

// ------------------------------------------------------------ the tool

/// What one client run measured.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Report {
    bytes: u64,
    /// First byte written → the receiver's count of all of them read.
    transfer_us: u64,
    rr_us: Vec<u64>,
    crr_us: Vec<u64>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn serve(listen: SocketAddr) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen).with_context(|| format!("bind {listen}"))?;
    println!("ready");
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        std::thread::spawn(move || {
            let _ = answer(conn);
        });
    }
    Ok(())
}

/// One connection: a transfer (read to EOF, answer the count) or an echo
/// of [`REQUEST`]-byte requests until EOF.
fn answer(mut conn: TcpStream) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut mode = [0u8];
    conn.read_exact(&mut mode)?;
    if mode[0] == SINK {
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        loop {
            match conn.read(&mut buf)? {
                0 => break,
                n => total += n as u64,
            }
        }
        conn.write_all(&total.to_be_bytes())?;
    } else {
        let mut req = [0u8; REQUEST];
        loop {
            match conn.read_exact(&mut req) {
                Ok(()) => conn.write_all(&req)?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

fn connect(target: SocketAddr) -> anyhow::Result<TcpStream> {
    let conn = TcpStream::connect_timeout(&target, Duration::from_secs(5))
        .with_context(|| format!("connect {target}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    conn.set_write_timeout(Some(Duration::from_secs(30)))?;
    Ok(conn)
}

fn client(
    target: SocketAddr,
    bytes: u64,
    round_trips: usize,
    connects: usize,
) -> anyhow::Result<Report> {
    let mut report = Report {
        bytes,
        ..Report::default()
    };
    // Throughput: one connection, `bytes` in CHUNK writes.
    if bytes > 0 {
        let mut conn = connect(target)?;
        let chunk = vec![0u8; CHUNK];
        let start = Instant::now();
        conn.write_all(&[SINK])?;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(CHUNK as u64) as usize;
            conn.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        conn.shutdown(Shutdown::Write)?;
        let mut count = [0u8; 8];
        conn.read_exact(&mut count)?;
        report.transfer_us = micros(start.elapsed());
        let got = u64::from_be_bytes(count);
        anyhow::ensure!(got == bytes, "the receiver read {got} of {bytes} bytes");
    }
    // Round trips on one connection (after a few not counted).
    if round_trips > 0 {
        let mut conn = connect(target)?;
        conn.set_nodelay(true)?;
        conn.write_all(&[ECHO])?;
        let mut buf = [7u8; REQUEST];
        for i in 0..round_trips + 10 {
            let start = Instant::now();
            conn.write_all(&buf)?;
            conn.read_exact(&mut buf)?;
            if i >= 10 {
                report.rr_us.push(micros(start.elapsed()));
            }
        }
    }
    // A connection per request.
    for _ in 0..connects {
        let start = Instant::now();
        let mut conn = connect(target)?;
        conn.set_nodelay(true)?;
        let mut buf = [7u8; REQUEST + 1];
        buf[0] = ECHO;
        conn.write_all(&buf)?;
        conn.read_exact(&mut buf[..REQUEST])?;
        drop(conn);
        report.crr_us.push(micros(start.elapsed()));
    }
    Ok(report)
}

// ------------------------------------------------------------ the hosts

/// Runs `ip ARGS`, failing with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("ip")?;
    anyhow::ensure!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// `ip ARGS`, its failure ignored (removing what may not be there).
fn ip_quiet(args: &[&str]) {
    let _ = Command::new("ip").args(args).output();
}

/// The underlay: a bridge in the root namespace and a network namespace
/// per host with a veth into it. Names carry the lease's octet (`skbu`,
/// `skb<octet>h<i>`, `skb<octet>v<i>`), so they never meet a test's or
/// another run's. Deleted on drop.
struct Links {
    octet: u8,
    bridge: String,
    hosts: Vec<(String, String)>,
}

impl Links {
    fn new(octet: u8, count: usize) -> anyhow::Result<Self> {
        let bridge = format!("skbu{octet}");
        // Left by a run killed before its cleanup (the octet is ours now).
        ip_quiet(&["link", "del", &bridge]);
        let mut links = Links {
            octet,
            bridge: bridge.clone(),
            hosts: Vec::new(),
        };
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", links.gateway()),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 1..=count {
            let netns = links.netns(i);
            let veth = format!("skb{octet}v{i}");
            ip_quiet(&["netns", "del", &netns]);
            ip_quiet(&["link", "del", &veth]);
            ip(&["netns", "add", &netns])?;
            links.hosts.push((netns.clone(), veth.clone()));
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ])?;
            ip(&["link", "set", &veth, "master", &bridge, "up"])?;
            let address = format!("{}/24", links.host_ip(i));
            ip(&["-n", &netns, "addr", "add", &address, "dev", "eth0"])?;
            ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &netns, "link", "set", "lo", "up"])?;
            let gateway = links.gateway();
            ip(&["-n", &netns, "route", "add", "default", "via", &gateway])?;
        }
        Ok(links)
    }

    fn gateway(&self) -> String {
        format!("172.20.{}.1", self.octet)
    }

    /// Host `i`'s (1-based) address on the underlay.
    fn host_ip(&self, i: usize) -> String {
        format!("172.20.{}.{}", self.octet, 10 + i)
    }

    fn netns(&self, i: usize) -> String {
        format!("skb{}h{i}", self.octet)
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        for (netns, veth) in &self.hosts {
            ip_quiet(&["netns", "del", netns]);
            ip_quiet(&["link", "del", veth]);
        }
        ip_quiet(&["link", "del", &self.bridge]);
    }
}

/// A `skiff server` or `skiff agent` (in a host's namespace): stopped by
/// PID on drop (SIGTERM, SIGKILL after 40 s), then `skiff reset` on its
/// data dir, in the same namespace.
struct Daemon {
    child: Option<Child>,
    skiff: PathBuf,
    netns: Option<String>,
    data_dir: PathBuf,
    bridge: String,
    log: PathBuf,
}

impl Daemon {
    /// `skiff ARGS` (in `netns` through nsenter, which execs it: the
    /// child's PID is skiff's), its output appended to `log`, in its own
    /// process group (Ctrl-C reaches the benchmark, which stops it).
    fn spawn(
        skiff: &Path,
        netns: Option<&str>,
        args: &[String],
        data_dir: PathBuf,
        bridge: &str,
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let mut daemon = Daemon {
            child: None,
            skiff: skiff.to_path_buf(),
            netns: netns.map(str::to_string),
            data_dir,
            bridge: bridge.to_string(),
            log,
        };
        let file = std::fs::File::create(&daemon.log)?;
        let mut cmd = daemon.command();
        use std::os::unix::process::CommandExt as _;
        cmd.args(args)
            .arg("--data-dir")
            .arg(&daemon.data_dir)
            .args(["--bridge-name", bridge])
            .env("SKIFF_LOG", "info,kube=warn,tower=warn,hyper=warn,h2=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .process_group(0);
        daemon.child = Some(
            cmd.spawn()
                .with_context(|| format!("cannot start {}", skiff.display()))?,
        );
        Ok(daemon)
    }

    /// `skiff`, through nsenter when in a host's namespace.
    fn command(&self) -> Command {
        match &self.netns {
            Some(netns) => {
                let mut cmd = Command::new("nsenter");
                cmd.arg(format!("--net=/run/netns/{netns}"))
                    .arg("--")
                    .arg(&self.skiff);
                cmd
            }
            None => Command::new(&self.skiff),
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// SIGKILL by PID (the data dir stays for the reset on drop).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits for `needle` in the log; the first line with it.
    async fn wait_log(&mut self, needle: &str, timeout: Duration) -> anyhow::Result<String> {
        poll(
            &format!("{needle:?} in {}", self.log.display()),
            timeout,
            || {
                let exited = self.exited();
                let text = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail = self.log_tail();
                async move {
                    if let Some(status) = exited {
                        bail!("skiff exited ({status}):\n{tail}");
                    }
                    Ok(text
                        .lines()
                        .find(|l| l.contains(needle))
                        .map(str::to_string))
                }
            },
        )
        .await
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            cluster::stop_child(&mut child, Duration::from_secs(40));
        }
        let mut cmd = self.command();
        cmd.arg("reset")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--bridge-name", &self.bridge])
            .stdin(Stdio::null());
        match cmd.output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "skiff reset of {} failed: {}",
                self.data_dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("skiff reset of {}: {e}", self.data_dir.display()),
        }
    }
}

/// A helper process killed (SIGKILL, by its PID) and reaped on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ------------------------------------------------------------ the run

/// The three paths, in the order printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathKind {
    SameNode,
    AcrossNodes,
    HostToHost,
}

const PATHS: [PathKind; 3] = [
    PathKind::SameNode,
    PathKind::AcrossNodes,
    PathKind::HostToHost,
];

impl PathKind {
    fn label(self, backend: &str) -> String {
        match self {
            PathKind::SameNode => "pod → pod, same node (CNI bridge)".into(),
            PathKind::AcrossNodes if backend == "vxlan" => {
                "pod → pod, across nodes (VXLAN overlay)".into()
            }
            PathKind::AcrossNodes => format!("pod → pod, across nodes ({backend} routes)"),
            PathKind::HostToHost => "host → host (veth underlay)".into(),
        }
    }
}

/// Where a path's client runs and what it connects to.
struct Route {
    kind: PathKind,
    netns: String,
    target: SocketAddr,
}

/// A path's figures over all rounds.
#[derive(Debug, Default)]
struct Figures {
    /// Gbit/s of each round's transfer.
    gbits: Vec<f64>,
    rr: Vec<Duration>,
    crr: Vec<Duration>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs the client in `route.netns`; its report.
async fn run_client(
    route: &Route,
    bytes: u64,
    round_trips: usize,
    connects: usize,
) -> anyhow::Result<Report> {
    let child = tokio::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", route.netns))
        .arg("--")
        .arg(std::env::current_exe()?)
        .args(["multinode", "client"])
        .args(["--target", &route.target.to_string()])
        .args(["--bytes", &bytes.to_string()])
        .args(["--round-trips", &round_trips.to_string()])
        .args(["--connects", &connects.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot run nsenter")?;
    let limit = Duration::from_secs(300);
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| anyhow!("the client in {} ran over {limit:?}", route.netns))??;
    anyhow::ensure!(
        out.status.success(),
        "the client in {} to {} failed ({}): {}",
        route.netns,
        route.target,
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("the client printed {line:?}"))
}

/// Starts the receiver in `netns`, once it listens.
fn start_serve(netns: &str) -> anyhow::Result<Killed> {
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{netns}"))
        .arg("--")
        .arg(std::env::current_exe()?)
        .args(["multinode", "serve", "--listen"])
        .arg(format!("0.0.0.0:{PORT}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run nsenter")?;
    let stdout = child.stdout.take();
    let guard = Killed(child);
    let mut line = String::new();
    if let Some(stdout) = stdout {
        BufReader::new(stdout).read_line(&mut line)?;
    }
    anyhow::ensure!(
        line.trim() == "ready",
        "the receiver in {netns} did not start"
    );
    Ok(guard)
}

/// `cmd ARGS` in network namespace `netns` (nsenter: only that one); its
/// stdout.
fn in_netns(netns: &str, args: &[&str]) -> String {
    Command::new("nsenter")
        .arg(format!("--net=/run/netns/{netns}"))
        .arg("--")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// The pod network namespace (containerd's `/run/netns/cni-*`) that has
/// `ip` on an interface.
fn pod_netns(ip: Ipv4Addr) -> anyhow::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir("/run/netns")
        .context("cannot read /run/netns")?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cni-"))
        .collect();
    names.sort();
    let needle = format!(" {ip}/");
    names
        .into_iter()
        .find(|name| in_netns(name, &["ip", "-4", "-o", "addr"]).contains(&needle))
        .ok_or_else(|| anyhow!("no /run/netns/cni-* namespace has {ip}"))
}

/// The MTU of `eth0` in `netns`.
fn mtu(netns: &str) -> String {
    let text = in_netns(netns, &["ip", "-o", "link", "show", "eth0"]);
    text.split_whitespace()
        .skip_while(|w| *w != "mtu")
        .nth(1)
        .unwrap_or("?")
        .to_string()
}

async fn client_from(kubeconfig: &Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Polls `f` every 200 ms until it gives a value or `timeout` passes.
async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!(" (last: {e:#})"),
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what}: not within {timeout:?}{last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn node_ready(nodes: &Api<Node>, name: &str) -> anyhow::Result<Option<()>> {
    let node = nodes.get_opt(name).await?;
    let ready = node
        .and_then(|n| n.status)
        .and_then(|s| s.conditions)
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    Ok(ready.then_some(()))
}

/// The word after `flag` in `line`.
fn word_after(line: &str, flag: &str) -> anyhow::Result<String> {
    line.split_whitespace()
        .skip_while(|w| *w != flag)
        .nth(1)
        .map(|w| w.trim_end_matches([',', '.']).to_string())
        .ok_or_else(|| anyhow!("no {flag} in {line:?}"))
}

async fn run_all(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.rounds >= 1, "--rounds must be ≥ 1");
    anyhow::ensure!(
        matches!(args.backend.as_str(), "vxlan" | "host-gw"),
        "--backend is vxlan or host-gw"
    );
    let skiff = cluster::skiff_binary(args.skiff.as_deref())?;
    let lease = Lease::take(100)?;
    throughput(args, &skiff, &lease).await?;
    if !args.skip_failover {
        // On the same lease, once the first part's hosts are gone.
        let figures = failover(&skiff, &lease).await?;
        report_failover(&figures);
    }
    Ok(())
}

async fn throughput(args: &Args, skiff: &Path, lease: &Lease) -> anyhow::Result<()> {
    let octet = lease.octet;
    let dir = tempfile::Builder::new()
        .prefix("skiff-bench-multinode-")
        .tempdir()?;
    let links = Links::new(octet, 2)?;
    let gateway = links.gateway();
    let common: Vec<String> = [
        "--cluster-cidr",
        &format!("10.{octet}.0.0/17"),
        "--service-cidr",
        &format!("10.{octet}.128.0/17"),
        "--flannel-backend",
        &args.backend,
        "--vxlan-vni",
        &octet.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();

    // The server on the bridge's address, without a node of its own.
    let mut server_args: Vec<String> = [
        "server",
        "--https-listen-port",
        "0",
        "--bind-address",
        &gateway,
        "--node-ip",
        &gateway,
        "--disable-agent",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    server_args.extend(common.iter().cloned());
    let mut server = Daemon::spawn(
        skiff,
        None,
        &server_args,
        dir.path().join("server"),
        &format!("skbs{octet}"),
        dir.path().join("server.log"),
    )?;
    eprintln!(
        "multinode: lease 10.{octet}, underlay {gateway}/24, backend {}; server log {}",
        args.backend,
        server.log.display()
    );
    let join_line = server
        .wait_log("skiff agent --server ", Duration::from_secs(60))
        .await?;
    let (url, token_file) = (
        word_after(&join_line, "--server")?,
        word_after(&join_line, "--token-file")?,
    );
    let kubeconfig = server.data_dir.join("admin.kubeconfig");
    let client = poll("the API", Duration::from_secs(60), || {
        let kubeconfig = kubeconfig.clone();
        async move {
            let client = client_from(&kubeconfig).await?;
            client.apiserver_version().await?;
            Ok(Some(client))
        }
    })
    .await?;

    // The agents, one per host.
    let mut agents = Vec::new();
    let mut node_names = Vec::new();
    for i in 1..=2 {
        let node = format!("skb-{octet}-{i}");
        let mut agent_args: Vec<String> = vec![
            "agent".into(),
            "--server".into(),
            url.clone(),
            "--token-file".into(),
            token_file.clone(),
            "--node-name".into(),
            node.clone(),
            "--node-ip".into(),
            links.host_ip(i),
            "--kubelet-port".into(),
            skiff_testkit::free_port()?.to_string(),
        ];
        agent_args.extend(common.iter().cloned());
        agents.push(Daemon::spawn(
            skiff,
            Some(&links.netns(i)),
            &agent_args,
            dir.path().join(format!("host-{i}")),
            &format!("skb{octet}b{i}"),
            dir.path().join(format!("host-{i}.log")),
        )?);
        node_names.push(node);
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for (i, name) in node_names.iter().enumerate() {
        let result = poll(
            &format!("node {name} Ready"),
            Duration::from_secs(180),
            || node_ready(&nodes, name),
        )
        .await;
        if let Err(e) = result {
            bail!("{e:#}\nagent log:\n{}", agents[i].log_tail());
        }
    }
    eprintln!("multinode: nodes {} Ready", node_names.join(", "));

    // The pods: the receiver and a client on host 1, a client on host 2.
    let ns = "skiff-bench";
    cluster::create_namespace(&client, ns).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let wanted = [
        ("receiver", &node_names[0]),
        ("client-same", &node_names[0]),
        ("client-across", &node_names[1]),
    ];
    for (name, node) in wanted {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": false,
                "containers": [{"name": "c", "image": "busybox",
                                "imagePullPolicy": "IfNotPresent",
                                "command": ["sleep", "36000"]}],
            },
        });
        pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
            .await
            .with_context(|| format!("create pod {name}"))?;
    }
    let mut pod_ips = Vec::new();
    for (name, _) in wanted {
        let ip = poll(
            &format!("pod {name} Running"),
            Duration::from_secs(180),
            || {
                let pods = pods.clone();
                async move {
                    let pod = pods.get(name).await?;
                    let status = pod.status.unwrap_or_default();
                    Ok((status.phase.as_deref() == Some("Running"))
                        .then_some(status.pod_ip)
                        .flatten())
                }
            },
        )
        .await?;
        pod_ips.push(ip.parse::<Ipv4Addr>()?);
    }
    let pod_netns: Vec<String> = pod_ips
        .iter()
        .map(|ip| pod_netns(*ip))
        .collect::<anyhow::Result<_>>()?;

    // The receivers: in the receiver pod, and on host 1.
    let receivers = [start_serve(&pod_netns[0])?, start_serve(&links.netns(1))?];
    let routes = [
        Route {
            kind: PathKind::SameNode,
            netns: pod_netns[1].clone(),
            target: SocketAddr::from((pod_ips[0], PORT)),
        },
        Route {
            kind: PathKind::AcrossNodes,
            netns: pod_netns[2].clone(),
            target: SocketAddr::from((pod_ips[0], PORT)),
        },
        Route {
            kind: PathKind::HostToHost,
            netns: links.netns(2),
            target: SocketAddr::from((links.host_ip(1).parse::<Ipv4Addr>()?, PORT)),
        },
    ];
    // Every path answers (the overlay's entries for the other node may
    // still be on their way): a small run not counted.
    for route in &routes {
        poll(
            &format!("{} to answer", route.kind.label(&args.backend)),
            Duration::from_secs(60),
            || async { run_client(route, 1 << 20, 20, 5).await.map(Some) },
        )
        .await?;
    }
    let host2_route = in_netns(
        &links.netns(2),
        &["ip", "route", "get", &pod_ips[0].to_string()],
    );
    let load_before = loadavg();
    eprintln!(
        "multinode: measuring ({} rounds of {} MiB, {} round trips, {} connections per path); load {load_before}",
        args.rounds, args.mib, args.round_trips, args.connects
    );

    let bytes = args.mib << 20;
    let mut figures: Vec<Figures> = PATHS.iter().map(|_| Figures::default()).collect();
    for round in 0..args.rounds {
        for k in 0..PATHS.len() {
            let idx = (round + k) % PATHS.len();
            let route = &routes[idx];
            let r = run_client(route, bytes, args.round_trips, args.connects).await?;
            let f = &mut figures[idx];
            let seconds = r.transfer_us as f64 / 1e6;
            f.gbits.push(r.bytes as f64 * 8.0 / seconds / 1e9);
            f.rr.extend(r.rr_us.iter().map(|u| Duration::from_micros(*u)));
            f.crr
                .extend(r.crr_us.iter().map(|u| Duration::from_micros(*u)));
        }
        eprintln!("multinode: round {} of {} done", round + 1, args.rounds);
    }
    let load_after = loadavg();

    report(
        args,
        &routes,
        &mut figures,
        &Context {
            load: format!("{load_before} before, {load_after} after"),
            pod_mtu: mtu(&pod_netns[0]),
            underlay_mtu: mtu(&links.netns(1)),
            route: host2_route.trim().to_string(),
        },
    );
    // Guards drop in reverse (as on an error): receivers, agents (reset
    // in their namespaces while the server still answers), server,
    // links, dir.
    drop(receivers);
    drop(agents);
    drop(server);
    drop(links);
    Ok(())
}

/// What the tables' notes say about the run.
struct Context {
    load: String,
    pod_mtu: String,
    underlay_mtu: String,
    route: String,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn times(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}×", a / b)
    } else {
        "-".into()
    }
}

fn report(args: &Args, routes: &[Route], figures: &mut [Figures], cx: &Context) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let same = median(&figures[0].gbits);
    let rows: Vec<Vec<String>> = routes
        .iter()
        .zip(figures.iter())
        .map(|(route, f)| {
            let (min, max) = f
                .gbits
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), g| (lo.min(*g), hi.max(*g)));
            vec![
                route.kind.label(&args.backend),
                format!("{:.2} Gbit/s", median(&f.gbits)),
                format!("{min:.2}–{max:.2}"),
                times(median(&f.gbits), same),
            ]
        })
        .collect();
    print_grid(
        &format!(
            "TCP throughput: one connection, {} MiB per transfer, median of {} rounds (paths in turn); pod MTU {}, underlay MTU {}; {cores} cores, load {}",
            args.mib, args.rounds, cx.pod_mtu, cx.underlay_mtu, cx.load
        ),
        &["path", "throughput", "min–max", "÷ same node"],
        &rows,
    );
    let across = median(&figures[1].gbits);
    let ratio = if same > 0.0 { across / same } else { 0.0 };
    // Each round's two transfers ran back to back: their ratio pairs
    // them under the same load.
    let paired: Vec<f64> = figures[1]
        .gbits
        .iter()
        .zip(&figures[0].gbits)
        .map(|(a, s)| a / s)
        .collect();
    let (lo, hi) = paired
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "\nacross nodes / same node throughput: {:.2}×, the median of each round's pair ({lo:.2}–{hi:.2}; {ratio:.2}× of the medians) (target ≥ 0.80×: {})",
        median(&paired),
        if median(&paired) >= 0.8 { "met" } else { "MISSED" }
    );
    println!(
        "host-to-host / same node throughput: {}",
        times(median(&figures[2].gbits), same)
    );

    let p = |v: &mut Vec<Duration>, q: f64| percentile(v, q);
    let same_rr = p(&mut figures[0].rr, 50.0);
    let same_crr = p(&mut figures[0].crr, 50.0);
    let rows: Vec<Vec<String>> = routes
        .iter()
        .zip(figures.iter_mut())
        .map(|(route, f)| {
            let (rr50, rr99) = (p(&mut f.rr, 50.0), p(&mut f.rr, 99.0));
            let (crr50, crr99) = (p(&mut f.crr, 50.0), p(&mut f.crr, 99.0));
            vec![
                route.kind.label(&args.backend),
                us(rr50),
                us(rr99),
                times(rr50.as_secs_f64(), same_rr.as_secs_f64()),
                us(crr50),
                us(crr99),
                times(crr50.as_secs_f64(), same_crr.as_secs_f64()),
            ]
        })
        .collect();
    print_grid(
        &format!(
            "Request latency: {REQUEST}-byte request and response; round trip = on one open connection ({} per round, TCP_RR), connection = connect + request + response + close ({} per round, TCP_CRR); {} rounds",
            args.round_trips, args.connects, args.rounds
        ),
        &[
            "path",
            "round trip p50",
            "p99",
            "÷ same node",
            "connection p50",
            "p99",
            "÷ same node",
        ],
        &rows,
    );
    println!("\nhost 2 to the receiver pod: {}", cx.route);
}

// ------------------------------------------------------------ failover

/// What the failover part measured.
struct Failover {
    /// SIGKILL of the server the agent was on → a write of the agent
    /// (its node Lease renewed) seen through the other server.
    write_seen: Duration,
    /// SIGKILL → the agent's load balancer on the live server.
    switched: Option<Duration>,
    /// SIGKILL → the scheduler's Lease held by the live server.
    scheduler: Option<Duration>,
    node_lease_seconds: Option<i32>,
    scheduler_lease_seconds: Option<i32>,
}

/// A Lease's holder, duration and renew time.
async fn lease_of(
    client: &Client,
    ns: &str,
    name: &str,
) -> anyhow::Result<Option<(String, Option<i32>, Option<k8s_openapi::jiff::Timestamp>)>> {
    use k8s_openapi::api::coordination::v1::Lease as KubeLease;
    let leases: Api<KubeLease> = Api::namespaced(client.clone(), ns);
    Ok(leases.get_opt(name).await?.and_then(|l| l.spec).map(|s| {
        (
            s.holder_identity.unwrap_or_default(),
            s.lease_duration_seconds,
            s.renew_time.map(|t| t.0),
        )
    }))
}

/// The port of `https://host:port`.
fn port_of(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Two `skiff server`s on a three-member etcd (the second joined with
/// the first's token) and a `skiff agent` joined to the first, all on
/// loopback in the root namespace (as crates/skiff/tests/ha.rs); once
/// the agent's load balancer lists both servers, the first is SIGKILLed.
async fn failover(skiff: &Path, lease: &Lease) -> anyhow::Result<Failover> {
    let octet = lease.octet;
    let dir = tempfile::Builder::new()
        .prefix("skiff-bench-failover-")
        .tempdir()?;
    let etcd = skiff_testkit::EtcdCluster::start(3).await?;
    let ranges: Vec<String> = [
        "--cluster-cidr",
        &format!("10.{octet}.0.0/17"),
        "--service-cidr",
        &format!("10.{octet}.128.0/17"),
        "--flannel-backend",
        "none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let server_args = |token: Option<&str>| -> anyhow::Result<Vec<String>> {
        let mut a: Vec<String> = [
            "server",
            "--https-listen-port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--disable-agent",
            "--etcd-servers",
            &etcd.endpoints().join(","),
            "--kubelet-port",
            &skiff_testkit::free_port()?.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(token) = token {
            a.extend(["--token".to_string(), token.to_string()]);
        }
        a.extend(ranges.iter().cloned());
        Ok(a)
    };
    let mut first = Daemon::spawn(
        skiff,
        None,
        &server_args(None)?,
        dir.path().join("first"),
        &format!("skbfa{octet}"),
        dir.path().join("first.log"),
    )?;
    eprintln!(
        "multinode failover: 3-member etcd, servers and agent logs in {}",
        dir.path().display()
    );
    let join_line = first
        .wait_log("skiff agent --server ", Duration::from_secs(60))
        .await?;
    let (first_url, token_file) = (
        word_after(&join_line, "--server")?,
        word_after(&join_line, "--token-file")?,
    );
    let token = std::fs::read_to_string(&token_file)
        .with_context(|| format!("read {token_file}"))?
        .trim()
        .to_string();
    let mut second = Daemon::spawn(
        skiff,
        None,
        &server_args(Some(&token))?,
        dir.path().join("second"),
        &format!("skbfb{octet}"),
        dir.path().join("second.log"),
    )?;
    let running = second
        .wait_log("skiff server is running", Duration::from_secs(90))
        .await?;
    let second_url = word_after(&running, "on")?;
    let second_client = poll("the second server's API", Duration::from_secs(60), || {
        let kubeconfig = second.data_dir.join("admin.kubeconfig");
        async move {
            let client = client_from(&kubeconfig).await?;
            client.apiserver_version().await?;
            Ok(Some(client))
        }
    })
    .await?;

    let node = format!("skb-{octet}-f");
    let mut agent_args: Vec<String> = vec![
        "agent".into(),
        "--server".into(),
        first_url.clone(),
        "--token-file".into(),
        token_file.clone(),
        "--node-name".into(),
        node.clone(),
        "--node-ip".into(),
        "127.0.0.1".into(),
        "--kubelet-port".into(),
        skiff_testkit::free_port()?.to_string(),
    ];
    agent_args.extend(ranges.iter().cloned());
    let mut agent = Daemon::spawn(
        skiff,
        None,
        &agent_args,
        dir.path().join("agent"),
        &format!("skbfj{octet}"),
        dir.path().join("agent.log"),
    )?;
    // Its load balancer knows both servers (from the kubernetes
    // Endpoints) and its node Lease is renewed.
    let ports = [port_of(&first_url), port_of(&second_url)];
    poll(
        "the agent's load balancer to list both servers",
        Duration::from_secs(90),
        || {
            let text = std::fs::read_to_string(&agent.log).unwrap_or_default();
            let ports = &ports;
            async move {
                Ok(text
                    .lines()
                    .any(|l| {
                        l.contains("API servers for the agent's load balancer")
                            && ports.iter().all(|p| l.contains(&format!(":{p}")))
                    })
                    .then_some(()))
            }
        },
    )
    .await
    .map_err(|e| anyhow!("{e:#}\nagent log:\n{}", agent.log_tail()))?;
    let renewed_at = || {
        let client = second_client.clone();
        let node = node.clone();
        async move {
            Ok(lease_of(&client, "kube-node-lease", &node)
                .await?
                .and_then(|(_, _, t)| t))
        }
    };
    let first_renewal = poll("the node Lease", Duration::from_secs(90), renewed_at).await?;
    // The kill comes right after a renewal is seen, so the agent's next
    // write is about one renewal interval away: the same phase every run.
    poll("a node Lease renewal", Duration::from_secs(90), || {
        let renewed = renewed_at();
        async move { Ok(renewed.await?.filter(|t| *t != first_renewal)) }
    })
    .await?;
    let scheduler_before = lease_of(&second_client, "kube-system", "kube-scheduler").await?;
    let failovers = |agent: &Daemon| {
        std::fs::read_to_string(&agent.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("API server failover"))
            .count()
    };
    let before = failovers(&agent);

    first.kill();
    let killed = Instant::now();
    let killed_at = k8s_openapi::jiff::Timestamp::now();
    eprintln!("multinode failover: first server SIGKILLed");

    let mut switched = None;
    let mut scheduler = None;
    let write_seen = poll(
        "the agent's write through the second server",
        Duration::from_secs(180),
        || {
            if switched.is_none() && failovers(&agent) > before {
                switched = Some(killed.elapsed());
            }
            let client = second_client.clone();
            let node = node.clone();
            async move {
                let renewed = lease_of(&client, "kube-node-lease", &node)
                    .await?
                    .and_then(|(_, _, t)| t);
                Ok(renewed
                    .is_some_and(|t| t > killed_at)
                    .then(|| killed.elapsed()))
            }
        },
    )
    .await?;
    // The scheduler's Lease: taken by the second server (at most its
    // duration after the kill, plus a retry).
    if let Some((holder, duration, _)) = &scheduler_before {
        let limit = Duration::from_secs(duration.unwrap_or(15).max(1) as u64 * 3);
        let taken = poll("the scheduler's Lease taken over", limit, || {
            let client = second_client.clone();
            async move {
                let now = lease_of(&client, "kube-system", "kube-scheduler").await?;
                Ok(now
                    .filter(|(h, _, _)| h != holder && !h.is_empty())
                    .map(|_| killed.elapsed()))
            }
        })
        .await;
        scheduler = taken.ok();
    }
    if switched.is_none() && failovers(&agent) > before {
        switched = Some(killed.elapsed());
    }
    let node_lease_seconds = lease_of(&second_client, "kube-node-lease", &node)
        .await?
        .and_then(|(_, d, _)| d);
    drop(second_client);
    // The agent first (reset while the second server answers), then the
    // servers, etcd and the dir.
    agent.kill();
    drop(agent);
    drop(second);
    drop(first);
    drop(etcd);
    Ok(Failover {
        write_seen,
        switched,
        scheduler,
        node_lease_seconds,
        scheduler_lease_seconds: scheduler_before.and_then(|(_, d, _)| d),
    })
}

fn report_failover(f: &Failover) {
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let within = |d: Duration, lease: Option<i32>| match lease {
        Some(l) if l > 0 => {
            let r = d.as_secs_f64() / l as f64;
            format!(
                "{r:.2}× ({})",
                if r <= 2.0 {
                    "≤ 2×: met"
                } else {
                    "≤ 2×: MISSED"
                }
            )
        }
        _ => "-".into(),
    };
    let lease_text = |l: Option<i32>| l.map_or("-".into(), |l| format!("{l} s"));
    let rows = vec![
        vec![
            "kill → next agent write seen (its node Lease renewed, via the other server)".into(),
            secs(f.write_seen),
            format!("node Lease {}", lease_text(f.node_lease_seconds)),
            within(f.write_seen, f.node_lease_seconds),
            format!("scheduler Lease {}", lease_text(f.scheduler_lease_seconds)),
            within(f.write_seen, f.scheduler_lease_seconds),
        ],
        vec![
            "kill → the agent's load balancer on the live server".into(),
            f.switched.map_or("-".into(), secs),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
        vec![
            "kill → the scheduler's Lease held by the live server".into(),
            f.scheduler.map_or("-".into(), secs),
            String::new(),
            String::new(),
            format!("scheduler Lease {}", lease_text(f.scheduler_lease_seconds)),
            f.scheduler
                .map_or("-".into(), |d| within(d, f.scheduler_lease_seconds)),
        ],
    ];
    print_grid(
        "API failover: two `skiff server --disable-agent` on a three-member etcd, a `skiff agent` joined to the first (its load balancer knows both); the first SIGKILLed once, right after a node Lease renewal was seen (one sample; the agent's next write is its next renewal, 10 s later: the time beyond that is the failover's own)",
        &["", "time", "Lease", "÷ Lease", "Lease", "÷ Lease"],
        &rows,
    );
}
