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
    // Boxed: its flags are most of the enum (clippy's large_enum_variant).
    Server(Box<ServerArgs>),
    /// Print the admin kubeconfig of a server's data dir, or with --user
    /// a new one for that user (a client certificate signed by the
    /// cluster CA, as `kubeadm kubeconfig user`).
    Kubeconfig(KubeconfigArgs),
    /// Check or renew the certificates of a server's data dir (as
    /// `kubeadm certs`).
    #[command(subcommand)]
    Certs(CertsCommand),
    /// Run only the scheduler, against any API server.
    Scheduler(SchedulerArgs),
    /// Run only the controller manager (Deployments, ReplicaSets, Jobs,
    /// ...), against any API server.
    ControllerManager(ControllerManagerArgs),
    /// Run only the node agent (kubelet), against any API server.
    Agent(AgentArgs),
    /// Stop and remove every pod this node ran, its CNI state and the data
    /// dir, so the next start is clean (as kubeadm reset).
    Reset(ResetArgs),
    /// Run simulated nodes (the real node agent on a fake runtime), many
    /// in one process, against any API server (as kwok).
    Sim(SimArgs),
    /// Print a node's own log: `agent` (what `journalctl -u kubelet`
    /// shows upstream) or `containerd`.
    Logs(LogsArgs),
    /// Why is a pod not Ready: names the failing stage, shows the evidence
    /// (conditions, events, `logs --previous`) and prints a fix. Also
    /// `deploy/NAME`, `statefulset/NAME`, `job/NAME` (their newest
    /// unavailable pod) and `svc/NAME`. Exits 0 when healthy, 1 when it
    /// found a problem, 2 when it could not look.
    Explain(ExplainArgs),
    /// Manage join tokens (as `kubeadm token`): bootstrap tokens a new
    /// node joins with (`skiff agent --server URL --token TOKEN`).
    Token(TokenArgs),
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The server's data dir (its admin kubeconfig is used).
    #[arg(long, global = true, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,
    /// A kubeconfig to use instead of the data dir's admin kubeconfig.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    pub command: TokenCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (K10<CA hash>::<id>.<secret>).
    Create(TokenCreateArgs),
    /// List the tokens.
    List,
    /// Delete tokens (by id, `id.secret` or the whole join token).
    Delete {
        #[arg(required = true)]
        tokens: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct TokenCreateArgs {
    /// The token (`[a-z0-9]{6}.[a-z0-9]{16}`; default: a random one).
    pub token: Option<String>,
    /// How long until it expires (0: never).
    #[arg(long, default_value = "24h", value_parser = parse_duration)]
    pub ttl: std::time::Duration,
    /// A description of what it is for.
    #[arg(long)]
    pub description: Option<String>,
    /// What it may be used for.
    #[arg(long, value_delimiter = ',', default_value = "signing,authentication")]
    pub usages: Vec<String>,
    /// More groups it authenticates in (`system:bootstrappers:...`).
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// `pod NAME`, `NAME`, `KIND/NAME` or `KIND NAME` (pod, deploy,
    /// statefulset, job, svc).
    #[arg(required = true, num_args = 1..=2)]
    pub target: Vec<String>,

    /// Namespace (default: the kubeconfig context's, else `default`).
    #[arg(short, long)]
    pub namespace: Option<String>,

    /// Kubeconfig (default: $KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Output: human or json.
    #[arg(short, long, value_enum, default_value_t = ExplainOutput::Human)]
    pub output: ExplainOutput,
}

/// How `skiff explain` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExplainOutput {
    Human,
    Json,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Which log.
    #[arg(value_enum)]
    pub which: crate::logs::Which,

    /// The data dir of `skiff server` or of `skiff agent`.
    #[arg(long, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// Only the last N lines.
    #[arg(long)]
    pub tail: Option<usize>,

    /// Keep printing what is written next.
    #[arg(short, long)]
    pub follow: bool,
}

