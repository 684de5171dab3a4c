//! [`compute_pod_actions`]: what to do for one pod, as a pure function of
//! the pod the API wants and what the runtime has (upstream's
//! `computePodActions`). No I/O; back-off is decided when the actions are
//! carried out.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::core::v1::{Container as SpecContainer, Pod};

use crate::observed::{PodRuntime, State};
use crate::podspec::{container_hash, init_containers, is_sidecar, restart_policy};

/// What one sync should do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actions {
    /// Stop every container and the sandbox (before a new sandbox, or
    /// because nothing is left to run).
    pub kill_pod: bool,
    /// Start a new sandbox (and then the containers in `start`).
    pub create_sandbox: bool,
    /// The new sandbox's attempt number.
    pub sandbox_attempt: u32,
    /// A sandbox existed and is gone or dead: upstream's SandboxChanged.
    pub sandbox_changed: bool,
    /// Indexes into `spec.initContainers` to (re)start, in order.
    pub start_init: Vec<usize>,
    /// An init container failed under restartPolicy Never: the pod fails.
    pub init_failed: bool,
    /// Indexes into `spec.containers` to start, in order.
    pub start: Vec<usize>,
    /// Running containers to stop: (container ID, name, why).
    pub kill: Vec<(String, String, String)>,
    /// Indexes into `spec.ephemeralContainers` to start: those never run
    /// (an ephemeral container is never restarted).
    pub start_ephemeral: Vec<usize>,
}

fn containers(pod: &Pod) -> &[SpecContainer] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[])
}

/// What the prober says about the running containers, by container ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probed {
    /// Whose liveness or startup probe failed (`"liveness"`, `"startup"`).
    pub failed: HashMap<String, &'static str>,
    /// Running containers with a startup probe that has not passed yet.
    pub not_started: HashSet<String>,
}

/// Where initialization stands in the current sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Init {
    /// Init containers to (re)start now.
    pub start: Vec<usize>,
    /// Running sidecars to stop first (a failed probe): (container ID,
    /// name, why); each is in `start` too.
    pub kill: Vec<(String, String, String)>,
    /// Every init container has succeeded (sidecars: started).
    pub done: bool,
    /// One failed under restartPolicy Never.
    pub failed: bool,
}

/// Upstream's computeInitContainerActions, in order: the first init
/// container not yet run is started; a running one is waited for (a
/// sidecar counts as done once running and, with a startupProbe, once
/// that probe has passed: until then nothing after it starts); a sidecar
/// whose startup or liveness probe failed is stopped and started again;
/// a failed one is restarted under the crash back-off, or fails the pod
/// under Never. Only instances of the current sandbox count. Once a main
/// container has run in the sandbox the pod was initialized, and a
/// restarting sidecar holds nothing back.
pub fn init_progress(pod: &Pod, rt: &PodRuntime, sandbox_id: &str, probed: &Probed) -> Init {
    let mut init = Init::default();
    let initialized = containers(pod).iter().any(|c| {
        rt.containers
            .iter()
            .any(|x| x.name == c.name && x.sandbox_id == sandbox_id)
    });
    for (i, c) in init_containers(pod).iter().enumerate() {
        let latest = rt
            .containers
            .iter()
            .find(|x| x.name == c.name && x.sandbox_id == sandbox_id);
        match latest {
            None => {
                init.start.push(i);
                return init;
            }
            Some(l) if l.state == State::Running => {
                if !is_sidecar(c) {
                    return init;
                }
                if let Some(which) = probed.failed.get(&l.id) {
                    init.kill.push((
                        l.id.clone(),
                        c.name.clone(),
                        format!("Init container {} failed {which} probe", c.name),
                    ));
                    init.start.push(i);
                    if !initialized {
                        return init;
                    }
                } else if probed.not_started.contains(&l.id) && !initialized {
                    // Its startup probe has not passed yet: wait for it.
                    return init;
                }
            }
            Some(l) if l.state == State::Exited && l.exit_code == 0 && !is_sidecar(c) => {}
            Some(_) if is_sidecar(c) => {
                // A sidecar that exited is started again; the ones after it
                // may go on.
                init.start.push(i);
            }
            Some(_) => {
                if restart_policy(pod) == "Never" {
                    init.failed = true;
                } else {
                    init.start.push(i);
                }
                return init;
            }
        }
    }
    init.done = true;
    init
}

