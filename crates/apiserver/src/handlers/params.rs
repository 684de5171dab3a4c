//! Query parameters and `Accept` of resource requests, checked before a
//! handler runs, with upstream's answers: a number that does not parse is
//! a 400 in strconv's words, an unknown `includeObject` a 400,
//! `sendInitialEvents` without `resourceVersionMatch=NotOlderThan` (or on
//! a list) a 422 on ListOptions, and an `Accept` naming nothing we can
//! write a 406. It only refuses; it sets nothing.

use std::collections::HashMap;

use axum::http::{header, HeaderMap, StatusCode};

use crate::status::{ApiError, ApiResult, Cause};

/// What we can answer in, as upstream lists them in a 406.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

fn parse_int(name: &str, value: &str) -> ApiResult<()> {
    value.parse::<i64>().map(|_| ()).map_err(|e| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!(
            "unable to parse query parameter {name:?}: strconv.ParseInt: parsing {value:?}: {why}"
        ))
    })
}

fn forbidden(field: &str, message: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {message}"),
    }
}

/// Checks the query of a request to a resource.
pub fn check(q: &HashMap<String, String>, headers: &HeaderMap) -> ApiResult<()> {
    for name in ["limit", "timeoutSeconds", "gracePeriodSeconds"] {
        if let Some(v) = q.get(name) {
            parse_int(name, v)?;
        }
    }
    if let Some(rv) = q.get("resourceVersion").filter(|v| !v.is_empty()) {
        if rv.parse::<u64>().is_err() {
            return Err(ApiError::bad_request(format!(
                "invalid resource version {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
            )));
        }
    }
    if let Some(v) = q.get("includeObject") {
        if !matches!(v.as_str(), "" | "None" | "Metadata" | "Object") {
            return Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: {v:?}: supported values: \"None\", \"Metadata\", \"Object\""
            )));
        }
    }
    for name in ["watch", "allowWatchBookmarks", "sendInitialEvents"] {
        if let Some(v) = q.get(name) {
            if !matches!(
                v.as_str(),
                "" | "true" | "false" | "1" | "0" | "True" | "False"
            ) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse query parameter {name:?}: strconv.ParseBool: parsing {v:?}: invalid syntax"
                )));
            }
        }
    }
    if q.get("sendInitialEvents").is_some_and(|v| !v.is_empty()) {
        let mut causes = Vec::new();
        if q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
            causes.push(forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        let watch = q
            .get("watch")
            .is_some_and(|w| matches!(w.as_str(), "true" | "1" | "True"));
        if !watch {
            causes.push(forbidden(
                "sendInitialEvents",
                "sendInitialEvents is only supported by watch requests",
            ));
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", causes));
        }
    }
    check_accept(headers)
}

/// What the first clause of `Accept` that we can answer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// The object (or list) itself.
    Object,
    /// A meta.k8s.io Table of it.
    Table,
}

/// The first clause of `accept` we can answer, in the client's order
/// (kubectl: `application/json;as=Table;v=v1;g=meta.k8s.io,
/// application/json`): a media type we write, and, when it names a
/// conversion (`as=`), one we serve: Table and PartialObjectMetadata(List)
/// of meta.k8s.io v1 or v1beta1 (partial metadata is answered with the
/// whole object, as before). `None` if no clause qualifies (406). No
/// header, or an empty one, is the object.
pub fn negotiate(accept: Option<&str>) -> Option<Wanted> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(Wanted::Object);
    };
    accept.split(',').find_map(|part| {
        let mut fields = part.split(';').map(str::trim);
        let media = fields.next().unwrap_or("");
        if !matches!(
            media,
            "*/*"
                | "application/*"
                | "application/json"
                | "application/yaml"
                | "application/vnd.kubernetes.protobuf"
                | "application/json-patch+json"
                | "application/merge-patch+json"
        ) {
            return None;
        }
        let (mut conversion, mut group, mut version) = (None, None, None);
        for field in fields {
            match field.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("as", v)) => conversion = Some(v),
                Some(("g", v)) => group = Some(v),
                Some(("v", v)) => version = Some(v),
                _ => {}
            }
        }
        let served_meta =
            group == Some("meta.k8s.io") && matches!(version, Some("v1") | Some("v1beta1"));
        match conversion {
            None => Some(Wanted::Object),
            Some("Table") if served_meta => Some(Wanted::Table),
            Some("PartialObjectMetadata" | "PartialObjectMetadataList") if served_meta => {
                Some(Wanted::Object)
            }
            Some(_) => None,
        }
    })
}

