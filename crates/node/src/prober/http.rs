//! One httpGet try (upstream's pkg/probe/http with Go's http.Client
//! rules): a GET over a fresh HTTP/1.1 connection that is closed after
//! the answer (`Connection: close`), over TLS without verifying the
//! server's certificate for scheme HTTPS (the kubelet's
//! InsecureSkipVerify; the handshake's signature is still checked).
//! Headers as the kubelet sends them: `User-Agent: kube-probe/1.33` and
//! `Accept: */*` unless httpHeaders override them, a `Host` header
//! overriding the host. Redirects to the same host are followed, at most
//! 10; a redirect elsewhere ends the try as a warning, as does any other
//! 3xx answer. 200–399 succeed; the body is read up to 10 KiB.
//!
//! It owns nothing between tries: no connection pool, no cookies.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper::body::Body as _;
use k8s_openapi::api::core::v1::HTTPHeader;
use rustls::pki_types::ServerName;
use skiff_client::tls::AcceptAnyServerCert;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::dial::{connect, join_host_port, USER_AGENT};
use super::Outcome;

/// The body is read up to this (upstream's maxRespBodyLength).
const MAX_BODY: usize = 10 * 1024;
/// Go's http.Client stops at the 10th redirect.
const MAX_REDIRECTS: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
    /// One a redirect named; a request to it fails as Go's does.
    Other(String),
}

/// An absolute URL, as much of one as a probe needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    scheme: Scheme,
    /// As written: `host:port`, `[v6]:port` or a bare host.
    authority: String,
    /// Without brackets.
    host: String,
    port: u16,
    /// Path and query, starting with `/`.
    path: String,
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match &self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Other(s) => s,
        };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

/// `path` as the request target: Go's url.Parse keeps a valid one and
/// escapes what a request line cannot carry.
fn request_target(path: &str) -> String {
    let path = path.split('#').next().unwrap_or_default();
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    for b in path.bytes() {
        if b.is_ascii_graphic() {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Splits `authority` into host and port (`default` when it has none).
fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() => p.parse().ok()?,
        _ => default,
    };
    Some((host.to_string(), port))
}

/// Where a `Location` points from `base` (RFC 3986 reference resolution,
/// without dot-segment removal); `Err` is Go's text for one it cannot
/// parse.
fn resolve(base: &Url, location: &str) -> Result<Url, String> {
    let location = location.trim();
    let bad = || format!("failed to parse Location header {location:?}");
    let scheme_end = location.find(':').filter(|&i| {
        i > 0
            && location.get(..i).is_some_and(|s| {
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            })
    });
    let (scheme, rest) = match scheme_end {
        Some(i) => {
            let name = location.get(..i).unwrap_or_default().to_ascii_lowercase();
            let scheme = match name.as_str() {
                "http" => Scheme::Http,
                "https" => Scheme::Https,
                _ => Scheme::Other(name),
            };
            (Some(scheme), location.get(i + 1..).unwrap_or_default())
        }
        None => (None, location),
    };
    if let Some(rest) = rest.strip_prefix("//") {
        let scheme = scheme.unwrap_or_else(|| base.scheme.clone());
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        let default = match scheme {
            Scheme::Https => 443,
            _ => 80,
        };
        let (host, port) = split_authority(authority, default).ok_or_else(bad)?;
        return Ok(Url {
            scheme,
            authority: authority.to_string(),
            host,
            port,
            path: request_target(if path.is_empty() { "/" } else { path }),
        });
    }
    if let Some(scheme) = scheme {
        // `mailto:x`: no host, so never the probe's.
        return Ok(Url {
            scheme,
            authority: String::new(),
            host: String::new(),
            port: 0,
            path: request_target(rest),
        });
    }
    let bare = base.path.split('?').next().unwrap_or("/");
    let path = if location.starts_with('/') {
        location.to_string()
    } else if location.is_empty() {
        base.path.clone()
    } else if location.starts_with('?') {
        format!("{bare}{location}")
    } else {
        let dir = bare.rsplit_once('/').map(|(d, _)| d).unwrap_or_default();
        format!("{dir}/{location}")
    };
    Ok(Url {
        path: request_target(&path),
        ..base.clone()
    })
}

/// Go's CanonicalMIMEHeaderKey: `x-custom-header` → `X-Custom-Header`;
/// a name with a space or other non-token byte is left as it is.
fn canonical(name: &str) -> String {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.chars().all(token) {
        return name.to_string();
    }
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// The probe's headers as Go's http.Header after upstream's
/// newProbeRequest: canonical names in their order, User-Agent and
/// Accept defaulted, an overridden but empty Accept removed.
fn probe_headers(custom: &[HTTPHeader]) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = custom
        .iter()
        .map(|h| (canonical(&h.name), h.value.clone()))
        .collect();
    let first = |h: &[(String, String)], name: &str| {
        h.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    };
    if first(&headers, "User-Agent").is_none() {
        headers.push(("User-Agent".into(), USER_AGENT.into()));
    }
    match first(&headers, "Accept") {
        None => headers.push(("Accept".into(), "*/*".into())),
        Some(v) if v.is_empty() => headers.retain(|(n, _)| n != "Accept"),
        Some(_) => {}
    }
    headers
}

/// The probes' TLS client configuration, made once.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("tls: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert::new(provider)))
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// One answer: status, Location, the body's first 10 KiB.
struct Answer {
    status: u16,
    location: Option<String>,
    body: Vec<u8>,
}

/// Aborts the connection's task when the try ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn awaiting_headers(url: &Url) -> String {
    format!(
        "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    )
}

/// Go's transport error for what hyper reports.
fn hyper_error(e: &hyper::Error) -> String {
    if e.is_parse() {
        "net/http: HTTP/1.x transport connection broken: malformed HTTP response".into()
    } else if e.is_incomplete_message() {
        "EOF".into()
    } else {
        e.to_string()
    }
}

async fn exchange_over<T>(
    io: T,
    url: &Url,
    request: hyper::Request<String>,
    deadline: Instant,
) -> Result<Answer, String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let fail = |e: String| format!("Get \"{url}\": {e}");
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake::<_, String>(hyper_util::rt::TokioIo::new(io))
        .await
        .map_err(|e| fail(hyper_error(&e)))?;
    let _conn = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let response = tokio::time::timeout_at(deadline, sender.send_request(request))
        .await
        .map_err(|_| awaiting_headers(url))?
        .map_err(|e| fail(hyper_error(&e)))?;
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(hyper::header::LOCATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut body = response.into_body();
    let mut read = Vec::new();
    while read.len() < MAX_BODY && !body.is_end_stream() {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx));
        match tokio::time::timeout_at(deadline, frame).await {
            Err(_) => {
                return Err(fail(
                    "context deadline exceeded (Client.Timeout or context cancellation while reading body)"
                        .into(),
                ))
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(fail(hyper_error(&e))),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    let room = MAX_BODY - read.len();
                    read.extend_from_slice(data.get(..room.min(data.len())).unwrap_or_default());
                }
            }
        }
    }
    Ok(Answer {
        status,
        location,
        body: read,
    })
}

