//! `GET /metrics/resource`, the kubelet's resource metrics endpoint (what
//! metrics-server, and so `kubectl top`, scrapes): for the node, each pod
//! and each running container, CPU time (`*_cpu_usage_seconds_total`,
//! counters in core-seconds) and working-set memory
//! (`*_memory_working_set_bytes`), plus `resource_scrape_error` and its
//! older name `scrape_error` (1 when the runtime could not be listed).
//! Names, help texts and labels (`namespace`, `pod`, `container`) are
//! upstream's; samples carry no timestamps (the crate writing the text
//! format has none), so a scraper takes the time of its scrape.
//!
//! A scrape reads the pods' cgroups ([`super::cgroups`]) and names them
//! from the runtime's sandboxes and running containers; it keeps nothing
//! between scrapes and changes nothing.

use std::collections::HashMap;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::cgroups::{Fs, Layout, Usage};
use crate::runtime::{api, Runtime, POD_UID_LABEL};

/// One pod's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub namespace: String,
    pub name: String,
    pub usage: Usage,
    /// (container name, figures), running containers only.
    pub containers: Vec<(String, Usage)>,
}

/// What one scrape found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub node: Usage,
    pub pods: Vec<PodUsage>,
    /// The runtime could not be listed.
    pub error: bool,
}

/// Reads the figures of the node and of the pods in `node_cgroup`, named
/// from `runtime`.
pub async fn snapshot(
    layout: &Layout,
    fs: &dyn Fs,
    node_cgroup: Option<&str>,
    runtime: Option<&dyn Runtime>,
) -> Snapshot {
    let mut snapshot = Snapshot {
        node: layout.node(fs),
        ..Snapshot::default()
    };
    let (Some(node_cgroup), Some(runtime)) = (node_cgroup, runtime) else {
        return snapshot;
    };
    let listed = match (
        runtime.list_pod_sandboxes().await,
        runtime.list_containers().await,
    ) {
        (Ok(sandboxes), Ok(containers)) => (sandboxes, containers),
        _ => {
            snapshot.error = true;
            return snapshot;
        }
    };
    snapshot.pods = pods(layout, fs, node_cgroup, &listed.0, &listed.1);
    snapshot
}

