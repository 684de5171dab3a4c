//! Each container's own trouble: an image that cannot be pulled, a
//! config it references that is missing, a command that cannot start, an
//! exit that makes it restart (with the end of `logs --previous`), an OOM
//! kill. Restarts a liveness probe caused are the probes check's.

use k8s_openapi::api::core::v1::{Container, ContainerStatus};

use super::{volumes::missing_object, yaml};
use crate::facts::{describe_event, Facts};
use crate::report::{Finding, Stage};

/// Lines of `logs --previous` shown as evidence.
const LOG_LINES: usize = 10;

pub fn check(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    for (init, c, st) in f.containers() {
        let Some(st) = st else { continue };
        if let Some(finding) = waiting(f, init, c, st) {
            out.push(finding);
            continue;
        }
        if let Some(finding) = exited(f, init, c, st) {
            out.push(finding);
        }
    }
    out
}

fn what(init: bool, name: &str) -> String {
    if init {
        format!("init container {name}")
    } else {
        format!("container {name}")
    }
}

fn waiting(f: &Facts, init: bool, c: &Container, st: &ContainerStatus) -> Option<Finding> {
    let w = st.state.as_ref()?.waiting.as_ref()?;
    let reason = w.reason.as_deref().unwrap_or_default();
    let message = w.message.clone().unwrap_or_default();
    let image = c.image.clone().unwrap_or_default();
    let ns = f.namespace();
    let who = what(init, &c.name);
    match reason {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            let mut finding = Finding::new(
                Stage::Image,
                format!("the image {image} of {who} cannot be pulled ({reason})"),
            );
            if !message.is_empty() {
                finding = finding.evidence(format!("waiting {reason}: {message}"));
            }
            if let Some(e) = f.events.iter().rev().find(|e| {
                e.reason.as_deref() == Some("Failed")
                    && e.message.as_deref().is_some_and(|m| m.contains("ull"))
            }) {
                finding = finding.evidence(describe_event(e));
            }
            let all = format!(
                "{message} {}",
                f.events
                    .iter()
                    .filter_map(|e| e.message.as_deref())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let lower = all.to_ascii_lowercase();
            let set_image = format!(
                "kubectl set image {} {}=REPOSITORY:TAG -n {ns}",
                f.owner_ref(),
                c.name
            );
            finding = finding.fix(if reason == "InvalidImageName" {
                format!("{image:?} is not a valid image reference: fix it\n  {set_image}")
            } else if reason == "ErrImageNeverPull" {
                format!(
                    "imagePullPolicy: Never and the image is not on node {}: set imagePullPolicy: IfNotPresent, or load the image on the node",
                    f.node_name()
                )
            } else if lower.contains("unauthorized")
                || lower.contains("authorization")
                || lower.contains("denied")
                || lower.contains(" 401")
                || lower.contains(" 403")
            {
                format!(
                    "the registry refuses to serve the image without credentials: create a pull secret and name it in the pod spec\n  kubectl create secret docker-registry regcred -n {ns} --docker-server=REGISTRY --docker-username=USER --docker-password=PASSWORD\n{}",
                    yaml::block("  imagePullSecrets:", &["- name: regcred".to_string()])
                )
            } else if lower.contains("not found") || lower.contains("manifest unknown") || lower.contains("404") {
                format!("the registry has no {image}: check the repository and tag, then\n  {set_image}")
            } else if lower.contains("connection refused")
                || lower.contains("no such host")
                || lower.contains("timeout")
                || lower.contains("dial tcp")
            {
                format!(
                    "node {} cannot reach the registry of {image}: check the name and the node's network and DNS",
                    f.node_name()
                )
            } else {
                format!("check that {image} exists and the node can pull it; then\n  {set_image}")
            });
            Some(finding)
        }
        "CreateContainerConfigError" => {
            let mut finding =
                Finding::new(Stage::Config, format!("{who} cannot be created: {message}"))
                    .evidence(format!("waiting CreateContainerConfigError: {message}"));
            if let Some((kind, name)) = missing_object(&message) {
                let keys = referenced_keys(c, kind, &name);
                let literals: String = if keys.is_empty() {
                    " --from-literal=KEY=VALUE".into()
                } else {
                    keys.iter()
                        .map(|k| format!(" --from-literal={k}=VALUE"))
                        .collect()
                };
                finding = finding.fix(format!(
                    "create the {kind} it reads\n  kubectl create {} {name} -n {ns}{literals}\nor mark the reference optional: true",
                    if kind == "secret" { "secret generic" } else { "configmap" },
                ));
            } else if let Some(key) = message.strip_prefix("couldn't find key ") {
                let key = key.split_whitespace().next().unwrap_or_default();
                finding = finding.fix(format!(
                    "add key {key} to it (kubectl edit), or mark the reference optional: true in {}'s pod spec",
                    f.owner_ref()
                ));
            } else {
                finding = finding.fix(format!(
                    "fix the container's env, envFrom or volumeMounts in {}",
                    f.owner_ref()
                ));
            }
            Some(finding)
        }
        "CreateContainerError" | "RunContainerError" | "StartError" => {
            let mut finding = Finding::new(Stage::Start, format!("{who} cannot start ({reason})"))
                .evidence(format!("waiting {reason}: {message}"));
            if message.contains("executable file not found")
                || message.contains("no such file or directory")
            {
                finding = finding.fix(format!(
                    "the command does not exist in the image {image}: fix spec.containers[{}].command/args of {}",
                    c.name,
                    f.owner_ref()
                ));
            } else {
                finding = finding.fix(format!(
                    "see the message above; fix {}'s spec for {}",
                    f.owner_ref(),
                    c.name
                ));
            }
            Some(finding)
        }
        _ => None,
    }
}

