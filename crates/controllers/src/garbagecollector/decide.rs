//! What attempt-to-delete does with one object, given what its owners
//! turned out to be (upstream's attemptToDeleteItem and
//! processDeletingDependentsItem, as pure functions).
//!
//! This module owns only those decisions; looking the owners up and
//! writing belong to the workers (`worker`).

use super::graph::{Facts, FOREGROUND, ORPHAN};

/// What an owner reference resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerState {
    /// The owner exists (same uid) and is not deleting its dependents.
    Solid,
    /// No object of that name, or one with another uid.
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
}

/// A deletion's propagation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Dependents are collected afterwards.
    Background,
    /// Dependents go first.
    Foreground,
    /// Dependents are kept, their references removed.
    Orphan,
}

impl Policy {
    /// Its name in DeleteOptions.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Background => "Background",
            Policy::Foreground => "Foreground",
            Policy::Orphan => "Orphan",
        }
    }
}

/// What to do with an object none of whose owners may be solid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Leave it.
    Keep,
    /// It has a solid owner: drop the references (these uids) to owners
    /// that are gone or waiting for their dependents.
    RemoveReferences(Vec<String>),
    /// Delete it; `unblock_first` makes its references non-blocking
    /// first (a cycle of foreground deletions would wait forever).
    Delete {
        /// The propagation policy.
        policy: Policy,
        /// Set blockOwnerDeletion false on its references first.
        unblock_first: bool,
    },
}

/// Decides for an object (its latest metadata `latest`) whose owners
/// resolved to `owners` (uid, state); `has_dependents` and
/// `dependent_deleting_dependents` describe its own dependents.
pub fn attempt_to_delete(
    latest: &Facts,
    owners: &[(String, OwnerState)],
    has_dependents: bool,
    dependent_deleting_dependents: bool,
) -> Decision {
    if owners.is_empty() {
        return Decision::Keep;
    }
    let of = |state: OwnerState| -> Vec<String> {
        owners
            .iter()
            .filter(|(_, s)| *s == state)
            .map(|(u, _)| u.clone())
            .collect()
    };
    let solid = of(OwnerState::Solid);
    let dangling = of(OwnerState::Dangling);
    let waiting = of(OwnerState::Waiting);
    if !solid.is_empty() {
        if dangling.is_empty() && waiting.is_empty() {
            return Decision::Keep;
        }
        return Decision::RemoveReferences([dangling, waiting].concat());
    }
    if !waiting.is_empty() && has_dependents {
        return Decision::Delete {
            policy: Policy::Foreground,
            unblock_first: dependent_deleting_dependents,
        };
    }
    let has = |f: &str| latest.finalizers.iter().any(|x| x == f);
    let policy = if has(ORPHAN) {
        Policy::Orphan
    } else if has(FOREGROUND) {
        Policy::Foreground
    } else {
        Policy::Background
    };
    Decision::Delete {
        policy,
        unblock_first: false,
    }
}

/// An owner deleting in the foreground: with no blocking dependent left
/// its finalizer goes (`None`); otherwise these blocking dependents
/// (uid, deleting their own dependents) not yet deleting theirs are to
/// be attempted.
pub fn foreground_step(blocking: &[(String, bool)]) -> Option<Vec<String>> {
    if blocking.is_empty() {
        return None;
    }
    Some(
        blocking
            .iter()
            .filter(|(_, deleting_dependents)| !deleting_dependents)
            .map(|(u, _)| u.clone())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use OwnerState::*;

    fn owners(states: &[(&str, OwnerState)]) -> Vec<(String, OwnerState)> {
        states.iter().map(|(u, s)| (u.to_string(), *s)).collect()
    }

    fn with_finalizers(f: &[&str]) -> Facts {
        Facts {
            finalizers: f.iter().map(|s| s.to_string()).collect(),
            ..Facts::default()
        }
    }

    #[test]
    fn a_solid_owner_keeps_the_object_and_drops_the_others() {
        let none = Facts::default();
        assert_eq!(
            attempt_to_delete(&none, &owners(&[("a", Solid)]), false, false),
            Decision::Keep
        );
        assert_eq!(
            attempt_to_delete(
                &none,
                &owners(&[("a", Solid), ("b", Dangling), ("c", Waiting)]),
                true,
                false
            ),
            Decision::RemoveReferences(vec!["b".into(), "c".into()])
        );
    }

    #[test]
    fn without_a_solid_owner_the_object_goes_with_its_finalizers_policy() {
        let gone = owners(&[("a", Dangling)]);
        let delete = |policy| Decision::Delete {
            policy,
            unblock_first: false,
        };
        assert_eq!(
            attempt_to_delete(&Facts::default(), &gone, true, false),
            delete(Policy::Background)
        );
        assert_eq!(
            attempt_to_delete(&with_finalizers(&[ORPHAN]), &gone, false, false),
            delete(Policy::Orphan)
        );
        assert_eq!(
            attempt_to_delete(&with_finalizers(&["x", FOREGROUND]), &gone, false, false),
            delete(Policy::Foreground)
        );
        assert_eq!(
            attempt_to_delete(&Facts::default(), &[], false, false),
            Decision::Keep
        );
    }

    #[test]
    fn a_waiting_owner_deletes_dependents_with_dependents_in_the_foreground() {
        let waiting = owners(&[("a", Waiting), ("b", Dangling)]);
        assert_eq!(
            attempt_to_delete(&Facts::default(), &waiting, true, false),
            Decision::Delete {
                policy: Policy::Foreground,
                unblock_first: false
            }
        );
        assert_eq!(
            attempt_to_delete(&Facts::default(), &waiting, true, true),
            Decision::Delete {
                policy: Policy::Foreground,
                unblock_first: true
            }
        );
        // Without dependents of its own, the usual background deletion.
        assert_eq!(
            attempt_to_delete(&Facts::default(), &waiting, false, false),
            Decision::Delete {
                policy: Policy::Background,
                unblock_first: false
            }
        );
    }

    #[test]
    fn a_foreground_owner_waits_for_its_blocking_dependents() {
        assert_eq!(foreground_step(&[]), None);
        assert_eq!(
            foreground_step(&[("a".into(), false), ("b".into(), true)]),
            Some(vec!["a".to_string()])
        );
    }
}
