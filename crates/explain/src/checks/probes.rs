//! Probes: a liveness (or startup) probe that kills a container before it
//! is up, a running container that is not Ready (with the probe's last
//! output), and a probe whose initialDelaySeconds is shorter than the
//! container's measured start time.

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Probe};

use super::containers::killed_by_probe;
use super::yaml;
use crate::facts::{describe_event, Facts};
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    for (init, c, st) in f.containers() {
        if init {
            continue;
        }
        let Some(st) = st else { continue };
        if killed_by_probe(f, &c.name) {
            out.push(killing(f, c, st));
            continue;
        }
        if let Some(finding) = not_ready(f, c, st) {
            out.push(finding);
            continue;
        }
        if let Some(finding) = slow_start(f, c, st) {
            out.push(finding);
        }
    }
    out
}

/// The time a probe gives a container before its failures count:
/// initialDelaySeconds + failureThreshold × periodSeconds.
fn budget(p: &Probe) -> i32 {
    p.initial_delay_seconds.unwrap_or(0)
        + p.failure_threshold.unwrap_or(3) * p.period_seconds.unwrap_or(10)
}

fn settings(kind: &str, p: &Probe) -> String {
    format!(
        "{kind} probe: initialDelaySeconds={} periodSeconds={} timeoutSeconds={} failureThreshold={} \
         (kills after about {}s without a success)",
        p.initial_delay_seconds.unwrap_or(0),
        p.period_seconds.unwrap_or(10),
        p.timeout_seconds.unwrap_or(1),
        p.failure_threshold.unwrap_or(3),
        budget(p)
    )
}

/// The probe's handler as YAML lines (exec, httpGet, tcpSocket, grpc).
fn handler(p: &Probe) -> Vec<String> {
    let value = serde_json::to_value(p).unwrap_or_default();
    let mut lines = Vec::new();
    for key in ["exec", "httpGet", "tcpSocket", "grpc"] {
        if let Some(v) = value.get(key) {
            lines.push(format!("{key}: {v}"));
        }
    }
    lines
}

/// A startupProbe with `p`'s handler that allows `seconds` to start.
fn startup_probe(p: &Probe, seconds: i32) -> String {
    let period = p.period_seconds.unwrap_or(10).clamp(1, 10);
    let threshold = (seconds + period - 1) / period;
    let mut lines = handler(p);
    lines.push(format!("periodSeconds: {period}"));
    lines.push(format!("failureThreshold: {}", threshold.max(1)));
    yaml::block("  startupProbe:", &lines)
}

/// Seconds from the container's start to the pod's Ready, when it got
/// there in this run of the container: the node's timeline (its `ready`
/// phase, in ms) when there is one, else the API's second-resolution
/// times.
fn measured_start(f: &Facts, st: &ContainerStatus) -> Option<f64> {
    if st.restart_count == 0 {
        if let Some(ms) = f.timeline_phase_ms("ready") {
            return Some(ms as f64 / 1000.0);
        }
    }
    let started = st.state.as_ref()?.running.as_ref()?.started_at.as_ref()?.0;
    let ready = f.condition("Ready").filter(|c| c.status == "True")?;
    let at = ready.last_transition_time.as_ref()?.0;
    let secs = at.duration_since(started).as_secs_f64();
    (secs >= 0.0).then_some(secs)
}

fn killing(f: &Facts, c: &Container, st: &ContainerStatus) -> Finding {
    let kills = f.container_events("Killing", &c.name);
    let startup = kills.iter().any(|e| {
        e.message
            .as_deref()
            .unwrap_or_default()
            .contains("startup probe")
    });
    let (kind, probe) = if startup {
        ("startup", c.startup_probe.as_ref())
    } else {
        ("liveness", c.liveness_probe.as_ref())
    };
    let mut finding = Finding::new(
        Stage::Liveness,
        format!(
            "the {kind} probe of container {} kills it ({} restart(s))",
            c.name, st.restart_count
        ),
    );
    if let Some(e) = kills.last() {
        finding = finding.evidence(describe_event(e));
    }
    let prefix = if startup {
        "Startup probe failed"
    } else {
        "Liveness probe failed"
    };
    if let Some(e) = f
        .container_events("Unhealthy", &c.name)
        .into_iter()
        .rev()
        .find(|e| e.message.as_deref().unwrap_or_default().starts_with(prefix))
    {
        finding = finding.evidence(describe_event(e));
    }
    if let Some(p) = probe {
        finding = finding.evidence(settings(kind, p));
        if let Some(t) = st.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
            if let (Some(a), Some(b)) = (t.started_at.as_ref(), t.finished_at.as_ref()) {
                finding = finding.evidence(format!(
                    "its last run lasted {:.0}s before the kill",
                    b.0.duration_since(a.0).as_secs_f64()
                ));
            }
        }
        finding = finding.fix(if startup {
            format!(
                "the container needs longer than the startup probe allows ({}s): raise its failureThreshold or periodSeconds in {}",
                budget(p),
                f.owner_ref()
            )
        } else {
            format!(
                "the program needs longer to start than the liveness probe allows ({}s): guard it with a \
                 startupProbe (liveness checks begin only once it passes), allowing e.g. 60s, in {}:\n{}\n\
                 or raise the liveness probe's initialDelaySeconds near the program's start time",
                budget(p),
                f.owner_ref(),
                startup_probe(p, 60)
            )
        });
    }
    finding
}

