//! The replica calculator (upstream's `replica_calculator.go`): from the
//! pods a target's selector picks and their metrics, the replica count
//! that brings the average to the target. Pods being deleted or failed
//! are ignored; pending pods, and (for CPU) pods not yet ready or whose
//! sample straddles their readiness, count as unready; ready pods
//! without a sample are missing. Unready pods count as using nothing on
//! a scale-up; missing pods as using nothing on a scale-up and their
//! full request (or the target, if above 100 %) on a scale-down; a
//! change within the tolerance, or one those guesses would turn around,
//! keeps the current count.
//!
//! Pure: the pods, the samples and the time are given. It must not read
//! anything.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// One pod's sample, in milli-units (millicores, millibytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodMetric {
    /// When the sample was taken.
    pub timestamp: Timestamp,
    /// Over how long it was measured.
    pub window: Duration,
    /// The usage.
    pub value: i64,
}

/// Samples by pod name.
pub type PodMetrics = BTreeMap<String, PodMetric>;

/// How far the usage ratio may stray from 1 before the count changes
/// (`--horizontal-pod-autoscaler-tolerance`, 0.1, both ways).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Below 1.
    pub down: f64,
    /// Above 1.
    pub up: f64,
}

impl Tolerances {
    /// The same tolerance both ways.
    pub fn both(t: f64) -> Self {
        Self { down: t, up: t }
    }

    /// Whether `ratio` is close enough to 1 to leave the count alone.
    pub fn is_within(&self, ratio: f64) -> bool {
        (1.0 - self.down) <= ratio && ratio <= (1.0 + self.up)
    }
}

/// Why no count could be computed (upstream's wording).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// The selector picks no pod.
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    /// Every sample was of an ignored or unready pod.
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoReadyMetrics,
    /// A container has no request for the resource.
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest {
        /// The resource.
        resource: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// A ContainerResource metric names a container the pod lacks.
    #[error("container {container} not found in Pod {pod}")]
    NoSuchContainer {
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
    /// No sample is of a pod the selector picks.
    #[error("no metrics returned matched known pods")]
    NoMatchingMetrics,
}

/// A proposal for a utilization target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utilization {
    /// The replica count.
    pub replicas: i32,
    /// The average utilization, percent of the request.
    pub utilization: i32,
    /// The average usage per pod (milli-units).
    pub raw: i64,
}

/// The calculator's settings.
#[derive(Debug, Clone, Copy)]
pub struct Calculator {
    /// A pod's CPU samples are suspect for this long after it started
    /// (`--horizontal-pod-autoscaler-cpu-initialization-period`, 5 min).
    pub cpu_initialization_period: Duration,
    /// A pod not ready this long after it started has turned unready
    /// rather than never been ready
    /// (`--horizontal-pod-autoscaler-initial-readiness-delay`, 30 s).
    pub initial_readiness_delay: Duration,
}

/// What the calculation looks at: the pods the selector picks, their
/// samples, the tolerances and the time.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The pods.
    pub pods: &'a [&'a Pod],
    /// Their samples by name.
    pub metrics: &'a PodMetrics,
    /// How close to the target is close enough.
    pub tolerances: Tolerances,
    /// Now.
    pub now: Timestamp,
}

/// How the pods fall for the calculation.
#[derive(Debug, Default, PartialEq, Eq)]
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

impl Calculator {
    /// Upstream's `groupPods`.
    fn group(&self, pods: &[&Pod], metrics: &PodMetrics, cpu: bool, now: Timestamp) -> Groups {
        let mut g = Groups::default();
        for pod in pods {
            let n = name(pod);
            if pod.metadata.deletion_timestamp.is_some() || phase(pod) == "Failed" {
                g.ignored.insert(n);
                continue;
            }
            if phase(pod) == "Pending" {
                g.unready.insert(n);
                continue;
            }
            let Some(metric) = metrics.get(&n) else {
                g.missing.insert(n);
                continue;
            };
            if cpu {
                let status = pod.status.as_ref();
                let ready = status
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
                let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
                let unready = match (ready, start) {
                    (Some(ready), Some(start)) => {
                        // A condition without a time is Go's zero time.
                        let transition = ready
                            .last_transition_time
                            .as_ref()
                            .map_or(Timestamp::MIN, |t| t.0);
                        if plus(start, self.cpu_initialization_period) > now {
                            // Still starting: unready, or a sample that
                            // began before it turned ready.
                            ready.status == "False"
                                || metric.timestamp < plus(transition, metric.window)
                        } else {
                            // Unready and never ready.
                            ready.status == "False"
                                && plus(start, self.initial_readiness_delay) > transition
                        }
                    }
                    _ => true,
                };
                if unready {
                    g.unready.insert(n);
                    continue;
                }
            }
            g.ready += 1;
        }
        g
    }

