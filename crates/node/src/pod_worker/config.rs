//! CRI configs from a Pod: the sandbox's (metadata, hostname, log dir,
//! namespaces, port mappings, labels) and each container's (image,
//! command, args, env, working dir, resources, security, log path), with
//! the labels and annotations adoption reads back ([`super::observed`]).
//! Pure: no I/O.

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::actions::container_hash;
use super::observed::{
    CONTAINER_HASH, CONTAINER_NAME, GRACE_PERIOD, POD_NAME, POD_NAMESPACE, POD_UID, RESTART_COUNT,
};
use crate::logs;
use crate::runtime::api;

fn meta(pod: &Pod) -> (&str, &str, &str) {
    (
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default(),
    )
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

fn pod_labels(pod: &Pod) -> HashMap<String, String> {
    let (ns, name, uid) = meta(pod);
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    labels.insert(POD_NAME.into(), name.into());
    labels.insert(POD_NAMESPACE.into(), ns.into());
    labels.insert(POD_UID.into(), uid.into());
    labels
}

/// Annotations with the container's termination message settings (upstream's).
pub const TERMINATION_MESSAGE_PATH: &str = "io.kubernetes.container.terminationMessagePath";
pub const TERMINATION_MESSAGE_POLICY: &str = "io.kubernetes.container.terminationMessagePolicy";

/// The grace period the pod's containers get when it is deleted.
pub fn grace_period(pod: &Pod) -> i64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0)
}

fn namespaces(pod: &Pod) -> api::NamespaceOption {
    let spec = pod.spec.as_ref();
    let shared_pid = spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false);
    let host_pid = spec.and_then(|s| s.host_pid).unwrap_or(false);
    let host_ipc = spec.and_then(|s| s.host_ipc).unwrap_or(false);
    api::NamespaceOption {
        network: if host_network(pod) {
            api::NamespaceMode::Node
        } else {
            api::NamespaceMode::Pod
        } as i32,
        pid: if host_pid {
            api::NamespaceMode::Node
        } else if shared_pid {
            api::NamespaceMode::Pod
        } else {
            // Absent, containerd would default to POD: say CONTAINER.
            api::NamespaceMode::Container
        } as i32,
        ipc: if host_ipc {
            api::NamespaceMode::Node
        } else {
            api::NamespaceMode::Pod
        } as i32,
        ..Default::default()
    }
}

fn protocol(p: Option<&str>) -> i32 {
    match p {
        Some("UDP") => api::Protocol::Udp as i32,
        Some("SCTP") => api::Protocol::Sctp as i32,
        _ => api::Protocol::Tcp as i32,
    }
}

/// At most 63 bytes, without a trailing `-` or `.` (upstream's
/// truncatePodHostnameIfNeeded): sethostname refuses longer names.
fn truncate_hostname(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_string();
    }
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

/// The sandbox config for `pod`'s sandbox number `attempt`.
pub fn sandbox_config(pod: &Pod, attempt: u32, log_root: &Path) -> api::PodSandboxConfig {
    let (ns, name, uid) = meta(pod);
    let spec = pod.spec.as_ref();
    let hostname = if host_network(pod) {
        // runc refuses a hostname without a private UTS namespace.
        String::new()
    } else {
        let full = spec
            .and_then(|s| s.hostname.clone())
            .unwrap_or_else(|| name.to_string());
        truncate_hostname(&full)
    };
    let port_mappings = spec
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let host_port = p.host_port.filter(|h| *h > 0)?;
            Some(api::PortMapping {
                protocol: protocol(p.protocol.as_deref()),
                container_port: p.container_port,
                host_port,
                host_ip: p.host_ip.clone().unwrap_or_default(),
            })
        })
        .collect();
    let mut annotations: HashMap<String, String> = pod
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    annotations.insert(GRACE_PERIOD.into(), grace_period(pod).to_string());
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: name.into(),
            uid: uid.into(),
            namespace: ns.into(),
            attempt,
        }),
        hostname,
        log_directory: logs::pod_log_dir(log_root, ns, name, uid)
            .display()
            .to_string(),
        dns_config: None,
        port_mappings,
        labels: pod_labels(pod),
        annotations,
        linux: Some(api::LinuxPodSandboxConfig {
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(namespaces(pod)),
                privileged: spec
                    .map(|s| {
                        s.containers.iter().any(|c| {
                            c.security_context
                                .as_ref()
                                .and_then(|s| s.privileged)
                                .unwrap_or(false)
                        })
                    })
                    .unwrap_or(false),
                ..Default::default()
            }),
            ..Default::default()
        }),
        windows: None,
    }
}

pub(crate) type Resources =
    std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>;

/// A resource's quantity, parsed with `parse` (milli-units or whole units).
fn quantity(
    resources: Option<&Resources>,
    name: &str,
    parse: fn(&str) -> skiff_api::quantity::Result<i64>,
) -> Option<i64> {
    resources?.get(name).and_then(|q| parse(&q.0).ok())
}

pub(crate) fn quantity_milli(resources: Option<&Resources>, name: &str) -> Option<i64> {
    quantity(resources, name, skiff_api::quantity::parse_milli)
}

pub(crate) fn quantity_value(resources: Option<&Resources>, name: &str) -> Option<i64> {
    quantity(resources, name, skiff_api::quantity::parse_value)
}

