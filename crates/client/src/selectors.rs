//! Label and node selectors over typed API objects, as the scheduler (and
//! next the node agent) evaluates them; label matching itself is
//! skiff-api's.
//!
//! This module owns turning typed `metav1.LabelSelector`s and
//! `v1.NodeSelector`s into matchers with upstream semantics
//! (`apimachinery/pkg/labels`, `component-helpers/.../nodeaffinity`): a nil
//! label selector matches nothing, an empty one everything; node selector
//! terms are ORed, an empty term matches nothing, a term with a parse error
//! never matches. It does not parse the string selector syntax (that lives
//! in skiff-api) and does no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use skiff_api::selectors::LabelOp;

/// Errors from converting API selectors into matchers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator outside the supported set.
    #[error("{0:?} is not a valid selector operator")]
    UnknownOperator(String),
    /// The values do not fit the operator (e.g. `In` without values).
    #[error("key {key:?}: {reason}")]
    Values {
        /// The requirement's key.
        key: String,
        /// What is wrong, in upstream wording.
        reason: &'static str,
    },
    /// A requirement skiff-api's selectors refuse (key, values, count),
    /// in upstream's wording.
    #[error("{0}")]
    Invalid(String),
}

/// Result alias for this module.
pub type Result<T, E = SelectorError> = std::result::Result<T, E>;

/// Labels of an object, borrowed.
pub type Labels = BTreeMap<String, String>;

/// A requirement operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// Label present with one of the values.
    In,
    /// Label absent or with none of the values.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
    /// Label present and, as an integer, greater than the single value.
    Gt,
    /// Label present and, as an integer, less than the single value.
    Lt,
}

impl Operator {
    fn parse(op: &str, allow_numeric: bool) -> Result<Self> {
        Ok(match op {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" if allow_numeric => Operator::Gt,
            "Lt" if allow_numeric => Operator::Lt,
            other => return Err(SelectorError::UnknownOperator(other.to_string())),
        })
    }
}

impl Operator {
    /// The same operator in skiff-api's selectors.
    fn label_op(self) -> LabelOp {
        match self {
            Operator::In => LabelOp::In,
            Operator::NotIn => LabelOp::NotIn,
            Operator::Exists => LabelOp::Exists,
            Operator::DoesNotExist => LabelOp::DoesNotExist,
            Operator::Gt => LabelOp::GreaterThan,
            Operator::Lt => LabelOp::LessThan,
        }
    }
}

/// One label requirement: skiff-api's (one implementation of label
/// matching for every component), built from typed API objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement(skiff_api::selectors::Requirement);

impl Requirement {
    /// Builds a requirement, checking the key, the values and the value
    /// count the operator needs, as upstream's `labels.NewRequirement`.
    pub fn new(key: &str, op: Operator, values: Vec<String>) -> Result<Self> {
        skiff_api::selectors::Requirement::new(key, op.label_op(), values)
            .map(Requirement)
            .map_err(|e| SelectorError::Invalid(e.to_string()))
    }

    /// Whether `labels` satisfy the requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0
            .matches_by(|k| labels.get(k).map(|v| Cow::Borrowed(v.as_str())))
    }
}