fn not_ready(f: &Facts, c: &Container, st: &ContainerStatus) -> Option<Finding> {
    let running = st.state.as_ref().and_then(|s| s.running.as_ref()).is_some();
    if !running || st.ready {
        return None;
    }
    let mut finding = Finding::new(
        Stage::Readiness,
        format!("container {} is running but not Ready", c.name),
    );
    let failed = f
        .container_events("Unhealthy", &c.name)
        .into_iter()
        .rev()
        .find(|e| {
            let m = e.message.as_deref().unwrap_or_default();
            m.starts_with("Readiness probe failed") || m.starts_with("Startup probe failed")
        });
    if let Some(e) = failed {
        finding = finding.evidence(describe_event(e));
    }
    match (&c.startup_probe, &c.readiness_probe, st.started) {
        (Some(p), _, Some(false)) => {
            finding = finding.evidence(settings("startup", p)).fix(format!(
                "the startup probe has not passed yet: wait, or check that the program answers it ({})",
                handler(p).join(", ")
            ));
        }
        (_, Some(p), _) => {
            let output = failed
                .and_then(|e| e.message.as_deref())
                .and_then(|m| m.split_once(": ").map(|(_, o)| o.to_string()))
                .unwrap_or_else(|| "no output".into());
            finding = finding.evidence(settings("readiness", p)).fix(format!(
                "the readiness probe ({}) fails with: {output}\nmake the program answer it, or fix the probe's \
                 path, port or command in {}; the pod gets no Service traffic until it passes",
                handler(p).join(", "),
                f.owner_ref()
            ));
        }
        _ => {
            finding = finding.fix(
                "it has no readiness probe: it becomes Ready once its startup completes"
                    .to_string(),
            );
        }
    }
    Some(finding)
}

fn slow_start(f: &Facts, c: &Container, st: &ContainerStatus) -> Option<Finding> {
    let measured = measured_start(f, st)?;
    let mut out = None;
    for (kind, p) in [
        ("liveness", c.liveness_probe.as_ref()),
        ("readiness", c.readiness_probe.as_ref()),
    ] {
        let Some(p) = p else { continue };
        let delay = p.initial_delay_seconds.unwrap_or(0);
        let prefix = if kind == "liveness" {
            "Liveness probe failed"
        } else {
            "Readiness probe failed"
        };
        let failures: i32 = f
            .container_events("Unhealthy", &c.name)
            .iter()
            .filter(|e| e.message.as_deref().unwrap_or_default().starts_with(prefix))
            .map(|e| e.count.unwrap_or(1))
            .sum();
        let risky = kind == "liveness" && f64::from(budget(p)) < measured * 1.5;
        if f64::from(delay) + 1.0 >= measured || (failures == 0 && !risky) {
            continue;
        }
        let secs = measured.ceil() as i32;
        let mut finding = Finding::new(
            if kind == "liveness" { Stage::Liveness } else { Stage::Readiness },
            format!(
                "the {kind} probe of container {} starts at {delay}s, but the container took {measured:.1}s to become Ready",
                c.name
            ),
        )
        .evidence(settings(kind, p));
        if failures > 0 {
            finding = finding.evidence(format!(
                "{failures} failed {kind} probe(s) while it started (Unhealthy events)"
            ));
        }
        finding = finding.fix(format!(
            "set initialDelaySeconds near the measured start time ({secs}s) in {}, or add a startupProbe:\n{}",
            f.owner_ref(),
            startup_probe(p, secs * 2)
        ));
        out = Some(finding);
        if kind == "liveness" {
            break;
        }
    }
    out
}
