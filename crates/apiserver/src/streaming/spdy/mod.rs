//! SPDY/3.1 sessions, as Kubernetes' streaming protocols (exec, attach,
//! port-forward) use them between kubectl, the API server and the
//! kubelet/containerd, all of which speak it through Go's
//! `github.com/moby/spdystream`.
//!
//! This module owns the wire: frames and their zlib header compression
//! ([`frame`]), and sessions multiplexing streams over one upgraded
//! connection (`session.rs`). It knows nothing of exec or its stream types
//! (`streamtype: error|stdin|stdout|stderr|resize` are just headers here),
//! nor of the HTTP upgrade (`Upgrade: SPDY/3.1`, `X-Stream-Protocol-Version`)
//! that precedes it: callers upgrade, then hand the io to
//! [`Connection::client`] or [`Connection::server`].
//!
//! ```ignore
//! let (conn, mut incoming) = Connection::client(upgraded_io);
//! let mut stdout = conn.open(&[("streamtype", "stdout")]).await?;
//! tokio::io::copy(&mut stdout, &mut sink).await?; // until FIN or RST
//! conn.close().await;
//! ```
//!
//! Behaviour matched to spdystream (what a Go peer sends and accepts):
//! - client stream and ping ids are odd, server ones even; ids increase;
//!   a SYN_STREAM with a stale or wrong-parity id gets RST PROTOCOL_ERROR;
//! - accepted streams are answered with a SYN_REPLY with no headers, and
//!   writes on them go out only after it; opened streams wait for it;
//! - header names are sent lowercase and a name once (values NUL-joined):
//!   Go drops the connection otherwise;
//! - half-close is an empty DATA frame with FIN; RST_STREAM from the peer
//!   ends reads like EOF after the data that preceded it (Kubernetes
//!   servers end exec that way: status on the error stream, then RST of
//!   every stream and GOAWAY);
//! - PINGs with the peer's parity are echoed (kubectl pings every 5 s);
//! - no flow control: spdystream ignores WINDOW_UPDATE and SETTINGS and
//!   never sends them, so neither do we (see `session.rs` for how
//!   backpressure works instead);
//! - after a GOAWAY no new streams are opened or accepted; existing ones
//!   finish. (spdystream itself stops reading on GOAWAY and closes.)
//!
//! What it must not do: block the driver on a handle (every handle call is
//! a lock of the stream table and a queue push), or buffer without bound.

// Nothing the peer sends may panic here.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod frame;
mod session;

use std::sync::Arc;

pub use frame::{FrameError, Headers, RstStatus};
pub use session::{
    Connection, Incoming, ReadHalf, Stream, WriteHalf, CLOSE_GRACE, MAX_DATA_FRAME,
    MAX_PEER_STREAMS, STREAM_RECV_BUFFER, WRITE_BUDGET,
};

/// The `Upgrade` token for SPDY/3.1.
pub const UPGRADE: &str = "SPDY/3.1";

/// Why a session or stream operation failed. Stream io errors carry one
/// of these inside the `std::io::Error`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("SPDY session closed")]
    Closed,
    #[error("SPDY peer sent GOAWAY: no new streams")]
    GoneAway,
    #[error("SPDY stream {id} reset by the peer ({status})")]
    Reset { id: u32, status: RstStatus },
    #[error("SPDY stream {id} is closed for writing")]
    StreamClosed { id: u32 },
    #[error("SPDY stream ids exhausted")]
    StreamIdsExhausted,
    #[error("SPDY connection I/O failed")]
    Io(#[source] Arc<std::io::Error>),
    #[error("SPDY framing failed")]
    Frame(#[source] FrameError),
}

#[cfg(test)]
mod tests;