/// Whether the container should be (re)started now, ignoring back-off
/// (upstream's `ShouldContainerBeRestarted`).
pub fn should_restart(pod: &Pod, c: &SpecContainer, rt: &PodRuntime) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let Some(latest) = rt.latest(&c.name) else {
        return true;
    };
    match latest.state {
        State::Running => false,
        State::Created | State::Unknown => true,
        State::Exited => match restart_policy(pod) {
            "Never" => false,
            "OnFailure" => latest.exit_code != 0,
            _ => true,
        },
    }
}

fn succeeded(c: &SpecContainer, rt: &PodRuntime) -> bool {
    rt.latest(&c.name)
        .is_some_and(|l| l.state == State::Exited && l.exit_code == 0)
}

/// Whether the sandbox must be (re)created, and with which attempt.
fn sandbox_changed(rt: &PodRuntime) -> (bool, u32, bool) {
    let Some(newest) = rt.sandboxes.first() else {
        return (true, 0, false);
    };
    let ready = rt.sandboxes.iter().filter(|s| s.ready).count();
    if !newest.ready || ready > 1 {
        return (true, newest.attempt + 1, true);
    }
    (false, newest.attempt, false)
}

/// The grace period (seconds) for stopping running container `name`
/// (upstream's setTerminationGracePeriod): the pod's deletion grace once
/// it is being deleted; for a container killed because its liveness or
/// startup probe failed (`probe`: `"liveness"`, `"startup"`), that
/// probe's terminationGracePeriodSeconds when set; else the pod's
/// terminationGracePeriodSeconds (30 by default).
pub fn kill_grace_period(pod: &Pod, name: &str, probe: Option<&str>) -> i64 {
    let c = containers(pod)
        .iter()
        .chain(init_containers(pod))
        .find(|c| c.name == name);
    let probe = match probe {
        Some("liveness") => c.and_then(|c| c.liveness_probe.as_ref()),
        Some("startup") => c.and_then(|c| c.startup_probe.as_ref()),
        _ => None,
    };
    match probe.and_then(|p| p.termination_grace_period_seconds) {
        Some(g) if pod.metadata.deletion_grace_period_seconds.is_none() => g.max(0),
        _ => crate::podspec::grace_period(pod),
    }
}

/// The actions for a pod that is neither being deleted nor finished.
pub fn compute_pod_actions(pod: &Pod, rt: &PodRuntime) -> Actions {
    compute_pod_actions_probed(pod, rt, &Probed::default())
}

