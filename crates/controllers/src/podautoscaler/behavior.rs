//! From the metrics' proposal to the count the controller writes
//! (upstream's `normalizeDesiredReplicas*`): stabilization over the
//! recent recommendations, then the rate limits and min/max.
//!
//! Without `spec.behavior` (upstream's legacy path) a scale-down takes
//! the highest recommendation of the downscale stabilization window
//! (`--horizontal-pod-autoscaler-downscale-stabilization`, 5 min) and a
//! scale-up goes to at most max(2 × current, 4). With it, a scale-up
//! takes the lowest recommendation of scaleUp's window and a scale-down
//! the highest of scaleDown's, and each direction's policies (Pods or
//! Percent per period, the Max, Min or Disabled of them) bound the change
//! counted from the start of each policy's period.
//!
//! Pure: [`History`] holds one autoscaler's past and the time is given.
//! It says which conditions the result sets; it writes nothing.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// One recommendation, before stabilization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Recommendation {
    replicas: i32,
    at: Timestamp,
}

/// One change of the target's count, by size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleEvent {
    /// Replicas added or removed (not negative).
    pub change: i32,
    /// When.
    pub at: Timestamp,
    outdated: bool,
}

/// One autoscaler's recent recommendations and scale changes.
#[derive(Debug, Clone, Default)]
pub struct History {
    recommendations: Vec<Recommendation>,
    /// Scale-ups (with a behavior only).
    pub ups: Vec<ScaleEvent>,
    /// Scale-downs (with a behavior only).
    pub downs: Vec<ScaleEvent>,
}

/// A condition the normalization sets: status, reason, message.
pub type Said = (&'static str, &'static str, &'static str);

/// The count to write and what AbleToScale and ScalingLimited say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Normalized {
    /// The count.
    pub replicas: i32,
    /// AbleToScale (True, ReadyForNewScale or Scale{Up,Down}Stabilized).
    pub able_to_scale: Said,
    /// ScalingLimited (True when the rules changed the count).
    pub scaling_limited: Said,
}

/// How one policy limits a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// So many pods per period.
    Pods,
    /// So many percent of the count at the period's start.
    Percent,
}

/// One scaling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Pods or Percent.
    pub kind: PolicyKind,
    /// How many.
    pub value: i32,
    /// Over how many seconds.
    pub period_seconds: i32,
}

/// Which policy's limit wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The largest change.
    Max,
    /// The smallest change.
    Min,
    /// No change in this direction.
    Disabled,
}

/// One direction's rules with the API's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// The stabilization window.
    pub window_seconds: i32,
    /// Which policy wins.
    pub select: Select,
    /// The policies.
    pub policies: Vec<Policy>,
}

impl Rules {
    /// Upstream's default scaleUp: no window, 4 pods or 100 % per 15 s,
    /// whichever is more.
    pub fn default_up() -> Self {
        Rules {
            window_seconds: 0,
            select: Select::Max,
            policies: vec![
                Policy {
                    kind: PolicyKind::Pods,
                    value: 4,
                    period_seconds: 15,
                },
                Policy {
                    kind: PolicyKind::Percent,
                    value: 100,
                    period_seconds: 15,
                },
            ],
        }
    }

    /// Upstream's default scaleDown: the downscale window, 100 % per 15 s.
    pub fn default_down(window: Duration) -> Self {
        Rules {
            window_seconds: window.as_secs().min(i32::MAX as u64) as i32,
            select: Select::Max,
            policies: vec![Policy {
                kind: PolicyKind::Percent,
                value: 100,
                period_seconds: 15,
            }],
        }
    }

