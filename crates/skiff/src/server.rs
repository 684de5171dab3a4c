//! `skiff server`: opens the store and runs the components on it until
//! SIGINT or SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use skiff_apiserver::{ApiServer, Config as ApiConfig};
use skiff_store::etcd::{EtcdConfig, EtcdStore};
use skiff_store::sqlite::{Config, SqliteStore};
use skiff_store::{CompactionPolicy, Compactor, Store};
use tokio_util::sync::CancellationToken;

use crate::cli::ServerArgs;

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    // Flag mistakes stop the start before anything is created.
    let mut config = args.controllers.config(&args.cluster_cidr)?;
    if args.disable_service_lb {
        config.controllers.push("-service-lb-controller".into());
    }
    let cluster_dns = match args.node.cluster_dns {
        Some(ip) => ip,
        None => crate::agent::tenth_address(&args.service_cidr)?,
    };
    let data_dir = std::path::absolute(&args.data_dir)
        .with_context(|| format!("data dir {}", args.data_dir.display()))?;
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create data dir {}", data_dir.display()))?;

    let store: Arc<dyn Store> = if args.etcd_servers.is_empty() {
        let path = data_dir.join("db").join("state.db");
        Arc::new(SqliteStore::open(&path, Config::default())?)
    } else {
        Arc::new(EtcdStore::connect(EtcdConfig::new(args.etcd_servers.clone())).await?)
    };
    let revision = store.current_revision().await?;
    // A second server of the cluster takes the first one's PKI before it
    // makes its own.
    if let Some(text) = &args.token {
        let token = skiff_client::join::JoinToken::parse(text)?;
        if let Some(server) = &args.server {
            let pem = skiff_client::join::fetch_ca(server)
                .await
                .with_context(|| format!("cannot reach the cluster's server {server}"))?;
            skiff_client::join::verify_ca(&pem, &token)
                .with_context(|| format!("the server {server} is not the token's cluster"))?;
        }
        crate::bootstrap_data::fetch(store.as_ref(), &data_dir, &token)
            .await
            .context("joining the cluster's servers")?;
        let path = data_dir.join(crate::token::FILE);
        if !path.exists() {
            skiff_client::certificate::kubeconfig::write_atomic(
                &path,
                format!("{}\n", token.text()).as_bytes(),
                true,
            )
            .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    tracing::info!(data_dir = %data_dir.display(), revision, "store ready");

    let shutdown = CancellationToken::new();
    let policy = CompactionPolicy {
        keep_for: Duration::from_secs(args.history_seconds),
        keep_revisions: args.history_revisions,
        ..CompactionPolicy::default()
    };
    let compactor = tokio::spawn(Compactor::new(store.clone(), policy).run(shutdown.clone()));

    let api = ApiServer::bind(
        ApiConfig {
            service_cidr: args.service_cidr.clone(),
            service_node_port_range: args.service_node_port_range.clone(),
            audit: args.audit.options(),
            disable_admission_plugins: args.disable_admission_plugins.clone(),
            metric_resolution: args.metric_resolution,
            metrics: args.node.metrics,
            advertise_address: args.advertise_address.or_else(|| {
                // Bound to every address: the node's (pods cannot reach
                // 127.0.0.1), as upstream picks the default interface's.
                args.bind_address
                    .is_unspecified()
                    .then(|| {
                        args.node
                            .node_ip
                            .or_else(|| skiff_node::registration::machine::node_ip().ok())
                    })
                    .flatten()
                    .filter(|ip| !ip.is_loopback())
            }),
            ..ApiConfig::new(
                data_dir.clone(),
                std::net::SocketAddr::new(args.bind_address, args.https_listen_port),
            )
        },
        store.clone(),
    )
    .await?;
    let kubeconfig = api.kubeconfig.clone();
    let addr = api.local_addr;
    // The scheduler is a client of this API server like any other, through
    // the in-process loopback (same handlers and checks, no TCP or TLS).
    let loopback = kube::Client::new(api.loopback(), "default");
    // Each component acts with its own identity and only its rights
    // (upstream's bootstrap roles), never as system:masters.
    let loopbacks = api.loopbacks();
    let client_as = {
        let loopbacks = loopbacks.clone();
        move |user: &str, groups: &[&str]| {
            kube::Client::new(loopbacks.as_user(user, groups), "default")
        }
    };
    let authorization = api.authorization_ready();
    let local_agents = api.local_agents();
    // The scheduler's and the controller manager's metrics are served
    // with the API server's on its /metrics (one registry per process);
    // none when metrics are off.
    let metrics = api.metrics_registry();
    let api = tokio::spawn(api.run(shutdown.clone()));
    if !authorization.wait(Duration::from_secs(60)).await {
        tracing::warn!("authorization not loaded after 60 s; components start anyway");
    }
    crate::default_storage_class::ensure_logged(loopback.clone()).await;
    crate::certs::autoapprove::ensure_logged(loopback.clone()).await;
    // The join token nodes join with (`<data-dir>/token`).
    let ca_pem = std::fs::read_to_string(data_dir.join("pki").join("ca.crt"))
        .context("cannot read the cluster CA")?;
    let join_token = crate::token::ensure_server_token(&loopback, &data_dir, &ca_pem)
        .await
        .context("the join token")?;
    tracing::debug!(id = %join_token.token.id, "join token ready");
    if !args.etcd_servers.is_empty() {
        // What the cluster's other servers need, for `--token`.
        crate::bootstrap_data::publish(store.as_ref(), &data_dir, &join_token)
            .await
            .context("the servers' bootstrap data")?;
    }
    tokio::spawn(crate::certs::expiration::warn_daily(
        data_dir.clone(),
        shutdown.clone(),
    ));
    if !args.node.disable_cluster_dns {
        crate::cluster_dns::ensure_logged(loopback.clone(), cluster_dns).await;
    }

    // The controller manager (node IPAM, volumes, workloads, ...), a
    // client of this API server through the loopback like the scheduler.
    let controllers = (!args.disable_controller_manager).then(|| {
        config.root_ca = std::fs::read_to_string(data_dir.join("pki").join("ca.crt")).ok();
        config.service_account_signer = std::fs::read_to_string(data_dir.join("pki/sa.key"))
            .ok()
            .and_then(|pem| skiff_api::jwt::Signer::from_pem(&pem).ok())
            .map(Arc::new);
        config.cluster_signing = crate::certs::cluster_signing(&data_dir);
        let client_for = {
            let client_as = client_as.clone();
            Arc::new(move |sa: &str| {
                client_as(
                    &format!("system:serviceaccount:kube-system:{sa}"),
                    &[
                        "system:serviceaccounts",
                        "system:serviceaccounts:kube-system",
                    ],
                )
            })
        };
        if let Some(metrics) = &metrics {
            skiff_controllers::metrics::install(metrics);
        }
        tokio::spawn(
            skiff_controllers::ControllerManager::new(config)
                .with_clients_per_controller(client_for)
                .run(
                    client_as("system:kube-controller-manager", &[]),
                    shutdown.clone(),
                ),
        )
    });

    // The node agent, a client of this API server through the loopback.
    let agent = if args.disable_agent {
        None
    } else {
        let ca = std::fs::read_to_string(data_dir.join("pki").join("ca.crt"))
            .context("cannot read the cluster CA")?;
        let name = args
            .node_name
            .clone()
            .unwrap_or_else(crate::agent::default_node_name);
        let mut config = crate::agent::config(
            &args.node,
            name,
            data_dir.join("node"),
            ca,
            &args.service_cidr,
            &args.cluster_cidr,
        )?;
        // Airgap images go in the server's data dir, as with k3s.
        config.images_dir = data_dir.join("images");
        tokio::spawn(crate::node_role::label_control_plane(
            loopback.clone(),
            config.node_name.clone(),
            shutdown.clone(),
        ));
        if args.taint_control_plane {
            config.taints.push(k8s_openapi::api::core::v1::Taint {
                key: crate::node_role::CONTROL_PLANE_LABEL.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        }
        // The API server reaches this agent through an in-process pipe.
        config.on_local_endpoint = Some(skiff_node::agent::config::LocalEndpointHook(Arc::new(
            move |node: &str, endpoint: skiff_node::server::LocalEndpoint| {
                local_agents.register(
                    node,
                    skiff_apiserver::agents::LocalAgent {
                        dial: endpoint.dial,
                        router: endpoint.router,
                        stopped: endpoint.stopped,
                    },
                )
            },
        )));
        let node_client = client_as(
            &format!("system:node:{}", config.node_name),
            &["system:nodes"],
        );
        let agent = skiff_node::agent::Agent::new(config, node_client);
        let shutdown = shutdown.clone();
        Some(tokio::spawn(async move {
            // The API keeps serving when the node cannot start (containerd
            // missing, say); the error is in the log.
            if let Err(e) = agent.run(shutdown).await {
                tracing::error!(error = %e, "the node agent stopped");
            }
        }))
    };
    let scheduler = if args.disable_scheduler {
        None
    } else {
        let client = client_as("system:kube-scheduler", &[]);
        Some(tokio::spawn(crate::scheduler::run_with(
            client,
            true,
            metrics.clone(),
            shutdown.clone(),
        )))
    };

    // One write whose failure is ignored: `eprintln!` panics when stderr
    // is gone, and writes a formatted message in pieces, so a reader that
    // quits after the first line took the server down.
    let join_address = match addr.ip() {
        ip if ip.is_unspecified() => std::net::SocketAddr::new(
            args.advertise_address
                .or(args.node.node_ip)
                .or_else(|| skiff_node::registration::machine::node_ip().ok())
                .unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
            addr.port(),
        ),
        _ => addr,
    };
    let join = format!(
        "Nodes join with (on another machine, a copy of the token file):\n  skiff agent --server https://{join_address} --token-file {}\n",
        data_dir.join(crate::token::FILE).display()
    );
    let try_it = if args.disable_agent {
        join
    } else {
        format!("Then run a pod and reach it:\n  kubectl get nodes\n  kubectl run web --image=busybox -- httpd -f -p 8080\n  kubectl wait --for=condition=Ready pod/web\n  curl http://$(kubectl get pod web -o jsonpath='{{.status.podIP}}'):8080/\n{join}")
    };
    let banner = format!(
        "skiff server is running: API on https://{addr}, store at revision {revision}, data dir {}.\n\
         Point kubectl at it with:\n  export KUBECONFIG={}\n  kubectl get namespaces\n{try_it}\
         Press Ctrl-C to stop (pods keep running; `skiff reset --data-dir {}` removes them and all state).\n",
        data_dir.display(),
        kubeconfig.display(),
        data_dir.display(),
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), banner.as_bytes());
    wait_for_signal().await?;
    tracing::info!("shutting down");
    shutdown.cancel();
    compactor.await?;
    api.await?;
    if let Some(agent) = agent {
        let _ = agent.await;
    }
    if let Some(controllers) = controllers {
        if let Ok(Err(e)) = controllers.await {
            tracing::warn!(error = %e, "the controller manager stopped with an error");
        }
    }
    if let Some(scheduler) = scheduler {
        if let Err(e) = scheduler.await? {
            tracing::warn!(error = %e, "scheduler stopped with an error");
        }
    }
    Ok(())
}

pub async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
