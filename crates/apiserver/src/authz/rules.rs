//! What an authorizer can say about a user's permissions as a list (the
//! rule resolver upstream's SelfSubjectRulesReview asks): resource rules
//! and non-resource rules in `authorization.k8s.io/v1` form, and whether
//! the list may be incomplete.

use serde_json::{json, Value};

/// A user's rules in one namespace, as far as an authorizer can list them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// `ResourceRule`s: `{verbs, apiGroups, resources, resourceNames}`.
    pub resource_rules: Vec<Value>,
    /// `NonResourceRule`s: `{verbs, nonResourceURLs}`.
    pub non_resource_rules: Vec<Value>,
    /// The authorizer cannot list everything it would allow.
    pub incomplete: bool,
}

impl Rules {
    /// An authorizer that cannot list its rules.
    pub fn unknown() -> Self {
        Rules {
            incomplete: true,
            ..Rules::default()
        }
    }

    /// Adds a resource rule.
    pub fn resource(mut self, verbs: &[&str], groups: &[&str], resources: &[&str]) -> Self {
        self.resource_rules.push(json!({
            "verbs": verbs,
            "apiGroups": groups,
            "resources": resources,
        }));
        self
    }

    /// Adds a non-resource rule.
    pub fn non_resource(mut self, verbs: &[&str], urls: &[&str]) -> Self {
        self.non_resource_rules
            .push(json!({"verbs": verbs, "nonResourceURLs": urls}));
        self
    }

    /// The union of two authorizers' lists (upstream's union resolver).
    pub fn union(mut self, other: Rules) -> Self {
        self.resource_rules.extend(other.resource_rules);
        self.non_resource_rules.extend(other.non_resource_rules);
        self.incomplete |= other.incomplete;
        self
    }
}
