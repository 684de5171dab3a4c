//! The csrapproving controller (upstream's `csrapproving`, ServiceAccount
//! `certificate-controller`): approves a kubelet's client certificate
//! request (`kubernetes.io/kube-apiserver-client-kubelet`, following that
//! signer's rules) when its requester may, as a SubjectAccessReview in
//! `certificates.k8s.io` says: `create certificatesigningrequests/selfnodeclient`
//! when the requester is the node it asks for (user `system:node:NAME`
//! asking for CN `system:node:NAME`), else `create
//! certificatesigningrequests/nodeclient` (a bootstrapper asking for a
//! node). The condition is `Approved`, reason `AutoApproved`, with
//! upstream's message.
//!
//! This module owns only approval; it never denies (a request it does not
//! recognize or may not approve is left for a person) and never signs.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use kube::runtime::controller::{Action, Controller};
use kube::Api;
use skiff_client::certificate::authority::Request;
use tokio_util::sync::CancellationToken;

use super::{has_condition, is_issued, kubelet_client, KUBE_APISERVER_CLIENT_KUBELET};
use crate::context::Context;
use crate::runner::{self, Failures};

/// The reason of the Approved condition.
pub const REASON: &str = "AutoApproved";

/// Errors of one reconcile (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The SubjectAccessReview could not be made.
    #[error("subject access review for csr {name}")]
    Review {
        /// Which request.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Writing the approval failed.
    #[error("error updating approval for csr {name}")]
    Write {
        /// Which request.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Recognized, but the requester may not have it approved (retried:
    /// a binding may come).
    #[error("recognized csr {name} as {tried:?} but subject access review was not approved")]
    NotAllowed {
        /// Which request.
        name: String,
        /// The subresources asked for.
        tried: Vec<&'static str>,
    },
}

/// One kind of request this controller recognizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recognizer {
    /// The subresource the SubjectAccessReview asks about.
    pub subresource: &'static str,
    /// The Approved condition's message.
    pub message: &'static str,
}

/// A node renewing its own client certificate.
pub const SELF_NODE_CLIENT: Recognizer = Recognizer {
    subresource: "selfnodeclient",
    message: "Auto approving self kubelet client certificate after SubjectAccessReview.",
};
/// A kubelet client certificate asked for by someone else (a
/// bootstrapper).
pub const NODE_CLIENT: Recognizer = Recognizer {
    subresource: "nodeclient",
    message: "Auto approving kubelet client certificate after SubjectAccessReview.",
};

/// Which recognizers `csr` (whose request is `req`) matches, in the
/// order they are tried (upstream's `recognizers`).
pub fn recognize(csr: &CertificateSigningRequest, req: &Request) -> Vec<Recognizer> {
    if csr.spec.signer_name != KUBE_APISERVER_CLIENT_KUBELET
        || kubelet_client(req, csr.spec.usages.as_deref().unwrap_or_default()).is_err()
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    if csr.spec.username.as_deref() == Some(req.common_name.as_str()) {
        out.push(SELF_NODE_CLIENT);
    }
    out.push(NODE_CLIENT);
    out
}

struct State {
    context: Context,
    failures: Failures,
}