    /// `given` over `defaults` (as the API's defaulting, which leaves a
    /// scaleDown window unset for the controller's flag).
    pub fn from_api(given: Option<&HPAScalingRules>, defaults: Rules) -> Self {
        let Some(given) = given else {
            return defaults;
        };
        let select = match given.select_policy.as_deref() {
            Some("Min") => Select::Min,
            Some("Disabled") => Select::Disabled,
            Some(_) => Select::Max,
            None => defaults.select,
        };
        let policies = match &given.policies {
            Some(policies) => policies
                .iter()
                .map(|p| Policy {
                    kind: if p.type_ == "Pods" {
                        PolicyKind::Pods
                    } else {
                        PolicyKind::Percent
                    },
                    value: p.value,
                    period_seconds: p.period_seconds,
                })
                .collect(),
            None => defaults.policies,
        };
        Rules {
            window_seconds: given
                .stabilization_window_seconds
                .unwrap_or(defaults.window_seconds),
            select,
            policies,
        }
    }

    fn longest_period(&self) -> i32 {
        self.policies
            .iter()
            .map(|p| p.period_seconds)
            .max()
            .unwrap_or(0)
    }
}

/// Both directions' rules of a behavior, `downscale` the window of a
/// scaleDown that names none.
pub fn rules(behavior: &HorizontalPodAutoscalerBehavior, downscale: Duration) -> (Rules, Rules) {
    (
        Rules::from_api(behavior.scale_up.as_ref(), Rules::default_up()),
        Rules::from_api(behavior.scale_down.as_ref(), Rules::default_down(downscale)),
    )
}

fn before(now: Timestamp, secs: i64) -> Timestamp {
    now.checked_sub(SignedDuration::from_secs(secs))
        .unwrap_or(Timestamp::MIN)
}

const READY: Said = (
    "True",
    "ReadyForNewScale",
    "recommended size matches current size",
);
const DOWN_STABILIZED: Said = (
    "True",
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: Said = (
    "True",
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN: (&str, &str) = (
    "DesiredWithinRange",
    "the desired count is within the acceptable range",
);
const SCALE_UP_LIMIT: (&str, &str) = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
);
const TOO_MANY: (&str, &str) = (
    "TooManyReplicas",
    "the desired replica count is more than the maximum replica count",
);
const SCALE_DOWN_LIMIT: (&str, &str) = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
);
const TOO_FEW: (&str, &str) = (
    "TooFewReplicas",
    "the desired replica count is less than the minimum replica count",
);

fn limited(result: i32, stabilized: i32, (reason, message): (&'static str, &'static str)) -> Said {
    let status = if result == stabilized {
        "False"
    } else {
        "True"
    };
    (status, reason, message)
}

impl History {
    /// The first sync's recommendation is the current count.
    pub fn record_initial(&mut self, current: i32, now: Timestamp) {
        if self.recommendations.is_empty() {
            self.recommendations.push(Recommendation {
                replicas: current,
                at: now,
            });
        }
    }

    /// Keeps `recommendation`, in the place of one older than `cutoff`
    /// when there is one.
    fn remember(&mut self, replicas: i32, old: Option<usize>, now: Timestamp) {
        let r = Recommendation { replicas, at: now };
        match old.and_then(|i| self.recommendations.get_mut(i)) {
            Some(slot) => *slot = r,
            None => self.recommendations.push(r),
        }
    }

    /// Upstream's `normalizeDesiredReplicas` (no behavior).
    pub fn normalize_legacy(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        downscale_window: Duration,
        now: Timestamp,
    ) -> Normalized {
        let cutoff = before(now, downscale_window.as_secs() as i64);
        let mut stabilized = desired;
        let mut old = None;
        for (i, r) in self.recommendations.iter().enumerate() {
            if r.at < cutoff {
                old = Some(i);
            } else if r.replicas > stabilized {
                stabilized = r.replicas;
            }
        }
        self.remember(desired, old, now);
        let able_to_scale = if stabilized != desired {
            DOWN_STABILIZED
        } else {
            READY
        };
        let (replicas, why) = convert_with_rules(current, stabilized, min, max);
        Normalized {
            replicas,
            able_to_scale,
            scaling_limited: limited(replicas, stabilized, why),
        }
    }

