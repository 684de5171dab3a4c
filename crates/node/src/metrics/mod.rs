//! The agent's metrics, with the kubelet's names, labels and buckets,
//! served on its HTTPS endpoint: `GET /metrics` (pod start SLI and total
//! durations, pod worker syncs, runtime operations, image pulls, running
//! pods and containers, the process) and `GET /metrics/resource` (CPU
//! and working-set memory of the node, its pods and their containers, as
//! the kubelet's resource endpoint that metrics-server scrapes,
//! [`resource`]). Callers are judged by the endpoint's authorizer as
//! `nodes/metrics` (the server's `authz`).
//!
//! It records what the other parts report: the dispatcher (pod watch,
//! syncs, relists), the [`runtime::Metered`] wrapper around the runtime,
//! [`starts`] for when a pod has started. It decides nothing for them.

pub mod cgroups;
pub mod resource;
pub mod runtime;
pub mod starts;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use crate::runtime::Runtime;

/// Upstream's `podStartupDurationBuckets`.
const POD_START_BUCKETS: [f64; 25] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];
/// Upstream's `imagePullDurationBuckets`.
const IMAGE_PULL_BUCKETS: [f64; 18] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0, 600.0, 900.0,
    1200.0, 1800.0, 2700.0, 3600.0,
];
/// Prometheus's `DefBuckets`.
const DEFAULT_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Upstream's `imageSizeBuckets`: (lower bound in bytes, label).
const IMAGE_SIZES: [(u64, &str); 12] = [
    (0, "0-10MB"),
    (10 << 20, "10MB-100MB"),
    (100 << 20, "100MB-500MB"),
    (500 << 20, "500MB-1GB"),
    (1 << 30, "1GB-5GB"),
    (5 << 30, "5GB-10GB"),
    (10 << 30, "10GB-20GB"),
    (20 << 30, "20GB-30GB"),
    (30 << 30, "30GB-40GB"),
    (40 << 30, "40GB-60GB"),
    (60 << 30, "60GB-100GB"),
    (100 << 30, "GT100GB"),
];

