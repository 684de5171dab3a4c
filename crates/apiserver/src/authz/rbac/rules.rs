//! Whether one RBAC `PolicyRule` covers a request, as upstream's
//! `rbac/v1` helpers decide (`RuleAllows`): `*` matches any verb, group,
//! resource or URL; `pods/log` names a subresource and `*/scale` that
//! subresource of any resource; `resourceNames` narrows to those names
//! (and so never matches a request without a name); a non-resource URL
//! ending in `*` is a prefix. Pure functions, no I/O.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::authz::Attributes;

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

fn opt(list: &Option<Vec<String>>) -> &[String] {
    list.as_deref().unwrap_or(&[])
}

pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    has(&rule.verbs, verb)
}

pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    has(opt(&rule.api_groups), group)
}

/// Whether the rule names `resource` (with `subresource`, as
/// `resource/subresource`), any resource (`*`) or that subresource of any
/// (`*/subresource`). Compared in place: a decision allocates nothing.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    opt(&rule.resources).iter().any(|r| {
        if r == "*" {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        let (named, sub) = r.split_once('/').unwrap_or((r, ""));
        sub == subresource && (named == resource || named == "*")
    })
}

pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = opt(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    opt(&rule.non_resource_urls).iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Whether `rule` allows `attrs`.
pub fn rule_allows(attrs: &Attributes<'_>, rule: &PolicyRule) -> bool {
    if !verb_matches(rule, &attrs.verb) {
        return false;
    }
    if attrs.resource_request {
        api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &attrs.resource, &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        non_resource_url_matches(rule, &attrs.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::User;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: if names.is_empty() { None } else { v(names) },
            non_resource_urls: None,
        }
    }

    fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            non_resource_urls: Some(urls.iter().map(|s| s.to_string()).collect()),
            ..PolicyRule::default()
        }
    }

    /// Cases after upstream's `rbac/v1` and `rbac` authorizer tests.
    #[test]
    fn rules_match_as_upstream() {
        let u = User {
            name: "jane".into(),
            groups: vec![],
        };
        let pods = |verb: &str| Attributes::resource(&u, verb, "", "pods").in_namespace("ns");
        let cases: Vec<(PolicyRule, Attributes<'_>, bool)> = vec![
            (rule(&["get"], &[""], &["pods"], &[]), pods("get"), true),
            (rule(&["get"], &[""], &["pods"], &[]), pods("list"), false),
            (rule(&["*"], &[""], &["pods"], &[]), pods("delete"), true),
            (rule(&["get"], &["*"], &["pods"], &[]), pods("get"), true),
            (
                rule(&["get"], &["apps"], &["pods"], &[]),
                pods("get"),
                false,
            ),
            (rule(&["get"], &[""], &["*"], &[]), pods("get"), true),
            // a subresource is named on its own, or as `*/sub`
            (
                rule(&["get"], &[""], &["pods"], &[]),
                pods("get").with_subresource("log"),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/log"], &[]),
                pods("get").with_subresource("log"),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods/log"], &[]),
                pods("get"),
                false,
            ),
            (
                rule(&["get"], &[""], &["*/log"], &[]),
                pods("get").with_subresource("log"),
                true,
            ),
            (rule(&["get"], &[""], &["*/log"], &[]), pods("get"), false),
            (
                rule(&["get"], &[""], &["*"], &[]),
                pods("get").with_subresource("exec"),
                true,
            ),
            // resourceNames
            (
                rule(&["get"], &[""], &["pods"], &["web"]),
                pods("get").named("web"),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods"], &["web"]),
                pods("get").named("db"),
                false,
            ),
            (
                rule(&["list"], &[""], &["pods"], &["web"]),
                pods("list"),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods"], &[]),
                pods("get").named("any"),
                true,
            ),
            // resource rules never grant paths, nor URL rules resources
            (
                rule(&["get"], &["*"], &["*"], &[]),
                Attributes::non_resource(&u, "get", "/healthz"),
                false,
            ),
            (
                url_rule(&["get"], &["/healthz"]),
                Attributes::non_resource(&u, "get", "/healthz"),
                true,
            ),
            (
                url_rule(&["get"], &["/healthz"]),
                Attributes::non_resource(&u, "post", "/healthz"),
                false,
            ),
            (
                url_rule(&["get"], &["/healthz"]),
                Attributes::non_resource(&u, "get", "/healthz/etcd"),
                false,
            ),
            (
                url_rule(&["get"], &["/healthz*"]),
                Attributes::non_resource(&u, "get", "/healthz/etcd"),
                true,
            ),
            (
                url_rule(&["get"], &["/apis/*"]),
                Attributes::non_resource(&u, "get", "/apis/apps"),
                true,
            ),
            (
                url_rule(&["*"], &["*"]),
                Attributes::non_resource(&u, "put", "/anything"),
                true,
            ),
            (url_rule(&["get"], &["*"]), pods("get"), false),
        ];
        for (i, (rule, attrs, want)) in cases.iter().enumerate() {
            assert_eq!(
                rule_allows(attrs, rule),
                *want,
                "case {i}: {rule:?} {attrs:?}"
            );
        }
    }
}