/// A conjunction of requirements, or the selector that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// Matches every label set.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Matches no label set.
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// `key=value` for every entry, unchecked (upstream `SelectorFromSet`).
    pub fn from_set(set: &Labels) -> Self {
        let requirements = set
            .iter()
            .map(|(k, v)| {
                Requirement(skiff_api::selectors::Requirement::new_unchecked(
                    k.as_str(),
                    LabelOp::In,
                    vec![v.clone()],
                ))
            })
            .collect();
        Self {
            requirements,
            nothing: false,
        }
    }

    /// Converts a `metav1.LabelSelector`; `None` selects nothing.
    pub fn from_label_selector(sel: Option<&LabelSelector>) -> Result<Self> {
        let Some(sel) = sel else {
            return Ok(Self::nothing());
        };
        let mut out = Self::everything();
        for (k, v) in sel.match_labels.iter().flatten() {
            out.requirements
                .push(Requirement::new(k, Operator::In, vec![v.clone()])?);
        }
        for e in sel.match_expressions.iter().flatten() {
            let op = Operator::parse(&e.operator, false)?;
            out.requirements.push(Requirement::new(
                &e.key,
                op,
                e.values.clone().unwrap_or_default(),
            )?);
        }
        Ok(out)
    }

    /// Adds a requirement (ANDed); a `nothing` selector stays `nothing`.
    pub fn add(&mut self, r: Requirement) {
        self.requirements.push(r);
    }

    /// True for the selector that matches everything (upstream `Empty()`).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether the labels match.
    pub fn matches(&self, labels: Option<&Labels>) -> bool {
        if self.nothing {
            return false;
        }
        let empty = Labels::new();
        let labels = labels.unwrap_or(&empty);
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// One parsed node selector term; `None` inside means "no constraint".
#[derive(Debug, Clone)]
struct Term {
    labels: Option<Selector>,
    fields: Option<Vec<(String, bool, String)>>,
}

impl Term {
    fn parse(term: &NodeSelectorTerm) -> Result<Self> {
        let labels = match term.match_expressions.as_deref() {
            Some(exprs) if !exprs.is_empty() => {
                let mut sel = Selector::everything();
                for e in exprs {
                    sel.add(requirement_from_node(e)?);
                }
                Some(sel)
            }
            _ => None,
        };
        let fields = match term.match_fields.as_deref() {
            Some(exprs) if !exprs.is_empty() => {
                let mut out = Vec::new();
                for e in exprs {
                    let values = e.values.as_deref().unwrap_or_default();
                    let equal = match e.operator.as_str() {
                        "In" => true,
                        "NotIn" => false,
                        other => return Err(SelectorError::UnknownOperator(other.to_string())),
                    };
                    let [value] = values else {
                        return Err(SelectorError::Values {
                            key: e.key.clone(),
                            reason: "must have one element",
                        });
                    };
                    out.push((e.key.clone(), equal, value.clone()));
                }
                Some(out)
            }
            _ => None,
        };
        Ok(Self { labels, fields })
    }

    fn matches(&self, node: &Node) -> bool {
        if let Some(sel) = &self.labels {
            if !sel.matches(node.metadata.labels.as_ref()) {
                return false;
            }
        }
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let (Some(fields), false) = (&self.fields, name.is_empty()) {
            for (key, equal, value) in fields {
                let got = if key == "metadata.name" { name } else { "" };
                if (got == value) != *equal {
                    return false;
                }
            }
        }
        true
    }
}

fn is_empty_term(t: &NodeSelectorTerm) -> bool {
    t.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && t.match_fields.as_ref().is_none_or(Vec::is_empty)
}

/// Converts one `NodeSelectorRequirement` into a label requirement.
pub fn requirement_from_node(r: &NodeSelectorRequirement) -> Result<Requirement> {
    let op = Operator::parse(&r.operator, true)?;
    Requirement::new(&r.key, op, r.values.clone().unwrap_or_default())
}

/// A `v1.NodeSelector`: terms ORed, empty or unparsable terms never match.
#[derive(Debug, Clone)]
pub struct NodeSelectorMatcher {
    terms: Vec<Option<Term>>,
}

impl NodeSelectorMatcher {
    /// Parses the terms lazily: a bad term is kept as "never matches".
    pub fn new(ns: &NodeSelector) -> Self {
        let terms = ns
            .node_selector_terms
            .iter()
            .filter(|t| !is_empty_term(t))
            .map(|t| Term::parse(t).ok())
            .collect();
        Self { terms }
    }

    /// Whether any term matches the node.
    pub fn matches(&self, node: &Node) -> bool {
        self.terms.iter().flatten().any(|t| t.matches(node))
    }
}

/// A pod's `spec.nodeSelector` ANDed with its required node affinity.
#[derive(Debug, Clone)]
pub struct RequiredNodeAffinity {
    node_selector: Option<Selector>,
    affinity: Option<NodeSelectorMatcher>,
}

impl RequiredNodeAffinity {
    /// Builds the matcher from a pod.
    pub fn of(pod: &Pod) -> Self {
        let spec = pod.spec.as_ref();
        let node_selector = spec
            .and_then(|s| s.node_selector.as_ref())
            .filter(|m| !m.is_empty())
            .map(Selector::from_set);
        let affinity = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(NodeSelectorMatcher::new);
        Self {
            node_selector,
            affinity,
        }
    }

    /// Whether the pod has no node selector and no required node affinity.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_none() && self.affinity.is_none()
    }

    /// Whether the node satisfies both.
    pub fn matches(&self, node: &Node) -> bool {
        if let Some(sel) = &self.node_selector {
            if !sel.matches(node.metadata.labels.as_ref()) {
                return false;
            }
        }
        self.affinity.as_ref().is_none_or(|a| a.matches(node))
    }
}

/// Preferred node selector terms with weights (empty or zero-weight terms
/// are dropped, like upstream).
#[derive(Debug, Clone, Default)]
pub struct PreferredTerms {
    terms: Vec<(Term, i64)>,
}

impl PreferredTerms {
    /// Parses the pod's preferred node affinity terms.
    pub fn of(pod: &Pod) -> Result<Self> {
        let preferred = pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_deref()
            })
            .unwrap_or_default();
        let mut terms = Vec::new();
        for p in preferred {
            if p.weight == 0 || is_empty_term(&p.preference) {
                continue;
            }
            terms.push((Term::parse(&p.preference)?, i64::from(p.weight)));
        }
        Ok(Self { terms })
    }

    /// True when there is nothing to score.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The sum of the weights of matching terms.
    pub fn score(&self, node: &Node) -> i64 {
        self.terms
            .iter()
            .filter(|(t, _)| t.matches(node))
            .map(|(_, w)| w)
            .sum()
    }
}

#[cfg(test)]
#[path = "selectors_tests.rs"]
mod tests;
