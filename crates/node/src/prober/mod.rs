//! Container probes (upstream's prober manager): one task per probe of
//! each running container, on its own timer (initialDelaySeconds, then
//! every periodSeconds, each try bounded by timeoutSeconds), counting
//! consecutive results against successThreshold and failureThreshold.
//! The startup probe gates the others.
//!
//! One try is [`handlers`]: exec (CRI ExecSync), tcpSocket, httpGet over
//! HTTP or HTTPS ([`http`]: kubelet headers, same-host redirects, no
//! certificate verification) and gRPC health checks ([`grpc`]), each on a
//! fresh connection closed after the try.
//!
//! Results are read by the pod worker (ready, started, failed liveness or
//! startup) and a change wakes it. Failures are reported as Unhealthy
//! events and warnings (a redirect to another host) as ProbeWarning
//! events, in upstream's words; a warning counts as a success. It never
//! stops or restarts a container itself: the worker does, from the
//! results, with the probe's terminationGracePeriodSeconds.

mod dial;
mod grpc;
pub(crate) mod handlers;
mod http;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use tokio::sync::Notify;

use crate::events::{EventType, Events};
use crate::runtime::Runtime;

/// What one try found (upstream's probe.Result, without Unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// A success to report as a ProbeWarning event.
    Warning(String),
    /// The Unhealthy event's text.
    Failure(String),
}

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }

    fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            Kind::Startup => c.startup_probe.as_ref(),
            Kind::Liveness => c.liveness_probe.as_ref(),
            Kind::Readiness => c.readiness_probe.as_ref(),
        }
    }
}

/// One probe's verdict so far (`None` until its thresholds decide), and
/// when it was reached.
type Results = Arc<Mutex<HashMap<(String, Kind), (bool, Instant)>>>;

/// The probes of one pod's containers.
#[derive(Debug, Default)]
pub struct Prober {
    results: Results,
    tasks: HashMap<(String, Kind), tokio::task::JoinHandle<()>>,
}

/// What a probe runs against.
#[derive(Debug, Clone)]
pub struct Target {
    pub container_id: String,
    pub pod_ip: Option<String>,
}

impl Drop for Prober {
    fn drop(&mut self) {
        for t in self.tasks.values() {
            t.abort();
        }
    }
}

impl Prober {
    fn get(&self, id: &str, kind: Kind) -> Option<bool> {
        let results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        results.get(&(id.to_string(), kind)).map(|(v, _)| *v)
    }

    /// When container `id`'s probe `kind` last turned to passing, if it
    /// passes now (the startup timeline's probe steps).
    pub fn passed_at(&self, id: &str, kind: Kind) -> Option<Instant> {
        let results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        match results.get(&(id.to_string(), kind)) {
            Some((true, at)) => Some(*at),
            _ => None,
        }
    }

    /// Records a probe's verdict as its task would (for tests of what
    /// reads the verdicts).
    #[cfg(test)]
    pub(crate) fn set(&self, id: &str, kind: Kind, verdict: bool) {
        let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        results.insert((id.to_string(), kind), (verdict, Instant::now()));
    }

    /// Whether the container's startup probe has passed (true without one).
    pub fn started(&self, c: &Container, id: &str) -> bool {
        c.startup_probe.is_none() || self.get(id, Kind::Startup) == Some(true)
    }

    /// Whether the container is ready: started, and its readiness probe
    /// passing (true without one).
    pub fn ready(&self, c: &Container, id: &str) -> bool {
        self.started(c, id)
            && (c.readiness_probe.is_none() || self.get(id, Kind::Readiness) == Some(true))
    }

