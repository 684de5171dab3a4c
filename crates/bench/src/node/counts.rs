//! What one pod start costs in calls, counted where the times drift:
//! the agent's CRI calls by method (its `kubelet_runtime_operations_total`
//! on the agent's `/metrics`) and the API server's writes of pods, Events
//! and service-account tokens (`apiserver_request_total`), as the
//! difference of two scrapes around a pod started alone (and around its
//! deletion).
//!
//! A window runs from just before the create (or the delete) until the
//! agent's relist has run twice after the pod was Ready (or its sandbox
//! was gone), so the relist's wake-up of the pod's worker, and the sync
//! it may start, fall inside. The relist's own lists come once a second
//! however long the window is, so they are taken out: the agent counts a
//! relist as one `list_containers` and nothing else, while a pod worker's
//! read of the runtime is one `list_podsandbox` with one
//! `list_containers`; the relists in a window are the difference. The
//! agent's runtime health checks (CRI Status, Version) and writes other
//! than pods' and Events' (Leases, the Node's status) are periodic and
//! left out too. Each figure is the median over the pods, so a
//! scrape of `/metrics/resource` (every 15 s) that lands in one window
//! does not show.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Client;
use skiff_node::runtime::cri::CriRuntime;

use super::{delete_one, start_one, PodWatch};

/// The CRI method each of the agent's `operation_type`s is (upstream's
/// instrumented runtime service names).
const METHODS: &[(&str, &str)] = &[
    ("list_podsandbox", "ListPodSandbox"),
    ("list_containers", "ListContainers"),
    ("run_podsandbox", "RunPodSandbox"),
    ("podsandbox_status", "PodSandboxStatus"),
    ("image_status", "ImageStatus"),
    ("pull_image", "PullImage"),
    ("create_container", "CreateContainer"),
    ("start_container", "StartContainer"),
    ("container_status", "ContainerStatus"),
    ("exec_sync", "ExecSync"),
    ("stop_container", "StopContainer"),
    ("stop_podsandbox", "StopPodSandbox"),
    ("remove_container", "RemoveContainer"),
    ("remove_podsandbox", "RemovePodSandbox"),
    ("status", "Status"),
    ("version", "Version"),
];

/// The agent's own periodic CRI calls (its runtime health check), left
/// out as the relists are: how many fall in a window depends on its
/// length.
const PERIODIC: &[&str] = &["status", "version"];

/// The verbs of `apiserver_request_total` that write.
const WRITES: &[&str] = &[
    "POST",
    "PUT",
    "PATCH",
    "APPLY",
    "DELETE",
    "DELETECOLLECTION",
];

/// How long the agent gets for its two relists after a pod was up.
const RELISTS_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the agent's counters are read while waiting for them.
const POLL: Duration = Duration::from_millis(100);

/// One sample of a Prometheus text exposition: name, labels, value.
fn samples(text: &str) -> impl Iterator<Item = (&str, BTreeMap<&str, String>, f64)> {
    text.lines().filter_map(|line| {
        if line.starts_with('#') || line.trim().is_empty() {
            return None;
        }
        let (head, value) = line.rsplit_once(' ')?;
        let value: f64 = value.parse().ok()?;
        let (name, labels) = match head.split_once('{') {
            Some((name, rest)) => (name, labels(rest.strip_suffix('}')?)?),
            None => (head, BTreeMap::new()),
        };
        Some((name, labels, value))
    })
}

/// `k="v",k2="v2"` (values with Prometheus escapes).
fn labels(mut s: &str) -> Option<BTreeMap<&str, String>> {
    let mut out = BTreeMap::new();
    while !s.is_empty() {
        let (key, rest) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.insert(key.trim_start_matches(','), value);
        s = rest.get(end + 1..)?.trim_start_matches(',');
    }
    Some(out)
}

/// The counters read at one moment.
#[derive(Debug, Default, Clone, PartialEq)]
struct Scrape {
    /// `kubelet_runtime_operations_total` by `operation_type`.
    cri: BTreeMap<String, f64>,
    /// `apiserver_request_total` of pods, Events and service-account
    /// tokens written, by `VERB resource[/subresource]`.
    writes: BTreeMap<String, f64>,
    /// The agent's pod worker passes (`kubelet_pod_worker_duration_seconds`
    /// count) by `operation_type` (create, update, sync, kill).
    passes: BTreeMap<String, f64>,
}

