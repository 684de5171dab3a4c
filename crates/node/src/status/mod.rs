//! A pod's status from what the runtime has (upstream's
//! `generateAPIPodStatus` and `getPhase`): containerStatuses (state,
//! lastState, restartCount, IDs), ephemeralContainerStatuses, phase,
//! the pod conditions, IPs and startTime. Pure: the worker passes the
//! pod, the runtime's view, the waiting reasons of its last sync and the
//! time; patching is the worker's, and only when the result differs from
//! the pod's status, through the [`manager`] that writes statuses in the
//! background, over the [`api::PodApi`] seam. [`Waiting`] (why a
//! container is not running yet) is what the worker hands in for each
//! container it could not start.

pub mod api;
pub mod manager;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, Pod, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::observed::{Container, PodRuntime, State};

/// Why a container cannot start yet: its waiting reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

impl Waiting {
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// What besides the runtime decides a status.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// Per container name: why it is waiting, from the last sync.
    pub waiting: &'a BTreeMap<String, Waiting>,
    /// The node's IP (hostIP; podIP for hostNetwork pods).
    pub node_ip: &'a str,
    pub now: Timestamp,
    /// Probe results; without them a running container is started and
    /// ready.
    pub probes: Option<&'a crate::prober::Prober>,
}

fn time_of(nanos: i64) -> Option<Time> {
    if nanos <= 0 {
        return None;
    }
    // The API keeps seconds.
    Timestamp::from_second(nanos / 1_000_000_000).ok().map(Time)
}

fn container_id(c: &Container) -> String {
    format!("containerd://{}", c.id)
}

fn terminated(c: &Container) -> ContainerStateTerminated {
    let reason = if !c.reason.is_empty() {
        c.reason.clone()
    } else if c.exit_code == 0 {
        "Completed".into()
    } else {
        "Error".into()
    };
    ContainerStateTerminated {
        exit_code: c.exit_code,
        reason: Some(reason),
        message: (!c.message.is_empty()).then(|| c.message.clone()),
        started_at: time_of(c.started_at),
        finished_at: time_of(c.finished_at),
        container_id: Some(container_id(c)),
        signal: None,
    }
}

fn waiting(reason: &str, message: Option<&str>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: message.map(str::to_string),
        }),
        ..Default::default()
    }
}

fn terminated_state(c: &Container) -> ContainerState {
    ContainerState {
        terminated: Some(terminated(c)),
        ..Default::default()
    }
}

/// The status of every container of the spec, in spec order.
pub fn container_statuses(pod: &Pod, rt: &PodRuntime, inputs: &Inputs<'_>) -> Vec<ContainerStatus> {
    let specs = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    // While init containers run, the main ones wait in PodInitializing.
    let not_yet = if init_incomplete(pod, rt, inputs.probes).is_empty() {
        "ContainerCreating"
    } else {
        "PodInitializing"
    };
    statuses_of(specs, rt, inputs, not_yet)
}

/// The init containers' statuses: an init container is ready once it
/// exited 0; a sidecar is started while it runs once its startup probe
/// passed, and ready once started and its readiness probe passes, as a
/// main container (upstream's prober manager `UpdatePodStatus`).
pub fn init_container_statuses(
    pod: &Pod,
    rt: &PodRuntime,
    inputs: &Inputs<'_>,
) -> Vec<ContainerStatus> {
    let specs = crate::podspec::init_containers(pod);
    let mut statuses = statuses_of(specs, rt, inputs, "PodInitializing");
    for (status, spec) in statuses.iter_mut().zip(specs) {
        let state = status.state.clone().unwrap_or_default();
        status.ready = if crate::podspec::is_sidecar(spec) {
            state.running.is_some() && status.ready
        } else {
            state.terminated.as_ref().is_some_and(|t| t.exit_code == 0)
        };
    }
    statuses
}

/// The ephemeral containers' statuses, in spec order: as any container's
/// (waiting in ContainerCreating until their one run), never ready; none
/// when the pod has none.
pub fn ephemeral_container_statuses(
    pod: &Pod,
    rt: &PodRuntime,
    inputs: &Inputs<'_>,
) -> Option<Vec<ContainerStatus>> {
    let specs = crate::podspec::ephemeral_containers(pod);
    if specs.is_empty() {
        return None;
    }
    // They have no probes: started once running.
    let inputs = Inputs {
        probes: None,
        ..inputs.clone()
    };
    let mut statuses = statuses_of(&specs, rt, &inputs, "ContainerCreating");
    for s in &mut statuses {
        s.ready = false;
    }
    Some(statuses)
}

