//! The resource quota controller (kube-controller-manager's
//! resourcequota): keeps every ResourceQuota's status.hard equal to its
//! spec.hard and status.used equal to what the namespace's objects use
//! (skiff-api's `quota` evaluators), so deletions give usage back. One
//! ResourceQuota is reconciled at a time, from the manager's shared
//! informers only: on its own changes, on changes of what an object of
//! a kind it counts in its namespace charges ([`counted`]), and every
//! resync period. Usage it
//! cannot count (`count/` of kinds outside [`counted`]'s table, or whose
//! informer has not listed) is left as the ResourceQuota admission plugin
//! charged it. It writes only quota status.

mod counted;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use skiff_api::quota::{self, counted_kind, Amount, Usage};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::manager::Config;
use crate::runner::{self, Failures};
use counted::Counted;

/// How long a reconcile waits for a counted kind's first list before
/// leaving its usage as it was.
const LIST_WAIT: Duration = Duration::from_secs(10);

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("updating the status of quota {namespace}/{name}")]
    Status {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("quota {0} does not convert")]
    Convert(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The controller, on informers of its own (the manager's [`start`]
/// shares the manager's).
#[derive(Debug, Clone)]
pub struct ResourceQuotaController {
    resync: Duration,
}

impl Default for ResourceQuotaController {
    fn default() -> Self {
        Self::new()
    }
}

impl ResourceQuotaController {
    /// Full recompute every 30 s besides the watches.
    pub fn new() -> Self {
        ResourceQuotaController {
            resync: Duration::from_secs(30),
        }
    }

    /// Another full resync period (tests).
    pub fn with_resync(mut self, resync: Duration) -> Self {
        self.resync = resync;
        self
    }

    /// Runs until `shutdown`.
    pub async fn run(self, client: Client, shutdown: CancellationToken) -> Result<()> {
        let config = Config {
            resync: self.resync,
            ..Config::default()
        };
        let ctx = Context::new(client, Arc::new(config), shutdown.child_token());
        start(ctx, shutdown).await;
        Ok(())
    }
}

struct State {
    context: Context,
    counted: Counted,
    failures: Failures,
}

/// Starts the resource quota controller in a controller manager.
pub(crate) fn start(
    ctx: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let quotas = ctx.informers.get::<ResourceQuota>();
        let (triggers, triggered) = futures::channel::mpsc::unbounded::<ResourceQuota>();
        let controller = Controller::for_stream(quotas.objects(), quotas.store())
            // Changes of the counted kinds in a quota's namespace.
            .watches_stream(
                futures::StreamExt::map(triggered, Ok),
                |q: ResourceQuota| Some(ObjectRef::from_obj(&q)),
            );
        let state = Arc::new(State {
            counted: Counted::new(
                ctx.informers.clone(),
                quotas.store(),
                triggers,
                shutdown.clone(),
            ),
            context: ctx,
            failures: Failures::default(),
        });
        runner::run(
            "resourcequota",
            &quotas,
            controller,
            2,
            reconcile,
            error_policy,
            state,
            shutdown,
        )
        .await;
    })
}

fn key(q: &ResourceQuota) -> String {
    format!("{}/{}", q.namespace().unwrap_or_default(), q.name_any())
}

async fn reconcile(q: Arc<ResourceQuota>, state: Arc<State>) -> Result<Action> {
    let ns = q.namespace().unwrap_or_default();
    let name = q.name_any();
    let mut v = serde_json::to_value(&*q).map_err(|_| Error::Convert(name.clone()))?;
    let hard = v
        .pointer("/spec/hard")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    let names: Vec<String> = hard
        .as_object()
        .into_iter()
        .flat_map(|h| h.keys().cloned())
        .collect();
    // What each counted kind of the quota's namespace charges.
    let mut usage = Usage::new();
    let mut counted_kinds = std::collections::BTreeSet::new();
    let mut waiting = false;
    for (group, plural) in names.iter().filter_map(|n| counted_kind(n)) {
        if counted_kinds.contains(&(group.clone(), plural.clone())) {
            continue;
        }
        let Some(kind) = state.counted.get(&group, &plural) else {
            continue;
        };
        if tokio::time::timeout(LIST_WAIT, kind.ready()).await.is_err() {
            waiting = true;
            continue;
        }
        usage = quota::add(&usage, &kind.usage(&ns));
        counted_kinds.insert((group, plural));
    }
    let before = quota::parse_list(v.pointer("/status/used"));
    let used = used(&names, &usage, &before, |k| {
        counted_kind(k).is_some_and(|k| counted_kinds.contains(&k))
    });
    let status = serde_json::json!({"hard": hard, "used": quota::to_json(&used)});
    if v.get("status") != Some(&status) {
        v["status"] = status;
        let updated: ResourceQuota =
            serde_json::from_value(v).map_err(|_| Error::Convert(name.clone()))?;
        Api::<ResourceQuota>::namespaced(state.context.client.clone(), &ns)
            .replace_status(&name, &PostParams::default(), &updated)
            .await
            .map_err(|e| Error::Status {
                namespace: ns.clone(),
                name: name.clone(),
                source: Box::new(e),
            })?;
    }
    state.failures.forget(&key(&q));
    let resync = state.context.config.resync;
    Ok(Action::requeue(if waiting {
        resync.min(LIST_WAIT)
    } else {
        resync
    }))
}

/// status.used for the quota names `names`: what `usage` says for those
/// `counted` says were counted, `before` (the admission plugin's charge)
/// for the others, zero when neither has it.
fn used(
    names: &[String],
    usage: &Usage,
    before: &Usage,
    counted: impl Fn(&str) -> bool,
) -> BTreeMap<String, Amount> {
    names
        .iter()
        .map(|name| {
            let from = if counted(name) { usage } else { before };
            (
                name.clone(),
                from.get(name).copied().unwrap_or(Amount::ZERO),
            )
        })
        .collect()
}

fn error_policy(q: Arc<ResourceQuota>, _: &Error, state: Arc<State>) -> Action {
    Action::requeue(state.failures.next_delay(&key(&q)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncounted_names_keep_the_admission_charge() {
        let names = vec![
            "pods".to_string(),
            "count/widgets.example.com".to_string(),
            "secrets".to_string(),
        ];
        let usage = Usage::from([("pods".to_string(), Amount::count(2))]);
        let before = Usage::from([
            ("pods".to_string(), Amount::count(5)),
            ("count/widgets.example.com".to_string(), Amount::count(3)),
        ]);
        let used = used(&names, &usage, &before, |n| {
            n != "count/widgets.example.com"
        });
        assert_eq!(used["pods"], Amount::count(2));
        assert_eq!(used["count/widgets.example.com"], Amount::count(3));
        // Counted and absent: nothing of that kind.
        assert_eq!(used["secrets"], Amount::ZERO);
    }
}