/// The keys a container's env reads from the ConfigMap or Secret `name`.
fn referenced_keys(c: &Container, kind: &str, name: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for e in c.env.iter().flatten() {
        let Some(from) = e.value_from.as_ref() else {
            continue;
        };
        let key = if kind == "configmap" {
            from.config_map_key_ref
                .as_ref()
                .filter(|r| r.name == name)
                .map(|r| r.key.clone())
        } else {
            from.secret_key_ref
                .as_ref()
                .filter(|r| r.name == name)
                .map(|r| r.key.clone())
        };
        if let Some(k) = key {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    keys
}

/// Whether a liveness or startup probe killed this container.
pub(super) fn killed_by_probe(f: &Facts, name: &str) -> bool {
    f.events_with("Killing").iter().any(|e| {
        let m = e.message.as_deref().unwrap_or_default();
        m.contains(&format!("Container {name} failed")) && m.contains("probe")
    })
}

fn exited(f: &Facts, init: bool, c: &Container, st: &ContainerStatus) -> Option<Finding> {
    let current = st.state.as_ref().and_then(|s| s.terminated.as_ref());
    let last = st.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let waiting = st.state.as_ref().and_then(|s| s.waiting.as_ref());
    let crash_loop = waiting.and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff");
    // The run that ended: the current state if it is terminated, else
    // the last one.
    let t = current.or(last)?;
    let oom = t.reason.as_deref() == Some("OOMKilled");
    if !oom && !crash_loop && current.is_none_or(|t| t.exit_code == 0) {
        return None;
    }
    let who = what(init, &c.name);
    let reason = t.reason.as_deref().unwrap_or("Error");
    if reason == "OOMKilled" {
        let limit = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get("memory"))
            .map(|q| q.0.clone());
        let mut finding = Finding::new(
            Stage::OutOfMemory,
            format!("{who} was killed for using more memory than its limit (OOMKilled)"),
        )
        .evidence(format!(
            "last terminated: OOMKilled, exit code {}, {} restart(s)",
            t.exit_code, st.restart_count
        ));
        finding = match &limit {
            Some(l) => finding.evidence(format!("resources.limits.memory: {l}")).fix(format!(
                "raise the limit above what the program needs (or make it use less), e.g. twice it:\n{}",
                yaml::block("  resources:", &["limits:".into(), format!("  memory: {}", doubled(l))])
            )),
            None => finding.fix(
                "the node ran out of memory for it: set resources.requests.memory and limits.memory near its real use"
                    .to_string(),
            ),
        };
        return Some(finding);
    }
    if killed_by_probe(f, &c.name) && !init {
        return None;
    }
    let stage = if init { Stage::Init } else { Stage::Crash };
    let mut finding = Finding::new(
        stage,
        format!(
            "{who} exits with code {} ({reason}){}",
            t.exit_code,
            if st.restart_count > 0 {
                format!(", restarted {} time(s)", st.restart_count)
            } else {
                String::new()
            }
        ),
    );
    if let Some(w) = waiting.filter(|_| crash_loop) {
        finding = finding.evidence(format!(
            "waiting CrashLoopBackOff: {}",
            w.message.as_deref().unwrap_or_default()
        ));
    }
    let logs = f
        .previous_logs
        .get(&c.name)
        .cloned()
        .or_else(|| t.message.clone())
        .unwrap_or_default();
    let tail: Vec<&str> = logs
        .lines()
        .rev()
        .take(LOG_LINES)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if tail.is_empty() {
        finding = finding.evidence("logs --previous: (empty)".to_string());
    } else {
        finding = finding.evidence(format!(
            "logs --previous (last {} lines):\n{}",
            tail.len(),
            tail.join("\n")
        ));
    }
    let missing = missing_env(c, &logs);
    finding = if !missing.is_empty() {
        let lines: Vec<String> = missing
            .iter()
            .flat_map(|v| [format!("- name: {v}"), "  value: VALUE".to_string()])
            .collect();
        finding.fix(format!(
            "it stops on environment variable(s) it does not have: {}; set them\n  kubectl set env {} -n {} {}\nor in the container's spec:\n{}",
            missing.join(", "),
            f.owner_ref(),
            f.namespace(),
            missing.iter().map(|v| format!("{v}=VALUE")).collect::<Vec<_>>().join(" "),
            yaml::block("  env:", &lines)
        ))
    } else if t.exit_code == 127 || (logs.contains("not found") && logs.contains("sh:")) {
        finding.fix(format!(
            "a command it runs is not in the image: fix command/args of {} in {}",
            c.name,
            f.owner_ref()
        ))
    } else if t.exit_code == 126 {
        finding.fix(format!(
            "the command is not executable: fix command/args of {} or the file's mode",
            c.name
        ))
    } else {
        finding.fix(format!(
            "the program ends with an error: read its logs (kubectl logs {} -c {} -n {} --previous) and fix its command, args, env or config",
            f.name(),
            c.name,
            f.namespace()
        ))
    };
    Some(finding)
}

/// Environment variables the logs complain about that the container does
/// not set: UPPER_CASE words on a line that says not set, unset,
/// undefined, missing, required or unbound.
fn missing_env(c: &Container, logs: &str) -> Vec<String> {
    let defined: Vec<&str> = c.env.iter().flatten().map(|e| e.name.as_str()).collect();
    let mut out = Vec::new();
    for line in logs.lines() {
        let lower = line.to_ascii_lowercase();
        let complains = [
            "not set",
            "unset",
            "undefined",
            "missing",
            "required",
            "unbound variable",
            "must be set",
            "is empty",
        ]
        .iter()
        .any(|p| lower.contains(p));
        if !complains {
            continue;
        }
        for word in line.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')) {
            let word = word.trim_start_matches('$');
            let upper = word.len() >= 3
                && word.starts_with(|ch: char| ch.is_ascii_uppercase())
                && word
                    .chars()
                    .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_');
            if upper
                && !defined.contains(&word)
                && !out.iter().any(|o| o == word)
                && !["ERROR", "FATAL", "WARN", "INFO"].contains(&word)
            {
                out.push(word.to_string());
            }
        }
    }
    out
}