/// The init containers that have not finished (sidecars: not started:
/// running, and past their startup probe when `probes` are known), in
/// order; empty once the pod is initialized.
pub fn init_incomplete<'a>(
    pod: &'a Pod,
    rt: &PodRuntime,
    probes: Option<&crate::prober::Prober>,
) -> Vec<&'a str> {
    let sandbox = rt.ready_sandbox().map(|s| s.id.as_str());
    let mut out = vec![];
    for c in crate::podspec::init_containers(pod) {
        let latest = rt.containers.iter().find(|x| {
            x.name == c.name && (sandbox.is_none() || Some(x.sandbox_id.as_str()) == sandbox)
        });
        let done = match latest {
            Some(l) if crate::podspec::is_sidecar(c) => {
                l.state == State::Running && probes.is_none_or(|p| p.started(c, &l.id))
            }
            Some(l) => l.state == State::Exited && l.exit_code == 0,
            None => false,
        };
        if !done {
            out.push(c.name.as_str());
        }
    }
    out
}

fn statuses_of(
    specs: &[k8s_openapi::api::core::v1::Container],
    rt: &PodRuntime,
    inputs: &Inputs<'_>,
    not_yet: &str,
) -> Vec<ContainerStatus> {
    specs
        .iter()
        .map(|spec| {
            let image = spec.image.clone().unwrap_or_default();
            let why = inputs.waiting.get(&spec.name);
            let latest = rt.latest(&spec.name);
            let mut status = ContainerStatus {
                name: spec.name.clone(),
                image: image.clone(),
                image_id: String::new(),
                ready: false,
                restart_count: latest.map(|l| l.restart_count as i32).unwrap_or(0),
                started: Some(false),
                ..Default::default()
            };
            match latest {
                None => {
                    status.state = Some(match why {
                        Some(w) => waiting(
                            &w.reason,
                            Some(&w.message)
                                .filter(|m| !m.is_empty())
                                .map(|m| m.as_str()),
                        ),
                        None => waiting(not_yet, None),
                    });
                }
                Some(l) => {
                    status.container_id = Some(container_id(l));
                    status.image_id = l.image_ref.clone();
                    let previous = rt.previous(&spec.name);
                    match l.state {
                        State::Running => {
                            status.state = Some(ContainerState {
                                running: Some(ContainerStateRunning {
                                    started_at: time_of(l.started_at),
                                }),
                                ..Default::default()
                            });
                            // Started once the startup probe passed; ready
                            // once the readiness probe does (without probes:
                            // once running).
                            let (started, ready) = match inputs.probes {
                                Some(p) => (p.started(spec, &l.id), p.ready(spec, &l.id)),
                                None => (true, true),
                            };
                            status.started = Some(started);
                            status.ready = ready;
                            status.last_state = previous.map(terminated_state);
                        }
                        State::Exited => match why {
                            // It will be started again: waiting, with this
                            // run as its last state.
                            Some(w) => {
                                status.state = Some(waiting(
                                    &w.reason,
                                    Some(w.message.as_str()).filter(|m| !m.is_empty()),
                                ));
                                status.last_state = Some(terminated_state(l));
                            }
                            None => {
                                status.state = Some(terminated_state(l));
                                status.last_state = previous.map(terminated_state);
                            }
                        },
                        State::Created | State::Unknown => {
                            status.state = Some(match why {
                                Some(w) => waiting(
                                    &w.reason,
                                    Some(w.message.as_str()).filter(|m| !m.is_empty()),
                                ),
                                None => waiting("ContainerCreating", None),
                            });
                            status.last_state = previous.map(terminated_state);
                        }
                    }
                }
            }
            if status.last_state.is_none() {
                status.last_state = Some(ContainerState::default());
            }
            status
        })
        .collect()
}

/// The pod's phase from its containers (upstream's `getPhase`).
pub fn phase(pod: &Pod, statuses: &[ContainerStatus]) -> &'static str {
    let policy = crate::podspec::restart_policy(pod);
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for s in statuses {
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = state.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            let has_run = s
                .last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some());
            if has_run {
                stopped += 1;
            } else {
                waiting += 1;
            }
        } else {
            waiting += 1;
        }
    }
    if statuses.is_empty() || waiting > 0 {
        return "Pending";
    }
    if running > 0 {
        return "Running";
    }
    if stopped > 0 {
        return match policy {
            "Always" => "Running",
            "OnFailure" => {
                if stopped == succeeded {
                    "Succeeded"
                } else {
                    "Running"
                }
            }
            _ => {
                if stopped == succeeded {
                    "Succeeded"
                } else {
                    "Failed"
                }
            }
        };
    }
    "Pending"
}

