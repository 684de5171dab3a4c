//! The HorizontalPodAutoscaler controller (upstream's
//! `pkg/controller/podautoscaler`, component
//! `horizontal-pod-autoscaler`): every sync period
//! (`--horizontal-pod-autoscaler-sync-period`, 15 s) each autoscaler
//! reads its target's `/scale`, the metrics.k8s.io samples of the pods
//! the scale's selector picks ([`resource_metrics`]), proposes a count
//! per metric ([`replicas`]), takes the largest, stabilizes and bounds it
//! ([`behavior`]), writes it to `/scale` when it differs and keeps the
//! autoscaler's status: currentReplicas, desiredReplicas, currentMetrics,
//! lastScaleTime and the conditions AbleToScale, ScalingActive and
//! ScalingLimited, worded as upstream's. Events: SuccessfulRescale,
//! FailedRescale, FailedGetScale, FailedGetResourceMetric,
//! FailedGetContainerResourceMetric, FailedComputeMetricsReplicas,
//! SelectorRequired, InvalidSelector, AmbiguousSelector,
//! FailedUpdateStatus. A target at zero replicas is not scaled
//! (ScalingDisabled). Resource and ContainerResource metrics are served;
//! Pods, Object and External ones need custom or external metrics APIs
//! this cluster does not have, and fail as upstream's do without them.
//!
//! This module owns the sync and its reads and writes; the arithmetic
//! is in [`replicas`] and [`behavior`]. It must not touch the target's
//! pods or spec other than through `/scale`.

pub mod behavior;
pub mod replicas;
pub mod resource_metrics;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, CrossVersionObjectReference, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerCondition, HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus,
    MetricTarget, MetricValueStatus, ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::{Api, ResourceExt};
use skiff_api::selectors::LabelSelector;
use skiff_client::recorder::{reference_to, EventType, Recorder};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::runner;
use behavior::{History, Normalized, Rules};
use replicas::{Calculator, Observed, Tolerances};

/// The controller's settings (kube-controller-manager's
/// `--horizontal-pod-autoscaler-*` flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// How often each autoscaler syncs (`-sync-period`, 15 s).
    pub sync_period: Duration,
    /// The scale-down stabilization window of autoscalers that set none
    /// (`-downscale-stabilization`, 5 min).
    pub downscale_stabilization: Duration,
    /// How far the usage ratio may stray from 1 before the count changes
    /// (`-tolerance`, 0.1).
    pub tolerance: f64,
    /// How long after a pod starts its CPU samples are suspect
    /// (`-cpu-initialization-period`, 5 min).
    pub cpu_initialization_period: Duration,
    /// How long after a pod starts an unready pod is taken as never ready
    /// (`-initial-readiness-delay`, 30 s).
    pub initial_readiness_delay: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            sync_period: Duration::from_secs(15),
            downscale_stabilization: Duration::from_secs(300),
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// Why a sync did not finish (logged; the autoscaler syncs again next
/// period either way, as upstream's).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The target's scale could not be read.
    #[error("failed to query scale subresource for {reference}: {message}")]
    GetScale {
        /// `Kind/namespace/name`.
        reference: String,
        /// Why.
        message: String,
    },
    /// No metric gave a count.
    #[error("failed to compute desired number of replicas based on listed metrics for {reference}: {message}")]
    Metrics {
        /// `Kind/namespace/name`.
        reference: String,
        /// Why.
        message: String,
    },
    /// Writing the scale failed.
    #[error("failed to rescale {reference}")]
    Rescale {
        /// `Kind/namespace/name`.
        reference: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("failed to update status for {name}")]
    Status {
        /// The autoscaler.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// What the controller keeps per autoscaler between syncs.
#[derive(Debug, Default)]
struct Kept {
    history: History,
    /// When it last synced (syncs are a period apart, whatever wakes it).
    synced: Option<Instant>,
    /// Its target's selector as last read.
    selector: Option<LabelSelector>,
}

struct State {
    context: Context,
    hpas: Store<HorizontalPodAutoscaler>,
    pods: Store<Pod>,
    recorder: Recorder,
    kept: Mutex<HashMap<String, Kept>>,
    /// `apiVersion/kind` → the resource its `/scale` is under.
    resources: Mutex<HashMap<String, ApiResource>>,
}

impl State {
    fn settings(&self) -> Settings {
        self.context.config.hpa
    }

    fn kept<T>(&self, key: &str, f: impl FnOnce(&mut Kept) -> T) -> T {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        f(kept.entry(key.to_string()).or_default())
    }
}

/// Starts the HorizontalPodAutoscaler controller.
pub(crate) fn start(context: Context, shutdown: CancellationToken) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        let hpas = context.informers.get::<HorizontalPodAutoscaler>();
        let pods = context.informers.get::<Pod>();
        let controller = Controller::for_stream(hpas.objects(), hpas.store());
        let state = Arc::new(State {
            recorder: context.recorder("horizontal-pod-autoscaler"),
            hpas: hpas.store(),
            pods: pods.store(),
            context,
            kept: Mutex::default(),
            resources: Mutex::default(),
        });
        let forget = {
            let state = state.clone();
            tokio::spawn(runner::on_deleted(
                hpas.changes(),
                shutdown.clone(),
                move |hpa: &HorizontalPodAutoscaler| {
                    tracing::info!(hpa = %key(hpa), "Horizontal Pod Autoscaler has been deleted");
                    state
                        .kept
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&key(hpa));
                },
            ))
        };
        pods.ready().await;
        runner::run(
            "horizontalpodautoscaling",
            &hpas,
            controller,
            // Upstream's --concurrent-horizontal-pod-autoscaler-syncs.
            5,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
        forget.abort();
    })
}