/// A memory quantity doubled, in the same unit when it has a binary one.
fn doubled(q: &str) -> String {
    for unit in ["Ki", "Mi", "Gi", "Ti", "k", "M", "G", "T"] {
        if let Some(n) = q.strip_suffix(unit).and_then(|n| n.parse::<u64>().ok()) {
            return format!("{}{unit}", n * 2);
        }
    }
    q.parse::<u64>()
        .map(|n| (n * 2).to_string())
        .unwrap_or_else(|_| q.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_env_names_the_variables_the_logs_miss() {
        let c = Container {
            name: "app".into(),
            env: Some(vec![k8s_openapi::api::core::v1::EnvVar {
                name: "PORT".into(),
                value: Some("80".into()),
                value_from: None,
            }]),
            ..Container::default()
        };
        let logs = "starting\nsh: DATABASE_URL: parameter not set\nERROR: PORT is required\n";
        assert_eq!(missing_env(&c, logs), vec!["DATABASE_URL"]);
        assert_eq!(missing_env(&c, "all good\n"), Vec::<String>::new());
    }

    #[test]
    fn memory_doubles_in_its_unit() {
        assert_eq!(doubled("64Mi"), "128Mi");
        assert_eq!(doubled("1G"), "2G");
        assert_eq!(doubled("1000"), "2000");
    }
}
