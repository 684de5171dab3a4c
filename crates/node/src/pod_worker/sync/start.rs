//! The start half of a pod's sync: [`PodWorker::run_actions`] carries out
//! what [`crate::pod_worker::actions`] computed as numbered steps (kill,
//! sandbox, the pod's IP, hosts file and volumes, then per container its
//! back-off, image, user check, environment, mounts, create, start and
//! postStart), each step returning what it found or why it stopped. The
//! steps note their instants in the worker's startup timeline
//! ([`crate::timeline::Timeline`]) when it keeps one.
//!
//! It owns no state of its own (the worker's back-offs and waiting
//! reasons are [`super`]'s) and stops nothing but what the actions say.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    earliest, instant_of, PodWorker, CONFIG_RETRY, MIN_GRACE_SECONDS, NODE_HOSTS, SYNC_ERROR_RETRY,
};
use crate::backoff::go_duration;
use crate::events::EventType;
use crate::observed::{self, PodRuntime, State};
use crate::pod_worker::actions::{compute_pod_actions_probed, kill_grace_period, Actions, Probed};
use crate::pod_worker::config::{self, container_config, sandbox_config};
use crate::pod_worker::env::{self, Facts, Resolved};
use crate::pod_worker::images::{ensure_image_traced, valid_reference, Ensured};
use crate::pod_worker::volume_sources::{self, Prepared};
use crate::pod_worker::{dns, hooks, qos, volume_files, volumes};
use crate::podspec::{container_hash, grace_period, host_network, init_containers, pod_ref};
use crate::runtime::api;
use crate::status::Waiting;
use crate::timeline::{ContainerSteps, ImageStep, Span};

/// The sandbox back-off's key.
const SANDBOX_BACKOFF_KEY: &str = "sandbox";

/// What the node tells environments and downwardAPI volumes, with the
/// pod's IP once its sandbox has one.
fn facts_of<'a>(ctx: &'a super::Context, pod_ip: Option<&'a str>) -> Facts<'a> {
    Facts {
        node_name: &ctx.node_name,
        host_ip: &ctx.node_ip,
        pod_ip,
        node_cpu_milli: ctx.node_cpu_milli,
        node_memory: ctx.node_memory,
    }
}

/// How [`PodWorker::ensure_sandbox`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SandboxStep {
    /// The sandbox to start containers in: the ready one, or a new one.
    Ready(String),
    /// None to start containers in yet (the network is down, a back-off,
    /// a failure, or none is wanted): sync again at the latest then.
    Wait(Option<Instant>),
}

/// Why a step stopped short; it has recorded why (a waiting reason,
/// events). Sync again at the latest at this instant, or on the next
/// change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retry(Option<Instant>);

/// What every container started in one sync shares.
#[derive(Debug)]
struct PodSetup<'a> {
    sandbox_id: &'a str,
    sandbox_cfg: &'a api::PodSandboxConfig,
    pod_ip: Option<&'a str>,
    /// The pod's managed /etc/hosts (mounted when it exists).
    hosts_file: &'a std::path::Path,
    facts: &'a Facts<'a>,
    prepared: &'a Prepared,
}

/// The containers to start, in order: the init containers the actions
/// name, then the main ones, then the ephemeral ones (as containers).
fn containers_to_start(pod: &Pod, actions: &Actions) -> Vec<Container> {
    let inits = init_containers(pod);
    let mains = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or(&[]);
    let ephemeral = if actions.start_ephemeral.is_empty() {
        Vec::new()
    } else {
        crate::podspec::ephemeral_containers(pod)
    };
    actions
        .start_init
        .iter()
        .filter_map(|i| inits.get(*i))
        .chain(actions.start.iter().filter_map(|i| mains.get(*i)))
        .chain(
            actions
                .start_ephemeral
                .iter()
                .filter_map(|i| ephemeral.get(*i)),
        )
        .cloned()
        .collect()
}

