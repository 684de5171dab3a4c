//! The relist (upstream's PLEG): every second the runtime's sandboxes and
//! containers are listed and fingerprinted per pod UID, so that the
//! dispatcher wakes the workers of pods whose runtime objects changed; a
//! runtime that reports its changes ([`Runtime::generation`], as the fake
//! does) is relisted only after one, or every five minutes (the evented
//! PLEG). It also finds the log dirs of pods nobody knows any more.
//!
//! It only reads the runtime and sends what it found; it starts, stops
//! and tells nothing itself.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::pod_worker::sync::Fingerprint;
use crate::runtime::Runtime;

/// What one relist found: the fingerprints, the (pod UID, container
/// name) of every running container, and when the relist began.
pub(super) type Found = (Fingerprints, HashSet<(String, String)>, std::time::Instant);

/// Spawns the relist task; it sends what each relist finds until
/// `shutdown` or until the receiver is dropped.
pub(super) fn spawn(
    runtime: Arc<dyn Runtime>,
    shutdown: tokio_util::sync::CancellationToken,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::Receiver<Found>,
) {
    let (relist_tx, relists) = tokio::sync::mpsc::channel(1);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(RELIST_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut listed: Option<(u64, tokio::time::Instant)> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            // Read before the relist, so a change during it is seen
            // by the next one.
            let generation = runtime.generation();
            if let (Some(g), Some((last, at))) = (generation, listed) {
                if g == last && at.elapsed() < EVENTED_RELIST_PERIOD {
                    continue;
                }
            }
            let began = std::time::Instant::now();
            match relist_fingerprints(runtime.as_ref()).await {
                Ok((fingerprints, running)) => {
                    let found = (fingerprints, running, began);
                    listed = generation.map(|g| (g, tokio::time::Instant::now()));
                    if relist_tx.send(found).await.is_err() {
                        return;
                    }
                }
                Err(e) => tracing::debug!(error = %e, "relist failed"),
            }
        }
    });
    (task, relists)
}

/// How often the runtime is relisted (upstream's PLEG relist period).
const RELIST_PERIOD: Duration = Duration::from_secs(1);

/// How often a runtime that reports its changes ([`Runtime::generation`])
/// is relisted when nothing changed (upstream's evented PLEG period).
const EVENTED_RELIST_PERIOD: Duration = Duration::from_secs(300);

/// How often pod log dirs nobody knows are looked for, at a relist.
pub(super) const LOG_SWEEP_PERIOD: Duration = Duration::from_secs(30);

/// Per pod UID, its sandboxes' and containers' (ID, state): what changes
/// when something happens in the runtime.
async fn relist_fingerprints(
    runtime: &dyn Runtime,
) -> crate::runtime::Result<(Fingerprints, HashSet<(String, String)>)> {
    let mut out: Fingerprints = BTreeMap::new();
    let mut running = HashSet::new();
    let listed = runtime.relist().await?;
    for s in listed.sandboxes {
        if let Some(uid) = s.pod_uid {
            out.entry(uid).or_default().push((s.id, s.state));
        }
    }
    for c in listed.containers {
        if let Some(uid) = c.pod_uid {
            if c.state == crate::runtime::api::ContainerState::ContainerRunning as i32 {
                if let Some(name) = c.container_name {
                    running.insert((uid.clone(), name));
                }
            }
            out.entry(uid).or_default().push((c.id, c.state + 10));
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    Ok((out, running))
}

/// Per pod UID, its [`Fingerprint`] (the pod workers read theirs in the
/// same form).
pub(super) type Fingerprints = BTreeMap<String, Fingerprint>;

/// For `kubelet_running_pods` and `kubelet_running_containers`: how many
/// pods have a ready sandbox, and each container's CRI state.
pub(super) fn runtime_counts(found: &Fingerprints) -> (usize, Vec<i32>) {
    let ready = crate::runtime::api::PodSandboxState::SandboxReady as i32;
    let pods = found
        .values()
        .filter(|objects| objects.iter().any(|(_, state)| *state == ready))
        .count();
    let containers = found
        .values()
        .flatten()
        .filter_map(|(_, state)| state.checked_sub(10).filter(|s| *s >= 0))
        .collect();
    (pods, containers)
}

/// Removes pod log dirs (`<ns>_<name>_<uid>`) of pods that neither the
/// API nor the runtime has any more (deleted while the agent was away).
pub(super) fn remove_stale_log_dirs(log_root: &std::path::Path, known: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(log_root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((_, uid)) = name.rsplit_once('_') else {
            continue;
        };
        if !known(uid) {
            tracing::info!(dir = %e.path().display(), "removing the logs of a pod that is gone");
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatcher drops a relist's wake-up when the worker read the
    /// same: both must fingerprint a pod alike.
    #[tokio::test]
    async fn a_workers_read_fingerprints_its_pod_as_the_relist_does() {
        use crate::pod_worker::config::{container_config, sandbox_config};
        let runtime = crate::runtime::fake::FakeRuntime::new();
        runtime.add_image("busybox:1", 1);
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}
        }))
        .unwrap();
        let sandbox = sandbox_config(&pod, 0, std::path::Path::new("/logs"), "cluster.local");
        let id = runtime
            .run_pod_sandbox(sandbox.clone(), String::new())
            .await
            .unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let container = runtime
            .create_container(&id, container_config(&pod, c, 0, "busybox:1"), sandbox)
            .await
            .unwrap();
        runtime.start_container(&container).await.unwrap();
        let (relisted, running) = relist_fingerprints(&runtime).await.unwrap();
        let (_, read) = crate::pod_worker::sync::observe_known(&runtime, "u1", &Default::default())
            .await
            .unwrap();
        assert_eq!(read.len(), 2, "{read:?}");
        assert_eq!(relisted.get("u1"), Some(&read));
        assert!(running.contains(&("u1".to_string(), "c".to_string())));
    }

    #[test]
    fn running_pods_have_a_ready_sandbox_and_containers_keep_their_state() {
        let found: Fingerprints = BTreeMap::from([
            // Ready sandbox (0), a running (1) and an exited (2) container.
            (
                "a".to_string(),
                vec![("s1".into(), 0), ("c1".into(), 11), ("c2".into(), 12)],
            ),
            // Sandbox not ready (1), a created container (0).
            ("b".to_string(), vec![("s2".into(), 1), ("c3".into(), 10)]),
        ]);
        let (pods, mut states) = runtime_counts(&found);
        states.sort();
        assert_eq!((pods, states), (1, vec![0, 1, 2]));
    }
}
