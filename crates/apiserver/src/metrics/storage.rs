//! `apiserver_storage_objects{resource}`: how many objects of each
//! resource are stored, counted in the watch caches (which hold every
//! stored object) at each scrape, so writes pay nothing for it. The
//! resource is named as upstream names it (`pods`, `deployments.apps`,
//! `widgets.example.com`). A cache that has not loaded yet is left out.
//! This module only reads the caches.

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::catalog::Catalog;
use crate::watchcache::Caches;

/// The collector registered with the API server's metrics.
#[derive(Debug)]
pub struct StorageObjects {
    catalog: Arc<Catalog>,
    caches: Arc<Caches>,
}

impl StorageObjects {
    pub fn new(catalog: Arc<Catalog>, caches: Arc<Caches>) -> Self {
        StorageObjects { catalog, caches }
    }
}

/// Upstream's resource name of a cache's storage name: the first built-in
/// resource stored there (`group.plural` when it has a group), or a
/// custom resource's `group/plural` turned round.
pub fn resource_name(catalog: &Catalog, storage: &str) -> String {
    if let Some((group, plural)) = storage.split_once('/') {
        return format!("{plural}.{group}");
    }
    match catalog.builtin().iter().find(|r| r.storage == storage) {
        Some(r) => r.qualified(),
        None => storage.to_string(),
    }
}

impl prometheus_client::collector::Collector for StorageObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut counts: Vec<(String, usize)> = self
            .caches
            .object_counts()
            .into_iter()
            .map(|(storage, n)| (resource_name(&self.catalog, &storage), n))
            .collect();
        counts.sort();
        let mut family = encoder.encode_descriptor(
            "apiserver_storage_objects",
            "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            None,
            MetricType::Gauge,
        )?;
        for (resource, n) in counts {
            let labels = [("resource", resource.as_str())];
            ConstGauge::new(n as i64).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_names_become_upstreams_resource_names() {
        let catalog = crate::resources::builtin();
        assert_eq!(resource_name(catalog, "pods"), "pods");
        assert_eq!(resource_name(catalog, "deployments"), "deployments.apps");
        assert_eq!(
            resource_name(catalog, "example.com/widgets"),
            "widgets.example.com"
        );
    }
}