impl PodWorker {
    /// Carries out what [`crate::pod_worker::actions`] computes, as
    /// numbered steps; when to sync again at the latest (a back-off ends,
    /// a retry).
    pub(super) async fn run_actions(&mut self, pod: &Pod, rt: &PodRuntime) -> Option<Instant> {
        let now = Instant::now();
        // 1. What to do (pure), with the prober's verdicts.
        let (actions, probed) = self.plan(pod, rt);
        // 2. Stop what must go: the whole pod, or single containers.
        self.kill(pod, rt, &actions, &probed).await;
        // 3. The sandbox the containers start in; meanwhile the images of
        //    the containers to start are looked up (step 5.2 uses the
        //    answers instead of asking again).
        let to_start = containers_to_start(pod, &actions);
        let sandbox_cfg = self.sandbox_config(pod, &actions);
        let runtime = self.ctx.runtime.clone();
        let network_up = host_network(pod)
            || self
                .ctx
                .network_ready
                .load(std::sync::atomic::Ordering::SeqCst);
        let ahead: Vec<String> = if actions.create_sandbox && network_up {
            let mut images: Vec<String> = to_start
                .iter()
                .filter_map(|c| c.image.clone())
                .filter(|i| valid_reference(i))
                .collect();
            images.sort();
            images.dedup();
            images
        } else {
            Vec::new()
        };
        let look_ahead = futures::future::join_all(ahead.iter().map(|i| runtime.image_status(i)));
        // ... and the pod's volumes are written (upstream mounts them
        // before it makes the sandbox), unless one needs the pod's IP.
        let ctx = self.ctx.clone();
        let volumes_early = actions.create_sandbox
            && network_up
            && self.sandbox_backoff_until(now).is_none()
            && !to_start.is_empty()
            && !volume_sources::needs_pod_ip(pod);
        let volumes_ahead = async {
            if !volumes_early {
                return None;
            }
            let facts = facts_of(&ctx, None);
            let called = Instant::now();
            let result =
                volume_sources::prepare(ctx.objects.as_ref(), &ctx.volumes_root, pod, &facts).await;
            Some((result, Span::new(called, Instant::now())))
        };
        let (step, answers, volumes_ahead) = futures::future::join3(
            self.ensure_sandbox(pod, rt, &actions, &sandbox_cfg, now),
            look_ahead,
            volumes_ahead,
        )
        .await;
        for (image, answer) in ahead.into_iter().zip(answers) {
            if let Ok(info) = answer {
                self.pulls.inspected.insert(image, info);
            }
        }
        let sandbox_id = match step {
            SandboxStep::Ready(id) => id,
            SandboxStep::Wait(next) => {
                self.pulls.inspected.clear();
                return next;
            }
        };
        // 4. What the containers to start share: the pod's IP, its
        //    /etc/hosts and its volumes.
        let pod_ip = self.sandbox_ip(pod, rt, &sandbox_id).await;
        let hosts_file = self.write_hosts_file(pod, pod_ip.as_deref(), !to_start.is_empty());
        let facts = facts_of(&ctx, pod_ip.as_deref());
        let prepared = match self
            .prepare_volumes(pod, &facts, &to_start, now, volumes_ahead)
            .await
        {
            Ok(prepared) => prepared,
            Err(Retry(next)) => {
                self.pulls.inspected.clear();
                return next;
            }
        };
        let setup = PodSetup {
            sandbox_id: &sandbox_id,
            sandbox_cfg: &sandbox_cfg,
            pod_ip: pod_ip.as_deref(),
            hosts_file: &hosts_file,
            facts: &facts,
            prepared: &prepared,
        };
        // 5. Each container, init containers first (one, or sidecars in
        //    order), then the main ones: the same path for both.
        // Service-account tokens are refreshed by the volumes' writing on a
        // later sync (the worker's periodic resync comes far sooner than a
        // token's 80 %), so they ask for no earlier one.
        let mut next = None;
        for c in &to_start {
            if let Err(Retry(at)) = self.start_container(pod, rt, c, &setup, now).await {
                next = earliest(next, at);
            }
        }
        // Answers read ahead that no container used (it stopped before
        // its image) are not kept for a later sync.
        self.pulls.inspected.clear();
        next
    }

