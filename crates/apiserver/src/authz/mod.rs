//! Authorization: after authentication put a [`User`] on the request, the
//! chain of [`Authorizer`]s decides whether it may do what it asks, judged
//! as upstream's [`Attributes`] (user, verb, resource or path). The chain
//! is upstream's `Node,RBAC` with the privileged `system:masters` group
//! first: [`MastersOnly`] then [`Rbac`] (whose default bindings give every
//! authenticated user discovery and self-reviews). The first Allow or Deny
//! decides; no Allow is a 403 in upstream's words (`pods "web" is
//! forbidden: User "u" cannot get resource "pods" in API group "" in the
//! namespace "default"`). Each authorizer can also list a user's
//! [`Rules`] (SelfSubjectRulesReview).

use axum::extract::Request;

use crate::authn::User;
use crate::status::ApiError;

mod attributes;
pub mod impersonate;
mod masters;
pub mod node;
pub mod rbac;
mod rules;

pub use attributes::{forbidden, Attributes};
pub use masters::MastersOnly;
pub use node::NodeAuthorizer;
pub use rbac::Rbac;
pub use rules::Rules;

/// How the server's log begins the line for a `system:` user refused
/// (the e2e tests check no component of the cluster ever is).
pub const COMPONENT_REFUSED: &str = "system user refused";

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    /// Let the next authorizer decide (denied if none allows).
    NoOpinion,
}

/// One authorization policy.
pub trait Authorizer: Send + Sync + std::fmt::Debug {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision;
    /// What `user` may do in `namespace`, as a list (SelfSubjectRulesReview);
    /// by default the authorizer cannot say.
    fn rules(&self, _user: &User, _namespace: &str) -> Rules {
        Rules::unknown()
    }
}

/// The chain's decision: the first Allow or Deny, else Deny.
pub fn decide(authorizers: &[Box<dyn Authorizer>], attrs: &Attributes<'_>) -> Decision {
    authorizers
        .iter()
        .map(|a| a.authorize(attrs))
        .find(|d| *d != Decision::NoOpinion)
        .unwrap_or(Decision::Deny)
}

/// Whether the chain allows `attrs`.
pub fn allowed(authorizers: &[Box<dyn Authorizer>], attrs: &Attributes<'_>) -> bool {
    decide(authorizers, attrs) == Decision::Allow
}

/// Whether `user` is one of the cluster's own components: a `system:`
/// user, but of the ServiceAccounts only kube-system's (the controllers');
/// a workload's ServiceAccount refused what its Role does not grant is
/// RBAC working, not a gap in the bootstrap policy.
fn is_component(user: &str) -> bool {
    match user.strip_prefix("system:serviceaccount:") {
        Some(account) => account.starts_with("kube-system:"),
        None => user.starts_with("system:"),
    }
}

/// Request filter (see `crate::serve::filters`): asks the chain; no Allow
/// is a 403. Public paths pass.
pub fn authorize(authorizers: &[Box<dyn Authorizer>], req: Request) -> Result<Request, ApiError> {
    let path = req.uri().path().to_string();
    if crate::authn::is_public(&path) {
        return Ok(req);
    }
    let Some(user) = req.extensions().get::<User>().cloned() else {
        return Err(ApiError::unauthorized());
    };
    let attrs = Attributes::of_request(&user, req.method(), &path, req.uri().query());
    if allowed(authorizers, &attrs) {
        return Ok(req);
    }
    let message = forbidden(&attrs);
    // A component of the cluster refused is a gap in the bootstrap policy
    // (or a misbehaving node): worth a line in the server's log.
    if is_component(&user.name) {
        tracing::warn!(user = %user.name, "{COMPONENT_REFUSED}: {message}");
    }
    Err(ApiError::forbidden(message))
}

#[cfg(test)]
mod tests {
    #[test]
    fn components_are_system_users_and_kube_system_accounts() {
        for user in [
            "system:kube-scheduler",
            "system:node:n1",
            "system:serviceaccount:kube-system:deployment-controller",
        ] {
            assert!(super::is_component(user), "{user}");
        }
        for user in ["jane", "system:serviceaccount:apps:lister"] {
            assert!(!super::is_component(user), "{user}");
        }
    }
}