    /// Upstream's `GetResourceReplicas` once the samples are in: the
    /// count for `target` percent of the request of `resource` (of
    /// `container` only, for a ContainerResource metric).
    pub fn utilization_replicas(
        &self,
        current: i32,
        target: i32,
        resource: &str,
        container: Option<&str>,
        seen: &Observed<'_>,
    ) -> Result<Utilization, CalcError> {
        let Observed {
            pods,
            metrics,
            tolerances,
            now,
        } = *seen;
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let groups = self.group(pods, metrics, resource == "cpu", now);
        let mut values: BTreeMap<String, i64> = metrics
            .iter()
            .filter(|(n, _)| !groups.ignored.contains(*n) && !groups.unready.contains(*n))
            .map(|(n, m)| (n.clone(), m.value))
            .collect();
        if values.is_empty() {
            return Err(CalcError::NoReadyMetrics);
        }
        let requests = requests(pods, container, resource)?;
        let (ratio, utilization, raw) = utilization_ratio(&values, &requests, target)?;
        let found = Utilization {
            replicas: current,
            utilization,
            raw,
        };
        let up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(ratio) {
                return Ok(found);
            }
            return Ok(Utilization {
                replicas: ceil(ratio * groups.ready as f64),
                ..found
            });
        }
        if !groups.missing.is_empty() {
            if ratio < 1.0 {
                // A scale-down: missing pods use all they asked for (or
                // the target, when above 100 %).
                let fallback = i64::from(target.max(100));
                for n in &groups.missing {
                    let request = requests.get(n).copied().unwrap_or(0);
                    values.insert(n.clone(), request * fallback / 100);
                }
            } else if ratio > 1.0 {
                for n in &groups.missing {
                    values.insert(n.clone(), 0);
                }
            }
        }
        if up_with_unready {
            for n in &groups.unready {
                values.insert(n.clone(), 0);
            }
        }
        let (new_ratio, _, _) = utilization_ratio(&values, &requests, target)?;
        if tolerances.is_within(new_ratio)
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok(found);
        }
        let replicas = ceil(new_ratio * values.len() as f64);
        if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
            return Ok(found);
        }
        Ok(Utilization { replicas, ..found })
    }

    /// Upstream's `calcPlainMetricReplicas` (an AverageValue target of a
    /// resource): the count and the average usage per pod.
    pub fn average_value_replicas(
        &self,
        current: i32,
        target: i64,
        resource: &str,
        seen: &Observed<'_>,
    ) -> Result<(i32, i64), CalcError> {
        let Observed {
            pods,
            metrics,
            tolerances,
            now,
        } = *seen;
        if pods.is_empty() {
            return Err(CalcError::NoPods);
        }
        let groups = self.group(pods, metrics, resource == "cpu", now);
        let mut values: BTreeMap<String, i64> = metrics
            .iter()
            .filter(|(n, _)| !groups.ignored.contains(*n) && !groups.unready.contains(*n))
            .map(|(n, m)| (n.clone(), m.value))
            .collect();
        if values.is_empty() {
            return Err(CalcError::NoReadyMetrics);
        }
        let (ratio, usage) = usage_ratio(&values, target);
        let up_with_unready = !groups.unready.is_empty() && ratio > 1.0;
        if !up_with_unready && groups.missing.is_empty() {
            if tolerances.is_within(ratio) {
                return Ok((current, usage));
            }
            return Ok((ceil(ratio * groups.ready as f64), usage));
        }
        if !groups.missing.is_empty() {
            // A scale-down: missing pods use exactly the target; a
            // scale-up: nothing.
            let fill = if ratio < 1.0 {
                Some(target)
            } else if ratio > 1.0 {
                Some(0)
            } else {
                None
            };
            if let Some(fill) = fill {
                for n in &groups.missing {
                    values.insert(n.clone(), fill);
                }
            }
        }
        if up_with_unready {
            for n in &groups.unready {
                values.insert(n.clone(), 0);
            }
        }
        let (new_ratio, _) = usage_ratio(&values, target);
        if tolerances.is_within(new_ratio)
            || (ratio < 1.0 && new_ratio > 1.0)
            || (ratio > 1.0 && new_ratio < 1.0)
        {
            return Ok((current, usage));
        }
        let replicas = ceil(new_ratio * values.len() as f64);
        if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
            return Ok((current, usage));
        }
        Ok((replicas, usage))
    }
}