/// A duration as `500ms`, `2s`, `1m` or `1h`.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration {s:?}: use ms, s, m or h")),
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Kubeconfig of the API server.
    #[arg(long)]
    pub kubeconfig: PathBuf,

    /// How many nodes to simulate.
    #[arg(long, default_value_t = 10)]
    pub nodes: usize,

    /// Node names are this prefix and a number from 0.
    #[arg(long, default_value = "sim-")]
    pub name_prefix: String,

    /// How long a container takes to start.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub pod_start_delay: std::time::Duration,

    /// The cluster DNS server the simulated kubelets are configured with
    /// (kubelet's --cluster-dns; empty: none, and ClusterFirst pods get
    /// the MissingClusterDNS warning).
    #[arg(long, default_value = "10.43.0.10")]
    pub cluster_dns: String,

    /// Each node's capacity `pods`.
    #[arg(long, default_value_t = 110)]
    pub pods_per_node: u32,

    /// Each node's CPU cores.
    #[arg(long, default_value_t = 32)]
    pub cpu: u32,

    /// Each node's memory (a quantity: 256Gi).
    #[arg(long, default_value = "256Gi")]
    pub memory: String,

    /// After this long, the nodes stop renewing their Leases and status
    /// (node loss); the process keeps running until a signal.
    #[arg(long, value_parser = parse_duration)]
    pub stop_after: Option<std::time::Duration>,

    /// Delete the simulated Nodes and their Leases on exit.
    #[arg(long)]
    pub cleanup: bool,

    /// Serve the admin endpoint (plain HTTP: keep it on loopback) on this
    /// address, port 0 for any free one; the bound address is written to
    /// DATA_DIR/admin-address. `POST /nodes/NAME/stop` loses one node
    /// (its Lease and status are no longer renewed); `GET /nodes` lists
    /// them.
    #[arg(long)]
    pub admin_listen: Option<std::net::SocketAddr>,

    /// Scratch space for the simulated workers' files.
    #[arg(long, default_value = "/var/lib/skiff-sim")]
    pub data_dir: PathBuf,

    /// Register node i with the i-th /24 of this range as its podCIDR
    /// (within the server's --cluster-cidr, its node IPAM marks them as
    /// taken). Empty: the node IPAM controller assigns each node's.
    #[arg(long, default_value = "")]
    pub pod_cidr_range: String,
}

