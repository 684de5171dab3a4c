//! What `skiff explain` found: findings (stage, problem, evidence, fix)
//! and their human and JSON forms. It decides nothing and reads nothing.

use std::fmt::Write;

use serde::Serialize;

/// The step of a pod's way to Ready a finding is about, in the order a
/// pod goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Stage {
    Scheduling,
    Node,
    Volumes,
    Sandbox,
    Image,
    Config,
    Init,
    Start,
    Crash,
    OutOfMemory,
    Liveness,
    Readiness,
    Rollout,
    Service,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Scheduling => "scheduling",
            Stage::Node => "node",
            Stage::Volumes => "volumes",
            Stage::Sandbox => "sandbox",
            Stage::Image => "image",
            Stage::Config => "config",
            Stage::Init => "init containers",
            Stage::Start => "start",
            Stage::Crash => "crash",
            Stage::OutOfMemory => "out of memory",
            Stage::Liveness => "liveness probe",
            Stage::Readiness => "readiness probe",
            Stage::Rollout => "rollout",
            Stage::Service => "service",
        }
    }
}

/// One problem, what shows it, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub stage: Stage,
    /// One line: what is wrong.
    pub problem: String,
    /// What shows it: a condition, an event with its count, log lines.
    pub evidence: Vec<String>,
    /// What to do: commands or YAML, each entry a block.
    pub fix: Vec<String>,
}

impl Finding {
    pub fn new(stage: Stage, problem: impl Into<String>) -> Self {
        Finding {
            stage,
            problem: problem.into(),
            evidence: Vec::new(),
            fix: Vec::new(),
        }
    }

    pub fn evidence(mut self, line: impl Into<String>) -> Self {
        self.evidence.push(line.into());
        self
    }

    pub fn fix(mut self, block: impl Into<String>) -> Self {
        self.fix.push(block.into());
        self
    }
}

/// The answer for one object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// What was asked about, as `kind/name` in `namespace`.
    pub target: String,
    pub namespace: String,
    /// The pod explained (the target, or its owner's newest unavailable
    /// pod), if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// One line of where things stand (phase, readiness, restarts).
    pub status: String,
    /// The pod's start-up timeline, if a component recorded one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn healthy(&self) -> bool {
        self.findings.is_empty()
    }

    /// The report for a person: status, then each finding with its
    /// evidence and fix.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{} in namespace {}", self.target, self.namespace);
        if let Some(pod) = &self.pod {
            if !self.target.ends_with(&format!("pod/{pod}")) {
                let _ = writeln!(out, "explaining pod {pod}");
            }
        }
        let _ = writeln!(out, "status: {}", self.status);
        if let Some(timeline) = &self.timeline {
            let _ = writeln!(out, "timeline: {timeline}");
        }
        if self.findings.is_empty() {
            let _ = writeln!(out, "\nno problem found");
            return out;
        }
        for (i, f) in self.findings.iter().enumerate() {
            let _ = writeln!(out, "\n{}. [{}] {}", i + 1, f.stage.name(), f.problem);
            for e in &f.evidence {
                for (j, line) in e.lines().enumerate() {
                    let lead = if j == 0 { "   - " } else { "     " };
                    let _ = writeln!(out, "{lead}{line}");
                }
            }
            if !f.fix.is_empty() {
                let _ = writeln!(out, "   fix:");
                for block in &f.fix {
                    for line in block.lines() {
                        let _ = writeln!(out, "     {line}");
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_form_lists_findings_with_evidence_and_fix() {
        let r = Report {
            target: "pod/web".into(),
            namespace: "default".into(),
            pod: Some("web".into()),
            status: "Pending".into(),
            timeline: None,
            findings: vec![Finding::new(Stage::Image, "the image cannot be pulled")
                .evidence("event Failed (x3): not found")
                .fix("kubectl set image pod/web c=busybox:1.36")],
        };
        let text = r.human();
        assert!(
            text.contains("1. [image] the image cannot be pulled"),
            "{text}"
        );
        assert!(text.contains("   - event Failed (x3): not found"), "{text}");
        assert!(text.contains("     kubectl set image"), "{text}");
        assert!(!r.healthy());
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["findings"][0]["stage"], "image");
    }
}
