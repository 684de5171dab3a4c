//! From recorded instants to phases: [`compute`] turns a [`Timeline`] and
//! the pod's own times ([`PodFacts`]) into a [`Finished`] timeline, the
//! machine-readable form (its JSON is the `skiff.dev/startup-timeline`
//! annotation of the `StartupTimeline` event).
//!
//! The phases follow each other with no gap, so they add up to the time
//! from creationTimestamp to the Ready condition's lastTransitionTime:
//! scheduling (created → PodScheduled), node (→ seen by the agent),
//! sandbox (→ RunPodSandbox returned), init (→ the last init container
//! done), start (→ the last container started, postStart included),
//! ready (→ Ready). Each boundary is clamped to the one before, so a
//! second-resolution API time never makes a phase negative. The steps
//! (each call, pull and probe) say what happened inside them.
//!
//! The scheduling phase starts at creationTimestamp, which the API server
//! sets when it admits the pod (so "created" and "admitted" are one
//! instant), and ends when the binding made PodScheduled True. A pod
//! bound at the scheduler's first attempt has no steps there: the
//! scheduler saw it within milliseconds of its creation and nothing more
//! is worth a record. A pod that waited carries the scheduler's record
//! of its failed attempts ([`SchedulingWait`], the
//! `skiff.dev/scheduling-wait` annotation its binding put on the pod):
//! it becomes a `queued` step (from the scheduler first queueing the pod
//! to the binding; `count`: the attempts) and one `unschedulable` step
//! per FailedScheduling message (first to last time; `count`: how many
//! attempts ended with it), and the binding's time, which the scheduler
//! stamped on the record, ends the phase to the millisecond.
//!
//! Pure: no clock, no I/O.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use skiff_api::scheduling_wait::SchedulingWait;

use super::{Error, ImageOutcome, Result, Timeline};

/// The API version and kind of the JSON form.
pub const API_VERSION: &str = "skiff.dev/v1alpha1";
pub const KIND: &str = "PodStartupTimeline";

/// The probes of one regular container, as the prober saw them pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probes {
    pub container: String,
    pub has_startup: bool,
    pub has_readiness: bool,
    /// When the startup probe passed.
    pub startup_passed: Option<Instant>,
    /// When the readiness probe first succeeded (its successThreshold met).
    pub readiness_passed: Option<Instant>,
}

/// What the pod and the runtime say, beside what the worker recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodFacts {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
    /// metadata.creationTimestamp (second resolution in the API).
    pub created: Option<Timestamp>,
    /// The PodScheduled=True condition's lastTransitionTime (second
    /// resolution).
    pub scheduled: Option<Timestamp>,
    /// The Ready=True condition's lastTransitionTime, as the agent set it
    /// (full resolution; the API shows it to the second).
    pub ready: Timestamp,
    /// How many init containers the spec has.
    pub init_containers: usize,
    /// When each (non-sidecar) init container exited, ns since the epoch.
    pub init_exited: Vec<(String, i64)>,
    pub probes: Vec<Probes>,
    /// The scheduler's record of a pod that waited (its annotation).
    pub wait: Option<SchedulingWait>,
}

impl PodFacts {
    /// The facts the pod object carries; the rest is the caller's.
    pub fn of(pod: &Pod, node: &str, ready: Timestamp) -> Self {
        let scheduled = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == "PodScheduled" && c.status == "True")
            })
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            node: node.to_string(),
            created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
            scheduled,
            ready,
            init_containers: crate::podspec::init_containers(pod).len(),
            wait: SchedulingWait::from_annotations(pod.metadata.annotations.as_ref()),
            ..Default::default()
        }
    }
}

/// One phase: the phases follow each other and add up to the total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    /// scheduling, node, sandbox, init, start, ready.
    pub name: String,
    /// Unix milliseconds.
    pub start_ms: i64,
    pub duration_ms: i64,
}