fn key(hpa: &HorizontalPodAutoscaler) -> String {
    format!(
        "{}/{}",
        hpa.metadata.namespace.as_deref().unwrap_or_default(),
        hpa.name_any()
    )
}

fn error_policy(_: Arc<HorizontalPodAutoscaler>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.settings().sync_period)
}

/// One sync a period per autoscaler: a change (its own status writes
/// among them) only brings the next one forward to a period after the
/// last, as upstream's queue adds every key a period late.
async fn reconcile(hpa: Arc<HorizontalPodAutoscaler>, state: Arc<State>) -> Result<Action, Error> {
    let key = key(&hpa);
    let period = state.settings().sync_period;
    if let Some(last) = state.kept(&key, |k| k.synced) {
        let since = last.elapsed();
        if since < period {
            return Ok(Action::requeue(period - since));
        }
    }
    state.kept(&key, |k| k.synced = Some(Instant::now()));
    if let Err(e) = Sync::new(&state, &hpa, &key).run().await {
        tracing::info!(hpa = %key, error = %runner::Chain(&e), "horizontal pod autoscaler sync");
    }
    Ok(Action::requeue(period))
}

/// The message of an API error (what Go's `err.Error()` gives).
pub(crate) fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        e => e.to_string(),
    }
}

/// A count of milli-units as apimachinery's `NewMilliQuantity(v,
/// DecimalSI).String()`.
pub fn milli_quantity(v: i64) -> String {
    if v == 0 {
        return "0".into();
    }
    let (mut value, mut exponent) = (v, -3i32);
    while value % 1000 == 0 && exponent < 18 {
        value /= 1000;
        exponent += 3;
    }
    let suffix = match exponent {
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    format!("{value}{suffix}")
}

/// Upstream's `setConditionInList`: the transition time moves only when
/// the status does.
pub fn set_condition(
    conditions: &mut Vec<HorizontalPodAutoscalerCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let i = match conditions.iter().position(|c| c.type_ == type_) {
        Some(i) => i,
        None => {
            conditions.push(HorizontalPodAutoscalerCondition {
                type_: type_.to_string(),
                ..Default::default()
            });
            conditions.len() - 1
        }
    };
    let Some(c) = conditions.get_mut(i) else {
        return;
    };
    if c.status != status {
        c.last_transition_time = Some(Time(now));
    }
    c.status = status.to_string();
    c.reason = Some(reason.to_string());
    c.message = Some(message.to_string());
}

/// A metric that gave no count: the condition it sets and the error.
struct Invalid {
    reason: &'static str,
    /// The event's message (the metric's own error).
    message: String,
    /// The error as the metric's kind wraps it.
    error: String,
}

/// A metric's proposal.
struct Proposal {
    replicas: i32,
    metric: String,
    status: MetricStatus,
}

/// The metrics' verdict (upstream's `computeReplicasForMetrics`).
struct Computed {
    /// `None`: no count at all.
    replicas: Option<i32>,
    metric: String,
    statuses: Vec<MetricStatus>,
    error: Option<String>,
}

/// One sync of one autoscaler.
struct Sync<'a> {
    state: &'a State,
    hpa: HorizontalPodAutoscaler,
    original: Option<HorizontalPodAutoscalerStatus>,
    key: &'a str,
    namespace: String,
    now: Timestamp,
}

