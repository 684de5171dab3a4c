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

    /// Adds an RBAC rule: a resource rule, a non-resource rule, or both
    /// when it names both (validation refuses that, but stored objects are
    /// listed as they are).
    pub fn policy_rule(mut self, rule: &k8s_openapi::api::rbac::v1::PolicyRule) -> Self {
        let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
        if rule.resources.as_ref().is_some_and(|r| !r.is_empty()) {
            let mut r = json!({
                "verbs": rule.verbs,
                "apiGroups": list(&rule.api_groups),
                "resources": list(&rule.resources),
            });
            if let Some(names) = rule.resource_names.as_ref().filter(|n| !n.is_empty()) {
                r["resourceNames"] = json!(names);
            }
            self.resource_rules.push(r);
        }
        if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
            self.non_resource_rules
                .push(json!({"verbs": rule.verbs, "nonResourceURLs": urls}));
        }
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
