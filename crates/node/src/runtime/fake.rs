//! [`FakeRuntime`]: an in-memory CRI runtime for unit tests of the agent's
//! logic and for simulated nodes ([`Simulation`], `skiff sim`). Sandboxes and containers move
//! through CRI's states as containerd's do; a test can make a container
//! exit ([`FakeRuntime::exit`]) or a call fail ([`FakeRuntime::fail_next`]).
//! Exec, Attach and PortForward check what containerd checks and hand out
//! URLs on a streaming server the test runs
//! ([`FakeRuntime::set_stream_server`]). Nothing runs and nothing touches
//! the host.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{api, Error, Result, Runtime, POD_UID_LABEL};

#[derive(Debug, Default)]
struct State {
    next: u64,
    sandboxes: BTreeMap<String, (api::PodSandboxConfig, i32, i64)>,
    containers: BTreeMap<String, api::ContainerStatus>,
    container_sandbox: HashMap<String, String>,
    images: BTreeMap<String, api::Image>,
    /// Images a pull can find (as a registry would).
    pullable: BTreeMap<String, u64>,
    fail_next: HashMap<&'static str, Error>,
    calls: Vec<String>,
    /// The streaming server's base URL (`http://host:port`), if any.
    stream_base: Option<String>,
    streamed: Vec<Streamed>,
    /// Simulation: see [`Simulation`].
    sim: Option<Simulation>,
    /// Sandbox IPs handed out from the simulation's pod CIDR.
    ips: HashMap<String, String>,
    next_ip: u32,
    /// When each container should exit (sim-exit), with its code.
    exits: HashMap<String, (i64, i32)>,
    /// Counts the calls that may change sandboxes or containers, and the
    /// simulated exits ([`Runtime::generation`]).
    generation: u64,
    /// Host PIDs of sandboxes and containers, by ID ([`FakeRuntime::set_pid`]).
    pids: HashMap<String, u32>,
}

/// How the fake behaves when it stands in for a node's runtime in
/// `skiff sim`: calls are not recorded, every image pulls, sandboxes get
/// IPs from the node's pod CIDR, containers start after a delay, and a
/// pod annotated [`SIM_EXIT`] `"CODE"` or `"CODE after SECONDS"` has its
/// containers exit so.
#[derive(Debug, Clone, Default)]
pub struct Simulation {
    /// The node's pod CIDR (`10.1.2.0/24`); IPs count up from `.2`.
    pub pod_cidr: Option<String>,
    /// How long a container takes to start.
    pub start_delay: std::time::Duration,
}

/// The pod annotation that makes a simulated pod's containers exit:
/// `"1"` (at once) or `"0 after 5"` (after 5 s).
pub const SIM_EXIT: &str = "skiff.dev/sim-exit";

/// `(code, after seconds)` from a [`SIM_EXIT`] value.
pub fn parse_sim_exit(value: &str) -> Option<(i32, u64)> {
    let mut words = value.split_whitespace();
    let code = words.next()?.parse().ok()?;
    match (words.next(), words.next()) {
        (None, _) => Some((code, 0)),
        (Some("after"), Some(secs)) => Some((code, secs.trim_end_matches('s').parse().ok()?)),
        _ => None,
    }
}

/// The `n`th address of `cidr` (IPv4), as a string.
fn nth_ip(cidr: &str, n: u32) -> Option<String> {
    let (base, _) = cidr.split_once('/')?;
    let base: std::net::Ipv4Addr = base.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(base).checked_add(n)?).to_string())
}

/// A streaming request the fake was asked to prepare, as CRI carried it.
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    Exec(api::ExecRequest),
    Attach(api::AttachRequest),
    PortForward(api::PortForwardRequest),
}

/// The fake runtime. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
}