    /// Step 1: the actions for this sync, from the pod, the runtime and
    /// the prober's verdicts on the running containers.
    fn plan(&self, pod: &Pod, rt: &PodRuntime) -> (Actions, Probed) {
        let mut probed = Probed::default();
        for c in Self::probed_specs(pod) {
            let Some(l) = rt.latest(&c.name).filter(|l| l.state == State::Running) else {
                continue;
            };
            if let Some(which) = self.prober.failed(c, &l.id) {
                probed.failed.insert(l.id.clone(), which);
            } else if !self.prober.started(c, &l.id) {
                probed.not_started.insert(l.id.clone());
            }
        }
        let actions = compute_pod_actions_probed(pod, rt, &probed);
        (actions, probed)
    }

    /// Step 2: stops the whole pod (its containers, then its sandbox) when
    /// it must be killed, then each container to kill with its grace
    /// period.
    async fn kill(&self, pod: &Pod, rt: &PodRuntime, actions: &Actions, probed: &Probed) {
        let events = &self.ctx.events;
        if actions.kill_pod {
            if actions.create_sandbox && actions.sandbox_changed {
                events.event(
                    pod,
                    EventType::Normal,
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.",
                );
            }
            self.stop_pod(pod, rt).await;
        }
        for (id, name, why) in &actions.kill {
            events.container_event(pod, name, EventType::Normal, "Killing", why);
            let grace = kill_grace_period(pod, name, probed.failed.get(id).copied());
            self.stop_one(pod, id, name, grace.max(MIN_GRACE_SECONDS))
                .await;
        }
    }

    /// Step 3a: the CRI config of the pod's sandbox, in the pod's cgroup
    /// when the agent manages cgroups.
    fn sandbox_config(&self, pod: &Pod, actions: &Actions) -> api::PodSandboxConfig {
        let mut sandbox_cfg = sandbox_config(
            pod,
            actions.sandbox_attempt,
            &self.ctx.log_root,
            &self.ctx.cluster_domain,
        );
        if let (Some(cg), Some(linux)) = (&self.ctx.cgroups, sandbox_cfg.linux.as_mut()) {
            linux.cgroup_parent = cg.parent(pod);
        }
        sandbox_cfg
    }

    /// Step 3b: the ready sandbox, or a new one when the actions ask for
    /// it: not before the pod network is up (unless hostNetwork), nor
    /// inside the sandbox back-off; FailedCreatePodSandBox when it fails.
    async fn ensure_sandbox(
        &mut self,
        pod: &Pod,
        rt: &PodRuntime,
        actions: &Actions,
        sandbox_cfg: &api::PodSandboxConfig,
        now: Instant,
    ) -> SandboxStep {
        if !actions.create_sandbox {
            return match rt.ready_sandbox() {
                Some(s) => SandboxStep::Ready(s.id.clone()),
                None => SandboxStep::Wait(None),
            };
        }
        let events = self.ctx.events.clone();
        if !host_network(pod)
            && !self
                .ctx
                .network_ready
                .load(std::sync::atomic::Ordering::SeqCst)
        {
            events.event(
                pod,
                EventType::Warning,
                "NetworkNotReady",
                &format!(
                    "network is not ready: {}",
                    crate::network::plugin_not_ready()
                ),
            );
            // The pod worker's back-off upstream: retried in 10 s, sooner
            // when the network comes up (the health loop wakes nobody, so
            // the relist's next change or this timer does).
            return SandboxStep::Wait(Some(now + Duration::from_secs(2)));
        }
        let key = SANDBOX_BACKOFF_KEY;
        if let Some(until) = self.sandbox_backoff_until(now) {
            return SandboxStep::Wait(until);
        }
        if let Err(e) = std::fs::create_dir_all(&sandbox_cfg.log_directory) {
            tracing::warn!(dir = %sandbox_cfg.log_directory, error = %e, "cannot create the pod's log dir");
        }
        let mut cfg = sandbox_cfg.clone();
        cfg.dns_config = Some(self.sandbox_dns(pod));
        if let Some(cg) = &self.ctx.cgroups {
            if let Err(e) = cg.ensure(pod) {
                tracing::warn!(uid = %self.uid, error = %e, "cannot set up the pod's cgroup");
            }
        }
        let called = Instant::now();
        match self.ctx.runtime.run_pod_sandbox(cfg, String::new()).await {
            Ok(id) => {
                self.sandbox_backoff.forget(key);
                if let Some(t) = self.timeline.as_mut() {
                    t.sandbox(Span::new(called, Instant::now()), &id);
                }
                SandboxStep::Ready(id)
            }
            Err(e) => {
                self.sandbox_backoff.next(key, now);
                events.event(
                    pod,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    &format!("Failed to create pod sandbox: {}", e.go_text()),
                );
                let last = self.sandbox_backoff.last_update(key).unwrap_or(now);
                SandboxStep::Wait(self.sandbox_backoff.until(key, last))
            }
        }
    }

