//! The API server's metrics, with upstream's names, labels and buckets:
//! `apiserver_request_total` and `apiserver_request_duration_seconds`
//! (recorded by the request filters for every request that passed
//! authentication and authorization, labelled by [`labels`]),
//! `apiserver_watch_events_total` (counted by the watch handler per event
//! sent), `apiserver_storage_objects` (read from the watch caches at each
//! scrape, [`storage`]) and the process metrics; and `GET /metrics`, which
//! writes them out (authorized like any non-resource URL: upstream's
//! `system:monitoring` role grants it).
//!
//! The registry is the process's: `skiff server` registers its
//! scheduler's and controller manager's metrics in it too
//! ([`ApiMetrics::registry`]). This module records and writes figures; it
//! decides nothing about a request.
//!
//! Metrics off (`Config::metrics`, `skiff server --metrics=false`): the
//! server has no [`ApiMetrics`] at all (`AppState::metrics` is none), so
//! the request filters and the watch handler record nothing, and
//! `/metrics` is not routed (404, as any unknown path).

pub mod labels;
pub mod storage;

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::catalog::{Catalog, Resource};
use crate::watchcache::Caches;
pub use labels::{CodeLabel, RequestLabels};

/// Upstream's `apiserver_request_duration_seconds` buckets.
pub const REQUEST_DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// The labels of `apiserver_watch_events_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WatchLabels {
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
}

type Durations = Family<RequestLabels, Histogram, fn() -> Histogram>;

/// What the API server records.
#[derive(Clone)]
pub struct ApiMetrics {
    registry: skiff_metrics::Registry,
    catalog: Arc<Catalog>,
    requests: Family<(RequestLabels, CodeLabel), Counter>,
    durations: Durations,
    watch_events: Family<WatchLabels, Counter>,
}

impl std::fmt::Debug for ApiMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiMetrics")
    }
}

fn request_histogram() -> Histogram {
    Histogram::new(REQUEST_DURATION_BUCKETS)
}

impl ApiMetrics {
    /// The metrics of a server whose kinds are `catalog` and whose
    /// objects are in `caches`, in a new registry with the process
    /// metrics.
    pub fn new(catalog: Arc<Catalog>, caches: Arc<Caches>) -> Self {
        let metrics = ApiMetrics {
            registry: skiff_metrics::Registry::with_process_metrics(),
            catalog: catalog.clone(),
            requests: Family::default(),
            durations: Family::new_with_constructor(request_histogram as fn() -> Histogram),
            watch_events: Family::default(),
        };
        metrics.registry.register(|r| {
            r.register_collector(skiff_metrics::exact(
                "apiserver_request",
                "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
                metrics.requests.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "apiserver_request_duration_seconds",
                "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
                metrics.durations.clone(),
            ));
            r.register_collector(skiff_metrics::exact(
                "apiserver_watch_events",
                "[ALPHA] Number of events sent in watch clients",
                metrics.watch_events.clone(),
            ));
            r.register_collector(Box::new(storage::StorageObjects::new(catalog, caches)));
        });
        metrics
    }

    /// The process's registry (for components of `skiff server` that
    /// serve their metrics here).
    pub fn registry(&self) -> &skiff_metrics::Registry {
        &self.registry
    }

    /// The labels `req` will be counted under, if it is counted; read
    /// before the request is handed on.
    pub fn classify(&self, req: &Request) -> Option<RequestLabels> {
        let content_type = (*req.method() == Method::PATCH)
            .then(|| req.headers().get(header::CONTENT_TYPE))
            .flatten()
            .map(|v| v.as_bytes());
        labels::of_request(
            &self.catalog,
            req.method(),
            req.uri().path(),
            req.uri().query(),
            content_type,
        )
    }

    /// Counts a request received at `started` and answered with
    /// `response`. A watch is counted when its stream ends (the body is
    /// dropped), as upstream counts it when its handler returns.
    pub fn observe(&self, labels: RequestLabels, started: Instant, response: Response) -> Response {
        let code = CodeLabel {
            code: response.status().as_u16(),
        };
        if labels.verb != "WATCH" {
            self.record(labels, code, started);
            return response;
        }
        let (parts, body) = response.into_parts();
        let done = Recorded {
            metrics: self.clone(),
            labels,
            code,
            started,
        };
        let stream = body.into_data_stream().map(move |chunk| {
            let _ = &done;
            chunk
        });
        Response::from_parts(parts, Body::from_stream(stream))
    }

