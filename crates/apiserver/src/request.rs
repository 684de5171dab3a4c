//! What a request's URL names (upstream's RequestInfo): the resource, its
//! namespace, name and subresource, the verb, and the query pairs, with
//! percent-decoding. Authorization and the handlers both read it.

use crate::catalog::{Catalog, Resource};

/// A parsed resource URL.
#[derive(Debug)]
pub struct Target {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse_target(catalog: &Catalog, path: &str) -> Option<Target> {
    // Segments are percent-decoded, as Go's URL.Path is (`a%2Db` is `a-b`).
    let decoded: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|s| percent_decode(s, false))
        .collect();
    let segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let lookup = |plural: &str| catalog.find(group, version, plural);
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !(tail.is_empty() && matches!(*plural, "status" | "finalize")) =>
        {
            (Some(ns.to_string()), *plural, tail.first(), tail.get(1))
        }
        [plural, tail @ ..] => (None, *plural, tail.first(), tail.get(1)),
        [] => return None,
    };
    if rest.len() > 5 || (namespace.is_none() && rest.len() > 3) {
        return None;
    }
    let resource = lookup(plural)?;
    if namespace.is_some() && !resource.namespaced {
        return None;
    }
    if let Some(sub) = sub {
        if !resource.subresources.contains(sub) {
            return None;
        }
    }
    Some(Target {
        resource,
        namespace,
        name: name.map(|s| s.to_string()),
        subresource: sub.map(|s| s.to_string()),
    })
}

/// The query pairs as the handlers read them: decoded, the last value of
/// a repeated key winning. Authorization reads them through this too, so
/// both judge the same request.
pub fn query_map(q: Option<&str>) -> std::collections::HashMap<String, String> {
    q.map(|q| url_pairs(q).into_iter().collect())
        .unwrap_or_default()
}

/// Decodes `a=b&c=d` with percent-decoding.
pub fn url_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k, true), percent_decode(v, true))
        })
        .collect()
}

/// `%XX` decoded; `+` is a space in queries (`plus_is_space`), itself in paths.
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn is_true(v: Option<&String>) -> bool {
    v.is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let t = parse_target(
            crate::resources::builtin(),
            "/api/v1/namespaces/default/pods/web/status",
        )
        .unwrap();
        assert_eq!(
            (
                t.resource.plural,
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("pods", Some("default"), Some("web"), Some("status"))
        );
        let t = parse_target(
            crate::resources::builtin(),
            "/api/v1/namespaces/kube-system",
        )
        .unwrap();
        assert_eq!(
            (t.resource.plural, t.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let t = parse_target(crate::resources::builtin(), "/api/v1/namespaces/foo/status").unwrap();
        assert_eq!(
            (
                t.resource.plural,
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("namespaces", Some("foo"), Some("status"))
        );
        let t = parse_target(crate::resources::builtin(), "/apis/apps/v1/deployments").unwrap();
        assert_eq!((t.resource.kind, t.namespace), ("Deployment", None));
        assert!(parse_target(
            crate::resources::builtin(),
            "/api/v1/namespaces/default/nodes"
        )
        .is_none());
        assert!(parse_target(crate::resources::builtin(), "/api/v1/widgets").is_none());
    }

    #[test]
    fn decode_query() {
        assert_eq!(
            percent_decode("metadata.name%3Dweb", true),
            "metadata.name=web"
        );
        assert_eq!(percent_decode("a+b%2", true), "a b%2");
        assert_eq!(percent_decode("a+b%2Dc", false), "a+b-c");
    }
}
