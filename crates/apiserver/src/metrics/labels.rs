//! The labels one request is counted under in `apiserver_request_total`
//! and `apiserver_request_duration_seconds`, as upstream's
//! `endpoints/metrics` computes them: the verb normalised (`LIST` for a
//! GET of a collection, `WATCH`, `APPLY` for an apply patch, `CONNECT`
//! for log/exec/attach/portforward/proxy), `dry_run`, group, version,
//! resource, subresource, scope (`resource`, `namespace`, `cluster`) and
//! component.
//!
//! Every value is a `&'static str` (the catalog's own names, or fixed
//! words), so a request's labels are built without allocating. A URL that
//! names no resource the catalog serves, and non-resource paths other than
//! the server's fixed ones, are not counted (as upstream counts only
//! requests its routes serve): the label sets stay bounded whatever
//! clients ask for. This module reads the request; it records nothing.

use axum::http::Method;
use prometheus_client::encoding::EncodeLabelSet;

use crate::catalog::Catalog;

/// The labels of `apiserver_request_duration_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    pub verb: &'static str,
    pub dry_run: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub scope: &'static str,
    pub component: &'static str,
}

/// `apiserver_request_total` adds the response's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct CodeLabel {
    pub code: u16,
}

/// Upstream's `APIServerComponent`.
pub const APISERVER: &str = "apiserver";

/// Subresources upstream reports as `CONNECT` (`validConnectRequests`).
const CONNECT: &[&str] = &["log", "exec", "portforward", "attach", "proxy"];

/// Namespace subresources (`/api/v1/namespaces/NAME/status`), not
/// namespaced resources of their own.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Non-resource paths counted (with the path as the subresource, as
/// upstream's instrumented handlers do), and their component: the
/// health and metrics endpoints report none.
const NON_RESOURCE: &[(&str, &str)] = &[
    ("/api", APISERVER),
    ("/apis", APISERVER),
    ("/version", APISERVER),
    ("/openapi/v2", APISERVER),
    ("/openapi/v3", APISERVER),
    ("/.well-known/openid-configuration", APISERVER),
    ("/openid/v1/jwks", APISERVER),
    ("/healthz", ""),
    ("/livez", ""),
    ("/readyz", ""),
    ("/metrics", ""),
];

/// Most path segments a resource URL has (`/apis/G/V/namespaces/NS/R/N/S`).
const MAX_SEGMENTS: usize = 8;

/// What the URL names, borrowed from it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Parsed<'a> {
    group: &'a str,
    version: &'a str,
    plural: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
    /// The legacy `/watch/` path prefix.
    legacy_watch: bool,
}

/// Splits a resource URL as upstream's `RequestInfoFactory` does; `None`
/// for anything else.
fn parse(path: &str) -> Option<Parsed<'_>> {
    let mut segs = [""; MAX_SEGMENTS];
    let mut n = 0;
    for seg in path.trim_matches('/').split('/') {
        *segs.get_mut(n)? = seg;
        n += 1;
    }
    let segs = &segs[..n];
    let (group, version, mut rest) = match segs {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let mut parsed = Parsed {
        group,
        version,
        ..Parsed::default()
    };
    if rest.first() == Some(&"watch") {
        parsed.legacy_watch = true;
        rest = &rest[1..];
    }
    if let ["namespaces", ns, tail @ ..] = rest {
        parsed.namespace = Some(*ns);
        if !tail.is_empty() && !NAMESPACE_SUBRESOURCES.contains(&tail[0]) {
            rest = tail;
        }
    }
    match rest {
        [plural, tail @ ..] if tail.len() <= 2 && !plural.is_empty() => {
            parsed.plural = *plural;
            parsed.name = tail.first().copied().filter(|n| !n.is_empty());
            parsed.subresource = tail.get(1).copied();
            Some(parsed)
        }
        _ => None,
    }
}

/// The first value of query parameter `key`, undecoded.
fn query_value<'q>(query: &'q str, key: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == key).then_some(v)
    })
}

/// Upstream's `cleanDryRun`: none, `All`, or `invalid`.
fn dry_run(query: &str) -> &'static str {
    if !query.contains("dryRun") {
        return "";
    }
    let mut values = query.split('&').filter_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == "dryRun").then_some(v)
    });
    match values.next() {
        None => "",
        Some("All") if values.all(|v| v == "All") => "All",
        Some(_) => "invalid",
    }
}

