//! What a [`crate::Scheduler`] is told: its name, identity, queue timings,
//! node sampling, how long volume binding may take, and leader election.
//!
//! This module owns [`Config`] and its upstream defaults. It does no I/O
//! beyond reading the host name for the default identity.

use std::time::Duration;

use crate::queue::QueueConfig;
use skiff_client::leader::LeaderElectionConfig;

/// The scheduler's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Pods with this `spec.schedulerName` are ours; also the events'
    /// source component (`default-scheduler`).
    pub scheduler_name: String,
    /// This instance's name in the Lease and in events'
    /// `reportingInstance` (default `<hostname>_<random hex>`).
    pub identity: String,
    /// `None` schedules without leader election.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Backoff and unschedulable timings.
    pub queue: QueueConfig,
    /// `percentageOfNodesToScore`; 0 = adaptive.
    pub percentage_of_nodes_to_score: u32,
    /// How long binding a pod waits for its claims to be bound
    /// (VolumeBindingArgs `bindTimeoutSeconds`; upstream 600 s, here
    /// [`crate::plugins::DEFAULT_BIND_TIMEOUT`]).
    pub bind_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            scheduler_name: "default-scheduler".into(),
            identity: default_identity(),
            leader_election: Some(LeaderElectionConfig::default()),
            queue: QueueConfig::default(),
            percentage_of_nodes_to_score: 0,
            bind_timeout: crate::plugins::DEFAULT_BIND_TIMEOUT,
        }
    }
}

pub use skiff_client::leader::default_identity;