    /// Why the container must be restarted, if a liveness or startup probe
    /// has failed.
    pub fn failed(&self, c: &Container, id: &str) -> Option<&'static str> {
        if c.startup_probe.is_some() && self.get(id, Kind::Startup) == Some(false) {
            return Some("startup");
        }
        if c.liveness_probe.is_some() && self.get(id, Kind::Liveness) == Some(false) {
            return Some("liveness");
        }
        None
    }

    /// Runs a probe task for every probe of every running container in
    /// `running` (name → target), and stops the others.
    pub fn sync(
        &mut self,
        pod: &Pod,
        running: &[(Container, Target)],
        runtime: Arc<dyn Runtime>,
        events: Arc<dyn Events>,
        wake: Arc<Notify>,
    ) {
        let mut wanted = std::collections::HashSet::new();
        for (c, target) in running {
            for kind in [Kind::Startup, Kind::Liveness, Kind::Readiness] {
                let Some(probe) = kind.of(c) else { continue };
                let key = (target.container_id.clone(), kind);
                wanted.insert(key.clone());
                if self.tasks.get(&key).is_some_and(|t| !t.is_finished()) {
                    continue;
                }
                let task = tokio::spawn(run_probe(
                    kind,
                    probe.clone(),
                    c.clone(),
                    pod.clone(),
                    target.clone(),
                    self.results.clone(),
                    runtime.clone(),
                    events.clone(),
                    wake.clone(),
                ));
                self.tasks.insert(key, task);
            }
        }
        self.tasks.retain(|key, task| {
            let keep = wanted.contains(key);
            if !keep {
                task.abort();
            }
            keep
        });
        let mut results = self.results.lock().unwrap_or_else(|p| p.into_inner());
        results.retain(|key, _| wanted.contains(key));
    }
}

#[allow(clippy::too_many_arguments)] // one probe's whole context, passed once
async fn run_probe(
    kind: Kind,
    probe: Probe,
    c: Container,
    pod: Pod,
    target: Target,
    results: Results,
    runtime: Arc<dyn Runtime>,
    events: Arc<dyn Events>,
    wake: Arc<Notify>,
) {
    let secs =
        |v: Option<i32>, default: i32| Duration::from_secs(v.unwrap_or(default).max(0) as u64);
    let initial = secs(probe.initial_delay_seconds, 0);
    let period = secs(probe.period_seconds, 10).max(Duration::from_secs(1));
    let timeout = secs(probe.timeout_seconds, 1).max(Duration::from_secs(1));
    let success_threshold = probe.success_threshold.unwrap_or(1).max(1);
    let failure_threshold = probe.failure_threshold.unwrap_or(3).max(1);
    let key = (target.container_id.clone(), kind);
    tokio::time::sleep(initial).await;
    let (mut successes, mut failures) = (0, 0);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Liveness and readiness wait for the startup probe.
        if kind != Kind::Startup && c.startup_probe.is_some() {
            let started = results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&(target.container_id.clone(), Kind::Startup))
                .map(|(v, _)| *v);
            if started != Some(true) {
                continue;
            }
        }
        let outcome = handlers::try_once(&probe, &c, &target, runtime.as_ref(), timeout).await;
        if let Outcome::Warning(output) = &outcome {
            events.container_event(
                &pod,
                &c.name,
                EventType::Warning,
                "ProbeWarning",
                &format!("{} probe warning: {output}", kind.name()),
            );
        }
        let verdict = match outcome {
            Outcome::Success | Outcome::Warning(_) => {
                successes += 1;
                failures = 0;
                (successes >= success_threshold).then_some(true)
            }
            Outcome::Failure(output) => {
                failures += 1;
                successes = 0;
                events.container_event(
                    &pod,
                    &c.name,
                    EventType::Warning,
                    "Unhealthy",
                    &format!("{} probe failed: {output}", kind.name()),
                );
                (failures >= failure_threshold).then_some(false)
            }
        };
        if let Some(v) = verdict {
            let changed = {
                let mut r = results.lock().unwrap_or_else(|p| p.into_inner());
                let changed = r.get(&key).map(|(old, _)| *old) != Some(v);
                if changed {
                    r.insert(key.clone(), (v, Instant::now()));
                }
                changed
            };
            if changed {
                wake.notify_one();
            }
            // A startup probe is done once it has passed; a failed startup
            // or liveness probe waits for the worker to restart the container.
            if (kind == Kind::Startup && v) || (kind != Kind::Readiness && !v) {
                return;
            }
        }
    }
}
