//! What a request asks to do, in the terms every authorizer judges
//! (upstream's `authorizer.Attributes`): user, verb, and either the
//! resource coordinates (API group, version, namespace, resource,
//! subresource, name) or a non-resource path. [`Attributes::of_request`]
//! reads them from an HTTP request as upstream's `RequestInfoFactory`
//! does, from the path alone (no catalog: an unknown resource is still a
//! resource request); SubjectAccessReviews and the server's own checks
//! (impersonation, escalation) build them directly. [`forbidden`] words a
//! denial as upstream's filter does.

use axum::http::Method;

use crate::authn::User;
use crate::request::{is_true, percent_decode, query_map};

/// One request as an authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes<'a> {
    pub user: &'a User,
    /// Lower case: `get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`, `proxy`, or any other (`impersonate`,
    /// `bind`, `escalate`, `use`); for a non-resource request the HTTP
    /// method in lower case.
    pub verb: String,
    pub resource_request: bool,
    /// The request path (non-resource requests are judged by it).
    pub path: String,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

/// Subresources of a namespace (`/api/v1/namespaces/NAME/status`), which
/// are not namespaced resources of their own.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl<'a> Attributes<'a> {
    /// A resource request: `verb` on `resource` in `api_group`.
    pub fn resource(user: &'a User, verb: &str, api_group: &str, resource: &str) -> Self {
        Attributes {
            user,
            verb: verb.to_string(),
            resource_request: true,
            path: String::new(),
            namespace: String::new(),
            api_group: api_group.to_string(),
            api_version: String::new(),
            resource: resource.to_string(),
            subresource: String::new(),
            name: String::new(),
        }
    }

    /// A non-resource request: `verb` on `path`.
    pub fn non_resource(user: &'a User, verb: &str, path: &str) -> Self {
        Attributes {
            resource_request: false,
            path: path.to_string(),
            ..Attributes::resource(user, verb, "", "")
        }
    }

    pub fn in_namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_string();
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    pub fn with_subresource(mut self, subresource: &str) -> Self {
        self.subresource = subresource.to_string();
        self
    }

    /// The attributes of an HTTP request, as upstream's
    /// `RequestInfoFactory.NewRequestInfo` reads them: `/api/VERSION/...`
    /// and `/apis/GROUP/VERSION/...` with at least a resource are resource
    /// requests; `GET` without a name is `list` (`watch` with
    /// `watch=true`, and named by an exact `metadata.name` field
    /// selector), `DELETE` without one `deletecollection`; the legacy
    /// `/watch/` and `/proxy/` path prefixes are their verbs.
    pub fn of_request(user: &'a User, method: &Method, path: &str, query: Option<&str>) -> Self {
        // Segments are percent-decoded, as Go's URL.Path is and as the
        // handlers read them (`request::parse_target`): the authorizer
        // must judge the request the handlers will serve.
        let decoded = percent_decode(path, false);
        let non_resource =
            || Attributes::non_resource(user, &method.as_str().to_lowercase(), &decoded);
        let parts: Vec<&str> = decoded.trim_matches('/').split('/').collect();
        if parts.len() < 3 {
            return non_resource();
        }
        let (group, rest) = match parts[0] {
            "api" => ("", &parts[1..]),
            "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
            _ => return non_resource(),
        };
        let version = rest[0];
        let mut rest = &rest[1..];
        let mut attrs = Attributes::resource(user, "", group, "");
        attrs.path = decoded.clone();
        attrs.api_version = version.to_string();
        let special = matches!(rest.first(), Some(&"watch") | Some(&"proxy"));
        if special {
            attrs.verb = rest[0].to_string();
            if rest.len() < 2 {
                // Upstream refuses the request as malformed; nothing it
                // names can be granted.
                return attrs;
            }
            rest = &rest[1..];
        } else {
            attrs.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }
        if rest.first() == Some(&"namespaces") {
            if let Some(ns) = rest.get(1) {
                attrs.namespace = ns.to_string();
                // `namespaces/NS/status` and `.../finalize` are the
                // namespace's own subresources (as the handlers read them).
                let own = rest.len() == 3 && NAMESPACE_SUBRESOURCES.contains(&rest[2]);
                if rest.len() > 2 && !own {
                    rest = &rest[2..];
                }
            }
        }
        if rest.len() >= 3 && attrs.verb != "proxy" {
            attrs.subresource = rest[2].to_string();
        }
        if rest.len() >= 2 {
            attrs.name = rest[1].to_string();
        }
        if let Some(resource) = rest.first() {
            attrs.resource = resource.to_string();
        }
        if attrs.name.is_empty() && attrs.verb == "get" {
            // The query as the handlers read it (`request::query_map`).
            let q = query_map(query);
            attrs.verb = if is_true(q.get("watch")) {
                "watch"
            } else {
                "list"
            }
            .to_string();
            if let Some(name) = q.get("fieldSelector").and_then(|s| exact_name(s)) {
                attrs.name = name;
            }
        }
        if attrs.name.is_empty() && attrs.verb == "delete" {
            attrs.verb = "deletecollection".to_string();
        }
        attrs
    }

    /// `pods` or `pods/log`: what RBAC rules name.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The name an exact `metadata.name=X` (or `==`) term of a field selector