    fn record(&self, labels: RequestLabels, code: CodeLabel, started: Instant) {
        self.requests.get_or_create(&(labels, code)).inc();
        self.durations
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// The counter of events sent to watchers of `resource` (looked up
    /// once per watch; each event is then one atomic increment).
    pub fn watch_events(&self, resource: &Resource) -> Counter {
        self.watch_events.get_or_create_owned(&WatchLabels {
            group: resource.group,
            version: resource.version,
            resource: resource.plural,
        })
    }
}

/// Records a watch when its response body is dropped.
struct Recorded {
    metrics: ApiMetrics,
    labels: RequestLabels,
    code: CodeLabel,
    started: Instant,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        self.metrics.record(self.labels, self.code, self.started);
    }
}

/// Counts each line `to_line` produces on `events` (the watch handler's
/// event-to-line function, wrapped); with no counter (metrics off) it
/// only passes the lines on.
pub fn counting<E>(
    to_line: impl Fn(E) -> Option<bytes::Bytes> + Clone,
    events: Option<Counter>,
) -> impl Fn(E) -> Option<bytes::Bytes> + Clone {
    move |e| {
        let line = to_line(e);
        if let (Some(events), Some(_)) = (&events, &line) {
            events.inc();
        }
        line
    }
}

impl ApiMetrics {
    /// The answer to `GET /metrics`: every metric of the process's
    /// registry.
    pub fn response(&self) -> Response {
        (
            [(header::CONTENT_TYPE, skiff_metrics::CONTENT_TYPE)],
            self.registry.encode(),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> ApiMetrics {
        let catalog = Arc::new(Catalog::new(
            crate::resources::KINDS,
            Arc::new(crate::catalog::NoCustomKinds),
        ));
        let caches = Arc::new(Caches::new(
            ["pods"],
            crate::watchcache::FieldsOf(Arc::new(|_: &str| -> &'static [&'static str] { &[] })),
        ));
        ApiMetrics::new(catalog, caches)
    }

    fn request(method: Method, uri: &str) -> Request {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .unwrap()
    }

    #[tokio::test]
    async fn requests_are_counted_with_their_code_and_timed() {
        let m = metrics();
        for (uri, status) in [
            ("/api/v1/namespaces/a/pods", 200),
            ("/api/v1/namespaces/a/pods", 200),
            ("/api/v1/namespaces/a/pods/web", 404),
        ] {
            let req = request(Method::GET, uri);
            let labels = m.classify(&req).unwrap();
            let response = axum::http::Response::builder()
                .status(status)
                .body(Body::empty())
                .unwrap();
            m.observe(labels, Instant::now(), response);
        }
        let text = m.registry().encode();
        assert!(
            text.contains("# TYPE apiserver_request_total counter"),
            "{text}"
        );
        let list = r#"apiserver_request_total{verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",code="200"} 2"#;
        assert!(text.contains(list), "{text}");
        assert!(
            text.contains(r#"verb="GET""#) && text.contains(r#"code="404"} 1"#),
            "{text}"
        );
        let bucket = r#"apiserver_request_duration_seconds_bucket{verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",le="0.005"} 2"#;
        assert!(text.contains(bucket), "{text}");
        assert!(text.contains("process_resident_memory_bytes"), "{text}");
        assert!(m
            .classify(&request(Method::GET, "/api/v1/widgets"))
            .is_none());
    }

    #[tokio::test]
    async fn a_watch_is_counted_when_its_stream_ends() {
        let m = metrics();
        let req = request(Method::GET, "/api/v1/pods?watch=1");
        let labels = m.classify(&req).unwrap();
        let response = m.observe(labels, Instant::now(), Response::new(Body::from("x")));
        assert!(!m.registry().encode().contains(r#"verb="WATCH""#));
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"x");
        let text = m.registry().encode();
        assert!(
            text.contains(r#"apiserver_request_total{verb="WATCH""#),
            "{text}"
        );
    }

    #[test]
    fn watch_events_are_counted_per_resource() {
        let m = metrics();
        let pods = crate::resources::builtin().find("", "v1", "pods").unwrap();
        let count = counting(
            |n: u32| (n > 0).then(|| bytes::Bytes::from("l")),
            Some(m.watch_events(pods)),
        );
        assert!(count(1).is_some() && count(0).is_none() && count(2).is_some());
        let text = m.registry().encode();
        let line = r#"apiserver_watch_events_total{group="",version="v1",resource="pods"} 2"#;
        assert!(text.contains(line), "{text}");
    }

    #[test]
    fn with_metrics_off_watch_lines_pass_uncounted() {
        let count = counting(|n: u32| (n > 0).then(|| bytes::Bytes::from("l")), None);
        assert_eq!(count(1).as_deref(), Some(&b"l"[..]));
        assert!(count(0).is_none());
    }
}