/// 406 unless `Accept` has a clause we can answer (see [`negotiate`]):
/// JSON, YAML, protobuf or anything, and a Table only of a version we
/// serve.
fn check_accept(headers: &HeaderMap) -> ApiResult<()> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if negotiate(accept).is_some() {
        return Ok(());
    }
    let mut e = ApiError::bad_request(format!(
        "only the following media types are accepted: {ACCEPTED}"
    ));
    e.code = StatusCode::NOT_ACCEPTABLE;
    e.reason = "NotAcceptable";
    Err(e)
}

/// Does the client want Tables? Only when the first clause of `Accept`
/// we can answer asks for one (see `params::negotiate`).
pub fn wants_table(headers: &axum::http::HeaderMap) -> bool {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    negotiate(accept) == Some(Wanted::Table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn refuses_what_upstream_refuses() {
        let h = HeaderMap::new();
        assert!(check(&q(&[("limit", "10")]), &h).is_ok());
        let e = check(&q(&[("limit", "abc")]), &h).unwrap_err();
        assert_eq!(e.code, StatusCode::BAD_REQUEST);
        assert!(e
            .message
            .contains("strconv.ParseInt: parsing \"abc\": invalid syntax"));
        assert_eq!(check(&q(&[("limit", "1e10")]), &h).unwrap_err().code, 400);
        assert_eq!(
            check(&q(&[("timeoutSeconds", "abc")]), &h)
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            check(&q(&[("resourceVersion", "-1")]), &h)
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            check(&q(&[("includeObject", "Bogus")]), &h)
                .unwrap_err()
                .code,
            400
        );
        let e = check(&q(&[("watch", "true"), ("sendInitialEvents", "true")]), &h).unwrap_err();
        assert_eq!(e.code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            e.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        assert!(check(
            &q(&[
                ("watch", "1"),
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan")
            ]),
            &h
        )
        .is_ok());
        let mut junk = HeaderMap::new();
        junk.insert(header::ACCEPT, "application/junk".parse().unwrap());
        assert_eq!(
            check(&q(&[]), &junk).unwrap_err().code,
            StatusCode::NOT_ACCEPTABLE
        );
        let mut table = HeaderMap::new();
        table.insert(
            header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert!(check(&q(&[]), &table).is_ok());
    }

    #[test]
    fn a_table_of_a_version_not_served_is_not_acceptable() {
        let cases = [
            ("application/json;as=Table;v=v1;g=meta.k8s.io", Some(Wanted::Table)),
            ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", Some(Wanted::Table)),
            ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
            ("application/json;as=Table;v=v1;g=example.com", None),
            ("application/json;as=Table;g=meta.k8s.io", None),
            ("application/json;as=Bogus;v=v1;g=meta.k8s.io", None),
            (
                "application/json;as=Table;v=v2;g=meta.k8s.io,application/json",
                Some(Wanted::Object),
            ),
            (
                "application/json;as=Table;v=v2;g=meta.k8s.io, application/json;as=Table;v=v1;g=meta.k8s.io",
                Some(Wanted::Table),
            ),
            (
                "application/json, application/json;as=Table;v=v1;g=meta.k8s.io",
                Some(Wanted::Object),
            ),
            (
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
                Some(Wanted::Object),
            ),
            ("*/*", Some(Wanted::Object)),
            ("", Some(Wanted::Object)),
        ];
        for (accept, want) in cases {
            assert_eq!(negotiate(Some(accept)), want, "{accept}");
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, accept.parse().unwrap());
            let code = check(&q(&[]), &h).err().map(|e| e.code);
            assert_eq!(code.is_none(), want.is_some(), "{accept}");
        }
    }
}