/// Flags the node agent has in `skiff server` and `skiff agent`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// Use this CRI socket instead of starting containerd.
    #[arg(long)]
    pub container_runtime_endpoint: Option<PathBuf>,

    /// The agent's HTTPS port (logs).
    #[arg(long, default_value_t = 10250)]
    pub kubelet_port: u16,

    /// The node's IP (default: the source address of the default route).
    #[arg(long)]
    pub node_ip: Option<std::net::IpAddr>,

    /// The CNI bridge device.
    #[arg(long, default_value = "skiff0")]
    pub bridge_name: String,

    /// How pod traffic crosses nodes (k3s's flag): `vxlan` (an overlay,
    /// flannel's wire format), `host-gw` (routes via the nodes' addresses,
    /// for nodes on one link) or `none`. Every node of a cluster uses the
    /// same.
    #[arg(long, default_value = "vxlan")]
    pub flannel_backend: skiff_node::network::overlay::plan::Backend,

    /// The VXLAN network identifier every node of the cluster uses.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..16_777_216))]
    pub vxlan_vni: u32,

    /// The UDP port VXLAN uses between nodes (Linux's and flannel's 8472).
    #[arg(long, default_value_t = 8472)]
    pub vxlan_port: u16,

    /// Taints to register the node with (`key=value:Effect`, comma-separated).
    #[arg(long)]
    pub register_with_taints: Vec<String>,

    /// Stop every pod's containers when the agent stops (by default they
    /// keep running, as under a kubelet).
    #[arg(long)]
    pub stop_pods_on_exit: bool,

    /// Time every pod start and write its StartupTimeline event when it is
    /// first Ready (`--startup-timelines=false`: neither).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub startup_timelines: bool,

    /// Record and serve metrics (`--metrics=false`: this process records
    /// none; the API server's `/metrics` and the agent's `/metrics` and
    /// `/metrics/resource` answer 404, and the server scrapes no usage
    /// for metrics.k8s.io, so `kubectl top` says metrics are not
    /// available).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics: bool,

    /// The containerd binary the agent starts.
    #[arg(long, default_value = "containerd")]
    pub containerd_binary: PathBuf,

    /// A registry (`host:port`) to pull from over plain HTTP; repeatable.
    /// Registries on loopback need no flag.
    #[arg(long)]
    pub insecure_registry: Vec<String>,

    /// The cluster DNS Service's address, ClusterFirst pods' nameserver
    /// (default: the 10th address of the Service range, 10.43.0.10).
    #[arg(long)]
    pub cluster_dns: Option<std::net::Ipv4Addr>,

    /// The node's resolv.conf: Default pods get it, ClusterFirst pods its
    /// search domains, and the DNS server forwards other names to its
    /// nameservers.
    #[arg(long, default_value = "/etc/resolv.conf")]
    pub resolv_conf: PathBuf,

    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,

    /// Do not run the service proxy (Service traffic is not routed on
    /// this node).
    #[arg(long)]
    pub disable_kube_proxy: bool,

    /// Do not run the built-in DNS server on this node.
    #[arg(long)]
    pub disable_cluster_dns: bool,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Kubeconfig of the API server (or join with --server and
    /// --token-file or --token).
    #[arg(
        long,
        required_unless_present_any = ["token", "token_file"],
        conflicts_with_all = ["server", "token", "token_file"]
    )]
    pub kubeconfig: Option<PathBuf>,

    /// The API server to join (`https://HOST:PORT`), with --token-file or
    /// --token.
    #[arg(long)]
    pub server: Option<String>,

    /// The join token (`<server data dir>/token` or `skiff token create`):
    /// the server's CA is checked against its hash, then the token asks
    /// for this node's client certificate; the node's kubeconfig is kept
    /// in the data dir, and later starts use it.
    /// Prefer --token-file: a token on the command line is visible to
    /// every user of the machine for as long as the agent runs.
    #[arg(long, requires = "server", conflicts_with = "token_file")]
    pub token: Option<String>,

    /// A file holding the join token (a copy of the server's
    /// `<data-dir>/token`).
    #[arg(long, requires = "server")]
    pub token_file: Option<PathBuf>,

    /// The Node's name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,

    /// Where the agent's state lives (containerd, logs, CNI).
    #[arg(long, default_value = "/var/lib/skiff-agent")]
    pub data_dir: PathBuf,

    /// CA whose client certificates the agent's server accepts (default:
    /// the kubeconfig's CA).
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,

    /// Renew the kubeconfig's client certificate through a
    /// CertificateSigningRequest before it expires (the kubelet's
    /// --rotate-certificates), when it is this node's own
    /// (system:node:NAME in system:nodes).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub rotate_certificates: bool,

    /// The Service range (only to find the default --cluster-dns and to
    /// drop traffic to unallocated ClusterIPs).
    #[arg(long, default_value = "10.43.0.0/16")]
    pub service_cidr: String,

    /// The pod network (pod traffic to Services is not masqueraded, and
    /// the rest is); empty: nothing is masqueraded on the way to a
    /// ClusterIP.
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,

    #[command(flatten)]
    pub node: NodeArgs,
}

#[derive(Debug, Args)]
pub struct ResetArgs {
    #[arg(long, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,

    /// The CNI bridge device to remove.
    #[arg(long, default_value = "skiff0")]
    pub bridge_name: String,
}

#[derive(Debug, Args)]
pub struct SchedulerArgs {
    /// Kubeconfig of the API server to schedule for.
    #[arg(long)]
    pub kubeconfig: PathBuf,

    /// Take part in leader election (kube-system/kube-scheduler Lease).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// The HTTPS port of /metrics and /healthz (kube-scheduler's; 0: none).
    #[arg(long, default_value_t = crate::secure_port::SCHEDULER_PORT)]
    pub secure_port: u16,

    /// The address the secure port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,
}

/// `skiff controller-manager`.
#[derive(Debug, Args)]
pub struct ControllerManagerArgs {
    /// Kubeconfig of the API server.
    #[arg(long)]
    pub kubeconfig: PathBuf,

    /// Take part in leader election (kube-system/kube-controller-manager
    /// Lease).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// The HTTPS port of /metrics and /healthz
    /// (kube-controller-manager's; 0: none).
    #[arg(long, default_value_t = crate::secure_port::CONTROLLER_MANAGER_PORT)]
    pub secure_port: u16,