fn now() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An image already present on the node.
    pub fn add_image(&self, name: &str, size: u64) {
        let mut s = self.lock();
        s.images.insert(name.to_string(), image(name, size));
    }

    /// An image a pull will find.
    pub fn add_pullable(&self, name: &str, size: u64) {
        self.lock().pullable.insert(name.to_string(), size);
    }

    /// A fake for a simulated node.
    pub fn simulated(sim: Simulation) -> Self {
        let f = Self::default();
        f.lock().sim = Some(sim);
        f
    }

    /// Sets the simulated node's pod CIDR (once the IPAM assigned it).
    pub fn set_pod_cidr(&self, cidr: &str) {
        if let Some(sim) = self.lock().sim.as_mut() {
            sim.pod_cidr = Some(cidr.to_string());
        }
    }

    /// Containers whose simulated exit time has come exit.
    fn settle(s: &mut State) {
        if s.exits.is_empty() {
            return;
        }
        let at = now();
        let due: Vec<(String, i32)> = s
            .exits
            .iter()
            .filter(|(_, (when, _))| *when <= at)
            .map(|(id, (_, code))| (id.clone(), *code))
            .collect();
        for (id, code) in due {
            s.generation += 1;
            s.exits.remove(&id);
            if let Some(c) = s.containers.get_mut(&id) {
                if c.state == api::ContainerState::ContainerRunning as i32 {
                    c.state = api::ContainerState::ContainerExited as i32;
                    c.exit_code = code;
                    c.finished_at = at;
                    c.reason = if code == 0 { "Completed" } else { "Error" }.into();
                }
            }
        }
    }

    /// The next call of `method` fails with `error`.
    pub fn fail_next(&self, method: &'static str, error: Error) {
        self.lock().fail_next.insert(method, error);
    }

    /// Makes a running container exit with `code`.
    pub fn exit(&self, id: &str, code: i32, reason: &str) {
        let mut s = self.lock();
        s.generation += 1;
        if let Some(c) = s.containers.get_mut(id) {
            c.state = api::ContainerState::ContainerExited as i32;
            c.exit_code = code;
            c.finished_at = now();
            c.reason = reason.to_string();
        }
    }

    /// What [`Runtime::container_pid`] or [`Runtime::sandbox_pid`] says
    /// for the sandbox or container `id`.
    pub fn set_pid(&self, id: &str, pid: u32) {
        self.lock().pids.insert(id.to_string(), pid);
    }

    /// Where Exec, Attach and PortForward send clients: `base` is a
    /// server's `http://host:port`; the URLs are `base/exec/N` and so on,
    /// as containerd's streaming server hands out.
    pub fn set_stream_server(&self, base: &str) {
        self.lock().stream_base = Some(base.trim_end_matches('/').to_string());
    }

    /// The streaming requests prepared so far, in order.
    pub fn streamed(&self) -> Vec<Streamed> {
        self.lock().streamed.clone()
    }

    /// The calls made so far, in order (`method id`).
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// The sandboxes whose labels pass `keep`, copied (a pod worker asks
    /// for its own pod's: the others are not copied to be thrown away).
    fn sandboxes_where(
        &self,
        keep: impl Fn(&HashMap<String, String>) -> bool,
    ) -> Vec<api::PodSandbox> {
        let s = self.lock();
        s.sandboxes
            .iter()
            .filter(|(_, (config, _, _))| keep(&config.labels))
            .map(|(id, (config, state, created))| api::PodSandbox {
                id: id.clone(),
                metadata: config.metadata.clone(),
                state: *state,
                created_at: *created,
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                runtime_handler: String::new(),
            })
            .collect()
    }

    /// The containers whose labels pass `keep`, copied, after due
    /// simulated exits.
    fn containers_where(
        &self,
        keep: impl Fn(&HashMap<String, String>) -> bool,
    ) -> Vec<api::Container> {
        let mut s = self.lock();
        Self::settle(&mut s);
        s.containers
            .iter()
            .filter(|(_, c)| keep(&c.labels))
            .map(|(id, c)| api::Container {
                id: id.clone(),
                pod_sandbox_id: s.container_sandbox.get(id).cloned().unwrap_or_default(),
                metadata: c.metadata.clone(),
                image: c.image.clone(),
                image_ref: c.image_ref.clone(),
                image_id: c.image_id.clone(),
                state: c.state,
                created_at: c.created_at,
                labels: c.labels.clone(),
                annotations: c.annotations.clone(),
            })
            .collect()
    }

    fn enter(
        &self,
        call: String,
        method: &'static str,
    ) -> Result<std::sync::MutexGuard<'_, State>> {
        let mut s = self.lock();
        // Reads take the lock without entering, so this counts the calls
        // that can change what a relist sees (and a few that cannot).
        s.generation += 1;
        if s.sim.is_none() {
            s.calls.push(call);
        }
        if let Some(e) = s.fail_next.remove(method) {
            return Err(e);
        }
        Ok(s)
    }
}

