//! The controller manager's work-queue metrics, with client-go's names
//! and buckets, one series per controller (`name`): `workqueue_depth`,
//! `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds` and `workqueue_retries_total`.
//!
//! The queue is kube-runtime's (inside each `Controller`), which tells
//! nothing of itself, so [`crate::runner`] reports what passes through
//! it: every change of a controller's primary objects is an add (and
//! starts the wait of an object not already waiting), a reconcile taking
//! an object ends its wait (one triggered by an owned or watched object,
//! or by a requeue, counts as an add that did not wait), its reconcile is
//! the work, and a failed reconcile is a retry. As client-go's metrics
//! provider, they are installed once per process ([`install`]); a
//! controller run before that (or in a test) records nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Name {
    name: &'static str,
}

type Histograms = Family<Name, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // client-go's ExponentialBuckets(10e-9, 10, 10).
    Histogram::new(skiff_metrics::exponential_buckets(10e-9, 10.0, 10))
}

/// Every controller's work-queue metrics.
#[derive(Debug)]
pub struct WorkqueueMetrics {
    depth: Family<Name, Gauge>,
    adds: Family<Name, Counter>,
    queue_duration: Histograms,
    work_duration: Histograms,
    retries: Family<Name, Counter>,
}

static INSTALLED: OnceLock<Arc<WorkqueueMetrics>> = OnceLock::new();

/// Registers the work-queue metrics in `registry` and has every
/// controller of this process record there (the first call wins).
pub fn install(registry: &skiff_metrics::Registry) {
    INSTALLED.get_or_init(|| WorkqueueMetrics::register(registry));
}

/// The queue of controller `name`, when metrics are installed.
pub fn queue(name: &'static str) -> Option<Arc<Queue>> {
    Some(Arc::new(INSTALLED.get()?.queue(name)))
}

impl WorkqueueMetrics {
    pub fn register(registry: &skiff_metrics::Registry) -> Arc<Self> {
        let m = Arc::new(WorkqueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            work_duration: Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            retries: Family::default(),
        });
        registry.register(|r| {
            r.register_collector(skiff_metrics::exact(
                "workqueue_depth",
                "[ALPHA] Current depth of workqueue",
                m.depth.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "workqueue_adds",
                "[ALPHA] Total number of adds handled by workqueue",
                m.adds.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "workqueue_queue_duration_seconds",
                "[ALPHA] How long in seconds an item stays in workqueue before being requested.",
                m.queue_duration.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "workqueue_work_duration_seconds",
                "[ALPHA] How long in seconds processing an item from workqueue takes.",
                m.work_duration.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "workqueue_retries",
                "[ALPHA] Total number of retries handled by workqueue",
                m.retries.clone(),
            ));
        });
        m
    }

    /// The series of controller `name`, resolved once.
    pub fn queue(&self, name: &'static str) -> Queue {
        let name = Name { name };
        Queue {
            depth: self.depth.get_or_create_owned(&name),
            adds: self.adds.get_or_create_owned(&name),
            queue_duration: self.queue_duration.get_or_create_owned(&name),
            work_duration: self.work_duration.get_or_create_owned(&name),
            retries: self.retries.get_or_create_owned(&name),
            waiting: Mutex::default(),
        }
    }
}

/// One controller's queue as the runner sees it.
#[derive(Debug)]
pub struct Queue {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    /// Objects added and not yet taken, and since when.
    waiting: Mutex<HashMap<String, Instant>>,
}

impl Queue {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Object `key` changed: an add.
    pub fn added(&self, key: String) {
        self.adds.inc();
        let mut waiting = self.waiting();
        waiting.entry(key).or_insert_with(Instant::now);
        self.depth.set(waiting.len() as i64);
    }

    /// Object `key` is gone: it no longer waits.
    pub fn forget(&self, key: &str) {
        let mut waiting = self.waiting();
        waiting.remove(key);
        self.depth.set(waiting.len() as i64);
    }

    /// A reconcile took `key`.
    pub fn taken(&self, key: &str) {
        let mut waiting = self.waiting();
        let waited = match waiting.remove(key) {
            Some(since) => since.elapsed(),
            None => {
                self.adds.inc();
                Duration::ZERO
            }
        };
        self.depth.set(waiting.len() as i64);
        drop(waiting);
        self.queue_duration.observe(waited.as_secs_f64());
    }

    /// A reconcile took `took`.
    pub fn done(&self, took: Duration) {
        self.work_duration.observe(took.as_secs_f64());
    }

    /// A reconcile failed: the object is retried.
    pub fn retried(&self) {
        self.retries.inc();
    }
}

/// `namespace/name` (or `name`) of an object.
pub fn key_of<K: kube::Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_waits_and_work_are_recorded_per_controller() {
        let registry = skiff_metrics::Registry::default();
        let metrics = WorkqueueMetrics::register(&registry);
        let q = metrics.queue("deployment");
        q.added("a/web".into());
        q.added("a/web".into());
        q.added("a/db".into());
        let text = registry.encode();
        assert!(
            text.contains(r#"workqueue_depth{name="deployment"} 2"#),
            "{text}"
        );
        q.taken("a/web");
        q.taken("a/other"); // triggered by an owned object: an add that did not wait
        q.done(Duration::from_millis(3));
        q.retried();
        q.forget("a/db");
        let text = registry.encode();
        for line in [
            r#"workqueue_depth{name="deployment"} 0"#,
            r#"workqueue_adds_total{name="deployment"} 4"#,
            r#"workqueue_queue_duration_seconds_count{name="deployment"} 2"#,
            r#"workqueue_work_duration_seconds_count{name="deployment"} 1"#,
            r#"workqueue_retries_total{name="deployment"} 1"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }
}