/// A list or watch narrowed to one object by `fieldSelector=metadata.name=X`
/// (upstream then reports it as of one resource).
fn names_one_object(query: &str) -> bool {
    query_value(query, "fieldSelector").is_some_and(|v| {
        let value = v
            .strip_prefix("metadata.name%3D")
            .or_else(|| v.strip_prefix("metadata.name="));
        value.is_some_and(|name| !name.is_empty() && !name.contains(',') && !name.contains("%2C"))
    })
}

/// The labels of a request, or `None` when it is not counted.
pub fn of_request(
    catalog: &Catalog,
    method: &Method,
    path: &str,
    query: Option<&str>,
    content_type: Option<&[u8]>,
) -> Option<RequestLabels> {
    let query = query.unwrap_or("");
    let Some(parsed) = parse(path) else {
        let &(path, component) = NON_RESOURCE.iter().find(|(p, _)| {
            *p == path
                .strip_suffix('/')
                .filter(|p| !p.is_empty())
                .unwrap_or(path)
        })?;
        return Some(RequestLabels {
            verb: method_verb(method, "")?,
            dry_run: "",
            group: "",
            version: "",
            resource: "",
            subresource: path,
            scope: "",
            component,
        });
    };
    let resource = catalog.find(parsed.group, parsed.version, parsed.plural)?;
    if parsed.namespace.is_some() && !resource.namespaced && resource.plural != "namespaces" {
        return None;
    }
    let subresource = match parsed.subresource {
        None => "",
        Some(sub) => resource.subresources.iter().find(|s| **s == sub).copied()?,
    };
    let named = parsed.name.is_some()
        || (*method == Method::GET && parsed.subresource.is_none() && names_one_object(query));
    let scope = if named || *method == Method::POST {
        "resource"
    } else if parsed.namespace.is_some() {
        "namespace"
    } else {
        "cluster"
    };
    let mut verb = method_verb(method, scope)?;
    let watch_asked =
        query_value(query, "watch").is_some_and(|v| !(v == "0" || v.eq_ignore_ascii_case("false")));
    if parsed.legacy_watch || (*method == Method::GET && watch_asked) {
        verb = "WATCH";
    }
    if *method == Method::PATCH
        && content_type.is_some_and(|c| c.starts_with(b"application/apply-patch"))
    {
        verb = "APPLY";
    }
    if CONNECT.contains(&subresource) {
        verb = "CONNECT";
    }
    Some(RequestLabels {
        verb,
        dry_run: dry_run(query),
        group: resource.group,
        version: resource.version,
        resource: resource.plural,
        subresource,
        scope,
        component: APISERVER,
    })
}