/// requires (parsed as the list handlers parse it), when it is a valid
/// path segment.
fn exact_name(selector: &str) -> Option<String> {
    let parsed = skiff_api::selectors::FieldSelector::parse(selector).ok()?;
    let name = parsed.exact_name()?;
    let valid = !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']);
    valid.then(|| name.to_string())
}

/// Upstream's Forbidden message for a denied request: `pods "web" is
/// forbidden: User "u" cannot get resource "pods" in API group "" in the
/// namespace "default"`, `forbidden: User "u" cannot get path "/logs"`.
pub fn forbidden(attrs: &Attributes<'_>) -> String {
    let user = &attrs.user.name;
    if !attrs.resource_request {
        return format!(
            "forbidden: User \"{user}\" cannot {} path \"{}\"",
            attrs.verb, attrs.path
        );
    }
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let subject = if attrs.name.is_empty() {
        qualified
    } else {
        format!("{qualified} \"{}\"", attrs.name)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", attrs.namespace)
    };
    format!(
        "{subject} is forbidden: User \"{user}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
        attrs.verb,
        attrs.combined_resource(),
        attrs.api_group
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> User {
        User {
            name: "jane".into(),
            groups: vec![],
        }
    }

    /// (method, path, query) → (verb, group, namespace, resource, sub,
    /// name), or `None` for a non-resource request.
    type Case<'a> = (Method, &'a str, Option<&'a str>, Option<[&'a str; 6]>);

    #[test]
    fn request_info_as_upstream() {
        let u = user();
        let cases: &[Case<'_>] = &[
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                None,
                Some(["list", "", "default", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("watch=true"),
                Some(["watch", "", "default", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods",
                Some("watch=false"),
                Some(["list", "", "default", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("fieldSelector=metadata.name%3Dweb"),
                Some(["list", "", "", "pods", "", "web"]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods/web",
                None,
                Some(["get", "", "default", "pods", "", "web"]),
            ),
            (
                Method::HEAD,
                "/api/v1/namespaces/default/pods/web",
                None,
                Some(["get", "", "default", "pods", "", "web"]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/default/pods/web/log",
                None,
                Some(["get", "", "default", "pods", "log", "web"]),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/default/pods/web/exec",
                None,
                Some(["create", "", "default", "pods", "exec", "web"]),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/ns/deployments",
                None,
                Some(["create", "apps", "ns", "deployments", "", ""]),
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/ns/deployments/d/scale",
                None,
                Some(["update", "apps", "ns", "deployments", "scale", "d"]),
            ),
            (
                Method::PATCH,
                "/api/v1/nodes/n1/status",
                None,
                Some(["patch", "", "", "nodes", "status", "n1"]),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/default/pods",
                None,
                Some(["deletecollection", "", "default", "pods", "", ""]),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/default/pods/web",
                None,
                Some(["delete", "", "default", "pods", "", "web"]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kube-system",
                None,
                Some(["get", "", "kube-system", "namespaces", "", "kube-system"]),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/finalize",
                None,
                Some(["update", "", "ns", "namespaces", "finalize", "ns"]),
            ),
            (
                Method::GET,
                "/api/v1/namespaces",
                None,
                Some(["list", "", "", "namespaces", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/default/pods",
                None,
                Some(["watch", "", "default", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/proxy/nodes/n1/stats/summary",
                None,
                Some(["proxy", "", "", "nodes", "", "n1"]),
            ),
            (
                Method::GET,
                "/apis/example.com/v1/widgets",
                None,
                Some(["list", "example.com", "", "widgets", "", ""]),
            ),
            // The authorizer reads what the handlers serve: decoded
            // segments, and the query's last value of a key.
            (
                Method::GET,
                "/%61pi/v1/namespaces/x/secrets",
                None,
                Some(["list", "", "x", "secrets", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/n%61mespaces/dev/secrets",
                None,
                Some(["list", "", "dev", "secrets", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("fieldSelector=metadata.name%3Dweb&fieldSelector="),
                Some(["list", "", "", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("fieldSelector=metadata.namespace!%3Dx%5C,metadata.name%3Dweb"),
                Some(["list", "", "", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("fieldSelector=metadata.name%3D..%2Fx"),
                Some(["list", "", "", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("watch=0&watch=1"),
                Some(["watch", "", "", "pods", "", ""]),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("watch=1&watch=0"),
                Some(["list", "", "", "pods", "", ""]),
            ),
            (Method::GET, "/api/v1", None, None),
            (Method::GET, "/apis/apps/v1", None, None),
            (Method::GET, "/apis/apps", None, None),
            (Method::GET, "/healthz", None, None),
            (Method::POST, "/logs/x", None, None),
        ];
        for (method, path, query, want) in cases {
            let a = Attributes::of_request(&u, method, path, *query);
            match want {
                Some([verb, group, ns, resource, sub, name]) => {
                    assert!(a.resource_request, "{path}");
                    assert_eq!(
                        [
                            &a.verb,
                            &a.api_group,
                            &a.namespace,
                            &a.resource,
                            &a.subresource,
                            &a.name
                        ],
                        [verb, group, ns, resource, sub, name],
                        "{method} {path} {query:?}"
                    );
                }
                None => {
                    assert!(!a.resource_request, "{path}");
                    assert_eq!(a.verb, method.as_str().to_lowercase());
                    assert_eq!(a.path, *path);
                }
            }
        }
    }

    #[test]
    fn forbidden_in_upstream_words() {
        let u = user();
        let a = Attributes::of_request(&u, &Method::GET, "/api/v1/namespaces/default/pods", None);
        assert_eq!(
            forbidden(&a),
            "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let a = Attributes::of_request(
            &u,
            &Method::GET,
            "/apis/apps/v1/namespaces/x/deployments/d/scale",
            None,
        );
        assert_eq!(
            forbidden(&a),
            "deployments.apps \"d\" is forbidden: User \"jane\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"x\""
        );
        let a = Attributes::of_request(&u, &Method::GET, "/api/v1/nodes", None);
        assert_eq!(
            forbidden(&a),
            "nodes is forbidden: User \"jane\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let a = Attributes::of_request(&u, &Method::GET, "/metrics", None);
        assert_eq!(
            forbidden(&a),
            "forbidden: User \"jane\" cannot get path \"/metrics\""
        );
    }
}
