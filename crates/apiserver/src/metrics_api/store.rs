//! The scraped figures, as metrics-server's storage keeps them: the last
//! two scrapes of every node, from which usage is computed on read: CPU
//! as the rate between them (the cumulative CPU seconds' delta over the
//! time between the samples, in nanocores), memory as the last working
//! set, the window the time between the two. A node, pod or container
//! without two usable samples (new, or its counter went back: restarted)
//! is absent, as in metrics-server. Pure data: no I/O; the scraper
//! (`super::scraper`) fills it, the handlers read it.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::scrape::{Point, Scrape};

/// One node's answer and when it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// When the scrape was answered (used for samples without timestamps).
    pub at: DateTime<Utc>,
    pub scrape: Scrape,
}

/// Usage of one node, pod or container.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// The later sample's time.
    pub timestamp: DateTime<Utc>,
    /// The time between the two samples.
    pub window: Duration,
    pub cpu_nanocores: u64,
    pub memory_bytes: u64,
}

/// Usage of one pod: its containers'.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub timestamp: DateTime<Utc>,
    pub window: Duration,
    /// By container name, in name order.
    pub containers: Vec<(String, Usage)>,
}

/// Why there is no figure (never an answer's error: the object is absent).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("no CPU figure in one of the samples")]
    NoCpu,
    #[error("no working-set figure in the last sample")]
    NoMemory,
    #[error("the samples are not in time order")]
    NotLater,
    #[error("the CPU counter went back (restarted)")]
    CounterReset,
}

/// The last two samples of every node scraped.
#[derive(Debug, Default)]
pub struct Store {
    nodes: BTreeMap<String, (Option<Sample>, Sample)>,
}

fn time_of(point: &Point, at: DateTime<Utc>) -> DateTime<Utc> {
    point
        .timestamp_ms
        .and_then(DateTime::<Utc>::from_timestamp_millis)
        .unwrap_or(at)
}

/// Usage between `prev` (read at `prev_at`) and `last` (at `last_at`).
pub fn rate(
    prev: &Point,
    prev_at: DateTime<Utc>,
    last: &Point,
    last_at: DateTime<Utc>,
) -> Result<Usage, Error> {
    let (Some(before), Some(after)) = (prev.cpu_seconds, last.cpu_seconds) else {
        return Err(Error::NoCpu);
    };
    let memory = last.memory_bytes.ok_or(Error::NoMemory)?;
    let (t0, t1) = (time_of(prev, prev_at), time_of(last, last_at));
    let window = (t1 - t0).to_std().map_err(|_| Error::NotLater)?;
    if window.is_zero() {
        return Err(Error::NotLater);
    }
    if after < before {
        return Err(Error::CounterReset);
    }
    let nanocores = (after - before) / window.as_secs_f64() * 1e9;
    Ok(Usage {
        timestamp: t1,
        window,
        cpu_nanocores: nanocores.round() as u64,
        memory_bytes: memory.max(0.0).round() as u64,
    })
}

impl Store {
    /// Keeps `sample` as `node`'s last, its last as the one before.
    pub fn record(&mut self, node: &str, sample: Sample) {
        let prev = self.nodes.remove(node).map(|(_, last)| last);
        self.nodes.insert(node.to_string(), (prev, sample));
    }

    /// Forgets the nodes not in `nodes` (gone, not Ready, or not answering).
    pub fn retain(&mut self, nodes: &[String]) {
        self.nodes.retain(|n, _| nodes.contains(n));
    }

    /// Whether any node has two samples.
    pub fn has_rates(&self) -> bool {
        self.nodes.values().any(|(prev, _)| prev.is_some())
    }

    /// `node`'s usage, with two samples.
    pub fn node(&self, node: &str) -> Option<Usage> {
        let (Some(prev), last) = self.nodes.get(node)? else {
            return None;
        };
        rate(&prev.scrape.node, prev.at, &last.scrape.node, last.at).ok()
    }

    /// The nodes with usage, in name order.
    pub fn nodes(&self) -> Vec<(String, Usage)> {
        self.nodes
            .keys()
            .filter_map(|n| Some((n.clone(), self.node(n)?)))
            .collect()
    }

