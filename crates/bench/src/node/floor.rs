//! The raw CRI floors of `skiff-bench node` and its bisect mode
//! (`--floor-variants`).
//!
//! A floor is a private containerd (the agent's containerd config) with
//! one CNI chain ([`Chain`]); a [`Variant`] says which chain and which
//! CRI configs its pods are started with:
//!
//! - `minimal`: PodSandboxConfig with metadata, hostname and log dir;
//!   ContainerConfig with image, command and log path; a plain bridge
//!   (isGateway) with host-local IPAM and nothing else in the chain.
//! - `agent`: what skiff-node sends: its `sandbox_config` and
//!   `container_config`, plus what its sync adds (the pod's cgroup
//!   parent, DNS config, the /etc/hosts, termination-log and
//!   service-account mounts, the OOM score), on the conflist it writes.
//! - the others: `minimal` plus one setting, or `agent` less one, so
//!   that each setting's cost inside containerd can be read off
//!   (RunPodSandbox, CreateContainer, StartContainer medians from
//!   containerd's own log, variants interleaved round by round).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use skiff_node::network::CniConfig;
use skiff_node::pod_worker::config::{container_config, sandbox_config};
use skiff_node::pod_worker::qos::PodCgroups;
use skiff_node::pod_worker::{dns, qos};
use skiff_node::runtime::api;

use super::{ms, parse_containerd_log, Floor, Lease, ResetOnDrop, Samples, FLOOR_NS, IMAGE};

/// A CNI chain: the bridge's options and the plugins after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Chain {
    /// What skiff-node writes ([`CniConfig::conflist`]).
    Agent,
    /// bridge (isGateway) + host-local, nothing else.
    Plain,
    /// Plain, the bridge with ipMasq (per-pod iptables chain).
    IpMasq,
    /// Plain, the bridge with hairpinMode.
    Hairpin,
    /// Plain + portmap (capability portMappings; the pod maps none).
    Portmap,
    /// Plain + loopback (containerd already runs its own loopback network).
    Loopback,
    /// The chain skiff-node wrote before #39 Deliver 10: bridge (ipMasq,
    /// hairpinMode), portmap, loopback.
    Before,
}

impl Chain {
    pub(crate) fn conflist(
        self,
        bridge: &str,
        cidr: &str,
        ipam_dir: &Path,
    ) -> anyhow::Result<String> {
        if self == Chain::Agent {
            return Ok(CniConfig {
                bridge: bridge.to_string(),
                pod_cidr: cidr.to_string(),
                ipam_dir: ipam_dir.to_path_buf(),
                ..CniConfig::default()
            }
            .conflist()?);
        }
        let before = self == Chain::Before;
        let mut plugins = vec![json!({
            "type": "bridge",
            "bridge": bridge,
            "isGateway": true,
            "ipMasq": before || self == Chain::IpMasq,
            "hairpinMode": before || self == Chain::Hairpin,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": cidr }]],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": ipam_dir,
            }
        })];
        if before || self == Chain::Portmap {
            plugins.push(json!({ "type": "portmap", "capabilities": { "portMappings": true } }));
        }
        if before || self == Chain::Loopback {
            plugins.push(json!({ "type": "loopback" }));
        }
        let doc = json!({ "cniVersion": "0.4.0", "name": bridge, "plugins": plugins });
        Ok(serde_json::to_string_pretty(&doc)?)
    }
}

/// One setting added to (or taken from) a base config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// The agent's sandbox config in place of the minimal one (labels,
    /// annotations, namespaces, privileged false).
    OwnSandbox,
    /// The agent's container config in place of the minimal one.
    OwnContainer,
    /// Container PID namespace CONTAINER (upstream's default; absent, POD).
    PidContainer,
    /// The kubelet's masked and read-only paths.
    MaskedPaths,
    /// cpu shares and the BestEffort OOM score (1000).
    Resources,
    /// The pod's labels and annotations on sandbox and container.
    Labels,
    /// DNS config (cluster DNS servers, searches, ndots:5).
    Dns,
    /// /etc/hosts, /dev/termination-log and the service-account dir
    /// bind-mounted as the agent mounts them.
    Mounts,
    /// The sandbox in the pod's cgroup (skiff/NODE/besteffort/pod<uid>),
    /// made beforehand as the agent makes it.
    CgroupParent,
}