/// Go's `int32(math.Ceil(x))`, saturating.
fn ceil(x: f64) -> i32 {
    x.ceil() as i32
}

/// Each pod's request of `resource` in milli-units: its containers' and
/// restartable init containers' (or `container`'s only).
fn requests(
    pods: &[&Pod],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, CalcError> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let pod_name = name(pod);
        let spec = pod.spec.as_ref();
        let containers = spec.map(|s| s.containers.iter()).into_iter().flatten();
        let sidecars = spec
            .and_then(|s| s.init_containers.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let mut sum = 0i64;
        let mut found = false;
        for c in containers.chain(sidecars) {
            if container.is_some_and(|want| want != c.name) {
                continue;
            }
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| skiff_api::quantity::parse_milli(&q.0).ok())
                .ok_or_else(|| CalcError::MissingRequest {
                    resource: resource.to_string(),
                    container: c.name.clone(),
                    pod: pod_name.clone(),
                })?;
            sum = sum.saturating_add(request);
            if container.is_some() {
                found = true;
                break;
            }
        }
        if let (Some(want), false) = (container, found) {
            return Err(CalcError::NoSuchContainer {
                container: want.to_string(),
                pod: pod_name,
            });
        }
        out.insert(pod_name, sum);
    }
    Ok(out)
}

/// Upstream's `GetResourceUtilizationRatio`: the ratio of the average
/// utilization to the target, that utilization (whole percent) and the
/// average usage per pod.
fn utilization_ratio(
    values: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), CalcError> {
    let (mut usage, mut requested, mut entries) = (0i64, 0i64, 0i64);
    for (pod, value) in values {
        // Samples of pods without requests are extraneous.
        let Some(request) = requests.get(pod) else {
            continue;
        };
        usage = usage.saturating_add(*value);
        requested = requested.saturating_add(*request);
        entries += 1;
    }
    if requested == 0 {
        return Err(CalcError::NoMatchingMetrics);
    }
    let utilization = (usage.saturating_mul(100) / requested) as i32;
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        usage / entries,
    ))
}

/// Upstream's `GetMetricUsageRatio`: the ratio of the average to the
/// target, and the average.
fn usage_ratio(values: &BTreeMap<String, i64>, target: i64) -> (f64, i64) {
    let total: i64 = values.values().fold(0i64, |a, v| a.saturating_add(*v));
    let average = total / values.len().max(1) as i64;
    (average as f64 / target as f64, average)
}

#[cfg(test)]
mod tests {
    //! Upstream's `replica_calculator_test.go` cases, with the pods'
    //! requests and samples as there (1000m requests unless said).

    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, PodCondition, PodSpec, PodStatus, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn now() -> Timestamp {
        "2026-01-01T12:00:00Z".parse().unwrap()
    }

    fn ago(secs: i64) -> Timestamp {
        now() - k8s_openapi::jiff::SignedDuration::from_secs(secs)
    }

    const CALC: Calculator = Calculator {
        cpu_initialization_period: Duration::from_secs(120),
        initial_readiness_delay: Duration::from_secs(10),
    };

    struct P {
        name: String,
        phase: &'static str,
        ready: Option<&'static str>,
        /// Seconds since it started / turned ready.
        started: i64,
        transition: i64,
        requests: Vec<i64>,
        deleting: bool,
    }

    fn pod(i: usize) -> P {
        P {
            name: format!("test-pod-{i}"),
            phase: "Running",
            ready: Some("True"),
            // Long past the initialization period.
            started: 600,
            transition: 590,
            requests: vec![1000],
            deleting: false,
        }
    }

