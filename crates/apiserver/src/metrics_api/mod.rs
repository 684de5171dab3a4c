//! metrics.k8s.io/v1beta1 served by the API server itself, as
//! metrics-server serves it for upstream (what `kubectl top` reads):
//! [`scraper`] reads every Ready node agent's `/metrics/resource` each
//! resolution ([`DEFAULT_RESOLUTION`], 15 s) and parses it ([`scrape`]);
//! [`store`] keeps the last two samples per node and computes usage (CPU
//! as the rate between them); [`handlers`] answer NodeMetrics and
//! PodMetrics (list/get); [`quantity`] writes the figures as
//! apimachinery does; [`discovery`] is what `/apis` lists of the group;
//! [`apiservice`] registers `v1beta1.metrics.k8s.io`.
//!
//! It must not write anything but that APIService, and it keeps usage
//! in memory only (lost at restart, as metrics-server's).

pub mod apiservice;
pub mod discovery;
pub mod handlers;
pub mod quantity;
pub mod scrape;
pub mod scraper;
pub mod store;

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// How often nodes are scraped by default.
pub const DEFAULT_RESOLUTION: Duration = Duration::from_secs(15);

/// The usage store and the scrape interval, shared by the scraper and
/// the handlers.
#[derive(Debug, Clone)]
pub struct MetricsApi {
    store: Arc<RwLock<store::Store>>,
    /// The time between scrapes.
    pub resolution: Duration,
}

impl MetricsApi {
    pub fn new(resolution: Duration) -> Self {
        MetricsApi {
            store: Arc::default(),
            resolution: resolution.max(Duration::from_millis(100)),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, store::Store> {
        self.store.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, store::Store> {
        self.store.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The scraper filling this store from `state`'s nodes.
    pub fn scraper(&self, state: crate::AppState) -> scraper::Scraper {
        scraper::Scraper {
            state,
            api: self.clone(),
        }
    }
}