/// The same, with what the prober says: containers (by ID) whose liveness
/// or startup probe failed are stopped and, unless the policy is Never
/// (sidecars: always), started again; a sidecar whose startup probe has
/// not passed holds back the containers after it.
pub fn compute_pod_actions_probed(pod: &Pod, rt: &PodRuntime, probed: &Probed) -> Actions {
    let failed = &probed.failed;
    let specs = containers(pod);
    let (create, attempt, changed) = sandbox_changed(rt);
    if create {
        let mut actions = Actions {
            kill_pod: !rt.sandboxes.is_empty() || rt.running().next().is_some(),
            create_sandbox: true,
            sandbox_attempt: attempt,
            sandbox_changed: changed,
            ..Actions::default()
        };
        // A pod that must not restart, whose containers have run, gets no
        // new sandbox: it is finished.
        if restart_policy(pod) == "Never" && attempt != 0 && !rt.containers.is_empty() {
            actions.create_sandbox = false;
            return actions;
        }
        if !init_containers(pod).is_empty() {
            // A new sandbox runs initialization again, from the first.
            actions.start_init = vec![0];
            return actions;
        }
        actions.start = specs
            .iter()
            .enumerate()
            .filter(|(_, c)| !(restart_policy(pod) == "OnFailure" && succeeded(c, rt)))
            .filter(|(_, c)| !(restart_policy(pod) == "Never" && rt.latest(&c.name).is_some()))
            .map(|(i, _)| i)
            .collect();
        if actions.start.is_empty() {
            actions.create_sandbox = false;
        }
        return actions;
    }

    let mut actions = Actions {
        sandbox_attempt: attempt,
        ..Actions::default()
    };
    let sandbox_id = rt
        .ready_sandbox()
        .map(|s| s.id.as_str())
        .unwrap_or_default();
    let init = init_progress(pod, rt, sandbox_id, probed);
    if init.failed {
        actions.init_failed = true;
        actions.kill_pod = true;
        return actions;
    }
    // Ephemeral containers may start before initialization is done, in
    // the ready sandbox only, once each (upstream's computePodActions).
    actions.start_ephemeral = crate::podspec::ephemeral_containers(pod)
        .iter()
        .enumerate()
        .filter(|(_, c)| rt.latest(&c.name).is_none())
        .map(|(i, _)| i)
        .collect();
    actions.start_init = init.start;
    actions.kill = init.kill;
    if !init.done {
        return actions;
    }
    let mut keep = 0;
    for (i, c) in specs.iter().enumerate() {
        match rt.latest(&c.name) {
            Some(latest) if latest.state == State::Running => {
                if let Some(which) = failed.get(&latest.id) {
                    actions.kill.push((
                        latest.id.clone(),
                        c.name.clone(),
                        format!(
                            "Container {} failed {which} probe, will be restarted",
                            c.name
                        ),
                    ));
                    if restart_policy(pod) != "Never" {
                        actions.start.push(i);
                    }
                } else if !latest.hash.is_empty() && latest.hash != container_hash(c) {
                    actions.kill.push((
                        latest.id.clone(),
                        c.name.clone(),
                        format!("Container {} definition changed, will be restarted", c.name),
                    ));
                    actions.start.push(i);
                } else {
                    keep += 1;
                }
            }
            _ => {
                if should_restart(pod, c, rt) {
                    actions.start.push(i);
                }
            }
        }
    }
    if keep == 0 && actions.start.is_empty() {
        // The main containers are done: sidecars stop with the pod and
        // are not started again.
        actions.kill_pod = true;
        actions.start_init.clear();
        actions.start_ephemeral.clear();
        let inits: HashSet<&str> = init_containers(pod)
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        actions
            .kill
            .retain(|(_, name, _)| !inits.contains(name.as_str()));
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{Container, Sandbox};

    fn pod(policy: &str, names: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {
                "restartPolicy": policy,
                "containers": names.iter().map(|n| serde_json::json!({"name": n, "image": "busybox"})).collect::<Vec<_>>()
            }
        }))
        .unwrap()
    }

    fn sandbox(ready: bool, attempt: u32) -> Sandbox {
        Sandbox {
            id: format!("s{attempt}"),
            ready,
            attempt,
            created_at: attempt as i64,
            ip: Some("10.0.0.2".into()),
        }
    }

    fn container(p: &Pod, name: &str, state: State, exit: i32, restarts: u32) -> Container {
        let spec = p
            .spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .find(|c| c.name == name)
            .unwrap();
        Container {
            id: format!("{name}-{restarts}"),
            name: name.into(),
            sandbox_id: "s0".into(),
            state,
            restart_count: restarts,
            hash: container_hash(spec),
            created_at: restarts as i64,
            started_at: 0,
            finished_at: 0,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            image: "busybox".into(),
            image_ref: String::new(),
            grace_period: None,
        }
    }

    fn rt(sandboxes: Vec<Sandbox>, containers: Vec<Container>) -> PodRuntime {
        let mut r = PodRuntime {
            sandboxes,
            containers,
        };
        crate::observed::sort(&mut r);
        r
    }

    struct Case {
        name: &'static str,
        policy: &'static str,
        runtime: fn(&Pod) -> PodRuntime,
        want: Actions,
    }

    #[test]
    fn table() {
        let cases = [
            Case {
                name: "a new pod gets a sandbox and every container",
                policy: "Always",
                runtime: |_| PodRuntime::default(),
                want: Actions {
                    create_sandbox: true,
                    start: vec![0, 1],
                    ..Actions::default()
                },
            },
            Case {
                name: "a running pod is left alone",
                policy: "Always",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Running, 0, 0),
                            container(p, "b", State::Running, 0, 0),
                        ],
                    )
                },
                want: Actions::default(),
            },
            Case {
                name: "an exited container restarts under Always",
                policy: "Always",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Exited, 0, 0),
                            container(p, "b", State::Running, 0, 0),
                        ],
                    )
                },
                want: Actions {
                    start: vec![0],
                    ..Actions::default()
                },
            },
            Case {
                name: "OnFailure restarts only the failed one",
                policy: "OnFailure",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Exited, 0, 0),
                            container(p, "b", State::Exited, 2, 0),
                        ],
                    )
                },
                want: Actions {
                    start: vec![1],
                    ..Actions::default()
                },
            },
            Case {
                name: "OnFailure with every container succeeded kills the pod",
                policy: "OnFailure",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Exited, 0, 0),
                            container(p, "b", State::Exited, 0, 1),
                        ],
                    )
                },
                want: Actions {
                    kill_pod: true,
                    ..Actions::default()
                },
            },
            Case {
                name: "Never with every container exited kills the pod",
                policy: "Never",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Exited, 1, 0),
                            container(p, "b", State::Exited, 0, 0),
                        ],
                    )
                },
                want: Actions {
                    kill_pod: true,
                    ..Actions::default()
                },
            },
            Case {
                name: "a dead sandbox is recreated with every container",
                policy: "Always",
                runtime: |p| {
                    rt(
                        vec![sandbox(false, 0)],
                        vec![
                            container(p, "a", State::Exited, 137, 0),
                            container(p, "b", State::Exited, 137, 0),
                        ],
                    )
                },
                want: Actions {
                    kill_pod: true,
                    create_sandbox: true,
                    sandbox_attempt: 1,
                    sandbox_changed: true,
                    start: vec![0, 1],
                    ..Actions::default()
                },
            },
            Case {
                name: "Never: a dead sandbox after containers ran is not recreated",
                policy: "Never",
                runtime: |p| {
                    rt(
                        vec![sandbox(false, 0)],
                        vec![container(p, "a", State::Exited, 0, 0)],
                    )
                },
                want: Actions {
                    kill_pod: true,
                    sandbox_attempt: 1,
                    sandbox_changed: true,
                    ..Actions::default()
                },
            },
            Case {
                name: "a created but not started container is started",
                policy: "Always",
                runtime: |p| {
                    rt(
                        vec![sandbox(true, 0)],
                        vec![
                            container(p, "a", State::Created, 0, 0),
                            container(p, "b", State::Running, 0, 0),
                        ],
                    )
                },
                want: Actions {
                    start: vec![0],
                    ..Actions::default()
                },
            },
        ];
        for case in cases {
            let p = pod(case.policy, &["a", "b"]);
            let got = compute_pod_actions(&p, &(case.runtime)(&p));
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    fn with_inits(policy: &str, inits: &[(&str, bool)]) -> Pod {
        let mut p = pod(policy, &["main"]);
        let spec = p.spec.as_mut().unwrap();
        spec.init_containers = Some(
            inits
                .iter()
                .map(|(name, sidecar)| {
                    serde_json::from_value(serde_json::json!({
                        "name": name, "image": "busybox",
                        "restartPolicy": if *sidecar { Some("Always") } else { None }
                    }))
                    .unwrap()
                })
                .collect(),
        );
        p
    }

    fn init_instance(p: &Pod, name: &str, state: State, exit: i32) -> Container {
        let spec = p
            .spec
            .as_ref()
            .unwrap()
            .init_containers
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.name == name)
            .unwrap();
        Container {
            hash: container_hash(spec),
            ..container_named(name, state, exit)
        }
    }

    fn container_named(name: &str, state: State, exit: i32) -> Container {
        Container {
            id: format!("{name}-0"),
            name: name.into(),
            sandbox_id: "s0".into(),
            state,
            restart_count: 0,
            hash: String::new(),
            created_at: 0,
            started_at: 0,
            finished_at: 0,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            image: "busybox".into(),
            image_ref: String::new(),
            grace_period: None,
        }
    }

    #[test]
    fn init_containers_run_one_at_a_time_in_order() {
        let p = with_inits("Always", &[("a", false), ("b", false)]);
        // A new sandbox starts with the first.
        let got = compute_pod_actions(&p, &PodRuntime::default());
        assert_eq!(
            (got.start_init.clone(), got.start.clone()),
            (vec![0], vec![])
        );
        // a running: wait.
        let r = rt(
            vec![sandbox(true, 0)],
            vec![init_instance(&p, "a", State::Running, 0)],
        );
        let got = compute_pod_actions(&p, &r);
        assert!(
            got.start_init.is_empty() && got.start.is_empty() && !got.kill_pod,
            "{got:?}"
        );
        // a done: b next.
        let r = rt(
            vec![sandbox(true, 0)],
            vec![init_instance(&p, "a", State::Exited, 0)],
        );
        assert_eq!(compute_pod_actions(&p, &r).start_init, vec![1]);
        // both done: the main container.
        let r = rt(
            vec![sandbox(true, 0)],
            vec![
                init_instance(&p, "a", State::Exited, 0),
                init_instance(&p, "b", State::Exited, 0),
            ],
        );
        let got = compute_pod_actions(&p, &r);
        assert_eq!((got.start_init, got.start), (vec![], vec![0]));
    }

    #[test]
    fn a_failed_init_container_restarts_or_fails_the_pod() {
        let r = |p: &Pod| {
            rt(
                vec![sandbox(true, 0)],
                vec![init_instance(p, "a", State::Exited, 1)],
            )
        };
        let always = with_inits("Always", &[("a", false)]);
        let got = compute_pod_actions(&always, &r(&always));
        assert_eq!(got.start_init, vec![0]);
        assert!(!got.init_failed);
        let never = with_inits("Never", &[("a", false)]);
        let got = compute_pod_actions(&never, &r(&never));
        assert!(
            got.init_failed && got.kill_pod && got.start_init.is_empty() && got.start.is_empty()
        );
    }

    #[test]
    fn sidecars_count_once_running_and_restart_until_the_pod_is_done() {
        let p = with_inits("Never", &[("side", true), ("setup", false)]);
        let r = rt(
            vec![sandbox(true, 0)],
            vec![init_instance(&p, "side", State::Running, 0)],
        );
        assert_eq!(compute_pod_actions(&p, &r).start_init, vec![1]);
        let mut main = container_named("main", State::Running, 0);
        main.hash = container_hash(&p.spec.as_ref().unwrap().containers[0]);
        let r = rt(
            vec![sandbox(true, 0)],
            vec![
                init_instance(&p, "side", State::Exited, 2),
                init_instance(&p, "setup", State::Exited, 0),
                main.clone(),
            ],
        );
        assert_eq!(
            compute_pod_actions(&p, &r).start_init,
            vec![0],
            "a sidecar that exits is restarted"
        );
        main.state = State::Exited;
        let r = rt(
            vec![sandbox(true, 0)],
            vec![
                init_instance(&p, "side", State::Running, 0),
                init_instance(&p, "setup", State::Exited, 0),
                main,
            ],
        );
        let got = compute_pod_actions(&p, &r);
        assert!(
            got.kill_pod && got.start_init.is_empty(),
            "the sidecar stops after the main container: {got:?}"
        );
    }

    /// computeInitContainerActions for a restartable init container with
    /// a startupProbe: nothing after it starts until the probe passed; a
    /// failed probe restarts it; once the pod has initialized, a
    /// restarting sidecar holds nothing back.
    #[test]
    fn a_sidecars_startup_probe_holds_back_the_containers_after_it() {
        let p = with_inits("Always", &[("side", true), ("setup", false)]);
        let side = init_instance(&p, "side", State::Running, 0);
        let r = rt(vec![sandbox(true, 0)], vec![side.clone()]);
        let not_started = Probed {
            not_started: [side.id.clone()].into(),
            ..Probed::default()
        };
        let got = compute_pod_actions_probed(&p, &r, &not_started);
        assert_eq!(got, Actions::default(), "waits for the startup probe");
        // Passed: the next init container, then the main one.
        let got = compute_pod_actions_probed(&p, &r, &Probed::default());
        assert_eq!(got.start_init, vec![1]);
        let done = rt(
            vec![sandbox(true, 0)],
            vec![side.clone(), init_instance(&p, "setup", State::Exited, 0)],
        );
        assert_eq!(
            compute_pod_actions_probed(&p, &done, &not_started).start,
            Vec::<usize>::new(),
            "the main container waits too"
        );
        assert_eq!(
            compute_pod_actions_probed(&p, &done, &Probed::default()).start,
            vec![0]
        );
        // Failed: stopped and started again, the others still held back.
        let failed = Probed {
            failed: [(side.id.clone(), "startup")].into(),
            ..Probed::default()
        };
        let got = compute_pod_actions_probed(&p, &r, &failed);
        assert_eq!(got.start_init, vec![0]);
        assert_eq!(
            got.kill,
            vec![(
                side.id.clone(),
                "side".to_string(),
                "Init container side failed startup probe".to_string()
            )]
        );
        assert!(got.start.is_empty() && !got.kill_pod, "{got:?}");
        // Initialized (the main container runs): a sidecar restarted since
        // holds nothing back, and a failed liveness probe restarts it.
        let mut main = container_named("main", State::Running, 0);
        main.hash = container_hash(&p.spec.as_ref().unwrap().containers[0]);
        let running = rt(
            vec![sandbox(true, 0)],
            vec![
                side.clone(),
                init_instance(&p, "setup", State::Exited, 0),
                main,
            ],
        );
        let got = compute_pod_actions_probed(&p, &running, &not_started);
        assert_eq!(got, Actions::default());
        let liveness = Probed {
            failed: [(side.id.clone(), "liveness")].into(),
            ..Probed::default()
        };
        let got = compute_pod_actions_probed(&p, &running, &liveness);
        assert_eq!(got.start_init, vec![0]);
        assert_eq!(got.kill[0].2, "Init container side failed liveness probe");
        assert!(got.start.is_empty() && !got.kill_pod, "{got:?}");
    }

    #[test]
    fn a_sidecars_probe_kill_uses_its_grace_period() {
        let mut p = with_inits("Always", &[("side", true)]);
        p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].startup_probe =
            serde_json::from_value(serde_json::json!({
                "exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 4
            }))
            .unwrap();
        assert_eq!(kill_grace_period(&p, "side", Some("startup")), 4);
    }

    /// Ephemeral containers start once in the ready sandbox, are never
    /// restarted, start before initialization is done, and keep nothing
    /// alive: a new sandbox does not start them.
    #[test]
    fn ephemeral_containers_start_once_and_never_again() {
        let mut p = pod("Always", &["a"]);
        p.spec.as_mut().unwrap().ephemeral_containers =
            Some(vec![serde_json::from_value(serde_json::json!({
                "name": "debugger", "image": "busybox", "targetContainerName": "a"
            }))
            .unwrap()]);
        let running = container(&p, "a", State::Running, 0, 0);
        let r = rt(vec![sandbox(true, 0)], vec![running.clone()]);
        let got = compute_pod_actions(&p, &r);
        assert_eq!(
            got,
            Actions {
                start_ephemeral: vec![0],
                ..Actions::default()
            }
        );
        for state in [State::Running, State::Exited, State::Created] {
            let debugger = container_named("debugger", state, 1);
            let r = rt(vec![sandbox(true, 0)], vec![running.clone(), debugger]);
            assert_eq!(compute_pod_actions(&p, &r), Actions::default(), "{state:?}");
        }
        // A new sandbox starts the pod's containers, not the debugger.
        let got = compute_pod_actions(&p, &PodRuntime::default());
        assert!(
            got.create_sandbox && got.start_ephemeral.is_empty(),
            "{got:?}"
        );
        // While init containers run it may start already.
        let mut init = with_inits("Always", &[("setup", false)]);
        init.spec.as_mut().unwrap().ephemeral_containers =
            p.spec.as_ref().unwrap().ephemeral_containers.clone();
        let r = rt(
            vec![sandbox(true, 0)],
            vec![init_instance(&init, "setup", State::Running, 0)],
        );
        assert_eq!(compute_pod_actions(&init, &r).start_ephemeral, vec![0]);
        // A pod whose containers are done is killed, debugger or not.
        let done = rt(
            vec![sandbox(true, 0)],
            vec![
                container(&pod("Never", &["a"]), "a", State::Exited, 0, 0),
                container_named("debugger", State::Running, 0),
            ],
        );
        let mut never = p.clone();
        never.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        let got = compute_pod_actions(&never, &done);
        assert!(got.kill_pod && got.start_ephemeral.is_empty(), "{got:?}");
    }

    #[test]
    fn a_changed_spec_restarts_the_container() {
        let p = pod("Always", &["a"]);
        let mut c = container(&p, "a", State::Running, 0, 0);
        c.hash = "other".into();
        let got = compute_pod_actions(&p, &rt(vec![sandbox(true, 0)], vec![c]));
        assert_eq!(got.start, vec![0]);
        assert_eq!(got.kill.len(), 1);
        assert_eq!(
            got.kill[0].2,
            "Container a definition changed, will be restarted"
        );
    }

    #[test]
    fn the_hash_is_stable_and_ignores_resources() {
        let p = pod("Always", &["a"]);
        let mut c = p.spec.as_ref().unwrap().containers[0].clone();
        let h = container_hash(&c);
        c.resources = Some(Default::default());
        assert_eq!(container_hash(&c), h);
        c.image = Some("other".into());
        assert_ne!(container_hash(&c), h);
    }

    #[test]
    fn a_probe_kill_uses_the_probes_grace_period() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {
                "terminationGracePeriodSeconds": 60,
                "containers": [
                    {"name": "a", "image": "busybox",
                     "livenessProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 5},
                     "startupProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 7}},
                    {"name": "b", "image": "busybox",
                     "livenessProbe": {"exec": {"command": ["true"]}}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(kill_grace_period(&p, "a", Some("liveness")), 5);
        assert_eq!(kill_grace_period(&p, "a", Some("startup")), 7);
        // Other kills, and probes without one, use the pod's.
        assert_eq!(kill_grace_period(&p, "a", None), 60);
        assert_eq!(kill_grace_period(&p, "b", Some("liveness")), 60);
        let mut unset = p.clone();
        unset
            .spec
            .as_mut()
            .unwrap()
            .termination_grace_period_seconds = None;
        assert_eq!(kill_grace_period(&unset, "b", Some("liveness")), 30);
        // A pod being deleted is stopped with its deletion grace.
        let mut deleting = p.clone();
        deleting.metadata.deletion_grace_period_seconds = Some(3);
        assert_eq!(kill_grace_period(&deleting, "a", Some("liveness")), 3);
    }
}
