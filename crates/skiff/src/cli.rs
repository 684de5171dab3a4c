//! Command-line interface: subcommands and their flags.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Skiff: a Kubernetes-compatible container orchestrator in one binary.
#[derive(Debug, Parser)]
#[command(name = "skiff", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the version.
    Version,
    /// Run a single-node cluster: store and API server (and, as they land,
    /// scheduler, controllers and node agent).
    Server(ServerArgs),
    /// Print the admin kubeconfig of a server's data dir.
    Kubeconfig(KubeconfigArgs),
    /// Run only the scheduler, against any API server.
    Scheduler(SchedulerArgs),
}

#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// Kubeconfig of the API server to schedule for.
    #[arg(long)]
    pub kubeconfig: PathBuf,

    /// Take part in leader election (kube-system/kube-scheduler Lease).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
}

#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    #[arg(long, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Where state lives (database, PKI, kubeconfig). Relative paths are
    /// resolved against the current directory.
    #[arg(long, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// HTTPS port of the Kubernetes API.
    #[arg(long, default_value_t = 6443)]
    pub https_listen_port: u16,

    /// Address the API server listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,

    /// Use this etcd cluster (comma-separated client URLs) instead of the
    /// embedded SQLite store.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,

    /// Do not run the scheduler inside this server.
    #[arg(long)]
    pub disable_scheduler: bool,

    /// Keep store history for at most this many seconds.
    #[arg(long, default_value_t = 300)]
    pub history_seconds: u64,

    /// Keep at most this many revisions of store history.
    #[arg(long, default_value_t = 10_000)]
    pub history_revisions: i64,
}

/// `skiff version` output.
pub fn version_line() -> String {
    format!("skiff {}", env!("CARGO_PKG_VERSION"))
}
