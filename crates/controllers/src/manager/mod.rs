//! The controller manager (kube-controller-manager): holds the Lease
//! `kube-system/kube-controller-manager` and, while it does, runs every
//! enabled controller over one set of shared informers and one
//! rate-limited client. Losing the Lease stops them all (informers too);
//! winning it again starts them afresh, as upstream does.
//!
//! This module owns the list of controllers ([`CONTROLLERS`]: adding a
//! controller is its module and one line there), leader election around
//! them, and waiting for them to stop. It must not hold any controller's
//! logic.

mod config;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use skiff_client::leader::{Held, LeaderElector, LeaderError};
use tokio_util::sync::CancellationToken;

pub use config::{Config, WallClock, DEFAULT_BURST, DEFAULT_QPS};

use crate::context::Context;

/// Errors that stop the controller manager.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The leader election settings are unusable.
    #[error("leader election")]
    LeaderElection(#[source] LeaderError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How a controller is started: given the context, runs until the token
/// is cancelled.
pub type Start = fn(Context, CancellationToken) -> BoxFuture<'static, ()>;

/// One entry of [`CONTROLLERS`].
pub struct Entry {
    /// The name `--controllers` uses (upstream's).
    pub name: &'static str,
    /// Whether `*` turns it on.
    pub on_by_default: bool,
    /// The ServiceAccount in kube-system it acts as (upstream's
    /// `--use-service-account-credentials` names, which the bootstrap
    /// `system:controller:<name>` roles are bound to); `None`: the
    /// manager's own identity.
    pub service_account: Option<&'static str>,
    /// How it starts.
    pub start: Start,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("on_by_default", &self.on_by_default)
            .finish_non_exhaustive()
    }
}

/// Every controller the manager can run.
pub const CONTROLLERS: &[Entry] = &[
    Entry {
        name: "nodeipam",
        on_by_default: true,
        service_account: Some("node-controller"),
        start: crate::nodeipam::start,
    },
    Entry {
        name: "persistentvolume-binder",
        on_by_default: true,
        service_account: Some("persistent-volume-binder"),
        start: crate::persistentvolume::start,
    },
    Entry {
        name: "clusterrole-aggregation",
        on_by_default: true,
        service_account: Some("clusterrole-aggregation-controller"),
        start: crate::clusterroleaggregation::start,
    },
    Entry {
        name: "resourcequota",
        on_by_default: true,
        service_account: Some("resourcequota-controller"),
        start: crate::resourcequota::start,
    },
    Entry {
        name: "disruption",
        on_by_default: true,
        service_account: Some("disruption-controller"),
        start: crate::disruption::start,
    },
    Entry {
        name: "deployment",
        on_by_default: true,
        service_account: Some("deployment-controller"),
        start: crate::deployment::start,
    },
    Entry {
        name: "replicaset",
        on_by_default: true,
        service_account: Some("replicaset-controller"),
        start: crate::replicaset::start_replicasets,
    },
    Entry {
        name: "replicationcontroller",
        on_by_default: true,
        service_account: Some("replication-controller"),
        start: crate::replicaset::start_replication_controllers,
    },
    Entry {
        name: "statefulset",
        on_by_default: true,
        service_account: Some("statefulset-controller"),
        start: crate::statefulset::start,
    },
    Entry {
        name: "daemonset",
        on_by_default: true,
        service_account: Some("daemon-set-controller"),
        start: crate::daemonset::start,
    },
    Entry {
        name: "nodelifecycle",
        on_by_default: true,
        service_account: Some("node-controller"),
        start: crate::nodelifecycle::start,
    },
    Entry {
        name: "taint-eviction-controller",
        on_by_default: true,
        service_account: Some("node-controller"),
        start: crate::tainteviction::start,
    },
    Entry {
        name: "serviceaccount",
        on_by_default: true,
        service_account: Some("service-account-controller"),
        start: crate::serviceaccounts::start,
    },
    Entry {
        name: "serviceaccount-token",
        on_by_default: true,
        // Upstream runs it with the manager's own credentials.
        service_account: None,
        start: crate::serviceaccounttokens::start,
    },
    Entry {
        name: "root-ca-cert-publisher",
        on_by_default: true,
        service_account: Some("root-ca-cert-publisher"),
        start: crate::rootcacert::start,
    },
    Entry {
        name: "csrsigning",
        on_by_default: true,
        service_account: Some("certificate-controller"),
        start: crate::certificates::signing::start,
    },
    Entry {
        name: "csrapproving",
        on_by_default: true,
        service_account: Some("certificate-controller"),
        start: crate::certificates::approving::start,
    },
    Entry {
        name: "endpoint",
        on_by_default: true,
        service_account: Some("endpoint-controller"),
        start: crate::endpoints::start,
    },
    Entry {
        name: "endpointslice",
        on_by_default: true,
        service_account: Some("endpointslice-controller"),
        start: crate::endpointslice::start,
    },
    Entry {
        name: "service-lb-controller",
        on_by_default: true,
        service_account: Some("service-controller"),
        start: crate::servicelb::start,
    },
    Entry {
        name: "garbagecollector",
        on_by_default: true,
        service_account: Some("generic-garbage-collector"),
        start: crate::garbagecollector::start,
    },
    Entry {
        name: "podgc",
        on_by_default: true,
        service_account: Some("pod-garbage-collector"),
        start: crate::podgc::start,
    },
    Entry {
        name: "namespace",
        on_by_default: true,
        service_account: Some("namespace-controller"),
        start: crate::namespace::start,
    },
    Entry {
        name: "job",
        on_by_default: true,
        service_account: Some("job-controller"),
        start: crate::job::start,
    },
    Entry {
        name: "cronjob",
        on_by_default: true,
        service_account: Some("cronjob-controller"),
        start: crate::cronjob::start,
    },
    Entry {
        name: "horizontalpodautoscaling",
        on_by_default: true,
        service_account: Some("horizontal-pod-autoscaler"),
        start: crate::podautoscaler::start,
    },
    Entry {
        name: "tokencleaner",
        on_by_default: true,
        service_account: Some("token-cleaner"),
        start: crate::tokencleaner::start,
    },
    Entry {
        name: "ttl-after-finished",
        on_by_default: true,
        service_account: Some("ttl-after-finished-controller"),
        start: crate::ttlafterfinished::start,
    },
];

