//! The generic HTTP upgrade proxy (the kubelet's `proxyStream`, an
//! `UpgradeAwareHandler` with the upgrade required): the client's
//! upgrade request goes to a streaming URL over plain HTTP/1.1, and once
//! that server answers 101 the client gets a 101 with its headers and the
//! two upgraded connections are spliced by [`splice`].
//!
//! It knows nothing of SPDY or WebSocket framing, so every protocol the
//! runtime's streaming server speaks passes through unchanged. It forwards
//! only the headers an upgrade needs ([`forwarded_headers`]); a refusal
//! (an answer of 400 or more) goes back to the client as it came. It must
//! not look inside the spliced bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The copy buffer each direction of a splice uses (tokio's default is
/// 8 KiB; bulk port-forward traffic moves in fewer, larger writes).
const SPLICE_BUFFER: usize = 64 * 1024;

use axum::body::Body;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long connecting to the streaming server may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long its answer to the upgrade request may take.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long both sides get to hand over their upgraded connections.
const UPGRADE_TIMEOUT: Duration = Duration::from_secs(30);

/// The header that carries SPDY's protocol negotiation.
pub const STREAM_PROTOCOL_VERSION: &str = "x-stream-protocol-version";

/// Counts spliced sessions while they last.
#[derive(Debug)]
struct Session(watch::Sender<usize>);