/// Upstream's `CanonicalVerb`: GET (and HEAD) of one object, LIST of a
/// collection; other methods as they are; `None` for methods the server
/// serves no route for.
fn method_verb(method: &Method, scope: &str) -> Option<&'static str> {
    Some(match *method {
        Method::GET | Method::HEAD if scope == "resource" || scope.is_empty() => "GET",
        Method::GET | Method::HEAD => "LIST",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: Method, url: &str, content_type: Option<&str>) -> Option<RequestLabels> {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        of_request(
            crate::resources::builtin(),
            &method,
            path,
            Some(query),
            content_type.map(str::as_bytes),
        )
    }

    /// (verb, group, version, resource, subresource, scope)
    fn short(
        l: RequestLabels,
    ) -> (
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
    ) {
        (
            l.verb,
            l.group,
            l.version,
            l.resource,
            l.subresource,
            l.scope,
        )
    }

    #[test]
    fn get_of_one_object_list_of_a_collection() {
        let l = labels(Method::GET, "/api/v1/namespaces/default/pods/web", None).unwrap();
        assert_eq!(short(l), ("GET", "", "v1", "pods", "", "resource"));
        assert_eq!((l.component, l.dry_run), ("apiserver", ""));
        let l = labels(Method::GET, "/api/v1/namespaces/default/pods", None).unwrap();
        assert_eq!(short(l), ("LIST", "", "v1", "pods", "", "namespace"));
        let l = labels(Method::GET, "/apis/apps/v1/deployments?limit=500", None).unwrap();
        assert_eq!(
            short(l),
            ("LIST", "apps", "v1", "deployments", "", "cluster")
        );
        // A list narrowed to one name is of one resource, as upstream's.
        let l = labels(
            Method::GET,
            "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dweb",
            None,
        )
        .unwrap();
        assert_eq!(short(l), ("GET", "", "v1", "pods", "", "resource"));
    }

    #[test]
    fn watch_from_the_query_or_the_legacy_prefix() {
        let l = labels(
            Method::GET,
            "/api/v1/pods?watch=true&resourceVersion=5",
            None,
        )
        .unwrap();
        assert_eq!(short(l), ("WATCH", "", "v1", "pods", "", "cluster"));
        let l = labels(Method::GET, "/api/v1/namespaces/a/pods?watch=1", None).unwrap();
        assert_eq!(short(l), ("WATCH", "", "v1", "pods", "", "namespace"));
        let l = labels(Method::GET, "/api/v1/pods?watch=false", None).unwrap();
        assert_eq!(l.verb, "LIST");
        let l = labels(Method::GET, "/api/v1/watch/namespaces/a/pods", None).unwrap();
        assert_eq!(short(l), ("WATCH", "", "v1", "pods", "", "namespace"));
    }

    #[test]
    fn writes_apply_and_connect() {
        let l = labels(Method::POST, "/api/v1/namespaces/a/pods", None).unwrap();
        assert_eq!(short(l), ("POST", "", "v1", "pods", "", "resource"));
        let l = labels(Method::PUT, "/api/v1/namespaces/a/pods/web/status", None).unwrap();
        assert_eq!(short(l), ("PUT", "", "v1", "pods", "status", "resource"));
        let l = labels(Method::DELETE, "/api/v1/namespaces/a/pods", None).unwrap();
        assert_eq!(short(l), ("DELETE", "", "v1", "pods", "", "namespace"));
        let patch = "application/strategic-merge-patch+json";
        let l = labels(
            Method::PATCH,
            "/apis/apps/v1/namespaces/a/deployments/d",
            Some(patch),
        );
        assert_eq!(l.unwrap().verb, "PATCH");
        let apply = "application/apply-patch+yaml";
        let l = labels(
            Method::PATCH,
            "/apis/apps/v1/namespaces/a/deployments/d",
            Some(apply),
        );
        assert_eq!(l.unwrap().verb, "APPLY");
        let l = labels(Method::GET, "/api/v1/namespaces/a/pods/web/log", None).unwrap();
        assert_eq!(short(l), ("CONNECT", "", "v1", "pods", "log", "resource"));
        let l = labels(
            Method::POST,
            "/api/v1/namespaces/a/pods/web/exec?command=ls",
            None,
        );
        assert_eq!(l.unwrap().verb, "CONNECT");
    }

    #[test]
    fn dry_run_is_all_or_invalid() {
        let l = labels(Method::POST, "/api/v1/namespaces/a/pods?dryRun=All", None).unwrap();
        assert_eq!(l.dry_run, "All");
        let l = labels(Method::POST, "/api/v1/namespaces/a/pods?dryRun=Some", None).unwrap();
        assert_eq!(l.dry_run, "invalid");
    }

    #[test]
    fn namespaces_and_their_subresources() {
        let l = labels(Method::GET, "/api/v1/namespaces/kube-system", None).unwrap();
        assert_eq!(short(l), ("GET", "", "v1", "namespaces", "", "resource"));
        let l = labels(Method::PUT, "/api/v1/namespaces/gone/finalize", None).unwrap();
        assert_eq!(
            short(l),
            ("PUT", "", "v1", "namespaces", "finalize", "resource")
        );
        let l = labels(Method::GET, "/api/v1/namespaces", None).unwrap();
        assert_eq!(short(l), ("LIST", "", "v1", "namespaces", "", "cluster"));
    }

    #[test]
    fn what_no_route_serves_is_not_counted() {
        assert_eq!(labels(Method::GET, "/api/v1/widgets", None), None);
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/a/pods/web/nosuch", None),
            None
        );
        assert_eq!(
            labels(Method::GET, "/api/v1/namespaces/a/nodes", None),
            None
        );
        assert_eq!(labels(Method::GET, "/random/path", None), None);
        assert_eq!(labels(Method::GET, "/a/b/c/d/e/f/g/h/i/j", None), None);
        assert_eq!(labels(Method::OPTIONS, "/api/v1/pods", None), None);
    }

    #[test]
    fn fixed_non_resource_paths_are_counted_by_path() {
        let l = labels(Method::GET, "/metrics", None).unwrap();
        assert_eq!(
            (l.verb, l.subresource, l.scope, l.component),
            ("GET", "/metrics", "", "")
        );
        let l = labels(Method::GET, "/apis/", None).unwrap();
        assert_eq!((l.subresource, l.component), ("/apis", "apiserver"));
    }
}