    impl P {
        fn build(&self) -> Pod {
            Pod {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    deletion_timestamp: self.deleting.then(|| Time(now())),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: self
                        .requests
                        .iter()
                        .enumerate()
                        .map(|(i, r)| Container {
                            name: format!("c{i}"),
                            resources: Some(ResourceRequirements {
                                requests: Some(
                                    [("cpu".to_string(), Quantity(format!("{r}m")))].into(),
                                ),
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }),
                status: Some(PodStatus {
                    phase: Some(self.phase.into()),
                    start_time: Some(Time(ago(self.started))),
                    conditions: self.ready.map(|s| {
                        vec![PodCondition {
                            type_: "Ready".into(),
                            status: s.into(),
                            last_transition_time: Some(Time(ago(self.transition))),
                            ..Default::default()
                        }]
                    }),
                    ..Default::default()
                }),
            }
        }
    }

    fn samples(values: &[(usize, i64)]) -> PodMetrics {
        values
            .iter()
            .map(|(i, v)| {
                (
                    format!("test-pod-{i}"),
                    PodMetric {
                        timestamp: ago(1),
                        window: Duration::from_secs(60),
                        value: *v,
                    },
                )
            })
            .collect()
    }

    fn run(
        current: i32,
        target: i32,
        pods: &[P],
        metrics: &PodMetrics,
    ) -> Result<Utilization, CalcError> {
        let built: Vec<Pod> = pods.iter().map(P::build).collect();
        let refs: Vec<&Pod> = built.iter().collect();
        CALC.utilization_replicas(current, target, "cpu", None, &seen(&refs, metrics))
    }

    fn seen<'a>(pods: &'a [&'a Pod], metrics: &'a PodMetrics) -> Observed<'a> {
        Observed {
            pods,
            metrics,
            tolerances: Tolerances::both(0.1),
            now: now(),
        }
    }

    fn pods(n: usize) -> Vec<P> {
        (0..n).map(pod).collect()
    }

    #[test]
    fn scale_up() {
        // testReplicaCalcScaleUp: 300/500/700 of 1000m at 30 %.
        let r = run(3, 30, &pods(3), &samples(&[(0, 300), (1, 500), (2, 700)])).unwrap();
        assert_eq!((r.replicas, r.utilization, r.raw), (5, 50, 500));
    }

    #[test]
    fn scale_down() {
        // testReplicaCalcScaleDown: 5 pods at 100,300,500,250,250 of 50 %.
        let r = run(
            5,
            50,
            &pods(5),
            &samples(&[(0, 100), (1, 300), (2, 500), (3, 250), (4, 250)]),
        )
        .unwrap();
        assert_eq!((r.replicas, r.utilization), (3, 28));
    }