/// The base a variant starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    Minimal,
    /// Everything the agent sends ([`AGENT_EXTRAS`] on the agent's configs).
    Agent,
}

/// What the agent's sync adds to `sandbox_config`/`container_config`.
const AGENT_EXTRAS: &[Setting] = &[
    Setting::OwnSandbox,
    Setting::OwnContainer,
    Setting::Dns,
    Setting::Mounts,
    Setting::CgroupParent,
    Setting::Resources,
];

#[derive(Debug, Clone, Copy)]
pub(crate) struct Variant {
    pub(crate) key: &'static str,
    pub(crate) what: &'static str,
    pub(crate) chain: Chain,
    pub(crate) base: Base,
    /// Added to the minimal base; taken from the agent base.
    pub(crate) settings: &'static [Setting],
}

pub(crate) const MINIMAL: Variant = Variant {
    key: "minimal",
    what: "minimal configs, plain bridge",
    chain: Chain::Plain,
    base: Base::Minimal,
    settings: &[],
};

pub(crate) const AGENT: Variant = Variant {
    key: "agent",
    what: "what the agent sends, on its conflist",
    chain: Chain::Agent,
    base: Base::Agent,
    settings: &[],
};

/// Every variant of the bisect, in print order.
pub(crate) const VARIANTS: &[Variant] = &[
    MINIMAL,
    AGENT,
    Variant {
        key: "agent-before",
        what: "what the agent sends, on the conflist before Deliver 10",
        chain: Chain::Before,
        base: Base::Agent,
        settings: &[],
    },
    Variant {
        key: "chain-before",
        what: "minimal configs, chain before Deliver 10 (bridge ipMasq+hairpin, portmap, loopback)",
        chain: Chain::Before,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "chain-agent",
        what: "minimal configs, the agent's chain",
        chain: Chain::Agent,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "+ipmasq",
        what: "minimal + bridge ipMasq",
        chain: Chain::IpMasq,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "+hairpin",
        what: "minimal + bridge hairpinMode",
        chain: Chain::Hairpin,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "+portmap",
        what: "minimal + portmap (no hostPorts)",
        chain: Chain::Portmap,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "+loopback",
        what: "minimal + loopback in the chain",
        chain: Chain::Loopback,
        base: Base::Minimal,
        settings: &[],
    },
    Variant {
        key: "+own-sandbox",
        what: "minimal + the agent's sandbox_config",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::OwnSandbox],
    },
    Variant {
        key: "+own-container",
        what: "minimal + the agent's container_config",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::OwnContainer],
    },
    Variant {
        key: "+pid-container",
        what: "minimal + container PID namespace CONTAINER",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::PidContainer],
    },
    Variant {
        key: "+masked",
        what: "minimal + masked/read-only paths",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::MaskedPaths],
    },
    Variant {
        key: "+resources",
        what: "minimal + cpu shares, OOM score 1000",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::Resources],
    },
    Variant {
        key: "+labels",
        what: "minimal + labels and annotations",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::Labels],
    },
    Variant {
        key: "+dns",
        what: "minimal + DNS config",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::Dns],
    },
    Variant {
        key: "+mounts",
        what: "minimal + hosts, termination-log, service-account mounts",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::Mounts],
    },
    Variant {
        key: "+cgroup",
        what: "minimal + the pod's cgroup parent",
        chain: Chain::Plain,
        base: Base::Minimal,
        settings: &[Setting::CgroupParent],
    },
    Variant {
        key: "agent-cgroup",
        what: "agent less the pod's cgroup parent",
        chain: Chain::Agent,
        base: Base::Agent,
        settings: &[Setting::CgroupParent],
    },
    Variant {
        key: "agent-mounts",
        what: "agent less its mounts",
        chain: Chain::Agent,
        base: Base::Agent,
        settings: &[Setting::Mounts],
    },
    Variant {
        key: "agent-plain",
        what: "agent's configs on the plain bridge",
        chain: Chain::Plain,
        base: Base::Agent,
        settings: &[],
    },
];