fn condition(
    existing: &[PodCondition],
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: Timestamp,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let since = existing
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message,
        last_transition_time: Some(since),
        last_probe_time: None,
        observed_generation: None,
    }
}

/// The conditions the kubelet owns.
const KUBELET_CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
];

/// The status of a pod whose containers have all been stopped for its
/// deletion: terminal, Succeeded only if every container exited 0 (as
/// upstream reports a terminating pod's final status).
pub fn terminal_status(pod: &Pod, rt: &PodRuntime, inputs: &Inputs<'_>) -> PodStatus {
    let mut status = pod_status(pod, rt, inputs);
    let all_ok = status.container_statuses.iter().flatten().all(|c| {
        c.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0)
    });
    status.phase = Some(if all_ok { "Succeeded" } else { "Failed" }.to_string());
    status
}

/// The whole status the agent reports for `pod`.
pub fn pod_status(pod: &Pod, rt: &PodRuntime, inputs: &Inputs<'_>) -> PodStatus {
    let current = pod.status.clone().unwrap_or_default();
    let existing = current.conditions.clone().unwrap_or_default();
    let statuses = container_statuses(pod, rt, inputs);
    let init_statuses = init_container_statuses(pod, rt, inputs);
    let incomplete = init_incomplete(pod, rt, inputs.probes);
    let init_failed = crate::podspec::restart_policy(pod) == "Never"
        && init_statuses.iter().any(|s| {
            s.state
                .as_ref()
                .and_then(|st| st.terminated.as_ref())
                .is_some_and(|t| t.exit_code != 0)
        });
    let phase = if init_failed {
        "Failed"
    } else if !incomplete.is_empty() {
        "Pending"
    } else {
        phase(pod, &statuses)
    };
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let sandbox = rt.ready_sandbox();
    let pod_ip = if host_network {
        sandbox.map(|_| inputs.node_ip.to_string())
    } else {
        sandbox
            .and_then(|s| s.ip.clone())
            .filter(|ip| !ip.is_empty())
    }
    // Once known, an IP stays reported while the pod finishes.
    .or_else(|| {
        matches!(phase, "Succeeded" | "Failed")
            .then(|| current.pod_ip.clone())
            .flatten()
    });
    // Sidecars count too, before the main containers (upstream's
    // GenerateContainersReadyCondition).
    let sidecars = crate::podspec::init_containers(pod)
        .iter()
        .zip(&init_statuses)
        .filter(|(spec, _)| crate::podspec::is_sidecar(spec))
        .map(|(_, s)| s);
    let unready: Vec<&str> = sidecars
        .chain(&statuses)
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let completed = matches!(phase, "Succeeded" | "Failed");
    let (ready_reason, ready_message) = if completed {
        (Some("PodCompleted"), None)
    } else if unready.is_empty() {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let all_ready = unready.is_empty() && !completed;
    let mut conditions = vec![
        condition(
            &existing,
            "PodReadyToStartContainers",
            sandbox.is_some(),
            None,
            None,
            inputs.now,
        ),
        if incomplete.is_empty() {
            condition(&existing, "Initialized", true, None, None, inputs.now)
        } else {
            condition(
                &existing,
                "Initialized",
                false,
                Some("ContainersNotInitialized"),
                Some(format!(
                    "containers with incomplete status: [{}]",
                    incomplete.join(" ")
                )),
                inputs.now,
            )
        },
        condition(
            &existing,
            "Ready",
            all_ready,
            ready_reason,
            ready_message.clone(),
            inputs.now,
        ),
        condition(
            &existing,
            "ContainersReady",
            all_ready,
            ready_reason,
            ready_message,
            inputs.now,
        ),
    ];
    // Conditions others own (PodScheduled, DisruptionTarget, readiness
    // gates) stay as they are.
    conditions.extend(
        existing
            .iter()
            .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
            .cloned(),
    );
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(inputs.node_ip.to_string()),
        host_ips: Some(vec![HostIP {
            ip: inputs.node_ip.to_string(),
        }]),
        pod_ip: pod_ip.clone(),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]),
        start_time: current.start_time.clone().or(Some(Time(inputs.now))),
        qos_class: current.qos_class.clone(),
        container_statuses: Some(statuses),
        init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
        ephemeral_container_statuses: ephemeral_container_statuses(pod, rt, inputs),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::Sandbox;

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort",
                       "conditions": [{"type": "PodScheduled", "status": "True"}]}
        }))
        .unwrap()
    }

    fn instance(state: State, exit: i32, restarts: u32) -> Container {
        Container {
            id: format!("id{restarts}"),
            name: "c".into(),
            sandbox_id: "s".into(),
            state,
            restart_count: restarts,
            hash: String::new(),
            created_at: restarts as i64,
            started_at: 1_700_000_000_000_000_000,
            finished_at: 1_700_000_001_000_000_000,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            image: "busybox".into(),
            image_ref: "sha256:abc".into(),
            grace_period: None,
        }
    }

    fn rt(containers: Vec<Container>) -> PodRuntime {
        let mut r = PodRuntime {
            sandboxes: vec![Sandbox {
                id: "s".into(),
                ready: true,
                attempt: 0,
                created_at: 1,
                ip: Some("10.244.0.5".into()),
            }],
            containers,
        };
        crate::observed::sort(&mut r);
        r
    }

    fn inputs(w: &BTreeMap<String, Waiting>) -> Inputs<'_> {
        Inputs {
            waiting: w,
            node_ip: "192.168.1.2",
            now: Timestamp::from_second(1_700_000_100).unwrap(),
            probes: None,
        }
    }

    fn condition_of<'a>(s: &'a PodStatus, type_: &str) -> &'a PodCondition {
        s.conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    /// An ephemeral container waits in ContainerCreating, then reads as
    /// any container that runs or ran, never ready; it counts neither for
    /// the phase nor for Ready.
    #[test]
    fn ephemeral_containers_have_their_own_statuses() {
        let mut p = pod("Always");
        p.spec.as_mut().unwrap().ephemeral_containers =
            Some(vec![serde_json::from_value(serde_json::json!({
                "name": "debugger", "image": "busybox", "targetContainerName": "c"
            }))
            .unwrap()]);
        let w = BTreeMap::new();
        let main = instance(State::Running, 0, 0);
        let s = pod_status(&p, &rt(vec![main.clone()]), &inputs(&w));
        let e = &s.ephemeral_container_statuses.as_ref().unwrap()[0];
        assert_eq!(e.name, "debugger");
        let waiting = e.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("ContainerCreating"));
        assert_eq!(condition_of(&s, "Ready").status, "True");
        for (state, exit) in [(State::Running, 0), (State::Exited, 1)] {
            let debugger = Container {
                id: "dbg".into(),
                name: "debugger".into(),
                ..instance(state, exit, 0)
            };
            let s = pod_status(&p, &rt(vec![main.clone(), debugger]), &inputs(&w));
            let e = &s.ephemeral_container_statuses.as_ref().unwrap()[0];
            let st = e.state.as_ref().unwrap();
            assert_eq!(st.running.is_some(), state == State::Running);
            assert_eq!(
                st.terminated.as_ref().map(|t| t.exit_code),
                (exit != 0).then_some(1)
            );
            assert!(!e.ready);
            assert_eq!(e.container_id.as_deref(), Some("containerd://dbg"));
            assert_eq!(s.phase.as_deref(), Some("Running"));
            assert_eq!(condition_of(&s, "Ready").status, "True");
        }
        assert!(pod_status(&pod("Always"), &rt(vec![main]), &inputs(&w))
            .ephemeral_container_statuses
            .is_none());
    }

    /// A sidecar with a startupProbe is started (and ready) only once the
    /// probe passed; until then the pod is not initialized, and a sidecar
    /// that is not ready keeps the pod from Ready (upstream's prober
    /// manager UpdatePodStatus and GenerateContainersReadyCondition).
    #[test]
    fn a_sidecar_is_started_once_its_startup_probe_passed() {
        let mut p = pod("Always");
        p.spec.as_mut().unwrap().init_containers =
            Some(vec![serde_json::from_value(serde_json::json!({
                "name": "side", "image": "busybox", "restartPolicy": "Always",
                "startupProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                "readinessProbe": {"exec": {"command": ["true"]}}
            }))
            .unwrap()]);
        let side = Container {
            id: "side1".into(),
            name: "side".into(),
            ..instance(State::Running, 0, 0)
        };
        let w = BTreeMap::new();
        let probes = crate::prober::Prober::default();
        let inputs = Inputs {
            probes: Some(&probes),
            ..inputs(&w)
        };
        // Running, its startup probe not passed yet: the main container
        // has not been started.
        let s = pod_status(&p, &rt(vec![side.clone()]), &inputs);
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!((init.started, init.ready), (Some(false), false));
        assert!(init.state.as_ref().unwrap().running.is_some());
        let initialized = condition_of(&s, "Initialized");
        assert_eq!(initialized.status, "False");
        assert_eq!(
            initialized.message.as_deref(),
            Some("containers with incomplete status: [side]")
        );
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            c.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("PodInitializing")
        );
        assert_eq!(s.phase.as_deref(), Some("Pending"));

        // Passed, and the main container runs; the readiness probe has
        // not passed: started, not ready, and the pod not Ready for it.
        probes.set("side1", crate::prober::Kind::Startup, true);
        let both = rt(vec![side.clone(), instance(State::Running, 0, 0)]);
        let s = pod_status(&p, &both, &inputs);
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!((init.started, init.ready), (Some(true), false));
        assert_eq!(condition_of(&s, "Initialized").status, "True");
        let ready = condition_of(&s, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [side]")
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));

        probes.set("side1", crate::prober::Kind::Readiness, true);
        let s = pod_status(&p, &both, &inputs);
        let init = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!((init.started, init.ready), (Some(true), true));
        assert_eq!(condition_of(&s, "Ready").status, "True");
    }

    #[test]
    fn running_pod() {
        let w = BTreeMap::new();
        let s = pod_status(
            &pod("Always"),
            &rt(vec![instance(State::Running, 0, 0)]),
            &inputs(&w),
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.5"));
        assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert!(c.ready);
        assert_eq!(c.container_id.as_deref(), Some("containerd://id0"));
        let types: Vec<(&str, &str)> = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("PodReadyToStartContainers", "True"),
                ("Initialized", "True"),
                ("Ready", "True"),
                ("ContainersReady", "True"),
                ("PodScheduled", "True")
            ]
        );
    }

    #[test]
    fn crash_loop_is_running_with_a_waiting_container() {
        let mut w = BTreeMap::new();
        w.insert(
            "c".to_string(),
            Waiting::new(
                "CrashLoopBackOff",
                "back-off 10s restarting failed container=c pod=p_default(u1)",
            ),
        );
        let s = pod_status(
            &pod("Always"),
            &rt(vec![
                instance(State::Exited, 1, 1),
                instance(State::Exited, 1, 0),
            ]),
            &inputs(&w),
        );
        assert_eq!(s.phase.as_deref(), Some("Running"));
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(c.restart_count, 1);
        assert_eq!(
            c.state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(
            c.last_state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            1
        );
        let ready = s
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [c]")
        );
    }

    #[test]
    fn phases_by_policy() {
        let w = BTreeMap::new();
        let cases = [
            ("Never", 0, "Succeeded"),
            ("Never", 3, "Failed"),
            ("OnFailure", 0, "Succeeded"),
        ];
        for (policy, code, want) in cases {
            let s = pod_status(
                &pod(policy),
                &rt(vec![instance(State::Exited, code, 0)]),
                &inputs(&w),
            );
            assert_eq!(s.phase.as_deref(), Some(want), "{policy} {code}");
            let t = s.container_statuses.as_ref().unwrap()[0]
                .state
                .as_ref()
                .unwrap()
                .terminated
                .clone()
                .unwrap();
            assert_eq!(
                t.reason.as_deref(),
                Some(if code == 0 { "Completed" } else { "Error" })
            );
        }
    }

    #[test]
    fn waiting_for_an_image_is_pending() {
        let mut w = BTreeMap::new();
        w.insert("c".to_string(), Waiting::new("ErrImagePull", "not found"));
        let s = pod_status(&pod("Always"), &rt(vec![]), &inputs(&w));
        assert_eq!(s.phase.as_deref(), Some("Pending"));
        let st = s.container_statuses.as_ref().unwrap()[0]
            .state
            .clone()
            .unwrap();
        assert_eq!(st.waiting.unwrap().reason.as_deref(), Some("ErrImagePull"));
    }

    #[test]
    fn transition_times_are_kept_when_nothing_changes() {
        let w = BTreeMap::new();
        let p0 = pod("Always");
        let runtime = rt(vec![instance(State::Running, 0, 0)]);
        let s1 = pod_status(&p0, &runtime, &inputs(&w));
        let mut p1 = p0.clone();
        p1.status = Some(s1.clone());
        let later = Inputs {
            now: Timestamp::from_second(1_700_000_500).unwrap(),
            ..inputs(&w)
        };
        assert_eq!(pod_status(&p1, &runtime, &later), s1);
    }
}
