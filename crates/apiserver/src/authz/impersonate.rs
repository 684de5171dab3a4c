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
use axum::http::HeaderMap;

use super::{Attributes, Authorizer};
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
        // Upstream's `SplitUsername`: exactly `NS:NAME`, both non-empty
        // and without further colons; anything else is a plain user.
        let sa = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty() && !sa.contains(':'));
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

/// The attributes of the `impersonate` check for one asked-for identity.
fn attributes<'a>(actor: &'a User, ask: &Ask) -> Attributes<'a> {
    let (resource, sub) = ask.resource.split_once('/').unwrap_or((&ask.resource, ""));
    Attributes::resource(actor, "impersonate", ask.group, resource)
        .in_namespace(ask.namespace.as_deref().unwrap_or(""))
        .named(&ask.name)
        .with_subresource(sub)
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
    for ask in &asks {
        let attrs = attributes(&actor, ask);
        if !super::allowed(authorizers, &attrs) {
            return Err(ApiError::forbidden(super::forbidden(&attrs)));
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
