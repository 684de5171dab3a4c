//! Write coalescing under a served HTTP/2 connection, above its TLS.
//!
//! hyper's HTTP/2 connection task flushes every time it runs out of
//! frames to read, and a finished handler wakes that task straight away
//! (tokio runs the task a handler woke next), so under load each response
//! went out as its own TLS record and `writev`: one system call, and one
//! wake-up of the reader, per response. [`Coalesce`] keeps what is
//! written until a flush, and lets the first flush of a batch wait for
//! one turn of the runtime's queue: the handlers already queued finish
//! their responses first, and one record carries them all. A lone
//! request waits for nothing but that turn.
//!
//! Only HTTP/2 connections coalesce ([`Coalesce::new`] is told which):
//! hyper's HTTP/2 always shuts its stream down cleanly, while an HTTP/1.1
//! connection can be upgraded (exec, attach, port-forward) into code that
//! may drop the stream right after a write, such as the WebSocket close
//! reply; held bytes would be lost then.
//!
//! This module owns only the buffering; it never holds data past a
//! second flush, a shutdown, or [`LIMIT`] bytes.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Buffered bytes at which writes go on to the stream without a flush.
pub const LIMIT: usize = 256 * 1024;

/// A stream whose writes are held until a flush, and whose first flush of
/// each batch yields once (see the module doc).
#[derive(Debug)]
pub struct Coalesce<T> {
    /// Off: every call goes straight to the stream.
    on: bool,
    inner: T,
    buf: Vec<u8>,
    /// How much of `buf` the stream has taken.
    sent: usize,
    /// The pending flush has yielded its turn.
    yielded: bool,
}

impl<T> Coalesce<T> {
    /// Wraps `inner`, coalescing only when `on` (an HTTP/2 connection).
    pub fn new(inner: T, on: bool) -> Self {
        Coalesce {
            on,
            inner,
            buf: Vec::new(),
            sent: 0,
            yielded: false,
        }
    }
}

impl<T: AsyncWrite + Unpin> Coalesce<T> {
    /// Passes everything buffered on to the stream.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        // A burst's buffer is not kept for an idle connection.
        if self.buf.capacity() > LIMIT {
            self.buf = Vec::new();
        }
        Poll::Ready(Ok(()))
    }

    /// Makes room for `len` more bytes; whether they fit in the buffer.
    fn reserve(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.buf.len() + len > LIMIT {
            ready!(self.drain(cx))?;
        }
        Poll::Ready(Ok(len <= LIMIT))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Coalesce<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Coalesce<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !this.on || !ready!(this.reserve(cx, data.len()))? {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let len = bufs.iter().map(|b| b.len()).sum();
        if !this.on || !ready!(this.reserve(cx, len))? {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            this.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        self.on || self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.sent < this.buf.len() {
            if !this.yielded {
                this.yielded = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            ready!(this.drain(cx))?;
        }
        this.yielded = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// `fut`, failing the test instead of hanging if it never finishes
    /// (a write held back wrongly would leave a read waiting forever).
    async fn within<F: std::future::Future>(fut: F) -> F::Output {
        tokio::time::timeout(std::time::Duration::from_secs(10), fut)
            .await
            .expect("the bytes never arrived")
    }

    #[tokio::test]
    async fn writes_wait_for_a_flush_then_go_together() {
        let (a, mut b) = tokio::io::duplex(LIMIT * 4);
        let mut a = Coalesce::new(a, true);
        a.write_all(b"one ").await.unwrap();
        a.write_all(b"two").await.unwrap();
        let mut got = [0u8; 16];
        // Nothing has reached the other end before the flush.
        assert!(futures::FutureExt::now_or_never(b.read(&mut got)).is_none());
        a.flush().await.unwrap();
        let n = within(b.read(&mut got)).await.unwrap();
        assert_eq!(&got[..n], b"one two");
    }

    #[tokio::test]
    async fn a_flush_yields_once_then_completes() {
        let (a, _b) = tokio::io::duplex(1024);
        let mut a = Coalesce::new(a, true);
        a.write_all(b"x").await.unwrap();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut a).poll_flush(&mut cx).is_pending());
        assert!(matches!(
            Pin::new(&mut a).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        // Nothing buffered: no yield.
        assert!(matches!(
            Pin::new(&mut a).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
    }

    #[tokio::test]
    async fn more_than_the_limit_goes_on_without_a_flush() {
        let (a, mut b) = tokio::io::duplex(LIMIT * 4);
        let mut a = Coalesce::new(a, true);
        let big = vec![7u8; LIMIT + 1];
        a.write_all(&big[..LIMIT / 2]).await.unwrap();
        a.write_all(&big).await.unwrap();
        let mut got = vec![0u8; LIMIT / 2];
        within(b.read_exact(&mut got)).await.unwrap();
        assert!(got.iter().all(|&x| x == 7));
    }

    #[tokio::test]
    async fn off_writes_go_straight_through() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut a = Coalesce::new(a, false);
        a.write_all(b"now").await.unwrap();
        drop(a);
        let mut got = Vec::new();
        within(b.read_to_end(&mut got)).await.unwrap();
        assert_eq!(got, b"now");
    }

    #[tokio::test]
    async fn shutdown_sends_what_is_buffered() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut a = Coalesce::new(a, true);
        a.write_all(b"last").await.unwrap();
        a.shutdown().await.unwrap();
        let mut got = Vec::new();
        within(b.read_to_end(&mut got)).await.unwrap();
        assert_eq!(got, b"last");
    }
}