impl<'a> Sync<'a> {
    fn new(state: &'a State, hpa: &HorizontalPodAutoscaler, key: &'a str) -> Self {
        let mut copy = hpa.clone();
        let original = copy.status.clone();
        copy.status.get_or_insert_with(Default::default);
        Self {
            state,
            namespace: hpa.metadata.namespace.clone().unwrap_or_default(),
            hpa: copy,
            original,
            key,
            now: state.context.config.wall_clock.now(),
        }
    }

    fn event(&self, type_: EventType, reason: &str, message: &str) {
        self.state
            .recorder
            .record_for(&reference_to(&self.hpa), type_, reason, "", message);
    }

    fn condition(&mut self, type_: &str, status: &str, reason: &str, message: &str) {
        let now = self.now;
        let conditions = self
            .hpa
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        set_condition(conditions, type_, status, reason, message, now);
    }

    fn status(&self) -> &HorizontalPodAutoscalerStatus {
        static EMPTY: std::sync::OnceLock<HorizontalPodAutoscalerStatus> =
            std::sync::OnceLock::new();
        self.hpa
            .status
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(Default::default))
    }

    /// Upstream's `reconcileAutoscaler`.
    async fn run(mut self) -> Result<(), Error> {
        let spec = self.hpa.spec.clone().unwrap_or_default();
        let target = spec.scale_target_ref.clone();
        let reference = format!("{}/{}/{}", target.kind, self.namespace, target.name);

        let scaled = match self.resource(&target).await {
            Ok(ar) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.state.context.client.clone(), &self.namespace, &ar);
                api.get_scale(&target.name)
                    .await
                    .map(|scale| (api, scale))
                    .map_err(|e| api_message(&e))
            }
            Err(message) => Err(message),
        };
        let (api, mut scale) = match scaled {
            Ok(found) => found,
            Err(message) => {
                self.event(EventType::Warning, "FailedGetScale", &message);
                self.condition(
                    "AbleToScale",
                    "False",
                    "FailedGetScale",
                    &format!("the HPA controller was unable to get the target's current scale: {message}"),
                );
                self.update_status_if_needed().await?;
                return Err(Error::GetScale { reference, message });
            }
        };
        self.condition(
            "AbleToScale",
            "True",
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        );
        let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let now = self.now;
        self.state
            .kept(self.key, |k| k.history.record_initial(current, now));

        let min = spec.min_replicas.unwrap_or(1);
        let max = spec.max_replicas;
        let mut statuses = Vec::new();
        let mut desired = 0;
        let mut reason = String::new();
        let mut later = None;
        let rescale = if current == 0 && min != 0 {
            self.condition(
                "ScalingActive",
                "False",
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            );
            false
        } else if current > max {
            reason = "Current number of replicas above Spec.MaxReplicas".into();
            desired = max;
            true
        } else if current < min {
            reason = "Current number of replicas below Spec.MinReplicas".into();
            desired = min;
            true
        } else {
            let computed = self
                .compute_replicas(&scale, spec.metrics.as_deref().unwrap_or_default())
                .await;
            statuses = computed.statuses;
            let Some(proposed) = computed.replicas else {
                let message = computed.error.unwrap_or_default();
                self.set_status(current, self.status().desired_replicas, statuses, false);
                self.update_status_if_needed().await?;
                self.event(EventType::Warning, "FailedComputeMetricsReplicas", &message);
                return Err(Error::Metrics { reference, message });
            };
            // Some metrics failed but the others scale up: go on, and
            // say so at the end.
            later = computed.error;
            let mut metric = String::new();
            if proposed > desired {
                desired = proposed;
                metric = computed.metric;
            }
            if desired > current {
                reason = format!("{metric} above target");
            }
            if desired < current {
                reason = "All metrics below target".into();
            }
            let n = self.normalize(&spec.behavior, current, desired, min, max);
            self.condition(
                "AbleToScale",
                n.able_to_scale.0,
                n.able_to_scale.1,
                n.able_to_scale.2,
            );
            self.condition(
                "ScalingLimited",
                n.scaling_limited.0,
                n.scaling_limited.1,
                n.scaling_limited.2,
            );
            desired = n.replicas;
            desired != current
        };

        if rescale {
            scale.spec.get_or_insert_with(Default::default).replicas = Some(desired);
            if let Err(e) = api
                .replace_scale(&target.name, &PostParams::default(), &scale)
                .await
            {
                let message = api_message(&e);
                self.event(
                    EventType::Warning,
                    "FailedRescale",
                    &format!("New size: {desired}; reason: {reason}; error: {message}"),
                );
                self.condition(
                    "AbleToScale",
                    "False",
                    "FailedUpdateScale",
                    &format!("the HPA controller was unable to update the target scale: {message}"),
                );
                self.set_status(current, self.status().desired_replicas, statuses, false);
                self.update_status_if_needed().await?;
                return Err(Error::Rescale {
                    reference,
                    source: e,
                });
            }
            self.condition(
                "AbleToScale",
                "True",
                "SucceededRescale",
                &format!("the HPA controller was able to update the target scale to {desired}"),
            );
            self.event(
                EventType::Normal,
                "SuccessfulRescale",
                &format!("New size: {desired}; reason: {reason}"),
            );
            tracing::info!(hpa = %self.key, current, desired, reason = %reason, "Successfully rescaled");
            if let Some(b) = &spec.behavior {
                let (up, down) = behavior::rules(b, self.state.settings().downscale_stabilization);
                self.state.kept(self.key, |k| {
                    k.history
                        .store_scale_event(&up, &down, current, desired, now)
                });
            }
        } else {
            desired = current;
        }
        self.set_status(current, desired, statuses, rescale);
        self.update_status_if_needed().await?;
        if let Some(message) = later {
            tracing::info!(hpa = %self.key, error = %message, "some metrics failed");
        }
        Ok(())
    }

    /// The resource `/scale` of `target` is under: the built-in scalable
    /// kinds, others by discovery (custom resources with a scale
    /// subresource).
    async fn resource(&self, target: &CrossVersionObjectReference) -> Result<ApiResource, String> {
        let api_version = target.api_version.clone().unwrap_or_default();
        let (group, version) = match api_version.split('/').collect::<Vec<_>>()[..] {
            [""] => (String::new(), String::new()),
            [v] => (String::new(), v.to_string()),
            [g, v] => (g.to_string(), v.to_string()),
            _ => return Err(format!("unexpected GroupVersion string: {api_version}")),
        };
        let cache_key = format!("{api_version}/{}", target.kind);
        if let Some(ar) = self
            .state
            .resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&cache_key)
        {
            return Ok(ar.clone());
        }
        let gvk = GroupVersionKind::gvk(&group, &version, &target.kind);
        let builtin = match (group.as_str(), target.kind.as_str()) {
            ("apps", "Deployment" | "ReplicaSet" | "StatefulSet")
            | ("", "ReplicationController")
                if !version.is_empty() =>
            {
                Some(ApiResource::from_gvk_with_plural(
                    &gvk,
                    &format!("{}s", target.kind.to_lowercase()),
                ))
            }
            _ => None,
        };
        let ar = match builtin {
            Some(ar) => ar,
            None if version.is_empty() => {
                return Err(format!(
                    "no matches for kind {:?} in group {group:?}",
                    target.kind
                ))
            }
            None => kube::discovery::pinned_kind(&self.state.context.client, &gvk)
                .await
                .map(|(ar, _)| ar)
                .map_err(|_| format!("no matches for kind {:?} in group {group:?}", target.kind))?,
        };
        self.state
            .resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cache_key, ar.clone());
        Ok(ar)
    }

    fn normalize(
        &mut self,
        given: &Option<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior>,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
    ) -> Normalized {
        let settings = self.state.settings();
        let now = self.now;
        self.state.kept(self.key, |k| match given {
            None => k.history.normalize_legacy(
                current,
                desired,
                min,
                max,
                settings.downscale_stabilization,
                now,
            ),
            Some(b) => {
                let (up, down): (Rules, Rules) =
                    behavior::rules(b, settings.downscale_stabilization);
                k.history
                    .normalize_with_behavior(current, desired, min, max, &up, &down, now)
            }
        })
    }

    /// Upstream's `computeReplicasForMetrics`.
    async fn compute_replicas(&mut self, scale: &Scale, metrics: &[MetricSpec]) -> Computed {
        let fail = |error: String| Computed {
            replicas: None,
            metric: String::new(),
            statuses: Vec::new(),
            error: Some(error),
        };
        let selector_text = scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .unwrap_or_default();
        let selector = match self.selector(&selector_text) {
            Ok(s) => s,
            Err(e) => return fail(e),
        };
        let spec_replicas = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let pods: Vec<Arc<Pod>> = self
            .state
            .pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(self.namespace.as_str()))
            .filter(|p| matches(&selector, p))
            .collect();
        let mut statuses = Vec::with_capacity(metrics.len());
        let (mut replicas, mut metric) = (0, String::new());
        let mut invalid: Vec<Invalid> = Vec::new();
        for spec in metrics {
            match self
                .compute_for_metric(spec, spec_replicas, &selector_text, &pods)
                .await
            {
                Ok(p) => {
                    statuses.push(p.status);
                    if replicas == 0 || p.replicas > replicas {
                        replicas = p.replicas;
                        metric = p.metric;
                    }
                }
                Err(i) => {
                    self.event(EventType::Warning, i.reason, &i.message);
                    statuses.push(MetricStatus::default());
                    invalid.push(i);
                }
            }
        }
        let error = invalid.first().map(|first| {
            format!(
                "invalid metrics ({} invalid out of {}), first error is: {}",
                invalid.len(),
                metrics.len(),
                first.error
            )
        });
        if metrics.is_empty()
            || invalid.len() >= metrics.len()
            || (!invalid.is_empty() && replicas < spec_replicas)
        {
            if let Some(first) = invalid.first() {
                let message = format!(
                    "the HPA was unable to compute the replica count: {}",
                    first.message
                );
                self.condition("ScalingActive", "False", first.reason, &message);
            }
            return Computed {
                replicas: None,
                metric: String::new(),
                statuses,
                error: error.or_else(|| Some("no metrics to scale on".into())),
            };
        }
        self.condition(
            "ScalingActive",
            "True",
            "ValidMetricFound",
            &format!("the HPA was able to successfully calculate a replica count from {metric}"),
        );
        Computed {
            replicas: Some(replicas),
            metric,
            statuses,
            error,
        }
    }

    /// Upstream's `validateAndParseSelector`, with the selectors of the
    /// other autoscalers as last read for the ambiguity check.
    fn selector(&mut self, text: &str) -> Result<LabelSelector, String> {
        if text.is_empty() {
            self.event(
                EventType::Warning,
                "SelectorRequired",
                "selector is required",
            );
            self.condition(
                "ScalingActive",
                "False",
                "InvalidSelector",
                "the HPA target's scale is missing a selector",
            );
            return Err("selector is required".into());
        }
        let selector = match LabelSelector::parse(text) {
            Ok(s) => s,
            Err(e) => {
                let message = format!(
                    "couldn't convert selector into a corresponding internal selector object: {e}"
                );
                self.event(EventType::Warning, "InvalidSelector", &message);
                self.condition("ScalingActive", "False", "InvalidSelector", &message);
                return Err(message);
            }
        };
        self.state
            .kept(self.key, |k| k.selector = Some(selector.clone()));
        let others: Vec<(String, LabelSelector)> = {
            let kept = self.state.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.iter()
                .filter(|(k, _)| k.as_str() != self.key)
                .filter(|(k, _)| {
                    k.split_once('/')
                        .is_some_and(|(ns, _)| ns == self.namespace)
                })
                .filter_map(|(k, v)| Some((k.clone(), v.selector.clone()?)))
                .collect()
        };
        let mut selecting: Vec<String> = Vec::new();
        let pods = self.state.pods.state();
        let mine = pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(self.namespace.as_str()))
            .filter(|p| matches(&selector, p));
        // Only autoscalers that still exist (a deleted one's selector
        // may linger until its deletion is seen).
        let existing: std::collections::HashSet<String> =
            self.state.hpas.state().iter().map(|h| key(h)).collect();
        let others: Vec<&(String, LabelSelector)> = others
            .iter()
            .filter(|(k, _)| existing.contains(k))
            .collect();
        for pod in mine {
            for (key, other) in &others {
                if matches(other, pod) && !selecting.contains(key) {
                    selecting.push(key.clone());
                }
            }
        }
        if !selecting.is_empty() {
            selecting.push(self.key.to_string());
            selecting.sort();
            let keys: Vec<String> = selecting
                .iter()
                .map(|k| {
                    let (ns, name) = k.split_once('/').unwrap_or(("", k));
                    format!("{{{name} {ns}}}")
                })
                .collect();
            let message = format!(
                "pods by selector {text} are controlled by multiple HPAs: [{}]",
                keys.join(" ")
            );
            self.event(EventType::Warning, "AmbiguousSelector", &message);
            self.condition("ScalingActive", "False", "AmbiguousSelector", &message);
            return Err(message);
        }
        Ok(selector)
    }

    /// Upstream's `computeReplicasForMetric`.
    async fn compute_for_metric(
        &self,
        spec: &MetricSpec,
        spec_replicas: i32,
        selector: &str,
        pods: &[Arc<Pod>],
    ) -> Result<Proposal, Invalid> {
        let invalid = |reason: &'static str, message: String, error: String| Invalid {
            reason,
            message,
            error,
        };
        match spec.type_.as_str() {
            "Resource" => {
                let Some(source) = &spec.resource else {
                    let e = "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_string();
                    return Err(invalid("FailedGetResourceMetric", e.clone(), e));
                };
                let (replicas, metric, current) = self
                    .resource_metric(
                        spec_replicas,
                        &source.target,
                        &source.name,
                        None,
                        selector,
                        pods,
                    )
                    .await
                    .map_err(|e| {
                        let wrapped =
                            format!("failed to get {} resource metric value: {e}", source.name);
                        invalid("FailedGetResourceMetric", e, wrapped)
                    })?;
                Ok(Proposal {
                    replicas,
                    metric,
                    status: MetricStatus {
                        type_: "Resource".into(),
                        resource: Some(ResourceMetricStatus {
                            name: source.name.clone(),
                            current,
                        }),
                        ..Default::default()
                    },
                })
            }
            "ContainerResource" => {
                let Some(source) = &spec.container_resource else {
                    let e = "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_string();
                    return Err(invalid("FailedGetContainerResourceMetric", e.clone(), e));
                };
                let (replicas, metric, current) = self
                    .resource_metric(
                        spec_replicas,
                        &source.target,
                        &source.name,
                        Some(&source.container),
                        selector,
                        pods,
                    )
                    .await
                    .map_err(|e| {
                        let wrapped = format!(
                            "failed to get {} container metric value: {e}",
                            source.container
                        );
                        invalid("FailedGetContainerResourceMetric", e, wrapped)
                    })?;
                Ok(Proposal {
                    replicas,
                    metric,
                    status: MetricStatus {
                        type_: "ContainerResource".into(),
                        container_resource: Some(ContainerResourceMetricStatus {
                            name: source.name.clone(),
                            container: source.container.clone(),
                            current,
                        }),
                        ..Default::default()
                    },
                })
            }
            "Pods" => {
                let name = spec
                    .pods
                    .as_ref()
                    .map(|p| p.metric.name.as_str())
                    .unwrap_or_default();
                let e = format!("unable to get metric {name}: unable to fetch metrics from custom metrics API: {NO_CUSTOM_METRICS}");
                let wrapped = format!("failed to get pods metric value: {e}");
                Err(invalid("FailedGetPodsMetric", e, wrapped))
            }
            "Object" => {
                let (name, kind, object) = spec
                    .object
                    .as_ref()
                    .map(|o| {
                        (
                            o.metric.name.as_str(),
                            o.described_object.kind.as_str(),
                            o.described_object.name.as_str(),
                        )
                    })
                    .unwrap_or_default();
                let e = format!("unable to get metric {name}: {kind} on {} {object}/unable to fetch metrics from custom metrics API: {NO_CUSTOM_METRICS}", self.namespace);
                let wrapped = format!("failed to get object metric value: {e}");
                Err(invalid("FailedGetObjectMetric", e, wrapped))
            }
            "External" => {
                let name = spec
                    .external
                    .as_ref()
                    .map(|x| x.metric.name.as_str())
                    .unwrap_or_default();
                let e = format!("unable to get external metric {}/{name}: unable to fetch metrics from external metrics API: {NO_EXTERNAL_METRICS}", self.namespace);
                let wrapped = format!("failed to get {name} external metric value: {e}");
                Err(invalid("FailedGetExternalMetric", e, wrapped))
            }
            other => {
                let e = format!("unknown metric source type {other:?}");
                Err(invalid("InvalidMetricSourceType", e.clone(), e))
            }
        }
    }

    /// Upstream's `computeStatusForResourceMetricGeneric`: the count, the
    /// metric's description and its current value, or the error.
    async fn resource_metric(
        &self,
        current: i32,
        target: &MetricTarget,
        resource: &str,
        container: Option<&str>,
        selector: &str,
        pods: &[Arc<Pod>],
    ) -> Result<(i32, String, MetricValueStatus), String> {
        let settings = self.state.settings();
        let calc = Calculator {
            cpu_initialization_period: settings.cpu_initialization_period,
            initial_readiness_delay: settings.initial_readiness_delay,
        };
        let pods: Vec<&Pod> = pods.iter().map(|p| p.as_ref()).collect();
        let seen = |metrics| Observed {
            pods: &pods,
            metrics,
            tolerances: Tolerances::both(settings.tolerance),
            now: self.now,
        };
        let fetch = || async {
            resource_metrics::fetch(
                &self.state.context.client,
                &self.namespace,
                selector,
                resource,
                container,
            )
            .await
            .map(|(m, _)| m)
            .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))
        };
        if let Some(value) = &target.average_value {
            let target_milli = skiff_api::quantity::parse_milli(&value.0).unwrap_or(0);
            let metrics = fetch()
                .await
                .map_err(|e| format!("failed to get {resource} usage: {e}"))?;
            let (replicas, usage) = calc
                .average_value_replicas(current, target_milli, resource, &seen(&metrics))
                .map_err(|e| format!("failed to get {resource} usage: {e}"))?;
            return Ok((
                replicas,
                format!("{resource} resource"),
                MetricValueStatus {
                    average_value: Some(Quantity(milli_quantity(usage))),
                    ..Default::default()
                },
            ));
        }
        let Some(utilization) = target.average_utilization else {
            return Err("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".into());
        };
        let metrics = fetch()
            .await
            .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
        let found = calc
            .utilization_replicas(current, utilization, resource, container, &seen(&metrics))
            .map_err(|e| format!("failed to get {resource} utilization: {e}"))?;
        let metric = if container.is_some() {
            format!("{resource} container resource utilization (percentage of request)")
        } else {
            format!("{resource} resource utilization (percentage of request)")
        };
        Ok((
            found.replicas,
            metric,
            MetricValueStatus {
                average_utilization: Some(found.utilization),
                average_value: Some(Quantity(milli_quantity(found.raw))),
                ..Default::default()
            },
        ))
    }

    /// Upstream's `setStatus` (with observedGeneration).
    fn set_status(
        &mut self,
        current: i32,
        desired: i32,
        metrics: Vec<MetricStatus>,
        rescale: bool,
    ) {
        let old = self.hpa.status.take().unwrap_or_default();
        self.hpa.status = Some(HorizontalPodAutoscalerStatus {
            current_replicas: (current != 0).then_some(current),
            desired_replicas: desired,
            current_metrics: (!metrics.is_empty()).then_some(metrics),
            last_scale_time: if rescale {
                Some(Time(self.now))
            } else {
                old.last_scale_time
            },
            conditions: old.conditions,
            observed_generation: self.hpa.metadata.generation,
        });
    }

    /// Writes the status when it changed (upstream's
    /// `updateStatusIfNeeded`).
    async fn update_status_if_needed(&self) -> Result<(), Error> {
        if self.original == self.hpa.status {
            return Ok(());
        }
        let api: Api<HorizontalPodAutoscaler> =
            Api::namespaced(self.state.context.client.clone(), &self.namespace);
        let name = self.hpa.name_any();
        match api
            .replace_status(&name, &PostParams::default(), &self.hpa)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                self.event(EventType::Warning, "FailedUpdateStatus", &api_message(&e));
                Err(Error::Status { name, source: e })
            }
        }
    }
}

