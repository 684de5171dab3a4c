//! The ClusterRole aggregation controller (kube-controller-manager's
//! `clusterrole-aggregation`): a ClusterRole with an `aggregationRule`
//! gets as its `rules` the rules of every other ClusterRole its selectors
//! match, in name order, each rule once.
//!
//! This module owns the `rules` of aggregated ClusterRoles and nothing
//! else. It watches all ClusterRoles (kube-runtime's watcher) and, once
//! the first list is complete and after every change, replaces the rules
//! of each aggregated role whose computed rules differ (a merge patch of
//! the whole list). A failed write is retried after [`RETRY`].

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

/// How long a failed write waits before the roles are reconciled again.
const RETRY: Duration = Duration::from_secs(5);
/// The field manager of the controller's writes, as upstream's.
const MANAGER: &str = "clusterrole-aggregation-controller";

/// Whether `labels` satisfy `selector` (matchLabels and matchExpressions).
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .as_ref()
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let exprs_ok = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or(&[]);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// The rules `role` aggregates from `roles`; `None` if it has no
/// aggregation rule.
pub fn aggregated_rules(role: &ClusterRole, roles: &[&ClusterRole]) -> Option<Vec<PolicyRule>> {
    let selectors = role
        .aggregation_rule
        .as_ref()?
        .cluster_role_selectors
        .as_deref()
        .unwrap_or(&[]);
    let mut sorted: Vec<&ClusterRole> = roles.to_vec();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    let empty = BTreeMap::new();
    for selector in selectors {
        for other in &sorted {
            if other.metadata.name == role.metadata.name {
                continue;
            }
            if !selects(selector, other.metadata.labels.as_ref().unwrap_or(&empty)) {
                continue;
            }
            for rule in &other.rules.as_deref().unwrap_or(&[]).to_vec() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// The aggregation controller.
#[derive(Debug, Default, Clone)]
pub struct ClusterRoleAggregation;

impl ClusterRoleAggregation {
    pub fn new() -> Self {
        Self
    }

    /// Runs until `shutdown`; API errors are logged and retried.
    pub async fn run(self, client: Client, shutdown: CancellationToken) {
        let api: Api<ClusterRole> = Api::all(client);
        let mut roles: HashMap<String, ClusterRole> = HashMap::new();
        let mut listing: HashMap<String, ClusterRole> = HashMap::new();
        let mut synced = false;
        let mut retry_at: Option<tokio::time::Instant> = None;
        let mut stream =
            std::pin::pin!(watcher(api.clone(), watcher::Config::default()).default_backoff());
        loop {
            let retry = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = retry => {}
                event = stream.next() => match event {
                    None => return,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "watching ClusterRoles");
                        continue;
                    }
                    Some(Ok(watcher::Event::Init)) => listing.clear(),
                    Some(Ok(watcher::Event::InitApply(r))) => {
                        listing.insert(r.metadata.name.clone().unwrap_or_default(), r);
                        continue;
                    }
                    Some(Ok(watcher::Event::InitDone)) => {
                        roles = std::mem::take(&mut listing);
                        synced = true;
                    }
                    Some(Ok(watcher::Event::Apply(r))) => {
                        roles.insert(r.metadata.name.clone().unwrap_or_default(), r);
                    }
                    Some(Ok(watcher::Event::Delete(r))) => {
                        roles.remove(r.metadata.name.as_deref().unwrap_or_default());
                    }
                },
            }
            if !synced {
                continue;
            }
            retry_at = None;
            if !reconcile(&api, &roles).await {
                retry_at = Some(tokio::time::Instant::now() + RETRY);
            }
        }
    }
}

/// Writes the rules of every aggregated role that differ; false if a
/// write failed.
async fn reconcile(api: &Api<ClusterRole>, roles: &HashMap<String, ClusterRole>) -> bool {
    let all: Vec<&ClusterRole> = roles.values().collect();
    let mut ok = true;
    for role in &all {
        let Some(rules) = aggregated_rules(role, &all) else {
            continue;
        };
        if rules.as_slice() == role.rules.as_deref().unwrap_or(&[]) {
            continue;
        }
        let name = role.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({"rules": rules});
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        match api.patch(&name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => tracing::debug!(role = %name, "aggregated ClusterRole rules"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(role = %name, error = %e, "updating aggregated ClusterRole");
                ok = false;
            }
        }
    }
    ok
}

/// Starts the aggregation controller in a controller manager.
pub(crate) fn start(
    ctx: crate::context::Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(ClusterRoleAggregation::new().run(ctx.client, shutdown))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn role(name: &str, labels: &[(&str, &str)], verbs: &[&str]) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            rules: Some(
                verbs
                    .iter()
                    .map(|v| PolicyRule {
                        verbs: vec![v.to_string()],
                        api_groups: Some(vec![String::new()]),
                        resources: Some(vec!["pods".into()]),
                        ..PolicyRule::default()
                    })
                    .collect(),
            ),
            aggregation_rule: None,
        }
    }

    #[test]
    fn rules_of_selected_roles_in_name_order_once() {
        let mut agg = role("agg", &[("team", "blue")], &[]);
        agg.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some([("team".to_string(), "blue".to_string())].into()),
                ..LabelSelector::default()
            }]),
        });
        let b = role("b", &[("team", "blue")], &["list", "get"]);
        let a = role("a", &[("team", "blue")], &["get"]);
        let other = role("c", &[("team", "red")], &["delete"]);
        let all = [&agg, &b, &a, &other];
        let verbs: Vec<String> = aggregated_rules(&agg, &all)
            .unwrap()
            .into_iter()
            .map(|r| r.verbs.join(","))
            .collect();
        assert_eq!(verbs, ["get", "list"]);
        assert!(aggregated_rules(&a, &all).is_none());
    }
}
