//! What a pod waited for before it was scheduled: the record the scheduler
//! keeps of a pod whose attempts failed, and hands on with its binding.
//!
//! The scheduler (`skiff-scheduler`) notes each failed attempt's
//! FailedScheduling message here ([`SchedulingWait::failed`]); when the
//! pod is finally bound, the record rides on the Binding's annotations as
//! [`ANNOTATION`] (JSON), and the binding copies a Binding's annotations
//! onto the pod, as upstream's `setPodNodeAndMetadata` does: no write of
//! its own. A pod scheduled at its first attempt has no record and no
//! annotation: the normal path costs nothing. The node agent reads it off
//! the pod into the scheduling phase of the startup timeline
//! (`skiff_node::timeline`), so the reasons a pod waited survive the
//! PodScheduled condition turning True.
//!
//! Not the FailedScheduling events themselves: a node may create events
//! but not list them (upstream's `system:node` rules, which ours follow),
//! and a LIST per pod start would cost every start.
//!
//! Bounded: at most [`MAX_REASONS`] distinct messages (further ones are
//! only counted in `attempts`), each cut to [`MAX_MESSAGE`] bytes. Pure:
//! the caller says when.

use serde::{Deserialize, Serialize};

/// The annotation carrying a [`SchedulingWait`] on the Binding, and so on
/// the pod.
pub const ANNOTATION: &str = "skiff.dev/scheduling-wait";

/// Most distinct reasons kept.
pub const MAX_REASONS: usize = 8;

/// Longest message kept, in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// One FailedScheduling message, and how often the pod got it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitReason {
    /// The FailedScheduling event's message.
    pub message: String,
    /// How many attempts ended with it.
    pub count: u32,
    /// The first and the last time (unix milliseconds).
    pub first_ms: i64,
    pub last_ms: i64,
}

/// A pod's failed scheduling attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingWait {
    /// When the scheduler first queued the pod (unix milliseconds).
    pub queued_ms: i64,
    /// Attempts that failed (the one that bound it not counted).
    pub attempts: u32,
    /// Their messages, in the order first seen.
    pub reasons: Vec<WaitReason>,
    /// When the scheduler sent the binding (unix milliseconds; 0: not
    /// said): the PodScheduled condition's time to the millisecond.
    #[serde(default)]
    pub binding_ms: i64,
}

impl SchedulingWait {
    /// A record of a pod first queued at `queued_ms`.
    pub fn new(queued_ms: i64) -> Self {
        Self {
            queued_ms,
            attempts: 0,
            reasons: Vec::new(),
            binding_ms: 0,
        }
    }

    /// An attempt at `at_ms` failed with `message`.
    pub fn failed(&mut self, message: &str, at_ms: i64) {
        self.attempts = self.attempts.saturating_add(1);
        let message = cut(message);
        if let Some(r) = self.reasons.iter_mut().find(|r| r.message == message) {
            r.count = r.count.saturating_add(1);
            r.last_ms = at_ms;
        } else if self.reasons.len() < MAX_REASONS {
            self.reasons.push(WaitReason {
                message: message.to_string(),
                count: 1,
                first_ms: at_ms,
                last_ms: at_ms,
            });
        }
    }

    /// The annotation's value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The record in a pod's (or Binding's) annotations, if there is a
    /// readable one.
    pub fn from_annotations(
        annotations: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Option<Self> {
        serde_json::from_str(annotations?.get(ANNOTATION)?).ok()
    }
}

/// `message` cut to at most [`MAX_MESSAGE`] bytes, on a character boundary.
fn cut(message: &str) -> &str {
    if message.len() <= MAX_MESSAGE {
        return message;
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_counted_by_message_and_bounded() {
        let mut w = SchedulingWait::new(1_000);
        w.failed("0/1 nodes are available: taint", 1_010);
        w.failed("0/1 nodes are available: taint", 2_010);
        w.failed("0/2 nodes are available: cpu", 4_010);
        assert_eq!(w.attempts, 3);
        assert_eq!(
            w.reasons[0],
            WaitReason {
                message: "0/1 nodes are available: taint".into(),
                count: 2,
                first_ms: 1_010,
                last_ms: 2_010,
            }
        );
        assert_eq!(w.reasons[1].count, 1);
        for i in 0..20 {
            w.failed(&format!("other {i}"), 5_000);
        }
        assert_eq!(w.reasons.len(), MAX_REASONS);
        assert_eq!(w.attempts, 23);
        let long = "é".repeat(MAX_MESSAGE);
        let mut w = SchedulingWait::new(0);
        w.failed(&long, 0);
        assert!(w.reasons[0].message.len() <= MAX_MESSAGE);
    }

    #[test]
    fn the_annotation_reads_back() {
        let mut w = SchedulingWait::new(1_000);
        w.failed("no nodes available to schedule pods", 1_500);
        w.binding_ms = 2_000;
        let annotations = [(ANNOTATION.to_string(), w.to_json())]
            .into_iter()
            .collect();
        assert_eq!(
            SchedulingWait::from_annotations(Some(&annotations)),
            Some(w)
        );
        let broken = [(ANNOTATION.to_string(), "{".to_string())]
            .into_iter()
            .collect();
        assert_eq!(SchedulingWait::from_annotations(Some(&broken)), None);
        assert_eq!(SchedulingWait::from_annotations(None), None);
    }
}
