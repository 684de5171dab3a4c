//! The workload's own conditions: a Deployment whose rollout stopped
//! (ProgressDeadlineExceeded), a Job that failed (BackoffLimitExceeded).

use crate::facts::Facts;
use crate::report::{Finding, Stage};

pub fn check(f: &Facts) -> Vec<Finding> {
    let Some(w) = &f.workload else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (kind, status, reason, message) in &w.conditions {
        let evidence = format!("condition {kind}={status} ({reason}): {message}");
        if kind == "Progressing" && status == "False" && reason == "ProgressDeadlineExceeded" {
            out.push(
                Finding::new(
                    Stage::Rollout,
                    format!("the rollout of {} stopped: its new pods do not become available", w.reference()),
                )
                .evidence(evidence)
                .fix(format!(
                    "fix what keeps the new pod from Ready (the findings below), or go back to the last revision:\n  \
                     kubectl rollout undo {} -n {}",
                    w.reference(),
                    f.namespace()
                )),
            );
        } else if kind == "Failed" && status == "True" {
            out.push(
                Finding::new(Stage::Rollout, format!("{} failed ({reason})", w.reference()))
                    .evidence(evidence)
                    .fix(format!(
                        "fix what makes its pods fail (below), then recreate the job: kubectl delete {} -n {} and apply it again",
                        w.reference(),
                        f.namespace()
                    )),
            );
        }
    }
    out
}
