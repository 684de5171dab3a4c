//! What the network probes (tcpSocket, httpGet, gRPC) share: the
//! kubelet's User-Agent, Go's `JoinHostPort`, and a TCP connect bounded
//! by the try's timeout that fails with Go's dial error text.
//!
//! It only dials; it knows nothing of probes, their results or events.

use std::time::Duration;

/// What the kubelet calls itself (`kube-probe/<major>.<minor>`).
pub const USER_AGENT: &str = "kube-probe/1.33";

fn dial_error(addr: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        std::io::ErrorKind::TimedOut => format!("dial tcp {addr}: i/o timeout"),
        _ => format!("dial tcp {addr}: {e}"),
    }
}

/// Go's net.JoinHostPort: brackets around an IPv6 address.
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A TCP connection to `addr`, or Go's dial error.
pub(crate) async fn connect(
    addr: &str,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(dial_error(addr, &e)),
        Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
    }
}