/// What a floor needs to build a variant's configs.
pub(crate) struct Ctx<'a> {
    pub(crate) log_root: &'a Path,
    /// Where the hosts, termination-log and token files go.
    pub(crate) volumes: &'a Path,
    pub(crate) cgroups: &'a PodCgroups,
}

/// The cluster DNS address `skiff server` gives pods by default.
const CLUSTER_DNS: &str = "10.43.0.10";

impl Variant {
    fn has(&self, s: Setting) -> bool {
        match self.base {
            Base::Minimal => self.settings.contains(&s),
            Base::Agent => AGENT_EXTRAS.contains(&s) && !self.settings.contains(&s),
        }
    }

    pub(crate) fn uses_cgroups(&self) -> bool {
        self.has(Setting::CgroupParent)
    }

    /// The sandbox and container configs of `pod` (its first container).
    pub(crate) fn configs(
        &self,
        pod: &Pod,
        ctx: &Ctx<'_>,
    ) -> anyhow::Result<(api::PodSandboxConfig, api::ContainerConfig)> {
        let c = pod
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .ok_or_else(|| anyhow::anyhow!("no container"))?;
        let own_sandbox = sandbox_config(pod, 0, ctx.log_root, "cluster.local");
        let own_container = container_config(pod, c, 0, IMAGE);
        let meta = own_sandbox.metadata.clone();
        let mut sandbox = if self.has(Setting::OwnSandbox) {
            own_sandbox.clone()
        } else {
            api::PodSandboxConfig {
                metadata: meta,
                hostname: own_sandbox.hostname.clone(),
                log_directory: own_sandbox.log_directory.clone(),
                linux: Some(api::LinuxPodSandboxConfig::default()),
                ..Default::default()
            }
        };
        let mut container = if self.has(Setting::OwnContainer) {
            own_container.clone()
        } else {
            api::ContainerConfig {
                metadata: own_container.metadata.clone(),
                image: own_container.image.clone(),
                command: own_container.command.clone(),
                args: own_container.args.clone(),
                log_path: own_container.log_path.clone(),
                ..Default::default()
            }
        };
        let own_sc = own_container
            .linux
            .as_ref()
            .and_then(|l| l.security_context.clone())
            .unwrap_or_default();
        let security = |c: &mut api::ContainerConfig| {
            c.linux
                .get_or_insert_with(Default::default)
                .security_context
                .get_or_insert_with(Default::default)
                .clone()
        };
        let set_security = |c: &mut api::ContainerConfig,
                            sc: api::LinuxContainerSecurityContext| {
            c.linux
                .get_or_insert_with(Default::default)
                .security_context = Some(sc);
        };
        if self.has(Setting::PidContainer) {
            let mut sc = security(&mut container);
            sc.namespace_options
                .get_or_insert_with(Default::default)
                .pid = api::NamespaceMode::Container as i32;
            set_security(&mut container, sc);
        }
        if self.has(Setting::MaskedPaths) {
            let mut sc = security(&mut container);
            sc.masked_paths = own_sc.masked_paths.clone();
            sc.readonly_paths = own_sc.readonly_paths.clone();
            set_security(&mut container, sc);
        }
        if self.has(Setting::Resources) {
            let mut r = own_container
                .linux
                .as_ref()
                .and_then(|l| l.resources.clone())
                .unwrap_or_default();
            r.oom_score_adj = qos::oom_score_adj(pod, c, 8 << 30);
            container
                .linux
                .get_or_insert_with(Default::default)
                .resources = Some(r);
        }
        if self.has(Setting::Labels) {
            sandbox.labels = own_sandbox.labels.clone();
            sandbox.annotations = own_sandbox.annotations.clone();
            container.labels = own_container.labels.clone();
            container.annotations = own_container.annotations.clone();
        }
        if self.has(Setting::Dns) {
            let resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            sandbox.dns_config =
                Some(dns::dns(pod, &resolv, &[CLUSTER_DNS.to_string()], "cluster.local").config);
        }
        if self.has(Setting::Mounts) {
            container.mounts = mounts(pod, ctx.volumes)?;
        }
        if self.has(Setting::CgroupParent) {
            ctx.cgroups.ensure(pod)?;
            sandbox
                .linux
                .get_or_insert_with(Default::default)
                .cgroup_parent = ctx.cgroups.parent(pod);
        }
        Ok((sandbox, container))
    }
}