impl Scrape {
    fn parse(agent: &str, api: &str) -> Self {
        let mut s = Scrape::default();
        for (name, l, v) in samples(agent) {
            let into = match name {
                "kubelet_runtime_operations_total" => &mut s.cri,
                "kubelet_pod_worker_duration_seconds_count" => &mut s.passes,
                _ => continue,
            };
            if let Some(op) = l.get("operation_type") {
                *into.entry(op.clone()).or_default() += v;
            }
        }
        for (name, l, v) in samples(api) {
            let get = |k: &str| l.get(k).map(String::as_str).unwrap_or_default();
            if name != "apiserver_request_total" || !WRITES.contains(&get("verb")) {
                continue;
            }
            // A pod's writes, its Events, and the token of its
            // service-account volume (TokenRequest).
            let token = get("resource") == "serviceaccounts" && get("subresource") == "token";
            if !matches!(get("resource"), "pods" | "events") && !token {
                continue;
            }
            let key = match get("subresource") {
                "" => format!("{} {}", get("verb"), get("resource")),
                sub => format!("{} {}/{sub}", get("verb"), get("resource")),
            };
            *s.writes.entry(key).or_default() += v;
        }
        s
    }

    fn cri(&self, op: &str) -> f64 {
        self.cri.get(op).copied().unwrap_or(0.0)
    }

    /// Relists so far: the `list_containers` without a `list_podsandbox`
    /// beside them (see the module doc).
    fn relists(&self) -> f64 {
        self.cri("list_containers") - self.cri("list_podsandbox")
    }

    /// What happened from `before` to `self`, the relists' lists taken
    /// out; the relists counted apart.
    fn since(&self, before: &Scrape) -> (Window, f64) {
        let relists = self.relists() - before.relists();
        let mut w = Window::default();
        for (op, v) in &self.cri {
            if PERIODIC.contains(&op.as_str()) {
                continue;
            }
            let mut d = v - before.cri(op);
            if op == "list_containers" {
                d -= relists;
            }
            if d != 0.0 {
                w.cri.insert(op.clone(), d);
            }
        }
        for (k, v) in &self.writes {
            let d = v - before.writes.get(k).copied().unwrap_or(0.0);
            if d != 0.0 {
                w.writes.insert(k.clone(), d);
            }
        }
        for (k, v) in &self.passes {
            let d = v - before.passes.get(k).copied().unwrap_or(0.0);
            if d != 0.0 {
                w.passes.insert(k.clone(), d);
            }
        }
        (w, relists)
    }
}

/// The calls of one window.
#[derive(Debug, Default, Clone)]
struct Window {
    cri: BTreeMap<String, f64>,
    writes: BTreeMap<String, f64>,
    passes: BTreeMap<String, f64>,
}

/// The medians over the pods, per start and per deletion.
#[derive(Debug, Default, Clone)]
pub(super) struct Counts {
    pub(super) pods: usize,
    starts: Vec<Window>,
    deletes: Vec<Window>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

impl Counts {
    /// Median per key of `windows` (missing keys count 0).
    fn medians(
        windows: &[Window],
        pick: impl Fn(&Window) -> &BTreeMap<String, f64>,
    ) -> BTreeMap<String, f64> {
        let keys: BTreeSet<&String> = windows.iter().flat_map(|w| pick(w).keys()).collect();
        keys.into_iter()
            .map(|k| {
                let values = windows
                    .iter()
                    .map(|w| pick(w).get(k).copied().unwrap_or(0.0))
                    .collect();
                (k.clone(), median(values))
            })
            .filter(|(_, v)| *v != 0.0)
            .collect()
    }