/// The pods of `node_cgroup` that a ready sandbox names, with their
/// running containers.
pub fn pods(
    layout: &Layout,
    fs: &dyn Fs,
    node_cgroup: &str,
    sandboxes: &[api::PodSandbox],
    containers: &[api::Container],
) -> Vec<PodUsage> {
    let ready = api::PodSandboxState::SandboxReady as i32;
    let names: HashMap<&str, (&str, &str)> = sandboxes
        .iter()
        .filter(|s| s.state == ready)
        .filter_map(|s| {
            let m = s.metadata.as_ref()?;
            Some((m.uid.as_str(), (m.namespace.as_str(), m.name.as_str())))
        })
        .collect();
    let running = api::ContainerState::ContainerRunning as i32;
    // Container ID -> (pod UID, container name).
    let by_id: HashMap<&str, (&str, &str)> = containers
        .iter()
        .filter(|c| c.state == running)
        .filter_map(|c| {
            let uid = c.labels.get(POD_UID_LABEL)?;
            let name = c.metadata.as_ref()?.name.as_str();
            Some((c.id.as_str(), (uid.as_str(), name)))
        })
        .collect();
    let mut out: Vec<PodUsage> = layout
        .pods(fs, node_cgroup)
        .into_iter()
        .filter_map(|pod| {
            let (namespace, name) = names.get(pod.uid.as_str())?;
            let mut containers: Vec<(String, Usage)> = pod
                .children
                .iter()
                .filter_map(|id| {
                    let (uid, container) = by_id.get(id.as_str())?;
                    (*uid == pod.uid).then(|| {
                        let usage = layout.usage(fs, &format!("{}/{id}", pod.rel));
                        (container.to_string(), usage)
                    })
                })
                .collect();
            containers.sort_by(|a, b| a.0.cmp(&b.0));
            Some(PodUsage {
                namespace: namespace.to_string(),
                name: name.to_string(),
                usage: layout.usage(fs, &pod.rel),
                containers,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// The snapshot as a collector.
#[derive(Debug)]
struct Collector(Snapshot);

/// One family: its name, help, type and (labels, value) samples.
type Samples<'a> = Vec<(Vec<(&'static str, &'a str)>, f64)>;

fn family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    samples: Samples<'_>,
) -> Result<(), std::fmt::Error> {
    if samples.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in samples {
        let encoder = metric.encode_family(&labels)?;
        match metric_type {
            MetricType::Counter => ConstCounter::new(value).encode(encoder)?,
            _ => ConstGauge::new(value).encode(encoder)?,
        }
    }
    Ok(())
}

/// Each running container's figure `f`.
fn container_samples(s: &Snapshot, f: fn(&Usage) -> Option<f64>) -> Samples<'_> {
    s.pods
        .iter()
        .flat_map(|p| {
            p.containers.iter().filter_map(move |(c, u)| {
                Some((
                    vec![
                        ("container", c.as_str()),
                        ("namespace", p.namespace.as_str()),
                        ("pod", p.name.as_str()),
                    ],
                    f(u)?,
                ))
            })
        })
        .collect()
}

/// Each pod's figure `f`.
fn pod_samples(s: &Snapshot, f: fn(&Usage) -> Option<f64>) -> Samples<'_> {
    s.pods
        .iter()
        .filter_map(|p| {
            Some((
                vec![
                    ("namespace", p.namespace.as_str()),
                    ("pod", p.name.as_str()),
                ],
                f(&p.usage)?,
            ))
        })
        .collect()
}

/// One unlabelled sample, if there is a value.
fn node_sample(v: Option<f64>) -> Samples<'static> {
    v.map(|v| (Vec::new(), v)).into_iter().collect()
}

fn cpu(u: &Usage) -> Option<f64> {
    u.cpu_seconds
}

fn memory(u: &Usage) -> Option<f64> {
    u.working_set_bytes
}

impl prometheus_client::collector::Collector for Collector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let e = &mut encoder;
        let (counter, gauge) = (MetricType::Counter, MetricType::Gauge);
        // Encoded as counters, the CPU names get their `_total`.
        family(
            e,
            "container_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
            counter,
            container_samples(s, cpu),
        )?;
        family(
            e,
            "container_memory_working_set_bytes",
            "[STABLE] Current working set of the container in bytes",
            gauge,
            container_samples(s, memory),
        )?;
        family(
            e,
            "node_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
            counter,
            node_sample(s.node.cpu_seconds),
        )?;
        family(
            e,
            "node_memory_working_set_bytes",
            "[STABLE] Current working set of the node in bytes",
            gauge,
            node_sample(s.node.working_set_bytes),
        )?;
        family(
            e,
            "pod_cpu_usage_seconds",
            "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
            counter,
            pod_samples(s, cpu),
        )?;
        family(
            e,
            "pod_memory_working_set_bytes",
            "[STABLE] Current working set of the pod in bytes",
            gauge,
            pod_samples(s, memory),
        )?;
        let error = Some(if s.error { 1.0 } else { 0.0 });
        let help = "1 if there was an error while getting container metrics, 0 otherwise";
        family(
            e,
            "resource_scrape_error",
            &format!("[STABLE] {help}"),
            gauge,
            node_sample(error),
        )?;
        family(
            e,
            "scrape_error",
            &format!("[ALPHA] {help}"),
            gauge,
            node_sample(error),
        )
    }
}

