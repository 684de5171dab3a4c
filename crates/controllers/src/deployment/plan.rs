//! How a Deployment's ReplicaSets are sized, step by step, as upstream's
//! deployment controller does it: a RollingUpdate grows the new
//! ReplicaSet up to replicas + maxSurge pods in all and shrinks old ones
//! while replicas − maxUnavailable stay available (unhealthy old pods
//! first); Recreate takes the old ones to zero before the new one grows;
//! a change of spec.replicas mid-rollout is spread over the active
//! ReplicaSets in proportion to their size (leftovers to the largest).
//!
//! Pure: each function returns the new sizes (`Scale`); no I/O.

use k8s_openapi::api::apps::v1::Deployment;

use super::sets::{self, Set};

/// Set a ReplicaSet's spec.replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    pub name: String,
    pub to: i32,
}

fn active<'a>(sets: impl IntoIterator<Item = &'a Set>) -> Vec<&'a Set> {
    sets.into_iter().filter(|s| s.replicas > 0).collect()
}

/// The replicas a new ReplicaSet should have now (upstream's
/// `NewRSNewReplicas`), `all` including it.
pub fn new_replicas(d: &Deployment, all: &[&Set], new_current: i32) -> i32 {
    let desired = sets::replicas(d);
    if !sets::is_rolling(d) {
        return desired;
    }
    let max_total = desired + sets::max_surge(d);
    let current = sets::spec_replicas(all);
    if current >= max_total {
        return new_current;
    }
    let up = (max_total - current).min(desired - new_current);
    new_current + up
}

/// The ReplicaSet that alone has pods, or the newest when none has
/// (`None` while several have pods).
fn active_or_latest<'a>(new: Option<&'a Set>, old: &'a [Set]) -> Option<&'a Set> {
    let mut newest_first: Vec<&Set> = old.iter().collect();
    newest_first.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.name.cmp(&a.name)));
    let all: Vec<&Set> = active(newest_first.iter().copied().chain(new));
    match all.len() {
        0 => new.or(newest_first.first().copied()),
        1 => Some(all[0]),
        _ => None,
    }
}

/// Whether the new ReplicaSet has every replica, available.
fn saturated(d: &Deployment, new: Option<&Set>) -> bool {
    let desired = sets::replicas(d);
    new.is_some_and(|n| {
        n.replicas == desired && n.desired_annotation() == Some(desired) && n.available == desired
    })
}

/// Scaling (upstream's `scale`): the sizes after spec.replicas changed.
pub fn scale(d: &Deployment, new: Option<&Set>, old: &[Set]) -> Vec<Scale> {
    let desired = sets::replicas(d);
    if let Some(only) = active_or_latest(new, old) {
        if only.replicas == desired {
            return Vec::new();
        }
        return vec![Scale {
            name: only.name.clone(),
            to: desired,
        }];
    }
    if saturated(d, new) {
        return active(old)
            .into_iter()
            .map(|s| Scale {
                name: s.name.clone(),
                to: 0,
            })
            .collect();
    }
    if !sets::is_rolling(d) {
        return Vec::new();
    }
    let mut all: Vec<&Set> = active(old.iter().chain(new));
    let total = sets::spec_replicas(&all);
    let allowed = if desired > 0 {
        desired + sets::max_surge(d)
    } else {
        0
    };
    let to_add = allowed - total;
    // Larger first; among equals, newer first when growing, older first
    // when shrinking.
    all.sort_by(|a, b| {
        b.replicas.cmp(&a.replicas).then_with(|| {
            if to_add > 0 {
                b.created.cmp(&a.created)
            } else {
                a.created.cmp(&b.created)
            }
        })
    });
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
    for s in &all {
        if to_add != 0 {
            let p = proportion(s, d, to_add, added);
            sizes.push(s.replicas + p);
            added += p;
        } else {
            sizes.push(s.replicas);
        }
    }
    if let Some(first) = sizes.first_mut() {
        if to_add != 0 {
            *first = (*first + to_add - added).max(0);
        }
    }
    all.iter()
        .zip(sizes)
        .filter(|(s, to)| s.replicas != *to)
        .map(|(s, to)| Scale {
            name: s.name.clone(),
            to,
        })
        .collect()
}

