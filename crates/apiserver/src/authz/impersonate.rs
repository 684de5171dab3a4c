//! Impersonation (`kubectl --as`, `--as-group`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-*`
//! headers, as upstream's `WithImpersonation` filter handles them. Each
//! asked-for identity must be allowed the verb `impersonate` on `users`,
//! `groups`, `serviceaccounts` (for `system:serviceaccount:NS:NAME`),
//! `uids` or `userextras/KEY`; then the request goes on as the
//! impersonated user, with `system:authenticated` added as upstream adds
//! it. Skiff's [`User`] carries no uid or extra: they are checked, then
//! dropped.

use axum::extract::Request;
use axum::http::{HeaderMap, Method};

use super::{Attributes, Authorizer, Decision};
use crate::authn::User;
use crate::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// One identity to check: (api group, resource, namespace, name).
struct Ask {
    group: &'static str,
    resource: String,
    namespace: Option<String>,
    name: String,
}

/// What the headers ask for: the user, the groups, and every identity to
/// check.
type Asked = (Option<String>, Vec<String>, Vec<Ask>);

fn asks(headers: &HeaderMap) -> Result<Asked, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect()
    };
    let user = values(USER).into_iter().next();
    let groups = values(GROUP);
    let mut out = Vec::new();
    let mut other = false;
    if let Some(name) = &user {
        let sa = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'));
        out.push(match sa {
            Some((ns, sa)) => Ask {
                group: "",
                resource: "serviceaccounts".into(),
                namespace: Some(ns.to_string()),
                name: sa.to_string(),
            },
            None => Ask {
                group: "",
                resource: "users".into(),
                namespace: None,
                name: name.clone(),
            },
        });
    }
    for g in &groups {
        other = true;
        out.push(Ask {
            group: "",
            resource: "groups".into(),
            namespace: None,
            name: g.clone(),
        });
    }
    for uid in values(UID) {
        other = true;
        out.push(Ask {
            group: "authentication.k8s.io",
            resource: "uids".into(),
            namespace: None,
            name: uid,
        });
    }
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA) {
            other = true;
            out.push(Ask {
                group: "authentication.k8s.io",
                resource: format!("userextras/{}", crate::request::percent_decode(key, false)),
                namespace: None,
                name: value.to_str().unwrap_or("").to_string(),
            });
        }
    }
    if user.is_none() && other {
        return Err(ApiError::internal(
            "requested impersonation of groups, uid or extra without impersonating a user",
        ));
    }
    Ok((user, groups, out))
}

/// The synthetic request path of an `impersonate` check.
fn path(ask: &Ask) -> String {
    let prefix = if ask.group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{}/v1", ask.group)
    };
    match &ask.namespace {
        Some(ns) => format!("{prefix}/namespaces/{ns}/{}/{}", ask.resource, ask.name),
        None => format!("{prefix}/{}/{}", ask.resource, ask.name),
    }
}

/// Whether the chain allows `user` the `verb` on `path` (first Allow or
/// Deny decides, as in [`super::authorize`]).
pub fn allowed(
    authorizers: &[Box<dyn Authorizer>],
    user: &User,
    method: &Method,
    path: &str,
) -> bool {
    let attrs = Attributes {
        user,
        method,
        path,
        query: None,
    };
    authorizers
        .iter()
        .map(|a| a.authorize(&attrs))
        .find(|d| *d != Decision::NoOpinion)
        == Some(Decision::Allow)
}

/// Request filter (see `crate::serve::filters`): replaces the
/// authenticated user with the impersonated one when the request asks for
/// it and the user may.
pub fn impersonate(
    authorizers: &[Box<dyn Authorizer>],
    mut req: Request,
) -> Result<Request, ApiError> {
    let wanted = req.headers().contains_key(USER)
        || req.headers().contains_key(GROUP)
        || req.headers().contains_key(UID)
        || req.headers().keys().any(|k| k.as_str().starts_with(EXTRA));
    if !wanted {
        return Ok(req);
    }
    let Some(actor) = req.extensions().get::<User>().cloned() else {
        return Ok(req);
    };
    let (user, groups, asks) = asks(req.headers())?;
    let method = Method::from_bytes(b"IMPERSONATE").unwrap_or(Method::POST);
    for ask in &asks {
        if !allowed(authorizers, &actor, &method, &path(ask)) {
            let scope = match &ask.namespace {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".to_string(),
            };
            let qualified = if ask.group.is_empty() {
                ask.resource.clone()
            } else {
                format!("{}.{}", ask.resource, ask.group)
            };
            return Err(ApiError::forbidden(format!(
                "{qualified} \"{}\" is forbidden: User \"{}\" cannot impersonate resource \"{}\" in API group \"{}\" {scope}",
                ask.name, actor.name, ask.resource, ask.group
            )));
        }
    }
    let Some(name) = user else {
        return Ok(req);
    };
    let mut groups = groups;
    if let Some(ns) = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, _)| ns.to_string())
    {
        if groups.is_empty() {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
    }
    if name != "system:anonymous"
        && !groups
            .iter()
            .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
    {
        groups.push("system:authenticated".into());
    }
    let headers = req.headers_mut();
    let extras: Vec<_> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(EXTRA))
        .cloned()
        .collect();
    for k in extras {
        headers.remove(k);
    }
    for h in [USER, GROUP, UID] {
        headers.remove(h);
    }
    req.extensions_mut().insert(User { name, groups });
    Ok(req)
}