/// Starts the approver in a controller manager.
pub(crate) fn start(
    context: Context,
    shutdown: CancellationToken,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let csrs = context.informers.get::<CertificateSigningRequest>();
        let controller = Controller::for_stream(csrs.objects(), csrs.store());
        let state = Arc::new(State {
            context,
            failures: Failures::default(),
        });
        runner::run(
            "csrapproving",
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

/// The SubjectAccessReview asking whether the requester of `csr` may
/// `create certificatesigningrequests/<subresource>`.
pub fn review(csr: &CertificateSigningRequest, subresource: &str) -> SubjectAccessReview {
    let extra: Option<BTreeMap<String, Vec<String>>> = csr.spec.extra.clone();
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: csr.spec.username.clone(),
            uid: csr.spec.uid.clone(),
            groups: csr.spec.groups.clone(),
            extra,
            resource_attributes: Some(ResourceAttributes {
                group: Some("certificates.k8s.io".into()),
                resource: Some("certificatesigningrequests".into()),
                verb: Some("create".into()),
                subresource: Some(subresource.into()),
                version: Some("*".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn reconcile(
    csr: Arc<CertificateSigningRequest>,
    state: Arc<State>,
) -> Result<Action, Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    if is_issued(&csr) || has_condition(&csr, "Approved") || has_condition(&csr, "Denied") {
        return Ok(Action::await_change());
    }
    // A request that does not parse is not a kubelet's; it is left alone.
    let Ok(request) = Request::from_pem(&csr.spec.request.0) else {
        return Ok(Action::await_change());
    };
    let mut tried = Vec::new();
    for recognizer in recognize(&csr, &request) {
        tried.push(recognizer.subresource);
        let reviews: Api<SubjectAccessReview> = Api::all(state.context.client.clone());
        let answer = reviews
            .create(
                &PostParams::default(),
                &review(&csr, recognizer.subresource),
            )
            .await
            .map_err(|source| Error::Review {
                name: name.clone(),
                source,
            })?;
        if !answer.status.is_some_and(|s| s.allowed) {
            continue;
        }
        let mut approved = (*csr).clone();
        let now = Time(state.context.config.wall_clock.now());
        approved
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(CertificateSigningRequestCondition {
                type_: "Approved".into(),
                status: "True".into(),
                reason: Some(REASON.into()),
                message: Some(recognizer.message.into()),
                last_update_time: Some(now.clone()),
                last_transition_time: Some(now),
            });
        let api: Api<CertificateSigningRequest> = Api::all(state.context.client.clone());
        match api
            .replace_subresource("approval", &name, &PostParams::default(), &approved)
            .await
        {
            Err(e) if skiff_client::is_conflict(&e) || skiff_client::is_not_found(&e) => {}
            Err(source) => return Err(Error::Write { name, source }),
            Ok(_) => {
                tracing::info!(csr = %name, as_ = recognizer.subresource, "certificate request approved")
            }
        }
        state.failures.forget(&name);
        return Ok(Action::await_change());
    }
    if tried.is_empty() {
        return Ok(Action::await_change());
    }
    Err(Error::NotAllowed { name, tried })
}

fn error_policy(csr: Arc<CertificateSigningRequest>, _: &Error, state: Arc<State>) -> Action {
    let key = csr.metadata.name.clone().unwrap_or_default();
    Action::requeue(state.failures.next_delay(&key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequestSpec;

    fn csr_from(user: &str, cn: &str, signer: &str) -> (CertificateSigningRequest, Request) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        let csr = CertificateSigningRequest {
            spec: CertificateSigningRequestSpec {
                request: k8s_openapi::ByteString(pem.clone().into_bytes()),
                signer_name: signer.into(),
                usages: Some(vec!["digital signature".into(), "client auth".into()]),
                username: Some(user.into()),
                groups: Some(vec!["system:nodes".into(), "system:authenticated".into()]),
                ..Default::default()
            },
            ..Default::default()
        };
        (csr, Request::from_pem(pem.as_bytes()).unwrap())
    }

    #[test]
    fn a_node_renewing_itself_is_self_node_client_first() {
        let (csr, req) = csr_from(
            "system:node:n1",
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET,
        );
        assert_eq!(recognize(&csr, &req), [SELF_NODE_CLIENT, NODE_CLIENT]);
        let sar = review(&csr, "selfnodeclient");
        let attrs = sar.spec.resource_attributes.unwrap();
        assert_eq!(attrs.subresource.as_deref(), Some("selfnodeclient"));
        assert_eq!(attrs.group.as_deref(), Some("certificates.k8s.io"));
        assert_eq!(sar.spec.user.as_deref(), Some("system:node:n1"));
    }

    #[test]
    fn another_requester_is_node_client_and_other_signers_are_not_looked_at() {
        let (csr, req) = csr_from(
            "system:bootstrap:abc",
            "system:node:n1",
            KUBE_APISERVER_CLIENT_KUBELET,
        );
        assert_eq!(recognize(&csr, &req), [NODE_CLIENT]);
        let (csr, req) = csr_from(
            "system:node:n1",
            "system:node:n1",
            super::super::KUBE_APISERVER_CLIENT,
        );
        assert!(recognize(&csr, &req).is_empty());
        let (csr, req) = csr_from("jane", "jane", KUBE_APISERVER_CLIENT_KUBELET);
        assert!(recognize(&csr, &req).is_empty());
    }
}