/// One step inside the phases: a runtime call, a pull, a probe passing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// queued (the scheduler's queue, for a pod that waited),
    /// unschedulable (a FailedScheduling message while it waited),
    /// sandbox, network, volumes, image, create, start, postStart, run
    /// (an init container from started to exited), startupProbe,
    /// readinessProbe (from the container started to the probe passing).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Unix milliseconds.
    pub start_ms: i64,
    pub duration_ms: i64,
    /// For image steps: the image, whether it was present, and the bytes
    /// pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub present: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// For unschedulable steps: the scheduler's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For queued steps: the scheduling attempts; for unschedulable
    /// steps: the attempts that ended with its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

impl Step {
    fn new(name: &str, container: Option<&str>, start_ms: i64, end_ms: i64) -> Self {
        Self {
            name: name.to_string(),
            container: container.map(str::to_string),
            start_ms,
            duration_ms: (end_ms - start_ms).max(0),
            image: None,
            present: None,
            bytes: None,
            message: None,
            count: None,
        }
    }
}

/// A finished startup timeline: the machine-readable form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
    /// creationTimestamp, unix milliseconds (whole seconds: the API's
    /// resolution).
    pub created_ms: i64,
    /// The Ready condition's lastTransitionTime, unix milliseconds.
    pub ready_ms: i64,
    /// ready - created: the sum of the phases.
    pub total_ms: i64,
    /// What Ready waited for after the containers started: `readiness
    /// probe`, `startup probe`, `startup and readiness probes`, or `no
    /// probe`.
    pub ready_after: String,
    /// How many init containers the spec has.
    pub init_containers: usize,
    pub phases: Vec<Phase>,
    pub steps: Vec<Step>,
}

impl Finished {
    /// The phase `name`, if it is there.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn ms(t: Timestamp) -> i64 {
    t.as_millisecond()
}

fn ns_to_ms(ns: i64) -> i64 {
    ns.div_euclid(1_000_000)
}

