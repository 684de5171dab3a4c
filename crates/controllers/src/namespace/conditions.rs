//! The conditions the namespace controller keeps on a terminating
//! namespace (upstream's namespaceConditionUpdater): one of each of five
//! types, True with what went wrong or remains, else False with the
//! "all is well" reason and message.
//!
//! This module owns only their computation; it makes no request.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NamespaceCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Discovery failed.
pub const DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// A group version did not parse.
pub const GV_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
/// Deleting some resource failed.
pub const CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// Objects remain.
pub const CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// Objects with finalizers remain.
pub const FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// The types in the order they are kept.
const TYPES: [&str; 5] = [
    DISCOVERY_FAILURE,
    GV_PARSING_FAILURE,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
];

fn ok(type_: &str) -> (&'static str, &'static str) {
    match type_ {
        DISCOVERY_FAILURE => (
            "ResourcesDiscovered",
            "All resources successfully discovered",
        ),
        GV_PARSING_FAILURE => (
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
        ),
        CONTENT_FAILURE => (
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
        ),
        CONTENT_REMAINING => ("ContentRemoved", "All content successfully removed"),
        _ => (
            "ContentHasNoFinalizers",
            "All content-preserving finalizers finished",
        ),
    }
}

/// What one pass over the namespace's content found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Findings {
    /// Discovery's error, if it failed.
    pub discovery_error: Option<String>,
    /// Group versions that did not parse.
    pub group_version_error: Option<String>,
    /// Errors deleting resources, one per resource.
    pub content_errors: Vec<String>,
    /// Objects left per `resource.group`.
    pub remaining: BTreeMap<String, usize>,
    /// Objects left per finalizer.
    pub finalizers: BTreeMap<String, usize>,
}

/// The failing conditions of `findings` (type, reason, message).
pub fn failing(findings: &Findings) -> Vec<(&'static str, &'static str, String)> {
    let mut out = Vec::new();
    if let Some(e) = &findings.discovery_error {
        out.push((DISCOVERY_FAILURE, "DiscoveryFailed", e.clone()));
    }
    if let Some(e) = &findings.group_version_error {
        out.push((GV_PARSING_FAILURE, "GroupVersionParsingFailed", e.clone()));
    }
    if !findings.content_errors.is_empty() {
        let mut errors = findings.content_errors.clone();
        errors.sort();
        out.push((
            CONTENT_FAILURE,
            "ContentDeletionFailed",
            format!(
                "Failed to delete all resource types, {} remaining: {}",
                errors.len(),
                errors.join(", ")
            ),
        ));
    }
    let remaining: Vec<String> = findings
        .remaining
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect();
    if !remaining.is_empty() {
        out.push((
            CONTENT_REMAINING,
            "SomeResourcesRemain",
            format!("Some resources are remaining: {}", remaining.join(", ")),
        ));
    }
    let finalizers: Vec<String> = findings
        .finalizers
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    if !finalizers.is_empty() {
        out.push((
            FINALIZERS_REMAINING,
            "SomeFinalizersRemain",
            format!(
                "Some content in the namespace has finalizers remaining: {}",
                finalizers.join(", ")
            ),
        ));
    }
    out
}

/// `current` updated with `findings` at `now`, or `None` when nothing
/// changes. A condition's lastTransitionTime moves only when its status
/// does; conditions of other types are kept.
pub fn update(
    current: &[NamespaceCondition],
    findings: &Findings,
    now: Timestamp,
) -> Option<Vec<NamespaceCondition>> {
    let failing = failing(findings);
    let mut out = current.to_vec();
    let mut changed = false;
    for type_ in TYPES {
        let (status, reason, message) = match failing.iter().find(|(t, _, _)| *t == type_) {
            Some((_, reason, message)) => ("True", *reason, message.clone()),
            None => {
                let (reason, message) = ok(type_);
                ("False", reason, message.to_string())
            }
        };
        match out.iter_mut().find(|c| c.type_ == type_) {
            None => {
                out.push(NamespaceCondition {
                    type_: type_.into(),
                    status: status.into(),
                    reason: Some(reason.into()),
                    message: Some(message),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
            Some(c) => {
                if c.status != status
                    || c.reason.as_deref() != Some(reason)
                    || c.message.as_deref() != Some(message.as_str())
                {
                    if c.status != status {
                        c.last_transition_time = Some(Time(now));
                    }
                    c.status = status.into();
                    c.reason = Some(reason.into());
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(c: &'a [NamespaceCondition], t: &str) -> &'a NamespaceCondition {
        c.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn remaining_content_and_finalizers_are_reported_then_cleared() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let findings = Findings {
            remaining: BTreeMap::from([("pods.".to_string(), 2), ("configmaps.".to_string(), 1)]),
            finalizers: BTreeMap::from([("example.com/hold".to_string(), 1)]),
            ..Findings::default()
        };
        let first = update(&[], &findings, t0).unwrap();
        assert_eq!(first.len(), 5);
        let remaining = find(&first, CONTENT_REMAINING);
        assert_eq!(remaining.status, "True");
        assert_eq!(remaining.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            remaining.message.as_deref(),
            Some("Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances")
        );
        let fins = find(&first, FINALIZERS_REMAINING);
        assert_eq!(
            fins.message.as_deref(),
            Some("Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
        );
        let discovery = find(&first, DISCOVERY_FAILURE);
        assert_eq!(discovery.status, "False");
        assert_eq!(discovery.reason.as_deref(), Some("ResourcesDiscovered"));
        // The same findings again: nothing to write.
        assert_eq!(update(&first, &findings, t1), None);
        // All gone: False, with a new transition time.
        let done = update(&first, &Findings::default(), t1).unwrap();
        let remaining = find(&done, CONTENT_REMAINING);
        assert_eq!(remaining.status, "False");
        assert_eq!(remaining.reason.as_deref(), Some("ContentRemoved"));
        assert_eq!(remaining.last_transition_time, Some(Time(t1)));
        // Unchanged types keep theirs.
        assert_eq!(
            find(&done, DISCOVERY_FAILURE).last_transition_time,
            Some(Time(t0))
        );
        assert_eq!(
            find(&done, FINALIZERS_REMAINING).reason.as_deref(),
            Some("ContentHasNoFinalizers")
        );
    }

    #[test]
    fn failures_are_worded_as_upstream() {
        let findings = Findings {
            discovery_error: Some("boom".into()),
            content_errors: vec!["b failed".into(), "a failed".into()],
            ..Findings::default()
        };
        let c = update(&[], &findings, Timestamp::from_second(0).unwrap()).unwrap();
        assert_eq!(
            find(&c, DISCOVERY_FAILURE).reason.as_deref(),
            Some("DiscoveryFailed")
        );
        let content = find(&c, CONTENT_FAILURE);
        assert_eq!(content.reason.as_deref(), Some("ContentDeletionFailed"));
        assert_eq!(
            content.message.as_deref(),
            Some("Failed to delete all resource types, 2 remaining: a failed, b failed")
        );
    }
}