/// What the custom metrics clients say when no adapter serves the API.
const NO_CUSTOM_METRICS: &str =
    "the server could not find the requested resource (get custom.metrics.k8s.io)";
const NO_EXTERNAL_METRICS: &str =
    "the server could not find the requested resource (get external.metrics.k8s.io)";

fn matches(selector: &LabelSelector, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    selector.matches_by(|k| {
        labels
            .and_then(|l| l.get(k))
            .map(|v| std::borrow::Cow::Borrowed(v.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milli_quantities_are_canonical() {
        assert_eq!(milli_quantity(0), "0");
        assert_eq!(milli_quantity(150), "150m");
        assert_eq!(milli_quantity(1000), "1");
        assert_eq!(milli_quantity(1500), "1500m");
        assert_eq!(milli_quantity(128_000_000_000), "128M");
    }

    #[test]
    fn a_condition_moves_its_time_only_when_its_status_changes() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let mut c = Vec::new();
        set_condition(&mut c, "AbleToScale", "True", "SucceededGetScale", "a", t0);
        set_condition(&mut c, "AbleToScale", "True", "ReadyForNewScale", "b", t1);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, Some(Time(t0)));
        assert_eq!(c[0].reason.as_deref(), Some("ReadyForNewScale"));
        set_condition(&mut c, "AbleToScale", "False", "FailedGetScale", "c", t1);
        assert_eq!(c[0].last_transition_time, Some(Time(t1)));
        set_condition(&mut c, "ScalingActive", "True", "ValidMetricFound", "d", t1);
        assert_eq!(c.len(), 2);
    }
}
