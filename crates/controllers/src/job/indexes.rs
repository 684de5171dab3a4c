//! Completion indexes of Indexed Jobs: the sets written as
//! `status.completedIndexes` ("1,3-5,7", upstream's ordered intervals),
//! the index a pod carries, which indexes still need a pod, and which
//! active pods repeat an index or carry none.
//!
//! Pure functions; no I/O.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use k8s_openapi::api::batch::v1::SuccessPolicy;
use k8s_openapi::api::core::v1::Pod;

/// The annotation (and label) with a pod's completion index.
pub const INDEX_KEY: &str = "batch.kubernetes.io/job-completion-index";

/// A pod's completion index, if it has a valid one.
pub fn of(pod: &Pod) -> Option<i32> {
    let value = pod.metadata.annotations.as_ref()?.get(INDEX_KEY)?;
    value.parse::<i32>().ok().filter(|i| *i >= 0)
}

/// Parses "1,3-5,7" into indexes below `completions` (bad parts skipped).
pub fn parse(text: &str, completions: i32) -> BTreeSet<i32> {
    let mut set = BTreeSet::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
            None => (part.parse::<i32>(), part.parse::<i32>()),
        };
        if let (Ok(first), Ok(last)) = (first, last) {
            set.extend((first.max(0)..=last.min(completions - 1)).filter(|i| *i >= 0));
        }
    }
    set
}

/// Writes indexes as upstream does: runs of three or more as `a-b`, a
/// pair as `a,b`.
pub fn format(set: &BTreeSet<i32>) -> String {
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for &i in set {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == i => *last = i,
            _ => runs.push((i, i)),
        }
    }
    runs.iter()
        .map(|&(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a},{b}"),
            _ => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The lowest `count` indexes below `completions` that neither succeeded
/// nor have an active pod.
pub fn first_pending(
    succeeded: &BTreeSet<i32>,
    active: &[Arc<Pod>],
    completions: i32,
    count: usize,
) -> Vec<i32> {
    let running: HashSet<i32> = active.iter().filter_map(|p| of(p)).collect();
    (0..completions)
        .filter(|i| !succeeded.contains(i) && !running.contains(i))
        .take(count)
        .collect()
}

/// Active pods to remove whatever the counts: no valid index, an index
/// out of range, or an index another active pod already has (the later
/// ones by name).
pub fn invalid_or_repeated(active: &[Arc<Pod>], completions: i32) -> Vec<Arc<Pod>> {
    let mut sorted: Vec<&Arc<Pod>> = active.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut seen = HashSet::new();
    sorted
        .into_iter()
        .filter(|p| match of(p) {
            Some(i) if i < completions => !seen.insert(i),
            _ => true,
        })
        .cloned()
        .collect()
}

/// The first `successPolicy` rule the succeeded indexes meet, as
/// upstream words it ("Matched rules at index N").
pub fn success_policy_met(
    policy: &SuccessPolicy,
    completions: i32,
    succeeded: &BTreeSet<i32>,
) -> Option<String> {
    if succeeded.is_empty() {
        return None;
    }
    policy.rules.iter().enumerate().find_map(|(index, rule)| {
        let met = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(text), count) => {
                let required = parse(text, completions);
                let done = required.intersection(succeeded).count();
                !required.is_empty()
                    && match count {
                        Some(n) => i32::try_from(done).unwrap_or(i32::MAX) >= n,
                        None => done == required.len(),
                    }
            }
            (None, Some(n)) => i32::try_from(succeeded.len()).unwrap_or(i32::MAX) >= n,
            (None, None) => false,
        };
        met.then(|| format!("Matched rules at index {index}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_policy_rules_match_indexes_and_counts() {
        let policy: SuccessPolicy = serde_json::from_value(serde_json::json!({"rules": [
            {"succeededIndexes": "0-2", "succeededCount": 2},
            {"succeededIndexes": "4"},
            {"succeededCount": 3},
        ]}))
        .unwrap();
        let met = |s: &[i32]| success_policy_met(&policy, 6, &s.iter().copied().collect());
        assert_eq!(met(&[]), None);
        assert_eq!(met(&[0]), None);
        assert_eq!(met(&[0, 2]).as_deref(), Some("Matched rules at index 0"));
        assert_eq!(met(&[4]).as_deref(), Some("Matched rules at index 1"));
        assert_eq!(met(&[0, 3, 5]).as_deref(), Some("Matched rules at index 2"));
    }

    fn pod(name: &str, index: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.annotations = Some([(INDEX_KEY.to_string(), index.to_string())].into());
        Arc::new(p)
    }

    #[test]
    fn intervals_round_trip_in_upstreams_form() {
        let set: BTreeSet<i32> = [0, 1, 3, 4, 5, 7].into();
        assert_eq!(format(&set), "0,1,3-5,7");
        assert_eq!(parse("0,1,3-5,7", 10), set);
        assert_eq!(parse("3-9", 5), [3, 4].into());
        assert_eq!(format(&BTreeSet::new()), "");
    }

    #[test]
    fn pending_indexes_skip_succeeded_and_running_ones() {
        let active = vec![pod("a", "1")];
        let succeeded: BTreeSet<i32> = [0, 3].into();
        assert_eq!(first_pending(&succeeded, &active, 5, 2), vec![2, 4]);
        assert_eq!(first_pending(&succeeded, &active, 5, 9), vec![2, 4]);
    }

    #[test]
    fn repeated_and_invalid_indexes_are_removed() {
        let active = vec![pod("b", "1"), pod("a", "1"), pod("c", "x"), pod("d", "7")];
        let names: Vec<_> = invalid_or_repeated(&active, 5)
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["b", "c", "d"]);
    }
}