    /// The address the secure port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,

    /// Give each node a podCIDR from this range (node IPAM); empty: off.
    #[arg(long, default_value = "")]
    pub cluster_cidr: String,

    /// The CA bundle published in every namespace as the ConfigMap
    /// kube-root-ca.crt (default: the kubeconfig's certificate authority).
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,

    /// The CA certificate the csrsigning controller signs approved
    /// certificate requests with (PEM); with --cluster-signing-key-file.
    #[arg(long, requires = "cluster_signing_key_file")]
    pub cluster_signing_cert_file: Option<PathBuf>,

    /// The CA's private key (PEM).
    #[arg(long, requires = "cluster_signing_cert_file")]
    pub cluster_signing_key_file: Option<PathBuf>,

    /// The key legacy service-account token Secrets are signed with (PKCS#8
    /// P-256 PEM, the API server's `<data-dir>/pki/sa.key`); without it
    /// such Secrets stay empty.
    #[arg(long)]
    pub service_account_private_key_file: Option<PathBuf>,

    #[command(flatten)]
    pub controllers: ControllersArgs,
}

/// Flags of the controller manager in `skiff server` and
/// `skiff controller-manager` (kube-controller-manager's names).
#[derive(Debug, Args)]
pub struct ControllersArgs {
    /// Requests a second the controllers may send to the API server;
    /// 0 for no limit.
    #[arg(long, default_value_t = skiff_controllers::manager::DEFAULT_QPS)]
    pub kube_api_qps: f32,

    /// Requests the controllers may send at once above that rate.
    #[arg(long, default_value_t = skiff_controllers::manager::DEFAULT_BURST)]
    pub kube_api_burst: u32,

    /// Which controllers run: `*` for the default ones, NAME to add one,
    /// `-NAME` to leave one out (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// How long a node's Lease and status may stand still before the node
    /// is marked Unknown and tainted unreachable.
    #[arg(long, default_value = "50s", value_parser = parse_duration)]
    pub node_monitor_grace_period: std::time::Duration,

    /// The same for a node that never posted its status.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub node_startup_grace_period: std::time::Duration,

    /// How often the node lifecycle controller looks again at a zone
    /// that may not evict now (a node's staleness is noticed at its
    /// deadline, without a period).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub node_monitor_period: std::time::Duration,

    /// Nodes a second whose pods may be evicted (tainted NoExecute) in a
    /// healthy zone.
    #[arg(long, default_value_t = 0.1)]
    pub node_eviction_rate: f32,

    /// The same in a partly disrupted zone larger than
    /// --large-cluster-size-threshold.
    #[arg(long, default_value_t = 0.01)]
    pub secondary_node_eviction_rate: f32,

    /// The share of not-Ready nodes (of more than 2) that makes a zone
    /// partly disrupted.
    #[arg(long, default_value_t = 0.55)]
    pub unhealthy_zone_threshold: f32,

    /// Partly disrupted zones up to this many nodes stop evictions.
    #[arg(long, default_value_t = 50)]
    pub large_cluster_size_threshold: u32,

    /// The most endpoints the EndpointSlice controller puts in one slice.
    #[arg(long, default_value_t = 100)]
    pub max_endpoints_per_slice: usize,
    /// Terminated pods kept before pod GC deletes the oldest; 0 or less
    /// keeps them all.
    #[arg(long, default_value_t = 12_500, allow_negative_numbers = true)]
    pub terminated_pod_gc_threshold: i32,
    /// The longest certificate the csrsigning controller signs (a
    /// request's expirationSeconds may ask for less).
    #[arg(long, default_value = "8760h", value_parser = parse_duration)]
    pub cluster_signing_duration: std::time::Duration,
    /// How often each HorizontalPodAutoscaler syncs.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_sync_period: std::time::Duration,
    /// How far back a scale-down looks for a higher recommendation
    /// (autoscalers whose behavior sets no window).
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_downscale_stabilization: std::time::Duration,
    /// How far the ratio of usage to target may stray from 1 before an
    /// autoscaler changes the count.
    #[arg(long, default_value_t = 0.1)]
    pub horizontal_pod_autoscaler_tolerance: f64,
    /// How long after a pod starts its CPU samples may be skipped.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_cpu_initialization_period: std::time::Duration,
    /// How long after a pod starts an unready pod counts as never ready.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub horizontal_pod_autoscaler_initial_readiness_delay: std::time::Duration,
}

