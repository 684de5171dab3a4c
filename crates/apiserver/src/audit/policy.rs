//! The audit policy: upstream's `audit.k8s.io/v1` `Policy` (YAML or JSON),
//! read and checked once at start-up, then asked for every request which
//! [`Level`] to record it at and which [`Stage`]s to leave out, as
//! upstream's `policy.Checker`: the first rule that matches decides, no
//! match is [`Level::None`]. This module owns parsing, validation (with
//! the offending field named, as upstream's `ValidatePolicy`) and matching;
//! it must not build events or touch the log.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::authz::Attributes;

/// Why a policy file was refused; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read audit policy file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("audit policy file {path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        /// Upstream's field path (`rules[2].level`), or what was wrong
        /// with the document as a whole (`document`).
        field: String,
        message: String,
    },
}

pub type Result<T> = std::result::Result<T, Error>;

/// How much of a request is recorded, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what and when, without bodies.
    Metadata,
    /// Metadata and the request's object.
    Request,
    /// Metadata and both objects.
    RequestResponse,
}

/// The point in a request's handling an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum Stage {
    /// As soon as the request is received (after authentication).
    RequestReceived,
    /// Headers sent, body not yet: long-running requests (watch, exec,
    /// logs, proxy) only.
    ResponseStarted,
    /// The response is complete.
    ResponseComplete,
    /// The handler panicked.
    Panic,
}

impl Stage {
    fn bit(self) -> u8 {
        match self {
            Stage::RequestReceived => 1,
            Stage::ResponseStarted => 2,
            Stage::ResponseComplete => 4,
            Stage::Panic => 8,
        }
    }
}

/// A set of stages (to omit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    pub fn of(stages: &[Stage]) -> Self {
        Stages(stages.iter().fold(0, |bits, s| bits | s.bit()))
    }

    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

/// What the policy says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Stages,
    /// Leave `metadata.managedFields` out of the recorded objects.
    pub omit_managed_fields: bool,
}

/// A checked policy.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

/// One rule, its omitted stages already joined with the policy's.
#[derive(Debug, Clone)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    #[expect(dead_code, reason = "accepted as upstream accepts it, never read")]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleFile {
    level: Option<Level>,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

/// Resources of one API group (`""` is the core group).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    /// `pods`, `pods/log`, `*/status`, `pods/*`, `*`; none: all of the
    /// group's.
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

impl Policy {
    /// Skiff's policy when `--audit-log-path` is given without
    /// `--audit-policy-file`: every request at Metadata, without the
    /// RequestReceived stage (one line per request). Upstream logs nothing
    /// without a policy; an audit log that stays empty helps no one.
    pub fn metadata_for_everything() -> Policy {
        Policy {
            rules: vec![Rule {
                level: Level::Metadata,
                users: vec![],
                user_groups: vec![],
                verbs: vec![],
                resources: vec![],
                namespaces: vec![],
                non_resource_urls: vec![],
                omit_stages: Stages::of(&[Stage::RequestReceived]),
                omit_managed_fields: None,
            }],
            omit_stages: Stages::of(&[Stage::RequestReceived]),
            omit_managed_fields: false,
        }
    }