    /// When the sandbox back-off that `now` is inside ends (`Some`), if it
    /// is inside one.
    fn sandbox_backoff_until(&self, now: Instant) -> Option<Option<Instant>> {
        let last = self.sandbox_backoff.last_update(SANDBOX_BACKOFF_KEY)?;
        self.sandbox_backoff
            .in_backoff_since(SANDBOX_BACKOFF_KEY, last, now)
            .then(|| self.sandbox_backoff.until(SANDBOX_BACKOFF_KEY, last))
    }

    /// Step 3c: the new sandbox's resolv.conf, from the node's (dnsPolicy
    /// and dnsConfig applied; containerd writes it from this config), with
    /// upstream's warnings as events.
    fn sandbox_dns(&self, pod: &Pod) -> api::DnsConfig {
        let node_resolv = std::fs::read_to_string(&self.ctx.resolv_conf).unwrap_or_default();
        let dns = dns::dns(
            pod,
            &node_resolv,
            &self.ctx.cluster_dns,
            &self.ctx.cluster_domain,
        );
        for (reason, msg) in &dns.warnings {
            self.ctx.events.event(pod, EventType::Warning, reason, msg);
        }
        dns.config
    }

    /// Step 4a: the sandbox's IP, once for every container started here
    /// (env fieldRefs, hooks); a new sandbox is asked for it.
    async fn sandbox_ip(&mut self, pod: &Pod, rt: &PodRuntime, sandbox_id: &str) -> Option<String> {
        let known = rt.ready_sandbox().is_some_and(|s| s.id == sandbox_id);
        match self.pod_ip(pod, rt) {
            Some(ip) if known || host_network(pod) => Some(ip),
            _ => {
                let status = self.ctx.runtime.pod_sandbox_status(sandbox_id).await.ok()?;
                // The sandbox's creation, where its network setup starts.
                if let Some(t) = self
                    .timeline
                    .as_mut()
                    .filter(|t| t.sandbox_id == sandbox_id)
                {
                    t.sandbox_created_ns = status.created_at;
                }
                let ip = status.network.map(|n| n.ip).filter(|ip| !ip.is_empty());
                // The next observe of this sandbox needs no status read.
                if status.state == api::PodSandboxState::SandboxReady as i32 {
                    self.sandbox_ips.insert(sandbox_id.to_string(), ip.clone());
                }
                ip
            }
        }
    }

    /// Step 4b: the managed /etc/hosts the containers mount, written when
    /// containers are about to start; its path either way.
    fn write_hosts_file(&self, pod: &Pod, pod_ip: Option<&str>, starting: bool) -> PathBuf {
        let hosts_file = volume_files::pod_dir(&self.ctx.volumes_root, &self.uid).join("etc-hosts");
        if starting {
            let node_hosts = std::fs::read_to_string(NODE_HOSTS).unwrap_or_default();
            let text = dns::hosts_file(
                pod,
                pod_ip.unwrap_or_default(),
                &node_hosts,
                &self.ctx.cluster_domain,
            );
            if let Some(dir) = hosts_file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = std::fs::write(&hosts_file, text) {
                tracing::warn!(uid = %self.uid, error = %e, "cannot write the pod's hosts file");
            }
        }
        hosts_file
    }

