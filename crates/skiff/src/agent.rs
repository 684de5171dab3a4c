//! `skiff agent`, and the node agent `skiff server` runs in-process: both
//! talk to an API server through a kube client like any other client.
//! `skiff agent`'s client dials a local load balancer
//! (`skiff_client::loadbalancer`) that fails over between the servers the
//! `kubernetes` Endpoints lists; the in-process one uses its server's
//! loopback.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use skiff_node::agent::config::Config;
use skiff_node::agent::Agent;
use tokio_util::sync::CancellationToken;

use crate::cli::{AgentArgs, NodeArgs};

/// The 10th address of a Service range (the cluster DNS's, as k3s).
pub fn tenth_address(service_cidr: &str) -> anyhow::Result<std::net::Ipv4Addr> {
    let (ip, bits) = service_cidr
        .split_once('/')
        .with_context(|| format!("--service-cidr {service_cidr:?} is not a CIDR"))?;
    let ip: std::net::Ipv4Addr = ip
        .parse()
        .with_context(|| format!("--service-cidr {service_cidr:?} is not an IPv4 CIDR"))?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 28).with_context(|| {
        format!("--service-cidr {service_cidr:?}: the prefix must be at most /28")
    })?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Ok(std::net::Ipv4Addr::from((u32::from(ip) & mask) + 10))
}

/// The agent's config from the flags `skiff server` and `skiff agent` share.
pub fn config(
    node: &NodeArgs,
    node_name: String,
    data_dir: PathBuf,
    client_ca_pem: String,
    service_cidr: &str,
    cluster_cidr: &str,
) -> anyhow::Result<Config> {
    let mut config = Config::new(&node_name, data_dir);
    config.cluster_dns = vec![match node.cluster_dns {
        Some(ip) => ip,
        None => tenth_address(service_cidr)?,
    }];
    config.cluster_domain = node.cluster_domain.clone();
    config.resolv_conf = node.resolv_conf.clone();
    config.service_proxy = !node.disable_kube_proxy;
    config.dns_server = !node.disable_cluster_dns;
    config.service_cidr = Some(service_cidr.to_string());
    config.cluster_cidr = Some(cluster_cidr.to_string()).filter(|c| !c.is_empty());
    config.container_runtime_endpoint = node.container_runtime_endpoint.clone();
    config.port = node.kubelet_port;
    config.node_ip = node.node_ip;
    config.bridge = node.bridge_name.clone();
    config.overlay = node.flannel_backend;
    config.vxlan_vni = node.vxlan_vni;
    config.vxlan_port = node.vxlan_port;
    config.client_ca_pem = client_ca_pem;
    config.stop_pods_on_exit = node.stop_pods_on_exit;
    if !node.startup_timelines {
        config.timelines = None;
    }
    config.metrics = node.metrics;
    config.containerd_binary = node.containerd_binary.clone();
    config.insecure_registries = node.insecure_registry.clone();
    for spec in &node.register_with_taints {
        config.taints.extend(
            skiff_node::registration::node::parse_taints(spec)
                .map_err(|e| anyhow::anyhow!("--register-with-taints: {e}"))?,
        );
    }
    Ok(config)
}

/// This machine's hostname, the default node name.
pub fn default_node_name() -> String {
    skiff_node::registration::machine::hostname()
        .map(|h| h.to_lowercase())
        .unwrap_or_else(|| "skiff".into())
}

/// The CA in a kubeconfig (skiff signs its client certificates with it).
pub fn kubeconfig_ca(path: &Path) -> anyhow::Result<String> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
    let cluster = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .context("the kubeconfig names no cluster")?;
    if let Some(data) = &cluster.certificate_authority_data {
        use base64::Engine as _;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .context("certificate-authority-data is not base64")?;
        return String::from_utf8(pem).context("certificate-authority-data is not PEM");
    }
    if let Some(file) = &cluster.certificate_authority {
        return std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"));
    }
    anyhow::bail!("the kubeconfig has no certificate authority; pass --client-ca-file")
}

/// Where a node that joined with a token keeps its kubeconfig.
pub const JOINED_KUBECONFIG: &str = "kubelet.kubeconfig";