/// The timeline of a pod start: phases from creation to Ready and the
/// steps inside them.
pub fn compute(timeline: &Timeline, facts: &PodFacts) -> Result<Finished> {
    let who = format!("{}/{}", facts.namespace, facts.name);
    let sandbox = timeline
        .sandbox
        .ok_or_else(|| Error::NotSeen(who.clone()))?;
    let created = ms(facts
        .created
        .ok_or_else(|| Error::NoCreation(who.clone()))?);
    let wall = |at: Instant| ms(timeline.wall(at));

    // The boundaries, each at least the one before. A pod that waited
    // has the binding's time to the millisecond, when it is in the
    // condition's second.
    let scheduled_s = facts.scheduled.map(ms);
    let binding = facts.wait.as_ref().map(|w| w.binding_ms);
    let scheduled = match (scheduled_s, binding) {
        (Some(s), Some(b)) if (s..s + 1000).contains(&b) => b,
        (s, _) => s.unwrap_or(created),
    }
    .max(created);
    let seen = wall(timeline.seen).max(scheduled);
    let sandbox_end = wall(sandbox.end).max(seen);

    let mut steps = vec![Step::new(
        "sandbox",
        None,
        wall(sandbox.start),
        wall(sandbox.end),
    )];
    if let Some(wait) = &facts.wait {
        let queued = wait.queued_ms.clamp(created, scheduled);
        let mut step = Step::new("queued", None, queued, scheduled);
        step.count = Some(wait.attempts.saturating_add(1));
        steps.push(step);
        for r in &wait.reasons {
            let first = r.first_ms.max(queued);
            let mut step = Step::new("unschedulable", None, first, r.last_ms);
            step.message = Some(r.message.clone());
            step.count = Some(r.count);
            steps.push(step);
        }
    }
    if let Some(done) = timeline.network_done_ns.map(ns_to_ms) {
        // containerd makes the sandbox's container, then its network;
        // from before the call when the runtime says otherwise.
        let call = wall(sandbox.start);
        let created = ns_to_ms(timeline.sandbox_created_ns);
        let start = if (call..=done).contains(&created) {
            created
        } else {
            call
        };
        if done >= start && done <= wall(sandbox.end) {
            steps.push(Step::new("network", None, start, done));
        }
    }
    if let Some(v) = timeline.volumes {
        steps.push(Step::new("volumes", None, wall(v.start), wall(v.end)));
    }
    for i in &timeline.images {
        let mut step = Step::new(
            "image",
            Some(i.container.as_str()),
            wall(i.span.start),
            wall(i.span.end),
        );
        step.image = Some(i.image.clone());
        match i.outcome {
            ImageOutcome::Present => step.present = Some(true),
            ImageOutcome::Pulled { bytes } => {
                step.present = Some(false);
                step.bytes = Some(bytes);
            }
        }
        steps.push(step);
    }

    let mut init_done = sandbox_end;
    let mut start_done = sandbox_end;
    let mut startup_probe = false;
    let mut readiness_probe = false;
    for c in &timeline.containers {
        let name = Some(c.name.as_str());
        for (step, span) in [
            ("create", c.create),
            ("start", c.start),
            ("postStart", c.post_start),
        ] {
            if let Some(s) = span {
                steps.push(Step::new(step, name, wall(s.start), wall(s.end)));
            }
        }
        let started = [c.start, c.post_start]
            .iter()
            .flatten()
            .map(|s| wall(s.end))
            .max();
        let Some(started) = started else { continue };
        if c.init && !c.sidecar {
            let exited = facts
                .init_exited
                .iter()
                .find(|(n, _)| *n == c.name)
                .map(|(_, ns)| ns_to_ms(*ns))
                .filter(|e| *e >= started);
            if let Some(exited) = exited {
                steps.push(Step::new("run", name, started, exited));
            }
            init_done = init_done.max(exited.unwrap_or(started));
        } else if c.init {
            init_done = init_done.max(started);
        } else {
            start_done = start_done.max(started);
            let probes = facts.probes.iter().find(|p| p.container == c.name);
            for (step, passed, has) in [
                (
                    "startupProbe",
                    probes.and_then(|p| p.startup_passed),
                    probes.is_some_and(|p| p.has_startup),
                ),
                (
                    "readinessProbe",
                    probes.and_then(|p| p.readiness_passed),
                    probes.is_some_and(|p| p.has_readiness),
                ),
            ] {
                if has {
                    if step == "startupProbe" {
                        startup_probe = true;
                    } else {
                        readiness_probe = true;
                    }
                }
                if let Some(at) = passed {
                    steps.push(Step::new(step, name, started, wall(at).max(started)));
                }
            }
        }
    }
    let init_end = if facts.init_containers > 0 {
        init_done.max(sandbox_end)
    } else {
        sandbox_end
    };
    let start_end = start_done.max(init_end);
    let ready = ms(facts.ready).max(start_end);

    let mut phases = Vec::new();
    let mut push = |name: &str, start: i64, end: i64| {
        phases.push(Phase {
            name: name.to_string(),
            start_ms: start,
            duration_ms: end - start,
        })
    };
    push("scheduling", created, scheduled);
    push("node", scheduled, seen);
    push("sandbox", seen, sandbox_end);
    if facts.init_containers > 0 {
        push("init", sandbox_end, init_end);
    }
    push("start", init_end, start_end);
    push("ready", start_end, ready);
    steps.sort_by_key(|s| s.start_ms);

    let ready_after = match (startup_probe, readiness_probe) {
        (true, true) => "startup and readiness probes",
        (true, false) => "startup probe",
        (false, true) => "readiness probe",
        (false, false) => "no probe",
    };
    Ok(Finished {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        namespace: facts.namespace.clone(),
        name: facts.name.clone(),
        uid: facts.uid.clone(),
        node: facts.node.clone(),
        created_ms: created,
        ready_ms: ready,
        total_ms: ready - created,
        ready_after: ready_after.to_string(),
        init_containers: facts.init_containers,
        phases,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{ImageStep, Span};
    use skiff_client::clock::{Clock, FakeClock};
    use std::time::Duration;

    /// A pod created at 10:00:00 (scheduled the same second), seen by the
    /// agent at 10:00:00.250 on a fake clock.
    fn setup() -> (FakeClock, Timeline, PodFacts) {
        let clock = FakeClock::new();
        let wall: Timestamp = "2026-01-01T10:00:00.250Z".parse().unwrap();
        let t = Timeline::new(clock.now(), wall);
        let facts = PodFacts {
            namespace: "default".into(),
            name: "web".into(),
            uid: "u1".into(),
            node: "n1".into(),
            created: Some("2026-01-01T10:00:00Z".parse().unwrap()),
            scheduled: Some("2026-01-01T10:00:00Z".parse().unwrap()),
            ..Default::default()
        };
        (clock, t, facts)
    }

    /// Advances `clock` by `ms` and returns the instants before and after.
    fn span(clock: &FakeClock, ms: u64) -> Span {
        let start = clock.now();
        clock.advance(Duration::from_millis(ms));
        Span::new(start, clock.now())
    }

    fn durations(f: &Finished) -> Vec<(&str, i64)> {
        f.phases
            .iter()
            .map(|p| (p.name.as_str(), p.duration_ms))
            .collect()
    }

    #[test]
    fn phases_follow_each_other_and_add_up_to_created_to_ready() {
        let (clock, mut t, mut facts) = setup();
        clock.advance(Duration::from_millis(10));
        let sb = span(&clock, 112);
        t.sandbox(sb, "sb1");
        // Two init containers, 400 ms each, their image present.
        for name in ["i1", "i2"] {
            let img = span(&clock, 5);
            t.image(ImageStep {
                container: name.into(),
                image: "busybox:latest".into(),
                span: img,
                outcome: ImageOutcome::Present,
            });
            let create = span(&clock, 10);
            let start = span(&clock, 15);
            let c = t.container(name, true, false).unwrap();
            c.create = Some(create);
            c.start = Some(start);
            clock.advance(Duration::from_millis(400));
            facts
                .init_exited
                .push((name.into(), t.wall(clock.now()).as_nanosecond() as i64));
        }
        let create = span(&clock, 10);
        let start = span(&clock, 15);
        let c = t.container("app", false, false).unwrap();
        c.create = Some(create);
        c.start = Some(start);
        clock.advance(Duration::from_millis(500));
        facts.probes.push(Probes {
            container: "app".into(),
            has_readiness: true,
            readiness_passed: Some(clock.now()),
            ..Default::default()
        });
        clock.advance(Duration::from_millis(3));
        facts.ready = t.wall(clock.now());
        facts.init_containers = 2;

        let f = compute(&t, &facts).unwrap();
        assert_eq!(
            durations(&f),
            [
                ("scheduling", 0),
                ("node", 250),
                ("sandbox", 122),
                ("init", 860),
                ("start", 25),
                ("ready", 503),
            ]
        );
        let sum: i64 = f.phases.iter().map(|p| p.duration_ms).sum();
        assert_eq!(sum, f.total_ms);
        assert_eq!(f.total_ms, f.ready_ms - f.created_ms);
        assert_eq!(f.total_ms, 1760);
        assert_eq!(f.ready_after, "readiness probe");
        let names: Vec<_> = f.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sandbox",
                "image",
                "create",
                "start",
                "run",
                "image",
                "create",
                "start",
                "run",
                "create",
                "start",
                "readinessProbe"
            ]
        );
        let probe = f.steps.last().unwrap();
        assert_eq!(probe.duration_ms, 500);
        // The JSON form reads back.
        let back: Finished = serde_json::from_str(&f.to_json()).unwrap();
        assert_eq!(back, f);
    }

    #[test]
    fn second_resolution_api_times_never_make_a_phase_negative() {
        let (clock, mut t, mut facts) = setup();
        // Scheduled "later" than the agent saw it (rounded up elsewhere),
        // and Ready reported before the last start returned.
        facts.scheduled = Some("2026-01-01T10:00:01Z".parse().unwrap());
        let sb = span(&clock, 50);
        t.sandbox(sb, "sb1");
        facts.ready = t.wall(clock.now());
        let start = span(&clock, 20);
        t.container("app", false, false).unwrap().start = Some(start);
        let f = compute(&t, &facts).unwrap();
        assert!(f.phases.iter().all(|p| p.duration_ms >= 0), "{f:?}");
        let sum: i64 = f.phases.iter().map(|p| p.duration_ms).sum();
        assert_eq!(sum, f.total_ms);
        assert_eq!(f.ready_after, "no probe");
        assert!(f.phase("init").is_none());
    }

    #[test]
    fn the_network_is_measured_from_the_sandboxs_creation_to_libcnis_result() {
        let (clock, mut t, mut facts) = setup();
        let sb = span(&clock, 100);
        t.sandbox(sb, "sb1");
        let start_ns = t.wall(sb.start).as_nanosecond() as i64;
        t.sandbox_created_ns = start_ns + 20_000_000;
        t.network_done_ns = Some(start_ns + 61_000_000);
        facts.ready = t.wall(clock.now());
        let f = compute(&t, &facts).unwrap();
        let net = f.steps.iter().find(|s| s.name == "network").unwrap();
        assert_eq!(net.duration_ms, 41);
        // A result cached after the call returned is not this sandbox's.
        t.network_done_ns = Some(start_ns + 500_000_000);
        let f = compute(&t, &facts).unwrap();
        assert!(f.steps.iter().all(|s| s.name != "network"));
    }

    #[test]
    fn a_pod_that_waited_has_its_queue_and_reasons_in_the_scheduling_phase() {
        let (clock, mut t, mut facts) = setup();
        // Created at 10:00:00, queued 5 ms later, unschedulable twice,
        // bound at 10:00:12.300 (the condition says 10:00:12).
        facts.scheduled = Some("2026-01-01T10:00:12Z".parse().unwrap());
        let created = 1_767_261_600_000;
        let mut wait = SchedulingWait::new(created + 5);
        wait.failed("0/1 nodes are available: taint.", created + 10);
        wait.failed("0/1 nodes are available: taint.", created + 9_010);
        wait.binding_ms = created + 12_300;
        facts.wait = Some(wait);
        clock.advance(Duration::from_millis(12_100));
        let sb = span(&clock, 50);
        t.sandbox(sb, "sb1");
        facts.ready = t.wall(clock.now());
        let f = compute(&t, &facts).unwrap();
        assert_eq!(f.created_ms, created);
        assert_eq!(f.phase("scheduling").unwrap().duration_ms, 12_300);
        let sum: i64 = f.phases.iter().map(|p| p.duration_ms).sum();
        assert_eq!(sum, f.total_ms);
        let queued = f.steps.iter().find(|s| s.name == "queued").unwrap();
        assert_eq!(
            (queued.start_ms, queued.duration_ms, queued.count),
            (created + 5, 12_295, Some(3))
        );
        let why = f.steps.iter().find(|s| s.name == "unschedulable").unwrap();
        assert_eq!(
            why.message.as_deref(),
            Some("0/1 nodes are available: taint.")
        );
        assert_eq!((why.duration_ms, why.count), (9_000, Some(2)));
        // A binding time outside the condition's second is not used.
        facts.wait.as_mut().unwrap().binding_ms = created + 14_000;
        let f = compute(&t, &facts).unwrap();
        assert_eq!(f.phase("scheduling").unwrap().duration_ms, 12_000);
        // Without a record: no scheduling steps.
        facts.wait = None;
        let f = compute(&t, &facts).unwrap();
        assert!(f
            .steps
            .iter()
            .all(|s| s.name != "queued" && s.name != "unschedulable"));
    }

    #[test]
    fn a_start_not_seen_here_has_no_timeline() {
        let (_clock, t, facts) = setup();
        assert_eq!(
            compute(&t, &facts),
            Err(Error::NotSeen("default/web".into()))
        );
    }
}