/// The files the agent bind-mounts into a container, written as it
/// writes them: the pod's /etc/hosts, a termination-log file and a
/// service-account token dir.
fn mounts(pod: &Pod, volumes: &Path) -> anyhow::Result<Vec<api::Mount>> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let dir = volumes.join(uid);
    let sa = dir.join("kube-api-access");
    std::fs::create_dir_all(&sa)?;
    let hosts = dir.join("etc-hosts");
    let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    std::fs::write(
        &hosts,
        dns::hosts_file(pod, "", &node_hosts, "cluster.local"),
    )?;
    let log = dir.join("termination-sleep-0");
    std::fs::write(&log, b"")?;
    for (file, text) in [("token", "x"), ("ca.crt", "x"), ("namespace", FLOOR_NS)] {
        std::fs::write(sa.join(file), text)?;
    }
    let bind = |from: &Path, to: &str, readonly: bool| api::Mount {
        container_path: to.into(),
        host_path: from.display().to_string(),
        readonly,
        ..Default::default()
    };
    Ok(vec![
        bind(&sa, "/var/run/secrets/kubernetes.io/serviceaccount", true),
        bind(&hosts, "/etc/hosts", false),
        bind(&log, "/dev/termination-log", false),
    ])
}

/// The cgroups of a floor's pods: under `skiff/<name>`, recorded in its
/// data dir so that `skiff reset` removes them.
pub(crate) fn floor_cgroups(data_dir: &Path, name: &str) -> anyhow::Result<PodCgroups> {
    let cg = PodCgroups {
        fs: PathBuf::from("/sys/fs/cgroup"),
        root: format!("skiff/{name}"),
    };
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(data_dir.join(skiff_node::agent::CGROUP_ROOT_FILE), &cg.root)?;
    Ok(cg)
}

// ------------------------------------------------------------ the bisect

/// One variant's samples.
#[derive(Debug, Default)]
struct Figures {
    up: Samples,
    run_sandbox: Samples,
    create: Samples,
    start: Samples,
    stop_sandbox: Samples,
    remove_sandbox: Samples,
}