/// cgroup settings from requests and limits, as the kubelet computes them.
fn resources(c: &Container) -> api::LinuxContainerResources {
    let r = c.resources.as_ref();
    let requests = r.and_then(|r| r.requests.as_ref());
    let limits = r.and_then(|r| r.limits.as_ref());
    let cpu_request = quantity_milli(requests, "cpu").or_else(|| quantity_milli(limits, "cpu"));
    let cpu_limit = quantity_milli(limits, "cpu");
    // shares: milliCPU * 1024 / 1000, at least 2 (upstream's MilliCPUToShares).
    let shares = cpu_request.map(|m| (m * 1024 / 1000).max(2)).unwrap_or(2);
    let period = 100_000;
    let quota = cpu_limit
        .map(|m| (m * period / 1000).max(1000))
        .unwrap_or(0);
    api::LinuxContainerResources {
        cpu_period: if quota > 0 { period } else { 0 },
        cpu_quota: quota,
        cpu_shares: shares,
        memory_limit_in_bytes: quantity_value(limits, "memory").unwrap_or(0),
        oom_score_adj: 0,
        ..Default::default()
    }
}

fn env(c: &Container) -> Vec<api::KeyValue> {
    c.env
        .iter()
        .flatten()
        .map(|e| api::KeyValue {
            key: e.name.clone(),
            value: e.value.clone().unwrap_or_default(),
        })
        .collect()
}

/// The config for instance `restart` of container `c`.
pub fn container_config(
    pod: &Pod,
    c: &Container,
    restart: u32,
    image: &str,
) -> api::ContainerConfig {
    let (ns, name, uid) = meta(pod);
    let mut labels = HashMap::new();
    labels.insert(POD_NAME.to_string(), name.to_string());
    labels.insert(POD_NAMESPACE.to_string(), ns.to_string());
    labels.insert(POD_UID.to_string(), uid.to_string());
    labels.insert(CONTAINER_NAME.to_string(), c.name.clone());
    let mut annotations = HashMap::new();
    annotations.insert(RESTART_COUNT.to_string(), restart.to_string());
    annotations.insert(CONTAINER_HASH.to_string(), container_hash(c));
    annotations.insert(GRACE_PERIOD.to_string(), grace_period(pod).to_string());
    annotations.insert(
        TERMINATION_MESSAGE_POLICY.into(),
        c.termination_message_policy
            .clone()
            .unwrap_or_else(|| "File".into()),
    );
    annotations.insert(
        TERMINATION_MESSAGE_PATH.into(),
        c.termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into()),
    );
    let sc = c.security_context.as_ref();
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group));
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: c.name.clone(),
            attempt: restart,
        }),
        image: Some(api::ImageSpec {
            image: image.to_string(),
            ..Default::default()
        }),
        command: c.command.clone().unwrap_or_default(),
        args: c.args.clone().unwrap_or_default(),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: env(c),
        labels,
        annotations,
        log_path: logs::container_log_file(&c.name, restart)
            .display()
            .to_string(),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(api::LinuxContainerConfig {
            resources: Some(resources(c)),
            security_context: Some(api::LinuxContainerSecurityContext {
                namespace_options: Some(namespaces(pod)),
                privileged: sc.and_then(|s| s.privileged).unwrap_or(false),
                readonly_rootfs: sc
                    .and_then(|s| s.read_only_root_filesystem)
                    .unwrap_or(false),
                run_as_user: run_as_user.map(|value| api::Int64Value { value }),
                run_as_group: run_as_group.map(|value| api::Int64Value { value }),
                no_new_privs: sc
                    .and_then(|s| s.allow_privilege_escalation)
                    .is_some_and(|a| !a),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1", "labels": {"app": "w"}},
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "c", "image": "busybox", "command": ["sh"], "args": ["-c", "x"],
                    "env": [{"name": "A", "value": "1"}],
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m", "memory": "64Mi"}}
                }]
            }
        }))
        .unwrap()
    }

    #[test]
    fn sandbox_carries_identity_hostname_and_ports() {
        let s = sandbox_config(&pod(), 2, Path::new("/logs"));
        let m = s.metadata.unwrap();
        assert_eq!(
            (
                m.name.as_str(),
                m.namespace.as_str(),
                m.uid.as_str(),
                m.attempt
            ),
            ("web", "ns", "u1", 2)
        );
        assert_eq!(s.hostname, "web");
        assert_eq!(s.log_directory, "/logs/ns_web_u1");
        assert_eq!(s.port_mappings.len(), 1);
        assert_eq!(s.port_mappings[0].host_port, 8080);
        assert_eq!(s.labels[POD_UID], "u1");
        assert_eq!(s.labels["app"], "w");
        assert_eq!(s.annotations[GRACE_PERIOD], "5");
    }

    #[test]
    fn long_hostnames_are_cut_to_63() {
        let name = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(truncate_hostname(&name), "a".repeat(62));
        assert_eq!(truncate_hostname("web"), "web");
    }

    #[test]
    fn container_has_command_env_resources_and_log_path() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let cfg = container_config(&p, c, 3, "docker.io/library/busybox:latest");
        assert_eq!(cfg.command, ["sh"]);
        assert_eq!(cfg.args, ["-c", "x"]);
        assert_eq!(cfg.envs[0].key, "A");
        assert_eq!(cfg.log_path, "c/3.log");
        assert_eq!(cfg.annotations[RESTART_COUNT], "3");
        let r = cfg.linux.unwrap().resources.unwrap();
        assert_eq!(r.cpu_shares, 256);
        assert_eq!(r.cpu_quota, 50_000);
        assert_eq!(r.memory_limit_in_bytes, 64 * 1024 * 1024);
    }
}
