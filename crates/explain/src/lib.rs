//! skiff-explain: why is my pod not Ready? `skiff explain pod NAME` (and
//! `deploy/`, `statefulset/`, `job/`, `svc/`) reads what any user with
//! `view` may read through any Kubernetes API — the pod, its events,
//! node, claims, previous logs and Services — names the stage that fails
//! and prints the evidence and a fix.
//!
//! - [`gather`]: the reads (the only I/O);
//! - [`facts`]: what is known, as plain data;
//! - [`checks`]: one file per kind of trouble, pure functions of the facts;
//! - [`report`]: findings and their human and JSON forms.
//!
//! It writes nothing to the cluster.

mod checks;
pub mod facts;
mod gather;
pub mod report;

use std::str::FromStr;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;

pub use facts::Facts;
pub use report::{Finding, Report, Stage};

/// Why an explanation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    NotFound(String),
    #[error("cannot explain {0:?}: use pod/NAME (or NAME), deploy/NAME, statefulset/NAME, job/NAME or svc/NAME")]
    BadTarget(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

/// What to explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Pod(String),
    Deployment(String),
    StatefulSet(String),
    Job(String),
    Service(String),
}

impl FromStr for Target {
    type Err = Error;

    /// `NAME`, `KIND/NAME` or (from the command line) `KIND NAME` joined
    /// with a slash, kubectl's short names and plurals included.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::BadTarget(s.to_string());
        let (kind, name) = s.split_once('/').unwrap_or(("pod", s));
        if name.is_empty() || name.contains('/') {
            return Err(bad());
        }
        let name = name.to_string();
        Ok(match kind.to_ascii_lowercase().as_str() {
            "pod" | "pods" | "po" => Target::Pod(name),
            "deployment" | "deployments" | "deploy" | "deployment.apps" => Target::Deployment(name),
            "statefulset" | "statefulsets" | "sts" | "statefulset.apps" => {
                Target::StatefulSet(name)
            }
            "job" | "jobs" | "job.batch" => Target::Job(name),
            "service" | "services" | "svc" => Target::Service(name),
            _ => return Err(bad()),
        })
    }
}

impl Target {
    fn reference(&self) -> String {
        match self {
            Target::Pod(n) => format!("pod/{n}"),
            Target::Deployment(n) => format!("deployment/{n}"),
            Target::StatefulSet(n) => format!("statefulset/{n}"),
            Target::Job(n) => format!("job/{n}"),
            Target::Service(n) => format!("service/{n}"),
        }
    }
}

/// Explains `target` in namespace `ns`.
pub async fn explain(client: &Client, ns: &str, target: &Target) -> Result<Report, Error> {
    let resolved = gather::resolve(client, ns, target).await?;
    let mut report = Report {
        target: target.reference(),
        namespace: ns.to_string(),
        pod: None,
        status: String::new(),
        timeline: None,
        findings: Vec::new(),
    };
    if let Some((name, selector, matched)) = &resolved.service {
        match selector {
            None => report.findings.push(
                Finding::new(Stage::Service, format!("service {name} has no selector"))
                    .evidence(
                        "its endpoints are whatever EndpointSlices were made for it by hand"
                            .to_string(),
                    )
                    .fix(format!(
                        "kubectl get endpointslices -n {ns} -l kubernetes.io/service-name={name}"
                    )),
            ),
            Some(sel) if *matched == 0 => {
                let pairs: Vec<String> = sel.iter().map(|(k, v)| format!("{k}={v}")).collect();
                report.findings.push(
                    Finding::new(Stage::Service, format!("the selector of service {name} matches no pod"))
                        .evidence(format!("selector: {}", pairs.join(",")))
                        .fix(format!(
                            "compare it with the pods' labels (kubectl get pods -n {ns} --show-labels) and fix \
                             spec.selector of service/{name} or the pods' template labels"
                        )),
                );
            }
            Some(_) => {}
        }
    }
    let Some(pod) = resolved.pod else {
        report.status = match (&resolved.workload, &resolved.service) {
            (Some(w), _) => format!("every pod of {} is available", w.reference()),
            (None, Some((_, _, 0))) => "no pod is selected".to_string(),
            (None, Some((_, _, n))) => format!("{n} pod(s) selected, all Ready"),
            _ => String::new(),
        };
        if let Some(w) = resolved.workload.clone() {
            // A workload with no unavailable pod may still have stopped
            // (a Job that failed and whose pods are gone).
            let facts = Facts {
                workload: Some(w),
                ..Facts::default()
            };
            report.findings.extend(checks::all(&facts));
        }
        return Ok(report);
    };
    let facts = gather::facts(client, pod, resolved.workload).await;
    report.pod = Some(facts.name().to_string());
    report.status = status_line(&facts.pod);
    report.timeline = facts
        .events
        .iter()
        .rev()
        .filter_map(|e| e.message.as_deref())
        .find(|m| m.starts_with("Started in "))
        .map(str::to_string);
    report.findings.extend(diagnose(&facts));
    Ok(report)
}

/// The findings for `facts` (what [`explain`] runs after reading them).
pub fn diagnose(facts: &Facts) -> Vec<Finding> {
    checks::all(facts)
}

/// `phase Running, 1/2 containers ready, 3 restarts, node n1`.
fn status_line(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let statuses = status.container_statuses.unwrap_or_default();
    let ready = statuses.iter().filter(|s| s.ready).count();
    let restarts: i32 = statuses.iter().map(|s| s.restart_count).sum();
    let total = pod.spec.as_ref().map(|s| s.containers.len()).unwrap_or(0);
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "none".into());
    let mut line = format!(
        "phase {}, {ready}/{total} containers ready, {restarts} restart(s), node {node}",
        status.phase.unwrap_or_else(|| "Unknown".into())
    );
    if gather::pod_ready(pod) {
        line.push_str(", Ready");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_as_kubectl_names_them() {
        assert_eq!("web".parse::<Target>().unwrap(), Target::Pod("web".into()));
        assert_eq!(
            "po/web".parse::<Target>().unwrap(),
            Target::Pod("web".into())
        );
        assert_eq!(
            "deploy/web".parse::<Target>().unwrap(),
            Target::Deployment("web".into())
        );
        assert_eq!(
            "statefulset.apps/db".parse::<Target>().unwrap(),
            Target::StatefulSet("db".into())
        );
        assert_eq!(
            "job/once".parse::<Target>().unwrap(),
            Target::Job("once".into())
        );
        assert_eq!(
            "svc/web".parse::<Target>().unwrap(),
            Target::Service("web".into())
        );
        assert!("cm/x".parse::<Target>().is_err());
        assert!("pod/".parse::<Target>().is_err());
        assert!("a/b/c".parse::<Target>().is_err());
    }
}