    /// Step 4c: the pod's API-backed volumes written and its claims
    /// resolved (or what step 3 found doing so beside the sandbox). A
    /// failure is a FailedMount event; the containers to start then wait
    /// (ContainerCreating) and are retried soon.
    async fn prepare_volumes(
        &mut self,
        pod: &Pod,
        facts: &Facts<'_>,
        to_start: &[Container],
        now: Instant,
        ahead: Option<(Result<Prepared, volume_sources::Failure>, Span)>,
    ) -> Result<Prepared, Retry> {
        let (result, span) = match ahead {
            Some(done) => done,
            None => {
                let called = Instant::now();
                let result = volume_sources::prepare(
                    self.ctx.objects.as_ref(),
                    &self.ctx.volumes_root,
                    pod,
                    facts,
                )
                .await;
                (result, Span::new(called, Instant::now()))
            }
        };
        match result {
            Ok(p) => {
                if let Some(t) = self.timeline.as_mut().filter(|_| !to_start.is_empty()) {
                    t.volumes(span);
                }
                Ok(p)
            }
            Err((_, msg)) => {
                self.ctx
                    .events
                    .event(pod, EventType::Warning, "FailedMount", &msg);
                if !to_start.is_empty() {
                    for c in to_start {
                        self.waiting
                            .insert(c.name.clone(), Waiting::new("ContainerCreating", ""));
                    }
                    return Err(Retry(Some(now + CONFIG_RETRY)));
                }
                Ok(Prepared::default())
            }
        }
    }

    /// Step 5: one container, from its back-off to its postStart hook. A
    /// step that stops it has recorded why (its waiting reason, events).
    async fn start_container(
        &mut self,
        pod: &Pod,
        rt: &PodRuntime,
        c: &Container,
        setup: &PodSetup<'_>,
        now: Instant,
    ) -> Result<(), Retry> {
        // Instances from an earlier sandbox do not count once a new
        // sandbox starts them all again, except for the restart count.
        let latest = rt.latest(&c.name);
        // 5.1 The crash-loop back-off.
        self.crash_backoff(pod, c, latest, now)?;
        // 5.2 The image, per its pull policy and the pull back-off.
        let ensured = self.pull_image(pod, c, setup.sandbox_cfg, now).await?;
        let image = ensured.image;
        // 5.3 runAsNonRoot, which needs the image's user: from the
        //     ImageStatus answer 5.2 decided on (upstream asks the runtime
        //     a second time; the answer cannot differ in between).
        self.check_run_as_non_root(pod, c, &image, ensured.info, now)
            .await?;
        // 5.4 The environment; everything it refers to must exist first.
        let resolved = self.resolve_env(pod, c, setup.facts, now).await?;
        // 5.5 The mounts: volumes, /etc/hosts, the termination message file.
        let restart = latest.map(|l| l.restart_count + 1).unwrap_or(0);
        let mounts = self.container_mounts(pod, c, setup, &resolved, restart, now)?;
        // 5.6 Create and start it.
        self.remove_old_instances(rt, &c.name).await;
        let mut config = self.cri_config(pod, c, resolved, mounts, restart, &image);
        self.target_namespace(pod, rt, c, &mut config, now)?;
        let id = self.create_and_start(pod, c, setup, config).await?;
        // 5.7 postStart.
        self.post_start(pod, c, &id, setup.pod_ip).await?;
        self.waiting.remove(&c.name);
        Ok(())
    }

    /// Step 5.1: a container that exited is restarted only after its
    /// crash-loop back-off (CrashLoopBackOff, BackOff event); a restart
    /// starts the next back-off step.
    fn crash_backoff(
        &mut self,
        pod: &Pod,
        c: &Container,
        latest: Option<&observed::Container>,
        now: Instant,
    ) -> Result<(), Retry> {
        // As upstream's stable key: a changed container (a new image)
        // starts a fresh back-off.
        let key = format!("{}/{}/{}", self.uid, c.name, container_hash(c));
        let Some(l) = latest.filter(|l| l.state == State::Exited) else {
            return Ok(());
        };
        let exited = instant_of(l.finished_at, now);
        if self.crash.in_backoff_since(&key, exited, now) {
            let step = self.crash.current(&key).unwrap_or(crate::backoff::INITIAL);
            self.waiting.insert(
                c.name.clone(),
                Waiting::new(
                    "CrashLoopBackOff",
                    format!(
                        "back-off {} restarting failed container={} pod={}",
                        go_duration(step),
                        c.name,
                        pod_ref(pod)
                    ),
                ),
            );
            self.ctx.events.container_event(
                pod,
                &c.name,
                EventType::Warning,
                "BackOff",
                &format!(
                    "Back-off restarting failed container {} in pod {}",
                    c.name,
                    pod_ref(pod)
                ),
            );
            return Err(Retry(self.crash.until(&key, exited)));
        }
        self.crash.next(&key, now);
        Ok(())
    }