/// One request and its answer on a connection of its own.
async fn exchange(
    url: &Url,
    host: &str,
    headers: &[(String, String)],
    referer: Option<&str>,
    deadline: Instant,
) -> Result<Answer, String> {
    let fail = |e: String| format!("Get \"{url}\": {e}");
    // Go writes Host and User-Agent first, then the other headers sorted
    // by name, then Connection: close.
    let mut builder = hyper::Request::get(url.path.as_str()).header(hyper::header::HOST, host);
    let mut sorted: Vec<&(String, String)> = headers.iter().filter(|(n, _)| n != "Host").collect();
    sorted.sort_by_key(|(n, _)| (n != "User-Agent", n.clone()));
    let referer = referer.map(|r| ("Referer".to_string(), r.to_string()));
    let mut close = false;
    for (name, value) in sorted.into_iter().chain(referer.as_ref()) {
        if name == "User-Agent" && value.is_empty() {
            continue;
        }
        if name == "Connection" && value.to_ascii_lowercase().contains("close") {
            close = true;
        }
        let header = hyper::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| fail(format!("net/http: invalid header field name {name:?}")))?;
        let value = hyper::header::HeaderValue::from_str(value)
            .map_err(|_| fail(format!("net/http: invalid header field value for {name:?}")))?;
        builder = builder.header(header, value);
    }
    if !close {
        builder = builder.header(hyper::header::CONNECTION, "close");
    }
    let request = builder
        .body(String::new())
        .map_err(|e| fail(e.to_string()))?;

    if let Scheme::Other(name) = &url.scheme {
        return Err(fail(format!("unsupported protocol scheme {name:?}")));
    }
    let addr = join_host_port(&url.host, url.port);
    let left = deadline.saturating_duration_since(Instant::now());
    let tcp = connect(&addr, left).await.map_err(|e| {
        if e.ends_with("i/o timeout") {
            fail(format!(
                "{e} (Client.Timeout exceeded while awaiting headers)"
            ))
        } else {
            fail(e)
        }
    })?;
    match &url.scheme {
        Scheme::Http => exchange_over(tcp, url, request, deadline).await,
        Scheme::Other(name) => Err(fail(format!("unsupported protocol scheme {name:?}"))),
        Scheme::Https => {
            let config = tls_config().map_err(fail)?;
            // rustls sends no SNI for an IP address; a host that is
            // neither a DNS name nor an IP is dialled without SNI too
            // (the certificate is not checked anyway).
            let name = ServerName::try_from(url.host.clone()).unwrap_or(ServerName::IpAddress(
                std::net::Ipv4Addr::UNSPECIFIED.into(),
            ));
            let handshake = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
            let tls = tokio::time::timeout_at(deadline, handshake)
                .await
                .map_err(|_| awaiting_headers(url))?
                .map_err(|e| fail(tls_error(&e)))?;
            exchange_over(tls, url, request, deadline).await
        }
    }
}