    #[test]
    fn within_tolerance_keeps_the_count() {
        // testReplicaCalcTolerance: 1010,1030,1020 of 1100m at 100 %.
        let mut ps = pods(3);
        for p in &mut ps {
            p.requests = vec![1100];
        }
        let r = run(3, 100, &ps, &samples(&[(0, 1010), (1, 1030), (2, 1020)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (3, 92));
    }

    #[test]
    fn unready_pods_count_as_idle_on_a_scale_up() {
        // testReplicaCalcScaleUpUnreadyLessScale: one of three unready.
        let mut ps = pods(3);
        ps[0].ready = Some("False");
        ps[0].started = 30;
        ps[0].transition = 30;
        let r = run(3, 30, &ps, &samples(&[(0, 300), (1, 500), (2, 700)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (4, 60));
    }

    #[test]
    fn a_sample_from_before_readiness_is_ignored_while_starting() {
        // testReplicaCalcScaleUpHotCpuLessScale: started 10 s ago, ready
        // for 5 s, a 60 s window: its sample straddles readiness.
        let mut ps = pods(3);
        ps[0].started = 10;
        ps[0].transition = 5;
        let r = run(3, 30, &ps, &samples(&[(0, 300), (1, 500), (2, 700)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (4, 60));
    }

    #[test]
    fn unready_pods_do_not_count_on_a_scale_down() {
        // testReplicaCalcScaleDownIgnoresUnreadyPods.
        let mut ps = pods(5);
        ps[0].ready = Some("False");
        ps[0].started = 30;
        ps[0].transition = 30;
        ps[1].ready = Some("False");
        ps[1].started = 30;
        ps[1].transition = 30;
        let r = run(
            5,
            50,
            &ps,
            &samples(&[(0, 100), (1, 300), (2, 500), (3, 250), (4, 250)]),
        )
        .unwrap();
        assert_eq!((r.replicas, r.utilization), (2, 33));
    }

    #[test]
    fn deleted_and_failed_pods_are_ignored() {
        // testReplicaCalcScaleDownIgnoresDeletionPods and ...FailedPods.
        let mut ps = pods(7);
        ps[5].deleting = true;
        ps[6].phase = "Failed";
        let r = run(
            5,
            50,
            &ps,
            &samples(&[
                (0, 100),
                (1, 300),
                (2, 500),
                (3, 250),
                (4, 250),
                (5, 100),
                (6, 100),
            ]),
        )
        .unwrap();
        assert_eq!((r.replicas, r.utilization), (3, 28));
    }

    #[test]
    fn missing_samples_count_as_full_on_a_scale_down() {
        // As testReplicaCalcMissingMetricsNoChangeLt: 4 pods, one
        // missing, 900/950/800 at 100 % is 88 %, but the missing pod at
        // its full request makes 91 %: within tolerance, no change.
        let r = run(4, 100, &pods(4), &samples(&[(0, 900), (1, 950), (2, 800)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (4, 88));
        // Far below: 2 pods' worth even with the missing one at 100 %.
        let r = run(4, 100, &pods(4), &samples(&[(0, 400), (1, 95), (2, 450)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (2, 31));
    }

    #[test]
    fn missing_samples_count_as_idle_on_a_scale_up() {
        // testReplicaCalcMissingMetricsScaleUp... 4 pods, one missing,
        // 2000 each of 1000m at 100 %: 3*2000/(4*1000) -> 6.
        let r = run(
            4,
            100,
            &pods(4),
            &samples(&[(0, 2000), (1, 2000), (2, 2000)]),
        )
        .unwrap();
        assert_eq!((r.replicas, r.utilization), (6, 200));
    }

    #[test]
    fn a_direction_turned_by_missing_pods_keeps_the_count() {
        // testReplicaCalcMissingMetricsUnreadyChange: missing would turn
        // a scale-down into a scale-up.
        let r = run(3, 50, &pods(3), &samples(&[(0, 100), (1, 450)])).unwrap();
        assert_eq!((r.replicas, r.utilization), (3, 27));
    }

    #[test]
    fn errors_are_upstreams() {
        assert_eq!(run(1, 50, &[], &samples(&[])), Err(CalcError::NoPods));
        let mut ps = pods(1);
        ps[0].phase = "Pending";
        assert_eq!(
            run(1, 50, &ps, &samples(&[(0, 1)])),
            Err(CalcError::NoReadyMetrics)
        );
        let mut ps = pods(1);
        ps[0].requests = vec![];
        let mut built = ps[0].build();
        built.spec.as_mut().unwrap().containers.push(Container {
            name: "bare".into(),
            ..Default::default()
        });
        let e = CALC
            .utilization_replicas(1, 50, "cpu", None, &seen(&[&built], &samples(&[(0, 1)])))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "missing request for cpu in container bare of Pod test-pod-0"
        );
    }

    #[test]
    fn a_container_metric_uses_that_containers_request() {
        let mut ps = pods(2);
        for p in &mut ps {
            p.requests = vec![1000, 200];
        }
        let built: Vec<Pod> = ps.iter().map(P::build).collect();
        let refs: Vec<&Pod> = built.iter().collect();
        let r = CALC
            .utilization_replicas(
                2,
                50,
                "cpu",
                Some("c1"),
                &seen(&refs, &samples(&[(0, 200), (1, 200)])),
            )
            .unwrap();
        assert_eq!((r.replicas, r.utilization), (4, 100));
        let e = CALC
            .utilization_replicas(
                2,
                50,
                "cpu",
                Some("nope"),
                &seen(&refs, &samples(&[(0, 200)])),
            )
            .unwrap_err();
        assert_eq!(e.to_string(), "container nope not found in Pod test-pod-0");
    }

    #[test]
    fn average_value_targets() {
        // Plain averages: 30000 milli each at 15000 -> ceil(2 * 3) = 6.
        let built: Vec<Pod> = pods(3).iter().map(P::build).collect();
        let refs: Vec<&Pod> = built.iter().collect();
        let r = CALC
            .average_value_replicas(
                3,
                15000,
                "memory",
                &seen(&refs, &samples(&[(0, 30000), (1, 30000), (2, 30000)])),
            )
            .unwrap();
        assert_eq!(r, (6, 30000));
    }

    #[test]
    fn tolerances_are_inclusive() {
        let t = Tolerances::both(0.1);
        assert!(t.is_within(0.9) && t.is_within(1.1) && !t.is_within(1.11));
    }
}