    /// Step 5.2: the container's image, pulled if its policy says so; a
    /// failed pull is retried when its back-off ends, and the worker comes
    /// back after at most the pod worker's back-off to report it.
    async fn pull_image(
        &mut self,
        pod: &Pod,
        c: &Container,
        sandbox_cfg: &api::PodSandboxConfig,
        now: Instant,
    ) -> Result<Ensured, Retry> {
        let called = Instant::now();
        let pulled = ensure_image_traced(
            self.ctx.runtime.as_ref(),
            self.ctx.events.as_ref(),
            &mut self.pulls,
            pod,
            c,
            Some(sandbox_cfg.clone()),
            now,
        )
        .await;
        match pulled {
            Ok(ensured) => {
                if let Some(t) = self.timeline.as_mut() {
                    t.image(ImageStep {
                        container: c.name.clone(),
                        image: c.image.clone().unwrap_or_default(),
                        span: Span::new(called, Instant::now()),
                        outcome: ensured.outcome.clone(),
                    });
                }
                Ok(ensured)
            }
            Err(w) => {
                let mut next = None;
                if matches!(w.reason.as_str(), "ErrImagePull" | "ImagePullBackOff") {
                    let key = format!("{}/{}", self.uid, c.image.as_deref().unwrap_or_default());
                    // Back when the pull back-off ends (to pull), and
                    // at the latest after the pod worker's back-off
                    // (upstream requeues a failed sync after 10 s), so
                    // a longer pull back-off is seen as ImagePullBackOff
                    // and not as the last pull's ErrImagePull throughout.
                    next = earliest(next, self.pulls.until(&key));
                    next = earliest(next, Some(now + SYNC_ERROR_RETRY));
                }
                self.waiting.insert(c.name.clone(), w);
                Err(Retry(next))
            }
        }
    }

    /// Step 5.3: runAsNonRoot against the image's user
    /// (CreateContainerConfigError).
    async fn check_run_as_non_root(
        &mut self,
        pod: &Pod,
        c: &Container,
        image: &str,
        inspected: Option<api::Image>,
        now: Instant,
    ) -> Result<(), Retry> {
        let image_info = match inspected {
            Some(info) => Some(info),
            None => self.ctx.runtime.image_status(image).await.ok().flatten(),
        };
        let (image_uid, image_username) = config::image_user(image_info.as_ref());
        if let Err(msg) = config::verify_run_as_non_root(pod, c, image_uid, &image_username) {
            self.fail(pod, &c.name, "CreateContainerConfigError", msg);
            return Err(Retry(Some(now + CONFIG_RETRY)));
        }
        Ok(())
    }

    /// Step 5.4: the container's environment, command and args; a missing
    /// ConfigMap or Secret is CreateContainerConfigError, retried until
    /// it appears (upstream: the pod worker's back-off). Invalid envFrom
    /// keys are skipped with upstream's event.
    async fn resolve_env(
        &mut self,
        pod: &Pod,
        c: &Container,
        facts: &Facts<'_>,
        now: Instant,
    ) -> Result<Resolved, Retry> {
        let resolved = match env::resolve(self.ctx.objects.as_ref(), pod, c, facts).await {
            Ok(r) => r,
            Err(msg) => {
                self.fail(pod, &c.name, "CreateContainerConfigError", msg);
                return Err(Retry(Some(now + CONFIG_RETRY)));
            }
        };
        for (source, keys) in &resolved.invalid {
            self.ctx.events.event(
                pod,
                EventType::Warning,
                "InvalidEnvironmentVariableNames",
                &format!(
                    "Keys [{}] from the EnvFrom {source} were skipped since they are considered invalid environment variable names.",
                    keys.join(", ")
                ),
            );
        }
        Ok(resolved)
    }