/// A ReplicaSet's share of `to_add` (upstream's `GetProportion`).
fn proportion(s: &Set, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if s.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(s, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

fn fraction(s: &Set, d: &Deployment) -> i32 {
    let desired = sets::replicas(d);
    if desired == 0 {
        return -s.replicas;
    }
    let deployment_replicas = desired + sets::max_surge(d);
    let annotated = s
        .max_annotation()
        .unwrap_or_else(|| d.status.as_ref().and_then(|st| st.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let size = f64::from(s.replicas) * f64::from(deployment_replicas) / f64::from(annotated);
    // Go's math.Round: halves away from zero.
    (size.round() as i32) - s.replicas
}

/// Whether spec.replicas differs from what an active ReplicaSet was last
/// scaled for (upstream's `isScalingEvent`).
pub fn is_scaling_event(d: &Deployment, new: Option<&Set>, old: &[Set]) -> bool {
    let desired = sets::replicas(d);
    active(old.iter().chain(new))
        .iter()
        .filter_map(|s| s.desired_annotation())
        .any(|a| a != desired)
}

/// The new ReplicaSet's next size in a rolling update, if it changes
/// (upstream's `reconcileNewReplicaSet`).
pub fn rolling_new(d: &Deployment, all: &[&Set], new: &Set) -> Option<Scale> {
    let desired = sets::replicas(d);
    let to = if new.replicas == desired {
        return None;
    } else if new.replicas > desired {
        desired
    } else {
        new_replicas(d, all, new.replicas)
    };
    (to != new.replicas).then(|| Scale {
        name: new.name.clone(),
        to,
    })
}

/// How the old ReplicaSets shrink in a rolling update (upstream's
/// `reconcileOldReplicaSets`): first the pods that are not available,
/// then available ones while replicas − maxUnavailable stay available.
/// `old` are the active old ReplicaSets.
pub fn rolling_old(d: &Deployment, all: &[&Set], old: &[Set], new: &Set) -> Vec<Scale> {
    let old_count = sets::spec_replicas(&old.iter().collect::<Vec<_>>());
    if old_count == 0 {
        return Vec::new();
    }
    let all_count = sets::spec_replicas(all);
    let min_available = sets::replicas(d) - sets::max_unavailable(d);
    let new_unavailable = new.replicas - new.available;
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut old: Vec<Set> = old.to_vec();
    sets::by_age(&mut old);
    let mut scales: Vec<Scale> = Vec::new();
    // Unhealthy replicas first: they do not count as available anyway.
    let mut cleaned = 0;
    for s in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        if s.replicas == 0 || s.replicas == s.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(s.replicas - s.available);
        s.replicas -= down;
        cleaned += down;
        scales.push(Scale {
            name: s.name.clone(),
            to: s.replicas,
        });
    }
    // Then available ones, keeping the minimum available.
    let available = sets::available_replicas(all);
    if available > min_available {
        let budget = available - min_available;
        let mut done = 0;
        for s in old.iter_mut() {
            if done >= budget {
                break;
            }
            if s.replicas == 0 {
                continue;
            }
            let down = s.replicas.min(budget - done);
            s.replicas -= down;
            done += down;
            scales.retain(|sc| sc.name != s.name);
            scales.push(Scale {
                name: s.name.clone(),
                to: s.replicas,
            });
        }
    }
    scales
}

/// Recreate: every old ReplicaSet to zero.
pub fn recreate_old(old: &[Set]) -> Vec<Scale> {
    active(old)
        .into_iter()
        .map(|s| Scale {
            name: s.name.clone(),
            to: 0,
        })
        .collect()
}

/// Old ReplicaSets beyond revisionHistoryLimit that may go: no pods,
/// not being deleted, status caught up; lowest revision first.
pub fn history_to_delete(d: &Deployment, old: &[Set]) -> Vec<String> {
    let Some(limit) = d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
        return Vec::new();
    };
    let mut alive: Vec<&Set> = old.iter().filter(|s| !s.deleting).collect();
    let excess = alive.len() as i64 - i64::from(limit);
    if excess <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| {
        a.revision()
            .cmp(&b.revision())
            .then_with(|| a.created.cmp(&b.created))
            .then_with(|| a.name.cmp(&b.name))
    });
    alive
        .into_iter()
        .take(usize::try_from(excess).unwrap_or(0))
        .filter(|s| s.actual == 0 && s.replicas == 0 && s.generation <= s.observed_generation)
        .map(|s| s.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn deployment(replicas: i32, surge: i32, unavailable: i32) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(IntOrString::Int(surge)),
                        max_unavailable: Some(IntOrString::Int(unavailable)),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn set(name: &str, age: i64, replicas: i32, available: i32) -> Set {
        Set {
            name: name.into(),
            uid: name.into(),
            created: Some(Timestamp::from_second(1_700_000_000 + age).unwrap()),
            replicas,
            actual: replicas,
            ready: available,
            available,
            annotations: Default::default(),
            deleting: false,
            generation: 1,
            observed_generation: 1,
            failure: None,
        }
    }

    /// Simulates a whole rolling update, pods becoming available as soon
    /// as they exist, and checks upstream's bounds at every step.
    #[test]
    fn a_rolling_update_stays_within_surge_and_unavailability() {
        for (replicas, surge, unavailable) in [(10, 3, 2), (3, 1, 0), (5, 0, 1), (1, 1, 0)] {
            let d = deployment(replicas, surge, unavailable);
            let mut old = [set("old", 0, replicas, replicas)];
            let mut new = set("new", 10, 0, 0);
            for step in 0..100 {
                let all: Vec<&Set> = old.iter().chain([&new]).collect();
                if let Some(s) = rolling_new(&d, &all, &new) {
                    new.replicas = s.to;
                } else {
                    let active: Vec<Set> = old.iter().filter(|s| s.replicas > 0).cloned().collect();
                    for s in rolling_old(&d, &all, &active, &new) {
                        let o = old.iter_mut().find(|o| o.name == s.name).unwrap();
                        o.replicas = s.to;
                        o.available = o.available.min(s.to);
                    }
                }
                let total: i32 = old.iter().map(|s| s.replicas).sum::<i32>() + new.replicas;
                assert!(
                    total <= replicas + surge,
                    "step {step}: {total} pods > {replicas}+{surge}"
                );
                let available: i32 = old.iter().map(|s| s.available).sum::<i32>() + new.available;
                assert!(
                    available >= replicas - unavailable.max(if surge == 0 { 1 } else { 0 }),
                    "step {step}: {available} available"
                );
                // The new pods come up.
                new.available = new.replicas;
                new.actual = new.replicas;
                if new.replicas == replicas && old.iter().all(|s| s.replicas == 0) {
                    break;
                }
                assert!(
                    step < 99,
                    "the rollout never finished ({replicas}, {surge}, {unavailable})"
                );
            }
        }
    }

    #[test]
    fn a_scale_mid_rollout_is_spread_in_proportion() {
        // 10 replicas, surge 3: old has 8 (annotated max 13), new 5.
        let d = deployment(20, 3, 2);
        let mut old = set("old", 0, 8, 8);
        old.annotations
            .insert(sets::MAX_REPLICAS.into(), "13".into());
        let mut new = set("new", 10, 5, 5);
        new.annotations
            .insert(sets::MAX_REPLICAS.into(), "13".into());
        let scales = scale(&d, Some(&new), &[old]);
        // allowed 23 (20 + surge 5 at 20 replicas with surge fixed 3 → 23).
        let total: i32 = scales.iter().map(|s| s.to).sum();
        assert_eq!(total, 23, "{scales:?}");
        let old_to = scales.iter().find(|s| s.name == "old").unwrap().to;
        let new_to = scales.iter().find(|s| s.name == "new").unwrap().to;
        assert!(
            old_to > new_to,
            "the larger set keeps the larger share: {scales:?}"
        );
    }

    #[test]
    fn one_active_replicaset_takes_the_whole_count() {
        let d = deployment(7, 1, 1);
        let scales = scale(&d, Some(&set("new", 10, 3, 3)), &[set("old", 0, 0, 0)]);
        assert_eq!(
            scales,
            vec![Scale {
                name: "new".into(),
                to: 7
            }]
        );
    }

    #[test]
    fn history_beyond_the_limit_goes_oldest_revision_first() {
        let mut d = deployment(1, 1, 0);
        d.spec.as_mut().unwrap().revision_history_limit = Some(1);
        let mut a = set("a", 0, 0, 0);
        a.annotations.insert(sets::REVISION.into(), "1".into());
        let mut b = set("b", 1, 0, 0);
        b.annotations.insert(sets::REVISION.into(), "2".into());
        let mut c = set("c", 2, 1, 1);
        c.annotations.insert(sets::REVISION.into(), "3".into());
        assert_eq!(
            history_to_delete(&d, &[c.clone(), b.clone(), a.clone()]),
            ["a", "b"]
        );
        // One with pods is kept even if over the limit.
        c.replicas = 0;
        c.actual = 0;
        b.replicas = 1;
        assert_eq!(history_to_delete(&d, &[a, b, c]), ["a"]);
    }
}