    /// Every pod with usage of at least one container, by (namespace,
    /// name).
    pub fn pods(&self) -> BTreeMap<(String, String), PodUsage> {
        let mut out = BTreeMap::new();
        for (prev, last) in self.nodes.values() {
            let Some(prev) = prev else { continue };
            for (key, pod) in &last.scrape.pods {
                let Some(before) = prev.scrape.pods.get(key) else {
                    continue;
                };
                let containers: Vec<(String, Usage)> = pod
                    .containers
                    .iter()
                    .filter_map(|(name, point)| {
                        let old = before.containers.get(name)?;
                        Some((name.clone(), rate(old, prev.at, point, last.at).ok()?))
                    })
                    .collect();
                let Some((_, first)) = containers.first() else {
                    continue;
                };
                let (timestamp, window) = (first.timestamp, first.window);
                out.insert(
                    key.clone(),
                    PodUsage {
                        timestamp,
                        window,
                        containers,
                    },
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_api::scrape::PodPoint;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    fn point(cpu: f64, memory: f64) -> Point {
        Point {
            cpu_seconds: Some(cpu),
            memory_bytes: Some(memory),
            timestamp_ms: None,
        }
    }

    fn sample(secs: i64, node_cpu: f64, busy_cpu: f64) -> Sample {
        let mut scrape = Scrape {
            node: point(node_cpu, 4096.0),
            ..Scrape::default()
        };
        let busy = PodPoint {
            pod: point(busy_cpu, 8192.0),
            containers: [("spin".to_string(), point(busy_cpu, 8192.0))].into(),
        };
        scrape.pods.insert(("apps".into(), "busy".into()), busy);
        Sample {
            at: at(secs),
            scrape,
        }
    }

    #[test]
    fn the_rate_is_the_counters_delta_over_the_time_between() {
        let u = rate(&point(10.0, 1.0), at(0), &point(13.0, 2048.0), at(15)).unwrap();
        assert_eq!(u.cpu_nanocores, 200_000_000);
        assert_eq!(u.memory_bytes, 2048);
        assert_eq!(u.window, Duration::from_secs(15));
        assert_eq!(u.timestamp, at(15));
        // The samples' own timestamps win over the scrape times.
        let mut a = point(1.0, 1.0);
        a.timestamp_ms = Some(at(0).timestamp_millis());
        let mut b = point(1.5, 1.0);
        b.timestamp_ms = Some(at(0).timestamp_millis() + 500);
        let u = rate(&a, at(100), &b, at(200)).unwrap();
        assert_eq!(
            (u.cpu_nanocores, u.window),
            (1_000_000_000, Duration::from_millis(500))
        );
        assert_eq!(
            rate(&point(5.0, 1.0), at(0), &point(1.0, 1.0), at(15)),
            Err(Error::CounterReset)
        );
        assert_eq!(
            rate(&point(1.0, 1.0), at(15), &point(2.0, 1.0), at(15)),
            Err(Error::NotLater)
        );
    }

    #[test]
    fn nodes_and_pods_appear_with_their_second_sample_and_keep_two() {
        let mut store = Store::default();
        store.record("n1", sample(0, 100.0, 10.0));
        assert!(store.nodes().is_empty() && store.pods().is_empty() && !store.has_rates());
        store.record("n1", sample(10, 105.0, 12.0));
        store.record("n1", sample(20, 115.0, 13.0));
        assert!(store.has_rates());
        let nodes = store.nodes();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].1.cpu_nanocores, 1_000_000_000);
        let pods = store.pods();
        let busy = &pods[&("apps".to_string(), "busy".to_string())];
        assert_eq!(busy.containers[0].0, "spin");
        assert_eq!(busy.containers[0].1.cpu_nanocores, 100_000_000);
        assert_eq!(busy.containers[0].1.memory_bytes, 8192);
        assert_eq!(busy.window, Duration::from_secs(10));
        store.retain(&[]);
        assert!(store.nodes().is_empty());
    }
}