    /// Upstream's `normalizeDesiredReplicasWithBehaviors`.
    #[allow(clippy::too_many_arguments)] // upstream's NormalizationArg
    pub fn normalize_with_behavior(
        &mut self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        up: &Rules,
        down: &Rules,
        now: Timestamp,
    ) -> Normalized {
        let up_cutoff = before(now, i64::from(up.window_seconds));
        let down_cutoff = before(now, i64::from(down.window_seconds));
        let (mut up_rec, mut down_rec) = (desired, desired);
        let mut old = None;
        for (i, r) in self.recommendations.iter().enumerate() {
            if r.at > up_cutoff {
                up_rec = up_rec.min(r.replicas);
            }
            if r.at > down_cutoff {
                down_rec = down_rec.max(r.replicas);
            }
            if r.at < up_cutoff && r.at < down_cutoff {
                old = Some(i);
            }
        }
        let stabilized = current.max(up_rec).min(down_rec);
        self.remember(desired, old, now);
        let able_to_scale = if stabilized == desired {
            READY
        } else if desired >= current {
            UP_STABILIZED
        } else {
            DOWN_STABILIZED
        };
        let (replicas, why) = self.convert_with_rate(current, stabilized, min, max, up, down, now);
        Normalized {
            replicas,
            able_to_scale,
            scaling_limited: limited(replicas, stabilized, why),
        }
    }

    /// Upstream's `convertDesiredReplicasWithBehaviorRate`.
    #[allow(clippy::too_many_arguments)]
    fn convert_with_rate(
        &self,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        up: &Rules,
        down: &Rules,
        now: Timestamp,
    ) -> (i32, (&'static str, &'static str)) {
        if desired > current {
            let limit = scale_up_limit(current, &self.ups, &self.downs, up, now).max(current);
            let (allowed, why) = if max > limit {
                (limit, SCALE_UP_LIMIT)
            } else {
                (max, TOO_MANY)
            };
            if desired > allowed {
                return (allowed, why);
            }
        } else if desired < current {
            let limit = scale_down_limit(current, &self.ups, &self.downs, down, now).min(current);
            let (allowed, why) = if min < limit {
                (limit, SCALE_DOWN_LIMIT)
            } else {
                (min, TOO_FEW)
            };
            if desired < allowed {
                return (allowed, why);
            }
        }
        (desired, WITHIN)
    }

    /// Upstream's `storeScaleEvent`: remembers a change from `from` to
    /// `to` (with a behavior only), in the place of one that has aged
    /// out of every policy's period when there is one.
    pub fn store_scale_event(
        &mut self,
        up: &Rules,
        down: &Rules,
        from: i32,
        to: i32,
        now: Timestamp,
    ) {
        let (events, rules, change) = if to > from {
            (&mut self.ups, up, to - from)
        } else {
            (&mut self.downs, down, from - to)
        };
        let cutoff = before(now, i64::from(rules.longest_period()));
        let mut old = None;
        for (i, e) in events.iter_mut().enumerate() {
            if e.at < cutoff {
                e.outdated = true;
            }
            if e.outdated {
                old = Some(i);
            }
        }
        let event = ScaleEvent {
            change,
            at: now,
            outdated: false,
        };
        match old.and_then(|i| events.get_mut(i)) {
            Some(slot) => *slot = event,
            None => events.push(event),
        }
    }
}

/// Replicas changed within the last `period_seconds`.
fn changed_within(period_seconds: i32, events: &[ScaleEvent], now: Timestamp) -> i32 {
    let cutoff = before(now, i64::from(period_seconds));
    events
        .iter()
        .filter(|e| e.at > cutoff)
        .map(|e| e.change)
        .sum()
}

