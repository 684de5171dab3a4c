//! skiff-metrics: what every component's `/metrics` shares. One
//! [`Registry`] per process (the all-in-one `skiff server` registers the
//! API server's, the scheduler's and the controller manager's metrics in
//! one), written out in the Prometheus text format (version 0.0.4, as
//! upstream's components serve it) by the `prometheus-client` crate, and
//! the process metrics every upstream component exports ([`process`]).
//!
//! It owns no HTTP route and no authorization: each component serves
//! [`Registry::encode`] behind its own access rules.

use std::sync::{Arc, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};

pub mod process;

pub use prometheus_client;

/// The `Content-Type` of the text exposition (upstream's `expfmt.FmtText`).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A process's metrics, shared by the components that register into it
/// and the endpoint that writes them out.
#[derive(Clone, Default)]
pub struct Registry(Arc<RwLock<prometheus_client::registry::Registry>>);

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Registry")
    }
}

impl Registry {
    /// A registry with the process metrics of this process (read from
    /// `/proc` at each scrape).
    pub fn with_process_metrics() -> Self {
        let registry = Registry::default();
        registry.register(|r| {
            r.register_collector(Box::new(process::Collector::new(process::ProcFs)));
        });
        registry
    }

    /// Lets `f` register metrics (done once, when a component starts).
    pub fn register(&self, f: impl FnOnce(&mut prometheus_client::registry::Registry)) {
        f(&mut self.0.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// Every registered metric in the text format.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        let registry = self.0.read().unwrap_or_else(|e| e.into_inner());
        // Writing into a String does not fail (fmt::Error only comes from
        // the writer).
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
        out
    }
}

/// A metric to register (with `register_collector`) under `name` with
/// its help text exactly as given: the crate's own `register` appends a
/// full stop, and upstream's help texts have one or not.
pub fn exact(
    name: &'static str,
    help: &'static str,
    metric: impl EncodeMetric + std::fmt::Debug + Send + Sync + 'static,
) -> Box<dyn Collector> {
    Box::new(Exact { name, help, metric })
}

#[derive(Debug)]
struct Exact<M> {
    name: &'static str,
    help: &'static str,
    metric: M,
}

impl<M: EncodeMetric + std::fmt::Debug + Send + Sync + 'static> Collector for Exact<M> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let metric_type = self.metric.metric_type();
        self.metric
            .encode(encoder.encode_descriptor(self.name, self.help, None, metric_type)?)
    }
}

/// `count` buckets from `start`, each `factor` times the last (client-go's
/// `ExponentialBuckets`).
pub fn exponential_buckets(start: f64, factor: f64, count: u16) -> Vec<f64> {
    prometheus_client::metrics::histogram::exponential_buckets(start, factor, count).collect()
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn encodes_what_components_registered_in_the_text_format() {
        let registry = Registry::default();
        let requests: Counter = Counter::default();
        registry.register(|r| {
            r.register_collector(exact("demo_requests", "Requests served", requests.clone()))
        });
        requests.inc();
        let text = registry.encode();
        assert!(
            text.contains("# TYPE demo_requests_total counter\n"),
            "{text}"
        );
        assert!(text.contains("\ndemo_requests_total 1\n"), "{text}");
        assert!(
            text.contains("# HELP demo_requests_total Requests served\n"),
            "the help as given, no full stop added: {text}"
        );
        assert!(!text.contains("# EOF"), "0.0.4 has no EOF marker: {text}");
    }

    #[test]
    fn exponential_buckets_are_client_gos() {
        assert_eq!(
            exponential_buckets(0.001, 2.0, 3),
            vec![0.001, 0.002, 0.004]
        );
    }
}