fn image(name: &str, size: u64) -> api::Image {
    api::Image {
        id: format!("sha256:{:0>64}", name.len()),
        repo_tags: vec![name.to_string()],
        size,
        ..Default::default()
    }
}

/// containerd's name of a container state (`criContainerStateToString`).
fn state_name(state: i32) -> &'static str {
    match api::ContainerState::try_from(state) {
        Ok(api::ContainerState::ContainerCreated) => "CONTAINER_CREATED",
        Ok(api::ContainerState::ContainerRunning) => "CONTAINER_RUNNING",
        Ok(api::ContainerState::ContainerExited) => "CONTAINER_EXITED",
        _ => "CONTAINER_UNKNOWN",
    }
}

fn invalid(message: &str) -> Error {
    Error::Status {
        code: tonic::Code::InvalidArgument,
        message: message.to_string(),
    }
}

impl State {
    /// containerd's check before it prepares an exec or attach: the
    /// container must run (`container is in CONTAINER_EXITED state`).
    fn check_running(&self, container_id: &str) -> Result<()> {
        let state = self
            .containers
            .get(container_id)
            .map(|c| c.state)
            .ok_or_else(|| Error::Status {
                code: tonic::Code::NotFound,
                message: format!("failed to find container {container_id:?} in store: not found"),
            })?;
        if state != api::ContainerState::ContainerRunning as i32 {
            return Err(Error::Status {
                code: tonic::Code::Unknown,
                message: format!("container is in {} state", state_name(state)),
            });
        }
        Ok(())
    }

    fn url(&mut self, what: &str) -> Result<String> {
        let base = self.stream_base.clone().ok_or_else(|| Error::Status {
            code: tonic::Code::Unimplemented,
            message: "the fake runtime has no streaming server".into(),
        })?;
        self.next += 1;
        Ok(format!("{base}/{what}/token-{}", self.next))
    }
}

/// containerd's streaming server's checks of the stream options.
fn check_streams(stdin: bool, stdout: bool, stderr: bool, tty: bool, or: &str) -> Result<()> {
    if tty && stderr {
        return Err(invalid("tty and stderr cannot both be true"));
    }
    if !stdin && !stdout && !stderr {
        return Err(invalid(&format!(
            "one of stdin, stdout, {or} stderr must be set"
        )));
    }
    Ok(())
}

fn not_found(what: &str, id: &str) -> Error {
    Error::Status {
        code: tonic::Code::NotFound,
        message: format!("an error occurred when try to find {what} {id:?}: not found"),
    }
}

#[async_trait]
impl Runtime for FakeRuntime {
    fn generation(&self) -> Option<u64> {
        let mut s = self.lock();
        Self::settle(&mut s);
        Some(s.generation)
    }