/// `skiff agent --server URL --token TOKEN`: the node's kubeconfig in the
/// data dir, made by joining (the kubelet's TLS bootstrap) unless an
/// earlier start made it. Nothing is written when the join fails.
async fn join(
    server: &str,
    token: &str,
    node_name: &str,
    data_dir: &Path,
) -> anyhow::Result<std::path::PathBuf> {
    let token = skiff_client::join::JoinToken::parse(token)?;
    let path = data_dir.join(JOINED_KUBECONFIG);
    match still_valid(&path, node_name) {
        Ok(()) => {
            tracing::info!(kubeconfig = %path.display(), "already joined; using the node's kubeconfig");
            return Ok(path);
        }
        Err(why) if path.exists() => {
            tracing::warn!(kubeconfig = %path.display(), "joining again: {why}");
        }
        Err(_) => {}
    }
    skiff_client::join::bootstrap(server, &token, node_name, &path).await?;
    tracing::info!(kubeconfig = %path.display(), server, "joined the cluster");
    Ok(path)
}

/// Whether a kept kubeconfig still serves: its client certificate is
/// this node's (`system:node:NAME`) and not expired (else the node joins
/// again, as the kubelet bootstraps again when its certificate is no
/// longer valid).
fn still_valid(path: &Path, node_name: &str) -> anyhow::Result<()> {
    let credential = skiff_client::certificate::kubeconfig::read(path)?
        .context("it has no client certificate")?;
    let info = skiff_client::certificate::authority::inspect(credential.cert_pem.as_bytes())?;
    anyhow::ensure!(
        info.common_name == format!("system:node:{node_name}"),
        "its certificate is {:?}'s, not this node's",
        info.common_name
    );
    anyhow::ensure!(
        info.not_after > time::OffsetDateTime::now_utc(),
        "its certificate expired at {}",
        info.not_after
    );
    Ok(())
}

/// The `host:port` of a kubeconfig's https server, for the load
/// balancer; None for a plain-http one (nothing to balance).
fn kubeconfig_server(path: &Path) -> anyhow::Result<Option<String>> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
    let server = kc
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .context("the kubeconfig names no server")?;
    if !server.starts_with("https://") {
        return Ok(None);
    }
    Ok(Some(skiff_client::loadbalancer::host_port(&server)?))
}

/// `skiff agent --kubeconfig FILE --node-name N --data-dir DIR`.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let data_dir = std::path::absolute(&args.data_dir)?;
    let node_name = args.node_name.clone().unwrap_or_else(default_node_name);
    let token = match (&args.token, &args.token_file) {
        (Some(text), _) => Some(text.clone()),
        (None, Some(file)) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file {}", file.display()))?,
        ),
        (None, None) => None,
    };
    let kubeconfig = match (&args.kubeconfig, &args.server, &token) {
        (Some(path), _, _) => path.clone(),
        (None, Some(server), Some(token)) => join(server, token, &node_name, &data_dir).await?,
        _ => anyhow::bail!("pass --kubeconfig, or --server and --token-file to join"),
    };
    // The client dials the local load balancer, which fails over between
    // the cluster's API servers (k3s's agent load balancer).
    let balancer = match kubeconfig_server(&kubeconfig)? {
        Some(server) => Some(
            skiff_client::loadbalancer::LoadBalancer::bind(&server)
                .await
                .context("the API load balancer")?,
        ),
        None => None,
    };
    let (client, rotating) = skiff_client::http::client_with_rotating_cert_at(
        &kubeconfig,
        balancer.as_ref().map(|b| b.url()).as_deref(),
    )
    .await?;
    // Stopped after the agent, which still writes while it stops.
    let balancing = CancellationToken::new();
    if let Some(balancer) = balancer {
        tracing::info!(local = %balancer.local_addr(), servers = ?balancer.servers().list(), "API load balancer");
        tokio::spawn(skiff_client::loadbalancer::follow_endpoints(
            client.clone(),
            balancer.servers(),
            balancing.clone(),
        ));
        tokio::spawn(balancer.run(balancing.clone()));
    }
    let _stop_balancing = balancing.drop_guard();
    let ca = match &args.client_ca_file {
        Some(file) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?,
        None => kubeconfig_ca(&kubeconfig)?,
    };
    let config = config(
        &args.node,
        node_name,
        data_dir,
        ca,
        &args.service_cidr,
        &args.cluster_cidr,
    )?;
    let shutdown = CancellationToken::new();
    if let Some((cert, location)) = rotating.filter(|_| args.rotate_certificates) {
        let rotation = skiff_client::certificate::rotation::Rotation::new(
            client.clone(),
            &config.node_name,
            location,
            cert,
        );
        tokio::spawn(rotation.run(shutdown.clone()));
    }
    let task = tokio::spawn(Agent::new(config, client).run(shutdown.clone()));
    let mut task = task;
    tokio::select! {
        r = crate::server::wait_for_signal() => r?,
        // The agent stopping by itself is an error worth exiting on.
        r = &mut task => return Ok(r??),
    }
    shutdown.cancel();
    task.await??;
    Ok(())
}
