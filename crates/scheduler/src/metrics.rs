//! The scheduler's metrics, with kube-scheduler's names, labels and
//! buckets: `scheduler_schedule_attempts_total{result,profile}`,
//! `scheduler_scheduling_attempt_duration_seconds{result,profile}` (the
//! algorithm and, for a scheduled pod, its binding),
//! `scheduler_pod_scheduling_sli_duration_seconds{attempts}` (from the pod
//! entering the queue to its binding) and `scheduler_pending_pods{queue}`.
//!
//! [`SchedulerMetrics`] holds them (registered in the process's registry);
//! [`Recorder`] is the scheduling loop's view: it keeps when each pod was
//! queued and when its attempt started, and records outcomes. It decides
//! nothing about scheduling.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Attempt {
    result: &'static str,
    profile: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Attempts {
    attempts: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Queue {
    queue: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn attempt_histogram() -> Histogram {
    // Upstream's ExponentialBuckets(0.001, 2, 15).
    Histogram::new(skiff_metrics::exponential_buckets(0.001, 2.0, 15))
}

fn sli_histogram() -> Histogram {
    // Upstream's ExponentialBuckets(0.01, 2, 20).
    Histogram::new(skiff_metrics::exponential_buckets(0.01, 2.0, 20))
}

/// Upstream's `attempts` label values: "1" … "14", then "15+".
const ATTEMPTS: [&str; 16] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15+",
];

fn attempts_label(attempts: u32) -> &'static str {
    ATTEMPTS.get(attempts as usize).copied().unwrap_or("15+")
}

/// The scheduler's metrics.
#[derive(Debug)]
pub struct SchedulerMetrics {
    attempts: Family<Attempt, Counter>,
    attempt_duration: Histograms<Attempt>,
    sli: Histograms<Attempts>,
    /// active, backoff, unschedulable, gated.
    pending: [Gauge; 4],
}

impl SchedulerMetrics {
    /// The scheduler's metrics, registered in `registry`.
    pub fn register(registry: &skiff_metrics::Registry) -> Arc<Self> {
        let pending_pods = Family::<Queue, Gauge>::default();
        // Resolved once: the loop sets them without a lookup.
        let pending = ["active", "backoff", "unschedulable", "gated"]
            .map(|queue| pending_pods.get_or_create_owned(&Queue { queue }));
        let m = Arc::new(SchedulerMetrics {
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(attempt_histogram as fn() -> Histogram),
            sli: Family::new_with_constructor(sli_histogram as fn() -> Histogram),
            pending,
        });
        registry.register(|r| {
            r.register_collector(skiff_metrics::exact(
                "scheduler_schedule_attempts",
                "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                m.attempts.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "scheduler_scheduling_attempt_duration_seconds",
                "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                m.attempt_duration.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "scheduler_pod_scheduling_sli_duration_seconds",
                "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
                m.sli.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "scheduler_pending_pods",
                "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
                pending_pods,
            ));
        });
        m
    }
}

/// What the scheduling loop records; does nothing without metrics.
#[derive(Debug, Default)]
pub struct Recorder {
    metrics: Option<Arc<SchedulerMetrics>>,
    profile: String,
    /// When each pending pod first entered the queue.
    queued: HashMap<String, Instant>,
    /// Pods handed to the binder: when their attempt started, and the
    /// attempts so far.
    binding: HashMap<String, (Instant, u32)>,
}

impl Recorder {
    pub fn new(metrics: Option<Arc<SchedulerMetrics>>, profile: &str) -> Self {
        Recorder {
            metrics,
            profile: profile.to_string(),
            ..Recorder::default()
        }
    }

    /// `key` was added to (or updated in) the queue.
    pub fn queued(&mut self, key: &str) {
        if self.metrics.is_some() && !self.queued.contains_key(key) {
            self.queued.insert(key.to_string(), Instant::now());
        }
    }

    /// `key` is gone, or was bound by someone else.
    pub fn forget(&mut self, key: &str) {
        if !self.binding.contains_key(key) {
            self.queued.remove(key);
        }
    }

    /// An attempt that started at `started` ended with `result`
    /// (`unschedulable` or `error`).
    pub fn failed(&mut self, key: &str, result: &'static str, started: Instant) {
        self.binding.remove(key);
        self.attempt(result, started);
    }

    /// `key`'s attempt (its `attempts`-th) found a node; binding follows.
    pub fn binding(&mut self, key: &str, started: Instant, attempts: u32) {
        if self.metrics.is_some() {
            self.binding.insert(key.to_string(), (started, attempts));
        }
    }

    /// Binding `key` failed: an error of the attempt that chose its node.
    pub fn bind_failed(&mut self, key: &str) {
        if let Some((started, _)) = self.binding.remove(key) {
            self.attempt("error", started);
        }
    }

    /// `key` was bound.
    pub fn bound(&mut self, key: &str) {
        let Some((started, attempts)) = self.binding.remove(key) else {
            return;
        };
        self.attempt("scheduled", started);
        if let (Some(m), Some(queued)) = (&self.metrics, self.queued.remove(key)) {
            m.sli
                .get_or_create(&Attempts {
                    attempts: attempts_label(attempts),
                })
                .observe(queued.elapsed().as_secs_f64());
        }
    }

    fn attempt(&self, result: &'static str, started: Instant) {
        let Some(m) = &self.metrics else {
            return;
        };
        let labels = Attempt {
            result,
            profile: self.profile.clone(),
        };
        m.attempts.get_or_create(&labels).inc();
        m.attempt_duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// The queue's sizes now.
    pub fn pending(&self, active: usize, backoff: usize, unschedulable: usize) {
        if let Some(m) = &self.metrics {
            for (gauge, n) in m.pending.iter().zip([active, backoff, unschedulable, 0]) {
                gauge.set(n as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_by_result_and_the_sli_by_attempts() {
        let registry = skiff_metrics::Registry::default();
        let mut r = Recorder::new(
            Some(SchedulerMetrics::register(&registry)),
            "default-scheduler",
        );
        r.queued("a/web");
        r.queued("a/db");
        r.failed("a/db", "unschedulable", Instant::now());
        r.binding("a/web", Instant::now(), 2);
        r.forget("a/web"); // the watch saw it bound before the binder said so
        r.bound("a/web");
        r.pending(1, 0, 3);
        let text = registry.encode();
        for line in [
            r#"scheduler_schedule_attempts_total{result="scheduled",profile="default-scheduler"} 1"#,
            r#"scheduler_schedule_attempts_total{result="unschedulable",profile="default-scheduler"} 1"#,
            r#"scheduler_scheduling_attempt_duration_seconds_count{result="scheduled",profile="default-scheduler"} 1"#,
            r#"scheduler_pod_scheduling_sli_duration_seconds_count{attempts="2"} 1"#,
            r#"scheduler_pending_pods{queue="active"} 1"#,
            r#"scheduler_pending_pods{queue="unschedulable"} 3"#,
            r#"scheduler_pending_pods{queue="gated"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert_eq!(attempts_label(20), "15+");
    }

    #[test]
    fn without_metrics_nothing_is_kept() {
        let mut r = Recorder::new(None, "default-scheduler");
        r.queued("a/web");
        r.binding("a/web", Instant::now(), 1);
        r.bound("a/web");
        assert!(r.queued.is_empty() && r.binding.is_empty());
    }
}
