//! The end of a pod's startup timeline: when a status report first makes
//! the pod Ready, [`PodWorker::finish_timeline`] gathers what the pod,
//! the runtime and the prober say (creation, scheduling, init containers'
//! exits, probes passing), computes the phases
//! ([`crate::timeline::compute`]), logs upstream's "Observed pod startup
//! duration" line, writes the one `StartupTimeline` event (its JSON as an
//! annotation) and keeps the result in the context's store.
//!
//! It records nothing itself (the start steps do, in [`super::start`])
//! and writes nothing to the API but that one event, once per worker.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

use super::PodWorker;
use crate::events::EventType;
use crate::observed::{PodRuntime, State};
use crate::podspec::{init_containers, is_sidecar, pod_ref};
use crate::prober::Kind;
use crate::timeline::compute::{compute, PodFacts, Probes};
use crate::timeline::{message, network_done, ANNOTATION, EVENT_REASON};

impl PodWorker {
    /// Finishes the startup timeline if `status`, just reported with
    /// `now` as its time, made the pod Ready for the first time.
    pub(super) fn finish_timeline(
        &mut self,
        pod: &Pod,
        rt: &PodRuntime,
        status: &PodStatus,
        now: Timestamp,
    ) {
        let Some(store) = self.ctx.timelines.clone() else {
            return;
        };
        let Some(timeline) = self.timeline.as_mut().filter(|t| !t.finished) else {
            return;
        };
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready" && c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0);
        let Some(ready) = ready else {
            return;
        };
        // Once per worker, whatever follows: a pod Ready before this
        // worker saw it (the agent restarted), or whose sandbox it did not
        // make, has no timeline here.
        timeline.finished = true;
        if ready != now || timeline.sandbox.is_none() {
            return;
        }
        timeline.network_done_ns = network_done(&timeline.sandbox_id);
        let mut facts = PodFacts::of(pod, &self.ctx.node_name, ready);
        for c in init_containers(pod).iter().filter(|c| !is_sidecar(c)) {
            if let Some(l) = rt.latest(&c.name).filter(|l| l.state == State::Exited) {
                facts.init_exited.push((c.name.clone(), l.finished_at));
            }
        }
        for c in pod.spec.iter().flat_map(|s| &s.containers) {
            let Some(l) = rt.latest(&c.name) else {
                continue;
            };
            facts.probes.push(Probes {
                container: c.name.clone(),
                has_startup: c.startup_probe.is_some(),
                has_readiness: c.readiness_probe.is_some(),
                startup_passed: self.prober.passed_at(&l.id, Kind::Startup),
                readiness_passed: self.prober.passed_at(&l.id, Kind::Readiness),
            });
        }
        let finished = match compute(timeline, &facts) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(pod = %pod_ref(pod), error = %e, "no startup timeline");
                return;
            }
        };
        let text = message::text(&finished);
        tracing::info!(
            pod = %pod_ref(pod),
            pod_start_e2e_duration = %message::duration(finished.total_ms),
            timeline = %text,
            "Observed pod startup duration"
        );
        self.ctx.events.annotated_event(
            pod,
            EventType::Normal,
            EVENT_REASON,
            &text,
            &[(ANNOTATION, &finished.to_json())],
        );
        store.put(finished);
    }
}
