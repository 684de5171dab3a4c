//! Authorization: after authentication put a [`User`] on the request, an
//! [`Authorizer`] decides whether it may do what it asks. A denial is a 403
//! in upstream's words (`pods "web" is forbidden: User "u" cannot get
//! resource "pods" in API group "" in the namespace "default"`). Today's
//! policy is [`MastersOnly`] then [`BasicUser`] (what upstream's default
//! bindings give every authenticated user); RBAC and the Node authorizer
//! come later as more implementations, tried in order. Each can also list
//! a user's [`Rules`] (SelfSubjectRulesReview).

use axum::extract::Request;
use axum::http::Method;

use crate::authn::User;
use crate::status::ApiError;

mod basic;
pub mod impersonate;
mod masters;
mod rules;

pub use basic::{is_resource_request, url_matches, BasicUser};
pub use masters::MastersOnly;
pub use rules::Rules;

/// What a request asks to do.
#[derive(Debug)]
pub struct Attributes<'a> {
    pub user: &'a User,
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
}

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

/// Request filter (see `crate::serve::filters`): asks each authorizer in
/// turn; the first Allow or Deny decides, and no Allow is a 403. Public
/// paths pass.
pub fn authorize(
    authorizers: &[Box<dyn Authorizer>],
    catalog: &crate::catalog::Catalog,
    req: Request,
) -> Result<Request, ApiError> {
    let path = req.uri().path().to_string();
    if crate::authn::is_public(&path) {
        return Ok(req);
    }
    let Some(user) = req.extensions().get::<User>().cloned() else {
        return Err(ApiError::unauthorized());
    };
    let attrs = Attributes {
        user: &user,
        method: req.method(),
        path: &path,
        query: req.uri().query(),
    };
    let decision = authorizers
        .iter()
        .map(|a| a.authorize(&attrs))
        .find(|d| *d != Decision::NoOpinion)
        .unwrap_or(Decision::Deny);
    if decision == Decision::Allow {
        return Ok(req);
    }
    let message =
        crate::request::forbidden_message(catalog, &user.name, attrs.method, &path, attrs.query)
            .unwrap_or_else(|| {
                let verb = attrs.method.as_str().to_lowercase();
                format!(
                    "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                    user.name
                )
            });
    Err(ApiError::forbidden(message))
}
