//! What upstream's default bindings give every authenticated user, which
//! the bootstrap roles (`crate::rbac_defaults`) describe: `system:basic-user`
//! (create selfsubjectreviews, selfsubjectaccessreviews and
//! selfsubjectrulesreviews) and `system:discovery` (get the discovery,
//! OpenAPI, version and health paths). Nothing else: everything more is
//! [`super::MastersOnly`]'s (RBAC enforcement will replace both).

use axum::http::Method;

use super::{Attributes, Authorizer, Decision, Rules};
use crate::authn::User;

#[derive(Debug, Default)]
pub struct BasicUser;

/// (group, resource) a user may create about themselves.
const SELF_REVIEWS: &[(&str, &str)] = &[
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
];

/// `system:discovery`'s non-resource URLs (a trailing `*` is a prefix).
const DISCOVERY: &[&str] = &[
    "/livez",
    "/readyz",
    "/healthz",
    "/version",
    "/version/",
    "/openapi",
    "/openapi/*",
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
];

/// Whether `path` names a resource, as upstream's RequestInfo decides:
/// `/api/VERSION/...` or `/apis/GROUP/VERSION/...` with at least a resource.
pub fn is_resource_request(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.first() {
        Some(&"api") => segs.len() >= 3,
        Some(&"apis") => segs.len() >= 4,
        _ => false,
    }
}

/// Whether a non-resource rule's URL pattern covers `path`.
pub fn url_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

fn authenticated(user: &User) -> bool {
    user.name != "system:anonymous"
}

impl Authorizer for BasicUser {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if !authenticated(attrs.user) {
            return Decision::NoOpinion;
        }
        if *attrs.method == Method::POST {
            let segs: Vec<&str> = attrs.path.trim_matches('/').split('/').collect();
            if let ["apis", group, _version, resource] = segs.as_slice() {
                if SELF_REVIEWS.contains(&(*group, *resource)) {
                    return Decision::Allow;
                }
            }
        }
        if *attrs.method == Method::GET
            && !is_resource_request(attrs.path)
            && DISCOVERY.iter().any(|p| url_matches(p, attrs.path))
        {
            return Decision::Allow;
        }
        Decision::NoOpinion
    }

    fn rules(&self, user: &User, _namespace: &str) -> Rules {
        if !authenticated(user) {
            return Rules::default();
        }
        Rules::default()
            .resource(
                &["create"],
                &["authentication.k8s.io"],
                &["selfsubjectreviews"],
            )
            .resource(
                &["create"],
                &["authorization.k8s.io"],
                &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            )
            .non_resource(&["get"], DISCOVERY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_reviews_and_discovery_only() {
        let user = User {
            name: "viewer".into(),
            groups: vec![],
        };
        let ask = |method: Method, path: &str| {
            BasicUser.authorize(&Attributes {
                user: &user,
                method: &method,
                path,
                query: None,
            })
        };
        let post = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        assert_eq!(ask(Method::POST, post), Decision::Allow);
        assert_eq!(
            ask(
                Method::POST,
                "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews"
            ),
            Decision::Allow
        );
        assert_eq!(ask(Method::GET, "/apis/apps/v1"), Decision::Allow);
        assert_eq!(ask(Method::GET, "/api/v1"), Decision::Allow);
        assert_eq!(ask(Method::GET, "/api/v1/pods"), Decision::NoOpinion);
        assert_eq!(
            ask(Method::POST, "/apis/authentication.k8s.io/v1/tokenreviews"),
            Decision::NoOpinion
        );
        assert_eq!(ask(Method::DELETE, "/api"), Decision::NoOpinion);
    }
}
