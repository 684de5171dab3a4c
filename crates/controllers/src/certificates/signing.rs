//! The csrsigning controller (upstream's `csrsigning`, ServiceAccount
//! `certificate-controller`): signs each approved, not yet issued or
//! failed CertificateSigningRequest for `kubernetes.io/kube-apiserver-client`,
//! `kubernetes.io/kube-apiserver-client-kubelet` and
//! `kubernetes.io/kubelet-serving` with the cluster CA, for
//! `spec.expirationSeconds` (at least 10 minutes, at most
//! `--cluster-signing-duration`), writing the certificate into
//! `status.certificate`; a request that breaks its signer's rules (or
//! whose signature does not verify) gets the condition `Failed` with the
//! reason `SignerValidationFailure` instead.
//!
//! This module owns only that; approval is someone else's (`kubectl
//! certificate approve`, [`super::approving`]). Without a CA
//! ([`crate::Config::cluster_signing`]) it does not run.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::ByteString;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::Api;
use skiff_client::certificate::authority::{self, Authority, Policy, Request};
use tokio_util::sync::CancellationToken;

use super::{check, has_condition, is_issued};
use crate::context::Context;
use crate::runner::{self, Failures};

/// The shortest certificate signed (upstream: twice the backdate).
pub const MIN_DURATION: Duration = Duration::from_secs(600);
/// `--cluster-signing-duration`'s default: a year.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(8760 * 3600);
/// The reason of the Failed condition.
pub const FAILURE_REASON: &str = "SignerValidationFailure";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CA could not sign it (expired, say).
    #[error("error auto signing csr {name}")]
    Sign {
        /// Which request.
        name: String,
        /// Why.
        #[source]
        source: authority::Error,
    },
    /// Writing the status failed.
    #[error("writing the status of csr {name}")]
    Write {
        /// Which request.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

struct State {
    context: Context,
    authority: Arc<Authority>,
    max: Duration,
    failures: Failures,
}

/// The validity a request gets: its `expirationSeconds`, at least
/// [`MIN_DURATION`] and at most `max`; `max` when it asks for nothing
/// (upstream's `signer.duration`).
pub fn duration(expiration_seconds: Option<i32>, max: Duration) -> Duration {
    let Some(seconds) = expiration_seconds else {
        return max;
    };
    let requested = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    if requested > max {
        max
    } else if requested < MIN_DURATION {
        MIN_DURATION
    } else {
        requested
    }
}

/// Starts the signer in a controller manager (not without a CA).
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let Some(authority) = context.config.cluster_signing.clone() else {
            tracing::info!("no cluster signing CA: not signing certificate requests");
            return;
        };
        let csrs = context.informers.get::<CertificateSigningRequest>();
        let controller = Controller::for_stream(csrs.objects(), csrs.store());
        let state = Arc::new(State {
            max: context.config.cluster_signing_duration,
            context,
            authority,
            failures: Failures::default(),
        });
        runner::run(
            "csrsigning",
            &csrs,
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

/// What is to be done with a request.
#[derive(Debug)]
enum Verdict {
    /// Not this controller's (yet, or at all).
    Skip,
    /// Refused: the Failed condition's message.
    Fail(String),
    /// Sign it.
    Sign(Request),
}

fn judge(csr: &CertificateSigningRequest) -> Verdict {
    if !has_condition(csr, "Approved") || has_condition(csr, "Failed") || is_issued(csr) {
        return Verdict::Skip;
    }
    let usages = csr.spec.usages.clone().unwrap_or_default();
    let request = match Request::from_pem(&csr.spec.request.0) {
        Ok(r) => r,
        Err(e) => {
            // Upstream retries these forever; the request cannot change,
            // so it is marked failed once.
            return if super::SIGNERS.contains(&csr.spec.signer_name.as_str()) {
                Verdict::Fail(e.to_string())
            } else {
                Verdict::Skip
            };
        }
    };
    match check(&csr.spec.signer_name, &request, &usages) {
        None => Verdict::Skip,
        Some(Err(why)) => Verdict::Fail(why),
        Some(Ok(())) => Verdict::Sign(request),
    }
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    state: Arc<State>,
) -> Result<Action, Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let verdict = judge(&csr);
    let mut updated = (*csr).clone();
    let status = updated.status.get_or_insert_with(Default::default);
    match verdict {
        Verdict::Skip => return Ok(Action::await_change()),
        Verdict::Fail(message) => {
            tracing::info!(csr = %name, %message, "certificate request refused by its signer's rules");
            let now = Time(state.context.config.wall_clock.now());
            status.conditions.get_or_insert_with(Vec::new).push(
                CertificateSigningRequestCondition {
                    type_: "Failed".into(),
                    status: "True".into(),
                    reason: Some(FAILURE_REASON.into()),
                    message: Some(message),
                    last_update_time: Some(now.clone()),
                    last_transition_time: Some(now),
                },
            );
        }
        Verdict::Sign(request) => {
            let usages = csr.spec.usages.clone().unwrap_or_default();
            let now = state.context.config.wall_clock.now();
            let now = time::OffsetDateTime::from_unix_timestamp_nanos(now.as_nanosecond())
                .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
            let policy = Policy {
                ttl: duration(csr.spec.expiration_seconds, state.max),
                usages: &usages,
                backdate: authority::BACKDATE,
                short: authority::SHORT,
                now,
            };
            let pem = state
                .authority
                .sign(&request, &policy)
                .map_err(|source| Error::Sign {
                    name: name.clone(),
                    source,
                })?;
            status.certificate = Some(ByteString(pem.into_bytes()));
        }
    }
    let api: Api<CertificateSigningRequest> = Api::all(state.context.client.clone());
    match api
        .replace_status(&name, &PostParams::default(), &updated)
        .await
    {
        // A newer version is on its way here; it is looked at then.
        Err(e) if skiff_client::is_conflict(&e) || skiff_client::is_not_found(&e) => {}
        Err(source) => return Err(Error::Write { name, source }),
        Ok(_) => tracing::info!(csr = %name, "certificate request signed or failed"),
    }
    state.failures.forget(&name);
    Ok(Action::await_change())
}

fn error_policy(csr: Arc<CertificateSigningRequest>, _: &Error, state: Arc<State>) -> Action {
    let key = csr.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiration_seconds_are_honoured_within_bounds() {
        let year = DEFAULT_DURATION;
        assert_eq!(duration(None, year), year);
        assert_eq!(duration(Some(3600), year), Duration::from_secs(3600));
        assert_eq!(duration(Some(60), year), MIN_DURATION);
        assert_eq!(duration(Some(-5), year), MIN_DURATION);
        assert_eq!(duration(Some(i32::MAX), year), year);
        assert_eq!(
            duration(Some(7200), Duration::from_secs(3600)),
            Duration::from_secs(3600)
        );
    }
}