impl ControllersArgs {
    /// The controller manager's settings from these flags; an unknown
    /// controller name or an unusable cluster CIDR is an error at start,
    /// as upstream's flag checks are.
    pub fn config(&self, cluster_cidr: &str) -> anyhow::Result<skiff_controllers::Config> {
        let known = |name: &str| {
            skiff_controllers::manager::CONTROLLERS
                .iter()
                .any(|c| c.name == name)
        };
        for name in &self.controllers {
            let bare = name.strip_prefix('-').unwrap_or(name);
            anyhow::ensure!(
                bare == "*" || known(bare),
                "--controllers: {name:?} is not a known controller"
            );
        }
        let config = skiff_controllers::Config {
            qps: self.kube_api_qps,
            burst: self.kube_api_burst,
            controllers: self.controllers.clone(),
            cluster_cidr: Some(cluster_cidr.to_string()).filter(|c| !c.is_empty()),
            node_monitor_grace_period: self.node_monitor_grace_period,
            node_startup_grace_period: self.node_startup_grace_period,
            node_monitor_period: self.node_monitor_period,
            node_eviction_rate: self.node_eviction_rate,
            secondary_node_eviction_rate: self.secondary_node_eviction_rate,
            unhealthy_zone_threshold: self.unhealthy_zone_threshold,
            large_cluster_size_threshold: self.large_cluster_size_threshold,
            max_endpoints_per_slice: self.max_endpoints_per_slice,
            terminated_pod_gc_threshold: self.terminated_pod_gc_threshold,
            cluster_signing_duration: self.cluster_signing_duration,
            hpa: skiff_controllers::podautoscaler::Settings {
                sync_period: self.horizontal_pod_autoscaler_sync_period,
                downscale_stabilization: self.horizontal_pod_autoscaler_downscale_stabilization,
                tolerance: self.horizontal_pod_autoscaler_tolerance,
                cpu_initialization_period: self.horizontal_pod_autoscaler_cpu_initialization_period,
                initial_readiness_delay: self.horizontal_pod_autoscaler_initial_readiness_delay,
            },
            ..skiff_controllers::Config::default()
        };
        if let Some(cidr) = &config.cluster_cidr {
            skiff_controllers::nodeipam::NodeIpam::new(cidr, config.node_cidr_mask_size)
                .map_err(|e| anyhow::anyhow!("--cluster-cidr {cidr}: {e}"))?;
        }
        Ok(config)
    }
}