    /// Reads and checks the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Policy::parse(&text).map_err(|(field, message)| Error::Invalid {
            path: path.to_path_buf(),
            field,
            message,
        })
    }

    /// A policy from YAML or JSON text; a refusal is (field, message).
    fn parse(text: &str) -> std::result::Result<Policy, (String, String)> {
        let document = |e: &dyn std::fmt::Display| ("document".to_string(), e.to_string());
        let value: serde_json::Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| document(&e))?
        } else {
            serde_saphyr::from_str(text).map_err(|e| document(&e))?
        };
        let file: PolicyFile = serde_path_to_error::deserialize(value).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." {
                "document".into()
            } else {
                field
            };
            (field, e.into_inner().to_string())
        })?;
        if file.kind != "Policy" {
            return Err((
                "kind".into(),
                format!("must be Policy, not {:?}", file.kind),
            ));
        }
        if file.api_version != "audit.k8s.io/v1" {
            return Err((
                "apiVersion".into(),
                format!("must be audit.k8s.io/v1, not {:?}", file.api_version),
            ));
        }
        if file.rules.is_empty() {
            // Upstream refuses a policy with no rules: it would log nothing.
            return Err(("rules".into(), "a policy needs at least one rule".into()));
        }
        let omit_stages = Stages::of(&file.omit_stages);
        let rules = file
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                check_rule(rule, omit_stages).map_err(|(f, m)| (format!("rules[{i}].{f}"), m))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Policy {
            rules,
            omit_stages,
            omit_managed_fields: file.omit_managed_fields,
        })
    }

    /// The level and omitted stages for a request, as upstream's
    /// `LevelAndStages`: the first matching rule's, else None.
    pub fn decide(&self, attrs: &Attributes<'_>) -> Decision {
        match self.rules.iter().find(|r| r.matches(attrs)) {
            Some(rule) => Decision {
                level: rule.level,
                omit_stages: rule.omit_stages,
                omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
            },
            None => Decision {
                level: Level::None,
                omit_stages: self.omit_stages,
                omit_managed_fields: self.omit_managed_fields,
            },
        }
    }
}

/// Upstream's `validatePolicyRule`; a refusal is (field under the rule,
/// message).
fn check_rule(rule: RuleFile, policy_omits: Stages) -> std::result::Result<Rule, (String, String)> {
    let level = rule
        .level
        .ok_or_else(|| ("level".to_string(), "Required value".to_string()))?;
    for (i, url) in rule.non_resource_urls.iter().enumerate() {
        if url == "*" {
            continue;
        }
        if !url.starts_with('/') {
            return Err((
                format!("nonResourceURLs[{i}]"),
                format!("{url:?}: non-resource URL rules must begin with a '/' character"),
            ));
        }
        if url[..url.len() - 1].contains('*') {
            return Err((
                format!("nonResourceURLs[{i}]"),
                format!("{url:?}: non-resource URL wildcards '*' must be the final character of the rule"),
            ));
        }
    }
    if !rule.non_resource_urls.is_empty()
        && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
    {
        return Err((
            "nonResourceURLs".into(),
            "rules cannot apply to both regular resources and non-resource URLs".into(),
        ));
    }
    for (i, gr) in rule.resources.iter().enumerate() {
        if !gr.group.is_empty() && !is_dns_subdomain(&gr.group) {
            return Err((
                format!("resources[{i}].group"),
                format!(
                    "{:?}: a group must be a lower case DNS subdomain (no version)",
                    gr.group
                ),
            ));
        }
        if !gr.resource_names.is_empty() && gr.resources.is_empty() {
            return Err((
                format!("resources[{i}].resourceNames"),
                "using resourceNames requires at least one resource".into(),
            ));
        }
    }
    Ok(Rule {
        level,
        users: rule.users,
        user_groups: rule.user_groups,
        verbs: rule.verbs,
        resources: rule.resources,
        namespaces: rule.namespaces,
        non_resource_urls: rule.non_resource_urls,
        omit_stages: Stages::of(&rule.omit_stages).union(policy_omits),
        omit_managed_fields: rule.omit_managed_fields,
    })
}

/// A DNS-1123 subdomain: lower case alphanumerics, `-` and `.`, at most
/// 253 characters, each label starting and ending alphanumeric.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|s| s == value)
}

impl Rule {
    /// Upstream's `ruleMatches`.
    fn matches(&self, attrs: &Attributes<'_>) -> bool {
        let user = attrs.user;
        if !self.users.is_empty() && !has(&self.users, &user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !user.groups.iter().any(|g| has(&self.user_groups, g)) {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, &attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return !attrs.resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(&attrs.path, spec));
        }
        true
    }