    /// Rows (what, per start, per deletion) for the report: CRI calls
    /// by method (in the order of a pod's life), their total, then the
    /// writes.
    pub(super) fn rows(&self) -> Vec<[String; 3]> {
        let cri = (
            Self::medians(&self.starts, |w| &w.cri),
            Self::medians(&self.deletes, |w| &w.cri),
        );
        let writes = (
            Self::medians(&self.starts, |w| &w.writes),
            Self::medians(&self.deletes, |w| &w.writes),
        );
        let n = |m: &BTreeMap<String, f64>, k: &str| match m.get(k) {
            Some(v) => format!("{v}"),
            None => "0".into(),
        };
        let mut rows = Vec::new();
        let mut ops: Vec<&str> = METHODS.iter().map(|(op, _)| *op).collect();
        for op in cri.0.keys().chain(cri.1.keys()) {
            if !ops.contains(&op.as_str()) {
                ops.push(op);
            }
        }
        let (mut total_start, mut total_delete) = (0.0, 0.0);
        for op in ops {
            if !cri.0.contains_key(op) && !cri.1.contains_key(op) {
                continue;
            }
            let name = METHODS
                .iter()
                .find(|(o, _)| *o == op)
                .map_or(op, |(_, m)| *m);
            total_start += cri.0.get(op).copied().unwrap_or(0.0);
            total_delete += cri.1.get(op).copied().unwrap_or(0.0);
            rows.push([format!("  CRI {name}"), n(&cri.0, op), n(&cri.1, op)]);
        }
        rows.push([
            "  CRI calls (sum of the medians)".into(),
            format!("{total_start}"),
            format!("{total_delete}"),
        ]);
        let keys: BTreeSet<&String> = writes.0.keys().chain(writes.1.keys()).collect();
        let (mut w_start, mut w_delete) = (0.0, 0.0);
        for k in keys {
            w_start += writes.0.get(k).copied().unwrap_or(0.0);
            w_delete += writes.1.get(k).copied().unwrap_or(0.0);
            rows.push([format!("  API {k}"), n(&writes.0, k), n(&writes.1, k)]);
        }
        rows.push([
            "  API writes (sum of the medians)".into(),
            format!("{w_start}"),
            format!("{w_delete}"),
        ]);
        let passes = (
            Self::medians(&self.starts, |w| &w.passes),
            Self::medians(&self.deletes, |w| &w.passes),
        );
        let keys: BTreeSet<&String> = passes.0.keys().chain(passes.1.keys()).collect();
        for k in keys {
            rows.push([
                format!("  agent pod worker passes: {k}"),
                n(&passes.0, k),
                n(&passes.1, k),
            ]);
        }
        rows
    }
}

/// Reads the agent's and the API server's counters.
pub(super) struct Scraper {
    api: Client,
    agent: Client,
}

impl Scraper {
    /// Clients for the API server (the admin kubeconfig) and for the
    /// agent's endpoint on `kubelet_port` (the same admin credentials,
    /// `nodes/metrics`; its serving certificate is not checked).
    pub(super) async fn new(
        kubeconfig: &std::path::Path,
        kubelet_port: u16,
    ) -> anyhow::Result<Self> {
        let options = KubeConfigOptions::default();
        let api =
            kube::Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &options)
                .await?;
        let mut agent = api.clone();
        agent.cluster_url = format!("https://127.0.0.1:{kubelet_port}").parse()?;
        agent.accept_invalid_certs = true;
        agent.tls_server_name = None;
        Ok(Self {
            api: Client::try_from(api)?,
            agent: Client::try_from(agent)?,
        })
    }

    async fn scrape(&self) -> anyhow::Result<Scrape> {
        let get = || crate::cluster::request("GET", "/metrics", None);
        let (agent, api) =
            futures::future::try_join(self.agent.request_text(get()), self.api.request_text(get()))
                .await
                .context("scraping /metrics")?;
        let s = Scrape::parse(&agent, &api);
        if s.cri.is_empty() {
            bail!(
                "the agent's /metrics has no kubelet_runtime_operations_total (--metrics=false?)"
            );
        }
        Ok(s)
    }