/// `skiff certs`.
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// List the data dir's certificates and CAs with their expiry.
    CheckExpiration {
        #[arg(long, default_value = "/var/lib/skiff")]
        data_dir: PathBuf,
    },
    /// Sign a certificate (or `all`) again with the cluster CA, the same
    /// names and key, for a year; a running server serves the new one
    /// within seconds.
    Renew {
        /// `all`, or a name `check-expiration` lists.
        which: String,
        #[arg(long, default_value = "/var/lib/skiff")]
        data_dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    #[arg(long, default_value = "/var/lib/skiff")]
    pub data_dir: PathBuf,
    /// Mint a kubeconfig for this user name (the certificate's CN)
    /// instead of printing the admin's; what it may do is what RBAC grants
    /// it (`kubectl create rolebinding ... --user NAME`).
    #[arg(long)]
    pub user: Option<String>,
    /// A group of the user (the certificate's O); repeatable. Only with
    /// --user.
    #[arg(long = "group", requires = "user")]
    pub groups: Vec<String>,
    /// How long the user's certificate is valid (kubeadm's default: a
    /// year).
    #[arg(long, default_value = "8760h", value_parser = parse_duration, requires = "user")]
    pub validity_period: std::time::Duration,
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

    /// The address the `kubernetes` Service leads to (pods reach the API
    /// server there; default: --bind-address, or the node's IP when that
    /// is 0.0.0.0).
    #[arg(long)]
    pub advertise_address: Option<std::net::IpAddr>,

    /// Admission plugins to turn off, by upstream's names (e.g.
    /// `ServiceAccount`, whose pods wait for their ServiceAccount, when no
    /// controller manager creates them).
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,

    /// Use this etcd cluster (comma-separated client URLs) instead of the
    /// embedded SQLite store.
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,

    /// Join the cluster of another server on the same `--etcd-servers`:
    /// its join token (`<its data dir>/token`). The CA, the
    /// service-account key and the token file are read from the store,
    /// opened with the token and checked against its CA hash before any
    /// PKI is made, so every server serves with the same CA.
    #[arg(long, requires = "etcd_servers")]
    pub token: Option<String>,

    /// With --token: a server of the cluster being joined
    /// (`https://HOST:PORT`, as kubeadm's and k3s's `--server`). Its CA
    /// must match the token's hash before anything is read from the
    /// store, so a token for another cluster, or a store another cluster
    /// uses, is refused with nothing written.
    #[arg(long, requires = "token")]
    pub server: Option<String>,

    /// How often the nodes' resource metrics are scraped for
    /// metrics.k8s.io (`kubectl top`), as metrics-server's flag.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub metric_resolution: std::time::Duration,

    /// Do not run the scheduler inside this server.
    #[arg(long)]
    pub disable_scheduler: bool,

    /// Do not run the node agent inside this server (nodes join with
    /// `skiff agent`).
    #[arg(long)]
    pub disable_agent: bool,

    /// This server's node name (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,

    /// Pod IPs come from this range; each node gets a /24 of it.
    #[arg(long, default_value = "10.244.0.0/16")]
    pub cluster_cidr: String,

    /// Service ClusterIPs come from this range (the first address is the
    /// `kubernetes` Service's; cluster DNS is expected at .10, as k3s).
    #[arg(long, default_value = "10.43.0.0/16")]
    pub service_cidr: String,

    /// NodePorts come from this range.
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,

    /// Register this server's node with the taint
    /// node-role.kubernetes.io/control-plane:NoSchedule.
    #[arg(long)]
    pub taint_control_plane: bool,

    #[command(flatten)]
    pub node: NodeArgs,

    /// Do not run the controller manager inside this server.
    #[arg(long)]
    pub disable_controller_manager: bool,

    /// Do not give LoadBalancer Services the nodes' addresses (the
    /// built-in service load balancer, as k3s's ServiceLB).
    #[arg(long)]
    pub disable_service_lb: bool,

    #[command(flatten)]
    pub controllers: ControllersArgs,

    /// Keep store history for at most this many seconds.
    #[arg(long, default_value_t = 300)]
    pub history_seconds: u64,

    /// Keep at most this many revisions of store history.
    #[arg(long, default_value_t = 10_000)]
    pub history_revisions: i64,

    #[command(flatten)]
    pub audit: AuditArgs,
}

/// The audit log flags of `skiff server` (kube-apiserver's names).
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Log every request to this file as audit.k8s.io/v1 Event JSON lines;
    /// `-` is standard output. Without --audit-policy-file every request
    /// is logged at Metadata level (kube-apiserver logs nothing without a
    /// policy).
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,

    /// An audit.k8s.io/v1 Policy (YAML or JSON): which requests are
    /// logged at which level (None, Metadata, Request, RequestResponse).
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,

    /// Megabytes the audit log may reach before it is rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u64,

    /// Rotated audit logs kept (0: all).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: usize,

    /// Days a rotated audit log is kept, by the time in its name (0: no
    /// limit).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxage: u32,
}

impl AuditArgs {
    /// The API server's audit settings.
    pub fn options(&self) -> skiff_apiserver::audit::Options {
        skiff_apiserver::audit::Options {
            log_path: self.audit_log_path.clone(),
            policy_file: self.audit_policy_file.clone(),
            max_size_mb: self.audit_log_maxsize,
            max_backups: self.audit_log_maxbackup,
            max_age_days: self.audit_log_maxage,
        }
    }
}

/// `skiff version` output.
pub fn version_line() -> String {
    format!("skiff {}", env!("CARGO_PKG_VERSION"))
}
