//! `skiff sim --kubeconfig FILE --nodes N`: simulated nodes (see
//! `skiff_node::sim`) until SIGTERM or SIGINT.

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::cli::SimArgs;

/// `--cluster-dns`: an IP, or empty for none.
fn cluster_dns(value: &str) -> anyhow::Result<Vec<String>> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let ip: std::net::IpAddr = value
        .parse()
        .map_err(|_| anyhow::anyhow!("--cluster-dns {value:?}: not an IP address"))?;
    Ok(vec![ip.to_string()])
}

pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let client = crate::scheduler::client(&args.kubeconfig).await?;
    let memory = skiff_api::quantity::parse_value(&args.memory)
        .map_err(|e| anyhow::anyhow!("--memory {}: {e}", args.memory))?;
    let data_dir = std::path::absolute(&args.data_dir)?;
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let config = skiff_node::sim::Config {
        nodes: args.nodes,
        name_prefix: args.name_prefix,
        pod_start_delay: args.pod_start_delay,
        pods_per_node: args.pods_per_node,
        cpu: args.cpu,
        memory_bytes: u64::try_from(memory).unwrap_or(0),
        stop_after: args.stop_after,
        cleanup: args.cleanup,
        data_dir,
        cluster_dns: cluster_dns(&args.cluster_dns)?,
        pod_cidr_range: match args.pod_cidr_range.as_str() {
            "" => None,
            text => Some(
                skiff_node::sim::PodCidrRange::parse(text, args.nodes)
                    .map_err(|e| anyhow::anyhow!("--pod-cidr-range {e}"))?,
            ),
        },
    };
    let mut endpoints = skiff_node::sim::Endpoints::default();
    if let Some(addr) = args.admin_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("--admin-listen {addr}"))?;
        let bound = listener.local_addr()?;
        let file = config.data_dir.join("admin-address");
        std::fs::write(&file, bound.to_string())
            .with_context(|| format!("cannot write {}", file.display()))?;
        tracing::info!(%bound, "the simulator's admin endpoint listens");
        endpoints.admin = Some(listener);
    }
    let shutdown = CancellationToken::new();
    let mut task = tokio::spawn(skiff_node::sim::run(
        client,
        config,
        endpoints,
        shutdown.clone(),
    ));
    tokio::select! {
        r = crate::server::wait_for_signal() => r?,
        r = &mut task => { r?; return Ok(()); }
    }
    shutdown.cancel();
    task.await?;
    Ok(())
}
