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
        start: crate::nodeipam::start,
    },
    Entry {
        name: "persistentvolume-binder",
        on_by_default: true,
        start: crate::persistentvolume::start,
    },
    Entry {
        name: "clusterrole-aggregation",
        on_by_default: true,
        start: crate::clusterroleaggregation::start,
    },
    Entry {
        name: "resourcequota",
        on_by_default: true,
        start: crate::resourcequota::start,
    },
    Entry {
        name: "disruption",
        on_by_default: true,
        start: crate::disruption::start,
    },
    Entry {
        name: "deployment",
        on_by_default: true,
        start: crate::deployment::start,
    },
    Entry {
        name: "replicaset",
        on_by_default: true,
        start: crate::replicaset::start_replicasets,
    },
    Entry {
        name: "replicationcontroller",
        on_by_default: true,
        start: crate::replicaset::start_replication_controllers,
    },
    Entry {
        name: "statefulset",
        on_by_default: true,
        start: crate::statefulset::start,
    },
    Entry {
        name: "daemonset",
        on_by_default: true,
        start: crate::daemonset::start,
    },
    Entry {
        name: "nodelifecycle",
        on_by_default: true,
        start: crate::nodelifecycle::start,
    },
    Entry {
        name: "taint-eviction-controller",
        on_by_default: true,
        start: crate::tainteviction::start,
    },
    Entry {
        name: "serviceaccount",
        on_by_default: true,
        start: crate::serviceaccounts::start,
    },
    Entry {
        name: "root-ca-cert-publisher",
        on_by_default: true,
        start: crate::rootcacert::start,
    },
    Entry {
        name: "csrsigning",
        on_by_default: true,
        start: crate::certificates::signing::start,
    },
    Entry {
        name: "csrapproving",
        on_by_default: true,
        start: crate::certificates::approving::start,
    },
    Entry {
        name: "endpoint",
        on_by_default: true,
        start: crate::endpoints::start,
    },
    Entry {
        name: "endpointslice",
        on_by_default: true,
        start: crate::endpointslice::start,
    },
    Entry {
        name: "service-lb-controller",
        on_by_default: true,
        start: crate::servicelb::start,
    },
    Entry {
        name: "garbagecollector",
        on_by_default: true,
        start: crate::garbagecollector::start,
    },
    Entry {
        name: "podgc",
        on_by_default: true,
        start: crate::podgc::start,
    },
    Entry {
        name: "namespace",
        on_by_default: true,
        start: crate::namespace::start,
    },
    Entry {
        name: "job",
        on_by_default: true,
        start: crate::job::start,
    },
    Entry {
        name: "cronjob",
        on_by_default: true,
        start: crate::cronjob::start,
    },
    Entry {
        name: "ttl-after-finished",
        on_by_default: true,
        start: crate::ttlafterfinished::start,
    },
];

/// The controller manager.
#[derive(Debug, Clone)]
pub struct ControllerManager {
    config: Arc<Config>,
}

impl ControllerManager {
    /// A manager with these settings.
    pub fn new(config: Config) -> Self {
        Self {
            config: Arc::new(config),
        }
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
                tokio::spawn((c.start)(context.clone(), term.clone()).map(move |()| name))
            })
            .collect();
        for stopped in futures::future::join_all(running).await {
            if let Err(e) = stopped {
                tracing::error!(error = %e, "a controller panicked");
            }
        }
    }
}