/// Go's words for a handshake that failed.
fn tls_error(e: &std::io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
            "http: server gave HTTP response to HTTPS client".into()
        }
        Some(rustls::Error::AlertReceived(alert)) => {
            format!("remote error: tls: {}", format!("{alert:?}").to_lowercase())
        }
        Some(other) => format!("tls: {other}"),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => "EOF".into(),
        None => e.to_string(),
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Runs one httpGet try against `scheme://host:port/path`.
pub async fn probe(
    scheme: &str,
    host: &str,
    port: u16,
    path: &str,
    custom: &[HTTPHeader],
    timeout: Duration,
) -> Outcome {
    let deadline = Instant::now() + timeout;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "" | "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let first = Url {
        scheme,
        authority: join_host_port(host, port),
        host: host.to_string(),
        port,
        path: request_target(path),
    };
    let headers = probe_headers(custom);
    let host_header = headers
        .iter()
        .find(|(n, _)| n == "Host")
        .map(|(_, v)| v.clone())
        .filter(|v| !v.is_empty());
    let mut url = first.clone();
    let mut host_override = host_header.clone();
    let mut referer: Option<String> = None;
    let mut requests = 0;
    loop {
        let sent_host = host_override
            .clone()
            .unwrap_or_else(|| url.authority.clone());
        let answer = match exchange(&url, &sent_host, &headers, referer.as_deref(), deadline).await
        {
            Ok(a) => a,
            Err(e) => return Outcome::Failure(e),
        };
        requests += 1;
        let location = answer
            .location
            .as_deref()
            .filter(|_| is_redirect(answer.status));
        let Some(location) = location else {
            return verdict(&answer);
        };
        let next = match resolve(&url, location) {
            Ok(next) => next,
            Err(e) => return Outcome::Failure(format!("Get \"{url}\": {e}")),
        };
        // The kubelet's redirect checker (followNonLocalRedirects=false).
        if next.host != first.host {
            return verdict(&answer);
        }
        if requests >= MAX_REDIRECTS {
            return Outcome::Failure(format!(
                "Get \"{location}\": stopped after {MAX_REDIRECTS} redirects"
            ));
        }
        // A Host header the caller set follows relative redirects only.
        let relative = !location.contains("://") && !location.starts_with("//");
        host_override = host_header
            .clone()
            .filter(|h| relative && *h != first.authority);
        // Go's Referer, not sent from https to http.
        let downgrade = url.scheme == Scheme::Https && next.scheme == Scheme::Http;
        let explicit = headers.iter().any(|(n, _)| n == "Referer");
        referer = (!downgrade && !explicit).then(|| url.to_string());
        url = next;
    }
}

fn terminated(answer: &Answer) -> String {
    format!(
        "Probe terminated redirects, Response body: {}",
        String::from_utf8_lossy(&answer.body)
    )
}

/// Upstream's DoHTTPProbe on the last answer.
fn verdict(answer: &Answer) -> Outcome {
    match answer.status {
        200..=299 => Outcome::Success,
        300..=399 => Outcome::Warning(terminated(answer)),
        code => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url {
            scheme: Scheme::Http,
            authority: "10.0.0.5:8080".into(),
            host: "10.0.0.5".into(),
            port: 8080,
            path: "/a/b?x=1".into(),
        }
    }

    #[test]
    fn locations_resolve_as_go_does() {
        let b = base();
        let r = |l: &str| resolve(&b, l).unwrap().to_string();
        assert_eq!(r("/ok"), "http://10.0.0.5:8080/ok");
        assert_eq!(r("c"), "http://10.0.0.5:8080/a/c");
        assert_eq!(r("?y=2"), "http://10.0.0.5:8080/a/b?y=2");
        assert_eq!(r("http://other/x"), "http://other/x");
        assert_eq!(r("HTTPS://[::1]:8443"), "https://[::1]:8443/");
        assert_eq!(r("//h2:81/p"), "http://h2:81/p");
        let u = resolve(&b, "https://[::1]:8443").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 8443));
        assert_eq!(resolve(&b, "http://h").unwrap().port, 80);
        assert_eq!(
            resolve(&b, "ftp://h/").unwrap().scheme,
            Scheme::Other("ftp".into())
        );
        assert_eq!(resolve(&b, "mailto:x").unwrap().host, "");
    }

    #[test]
    fn headers_are_canonical_and_defaulted() {
        let h = |n: &str, v: &str| HTTPHeader {
            name: n.into(),
            value: v.into(),
        };
        assert_eq!(
            probe_headers(&[h("x-custom-header", "1")]),
            [
                ("X-Custom-Header".to_string(), "1".to_string()),
                ("User-Agent".into(), USER_AGENT.into()),
                ("Accept".into(), "*/*".into()),
            ]
        );
        let overridden = probe_headers(&[h("user-agent", "mine"), h("accept", "")]);
        assert_eq!(overridden, [("User-Agent".to_string(), "mine".to_string())]);
        assert_eq!(canonical("weird name"), "weird name");
        assert_eq!(request_target(""), "/");
        assert_eq!(request_target("healthz"), "/healthz");
        assert_eq!(request_target("/a b"), "/a%20b");
    }
}