    /// Step 5.5: the container's mounts: its volumeMounts (a failure is
    /// FailedMount, the container waits in ContainerCreating), the pod's
    /// /etc/hosts unless it mounts its own, and a fresh file for its
    /// termination message.
    fn container_mounts(
        &mut self,
        pod: &Pod,
        c: &Container,
        setup: &PodSetup<'_>,
        resolved: &Resolved,
        restart: u32,
        now: Instant,
    ) -> Result<Vec<api::Mount>, Retry> {
        let mut mounts = match volumes::mounts(
            pod,
            c,
            &self.ctx.volumes_root,
            setup.prepared,
            &resolved.env,
        ) {
            Ok(m) => m,
            Err((volume, msg)) => {
                self.ctx.events.event(
                    pod,
                    EventType::Warning,
                    "FailedMount",
                    &format!("MountVolume.SetUp failed for volume \"{volume}\" : {msg}"),
                );
                self.waiting
                    .insert(c.name.clone(), Waiting::new("ContainerCreating", ""));
                return Err(Retry(Some(now + CONFIG_RETRY)));
            }
        };
        // The file the container may write its termination message to.
        let message_path = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        let message_file = volume_files::pod_dir(&self.ctx.volumes_root, &self.uid)
            .join("termination")
            .join(format!("{}-{restart}", c.name));
        if let Some(dir) = message_file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let own_hosts = c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == "/etc/hosts");
        if !own_hosts && setup.hosts_file.exists() {
            mounts.push(api::Mount {
                container_path: "/etc/hosts".into(),
                host_path: setup.hosts_file.display().to_string(),
                ..Default::default()
            });
        }
        if std::fs::write(&message_file, b"").is_ok() {
            mounts.push(api::Mount {
                container_path: message_path,
                host_path: message_file.display().to_string(),
                ..Default::default()
            });
        }
        Ok(mounts)
    }

    /// Step 5.6a: the container's CRI config with what the earlier steps
    /// found (pure).
    fn cri_config(
        &self,
        pod: &Pod,
        c: &Container,
        resolved: Resolved,
        mounts: Vec<api::Mount>,
        restart: u32,
        image: &str,
    ) -> api::ContainerConfig {
        let mut config = container_config(pod, c, restart, image);
        config.envs = resolved
            .env
            .into_iter()
            .map(|(key, value)| api::KeyValue { key, value })
            .collect();
        config.command = resolved.command;
        config.args = resolved.args;
        config.mounts = mounts;
        if let Some(r) = config.linux.as_mut().and_then(|l| l.resources.as_mut()) {
            r.oom_score_adj = qos::oom_score_adj(pod, c, self.ctx.node_memory);
        }
        config
    }

    /// Step 5.6a': an ephemeral container with a `targetContainerName`
    /// joins that container's process namespace (CRI's TARGET mode, upstream's
    /// getTargetID): its newest instance, which must exist
    /// (CreateContainerConfigError, retried, until it does).
    fn target_namespace(
        &mut self,
        pod: &Pod,
        rt: &PodRuntime,
        c: &Container,
        cfg: &mut api::ContainerConfig,
        now: Instant,
    ) -> Result<(), Retry> {
        let Some(target) = crate::podspec::ephemeral_target(pod, &c.name) else {
            return Ok(());
        };
        match rt.latest(target) {
            Some(t) => {
                config::target_pid_namespace(cfg, &t.id);
                Ok(())
            }
            None => {
                let msg = format!("unable to find target container {target}");
                self.fail(pod, &c.name, "CreateContainerConfigError", msg);
                Err(Retry(Some(now + CONFIG_RETRY)))
            }
        }
    }

    /// Step 5.6b: creates the container and starts it (Created, Started;
    /// CreateContainerError or RunContainerError).
    async fn create_and_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        setup: &PodSetup<'_>,
        config: api::ContainerConfig,
    ) -> Result<String, Retry> {
        let called = Instant::now();
        let id = match self
            .ctx
            .runtime
            .create_container(setup.sandbox_id, config, setup.sandbox_cfg.clone())
            .await
        {
            Ok(id) => id,
            Err(e) => {
                // Upstream's startContainer words these with the gRPC
                // status's message alone.
                self.fail(pod, &c.name, "CreateContainerError", e.message());
                return Err(Retry(None));
            }
        };
        let created = Instant::now();
        self.ctx.events.container_event(
            pod,
            &c.name,
            EventType::Normal,
            "Created",
            &format!("Created container: {}", c.name),
        );
        let starting = Instant::now();
        if let Err(e) = self.ctx.runtime.start_container(&id).await {
            self.fail(pod, &c.name, "RunContainerError", e.message());
            return Err(Retry(None));
        }
        let started = Instant::now();
        if let Some(steps) = self.timeline_steps(pod, c) {
            steps.create = Some(Span::new(called, created));
            steps.start = Some(Span::new(starting, started));
            steps.post_start = None;
        }
        self.ctx.events.container_event(
            pod,
            &c.name,
            EventType::Normal,
            "Started",
            &format!("Started container {}", c.name),
        );
        Ok(id)
    }

    /// Step 5.7: postStart runs before the container counts as started; a
    /// failure kills it, to be restarted under the back-off
    /// (PostStartHookError).
    async fn post_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        id: &str,
        pod_ip: Option<&str>,
    ) -> Result<(), Retry> {
        let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return Ok(());
        };
        let called = Instant::now();
        let run = hooks::run(hook, pod, c, id, pod_ip, self.ctx.runtime.as_ref(), None);
        let ran = run.await;
        if let Some(steps) = self.timeline_steps(pod, c) {
            steps.post_start = Some(Span::new(called, Instant::now()));
        }
        if let Err(msg) = ran {
            let events = &self.ctx.events;
            let name = c.name.as_str();
            events.container_event(pod, name, EventType::Warning, "FailedPostStartHook", &msg);
            events.container_event(
                pod,
                name,
                EventType::Normal,
                "Killing",
                "FailedPostStartHook",
            );
            let _ = self
                .ctx
                .runtime
                .stop_container(id, grace_period(pod).max(MIN_GRACE_SECONDS))
                .await;
            self.waiting
                .insert(c.name.clone(), Waiting::new("PostStartHookError", msg));
            return Err(Retry(None));
        }
        Ok(())
    }

    /// The startup timeline's record of container `c` (a regular or init
    /// container; ephemeral ones are not part of a pod's start), while
    /// the timeline is being recorded.
    fn timeline_steps(&mut self, pod: &Pod, c: &Container) -> Option<&mut ContainerSteps> {
        let timeline = self.timeline.as_mut().filter(|t| !t.finished)?;
        let spec = pod.spec.as_ref()?;
        let init = init_containers(pod).iter().find(|i| i.name == c.name);
        if init.is_none() && !spec.containers.iter().any(|m| m.name == c.name) {
            return None;
        }
        let sidecar = init.is_some_and(crate::podspec::is_sidecar);
        timeline.container(&c.name, init.is_some(), sidecar)
    }

    /// Keeps the newest dead instance of a container (for `logs
    /// --previous`) and removes older ones, as the kubelet's GC keeps one.
    async fn remove_old_instances(&self, rt: &PodRuntime, name: &str) {
        for old in rt
            .containers
            .iter()
            .filter(|c| c.name == name && c.state != State::Running)
            .skip(1)
        {
            if self.ctx.runtime.remove_container(&old.id).await.is_ok() {
                // containerd leaves the log file; upstream's removeContainer
                // deletes it with the container.
                if let Some(pod) = self.last_pod.as_ref() {
                    let dir = crate::logs::pod_log_dir(
                        &self.ctx.log_root,
                        pod.metadata.namespace.as_deref().unwrap_or("default"),
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        &self.uid,
                    );
                    let _ = std::fs::remove_file(
                        dir.join(crate::logs::container_log_file(name, old.restart_count)),
                    );
                }
            }
        }
    }
}