/// The snapshot in the text format.
pub fn encode(snapshot: Snapshot) -> String {
    let registry = skiff_metrics::Registry::default();
    registry.register(|r| r.register_collector(Box::new(Collector(snapshot))));
    registry.encode()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::cgroups::FakeFs;
    use super::*;

    const POD: &str = "skiff/n1/kubepods/besteffort/podu1";
    const ID: &str = "c0ffee";

    fn fs() -> FakeFs {
        FakeFs::default()
            .with("/cg/cgroup.controllers", "cpu memory")
            .with("/cg/cpu.stat", "usage_usec 90000000\n")
            .with("/cg/memory.stat", "inactive_file 0\n")
            .with(
                "/proc/meminfo",
                "MemTotal: 2000 kB\nMemFree: 1000 kB\nInactive(file): 0 kB\n",
            )
            .with(&format!("/cg/{POD}/cpu.stat"), "usage_usec 3000000\n")
            .with(&format!("/cg/{POD}/memory.current"), "4096\n")
            .with(&format!("/cg/{POD}/{ID}/cpu.stat"), "usage_usec 2000000\n")
            .with(&format!("/cg/{POD}/{ID}/memory.current"), "2048\n")
            .with(&format!("/cg/{POD}/sandboxid/cpu.stat"), "usage_usec 1\n")
            // A pod the runtime does not name (gone): left out.
            .with("/cg/skiff/n1/kubepods/podu9/cpu.stat", "usage_usec 1\n")
    }

    fn layout() -> Layout {
        Layout {
            root: PathBuf::from("/cg"),
            meminfo: PathBuf::from("/proc/meminfo"),
        }
    }

    fn runtime_objects() -> (Vec<api::PodSandbox>, Vec<api::Container>) {
        let sandbox = api::PodSandbox {
            id: "sandboxid".into(),
            metadata: Some(api::PodSandboxMetadata {
                name: "web".into(),
                uid: "u1".into(),
                namespace: "apps".into(),
                attempt: 0,
            }),
            state: api::PodSandboxState::SandboxReady as i32,
            ..Default::default()
        };
        let container = api::Container {
            id: ID.into(),
            metadata: Some(api::ContainerMetadata {
                name: "main".into(),
                attempt: 0,
            }),
            state: api::ContainerState::ContainerRunning as i32,
            labels: [(POD_UID_LABEL.to_string(), "u1".to_string())].into(),
            ..Default::default()
        };
        (vec![sandbox], vec![container])
    }

    #[test]
    fn pods_and_containers_are_read_from_their_cgroups_and_named() {
        let (sandboxes, containers) = runtime_objects();
        let pods = pods(&layout(), &fs(), "skiff/n1", &sandboxes, &containers);
        assert_eq!(
            pods,
            vec![PodUsage {
                namespace: "apps".into(),
                name: "web".into(),
                usage: Usage {
                    cpu_seconds: Some(3.0),
                    working_set_bytes: Some(4096.0)
                },
                containers: vec![(
                    "main".into(),
                    Usage {
                        cpu_seconds: Some(2.0),
                        working_set_bytes: Some(2048.0)
                    }
                )],
            }]
        );
    }

    #[test]
    fn the_text_is_upstreams() {
        let (sandboxes, containers) = runtime_objects();
        let l = layout();
        let snapshot = Snapshot {
            node: l.node(&fs()),
            pods: pods(&l, &fs(), "skiff/n1", &sandboxes, &containers),
            error: false,
        };
        let text = encode(snapshot);
        for line in [
            "# TYPE container_cpu_usage_seconds_total counter",
            r#"container_cpu_usage_seconds_total{container="main",namespace="apps",pod="web"} 2"#,
            r#"container_memory_working_set_bytes{container="main",namespace="apps",pod="web"} 2048"#,
            "# TYPE node_cpu_usage_seconds_total counter",
            "node_cpu_usage_seconds_total 90",
            "node_memory_working_set_bytes 1024000",
            r#"pod_cpu_usage_seconds_total{namespace="apps",pod="web"} 3"#,
            r#"pod_memory_working_set_bytes{namespace="apps",pod="web"} 4096"#,
            "resource_scrape_error 0",
            "scrape_error 0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!text.contains("podu9"), "{text}");
    }

    #[tokio::test]
    async fn without_pods_only_the_node_is_served_and_errors_are_flagged() {
        let runtime = crate::runtime::fake::FakeRuntime::new();
        let s = snapshot(&layout(), &fs(), Some("skiff/n1"), Some(&runtime)).await;
        assert_eq!((s.pods.len(), s.error), (0, false));
        assert_eq!(s.node.cpu_seconds, Some(90.0));
        let text = encode(Snapshot {
            error: true,
            ..Snapshot::default()
        });
        assert!(text.contains("resource_scrape_error 1"), "{text}");
        assert!(
            !text.contains("container_cpu_usage_seconds_total"),
            "{text}"
        );
    }
}
