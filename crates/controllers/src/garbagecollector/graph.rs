//! The owner→dependents graph (upstream's GraphBuilder `uidToNode`): one
//! node per object seen by the metadata watches, keyed by uid, with the
//! owners its ownerReferences name and the dependents that name it.
//! Applying an observed change returns the uids to look at again: the
//! dependents of a vanished owner, an object whose owner is not in the
//! graph, an owner starting foreground deletion (and its dependents), an
//! owner whose blocking dependents changed, an owner to orphan.
//!
//! This module owns only that bookkeeping; it makes no request and
//! decides nothing about deleting (see `decide`).

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The finalizer of foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of orphaning deletion.
pub const ORPHAN: &str = "orphan";

/// Who an object is: enough to find it again through the API.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // upstream's objectReference.String()
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Whether `reference` from a dependent in `namespace` names `owner`:
/// same group, kind and name, and the owner cluster-scoped or in the
/// dependent's namespace (upstream checks the coordinates too, as uids
/// can be copied).
pub fn refers_to(reference: &OwnerReference, owner: &Identity, namespace: &str) -> bool {
    reference.name == owner.name
        && reference.kind == owner.kind
        && group_of(&reference.api_version) == group_of(&owner.api_version)
        && (owner.namespace.is_empty() || owner.namespace == namespace)
}

/// What the graph keeps of an object's metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts {
    /// Its ownerReferences.
    pub owners: Vec<OwnerReference>,
    /// metadata.deletionTimestamp is set.
    pub being_deleted: bool,
    /// Its finalizers.
    pub finalizers: Vec<String>,
}

impl Facts {
    /// From an object's metadata.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self {
            owners: meta.owner_references.clone().unwrap_or_default(),
            being_deleted: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.clone().unwrap_or_default(),
        }
    }

    /// Deleting with the `foregroundDeletion` finalizer: waits for the
    /// dependents that block it.
    pub fn deleting_dependents(&self) -> bool {
        self.being_deleted && self.finalizers.iter().any(|f| f == FOREGROUND)
    }

    /// Deleting with the `orphan` finalizer.
    pub fn orphaning(&self) -> bool {
        self.being_deleted && self.finalizers.iter().any(|f| f == ORPHAN)
    }
}

/// One object of the graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Who it is.
    pub identity: Identity,
    /// Its metadata's facts.
    pub facts: Facts,
    /// The uids of the objects naming it as an owner.
    pub dependents: BTreeSet<String>,
    /// Known only from other objects' references, not observed.
    pub virtual_: bool,
}

/// What to look at after a change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Uids for attempt-to-delete.
    pub attempt_to_delete: BTreeSet<String>,
    /// Uids of owners whose dependents are to be orphaned.
    pub attempt_to_orphan: BTreeSet<String>,
}

/// The graph.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
}

