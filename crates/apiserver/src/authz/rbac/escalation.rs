//! Escalation prevention's rule arithmetic (upstream's
//! `registry/rbac/validation`): whether the rules a user holds cover every
//! rule they ask to grant, each broken down to one verb on one group,
//! resource and name (or one URL); and what is missing, in upstream's
//! words (`user "jane" (groups=["system:authenticated"]) is attempting to
//! grant RBAC permissions not currently held:` then one compact rule a
//! line). Pure functions; the admission plugin
//! (`crate::admission::rbac_escalation`) decides when to ask.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::authn::User;

fn list(l: &Option<Vec<String>>) -> &[String] {
    l.as_deref().unwrap_or(&[])
}

fn one(v: &str) -> Option<Vec<String>> {
    Some(vec![v.to_string()])
}

/// Upstream's `BreakdownRule`: one rule per group × resource × verb
/// (× name), and per URL × verb.
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(base);
                } else {
                    out.extend(names.iter().map(|n| PolicyRule {
                        resource_names: one(n),
                        ..base.clone()
                    }));
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == v)
}

fn has_all(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(owner, w))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|w| {
        has(owner, w)
            || w.split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| {
        owner.iter().any(|o| {
            o == w
                || o.strip_suffix('*')
                    .is_some_and(|prefix| w.starts_with(prefix))
        })
    })
}

/// Upstream's `ruleCovers`.
fn covers(owner: &PolicyRule, wanted: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &wanted.verbs);
    let groups = has(list(&owner.api_groups), "*")
        || has_all(list(&owner.api_groups), list(&wanted.api_groups));
    let resources = resources_cover(list(&owner.resources), list(&wanted.resources));
    let urls = urls_cover(
        list(&owner.non_resource_urls),
        list(&wanted.non_resource_urls),
    );
    let owner_names = list(&owner.resource_names);
    let names = owner_names.is_empty()
        || (!list(&wanted.resource_names).is_empty()
            && has_all(owner_names, list(&wanted.resource_names)));
    verbs && groups && resources && names && urls
}

/// How many one-verb rules a rule breaks down to.
fn breakdown_len(rule: &PolicyRule) -> u128 {
    let n = |l: &Option<Vec<String>>| list(l).len() as u128;
    let verbs = rule.verbs.len() as u128;
    n(&rule.api_groups) * n(&rule.resources) * verbs * n(&rule.resource_names).max(1)
        + n(&rule.non_resource_urls) * verbs
}

/// Above this many one-verb rules a wanted rule is judged whole.
const BREAKDOWN_LIMIT: u128 = 100_000;

/// At most this many missing rules are named.
const MISSING_SHOWN: usize = 100;

/// The broken-down rules of `wanted` that no rule of `owner` covers (at
/// most [`MISSING_SHOWN`] of them). A rule whose breakdown would exceed
/// [`BREAKDOWN_LIMIT`] (a few kilobytes of lists multiply to billions) is
/// instead covered only by one owner rule covering it whole: never more
/// permissive than upstream, and bounded in time and memory.
pub fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for w in wanted {
        if breakdown_len(w) > BREAKDOWN_LIMIT {
            if !owner.iter().any(|o| covers(o, w)) {
                missing.push(w.clone());
            }
        } else {
            missing.extend(
                breakdown(w)
                    .into_iter()
                    .filter(|w| !owner.iter().any(|o| covers(o, w))),
            );
        }
        if missing.len() >= MISSING_SHOWN {
            missing.truncate(MISSING_SHOWN);
            break;
        }
    }
    missing
}

/// Every permission there is (an aggregationRule can gather anything).
pub fn full_authority() -> Vec<PolicyRule> {
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: one("*"),
            resources: one("*"),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: one("*"),
            ..PolicyRule::default()
        },
    ]
}

/// Go's `%q` of a string slice: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|s| serde_json::to_string(s).unwrap_or_default())
        .collect();
    format!("[{}]", items.join(" "))
}

