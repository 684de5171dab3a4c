//! `/openapi/v2`: the whole API as one Swagger 2.0 document, as
//! kube-apiserver 1.33 serves it (kube-openapi's `handler.go`), in JSON
//! and in gnostic's protobuf encoding, which kubectl 1.27–1.29 request
//! (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`)
//! before they validate, apply or explain.
//!
//! The document is made ([`convert`]) from the per group-version OpenAPI
//! v3 documents `crate::openapi` serves, so every kind served there
//! (custom resources included) is here too. It is built once for each set
//! of v3 documents (`crate::openapi::documents_generation`) and kept
//! in memory with its protobuf form ([`proto`]) and both gzipped.
//!
//! As upstream: the first `Accept` clause (by q, then specificity) that
//! names JSON or one of the two protobuf media types wins, else 406; the
//! `ETag` is the quoted upper-case hex SHA-512 of the JSON (the protobuf
//! shares it; `Vary: Accept`); `If-None-Match` answers 304 and
//! `If-Modified-Since` is honoured as Go's `http.ServeContent` does; a
//! body of 1400 bytes or more is gzipped when the client accepts gzip
//! (`Vary: Accept-Encoding`), as the gzip handler upstream wraps it in.
//! Range requests are answered whole.

mod convert;
mod proto;

use crate::openapi::Source;
use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// The media type of the protobuf form, as upstream answers it.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The subtypes upstream accepts: JSON, the (deprecated) form kubectl
/// sends, and the current protobuf one.
const SUBTYPE_JSON: &str = "json";
const SUBTYPE_PROTOBUF_DEPRECATED: &str = "com.github.proto-openapi.spec.v2@v1.0+protobuf";
const SUBTYPE_PROTOBUF: &str = "com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Upstream's gzip handler leaves smaller bodies alone.
const GZIP_MIN_SIZE: usize = 1400;

/// One encoding of the document, plain and gzipped.
struct Encoded {
    plain: bytes::Bytes,
    gzipped: bytes::Bytes,
}

impl Encoded {
    fn new(plain: Vec<u8>) -> Encoded {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let gzipped = gz
            .write_all(&plain)
            .and_then(|()| gz.finish())
            .unwrap_or_default();
        Encoded {
            plain: plain.into(),
            gzipped: gzipped.into(),
        }
    }
}

/// The document built for one set of v3 documents.
struct Built {
    /// `crate::openapi::documents_generation` when it was built.
    generation: u64,
    json: Encoded,
    protobuf: Encoded,
    etag: String,
    last_modified: DateTime<Utc>,
}

/// Per server (its custom resource registry's id).
static CURRENT: std::sync::LazyLock<Mutex<std::collections::HashMap<u64, Arc<Built>>>> =
    std::sync::LazyLock::new(Default::default);

fn build(src: Source<'_>, generation: u64) -> Built {
    let mut docs = Vec::new();
    crate::openapi::each_document(src, |_, bytes, _| {
        if let Ok(doc) = serde_json::from_slice::<Value>(bytes) {
            docs.push(doc);
        }
    });
    let doc = convert::swagger(&docs);
    let json = serde_json::to_vec(&doc).unwrap_or_default();
    let protobuf = proto::encode(&doc).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA512, &json);
    let etag = digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<String>();
    Built {
        generation,
        json: Encoded::new(json),
        protobuf: Encoded::new(protobuf),
        etag: format!("\"{etag}\""),
        // HTTP dates have whole seconds.
        last_modified: DateTime::from_timestamp(Utc::now().timestamp(), 0).unwrap_or_default(),
    }
}

/// The document for the v3 documents served now, built if they changed.
fn current(src: Source<'_>) -> Arc<Built> {
    // Read before the documents, so a change while building rebuilds.
    let generation = crate::openapi::documents_generation(src);
    let mut guard = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(built) = guard
        .get(&src.crds.id())
        .filter(|b| b.generation == generation)
    {
        return built.clone();
    }
    let started = std::time::Instant::now();
    let built = Arc::new(build(src, generation));
    tracing::debug!(
        json_bytes = built.json.plain.len(),
        protobuf_bytes = built.protobuf.plain.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "OpenAPI v2 document built"
    );
    guard.insert(src.crds.id(), built.clone());
    built
}

