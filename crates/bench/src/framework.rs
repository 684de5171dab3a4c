//! `skiff-bench framework`: the scheduling algorithm alone, without any
//! I/O. A scheduler cache gets N nodes shaped like the `scheduler`
//! benchmark's; M pods are scheduled one after another (filter, score,
//! select, assume), as the scheduling loop does between watch events.
//! Prints microseconds per pod: the ceiling the algorithm sets on
//! end-to-end throughput, whatever the API server does.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;
use skiff_scheduler::cache::Cache;
use skiff_scheduler::framework::{CycleState, Framework};
use skiff_scheduler::plugins::default_registry;

use crate::stats::print_table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NODESxPODS cases.
    #[arg(long, value_delimiter = ',', default_value = "500x1000,5000x10000")]
    sizes: Vec<String>,
}

fn node(i: usize) -> anyhow::Result<Node> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("node-{i}"), "labels": {"kubernetes.io/hostname": format!("node-{i}")}},
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }))?)
}

/// A pod as the API server stores it after defaulting (the scheduler sees
/// the defaulted object).
fn pod(i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("pod-{i}"), "namespace": "sched", "uid": format!("uid-{i}")},
        "spec": {
            "containers": [{"name": "pause", "image": "registry.local/pause:3.10",
                "imagePullPolicy": "IfNotPresent",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}],
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }))?)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for size in &args.sizes {
        let (nodes, pods) = size
            .split_once('x')
            .and_then(|(n, p)| Some((n.parse::<usize>().ok()?, p.parse::<usize>().ok()?)))
            .ok_or_else(|| anyhow::anyhow!("size {size}: expected NODESxPODS"))?;
        let mut cache = Cache::new();
        for i in 0..nodes {
            cache.upsert_node(node(i)?);
        }
        let pods: Vec<Pod> = (0..pods).map(pod).collect::<anyhow::Result<_>>()?;
        let mut framework = Framework::new(default_registry());
        let start = Instant::now();
        for pod in &pods {
            let mut state = CycleState::new();
            let result = framework.schedule_one_with_state(&mut state, pod, cache.snapshot())?;
            let status = framework.run_reserve_plugins(&mut state, pod, &result.node);
            anyhow::ensure!(status.is_success(), "reserve: {}", status.message());
            cache.assume(pod.clone(), &result.node)?;
        }
        let seconds = start.elapsed().as_secs_f64();
        let per_pod = seconds * 1e6 / pods.len() as f64;
        rows.push((
            format!("{nodes} nodes, {} pods: µs per pod (one core)", pods.len()),
            format!("{per_pod:.1}"),
            format!("{:.0} pods/s", 1e6 / per_pod),
            "-".to_string(),
        ));
    }
    print_table(
        "Scheduling algorithm alone (filter, score, assume; no I/O)",
        ["metric", "skiff", "as a rate", "upstream"],
        &rows,
    );
    Ok(())
}
