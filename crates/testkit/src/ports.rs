//! Free loopback ports.

use std::net::TcpListener;

/// A TCP port on 127.0.0.1 that was free a moment ago. Callers that then
/// fail to bind it (another test took it) should retry with a new one.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