/// The Swagger 2.0 document served now, as JSON (for tests and tools).
pub fn document(src: Source<'_>) -> Value {
    serde_json::from_slice(&current(src).json.plain).unwrap_or(Value::Null)
}

/// One clause of an `Accept` header (goautoneg's `ParseAccept`).
struct Clause<'a> {
    ty: &'a str,
    subtype: &'a str,
    q: f64,
}

/// The clauses of `accept`, best first: by q, then exact types before
/// wildcards.
fn parse_accept(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause> = accept
        .split(',')
        .filter_map(|part| {
            let mut params = part.split(';');
            let range = params.next()?;
            let mut sp = range.split('/');
            let ty = sp.next()?.trim();
            let subtype = match (sp.next(), sp.next()) {
                (None, None) if ty == "*" => "*",
                (Some(s), None) => s.trim(),
                _ => return None,
            };
            let mut q = 1.0;
            for p in params {
                if let Some((k, v)) = p.split_once('=') {
                    if k.trim() == "q" {
                        // NaN and infinities would break the ordering.
                        q = v
                            .trim()
                            .parse()
                            .ok()
                            .filter(|q: &f64| q.is_finite())
                            .unwrap_or(0.0);
                    }
                }
            }
            Some(Clause { ty, subtype, q })
        })
        .collect();
    clauses.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then((a.ty == "*").cmp(&(b.ty == "*")))
            .then((a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    clauses
}

/// Whether the client accepts a gzipped body.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            name.eq_ignore_ascii_case("gzip") && q > 0.0
        })
}

/// Whether an `If-None-Match` / `If-Match` list names `etag` (`*` names
/// anything); `weak` compares without `W/`, as Go does for If-None-Match.
fn etag_listed(list: &str, etag: &str, weak: bool) -> bool {
    list.split(',').map(str::trim).any(|candidate| {
        if candidate == "*" {
            return true;
        }
        if weak {
            candidate.trim_start_matches("W/") == etag
        } else {
            candidate == etag
        }
    })
}