impl Session {
    fn new(sessions: &watch::Sender<usize>) -> Self {
        sessions.send_modify(|n| *n += 1);
        Session(sessions.clone())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn proxy_error(message: impl Into<String>) -> Response<Body> {
    let message = message.into();
    tracing::warn!(error = %message, "streaming proxy error");
    text(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// Whether a request asks for an upgrade as the kubelet tells
/// (`httpstream.IsUpgradeRequest`): a `Connection` header that mentions
/// `upgrade`.
pub fn is_upgrade_request(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONNECTION).iter().any(|v| {
        v.as_bytes()
            .to_ascii_lowercase()
            .windows(7)
            .any(|w| w == b"upgrade")
    })
}

/// Whether it is a WebSocket upgrade (`wsstream.IsWebSocketRequest`):
/// `Upgrade: websocket` and an `upgrade` token in `Connection`.
pub fn is_websocket_request(headers: &HeaderMap) -> bool {
    let websocket = headers
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    websocket
        && headers.get(header::CONNECTION).is_some_and(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
        })
}

/// The client's headers that go to the streaming server: `Connection`,
/// `Upgrade`, every `X-Stream-Protocol-Version` (SPDY's negotiation) and
/// every `Sec-WebSocket-*` (key, version, protocols, extensions), in
/// order. Nothing else: not the client's credentials, not its `Host`.
pub fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        let n = name.as_str();
        if name == header::CONNECTION
            || name == header::UPGRADE
            || n == STREAM_PROTOCOL_VERSION
            || n.starts_with("sec-websocket-")
        {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// The request target on the streaming server: the URL's path and query,
/// with `extra` (the client's query, for a WebSocket port-forward)
/// appended.
pub fn request_target(url: &Uri, extra: Option<&str>) -> String {
    let path = url.path();
    let path = if path.is_empty() { "/" } else { path };
    let query = [url.query(), extra.filter(|q| !q.is_empty())]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("&");
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

/// Proxies the upgrade request `req` to `url` (plain `http://`), as the
/// kubelet does: a request that is no upgrade is a 500 `Upgrade request
/// required`; a server that cannot be reached a 500 with the reason; an
/// answer of 400 or more is passed back as it is, any other that is not
/// 101 is a 500 `invalid upgrade response: status code N`. On 101 the
/// client gets a 101 with the server's headers, and a task splices the
/// connections until either side ends or `shutdown`; `sessions` counts
/// those tasks.
pub async fn upgrade(
    mut req: Request<Body>,
    url: &str,
    extra_query: Option<&str>,
    sessions: &watch::Sender<usize>,
    shutdown: CancellationToken,
) -> Response<Body> {
    if !is_upgrade_request(req.headers()) {
        // The client's mistake: nothing to warn about.
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Upgrade request required",
        );
    }
    let uri = match Uri::try_from(url) {
        Ok(uri) => uri,
        Err(e) => return proxy_error(format!("invalid streaming URL {url:?}: {e}")),
    };
    if uri.scheme_str() != Some("http") {
        return proxy_error(format!(
            "unsupported streaming URL {url:?}: only http:// is proxied"
        ));
    }
    let Some(authority) = uri.authority().cloned() else {
        return proxy_error(format!("streaming URL {url:?} has no host"));
    };
    let addr = if authority.port().is_some() {
        authority.to_string()
    } else {
        format!("{}:80", authority.host())
    };

    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(&addr)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return proxy_error(format!("dial tcp {addr}: {e}")),
        Err(_) => return proxy_error(format!("dial tcp {addr}: i/o timeout")),
    };
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await {
        Ok(pair) => pair,
        Err(e) => return proxy_error(format!("error connecting to {addr}: {e}")),
    };
    // Ends by itself: at the upgrade (handing the connection over), or
    // when the connection closes after a refusal is read out.
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "streaming server connection ended with an error");
        }
    });

    let mut upstream_req = Request::new(Body::empty());
    *upstream_req.method_mut() = req.method().clone();
    *upstream_req.uri_mut() = match request_target(&uri, extra_query).parse() {
        Ok(target) => target,
        Err(e) => return proxy_error(format!("invalid request target for {url:?}: {e}")),
    };
    let mut headers = forwarded_headers(req.headers());
    match HeaderValue::from_str(authority.as_str()) {
        Ok(host) => {
            headers.insert(header::HOST, host);
        }
        Err(e) => return proxy_error(format!("invalid host in {url:?}: {e}")),
    }
    *upstream_req.headers_mut() = headers;

    let mut resp =
        match tokio::time::timeout(RESPONSE_TIMEOUT, sender.send_request(upstream_req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return proxy_error(format!("error proxying to {addr}: {e}")),
            Err(_) => return proxy_error(format!("error proxying to {addr}: no answer in time")),
        };
    drop(sender);
    let status = resp.status();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        if status.as_u16() >= 400 {
            return resp.map(Body::new);
        }
        return proxy_error(format!(
            "invalid upgrade response: status code {}",
            status.as_u16()
        ));
    }

    let mut answer = Response::new(Body::empty());
    *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in resp.headers() {
        if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    let client = hyper::upgrade::on(&mut req);
    let upstream = hyper::upgrade::on(&mut resp);
    let session = Session::new(sessions);
    tokio::spawn(async move {
        let _session = session;
        let both = tokio::time::timeout(UPGRADE_TIMEOUT, async {
            tokio::try_join!(client, upstream)
        });
        let (client, upstream) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = both => match r {
                Ok(Ok(pair)) => pair,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "an upgrade was not completed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("an upgrade was not completed in time");
                    return;
                }
            },
        };
        tokio::select! {
            _ = shutdown.cancelled() => {}
            r = splice(TokioIo::new(client), TokioIo::new(upstream)) => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "a streaming session ended with an error");
                }
            }
        }
    });
    answer
}

/// Splices `client` and `upstream` with `tokio::io::copy_bidirectional`
/// until the session is over: when the upstream (the streaming server)
/// ends, the client's side is shut down and the splice returns at once,
/// whatever the client still does; when the client ends, the upstream
/// is shut down for writing and its remaining output still reaches the
/// client (the streaming server closes on that end of input). An error on
/// either side ends both. Dropping the halves closes both connections.
pub async fn splice<C, U>(client: C, mut upstream: U) -> io::Result<(u64, u64)>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let mut client = EndsAfterShutdown::new(client);
    tokio::io::copy_bidirectional_with_sizes(
        &mut client,
        &mut upstream,
        SPLICE_BUFFER,
        SPLICE_BUFFER,
    )
    .await
}