/// Makes the client a controller acts with from its ServiceAccount's
/// name (in kube-system).
pub type ClientFor = Arc<dyn Fn(&str) -> kube::Client + Send + Sync>;

/// The controller manager.
#[derive(Clone)]
pub struct ControllerManager {
    config: Arc<Config>,
    client_for: Option<ClientFor>,
}

impl std::fmt::Debug for ControllerManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerManager")
            .field("config", &self.config)
            .field("per_controller_clients", &self.client_for.is_some())
            .finish()
    }
}

impl ControllerManager {
    /// A manager with these settings.
    pub fn new(config: Config) -> Self {
        Self {
            config: Arc::new(config),
            client_for: None,
        }
    }

    /// Each controller with a ServiceAccount acts with the client
    /// `client_for` makes for it (upstream's
    /// `--use-service-account-credentials`); the shared informers, the
    /// Lease and the controllers without one use the manager's client.
    pub fn with_clients_per_controller(mut self, client_for: ClientFor) -> Self {
        self.client_for = Some(client_for);
        self
    }

    /// Runs the enabled controllers until `shutdown`; with leader
    /// election, only while holding the Lease.
    pub async fn run(self, client: kube::Client, shutdown: CancellationToken) -> Result<()> {
        let client = skiff_client::ratelimit::limit(client, self.config.qps, self.config.burst);
        let Some(le) = self.config.leader_election.clone() else {
            self.run_controllers(client, shutdown).await;
            return Ok(());
        };
        le.validate().map_err(Error::LeaderElection)?;
        let release = le.release_on_cancel;
        let mut elector = LeaderElector::new(client.clone(), le, &self.config.identity);
        loop {
            if !elector.acquire(&shutdown).await {
                return Ok(());
            }
            tracing::info!(identity = %self.config.identity, "became the controller manager's leader");
            let term = shutdown.child_token();
            let controllers = async {
                self.run_controllers(client.clone(), term.clone()).await;
                term.cancel();
            };
            let holding = async {
                let held = elector.hold(&term).await;
                term.cancel();
                held
            };
            let (held, ()) = tokio::join!(holding, controllers);
            if shutdown.is_cancelled() {
                if release {
                    if let Err(e) = elector.release().await {
                        tracing::warn!(error = %e, "releasing the lease");
                    }
                }
                return Ok(());
            }
            if held == Held::Lost {
                tracing::warn!(identity = %self.config.identity, "lost the lease; controllers stopped");
            }
        }
    }

    /// Runs every enabled controller until `term` (one term of leadership).
    async fn run_controllers(&self, client: kube::Client, term: CancellationToken) {
        let context = Context::new(client, self.config.clone(), term.clone());
        let running: Vec<_> = CONTROLLERS
            .iter()
            .filter(|c| self.config.enabled(c.name, c.on_by_default))
            .map(|c| {
                tracing::debug!(controller = c.name, "starting");
                let name = c.name;
                let mut context = context.clone();
                if let (Some(client_for), Some(sa)) = (&self.client_for, c.service_account) {
                    context.client = skiff_client::ratelimit::limit(
                        client_for(sa),
                        self.config.qps,
                        self.config.burst,
                    );
                }
                tokio::spawn((c.start)(context, term.clone()).map(move |()| name))
            })
            .collect();
        for stopped in futures::future::join_all(running).await {
            if let Err(e) = stopped {
                tracing::error!(error = %e, "a controller panicked");
            }
        }
    }
}