impl Graph {
    /// The node of `uid`, observed or virtual.
    #[cfg(test)]
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// The observed node of `uid`.
    pub fn observed(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid).filter(|n| !n.virtual_)
    }

    /// How many nodes (observed and virtual).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The dependents of `uid` whose reference to it has
    /// blockOwnerDeletion (upstream's blockingDependents).
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        let Some(node) = self.nodes.get(uid) else {
            return Vec::new();
        };
        node.dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| {
                d.facts
                    .owners
                    .iter()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
            })
            .collect()
    }

    /// The dependents of `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.nodes
            .get(uid)
            .map(|n| {
                n.dependents
                    .iter()
                    .filter_map(|d| self.nodes.get(d))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An object was added or changed.
    pub fn apply(&mut self, identity: Identity, facts: Facts) -> Work {
        let mut work = Work::default();
        let uid = identity.uid.clone();
        let (old, dependents) = match self.nodes.remove(&uid) {
            Some(n) if !n.virtual_ => (Some(n.facts), n.dependents),
            Some(n) => {
                // Observed at last: its dependents were waiting to learn
                // whether it exists.
                (None, n.dependents)
            }
            None => (None, BTreeSet::new()),
        };
        let old_owners: HashMap<&str, &OwnerReference> = old
            .as_ref()
            .map(|f| f.owners.iter().map(|o| (o.uid.as_str(), o)).collect())
            .unwrap_or_default();
        let new_owners: HashMap<&str, &OwnerReference> =
            facts.owners.iter().map(|o| (o.uid.as_str(), o)).collect();
        // Owners no longer named: drop the edge; a foreground owner may be
        // unblocked.
        for (owner, _) in old_owners
            .iter()
            .filter(|(u, _)| !new_owners.contains_key(*u))
        {
            if let Some(o) = self.nodes.get_mut(*owner) {
                o.dependents.remove(&uid);
                if o.facts.deleting_dependents() {
                    work.attempt_to_delete.insert(owner.to_string());
                }
                if o.virtual_ && o.dependents.is_empty() {
                    self.nodes.remove(*owner);
                }
            }
        }
        for (owner_uid, owner) in &new_owners {
            match old_owners.get(owner_uid) {
                None => {
                    let node = self
                        .nodes
                        .entry(owner_uid.to_string())
                        .or_insert_with(|| Node {
                            identity: Identity {
                                api_version: owner.api_version.clone(),
                                kind: owner.kind.clone(),
                                namespace: identity.namespace.clone(),
                                name: owner.name.clone(),
                                uid: owner.uid.clone(),
                            },
                            facts: Facts::default(),
                            dependents: BTreeSet::new(),
                            virtual_: true,
                        });
                    node.dependents.insert(uid.clone());
                    if node.virtual_ || !refers_to(owner, &node.identity, &identity.namespace) {
                        // An owner never seen, or an object with the
                        // owner's uid that the reference does not name
                        // where the dependent can see it: check.
                        work.attempt_to_delete.insert(uid.clone());
                    }
                }
                Some(before) => {
                    // A blocking reference became non-blocking.
                    let unblocked = before.block_owner_deletion == Some(true)
                        && owner.block_owner_deletion != Some(true);
                    if unblocked
                        && self
                            .nodes
                            .get(*owner_uid)
                            .is_some_and(|o| o.facts.deleting_dependents())
                    {
                        work.attempt_to_delete.insert(owner_uid.to_string());
                    }
                }
            }
        }
        let was_deleting_dependents = old.as_ref().is_some_and(Facts::deleting_dependents);
        let was_orphaning = old.as_ref().is_some_and(Facts::orphaning);
        if facts.deleting_dependents() && !was_deleting_dependents {
            work.attempt_to_delete.extend(dependents.iter().cloned());
            work.attempt_to_delete.insert(uid.clone());
        }
        if facts.orphaning() && !was_orphaning {
            work.attempt_to_orphan.insert(uid.clone());
        }
        // An owner already gone before its dependent was seen.
        if old.is_none()
            && !facts.owners.is_empty()
            && facts.owners.iter().any(|o| {
                self.nodes
                    .get(&o.uid)
                    .is_none_or(|n| n.virtual_ || n.facts.deleting_dependents())
            })
        {
            work.attempt_to_delete.insert(uid.clone());
        }
        self.nodes.insert(
            uid,
            Node {
                identity,
                facts,
                dependents,
                virtual_: false,
            },
        );
        work
    }

    /// An object was deleted: its dependents lost an owner, its owners
    /// waiting in the foreground may go on.
    pub fn delete(&mut self, uid: &str) -> Work {
        let mut work = Work::default();
        let Some(node) = self.nodes.remove(uid) else {
            return work;
        };
        if node.virtual_ {
            self.nodes.insert(uid.to_string(), node);
            return work;
        }
        for owner in &node.facts.owners {
            if let Some(o) = self.nodes.get_mut(&owner.uid) {
                o.dependents.remove(uid);
                if o.facts.deleting_dependents() {
                    work.attempt_to_delete.insert(owner.uid.clone());
                }
                if o.virtual_ && o.dependents.is_empty() {
                    self.nodes.remove(&owner.uid);
                }
            }
        }
        // Dependents still name the gone uid: keep it as a virtual node
        // so they stay linked until they are collected.
        if !node.dependents.is_empty() {
            work.attempt_to_delete
                .extend(node.dependents.iter().cloned());
            self.nodes.insert(
                uid.to_string(),
                Node {
                    facts: Facts::default(),
                    virtual_: true,
                    ..node
                },
            );
        }
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str, uid: &str) -> Identity {
        Identity {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn owner(name: &str, uid: &str, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: name.into(),
            uid: uid.into(),
            block_owner_deletion: block.then_some(true),
            controller: None,
        }
    }

    fn owned(owners: Vec<OwnerReference>) -> Facts {
        Facts {
            owners,
            ..Facts::default()
        }
    }

    fn set(uids: &[&str]) -> BTreeSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn deleting_an_owner_queues_its_dependents() {
        let mut g = Graph::default();
        assert!(g
            .apply(id("o", "1"), Facts::default())
            .attempt_to_delete
            .is_empty());
        let w = g.apply(id("d", "2"), owned(vec![owner("o", "1", false)]));
        assert!(w.attempt_to_delete.is_empty(), "owner present: {w:?}");
        assert_eq!(g.dependents("1").len(), 1);
        let w = g.delete("1");
        assert_eq!(w.attempt_to_delete, set(&["2"]));
        assert!(g.get("1").is_some_and(|n| n.virtual_));
        // The dependent going removes the virtual owner too.
        g.delete("2");
        assert!(g.is_empty());
    }

    #[test]
    fn a_dependent_of_an_unseen_owner_is_checked() {
        let mut g = Graph::default();
        let w = g.apply(id("d", "2"), owned(vec![owner("o", "1", false)]));
        assert_eq!(w.attempt_to_delete, set(&["2"]));
        // The owner is then observed: the virtual node becomes real and
        // keeps its dependent.
        g.apply(id("o", "1"), Facts::default());
        assert!(g.observed("1").is_some());
        assert_eq!(g.dependents("1").len(), 1);
    }

    #[test]
    fn foreground_deletion_queues_the_dependents_and_the_owner() {
        let mut g = Graph::default();
        g.apply(id("o", "1"), Facts::default());
        g.apply(id("a", "2"), owned(vec![owner("o", "1", true)]));
        g.apply(id("b", "3"), owned(vec![owner("o", "1", false)]));
        let deleting = Facts {
            being_deleted: true,
            finalizers: vec![FOREGROUND.into()],
            ..Facts::default()
        };
        let w = g.apply(id("o", "1"), deleting.clone());
        assert_eq!(w.attempt_to_delete, set(&["1", "2", "3"]));
        // Only the blocking one holds the owner.
        let blocking: Vec<_> = g
            .blocking_dependents("1")
            .iter()
            .map(|n| n.identity.name.clone())
            .collect();
        assert_eq!(blocking, vec!["a".to_string()]);
        // The same state again is no transition.
        assert!(g.apply(id("o", "1"), deleting).attempt_to_delete.is_empty());
        // The blocking dependent going requeues the owner.
        assert_eq!(g.delete("2").attempt_to_delete, set(&["1"]));
        // Unblocking a reference requeues the owner too.
        g.apply(id("c", "4"), owned(vec![owner("o", "1", true)]));
        let w = g.apply(id("c", "4"), owned(vec![owner("o", "1", false)]));
        assert_eq!(w.attempt_to_delete, set(&["1"]));
        // As does dropping the reference.
        let w = g.apply(id("b", "3"), owned(vec![]));
        assert_eq!(w.attempt_to_delete, set(&["1"]));
    }

    #[test]
    fn a_reference_to_a_known_uid_elsewhere_is_checked() {
        let mut g = Graph::default();
        let mut other = id("o", "1");
        other.namespace = "elsewhere".into();
        g.apply(other, Facts::default());
        let w = g.apply(id("d", "2"), owned(vec![owner("o", "1", false)]));
        assert_eq!(w.attempt_to_delete, set(&["2"]), "another namespace");
        let w = g.apply(id("e", "3"), owned(vec![owner("renamed", "1", false)]));
        assert_eq!(w.attempt_to_delete, set(&["3"]), "another name");
        // A cluster-scoped owner is seen from every namespace.
        let mut cluster = id("c", "4");
        cluster.namespace = String::new();
        g.apply(cluster, Facts::default());
        let w = g.apply(id("f", "5"), owned(vec![owner("c", "4", false)]));
        assert!(w.attempt_to_delete.is_empty());
    }

    #[test]
    fn orphaning_is_queued_once() {
        let mut g = Graph::default();
        g.apply(id("o", "1"), Facts::default());
        let orphaning = Facts {
            being_deleted: true,
            finalizers: vec![ORPHAN.into()],
            ..Facts::default()
        };
        assert_eq!(
            g.apply(id("o", "1"), orphaning.clone()).attempt_to_orphan,
            set(&["1"])
        );
        assert!(g
            .apply(id("o", "1"), orphaning)
            .attempt_to_orphan
            .is_empty());
    }

    #[test]
    fn a_dependent_of_an_owner_in_foreground_deletion_is_checked_when_seen() {
        let mut g = Graph::default();
        g.apply(
            id("o", "1"),
            Facts {
                being_deleted: true,
                finalizers: vec![FOREGROUND.into()],
                ..Facts::default()
            },
        );
        let w = g.apply(id("d", "2"), owned(vec![owner("o", "1", true)]));
        assert_eq!(w.attempt_to_delete, set(&["2"]));
    }
}
