//! `skiff scheduler`, and the scheduler `skiff server` runs in-process:
//! both talk to an API server through a kube client like any other client.

use std::path::Path;

use skiff_scheduler::{Config, Scheduler};
use tokio_util::sync::CancellationToken;

use crate::cli::SchedulerArgs;

/// A kube client from a kubeconfig file (HTTP/2 to https servers).
pub async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    skiff_client::http::client(kubeconfig).await
}

/// Runs a scheduler until `shutdown`, recording its metrics in `metrics`
/// when given (the server's registry, served on the API server's
/// `/metrics`).
pub async fn run_with(
    client: kube::Client,
    leader_elect: bool,
    metrics: Option<skiff_metrics::Registry>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut config = Config::default();
    if !leader_elect {
        config.leader_election = None;
    }
    let mut scheduler = Scheduler::new(config);
    if let Some(registry) = &metrics {
        scheduler = scheduler.with_metrics(registry);
    }
    scheduler.run(client, shutdown).await?;
    Ok(())
}

/// `skiff scheduler --kubeconfig FILE`: its metrics on its own secure
/// port (`crate::secure_port`), as kube-scheduler's.
pub async fn run(args: SchedulerArgs) -> anyhow::Result<()> {
    let client = client(&args.kubeconfig).await?;
    let shutdown = CancellationToken::new();
    let metrics = (args.secure_port != 0).then(skiff_metrics::Registry::with_process_metrics);
    if let Some(registry) = &metrics {
        let addr = std::net::SocketAddr::new(args.bind_address, args.secure_port);
        crate::secure_port::start(addr, client.clone(), registry.clone(), shutdown.clone()).await?;
    }
    let task = tokio::spawn(run_with(
        client,
        args.leader_elect,
        metrics,
        shutdown.clone(),
    ));
    crate::server::wait_for_signal().await?;
    shutdown.cancel();
    task.await?
}