/// `skiff-bench node --floor-variants [KEY,…]`: each variant's pods
/// started and removed one at a time, `rounds` rounds, the variants'
/// order rotated each round; medians of each CRI call from containerd's
/// log.
pub(crate) async fn run(
    skiff: &Path,
    work: &Path,
    keys: &[String],
    rounds: usize,
    keep_logs: Option<&Path>,
) -> anyhow::Result<()> {
    let variants: Vec<Variant> = if keys.is_empty() {
        VARIANTS.to_vec()
    } else {
        let mut v = vec![];
        for k in keys {
            let found = VARIANTS.iter().find(|v| v.key == k).ok_or_else(|| {
                anyhow::anyhow!(
                    "no variant {k:?}; there are: {}",
                    VARIANTS
                        .iter()
                        .map(|v| v.key)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            v.push(*found);
        }
        v
    };
    // One containerd per chain. Locals drop in reverse: the floors stop,
    // then their resets run, then the leases go.
    let mut chains: Vec<Chain> = variants.iter().map(|v| v.chain).collect();
    chains.sort();
    chains.dedup();
    let mut leases = vec![];
    let mut resets = vec![];
    let mut floors: BTreeMap<Chain, Arc<Floor>> = BTreeMap::new();
    let mut from = 240;
    for chain in &chains {
        let lease = Lease::take(from)?;
        from = lease.octet + 1;
        skiff_node::network::remove_bridge(&lease.bridge());
        let dir = work.join(format!("floor-{chain:?}").to_lowercase());
        resets.push(ResetOnDrop {
            skiff: skiff.to_path_buf(),
            data_dir: dir.clone(),
            bridge: lease.bridge(),
            log: work.join("reset.log"),
        });
        let cidr = format!("10.{}.0.0/24", lease.octet);
        let floor = Floor::start(dir, &lease.bridge(), &cidr, *chain).await?;
        eprintln!(
            "floor {chain:?}: containerd up (bridge {}, {cidr})",
            lease.bridge()
        );
        floors.insert(*chain, Arc::new(floor));
        leases.push(lease);
    }
    let result = async {
        // Warm-up: one pod each, not counted.
        for (i, v) in variants.iter().enumerate() {
            let f = &floors[&v.chain];
            let p = f.up(&format!("w{i}"), v).await?;
            f.down(&p).await?;
        }
        let mut ups: Vec<Samples> = vec![Samples::default(); variants.len()];
        for r in 0..rounds {
            for k in 0..variants.len() {
                let i = (k + r) % variants.len();
                let v = &variants[i];
                let f = &floors[&v.chain];
                let p = f.up(&format!("v{i}-{r}"), v).await?;
                ups[i].push(p.done.at - p.began.at);
                tokio::time::sleep(Duration::from_millis(100)).await;
                f.down(&p).await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            eprintln!("round {} of {rounds}", r + 1);
        }
        anyhow::Ok(ups)
    }
    .await;
    let mut logs = BTreeMap::new();
    for (chain, f) in &floors {
        logs.insert(*chain, parse_containerd_log(&f.log_path(), FLOOR_NS));
        if let Some(dir) = keep_logs {
            std::fs::create_dir_all(dir)?;
            let _ = std::fs::copy(
                f.log_path(),
                dir.join(format!("floor-{chain:?}-containerd.log").to_lowercase()),
            );
        }
    }
    for (_, f) in std::mem::take(&mut floors) {
        if let Some(mut f) = Arc::into_inner(f) {
            f.stop().await;
        }
    }
    drop(resets);
    drop(leases);
    let ups = result?;

    let figures: Vec<Figures> = variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let calls = &logs[&v.chain];
            let mut f = Figures {
                up: ups[i].clone(),
                ..Default::default()
            };
            for r in 0..rounds {
                let Some(c) = calls.get(&format!("v{i}-{r}")) else {
                    continue;
                };
                for (s, d) in [
                    (&mut f.run_sandbox, c.run_sandbox.took()),
                    (&mut f.create, c.create.took()),
                    (&mut f.start, c.start.took()),
                    (&mut f.stop_sandbox, c.stop_sandbox.took()),
                    (&mut f.remove_sandbox, c.remove_sandbox.took()),
                ] {
                    if let Some(d) = d {
                        s.push(d);
                    }
                }
            }
            f
        })
        .collect();
    let base = variants
        .iter()
        .position(|v| v.key == MINIMAL.key)
        .map(|i| &figures[i]);
    let delta = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1}", (a.as_secs_f64() - b.as_secs_f64()) * 1e3),
        _ => "-".into(),
    };
    let rows: Vec<Vec<String>> = variants
        .iter()
        .zip(&figures)
        .map(|(v, f)| {
            let p = |s: &Samples| s.p(50.0);
            vec![
                v.key.to_string(),
                v.what.to_string(),
                ms(p(&f.up)),
                delta(p(&f.up), base.and_then(|b| p(&b.up))),
                ms(p(&f.run_sandbox)),
                delta(p(&f.run_sandbox), base.and_then(|b| p(&b.run_sandbox))),
                ms(p(&f.create)),
                ms(p(&f.start)),
                delta(p(&f.start), base.and_then(|b| p(&b.start))),
                ms(p(&f.stop_sandbox)),
                ms(p(&f.remove_sandbox)),
            ]
        })
        .collect();
    crate::stats::print_grid(
        &format!(
            "Floor variants: medians of {rounds} pods each, one at a time, variants interleaved; CRI calls from containerd's log, Δ vs `minimal` in ms; up = RunPodSandbox→StartContainer returned (bench clock)"
        ),
        &[
            "variant",
            "what",
            "up",
            "Δ up",
            "RunPodSandbox",
            "Δ",
            "CreateContainer",
            "StartContainer",
            "Δ",
            "StopPodSandbox",
            "RemovePodSandbox",
        ],
        &rows,
    );
    Ok(())
}