    /// Upstream's `ruleMatchesResource`: `res` matches the resource
    /// (`pods`), the resource and subresource (`pods/log`), any resource
    /// (`*`), a subresource of any resource (`*/status`), or the resource
    /// with any or no subresource (`pods/*`).
    fn matches_resource(&self, attrs: &Attributes<'_>) -> bool {
        if !attrs.resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, &attrs.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let (resource, sub) = (attrs.resource.as_str(), attrs.subresource.as_str());
        let combined = |res: &str| match res.split_once('/') {
            Some((r, s)) => !sub.is_empty() && r == resource && s == sub,
            None => sub.is_empty() && res == resource,
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == attrs.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty() && !has(&gr.resource_names, &attrs.name) {
                    return false;
                }
                gr.resources.iter().any(|res| {
                    res == "*"
                        || combined(res)
                        || res
                            .strip_prefix("*/")
                            .is_some_and(|s| !sub.is_empty() && s == sub)
                        || res.strip_suffix("/*").is_some_and(|r| r == resource)
                })
            })
    }
}

/// Upstream's `pathMatches`: `*`, the exact path, or a prefix ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

#[cfg(test)]
mod tests {
    use axum::http::Method;

    use super::*;
    use crate::authn::User;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:nodes"]
  verbs: ["get", "list", "watch"]
- level: None
  resources:
  - group: ""
    resources: ["events"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "pods/log", "*/exec"]
- level: RequestResponse
  resources:
  - group: apps
    resources: ["deployments/*"]
- level: Request
  namespaces: ["kube-system"]
  omitManagedFields: true
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["special"]
- level: Metadata
  users: ["alice"]
  nonResourceURLs: ["/healthz*", "/version"]
  omitStages: [ResponseComplete]
- level: RequestResponse
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: ""
"#;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn the_first_matching_rule_decides() {
        let policy = Policy::parse(POLICY).unwrap();
        let alice = user("alice", &["devs"]);
        let node = user("system:node:n1", &["system:nodes"]);
        // (user, method, path, expected level)
        let table: &[(&User, Method, &str, Level)] = &[
            (&node, Method::GET, "/api/v1/namespaces/a/pods", Level::None),
            (
                &node,
                Method::POST,
                "/api/v1/namespaces/a/pods",
                Level::RequestResponse,
            ),
            (
                &alice,
                Method::GET,
                "/api/v1/namespaces/a/events",
                Level::None,
            ),
            (
                &alice,
                Method::DELETE,
                "/api/v1/namespaces/a/secrets/s",
                Level::Metadata,
            ),
            (
                &alice,
                Method::GET,
                "/api/v1/namespaces/a/pods/p/log",
                Level::Metadata,
            ),
            (
                &alice,
                Method::POST,
                "/api/v1/namespaces/a/pods/p/exec",
                Level::Metadata,
            ),
            // `pods/log` names the subresource only: pods themselves fall through.
            (
                &alice,
                Method::PUT,
                "/api/v1/namespaces/a/pods/p",
                Level::RequestResponse,
            ),
            (
                &alice,
                Method::PUT,
                "/api/v1/namespaces/a/pods/p/status",
                Level::RequestResponse,
            ),
            // `deployments/*` is the resource with any or no subresource.
            (
                &alice,
                Method::GET,
                "/apis/apps/v1/namespaces/a/deployments",
                Level::RequestResponse,
            ),
            (
                &alice,
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                Level::RequestResponse,
            ),
            (
                &alice,
                Method::GET,
                "/apis/apps/v1/namespaces/a/replicasets",
                Level::None,
            ),
            (
                &alice,
                Method::GET,
                "/api/v1/namespaces/kube-system/configmaps",
                Level::Request,
            ),
            (
                &alice,
                Method::GET,
                "/api/v1/namespaces/a/configmaps/special",
                Level::Request,
            ),
            (
                &alice,
                Method::GET,
                "/api/v1/namespaces/a/configmaps/other",
                Level::None,
            ),
            (&alice, Method::GET, "/healthz/ready", Level::Metadata),
            (&alice, Method::GET, "/version", Level::Metadata),
            (&alice, Method::GET, "/versions", Level::None),
            (&user("bob", &[]), Method::GET, "/healthz", Level::None),
            // A non-resource request's verb is its method (`post`), and
            // rules with resources never match it.
            (&alice, Method::POST, "/api", Level::None),
        ];
        for (user, method, path, want) in table {
            let (path, query) = path
                .split_once('?')
                .map_or((*path, None), |(p, q)| (p, Some(q)));
            let attrs = Attributes::of_request(user, method, path, query);
            assert_eq!(
                policy.decide(&attrs).level,
                *want,
                "{} {method} {path}",
                user.name
            );
        }
    }

    #[test]
    fn omitted_stages_and_managed_fields_join_the_policys() {
        let policy = Policy::parse(POLICY).unwrap();
        let alice = user("alice", &[]);
        let health = policy.decide(&Attributes::of_request(
            &alice,
            &Method::GET,
            "/healthz",
            None,
        ));
        assert!(health.omit_stages.contains(Stage::RequestReceived));
        assert!(health.omit_stages.contains(Stage::ResponseComplete));
        assert!(!health.omit_stages.contains(Stage::Panic));
        assert!(!health.omit_managed_fields);
        let system = policy.decide(&Attributes::of_request(
            &alice,
            &Method::GET,
            "/api/v1/namespaces/kube-system/pods",
            None,
        ));
        assert!(system.omit_managed_fields);
        assert!(!system.omit_stages.contains(Stage::ResponseComplete));
    }

    #[test]
    fn path_wildcards_are_prefixes() {
        assert!(path_matches("/anything", "*"));
        assert!(path_matches("/healthz", "/healthz*"));
        assert!(path_matches("/healthz/etcd", "/healthz/*"));
        assert!(!path_matches("/healthz", "/healthz/*"));
        assert!(!path_matches("/version/x", "/version"));
    }

    #[test]
    fn json_policies_are_read_too() {
        let policy = Policy::parse(
            r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"RequestResponse"}]}"#,
        )
        .unwrap();
        let alice = user("alice", &[]);
        let d = policy.decide(&Attributes::of_request(&alice, &Method::GET, "/api", None));
        assert_eq!(d.level, Level::RequestResponse);
    }

    #[test]
    fn a_bad_policy_names_the_field() {
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        let cases: &[(&str, &str, &str)] = &[
            (
                "rules:\n- level: Metadta\n",
                "rules[0].level",
                "unknown variant",
            ),
            ("rules:\n- verbs: [get]\n", "rules[0].level", "Required"),
            (
                "rules:\n- level: None\n- level: None\n  verb: [get]\n",
                "rules[1].verb",
                "unknown field `verb`",
            ),
            (
                "rules:\n- level: None\n  nonResourceURLs: [healthz]\n",
                "rules[0].nonResourceURLs[0]",
                "must begin with a '/'",
            ),
            (
                "rules:\n- level: None\n  nonResourceURLs: [\"/a*b\"]\n",
                "rules[0].nonResourceURLs[0]",
                "final character",
            ),
            (
                "rules:\n- level: None\n  nonResourceURLs: [/x]\n  namespaces: [a]\n",
                "rules[0].nonResourceURLs",
                "both",
            ),
            (
                "rules:\n- level: None\n  resources: [{group: apps/v1}]\n",
                "rules[0].resources[0].group",
                "DNS subdomain",
            ),
            (
                "rules:\n- level: None\n  resources: [{resourceNames: [x]}]\n",
                "rules[0].resources[0].resourceNames",
                "requires at least one resource",
            ),
            (
                "rules:\n- level: None\n  omitStages: [Done]\n",
                "rules[0].omitStages[0]",
                "unknown variant",
            ),
            ("rules: []\n", "rules", "at least one rule"),
        ];
        for (body, field, message) in cases {
            let (f, m) = Policy::parse(&format!("{head}{body}")).unwrap_err();
            assert_eq!(
                (f.as_str(), m.contains(message)),
                (*field, true),
                "{body}: {f}: {m}"
            );
        }
        let (f, m) = Policy::parse("kind: Policy\nrules: [{level: None}]\n").unwrap_err();
        assert_eq!(f, "apiVersion", "{m}");
        let (f, _) = Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Pol\n").unwrap_err();
        assert_eq!(f, "kind");
        let (f, _) = Policy::parse("rules: [\n").unwrap_err();
        assert_eq!(f, "document");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.yaml");
        std::fs::write(&path, format!("{head}rules:\n- level: Everything\n")).unwrap();
        let text = Policy::load(&path).unwrap_err().to_string();
        assert!(
            text.contains(&path.display().to_string()) && text.contains("rules[0].level"),
            "{text}"
        );
    }
}
