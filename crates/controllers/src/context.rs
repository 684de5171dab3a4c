//! What every controller is given: the (rate-limited) client, the shared
//! informers of this term of leadership, the manager's settings, and a
//! way to make an event recorder under the controller's own name.
//!
//! This module owns only the bundle; each controller keeps its own state
//! (expectations, queues) itself.

use std::sync::Arc;

use kube::Client;
use skiff_client::informer::Informers;
use skiff_client::recorder::Recorder;

use crate::manager::Config;

/// Shared by the controllers of one controller manager; cheap to clone.
#[derive(Clone)]
pub struct Context {
    /// Every read and write goes through this client.
    pub client: Client,
    /// Each kind is watched once, whoever reads it.
    pub informers: Informers,
    /// The manager's settings.
    pub config: Arc<Config>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context over `client`, whose informers stop with `shutdown`.
    pub fn new(
        client: Client,
        config: Arc<Config>,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Self {
        Self {
            informers: Informers::new(client.clone(), shutdown),
            client,
            config,
        }
    }

    /// An event recorder reporting as `component` (upstream's names:
    /// `replicaset-controller`, `deployment-controller`, ...).
    pub fn recorder(&self, component: &str) -> Recorder {
        Recorder::new(self.client.clone(), component, &self.config.identity)
    }
}
