//! [`Scheduler::run`]: leader election around the scheduling loop.
//!
//! This module owns the outer lifecycle: validate the configuration, then
//! either schedule right away (no leader election) or repeatedly acquire
//! the Lease, schedule while holding it, and stop scheduling the moment it
//! is lost (then campaign again) or shutdown is requested (then release
//! it). The work of one term is in `scheduler_loop`.

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::scheduler_loop::SchedulerLoop;
use skiff_client::leader::{Held, LeaderElectionConfig, LeaderElector, LeaderError};

/// Errors that stop the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The leader election settings are unusable.
    #[error("leader election")]
    LeaderElection(#[source] LeaderError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The scheduler control loop.
#[derive(Debug, Clone)]
pub struct Scheduler {
    config: Config,
    /// Where attempts and the queue are recorded, when metrics are on.
    metrics: Option<std::sync::Arc<crate::metrics::SchedulerMetrics>>,
    /// Whether this instance is scheduling now (holds the lease, or runs
    /// without leader election).
    leading: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
}

impl Scheduler {
    /// A scheduler with `config`.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            metrics: None,
            leading: std::sync::Arc::new(tokio::sync::watch::channel(false).0),
        }
    }

    /// Records its metrics in `registry` (the process's).
    pub fn with_metrics(mut self, registry: &skiff_metrics::Registry) -> Self {
        self.metrics = Some(crate::metrics::SchedulerMetrics::register(registry));
        self
    }

    /// Follows whether this instance is scheduling (for health reporting
    /// and tests).
    pub fn leading(&self) -> tokio::sync::watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Schedules pods until `shutdown` is cancelled. With leader election,
    /// only while holding the Lease.
    pub async fn run(self, client: kube::Client, shutdown: CancellationToken) -> Result<()> {
        match self.config.leader_election.clone() {
            None => {
                self.leading.send_replace(true);
                SchedulerLoop::new(client, &self.config, self.metrics.clone())
                    .run(shutdown)
                    .await;
                self.leading.send_replace(false);
                Ok(())
            }
            Some(le) => {
                le.validate().map_err(Error::LeaderElection)?;
                self.run_elected(client, shutdown, le).await
            }
        }
    }

    async fn run_elected(
        &self,
        client: kube::Client,
        shutdown: CancellationToken,
        le: LeaderElectionConfig,
    ) -> Result<()> {
        let release = le.release_on_cancel;
        let mut elector = LeaderElector::new(client.clone(), le, &self.config.identity);
        loop {
            if !elector.acquire(&shutdown).await {
                return Ok(());
            }
            self.leading.send_replace(true);
            let term = shutdown.child_token();
            let scheduling = async {
                SchedulerLoop::new(client.clone(), &self.config, self.metrics.clone())
                    .run(term.clone())
                    .await;
                term.cancel();
            };
            let holding = async {
                let held = elector.hold(&term).await;
                term.cancel();
                held
            };
            let (held, ()) = tokio::join!(holding, scheduling);
            self.leading.send_replace(false);
            if shutdown.is_cancelled() {
                if release {
                    if let Err(e) = elector.release().await {
                        tracing::warn!(error = %e, "releasing the lease");
                    }
                }
                return Ok(());
            }
            if held == Held::Lost {
                tracing::warn!(identity = %self.config.identity, "lost the lease; stopped scheduling");
            }
        }
    }
}
