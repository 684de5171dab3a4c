//! `skiff-bench`: benchmarks that print Skiff's figures side by side with
//! the baseline an issue names, in one run on one machine. Never asserts
//! timings; it prints them.

mod api;
mod api_rbac;
mod cluster;
mod controllers;
mod framework;
mod h2;
mod multinode;
mod node;
mod overhead;
mod probes;
mod scheduler;
mod services;
mod sim;
mod stats;
mod store;
mod streaming;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Debug, Parser)]
#[command(name = "skiff-bench", about = "Skiff benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Embedded SQLite store vs a local single-member etcd.
    Store(store::Args),
    /// The API server under churn with many watchers (needs the release
    /// `skiff` binary beside this one).
    Api(api::Args),
    /// The scheduler (a `skiff scheduler` process) against a `skiff server`,
    /// in the style of upstream scheduler_perf SchedulingBasic.
    Scheduler(scheduler::Args),
    /// The scheduling algorithm alone on an in-memory cache.
    Framework(framework::Args),
    /// The node agent: pod startup and deletion latency and memory of
    /// `skiff server` beside the raw CRI floor on a containerd of the same
    /// config (and podman when installed). Needs root, containerd, runc
    /// and the CNI plugins.
    Node(node::Args),
    /// Readiness probes' CPU (httpGet and exec, 1/s on many pods) in the
    /// server and the node's containerd and shims, beside raw CRI
    /// ExecSync at the same rate. Needs root, containerd, runc and the
    /// CNI plugins.
    Probes(probes::Args),
    /// `kubectl exec` latency and port-forward throughput through the API
    /// server and agent, beside the same done straight at containerd's
    /// streaming server. Needs root, containerd, runc, the CNI plugins
    /// and kubectl.
    Streaming(streaming::Args),
    /// kwok's CI benchmark shape against `skiff sim`: simulated nodes
    /// Ready, pods Running and deleted, through a `skiff server
    /// --disable-agent` (needs the release `skiff` binary beside this one).
    Sim(sim::Args),
    /// The controller manager at scale: a Deployment of 1,000 replicas on
    /// 100 simulated nodes created and rolled, beside upstream's client
    /// limit floor and writes per pod; idle RSS beside a base build.
    Controllers(controllers::Args),
    /// Services at scale: proxy sync into nftables at 50 and 5,000
    /// Services, cluster DNS beside dnsmasq, their memory, and ClusterIP
    /// beside direct pod traffic on a live `skiff server`. Needs root, nft,
    /// ip, dnsmasq, dnsperf and taskset; the live part also containerd,
    /// runc, the CNI plugins and kubectl (`--skip-cluster` skips it).
    Services(services::Args),
    /// What recording and exporting cost: pod start p50 and the sim
    /// benchmark's pods-Running time on two `skiff server`s, one as
    /// shipped and one with `--startup-timelines=false --metrics=false`,
    /// in interleaved rounds. Needs root, containerd, runc and the CNI
    /// plugins.
    Overhead(overhead::Args),
    /// Pod network across nodes: TCP throughput and request latency pod
    /// to pod on one node, across nodes through the overlay, and host to
    /// host over the same underlay, with a server and two agents in
    /// network namespaces. Needs root, ip, nsenter, containerd, runc and
    /// the CNI plugins.
    Multinode(multinode::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Several rustls providers may be compiled in (feature unification);
    // pick one for the kube client explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Store(args) => runtime.block_on(store::run(args)),
        Command::Framework(args) => framework::run(args),
        Command::Api(args) => runtime.block_on(api::run(args)),
        Command::Scheduler(args) => runtime.block_on(scheduler::run(args)),
        Command::Node(args) => runtime.block_on(node::run(args)),
        Command::Probes(args) => runtime.block_on(probes::run(args)),
        Command::Streaming(args) => runtime.block_on(streaming::run(args)),
        Command::Sim(args) => runtime.block_on(sim::run(args)),
        Command::Controllers(args) => runtime.block_on(controllers::run(args)),
        Command::Services(args) => runtime.block_on(services::run(args)),
        Command::Overhead(args) => runtime.block_on(overhead::run(args)),
        Command::Multinode(args) => runtime.block_on(multinode::run(args)),
    }
}