/// Upstream's `calculateScaleUpLimitWithScalingRules`: the most replicas
/// the policies allow now.
pub fn scale_up_limit(
    current: i32,
    ups: &[ScaleEvent],
    downs: &[ScaleEvent],
    rules: &Rules,
    now: Timestamp,
) -> i32 {
    let pick: fn(i32, i32) -> i32 = match rules.select {
        Select::Disabled => return current,
        Select::Min => std::cmp::min,
        Select::Max => std::cmp::max,
    };
    let mut result = if rules.select == Select::Min {
        i32::MAX
    } else {
        i32::MIN
    };
    for p in &rules.policies {
        let start = current - changed_within(p.period_seconds, ups, now)
            + changed_within(p.period_seconds, downs, now);
        let proposed = match p.kind {
            PolicyKind::Pods => start.saturating_add(p.value),
            // Rounded up, or a small count could never grow.
            PolicyKind::Percent => {
                (f64::from(start) * (1.0 + f64::from(p.value) / 100.0)).ceil() as i32
            }
        };
        result = pick(result, proposed);
    }
    result
}

/// Upstream's `calculateScaleDownLimitWithBehaviors`: the fewest
/// replicas the policies allow now.
pub fn scale_down_limit(
    current: i32,
    ups: &[ScaleEvent],
    downs: &[ScaleEvent],
    rules: &Rules,
    now: Timestamp,
) -> i32 {
    let pick: fn(i32, i32) -> i32 = match rules.select {
        Select::Disabled => return current,
        Select::Min => std::cmp::max,
        Select::Max => std::cmp::min,
    };
    let mut result = if rules.select == Select::Min {
        i32::MIN
    } else {
        i32::MAX
    };
    for p in &rules.policies {
        let start = current - changed_within(p.period_seconds, ups, now)
            + changed_within(p.period_seconds, downs, now);
        let proposed = match p.kind {
            PolicyKind::Pods => start - p.value,
            PolicyKind::Percent => (f64::from(start) * (1.0 - f64::from(p.value) / 100.0)) as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// Upstream's `convertDesiredReplicasWithRules` (no behavior): within
/// min and max, and up to max(2 × current, 4).
pub fn convert_with_rules(
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> (i32, (&'static str, &'static str)) {
    let up_limit = (2.0 * f64::from(current)).max(4.0) as i32;
    let (allowed_max, why) = if max > up_limit {
        (up_limit, SCALE_UP_LIMIT)
    } else {
        (max, TOO_MANY)
    };
    if desired < min {
        return (min, TOO_FEW);
    }
    if desired > allowed_max {
        return (allowed_max, why);
    }
    (desired, WITHIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn event(change: i32, at: i64) -> ScaleEvent {
        ScaleEvent {
            change,
            at: t(at),
            outdated: false,
        }
    }

    fn pods(value: i32, period: i32) -> Policy {
        Policy {
            kind: PolicyKind::Pods,
            value,
            period_seconds: period,
        }
    }

    fn percent(value: i32, period: i32) -> Policy {
        Policy {
            kind: PolicyKind::Percent,
            value,
            period_seconds: period,
        }
    }

    fn rules(select: Select, window: i32, policies: Vec<Policy>) -> Rules {
        Rules {
            window_seconds: window,
            select,
            policies,
        }
    }

    #[test]
    fn legacy_rules_clamp_and_limit_the_rate() {
        // TestConvertDesiredReplicasWithRules.
        assert_eq!(convert_with_rules(5, 7, 3, 8), (7, WITHIN));
        assert_eq!(convert_with_rules(3, 1, 2, 8), (2, TOO_FEW));
        assert_eq!(convert_with_rules(3, 10, 1, 20), (6, SCALE_UP_LIMIT));
        assert_eq!(convert_with_rules(1, 10, 1, 20), (4, SCALE_UP_LIMIT));
        assert_eq!(convert_with_rules(3, 10, 1, 5), (5, TOO_MANY));
    }

    #[test]
    fn legacy_scale_down_takes_the_highest_recent_recommendation() {
        let mut h = History::default();
        let window = Duration::from_secs(300);
        h.record_initial(5, t(0));
        let n = h.normalize_legacy(5, 2, 1, 10, window, t(15));
        assert_eq!(n.replicas, 5);
        assert_eq!(n.able_to_scale, DOWN_STABILIZED);
        assert_eq!(n.scaling_limited, ("False", WITHIN.0, WITHIN.1));
        // Once the 5 is out of the window, the 2 of t=15 still holds.
        let n = h.normalize_legacy(5, 1, 1, 10, window, t(301));
        assert_eq!(n.replicas, 2);
        let n = h.normalize_legacy(2, 1, 1, 10, window, t(316));
        assert_eq!((n.replicas, n.able_to_scale), (1, READY));
    }

    #[test]
    fn legacy_min_max_set_scaling_limited() {
        let mut h = History::default();
        let n = h.normalize_legacy(3, 12, 1, 5, Duration::ZERO, t(0));
        assert_eq!(n.replicas, 5);
        assert_eq!(n.scaling_limited, ("True", TOO_MANY.0, TOO_MANY.1));
    }

    #[test]
    fn scale_up_limits_by_policy_and_select() {
        // TestCalculateScaleUpLimitWithScalingRules-like.
        let now = t(100);
        let max = rules(Select::Max, 0, vec![pods(4, 60), percent(100, 60)]);
        assert_eq!(scale_up_limit(1, &[], &[], &max, now), 5);
        assert_eq!(scale_up_limit(10, &[], &[], &max, now), 20);
        let min = rules(Select::Min, 0, vec![pods(4, 60), percent(100, 60)]);
        assert_eq!(scale_up_limit(10, &[], &[], &min, now), 14);
        let off = rules(Select::Disabled, 0, vec![pods(4, 60)]);
        assert_eq!(scale_up_limit(10, &[], &[], &off, now), 10);
        // 3 added 30 s ago count against the period; 10 s out of a
        // 60 s period 100 s ago do not.
        let ups = [event(3, 70), event(10, 0)];
        assert_eq!(scale_up_limit(10, &ups, &[], &max, now), 14);
        // Percent rounds up: 1 replica at 10 % may still grow.
        let small = rules(Select::Max, 0, vec![percent(10, 60)]);
        assert_eq!(scale_up_limit(1, &[], &[], &small, now), 2);
    }

    #[test]
    fn scale_down_limits_by_policy_and_select() {
        let now = t(100);
        let max = rules(Select::Max, 0, vec![pods(2, 60), percent(50, 60)]);
        assert_eq!(scale_down_limit(10, &[], &[], &max, now), 5);
        let min = rules(Select::Min, 0, vec![pods(2, 60), percent(50, 60)]);
        assert_eq!(scale_down_limit(10, &[], &[], &min, now), 8);
        // 2 removed 20 s ago: the period started at 12.
        let downs = [event(2, 80)];
        assert_eq!(scale_down_limit(10, &[], &downs, &max, now), 6);
        let off = rules(Select::Disabled, 0, vec![pods(2, 60)]);
        assert_eq!(scale_down_limit(10, &[], &[], &off, now), 10);
    }

    #[test]
    fn behavior_stabilizes_both_ways() {
        let up = rules(Select::Max, 60, vec![pods(100, 15)]);
        let down = rules(Select::Max, 120, vec![percent(100, 15)]);
        let mut h = History::default();
        h.record_initial(3, t(0));
        // Up: the lowest recommendation of the last 60 s (3) holds.
        let n = h.normalize_with_behavior(3, 8, 1, 10, &up, &down, t(15));
        assert_eq!((n.replicas, n.able_to_scale), (3, UP_STABILIZED));
        // After 60 s the 3 is out of the up window; 8 (t=15) stays in.
        let n = h.normalize_with_behavior(3, 9, 1, 10, &up, &down, t(61));
        assert_eq!((n.replicas, n.able_to_scale), (8, UP_STABILIZED));
        let n = h.normalize_with_behavior(8, 9, 1, 10, &up, &down, t(80));
        assert_eq!((n.replicas, n.able_to_scale), (9, READY));
        // Down: the highest of the last 120 s (9) holds.
        let n = h.normalize_with_behavior(9, 2, 1, 10, &up, &down, t(100));
        assert_eq!((n.replicas, n.able_to_scale), (9, DOWN_STABILIZED));
        let n = h.normalize_with_behavior(9, 2, 1, 10, &up, &down, t(400));
        assert_eq!((n.replicas, n.able_to_scale), (2, READY));
    }

    #[test]
    fn behavior_rate_limits_set_scaling_limited() {
        let up = Rules::default_up();
        let down = rules(Select::Max, 0, vec![pods(1, 60)]);
        let mut h = History::default();
        let n = h.normalize_with_behavior(2, 20, 1, 30, &up, &down, t(0));
        // max(2 + 4, 2 * 2) = 6.
        assert_eq!(n.replicas, 6);
        assert_eq!(
            n.scaling_limited,
            ("True", SCALE_UP_LIMIT.0, SCALE_UP_LIMIT.1)
        );
        h.store_scale_event(&up, &down, 2, 6, t(0));
        // Within the same 15 s: the period started at 2 -> still 6.
        let n = h.normalize_with_behavior(6, 20, 1, 30, &up, &down, t(5));
        assert_eq!(n.replicas, 6);
        // Clamped by max rather than by the rate.
        let n = h.normalize_with_behavior(6, 20, 1, 8, &up, &down, t(20));
        assert_eq!(n.replicas, 8);
        assert_eq!(n.scaling_limited, ("True", TOO_MANY.0, TOO_MANY.1));
        // Down one pod a minute, counted from the period's start: the
        // 4 added at 0 make it 8 - 4 = 4 at 40 s...
        let n = h.normalize_with_behavior(8, 1, 1, 10, &up, &down, t(40));
        assert_eq!(n.replicas, 3);
        assert_eq!(
            n.scaling_limited,
            ("True", SCALE_DOWN_LIMIT.0, SCALE_DOWN_LIMIT.1)
        );
        // ... and 8 once they are out of it.
        let n = h.normalize_with_behavior(8, 1, 1, 10, &up, &down, t(100));
        assert_eq!(n.replicas, 7);
        let n = h.normalize_with_behavior(8, 7, 1, 10, &up, &down, t(101));
        assert_eq!(n.scaling_limited, ("False", WITHIN.0, WITHIN.1));
    }

    #[test]
    fn outdated_scale_events_are_replaced() {
        let up = rules(Select::Max, 0, vec![pods(4, 60)]);
        let down = Rules::default_down(Duration::from_secs(300));
        let mut h = History::default();
        h.store_scale_event(&up, &down, 1, 3, t(0));
        h.store_scale_event(&up, &down, 3, 5, t(30));
        assert_eq!(h.ups.len(), 2);
        h.store_scale_event(&up, &down, 5, 6, t(100));
        assert_eq!(h.ups.len(), 2, "{:?}", h.ups);
        assert_eq!(changed_within(60, &h.ups, t(100)), 1);
        h.store_scale_event(&up, &down, 6, 4, t(100));
        assert_eq!(h.downs, vec![event(2, 100)]);
    }

    #[test]
    fn api_rules_fill_in_defaults() {
        let given = HPAScalingRules {
            select_policy: Some("Min".into()),
            ..Default::default()
        };
        let r = Rules::from_api(Some(&given), Rules::default_down(Duration::from_secs(300)));
        assert_eq!(r.window_seconds, 300);
        assert_eq!(r.select, Select::Min);
        assert_eq!(r.policies, vec![percent(100, 15)]);
    }
}
