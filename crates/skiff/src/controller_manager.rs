//! `skiff controller-manager --kubeconfig FILE`: the controller manager
//! alone, against any API server, as kube-controller-manager runs beside
//! kube-apiserver (`skiff server` runs the same manager in-process), with
//! its metrics on its secure port (`crate::secure_port`).

use anyhow::Context as _;
use kube::config::Kubeconfig;
use tokio_util::sync::CancellationToken;

use crate::cli::ControllerManagerArgs;

/// Runs until SIGINT or SIGTERM.
pub async fn run(args: ControllerManagerArgs) -> anyhow::Result<()> {
    let mut config = args.controllers.config(&args.cluster_cidr)?;
    let client = skiff_client::http::client(&args.kubeconfig).await?;
    if !args.leader_elect {
        config.leader_election = None;
    }
    config.root_ca = match &args.root_ca_file {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read --root-ca-file {}", file.display()))?,
        ),
        None => kubeconfig_ca(&args.kubeconfig)?,
    };
    if let (Some(cert), Some(key)) = (
        &args.cluster_signing_cert_file,
        &args.cluster_signing_key_file,
    ) {
        let ca = skiff_client::certificate::authority::Authority::load(cert, key)
            .context("--cluster-signing-cert-file/--cluster-signing-key-file")?;
        config.cluster_signing = Some(std::sync::Arc::new(ca));
    }
    if let Some(file) = &args.service_account_private_key_file {
        let pem = std::fs::read_to_string(file).with_context(|| {
            format!(
                "cannot read --service-account-private-key-file {}",
                file.display()
            )
        })?;
        let signer = skiff_api::jwt::Signer::from_pem(&pem)
            .with_context(|| format!("--service-account-private-key-file {}", file.display()))?;
        config.service_account_signer = Some(std::sync::Arc::new(signer));
    }
    let shutdown = CancellationToken::new();
    if args.secure_port != 0 {
        // Its metrics on its own secure port, as kube-controller-manager's.
        let registry = skiff_metrics::Registry::with_process_metrics();
        skiff_controllers::metrics::install(&registry);
        let addr = std::net::SocketAddr::new(args.bind_address, args.secure_port);
        crate::secure_port::start(addr, client.clone(), registry, shutdown.clone()).await?;
    }
    let task = tokio::spawn(
        skiff_controllers::ControllerManager::new(config).run(client, shutdown.clone()),
    );
    crate::server::wait_for_signal().await?;
    shutdown.cancel();
    task.await??;
    Ok(())
}

/// The certificate authority of the kubeconfig's current cluster, PEM.
fn kubeconfig_ca(path: &std::path::Path) -> anyhow::Result<Option<String>> {
    use base64::Engine as _;
    let kc = Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
    let current = kc.current_context.clone().unwrap_or_default();
    let cluster = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let Some(cluster) = kc
        .clusters
        .iter()
        .find(|c| Some(&c.name) == cluster.as_ref())
        .and_then(|c| c.cluster.as_ref())
    else {
        return Ok(None);
    };
    if let Some(data) = &cluster.certificate_authority_data {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .context("the kubeconfig's certificate-authority-data is not base64")?;
        return Ok(Some(String::from_utf8_lossy(&pem).into_owned()));
    }
    match &cluster.certificate_authority {
        Some(file) => Ok(Some(std::fs::read_to_string(file).with_context(|| {
            format!("cannot read the kubeconfig's certificate-authority {file}")
        })?)),
        None => Ok(None),
    }
}
