//! CRI configs from a Pod: the sandbox's (metadata, hostname, log dir,
//! namespaces, port mappings, labels) and each container's (image,
//! command, args, env, working dir, resources, security, log path), with
//! the labels and annotations adoption reads back ([`crate::observed`]).
//! Pure: no I/O.

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::logs;
use crate::observed::{
    CONTAINER_HASH, CONTAINER_NAME, GRACE_PERIOD, POD_NAME, POD_NAMESPACE, POD_UID, RESTART_COUNT,
};
use crate::podspec::{container_hash, grace_period, host_network, quantity_milli, quantity_value};
use crate::runtime::api;

fn meta(pod: &Pod) -> (&str, &str, &str) {
    (
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default(),
    )
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

/// The paths the kubelet masks and makes read-only in unprivileged
/// containers (upstream's securitycontext defaults for procMount Default).
const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];
const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

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

/// The sandbox config for `pod`'s sandbox number `attempt`.
pub fn sandbox_config(
    pod: &Pod,
    attempt: u32,
    log_root: &Path,
    cluster_domain: &str,
) -> api::PodSandboxConfig {
    let (ns, name, uid) = meta(pod);
    let spec = pod.spec.as_ref();
    let hostname = if host_network(pod) {
        // runc refuses a hostname without a private UTS namespace.
        String::new()
    } else {
        super::dns::sandbox_hostname(pod, cluster_domain)
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
                capabilities: sc.and_then(|s| s.capabilities.as_ref()).map(|caps| {
                    api::Capability {
                        add_capabilities: caps.add.clone().unwrap_or_default(),
                        drop_capabilities: caps.drop.clone().unwrap_or_default(),
                        ..Default::default()
                    }
                }),
                supplemental_groups: pod_sc
                    .and_then(|s| s.supplemental_groups.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .chain(pod_sc.and_then(|s| s.fs_group))
                    .collect(),
                masked_paths: if sc.and_then(|s| s.privileged).unwrap_or(false) {
                    vec![]
                } else {
                    MASKED_PATHS.iter().map(|p| p.to_string()).collect()
                },
                readonly_paths: if sc.and_then(|s| s.privileged).unwrap_or(false) {
                    vec![]
                } else {
                    READONLY_PATHS.iter().map(|p| p.to_string()).collect()
                },
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

/// Puts a container in the process namespace of container `target_id`
/// (an ephemeral container's `targetContainerName`: CRI's TARGET mode),
/// unless the pod's containers already share the pod's or the node's.
pub fn target_pid_namespace(config: &mut api::ContainerConfig, target_id: &str) {
    let Some(ns) = config
        .linux
        .as_mut()
        .and_then(|l| l.security_context.as_mut())
        .and_then(|s| s.namespace_options.as_mut())
    else {
        return;
    };
    if ns.pid == api::NamespaceMode::Container as i32 {
        ns.pid = api::NamespaceMode::Target as i32;
        ns.target_id = target_id.to_string();
    }
}

/// The image's user as the kubelet reads it: its uid, else its
/// non-numeric name, else root.
pub fn image_user(image: Option<&api::Image>) -> (Option<i64>, String) {
    match image {
        Some(i) if i.uid.is_some() => (i.uid.as_ref().map(|u| u.value), String::new()),
        Some(i) if !i.username.is_empty() => (None, i.username.clone()),
        _ => (Some(0), String::new()),
    }
}

/// runAsNonRoot as the kubelet enforces it (verifyRunAsNonRoot), with
/// the image's user from [`image_user`]; the error is the
/// CreateContainerConfigError message.
pub fn verify_run_as_non_root(
    pod: &Pod,
    c: &Container,
    image_uid: Option<i64>,
    image_username: &str,
) -> Result<(), String> {
    let sc = c.security_context.as_ref();
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    if !non_root {
        return Ok(());
    }
    let who = crate::podspec::pod_ref(pod);
    let user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    match (user, image_uid) {
        (Some(0), _) => Err(format!(
            "container's runAsUser breaks non-root policy (pod: {who:?}, container: {})",
            c.name
        )),
        (Some(_), _) => Ok(()),
        (None, Some(0)) => Err(format!(
            "container has runAsNonRoot and image will run as root (pod: {who:?}, container: {})",
            c.name
        )),
        (None, None) if !image_username.is_empty() => Err(format!(
            "container has runAsNonRoot and image has non-numeric user ({image_username}), cannot verify user is non-root (pod: {who:?}, container: {})",
            c.name
        )),
        _ => Ok(()),
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
        let s = sandbox_config(&pod(), 2, Path::new("/logs"), "cluster.local");
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

    #[test]
    fn an_ephemeral_target_joins_that_containers_process_namespace() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let pid = |cfg: &api::ContainerConfig| {
            let ns = cfg
                .linux
                .as_ref()
                .unwrap()
                .security_context
                .as_ref()
                .unwrap()
                .namespace_options
                .clone()
                .unwrap();
            (ns.pid, ns.target_id, ns.network, ns.ipc)
        };
        let mut cfg = container_config(&p, c, 0, "busybox");
        target_pid_namespace(&mut cfg, "abc");
        assert_eq!(
            pid(&cfg),
            (
                api::NamespaceMode::Target as i32,
                "abc".to_string(),
                api::NamespaceMode::Pod as i32,
                api::NamespaceMode::Pod as i32
            )
        );
        // A pod that shares one process namespace keeps it.
        let mut shared = p.clone();
        shared.spec.as_mut().unwrap().share_process_namespace = Some(true);
        let mut cfg = container_config(&shared, c, 0, "busybox");
        target_pid_namespace(&mut cfg, "abc");
        assert_eq!(pid(&cfg).0, api::NamespaceMode::Pod as i32);
    }

    #[test]
    fn run_as_non_root_as_the_kubelet_checks_it() {
        let mut p = pod();
        p.spec.as_mut().unwrap().security_context =
            Some(serde_json::from_value(serde_json::json!({"runAsNonRoot": true})).unwrap());
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let (uid, name) = image_user(None);
        assert_eq!(
            verify_run_as_non_root(&p, &c, uid, &name).unwrap_err(),
            "container has runAsNonRoot and image will run as root (pod: \"web_ns(u1)\", container: c)"
        );
        let named = api::Image {
            username: "app".into(),
            ..Default::default()
        };
        let (uid, name) = image_user(Some(&named));
        assert!(verify_run_as_non_root(&p, &c, uid, &name)
            .unwrap_err()
            .contains("image has non-numeric user (app), cannot verify user is non-root"));
        let mut c1000 = c.clone();
        c1000.security_context =
            Some(serde_json::from_value(serde_json::json!({"runAsUser": 1000})).unwrap());
        assert!(verify_run_as_non_root(&p, &c1000, Some(0), "").is_ok());
        let mut c0 = c.clone();
        c0.security_context =
            Some(serde_json::from_value(serde_json::json!({"runAsUser": 0})).unwrap());
        assert!(verify_run_as_non_root(&p, &c0, None, "")
            .unwrap_err()
            .starts_with("container's runAsUser breaks non-root policy"));
    }
}
