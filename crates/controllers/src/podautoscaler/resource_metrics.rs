//! Reading metrics.k8s.io/v1beta1 PodMetrics as upstream's resource
//! metrics client does: a list in the namespace with the target's label
//! selector; a pod's value is the sum over its containers (a pod missing
//! the resource in any container, or without containers, has none), or
//! one container's for a ContainerResource metric; the timestamp is the
//! first item's.
//!
//! This module owns that read and the parsing of the answer (pure, in
//! [`parse`]); it decides nothing.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::replicas::{PodMetric, PodMetrics};

/// Why no samples (upstream's wording).
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The list failed.
    #[error("unable to fetch metrics from resource metrics API: {0}")]
    Fetch(String),
    /// It was empty.
    #[error("no metrics returned from resource metrics API")]
    Empty,
    /// A ContainerResource metric's container is not in a pod's sample.
    #[error("failed to get container metrics: container {container} not present in metrics for pod {namespace}/{pod}")]
    NoContainer {
        /// The container.
        container: String,
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
    },
}

#[derive(Debug, Default, Deserialize)]
struct Item {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    window: Option<String>,
    #[serde(default)]
    containers: Vec<Container>,
}

#[derive(Debug, Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Debug, Default, Deserialize)]
struct Container {
    #[serde(default)]
    name: String,
    #[serde(default)]
    usage: std::collections::BTreeMap<String, String>,
}

fn api_resource() -> ApiResource {
    ApiResource {
        group: "metrics.k8s.io".into(),
        version: "v1beta1".into(),
        api_version: "metrics.k8s.io/v1beta1".into(),
        kind: "PodMetrics".into(),
        plural: "pods".into(),
    }
}

/// The samples of `resource` of the pods `selector` (a label selector
/// string) picks in `namespace`, and the first one's time.
pub async fn fetch(
    client: &Client,
    namespace: &str,
    selector: &str,
    resource: &str,
    container: Option<&str>,
) -> Result<(PodMetrics, Timestamp), MetricsError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &api_resource());
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| MetricsError::Fetch(super::api_message(&e)))?;
    let items: Vec<serde_json::Value> = list
        .items
        .into_iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    parse(&items, resource, container)
}

/// Upstream's `getPodMetrics` / `getContainerMetrics` over the list's
/// items.
pub fn parse(
    items: &[serde_json::Value],
    resource: &str,
    container: Option<&str>,
) -> Result<(PodMetrics, Timestamp), MetricsError> {
    let items: Vec<Item> = items
        .iter()
        .map(|v| {
            Item::deserialize(v).unwrap_or_else(|e| {
                tracing::debug!(error = %e, "an unreadable PodMetrics item");
                Item::default()
            })
        })
        .collect();
    let Some(first) = items.first() else {
        return Err(MetricsError::Empty);
    };
    let first_at = time(first);
    let mut out = PodMetrics::new();
    for item in &items {
        let timestamp = time(item);
        let window = item
            .window
            .as_deref()
            .and_then(go_duration)
            .unwrap_or(Duration::from_secs(60));
        let value = match container {
            Some(want) => {
                let Some(c) = item.containers.iter().find(|c| c.name == want) else {
                    return Err(MetricsError::NoContainer {
                        container: want.to_string(),
                        namespace: item.metadata.namespace.clone(),
                        pod: item.metadata.name.clone(),
                    });
                };
                c.usage.get(resource).and_then(|q| milli(q))
            }
            None if item.containers.is_empty() => None,
            None => item
                .containers
                .iter()
                .map(|c| c.usage.get(resource).and_then(|q| milli(q)))
                .sum::<Option<i64>>(),
        };
        if let Some(value) = value {
            out.insert(
                item.metadata.name.clone(),
                PodMetric {
                    timestamp,
                    window,
                    value,
                },
            );
        }
    }
    Ok((out, first_at))
}

fn time(item: &Item) -> Timestamp {
    item.timestamp
        .as_deref()
        .and_then(|t| t.parse().ok())
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A quantity in milli-units, rounded up as apimachinery's
/// `MilliValue()` (metrics.k8s.io writes CPU in nano units).
fn milli(q: &str) -> Option<i64> {
    skiff_api::quantity::parse_milli(q).ok()
}

/// A Go duration (`15.003s`, `1m0s`, `500ms`).
pub fn go_duration(s: &str) -> Option<Duration> {
    let mut rest = s;
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(n);
        let value: f64 = number.parse().ok()?;
        let u = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(name: &str, containers: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": "default"},
            "timestamp": "2026-01-01T00:00:00Z", "window": "15.003s",
            "containers": containers})
    }

    #[test]
    fn pods_sum_their_containers_and_lack_a_missing_one() {
        let items = [
            item(
                "a",
                json!([{"name": "x", "usage": {"cpu": "250m", "memory": "1Mi"}},
                {"name": "y", "usage": {"cpu": "123456n", "memory": "1Mi"}}]),
            ),
            item("b", json!([{"name": "x", "usage": {"memory": "1Mi"}}])),
            item("c", json!([])),
        ];
        let (m, at) = parse(&items, "cpu", None).unwrap();
        assert_eq!(m.len(), 1);
        let a = m["a"];
        // 123456n is 0.12m, rounded up.
        assert_eq!(a.value, 250 + 1);
        assert_eq!(a.window, Duration::from_millis(15_003));
        assert_eq!(at, "2026-01-01T00:00:00Z".parse().unwrap());
    }

    #[test]
    fn one_container_and_upstreams_errors() {
        let items = [item("a", json!([{"name": "x", "usage": {"cpu": "1"}}]))];
        assert_eq!(parse(&items, "cpu", Some("x")).unwrap().0["a"].value, 1000);
        assert_eq!(
            parse(&items, "cpu", Some("z")).unwrap_err().to_string(),
            "failed to get container metrics: container z not present in metrics for pod default/a"
        );
        assert_eq!(
            parse(&[], "cpu", None).unwrap_err().to_string(),
            "no metrics returned from resource metrics API"
        );
    }

    #[test]
    fn nano_and_micro_quantities_round_up_to_milli() {
        assert_eq!(milli("98765432n"), Some(99));
        assert_eq!(milli("1000000n"), Some(1));
        assert_eq!(milli("1500u"), Some(2));
        assert_eq!(milli("0"), Some(0));
        assert_eq!(milli("2"), Some(2000));
        assert_eq!(milli("x"), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(
            go_duration("1h2m3.5s"),
            Some(Duration::from_millis(3_723_500))
        );
        assert_eq!(go_duration("12"), None);
    }
}