/// An I/O whose reads end (EOF) once its writing side has been shut
/// down: `copy_bidirectional` shuts the client down when the upstream
/// ends, and this makes the other direction end with it.
#[derive(Debug)]
struct EndsAfterShutdown<T> {
    inner: T,
    shut: bool,
    reader: Option<Waker>,
}

impl<T> EndsAfterShutdown<T> {
    fn new(inner: T) -> Self {
        EndsAfterShutdown {
            inner,
            shut: false,
            reader: None,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for EndsAfterShutdown<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.shut {
            return Poll::Ready(Ok(()));
        }
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => {
                this.reader = Some(cx.waker().clone());
                Poll::Pending
            }
            ready => ready,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for EndsAfterShutdown<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let result = std::task::ready!(Pin::new(&mut this.inner).poll_shutdown(cx));
        this.shut = true;
        if let Some(reader) = this.reader.take() {
            reader.wake();
        }
        Poll::Ready(result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    const STEP: Duration = Duration::from_secs(10);

    /// How the fake streaming server answers an upgrade request.
    #[derive(Clone, Copy, Debug)]
    enum Fake {
        /// 101, then echoes until the client ends, then closes.
        Echo,
        /// 101 with `bye` in the same write, then closes at once.
        SayByeAndClose,
        /// 101, then says nothing and never closes by itself.
        Silent,
        /// 403 with a body (as containerd's server refuses).
        Refuse,
        /// 200 (not an upgrade).
        Ok,
    }

    /// A one-connection-at-a-time fake of containerd's streaming server:
    /// it records each request head.
    async fn fake_server(mode: Fake) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if s.read(&mut b).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(b[0]);
                    }
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&head).into_owned());
                    let upgrade = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\
                                   Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n";
                    match mode {
                        Fake::Echo => {
                            s.write_all(upgrade.as_bytes()).await.unwrap();
                            let (mut r, mut w) = s.split();
                            let _ = tokio::io::copy(&mut r, &mut w).await;
                        }
                        Fake::SayByeAndClose => {
                            s.write_all(format!("{upgrade}bye").as_bytes())
                                .await
                                .unwrap();
                        }
                        Fake::Silent => {
                            s.write_all(upgrade.as_bytes()).await.unwrap();
                            // Holds the connection until the peer ends it.
                            let _ = s.read(&mut b).await;
                        }
                        Fake::Refuse => {
                            let body = "requested protocol(s) are not supported";
                            s.write_all(
                                format!(
                                    "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\n\
                                     Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                                    body.len()
                                )
                                .as_bytes(),
                            )
                            .await
                            .unwrap();
                        }
                        Fake::Ok => {
                            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                                .await
                                .unwrap();
                        }
                    }
                });
            }
        });
        (addr, heads)
    }

    /// A plain-HTTP front that proxies every request to `url` (the
    /// agent's server does the same behind TLS).
    async fn front(
        url: String,
        sessions: watch::Sender<usize>,
        shutdown: CancellationToken,
    ) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else {
                    return;
                };
                let (url, sessions, shutdown) = (url.clone(), sessions.clone(), shutdown.clone());
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let (url, sessions, shutdown) =
                                (url.clone(), sessions.clone(), shutdown.clone());
                            async move {
                                let query = req.uri().query().map(str::to_string);
                                Ok::<_, std::convert::Infallible>(
                                    upgrade(
                                        req.map(Body::new),
                                        &url,
                                        query.as_deref(),
                                        &sessions,
                                        shutdown,
                                    )
                                    .await,
                                )
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        addr
    }

    /// Sends `head`; reads the answer's head (and whatever came with it).
    async fn request(addr: SocketAddr, head: &str) -> (TcpStream, String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let end = loop {
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = tokio::time::timeout(STEP, s.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed before an answer: {got:?}");
            got.extend_from_slice(&buf[..n]);
        };
        let rest = got.split_off(end);
        (s, String::from_utf8(got).unwrap(), rest)
    }

    async fn read_to_end(s: &mut TcpStream, mut got: Vec<u8>) -> Vec<u8> {
        tokio::time::timeout(STEP, s.read_to_end(&mut got))
            .await
            .expect("the connection was not closed")
            .unwrap();
        got
    }

    async fn wait_sessions(rx: &mut watch::Receiver<usize>, n: usize) {
        let waited = tokio::time::timeout(STEP, rx.wait_for(|v| *v == n))
            .await
            .map(|r| r.is_ok());
        assert_eq!(
            waited,
            Ok(true),
            "sessions never became {n}: {}",
            *rx.borrow()
        );
    }

    /// Waits until the runtime has at most `n` tasks alive.
    async fn wait_tasks(n: usize) {
        let metrics = tokio::runtime::Handle::current().metrics();
        let deadline = tokio::time::Instant::now() + STEP;
        while metrics.num_alive_tasks() > n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} tasks alive, expected {n}",
                metrics.num_alive_tasks()
            );
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    const UPGRADE: &str = "POST /exec/ns/web/app?command=sh&stdin=1 HTTP/1.1\r\nHost: agent\r\n\
        Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\
        X-Stream-Protocol-Version: v3.channel.k8s.io\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\
        Authorization: Bearer secret\r\nCookie: a=b\r\n\r\n";

    #[test]
    fn tells_upgrades_and_websockets_and_picks_headers() {
        let h = |pairs: &[(&str, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.append(
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            m
        };
        use axum::http::HeaderName;
        assert!(is_upgrade_request(&h(&[(
            "connection",
            "keep-alive, Upgrade"
        )])));
        assert!(is_upgrade_request(&h(&[
            ("connection", "close"),
            ("connection", "upgrade")
        ])));
        assert!(!is_upgrade_request(&h(&[
            ("connection", "close"),
            ("upgrade", "websocket")
        ])));
        assert!(is_websocket_request(&h(&[
            ("connection", "Upgrade"),
            ("upgrade", "WebSocket")
        ])));
        assert!(!is_websocket_request(&h(&[
            ("connection", "Upgrade"),
            ("upgrade", "SPDY/3.1")
        ])));
        assert!(!is_websocket_request(&h(&[
            ("connection", "upgrades"),
            ("upgrade", "websocket")
        ])));

        let picked = forwarded_headers(&h(&[
            ("host", "agent"),
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("x-stream-protocol-version", "v4.channel.k8s.io"),
            ("x-stream-protocol-version", "v3.channel.k8s.io"),
            ("sec-websocket-key", "k"),
            ("sec-websocket-version", "13"),
            (
                "sec-websocket-protocol",
                "v4.channel.k8s.io, channel.k8s.io",
            ),
            ("authorization", "Bearer x"),
            ("content-length", "0"),
        ]));
        let names: Vec<_> = picked.keys().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "connection",
                "upgrade",
                "x-stream-protocol-version",
                "sec-websocket-key",
                "sec-websocket-version",
                "sec-websocket-protocol"
            ]
        );
        assert_eq!(
            picked.get_all("x-stream-protocol-version").iter().count(),
            2
        );

        let url: Uri = "http://127.0.0.1:1/portforward/tok".parse().unwrap();
        assert_eq!(request_target(&url, None), "/portforward/tok");
        assert_eq!(
            request_target(&url, Some("ports=80")),
            "/portforward/tok?ports=80"
        );
        let url: Uri = "http://127.0.0.1:1/exec/tok?a=1".parse().unwrap();
        assert_eq!(request_target(&url, Some("b=2")), "/exec/tok?a=1&b=2");
        assert_eq!(request_target(&url, Some("")), "/exec/tok?a=1");
    }

    /// The request goes out with its method, the URL's target and only
    /// the upgrade headers; the 101 comes back with the server's headers;
    /// bytes go both ways; the client ending ends the session and leaves
    /// no task behind.
    #[tokio::test]
    async fn proxies_an_upgrade_and_ends_with_the_client() {
        let (up, heads) = fake_server(Fake::Echo).await;
        let sessions = watch::Sender::new(0);
        let mut rx = sessions.subscribe();
        let addr = front(
            format!("http://{up}/exec/token-1"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let idle = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();

        let (mut s, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("x-stream-protocol-version: v4.channel.k8s.io"),
            "{head}"
        );
        assert!(lower.contains("upgrade: spdy/3.1"), "{head}");
        assert!(rest.is_empty());
        wait_sessions(&mut rx, 1).await;

        let sent = heads.lock().unwrap()[0].clone();
        let lines: Vec<&str> = sent.split("\r\n").collect();
        // The URL's target, with the query the caller handed on (this
        // front hands on the client's).
        assert_eq!(
            lines[0], "POST /exec/token-1?command=sh&stdin=1 HTTP/1.1",
            "{sent}"
        );
        let lower = sent.to_ascii_lowercase();
        assert!(lower.contains(&format!("host: {up}")), "{sent}");
        assert!(lower.contains("connection: upgrade"), "{sent}");
        assert!(lower.contains("upgrade: spdy/3.1"), "{sent}");
        assert!(lower.contains("x-stream-protocol-version: v4.channel.k8s.io\r\nx-stream-protocol-version: v3.channel.k8s.io"), "{sent}");
        assert!(
            lower.contains("sec-websocket-protocol: v4.channel.k8s.io"),
            "{sent}"
        );
        assert!(
            !lower.contains("authorization") && !lower.contains("cookie"),
            "{sent}"
        );

        // A megabyte each way, through the splice's back-pressure.
        let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let (mut r, mut w) = s.split();
        let echoed = async {
            let mut got = vec![0u8; data.len()];
            r.read_exact(&mut got).await.unwrap();
            got
        };
        let (_, got) = tokio::time::timeout(STEP, async {
            tokio::join!(async { w.write_all(&data).await.unwrap() }, echoed)
        })
        .await
        .unwrap();
        assert!(got == data, "the echo differs");

        // The client ends its side: the server sees the end, closes, and
        // the client gets the end too.
        s.shutdown().await.unwrap();
        assert!(read_to_end(&mut s, vec![]).await.is_empty());
        wait_sessions(&mut rx, 0).await;
        drop(s);
        wait_tasks(idle).await;
    }

    /// The streaming server ending (and its last bytes, sent with the
    /// 101) ends the session though the client says nothing more.
    #[tokio::test]
    async fn the_server_ending_ends_the_session() {
        let (up, _) = fake_server(Fake::SayByeAndClose).await;
        let sessions = watch::Sender::new(0);
        let mut rx = sessions.subscribe();
        let addr = front(
            format!("http://{up}/attach/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let idle = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let (mut s, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        // The client keeps its side open; still the session ends.
        assert_eq!(read_to_end(&mut s, rest).await, b"bye");
        wait_sessions(&mut rx, 0).await;
        wait_tasks(idle).await;
        // And what the client writes now goes nowhere (no error needed).
        let _ = s.write_all(b"late").await;
    }

    /// A client that vanishes without a word ends the session, and the
    /// streaming server sees its connection closed.
    #[tokio::test]
    async fn a_vanished_client_closes_the_upstream() {
        let (up, _) = fake_server(Fake::Echo).await;
        let sessions = watch::Sender::new(0);
        let mut rx = sessions.subscribe();
        let addr = front(
            format!("http://{up}/exec/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let idle = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        let (s, head, _) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        wait_sessions(&mut rx, 1).await;
        drop(s);
        wait_sessions(&mut rx, 0).await;
        wait_tasks(idle).await;
    }

    /// Shutting the server down ends sessions in progress.
    #[tokio::test]
    async fn shutdown_ends_sessions() {
        let (up, _) = fake_server(Fake::Silent).await;
        let sessions = watch::Sender::new(0);
        let mut rx = sessions.subscribe();
        let shutdown = CancellationToken::new();
        let addr = front(
            format!("http://{up}/exec/t"),
            sessions.clone(),
            shutdown.clone(),
        )
        .await;
        let (mut s, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        wait_sessions(&mut rx, 1).await;
        shutdown.cancel();
        wait_sessions(&mut rx, 0).await;
        assert!(read_to_end(&mut s, rest).await.is_empty());
    }

    /// What is not an upgrade: the server's refusal as it came, any other
    /// answer, a request that asks for none, a server that is not there.
    #[tokio::test]
    async fn refusals_in_the_kubelets_words() {
        let sessions = watch::Sender::new(0);
        let (up, _) = fake_server(Fake::Refuse).await;
        let addr = front(
            format!("http://{up}/exec/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let (mut s, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain"),
            "{head}"
        );
        let mut body = rest;
        while body.len() < "requested protocol(s) are not supported".len() {
            let mut b = [0u8; 256];
            let n = tokio::time::timeout(STEP, s.read(&mut b))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0);
            body.extend_from_slice(&b[..n]);
        }
        assert_eq!(body, b"requested protocol(s) are not supported");

        let (up, _) = fake_server(Fake::Ok).await;
        let addr = front(
            format!("http://{up}/exec/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let (_, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 500"), "{head}");
        assert!(
            String::from_utf8_lossy(&rest).contains("invalid upgrade response: status code 200")
        );

        let (up, heads) = fake_server(Fake::Echo).await;
        let addr = front(
            format!("http://{up}/exec/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let (_, head, rest) =
            request(addr, "GET /exec/a/b/c HTTP/1.1\r\nHost: agent\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 500"), "{head}");
        assert_eq!(String::from_utf8_lossy(&rest), "Upgrade request required");
        assert!(heads.lock().unwrap().is_empty());

        let gone = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let addr = front(
            format!("http://{gone}/exec/t"),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let (_, head, rest) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 500"), "{head}");
        let body = String::from_utf8_lossy(&rest);
        assert!(body.starts_with(&format!("dial tcp {gone}: ")), "{body}");

        let addr = front(
            "https://127.0.0.1:1/exec/t".into(),
            sessions.clone(),
            CancellationToken::new(),
        )
        .await;
        let (_, head, _) = request(addr, UPGRADE).await;
        assert!(head.starts_with("HTTP/1.1 500"), "{head}");
        assert_eq!(*sessions.borrow(), 0);
    }

    /// The splice alone: the upstream ending ends it whatever the client
    /// does; the client ending half-closes the upstream, whose last
    /// output still gets through.
    #[tokio::test]
    async fn splice_ends_with_either_side() {
        let (client_far, client_near) = tokio::io::duplex(64);
        let (up_near, up_far) = tokio::io::duplex(64);
        let task = tokio::spawn(splice(client_near, up_near));
        drop(up_far);
        let (sent, received) = tokio::time::timeout(STEP, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((sent, received), (0, 0));
        drop(client_far);

        let (mut client_far, client_near) = tokio::io::duplex(64);
        let (up_near, mut up_far) = tokio::io::duplex(64);
        let task = tokio::spawn(splice(client_near, up_near));
        client_far.write_all(b"in").await.unwrap();
        client_far.shutdown().await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(STEP, up_far.read_to_end(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, b"in");
        up_far.write_all(b"last words").await.unwrap();
        drop(up_far);
        let mut got = Vec::new();
        tokio::time::timeout(STEP, client_far.read_to_end(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, b"last words");
        let counts = tokio::time::timeout(STEP, task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(counts, (2, 10));
    }
}