/// Upstream's `CompactString`.
fn compact_string(r: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", list(&r.api_groups)),
        ("Resources", list(&r.resources)),
        ("NonResourceURLs", list(&r.non_resource_urls)),
        ("ResourceNames", list(&r.resource_names)),
        ("Verbs", &r.verbs[..]),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", go_quoted(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Upstream's `CompactRules`: rules of one group and one resource (with
/// the same names) merged, their verbs together.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for r in rules {
        let simple = list(&r.api_groups).len() == 1
            && list(&r.resources).len() == 1
            && list(&r.non_resource_urls).is_empty();
        let same = |o: &PolicyRule| {
            simple
                && o.api_groups == r.api_groups
                && o.resources == r.resources
                && o.resource_names == r.resource_names
                && o.non_resource_urls.as_deref().unwrap_or(&[]).is_empty()
        };
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => {
                for v in r.verbs {
                    if !o.verbs.contains(&v) {
                        o.verbs.push(v);
                    }
                }
            }
            None => out.push(r),
        }
    }
    out
}

/// Why `user` may not grant `missing` (non-empty), in upstream's words.
pub fn message(user: &User, missing: Vec<PolicyRule>, unresolved: bool) -> String {
    let lines: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    let mut msg = format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        go_quoted(&user.groups),
        lines.into_iter().collect::<Vec<_>>().join("\n")
    );
    if unresolved {
        msg.push_str("; resolution errors: [a role bound to the user was not found]");
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
        let v = |l: &[&str]| (!l.is_empty()).then(|| l.iter().map(|s| s.to_string()).collect());
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            api_groups: v(groups),
            resources: v(resources),
            resource_names: v(names),
            non_resource_urls: None,
        }
    }

    /// After upstream's `TestCoversExactMatch` and friends.
    #[test]
    fn covering_as_upstream() {
        let owner = [
            rule(&["get", "list"], &[""], &["pods"], &[]),
            rule(&["get"], &["apps"], &["deployments/scale"], &[]),
            rule(&["update"], &[""], &["*/status"], &[]),
            rule(&["get"], &[""], &["configmaps"], &["one"]),
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: Some(vec!["/healthz/*".into()]),
                ..PolicyRule::default()
            },
        ];
        assert!(uncovered(&owner, &[rule(&["get"], &[""], &["pods"], &[])]).is_empty());
        assert!(uncovered(&owner, &[rule(&["list", "get"], &[""], &["pods"], &["x"])]).is_empty());
        assert!(uncovered(
            &owner,
            &[rule(
                &["update"],
                &[""],
                &["pods/status", "nodes/status"],
                &[]
            )]
        )
        .is_empty());
        assert!(uncovered(&owner, &[rule(&["get"], &[""], &["configmaps"], &["one"])]).is_empty());
        let missing = uncovered(&owner, &[rule(&["get"], &[""], &["configmaps"], &[])]);
        assert_eq!(missing.len(), 1, "names narrow what may be granted");
        let missing = uncovered(
            &owner,
            &[rule(
                &["get", "delete", "watch"],
                &["", "apps"],
                &["pods"],
                &[],
            )],
        );
        assert_eq!(missing.len(), 5);
        let wanted_url = PolicyRule {
            verbs: vec!["get".into()],
            non_resource_urls: Some(vec!["/healthz/etcd".into(), "/metrics".into()]),
            ..PolicyRule::default()
        };
        assert_eq!(uncovered(&owner, &[wanted_url]).len(), 1);
        assert!(uncovered(&full_authority(), &[rule(&["*"], &["*"], &["*"], &[])]).is_empty());
        // `pods/*` is no wildcard: it covers only itself.
        let literal = [rule(&["get"], &[""], &["pods/*"], &[])];
        assert_eq!(
            uncovered(&literal, &[rule(&["get"], &[""], &["pods/exec"], &[])]).len(),
            1
        );
        // A rule of billions of combinations is judged whole, at once.
        let many: Vec<String> = (0..2000).map(|i| format!("r{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let huge = rule(&["get", "list"], &many, &many, &many);
        assert_eq!(
            uncovered(&full_authority(), std::slice::from_ref(&huge)).len(),
            0
        );
        assert_eq!(uncovered(&owner, std::slice::from_ref(&huge)).len(), 1);

        let user = User {
            name: "jane".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
        };
        assert_eq!(
            message(&user, missing, false),
            "user \"jane\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" \"watch\"]}\n\
             {APIGroups:[\"apps\"], Resources:[\"pods\"], Verbs:[\"get\" \"delete\" \"watch\"]}"
        );
    }
}