    async fn version(&self) -> Result<api::VersionResponse> {
        Ok(api::VersionResponse {
            version: "0.1.0".into(),
            runtime_name: "fake".into(),
            runtime_version: "0.1.0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> Result<api::StatusResponse> {
        let cond = |t: &str| api::RuntimeCondition {
            r#type: t.into(),
            status: true,
            ..Default::default()
        };
        Ok(api::StatusResponse {
            status: Some(api::RuntimeStatus {
                conditions: vec![cond("RuntimeReady"), cond("NetworkReady")],
            }),
            ..Default::default()
        })
    }

    async fn run_pod_sandbox(&self, config: api::PodSandboxConfig, _: String) -> Result<String> {
        let mut s = self.enter("RunPodSandbox".into(), "run_pod_sandbox")?;
        s.next += 1;
        let id = format!("sandbox-{}", s.next);
        if let Some(cidr) = s.sim.as_ref().and_then(|sim| sim.pod_cidr.clone()) {
            // .1 is the gateway; addresses are not reused (a sim is short).
            s.next_ip += 1;
            let n = 1 + s.next_ip;
            if let Some(ip) = nth_ip(&cidr, n) {
                s.ips.insert(id.clone(), ip);
            }
        }
        s.sandboxes.insert(
            id.clone(),
            (config, api::PodSandboxState::SandboxReady as i32, now()),
        );
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter(format!("StopPodSandbox {id}"), "stop_pod_sandbox")?;
        let in_sandbox: Vec<String> = s
            .container_sandbox
            .iter()
            .filter(|(_, sb)| sb.as_str() == id)
            .map(|(c, _)| c.clone())
            .collect();
        for c in in_sandbox {
            if let Some(st) = s.containers.get_mut(&c) {
                if st.state == api::ContainerState::ContainerRunning as i32 {
                    st.state = api::ContainerState::ContainerExited as i32;
                    st.exit_code = 137;
                    st.finished_at = now();
                    st.reason = "Error".into();
                }
            }
        }
        if let Some(sb) = s.sandboxes.get_mut(id) {
            sb.1 = api::PodSandboxState::SandboxNotready as i32;
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        let mut s = self.enter(format!("RemovePodSandbox {id}"), "remove_pod_sandbox")?;
        s.sandboxes.remove(id);
        s.ips.remove(id);
        let gone: Vec<String> = s
            .container_sandbox
            .iter()
            .filter(|(_, sb)| sb.as_str() == id)
            .map(|(c, _)| c.clone())
            .collect();
        for c in gone {
            s.containers.remove(&c);
            s.container_sandbox.remove(&c);
        }
        Ok(())
    }

    async fn pod_sandbox_status(&self, id: &str) -> Result<api::PodSandboxStatus> {
        let s = self.lock();
        let (config, state, created) = s
            .sandboxes
            .get(id)
            .ok_or_else(|| not_found("sandbox", id))?;
        Ok(api::PodSandboxStatus {
            id: id.into(),
            metadata: config.metadata.clone(),
            state: *state,
            created_at: *created,
            network: Some(api::PodSandboxNetworkStatus {
                ip: s.ips.get(id).cloned().unwrap_or_else(|| "10.88.0.2".into()),
                additional_ips: vec![],
            }),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            ..Default::default()
        })
    }

    async fn list_pod_sandboxes(&self) -> Result<Vec<api::PodSandbox>> {
        Ok(self.sandboxes_where(|_| true))
    }

    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<api::PodSandbox>> {
        Ok(self.sandboxes_where(|labels| {
            labels.get(POD_UID_LABEL).map(String::as_str) == Some(pod_uid)
        }))
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: api::ContainerConfig,
        sandbox: api::PodSandboxConfig,
    ) -> Result<String> {
        let mut s = self.enter(format!("CreateContainer {sandbox_id}"), "create_container")?;
        let exit = s
            .sim
            .as_ref()
            .and(sandbox.annotations.get(SIM_EXIT))
            .and_then(|v| parse_sim_exit(v));
        if !s.sandboxes.contains_key(sandbox_id) {
            return Err(not_found("sandbox", sandbox_id));
        }
        let image = config.image.clone().unwrap_or_default().image;
        let Some(img) = s.images.get(&image).cloned() else {
            return Err(not_found("image", &image));
        };
        s.next += 1;
        let id = format!("container-{}", s.next);
        let meta = config.metadata.clone().unwrap_or_default();
        s.containers.insert(
            id.clone(),
            api::ContainerStatus {
                id: id.clone(),
                metadata: Some(meta),
                state: api::ContainerState::ContainerCreated as i32,
                created_at: now(),
                image: config.image.clone(),
                image_ref: img.id.clone(),
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                log_path: config.log_path.clone(),
                ..Default::default()
            },
        );
        s.container_sandbox
            .insert(id.clone(), sandbox_id.to_string());
        if let Some((code, after)) = exit {
            // Counted from the start; fixed up in start_container.
            s.exits.insert(id.clone(), (after as i64, code));
        }
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<()> {
        let delay = self.lock().sim.as_ref().map(|sim| sim.start_delay);
        if let Some(d) = delay.filter(|d| !d.is_zero()) {
            tokio::time::sleep(d).await;
        }
        let mut s = self.enter(format!("StartContainer {id}"), "start_container")?;
        let started = now();
        let c = s
            .containers
            .get_mut(id)
            .ok_or_else(|| not_found("container", id))?;
        c.state = api::ContainerState::ContainerRunning as i32;
        c.started_at = started;
        if let Some((after, _)) = s.exits.get_mut(id) {
            *after = started + *after * 1_000_000_000;
        }
        Ok(())
    }

    async fn stop_container(&self, id: &str, _timeout: i64) -> Result<()> {
        let mut s = self.enter(format!("StopContainer {id}"), "stop_container")?;
        if let Some(c) = s.containers.get_mut(id) {
            if c.state == api::ContainerState::ContainerRunning as i32 {
                c.state = api::ContainerState::ContainerExited as i32;
                c.exit_code = 0;
                c.reason = "Completed".into();
                c.finished_at = now();
            }
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<()> {
        let mut s = self.enter(format!("RemoveContainer {id}"), "remove_container")?;
        s.containers.remove(id);
        s.container_sandbox.remove(id);
        Ok(())
    }

    async fn relist(&self) -> Result<crate::runtime::Relisted> {
        use crate::runtime::{Listed, CONTAINER_NAME_LABEL};
        let mut s = self.lock();
        Self::settle(&mut s);
        let sandboxes = s
            .sandboxes
            .iter()
            .map(|(id, (config, state, _))| Listed {
                pod_uid: config.labels.get(POD_UID_LABEL).cloned(),
                id: id.clone(),
                state: *state,
                container_name: None,
            })
            .collect();
        let containers = s
            .containers
            .iter()
            .map(|(id, c)| Listed {
                pod_uid: c.labels.get(POD_UID_LABEL).cloned(),
                id: id.clone(),
                state: c.state,
                container_name: c.labels.get(CONTAINER_NAME_LABEL).cloned(),
            })
            .collect();
        Ok(crate::runtime::Relisted {
            sandboxes,
            containers,
        })
    }

    async fn list_containers(&self) -> Result<Vec<api::Container>> {
        Ok(self.containers_where(|_| true))
    }

    async fn list_containers_of(&self, pod_uid: &str) -> Result<Vec<api::Container>> {
        Ok(self.containers_where(|labels| {
            labels.get(POD_UID_LABEL).map(String::as_str) == Some(pod_uid)
        }))
    }

    async fn container_status(&self, id: &str) -> Result<api::ContainerStatus> {
        let mut s = self.lock();
        Self::settle(&mut s);
        s.containers
            .get(id)
            .cloned()
            .ok_or_else(|| not_found("container", id))
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: Vec<String>,
        _timeout_s: i64,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        let s = self.enter(format!("ExecSync {container_id}"), "exec_sync")?;
        let running = s
            .containers
            .get(container_id)
            .is_some_and(|c| c.state == api::ContainerState::ContainerRunning as i32);
        if !running {
            return Err(not_found("container", container_id));
        }
        // `true` succeeds, anything else fails: enough for probe logic.
        let code = if cmd.first().map(String::as_str) == Some("true") {
            0
        } else {
            1
        };
        Ok((code, vec![], vec![]))
    }

    async fn exec(&self, req: api::ExecRequest) -> Result<String> {
        let mut s = self.enter(format!("Exec {}", req.container_id), "exec")?;
        s.check_running(&req.container_id)?;
        check_streams(req.stdin, req.stdout, req.stderr, req.tty, "or")?;
        let url = s.url("exec")?;
        s.streamed.push(Streamed::Exec(req));
        Ok(url)
    }

    async fn container_pid(&self, id: &str) -> Result<Option<u32>> {
        Ok(self.lock().pids.get(id).copied())
    }

    async fn sandbox_pid(&self, id: &str) -> Result<Option<u32>> {
        Ok(self.lock().pids.get(id).copied())
    }

    async fn attach(&self, req: api::AttachRequest) -> Result<String> {
        let mut s = self.enter(format!("Attach {}", req.container_id), "attach")?;
        s.check_running(&req.container_id)?;
        check_streams(req.stdin, req.stdout, req.stderr, req.tty, "and")?;
        let url = s.url("attach")?;
        s.streamed.push(Streamed::Attach(req));
        Ok(url)
    }

    async fn port_forward(&self, req: api::PortForwardRequest) -> Result<String> {
        let mut s = self.enter(
            format!("PortForward {}", req.pod_sandbox_id),
            "port_forward",
        )?;
        let id = &req.pod_sandbox_id;
        let state = s
            .sandboxes
            .get(id)
            .map(|sb| sb.1)
            .ok_or_else(|| Error::Status {
                code: tonic::Code::NotFound,
                message: format!("failed to find sandbox {id:?}: not found"),
            })?;
        if state != api::PodSandboxState::SandboxReady as i32 {
            return Err(Error::Status {
                code: tonic::Code::Unknown,
                message: "sandbox container is not running".into(),
            });
        }
        let url = s.url("portforward")?;
        s.streamed.push(Streamed::PortForward(req));
        Ok(url)
    }

    async fn image_status(&self, name: &str) -> Result<Option<api::Image>> {
        Ok(self.lock().images.get(name).cloned())
    }

    async fn pull_image(&self, name: &str, _: Option<api::PodSandboxConfig>) -> Result<String> {
        let mut s = self.enter(format!("PullImage {name}"), "pull_image")?;
        let size = s
            .pullable
            .get(name)
            .copied()
            .or(s.sim.as_ref().map(|_| 1 << 20));
        let Some(size) = size else {
            return Err(Error::Status {
                code: tonic::Code::NotFound,
                message: format!(
                    "failed to pull and unpack image \"{name}\": failed to resolve reference \"{name}\": {name}: not found"
                ),
            });
        };
        let img = image(name, size);
        let id = img.id.clone();
        s.images.insert(name.to_string(), img);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox_config(exit: Option<&str>) -> api::PodSandboxConfig {
        let mut config = api::PodSandboxConfig::default();
        if let Some(v) = exit {
            config.annotations.insert(SIM_EXIT.into(), v.into());
        }
        config
    }

    fn container_config() -> api::ContainerConfig {
        api::ContainerConfig {
            image: Some(api::ImageSpec {
                image: "busybox".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The generation moves with every change a relist could see and
    /// stays put across reads, so an agent skipping unchanged relists
    /// misses nothing.
    #[tokio::test]
    async fn the_generation_moves_with_changes_and_not_with_reads() {
        let rt = FakeRuntime::simulated(Simulation::default());
        rt.add_image("busybox", 1);
        let mut last = rt.generation().expect("the fake reports its generation");
        let changed = |what: &str, rt: &FakeRuntime, last: &mut u64| {
            let now = rt.generation().unwrap();
            assert_ne!(now, *last, "{what} left the generation as it was");
            *last = now;
        };

        let sb = rt
            .run_pod_sandbox(sandbox_config(None), String::new())
            .await
            .unwrap();
        changed("RunPodSandbox", &rt, &mut last);
        let c = rt
            .create_container(&sb, container_config(), sandbox_config(None))
            .await
            .unwrap();
        changed("CreateContainer", &rt, &mut last);
        rt.start_container(&c).await.unwrap();
        changed("StartContainer", &rt, &mut last);

        rt.relist().await.unwrap();
        rt.list_containers().await.unwrap();
        rt.list_pod_sandboxes().await.unwrap();
        rt.container_status(&c).await.unwrap();
        rt.pod_sandbox_status(&sb).await.unwrap();
        assert_eq!(rt.generation(), Some(last), "reads moved the generation");

        rt.exit(&c, 1, "Error");
        changed("an exit", &rt, &mut last);
        rt.stop_container(&c, 0).await.unwrap();
        changed("StopContainer", &rt, &mut last);
        rt.remove_container(&c).await.unwrap();
        changed("RemoveContainer", &rt, &mut last);
        rt.stop_pod_sandbox(&sb).await.unwrap();
        changed("StopPodSandbox", &rt, &mut last);
        rt.remove_pod_sandbox(&sb).await.unwrap();
        changed("RemovePodSandbox", &rt, &mut last);

        // A simulated exit that is due moves it too, when it is read.
        let sb = rt
            .run_pod_sandbox(sandbox_config(Some("3")), String::new())
            .await
            .unwrap();
        let c = rt
            .create_container(&sb, container_config(), sandbox_config(Some("3")))
            .await
            .unwrap();
        rt.start_container(&c).await.unwrap();
        let started = rt.lock().generation;
        let seen = rt.generation().unwrap();
        assert_ne!(seen, started, "the due exit was not counted");
        let status = rt.container_status(&c).await.unwrap();
        assert_eq!(status.state, api::ContainerState::ContainerExited as i32);
        assert_eq!(status.exit_code, 3);
        assert_eq!(rt.generation(), Some(seen));
    }
}