    /// Scrapes until the agent has relisted twice since `from`; the last
    /// scrape.
    async fn after_two_relists(&self, from: &Scrape) -> anyhow::Result<Scrape> {
        let deadline = std::time::Instant::now() + RELISTS_TIMEOUT;
        loop {
            let now = self.scrape().await?;
            if now.relists() - from.relists() >= 2.0 {
                return Ok(now);
            }
            if std::time::Instant::now() > deadline {
                bail!("the agent did not relist twice within {RELISTS_TIMEOUT:?}");
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Starts and deletes `n` pods one at a time, each alone, counting the
/// calls of each start and each deletion.
pub(super) async fn count(
    scraper: &Scraper,
    pods: &Api<Pod>,
    watch: &PodWatch,
    cri: &CriRuntime,
    n: usize,
) -> anyhow::Result<Counts> {
    let mut counts = Counts {
        pods: n,
        ..Counts::default()
    };
    // Whatever came before (a burst's teardown) is over first.
    let mut before = scraper.scrape().await?;
    before = scraper.after_two_relists(&before).await?;
    for i in 0..n {
        let name = format!("count-{i}");
        start_one(pods, watch, &name).await?;
        let up = scraper.scrape().await?;
        let after = scraper.after_two_relists(&up).await?;
        counts.starts.push(after.since(&before).0);
        delete_one(pods, watch, cri, &name).await?;
        let gone = scraper.scrape().await?;
        before = scraper.after_two_relists(&gone).await?;
        counts.deletes.push(before.since(&after).0);
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: &str = r#"# TYPE kubelet_runtime_operations counter
kubelet_runtime_operations_total{operation_type="list_podsandbox"} 4
kubelet_runtime_operations_total{operation_type="list_containers"} 10
kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1
kubelet_runtime_operations_total{operation_type="status"} 7
kubelet_running_pods 1
"#;

    const API: &str = r#"apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",code="201"} 2
apiserver_request_total{verb="PATCH",dry_run="",group="",version="v1",resource="pods",subresource="status",scope="namespace",component="apiserver",code="200"} 3
apiserver_request_total{verb="PUT",dry_run="",group="coordination.k8s.io",version="v1",resource="leases",subresource="",scope="namespace",component="apiserver",code="200"} 9
apiserver_request_total{verb="GET",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",code="200"} 7
apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="serviceaccounts",subresource="token",scope="namespace",component="apiserver",code="201"} 1
"#;

    #[test]
    fn scrapes_keep_the_cri_calls_and_the_pod_and_event_writes() {
        let s = Scrape::parse(AGENT, API);
        assert_eq!(s.cri("list_containers"), 10.0);
        assert_eq!(s.relists(), 6.0);
        assert_eq!(
            s.writes.keys().collect::<Vec<_>>(),
            [
                "PATCH pods/status",
                "POST pods",
                "POST serviceaccounts/token"
            ]
        );
    }

    #[test]
    fn a_window_leaves_the_relists_lists_out() {
        let before = Scrape::parse(AGENT, API);
        let mut after = before.clone();
        // Two relists and one worker read.
        *after.cri.get_mut("list_containers").unwrap() += 3.0;
        *after.cri.get_mut("list_podsandbox").unwrap() += 1.0;
        *after.writes.get_mut("POST pods").unwrap() += 1.0;
        *after.cri.get_mut("status").unwrap() += 1.0;
        let (w, relists) = after.since(&before);
        assert_eq!(relists, 2.0);
        assert_eq!(w.cri.get("list_containers"), Some(&1.0));
        assert_eq!(w.cri.get("list_podsandbox"), Some(&1.0));
        assert_eq!(w.writes.get("POST pods"), Some(&1.0));
        assert!(!w.cri.contains_key("run_podsandbox"));
        assert!(!w.cri.contains_key("status"), "periodic");
    }

    #[test]
    fn medians_count_a_missing_key_as_zero() {
        let w = |v: f64| Window {
            cri: BTreeMap::from([("image_status".to_string(), v)]),
            ..Window::default()
        };
        let counts = Counts {
            pods: 3,
            starts: vec![w(2.0), w(1.0), Window::default()],
            deletes: vec![],
        };
        assert_eq!(
            Counts::medians(&counts.starts, |w| &w.cri).get("image_status"),
            Some(&1.0)
        );
    }

    #[test]
    fn labels_unescape() {
        let l = labels(r#"a="x\"y",b="""#).unwrap();
        assert_eq!(l.get("a").map(String::as_str), Some("x\"y"));
        assert_eq!(l.get("b").map(String::as_str), Some(""));
    }
}