/// The `image_size_in_bytes` label of an image of `size` bytes.
pub fn image_size_label(size: u64) -> &'static str {
    IMAGE_SIZES
        .iter()
        .rev()
        .find(|(lower, _)| size >= *lower)
        .map_or("0-10MB", |(_, label)| label)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OperationType {
    operation_type: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FirstWithNetwork {
    first_with_network: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ImageSize {
    image_size_in_bytes: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ContainerState {
    container_state: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn pod_start_histogram() -> Histogram {
    Histogram::new(POD_START_BUCKETS)
}
fn default_histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}
fn runtime_histogram() -> Histogram {
    // Upstream's ExponentialBuckets(.005, 2.5, 14).
    Histogram::new(skiff_metrics::exponential_buckets(0.005, 2.5, 14))
}
fn image_pull_histogram() -> Histogram {
    Histogram::new(IMAGE_PULL_BUCKETS)
}

/// What one agent records.
pub struct NodeMetrics {
    registry: skiff_metrics::Registry,
    pod_start_sli: Histograms<FirstWithNetwork>,
    pod_start_total: Histograms<FirstWithNetwork>,
    pod_worker: Histograms<OperationType>,
    runtime_duration: Histograms<OperationType>,
    runtime_total: Family<OperationType, Counter>,
    runtime_errors: Family<OperationType, Counter>,
    image_pull: Histograms<ImageSize>,
    running_pods: Gauge,
    running_containers: Family<ContainerState, Gauge>,
    starts: Mutex<starts::Tracker>,
}

impl std::fmt::Debug for NodeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeMetrics")
    }
}

impl Default for NodeMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeMetrics {
    /// The agent's metrics in a registry of their own, with the process
    /// metrics.
    pub fn new() -> Self {
        let m = NodeMetrics {
            registry: skiff_metrics::Registry::with_process_metrics(),
            pod_start_sli: Family::new_with_constructor(pod_start_histogram as fn() -> Histogram),
            pod_start_total: Family::new_with_constructor(pod_start_histogram as fn() -> Histogram),
            pod_worker: Family::new_with_constructor(default_histogram as fn() -> Histogram),
            runtime_duration: Family::new_with_constructor(runtime_histogram as fn() -> Histogram),
            runtime_total: Family::default(),
            runtime_errors: Family::default(),
            image_pull: Family::new_with_constructor(image_pull_histogram as fn() -> Histogram),
            running_pods: Gauge::default(),
            running_containers: Family::default(),
            starts: Mutex::default(),
        };
        m.registry.register(|r| {
            r.register_collector(skiff_metrics::exact(
                "kubelet_pod_start_sli_duration_seconds",
                "[ALPHA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                m.pod_start_sli.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_pod_start_total_duration_seconds",
                "[ALPHA] Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
                m.pod_start_total.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_pod_worker_duration_seconds",
                "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
                m.pod_worker.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_runtime_operations_duration_seconds",
                "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
                m.runtime_duration.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_runtime_operations",
                "[ALPHA] Cumulative number of runtime operations by operation type.",
                m.runtime_total.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_runtime_operations_errors",
                "[ALPHA] Cumulative number of runtime operation errors by operation type.",
                m.runtime_errors.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_image_pull_duration_seconds",
                "[ALPHA] Duration in seconds to pull an image.",
                m.image_pull.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_running_pods",
                "[ALPHA] Number of pods that have a running pod sandbox",
                m.running_pods.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "kubelet_running_containers",
                "[ALPHA] Number of containers currently running",
                m.running_containers.clone(),
            ));
        });
        m
    }

    pub fn registry(&self) -> &skiff_metrics::Registry {
        &self.registry
    }

    fn starts(&self) -> std::sync::MutexGuard<'_, starts::Tracker> {
        self.starts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One CRI call of `operation` took `took`.
    pub fn runtime_operation(&self, operation: &'static str, took: Duration, ok: bool) {
        let labels = OperationType {
            operation_type: operation,
        };
        self.runtime_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.runtime_total.get_or_create(&labels).inc();
        if !ok {
            self.runtime_errors.get_or_create(&labels).inc();
        }
    }

    /// An image of `size` bytes was pulled in `took`.
    pub fn image_pulled(&self, size: u64, took: Duration) {
        self.image_pull
            .get_or_create(&ImageSize {
                image_size_in_bytes: image_size_label(size),
            })
            .observe(took.as_secs_f64());
    }

    /// A pull for pod `uid` ran from `started` to `finished`.
    pub fn pulled(&self, uid: &str, started: Instant, finished: Instant) {
        self.starts().pulled(uid, started, finished);
    }

    /// The pod watch delivered `pod` (now): counts its start once all its
    /// containers run.
    pub fn pod_observed(&self, pod: &Pod) {
        let Some(start) = self.starts().observed(pod, Timestamp::now()) else {
            return;
        };
        let labels = FirstWithNetwork {
            first_with_network: if start.first_with_network {
                "true"
            } else {
                "false"
            },
        };
        self.pod_start_sli.get_or_create(&labels).observe(start.sli);
        self.pod_start_total
            .get_or_create(&labels)
            .observe(start.total);
    }

    /// The pod is gone from the API.
    pub fn pod_gone(&self, uid: &str) {
        self.starts().forget(uid);
    }

    /// One pass of a pod worker (`create`, `update`, `sync` or `kill`)
    /// took `took`.
    pub fn pod_synced(&self, operation: &'static str, took: Duration) {
        self.pod_worker
            .get_or_create(&OperationType {
                operation_type: operation,
            })
            .observe(took.as_secs_f64());
    }

    /// A relist found `sandboxes_ready` sandboxes ready and containers in
    /// these CRI states (`ContainerState` numbers).
    pub fn relisted(&self, sandboxes_ready: usize, container_states: impl Iterator<Item = i32>) {
        let mut counts = [0i64; 4];
        for state in container_states {
            if let Some(n) = usize::try_from(state).ok().and_then(|i| counts.get_mut(i)) {
                *n += 1;
            }
        }
        self.running_pods.set(sandboxes_ready as i64);
        for (state, n) in ["created", "running", "exited", "unknown"]
            .into_iter()
            .zip(counts)
        {
            self.running_containers
                .get_or_create(&ContainerState {
                    container_state: state,
                })
                .set(n);
        }
    }
}

/// What the agent's endpoint serves under `/metrics`.
#[derive(Debug)]
pub struct Endpoint {
    pub metrics: Arc<NodeMetrics>,
    /// The cgroup files `/metrics/resource` reads.
    pub cgroups: Arc<dyn cgroups::Fs>,
    pub layout: cgroups::Layout,
    /// The node's cgroup (`skiff/NODE`), when the agent keeps its pods'
    /// cgroups; without it only the node's figures are served.
    pub node_cgroup: Option<String>,
    /// The runtime, once it is up (pod and container names).
    pub runtime: OnceLock<Arc<dyn Runtime>>,
}

impl Endpoint {
    pub fn new(metrics: Arc<NodeMetrics>, node_cgroup: Option<String>) -> Self {
        Endpoint {
            metrics,
            cgroups: Arc::new(cgroups::RealFs),
            layout: cgroups::Layout::default(),
            node_cgroup,
            runtime: OnceLock::new(),
        }
    }
}

/// `/metrics` and `/metrics/resource`, for the endpoint's router.
pub fn routes<S: Clone + Send + Sync + 'static>(endpoint: Arc<Endpoint>) -> Router<S> {
    Router::new()
        .route("/metrics", get(serve))
        .route("/metrics/resource", get(serve_resource))
        .with_state(endpoint)
}

fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, skiff_metrics::CONTENT_TYPE)], body).into_response()
}

async fn serve(State(endpoint): State<Arc<Endpoint>>) -> Response {
    text(endpoint.metrics.registry().encode())
}

async fn serve_resource(State(endpoint): State<Arc<Endpoint>>) -> Response {
    let runtime = endpoint.runtime.get().cloned();
    let snapshot = resource::snapshot(
        &endpoint.layout,
        endpoint.cgroups.as_ref(),
        endpoint.node_cgroup.as_deref(),
        runtime.as_deref(),
    )
    .await;
    text(resource::encode(snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_fall_in_upstreams_buckets() {
        assert_eq!(image_size_label(0), "0-10MB");
        assert_eq!(image_size_label(4 << 20), "0-10MB");
        assert_eq!(image_size_label(10 << 20), "10MB-100MB");
        assert_eq!(image_size_label(3 << 30), "1GB-5GB");
        assert_eq!(image_size_label(200 << 30), "GT100GB");
    }

    #[test]
    fn relists_set_the_running_gauges() {
        let m = NodeMetrics::new();
        m.relisted(2, [1, 1, 2, 0, 1].into_iter());
        let text = m.registry().encode();
        for line in [
            "kubelet_running_pods 2",
            r#"kubelet_running_containers{container_state="running"} 3"#,
            r#"kubelet_running_containers{container_state="exited"} 1"#,
            r#"kubelet_running_containers{container_state="created"} 1"#,
            r#"kubelet_running_containers{container_state="unknown"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        m.relisted(0, std::iter::empty());
        assert!(m.registry().encode().contains("kubelet_running_pods 0"));
    }

    #[test]
    fn pod_syncs_and_pulls_are_timed() {
        let m = NodeMetrics::new();
        m.pod_synced("create", Duration::from_millis(30));
        m.image_pulled(5 << 20, Duration::from_secs(2));
        let text = m.registry().encode();
        assert!(
            text.contains(
                r#"kubelet_pod_worker_duration_seconds_bucket{operation_type="create",le="0.05"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"kubelet_image_pull_duration_seconds_count{image_size_in_bytes="0-10MB"} 1"#
            ),
            "{text}"
        );
    }
}