fn http_date(t: &DateTime<Utc>) -> String {
    t.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

fn parse_http_date(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc2822(s.trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// GET (and HEAD) /openapi/v2
pub async fn handler(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let Ok(built) = tokio::task::spawn_blocking(move || current(Source::of(&state))).await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    respond(&built, &method, &headers)
}

fn respond(built: &Built, method: &Method, headers: &HeaderMap) -> Response {
    let accept = header_str(headers, header::ACCEPT)
        .filter(|a| !a.is_empty())
        .unwrap_or("*/*");
    let served = [
        (SUBTYPE_JSON, "application/json", &built.json),
        (SUBTYPE_PROTOBUF_DEPRECATED, PROTOBUF, &built.protobuf),
        (SUBTYPE_PROTOBUF, PROTOBUF, &built.protobuf),
    ];
    let chosen = parse_accept(accept).iter().find_map(|clause| {
        served.iter().find(|(subtype, _, _)| {
            (clause.ty == "application" || clause.ty == "*")
                && (clause.subtype == *subtype || clause.subtype == "*")
        })
    });
    let mut response = Response::new(Body::empty());
    let h = response.headers_mut();
    h.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.append(header::VARY, HeaderValue::from_static("Accept"));
    let Some((_, content_type, encoded)) = chosen else {
        *response.status_mut() = StatusCode::NOT_ACCEPTABLE;
        return response;
    };
    if let Ok(etag) = HeaderValue::from_str(&built.etag) {
        h.insert(header::ETAG, etag);
    }
    if let Ok(date) = HeaderValue::from_str(&http_date(&built.last_modified)) {
        h.insert(header::LAST_MODIFIED, date);
    }
    let get_or_head = method == Method::GET || method == Method::HEAD;
    // Go's checkPreconditions, in its order.
    if let Some(list) = header_str(headers, header::IF_MATCH) {
        if !etag_listed(list, &built.etag, false) {
            *response.status_mut() = StatusCode::PRECONDITION_FAILED;
            return response;
        }
    } else if let Some(since) = header_str(headers, header::IF_UNMODIFIED_SINCE) {
        if parse_http_date(since).is_some_and(|t| built.last_modified > t) {
            *response.status_mut() = StatusCode::PRECONDITION_FAILED;
            return response;
        }
    }
    let not_modified = match header_str(headers, header::IF_NONE_MATCH) {
        Some(list) => {
            if etag_listed(list, &built.etag, true) {
                if !get_or_head {
                    *response.status_mut() = StatusCode::PRECONDITION_FAILED;
                    return response;
                }
                true
            } else {
                false
            }
        }
        None => {
            get_or_head
                && header_str(headers, header::IF_MODIFIED_SINCE)
                    .and_then(parse_http_date)
                    .is_some_and(|t| built.last_modified <= t)
        }
    };
    let h = response.headers_mut();
    if not_modified {
        // Go drops Last-Modified from a 304 that carries an ETag.
        h.remove(header::LAST_MODIFIED);
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        return response;
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let gzip = encoded.plain.len() >= GZIP_MIN_SIZE
        && !encoded.gzipped.is_empty()
        && accepts_gzip(headers);
    let body = if gzip {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        encoded.gzipped.clone()
    } else {
        encoded.plain.clone()
    };
    if let Ok(len) = HeaderValue::from_str(&body.len().to_string()) {
        h.insert(header::CONTENT_LENGTH, len);
    }
    *response.body_mut() = Body::from(body);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> Built {
        Built {
            generation: 0,
            json: Encoded::new(vec![b'{'; 2000]),
            protobuf: Encoded::new(vec![1, 2, 3]),
            etag: "\"AB\"".into(),
            last_modified: DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default(),
        }
    }

    fn get(pairs: &[(&str, &str)]) -> Response {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(
                header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                HeaderValue::from_str(v).expect("value"),
            );
        }
        respond(&built(), &Method::GET, &headers)
    }

    fn content_type(r: &Response) -> Option<&str> {
        r.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    #[test]
    fn negotiates_as_upstream() {
        assert_eq!(content_type(&get(&[])), Some("application/json"));
        let kubectl = get(&[(
            "accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        )]);
        assert_eq!(content_type(&kubectl), Some(PROTOBUF));
        let q = get(&[(
            "accept",
            "application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        )]);
        assert_eq!(content_type(&q), Some(PROTOBUF));
        assert_eq!(
            get(&[("accept", "text/html")]).status(),
            StatusCode::NOT_ACCEPTABLE
        );
        assert_eq!(
            content_type(&get(&[("accept", "text/html, */*;q=0.1")])),
            Some("application/json")
        );
        let odd = "a/b;q=nan, */*;q=inf, application/json;q=-1, ;;,/,*/, x";
        assert_eq!(
            content_type(&get(&[("accept", odd)])),
            Some("application/json")
        );
    }

    #[test]
    fn conditional_requests_and_gzip() {
        let plain = get(&[]);
        assert_eq!(plain.headers()[header::ETAG], "\"AB\"");
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        let vary: Vec<_> = plain.headers().get_all(header::VARY).iter().collect();
        assert_eq!(vary, ["Accept-Encoding", "Accept"]);
        let same = get(&[("if-none-match", "\"AB\"")]);
        assert_eq!(same.status(), StatusCode::NOT_MODIFIED);
        assert!(same.headers().get(header::CONTENT_TYPE).is_none());
        assert_eq!(
            get(&[("if-none-match", "W/\"AB\", \"CD\"")]).status(),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(get(&[("if-none-match", "\"CD\"")]).status(), StatusCode::OK);
        assert_eq!(
            get(&[("if-modified-since", "Tue, 14 Nov 2023 22:13:20 GMT")]).status(),
            StatusCode::NOT_MODIFIED
        );
        assert_eq!(
            get(&[("if-modified-since", "Tue, 14 Nov 2023 22:13:19 GMT")]).status(),
            StatusCode::OK
        );
        let gz = get(&[("accept-encoding", "gzip, deflate")]);
        assert_eq!(gz.headers()[header::CONTENT_ENCODING], "gzip");
        let small = get(&[
            ("accept-encoding", "gzip"),
            (
                "accept",
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            ),
        ]);
        assert!(small.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(
            get(&[("accept-encoding", "gzip;q=0")])
                .headers()
                .get(header::CONTENT_ENCODING),
            None
        );
    }
}
