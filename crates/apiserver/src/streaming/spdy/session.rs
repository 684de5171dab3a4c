//! The session: one driver task owns the connection's io and both zlib
//! contexts; handles ([`Connection`], [`Incoming`], the stream halves) talk
//! to it through one ordered command queue and a shared stream table.
//!
//! Writes: a stream half copies at most [`MAX_DATA_FRAME`] bytes per
//! `poll_write` into a DATA command once it holds that many permits of the
//! connection's write budget; the driver encodes commands in queue order
//! (so a SYN_STREAM precedes its DATA and a FIN follows it) and releases the
//! permits, pulling no more while its output buffer is above
//! [`WRITE_HIGH_WATER`]. So a peer that stops reading stalls writers, and
//! memory stays bounded.
//!
//! Reads: DATA is appended to the stream's buffer. Once one stream holds
//! [`STREAM_RECV_BUFFER`] unread bytes the driver stops reading the socket
//! (head-of-line, as spdystream's bounded frame queues do) until that
//! stream is read below half of it or dropped. It also stops while its
//! output buffer holds `READ_HIGH_WATER` bytes, so a peer that sends
//! PINGs (or streams to refuse) without reading the answers stalls
//! instead of growing that buffer.
//!
//! No SPDY flow-control windows: spdystream (kubectl, the kubelet,
//! containerd) ignores WINDOW_UPDATE and never sends one, so a sender that
//! honoured the 64 KiB initial window would stall forever. Backpressure is
//! the transport's, as it is between Go peers.

use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::{CancellationToken, PollSemaphore};

use super::frame::{self, Decoder, Encoder, Frame, Headers, RstStatus};
use super::Error;

/// The most payload one DATA frame we send carries (spdystream sends one
/// frame per `Write`, typically io.Copy's 32 KiB).
pub const MAX_DATA_FRAME: usize = 64 * 1024;
/// Bytes that writers may have queued and the driver not yet encoded.
pub const WRITE_BUDGET: usize = 1024 * 1024;
/// The driver stops taking commands while this much output is unwritten.
pub const WRITE_HIGH_WATER: usize = 256 * 1024;
/// The driver stops reading the peer while this much output is unwritten:
/// what the peer's frames make it answer (PING echoes, refusals) waits
/// for the peer to read, as a Go peer's synchronous writes do. Above what
/// commands alone can fill (they stop at [`WRITE_HIGH_WATER`]).
const READ_HIGH_WATER: usize = 2 * WRITE_HIGH_WATER;
/// Unread bytes one stream may buffer before the connection stops reading.
pub const STREAM_RECV_BUFFER: usize = 1024 * 1024;
/// Streams the peer may have open at once; more are refused.
pub const MAX_PEER_STREAMS: usize = 1024;
/// How long [`Connection::close`] waits for open streams after GOAWAY.
pub const CLOSE_GRACE: Duration = Duration::from_secs(10);
/// How long the driver spends flushing and shutting the io at the end.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 64 * 1024;
/// Driver loop turns before it yields to the runtime.
const MAX_TURNS: usize = 32;
const MAX_STREAM_ID: u32 = 0x7fff_ffff;

/// Why a stream was reset, and by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reset {
    Peer(RstStatus),
    Local,
}

/// One stream's state in the shared table.
#[derive(Debug)]
struct Slot {
    recv: VecDeque<Bytes>,
    recv_len: usize,
    /// Counted in `State::blocked`.
    over: bool,
    remote_fin: bool,
    /// No more writes accepted (FIN queued, or UNIDIRECTIONAL from peer).
    fin_queued: bool,
    /// FIN encoded by the driver.
    fin_sent: bool,
    reset: Option<Reset>,
    /// Our RST_STREAM encoded (data queued before it went out first).
    rst_sent: bool,
    read_waker: Option<Waker>,
    /// A ReadHalf (or a pending open / queued accept owning one) lives.
    reader: bool,
    writer: bool,
    /// SYN_REPLY sent (accepted streams) or received (opened ones).
    replied: bool,
    reply_tx: Option<oneshot::Sender<Result<Headers, Error>>>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            recv: VecDeque::new(),
            recv_len: 0,
            over: false,
            remote_fin: false,
            fin_queued: false,
            fin_sent: false,
            reset: None,
            rst_sent: false,
            read_waker: None,
            reader: true,
            writer: true,
            replied: false,
            reply_tx: None,
        }
    }

    /// Still exchanging data (what `close` waits for).
    fn active(&self) -> bool {
        self.reset.is_none() && !(self.fin_sent && self.remote_fin)
    }

    fn removable(&self) -> bool {
        let rst_pending = self.reset == Some(Reset::Local) && !self.rst_sent;
        !self.reader && !self.writer && !self.active() && !rst_pending
    }

    fn wake_reader(&mut self) {
        if let Some(w) = self.read_waker.take() {
            w.wake();
        }
    }
}

#[derive(Debug)]
struct State {
    is_client: bool,
    streams: HashMap<u32, Slot>,
    next_stream_id: u32,
    last_peer_stream_id: u32,
    next_ping_id: u32,
    pings: HashMap<u32, oneshot::Sender<()>>,
    goaway_sent: bool,
    goaway_received: bool,
    ended: Option<Error>,
    /// Streams holding at least STREAM_RECV_BUFFER unread bytes.
    blocked: usize,
}

impl State {
    fn ours(&self, id: u32) -> bool {
        (id % 2 == 1) == self.is_client
    }

    fn ended_error(&self) -> Error {
        self.ended.clone().unwrap_or(Error::Closed)
    }

    /// Drops a stream's unread data; true if the driver may read again.
    fn discard(&mut self, id: u32) -> bool {
        let Some(slot) = self.streams.get_mut(&id) else {
            return false;
        };
        slot.recv.clear();
        slot.recv_len = 0;
        if slot.over {
            slot.over = false;
            self.blocked = self.blocked.saturating_sub(1);
            return self.blocked == 0;
        }
        false
    }

    fn maybe_remove(&mut self, id: u32) {
        if self.streams.get(&id).is_some_and(Slot::removable) {
            self.discard(id);
            self.streams.remove(&id);
        }
    }
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Live handles (connection, incoming, stream halves); at 0 the
    /// driver ends the session.
    handles: AtomicUsize,
    driver: AtomicWaker,
    budget: Arc<Semaphore>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent-enough
        // state (every update is a few field writes); keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Keeps the session alive while it lives.
#[derive(Debug)]
struct HandleCount(Arc<Shared>);

impl HandleCount {
    fn new(shared: &Arc<Shared>) -> HandleCount {
        shared.handles.fetch_add(1, Ordering::SeqCst);
        HandleCount(shared.clone())
    }
}

impl Drop for HandleCount {
    fn drop(&mut self) {
        if self.0.handles.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.driver.wake();
        }
    }
}

#[derive(Debug)]
enum Cmd {
    Frame(Frame),
    Data {
        stream_id: u32,
        data: Bytes,
        fin: bool,
        _permit: Option<OwnedSemaphorePermit>,
    },
    /// GOAWAY, then end once no stream is active (or after CLOSE_GRACE).
    Close,
}

/// A SPDY/3.1 session. Cheap to clone; a driver task owns the io.
#[derive(Debug, Clone)]
pub struct Connection {
    inner: Arc<ConnInner>,
}

#[derive(Debug)]
struct ConnInner {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Cmd>,
    gone: CancellationToken,
    ended: CancellationToken,
    _count: HandleCount,
}

/// Streams the peer opens, in order. Dropping it refuses later ones.
#[derive(Debug)]
pub struct Incoming {
    rx: mpsc::UnboundedReceiver<Stream>,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Cmd>,
    _count: HandleCount,
}

impl Connection {
    /// Client side of a session over an upgraded connection (odd stream
    /// ids). Spawns the driver: call it inside a Tokio runtime.
    pub fn client<T: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
        io: T,
    ) -> (Connection, Incoming) {
        start(io, true)
    }

    /// Server side (even ids); streams the peer opens arrive on `Incoming`.
    pub fn server<T: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
        io: T,
    ) -> (Connection, Incoming) {
        start(io, false)
    }

    /// Opens a stream with these headers (SYN_STREAM) and waits for its
    /// SYN_REPLY. Fails with [`Error::Reset`] if the peer refuses it,
    /// [`Error::GoneAway`] after the peer's GOAWAY. Dropping the future
    /// before the reply resets the stream. No timeout of its own
    /// (client-go allows 30 s).
    pub async fn open(&self, headers: &[(&str, &str)]) -> Result<Stream, Error> {
        let headers = Arc::new(Headers::from(headers));
        let inner = &self.inner;
        let (reply_tx, reply_rx) = oneshot::channel();
        let id = {
            let mut st = inner.shared.lock();
            if let Some(e) = &st.ended {
                return Err(e.clone());
            }
            if st.goaway_received {
                return Err(Error::GoneAway);
            }
            if st.goaway_sent {
                return Err(Error::Closed);
            }
            let id = st.next_stream_id;
            if id > MAX_STREAM_ID {
                return Err(Error::StreamIdsExhausted);
            }
            st.next_stream_id = id.saturating_add(2);
            let mut slot = Slot::new();
            slot.reply_tx = Some(reply_tx);
            st.streams.insert(id, slot);
            // Queued under the lock: ids must reach the wire increasing.
            let sent = inner.tx.send(Cmd::Frame(Frame::SynStream {
                stream_id: id,
                associated_to: 0,
                priority: 0,
                slot: 0,
                fin: false,
                unidirectional: false,
                headers: (*headers).clone(),
            }));
            if sent.is_err() {
                st.streams.remove(&id);
                return Err(st.ended_error());
            }
            id
        };
        let mut guard = OpenGuard {
            shared: &inner.shared,
            tx: &inner.tx,
            id,
            armed: true,
        };
        let reply = reply_rx.await;
        match reply {
            Ok(Ok(_reply_headers)) => {
                guard.armed = false;
                Ok(Stream::new(id, &inner.shared, &inner.tx, headers))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(inner.shared.lock().ended_error()),
        }
    }

    /// Sends a PING and waits for its echo.
    pub async fn ping(&self) -> Result<Duration, Error> {
        let (tx, rx) = oneshot::channel();
        let id = {
            let mut st = self.inner.shared.lock();
            if let Some(e) = &st.ended {
                return Err(e.clone());
            }
            let id = st.next_ping_id;
            st.next_ping_id = if id > MAX_STREAM_ID - 2 {
                id - (MAX_STREAM_ID - 1)
            } else {
                id + 2
            };
            st.pings.insert(id, tx);
            id
        };
        let start = Instant::now();
        if self.inner.tx.send(Cmd::Frame(Frame::Ping { id })).is_err() {
            return Err(self.inner.shared.lock().ended_error());
        }
        match rx.await {
            Ok(()) => Ok(start.elapsed()),
            Err(_) => Err(self.inner.shared.lock().ended_error()),
        }
    }

    /// Ends the session: sends GOAWAY (no new streams either way), lets open
    /// streams finish for up to [`CLOSE_GRACE`], then closes the io — at
    /// once if no stream is open. Resolves when the io is closed; dropping
    /// the future does not stop the close.
    pub async fn close(&self) {
        // Err: the driver is gone, which is what we wait for anyway.
        let _ = self.inner.tx.send(Cmd::Close);
        self.inner.ended.cancelled().await;
    }

    /// Resolves when the session has ended or is ending: peer GOAWAY, io
    /// closed or failed, [`close`](Self::close) called.
    pub async fn closed(&self) {
        self.inner.gone.cancelled().await;
    }

    /// Why the session ended, once it has.
    pub fn error(&self) -> Option<Error> {
        self.inner.shared.lock().ended.clone()
    }
}

/// Resets a stream whose `open` was dropped or failed before its reply.
struct OpenGuard<'a> {
    shared: &'a Arc<Shared>,
    tx: &'a mpsc::UnboundedSender<Cmd>,
    id: u32,
    armed: bool,
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let wake = {
            let mut st = self.shared.lock();
            let Some(slot) = st.streams.get_mut(&self.id) else {
                return;
            };
            slot.reader = false;
            slot.writer = false;
            slot.reply_tx = None;
            if slot.reset.is_none() {
                slot.reset = Some(Reset::Local);
                let _ = self.tx.send(Cmd::Frame(Frame::RstStream {
                    stream_id: self.id,
                    status: RstStatus::CANCEL,
                }));
            }
            let wake = st.discard(self.id);
            st.maybe_remove(self.id);
            wake
        };
        if wake {
            self.shared.driver.wake();
        }
    }
}

impl Incoming {
    /// The next stream the peer opened, after replying SYN_REPLY (empty
    /// headers, as Kubernetes' servers do). `None` once the session ended.
    pub async fn accept(&mut self) -> Option<Stream> {
        let stream = self.rx.recv().await?;
        let id = stream.id();
        let mut st = self.shared.lock();
        if let Some(slot) = st.streams.get_mut(&id) {
            if !slot.replied && slot.reset.is_none() {
                slot.replied = true;
                let _ = self.tx.send(Cmd::Frame(Frame::SynReply {
                    stream_id: id,
                    fin: false,
                    headers: Headers::new(),
                }));
            }
        }
        drop(st);
        Some(stream)
    }
}

/// What both halves of a stream share.
#[derive(Debug)]
struct Handle {
    id: u32,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Cmd>,
    headers: Arc<Headers>,
    _count: HandleCount,
}

impl Handle {
    fn reset(&self, status: RstStatus) {
        let wake = {
            let mut st = self.shared.lock();
            let Some(slot) = st.streams.get_mut(&self.id) else {
                return;
            };
            if slot.reset.is_some() || !slot.active() {
                return;
            }
            slot.reset = Some(Reset::Local);
            slot.fin_queued = true;
            slot.wake_reader();
            let _ = self.tx.send(Cmd::Frame(Frame::RstStream {
                stream_id: self.id,
                status,
            }));
            st.discard(self.id)
        };
        if wake {
            self.shared.driver.wake();
        }
    }

    fn peer_reset(&self) -> Option<RstStatus> {
        match self.shared.lock().streams.get(&self.id)?.reset? {
            Reset::Peer(status) => Some(status),
            Reset::Local => None,
        }
    }
}

/// One SPDY stream: [`AsyncRead`] + [`AsyncWrite`]. `poll_shutdown` sends
/// FIN (half-close); reads end at the peer's FIN — or at its RST_STREAM,
/// after the data sent before it, as spdystream's do (Kubernetes servers
/// end exec streams that way). Dropping a stream that is still writable
/// sends FIN, and its unread data is discarded.
#[derive(Debug)]
pub struct Stream {
    read: ReadHalf,
    write: WriteHalf,
}

/// The reading half of a [`Stream`].
#[derive(Debug)]
pub struct ReadHalf {
    h: Handle,
}

/// The writing half of a [`Stream`].
#[derive(Debug)]
pub struct WriteHalf {
    h: Handle,
    budget: PollSemaphore,
}

impl Stream {
    fn new(
        id: u32,
        shared: &Arc<Shared>,
        tx: &mpsc::UnboundedSender<Cmd>,
        headers: Arc<Headers>,
    ) -> Stream {
        let handle = || Handle {
            id,
            shared: shared.clone(),
            tx: tx.clone(),
            headers: headers.clone(),
            _count: HandleCount::new(shared),
        };
        Stream {
            read: ReadHalf { h: handle() },
            write: WriteHalf {
                h: handle(),
                budget: PollSemaphore::new(shared.budget.clone()),
            },
        }
    }

    /// The stream's SYN_STREAM headers (the peer's for accepted streams,
    /// ours for opened ones), e.g. `streamtype`.
    pub fn headers(&self) -> &Headers {
        &self.read.h.headers
    }

    pub fn id(&self) -> u32 {
        self.read.h.id
    }

    /// Halves usable from two tasks.
    pub fn split(self) -> (ReadHalf, WriteHalf) {
        (self.read, self.write)
    }

    /// Sends RST_STREAM (CANCEL): both directions end at once; pending
    /// reads see EOF, writes fail.
    pub fn reset(&self) {
        self.read.h.reset(RstStatus::CANCEL);
    }

    /// Like [`reset`](Self::reset) with another status.
    pub fn reset_with(&self, status: RstStatus) {
        self.read.h.reset(status);
    }

    /// The peer's RST_STREAM status, if it reset the stream.
    pub fn peer_reset(&self) -> Option<RstStatus> {
        self.read.h.peer_reset()
    }
}

impl ReadHalf {
    pub fn id(&self) -> u32 {
        self.h.id
    }
    pub fn headers(&self) -> &Headers {
        &self.h.headers
    }
    /// See [`Stream::reset`].
    pub fn reset(&self) {
        self.h.reset(RstStatus::CANCEL);
    }
    pub fn peer_reset(&self) -> Option<RstStatus> {
        self.h.peer_reset()
    }
}

impl WriteHalf {
    pub fn id(&self) -> u32 {
        self.h.id
    }
    pub fn headers(&self) -> &Headers {
        &self.h.headers
    }
    /// See [`Stream::reset`].
    pub fn reset(&self) {
        self.h.reset(RstStatus::CANCEL);
    }
    pub fn peer_reset(&self) -> Option<RstStatus> {
        self.h.peer_reset()
    }
}

fn io_error(e: Error) -> io::Error {
    let kind = match &e {
        Error::Closed | Error::GoneAway => io::ErrorKind::ConnectionAborted,
        Error::Reset { .. } => io::ErrorKind::ConnectionReset,
        Error::StreamClosed { .. } => io::ErrorKind::BrokenPipe,
        Error::Io(e) => e.kind(),
        Error::StreamIdsExhausted | Error::Frame(_) => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

impl AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let id = self.h.id;
        let mut wake_driver = false;
        let result = {
            let mut st = self.h.shared.lock();
            let ended = st.ended.clone();
            let st = &mut *st;
            match st.streams.get_mut(&id) {
                None => Poll::Ready(Ok(())),
                Some(slot) if slot.recv_len > 0 => {
                    while buf.remaining() > 0 {
                        let Some(front) = slot.recv.front_mut() else {
                            break;
                        };
                        let n = front.len().min(buf.remaining());
                        buf.put_slice(&front.split_to(n));
                        slot.recv_len -= n;
                        if front.is_empty() {
                            slot.recv.pop_front();
                        }
                    }
                    if slot.over && slot.recv_len < STREAM_RECV_BUFFER / 2 {
                        slot.over = false;
                        st.blocked = st.blocked.saturating_sub(1);
                        wake_driver = st.blocked == 0;
                    }
                    Poll::Ready(Ok(()))
                }
                Some(slot) if slot.remote_fin || slot.reset.is_some() => Poll::Ready(Ok(())),
                Some(slot) => match ended {
                    Some(e) => Poll::Ready(Err(io_error(e))),
                    None => {
                        if !slot
                            .read_waker
                            .as_ref()
                            .is_some_and(|w| w.will_wake(cx.waker()))
                        {
                            slot.read_waker = Some(cx.waker().clone());
                        }
                        Poll::Pending
                    }
                },
            }
        };
        if wake_driver {
            self.h.shared.driver.wake();
        }
        result
    }
}

impl AsyncWrite for WriteHalf {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = self.h.id;
        if let Err(e) = writable(&self.h) {
            return Poll::Ready(Err(io_error(e)));
        }
        let n = buf.len().min(MAX_DATA_FRAME);
        // n <= 64 KiB: fits u32.
        let permits = u32::try_from(n).unwrap_or(u32::MAX);
        let Some(permit) = std::task::ready!(self.budget.poll_acquire_many(cx, permits)) else {
            let e = self.h.shared.lock().ended_error();
            return Poll::Ready(Err(io_error(e)));
        };
        let data = Bytes::copy_from_slice(buf.get(..n).unwrap_or_default());
        let cmd = Cmd::Data {
            stream_id: id,
            data,
            fin: false,
            _permit: Some(permit),
        };
        if self.h.tx.send(cmd).is_err() {
            let e = self.h.shared.lock().ended_error();
            return Poll::Ready(Err(io_error(e)));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written data is queued in order; the driver flushes the io.
        Poll::Ready(Ok(()))
    }

    /// Sends FIN once; later writes fail, reads go on.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.h.shared.lock();
        let ended = st.ended.clone();
        let Some(slot) = st.streams.get_mut(&self.h.id) else {
            return Poll::Ready(Ok(()));
        };
        if slot.fin_queued || slot.reset.is_some() {
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = ended {
            return Poll::Ready(Err(io_error(e)));
        }
        slot.fin_queued = true;
        let _ = self.h.tx.send(Cmd::Data {
            stream_id: self.h.id,
            data: Bytes::new(),
            fin: true,
            _permit: None,
        });
        Poll::Ready(Ok(()))
    }
}

fn writable(h: &Handle) -> Result<(), Error> {
    let st = h.shared.lock();
    if let Some(e) = &st.ended {
        return Err(e.clone());
    }
    match st.streams.get(&h.id) {
        None => Err(Error::StreamClosed { id: h.id }),
        Some(slot) => match slot.reset {
            Some(Reset::Peer(status)) => Err(Error::Reset { id: h.id, status }),
            Some(Reset::Local) => Err(Error::StreamClosed { id: h.id }),
            None if slot.fin_queued => Err(Error::StreamClosed { id: h.id }),
            None => Ok(()),
        },
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.read).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.write).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.write).poll_shutdown(cx)
    }
}

impl Drop for ReadHalf {
    fn drop(&mut self) {
        let wake = {
            let mut st = self.h.shared.lock();
            let Some(slot) = st.streams.get_mut(&self.h.id) else {
                return;
            };
            slot.reader = false;
            slot.read_waker = None;
            let wake = st.discard(self.h.id);
            st.maybe_remove(self.h.id);
            wake
        };
        if wake {
            self.h.shared.driver.wake();
        }
    }
}

impl Drop for WriteHalf {
    fn drop(&mut self) {
        let mut st = self.h.shared.lock();
        let ended = st.ended.is_some();
        let Some(slot) = st.streams.get_mut(&self.h.id) else {
            return;
        };
        slot.writer = false;
        if !slot.fin_queued && slot.reset.is_none() && !ended {
            slot.fin_queued = true;
            if slot.replied {
                let _ = self.h.tx.send(Cmd::Data {
                    stream_id: self.h.id,
                    data: Bytes::new(),
                    fin: true,
                    _permit: None,
                });
            } else {
                // Never accepted (Incoming dropped with it queued): refuse.
                slot.reset = Some(Reset::Local);
                let _ = self.h.tx.send(Cmd::Frame(Frame::RstStream {
                    stream_id: self.h.id,
                    status: RstStatus::REFUSED_STREAM,
                }));
            }
        }
        st.maybe_remove(self.h.id);
    }
}

fn start<T: AsyncRead + AsyncWrite + Send + Unpin + 'static>(
    io: T,
    is_client: bool,
) -> (Connection, Incoming) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            is_client,
            streams: HashMap::new(),
            next_stream_id: if is_client { 1 } else { 2 },
            last_peer_stream_id: 0,
            next_ping_id: if is_client { 1 } else { 2 },
            pings: HashMap::new(),
            goaway_sent: false,
            goaway_received: false,
            ended: None,
            blocked: 0,
        }),
        handles: AtomicUsize::new(0),
        driver: AtomicWaker::new(),
        budget: Arc::new(Semaphore::new(WRITE_BUDGET)),
    });
    let (tx, rx) = mpsc::unbounded_channel();
    let (incoming_tx, incoming_rx) = mpsc::unbounded_channel();
    let gone = CancellationToken::new();
    let ended = CancellationToken::new();
    let conn = Connection {
        inner: Arc::new(ConnInner {
            shared: shared.clone(),
            tx: tx.clone(),
            gone: gone.clone(),
            ended: ended.clone(),
            _count: HandleCount::new(&shared),
        }),
    };
    let incoming = Incoming {
        rx: incoming_rx,
        shared: shared.clone(),
        tx: tx.clone(),
        _count: HandleCount::new(&shared),
    };
    let mut driver = Driver {
        io,
        shared,
        rx,
        tx,
        incoming: Some(incoming_tx),
        encoder: Encoder::new(),
        decoder: Decoder::new(),
        rbuf: BytesMut::with_capacity(READ_CHUNK),
        wbuf: BytesMut::with_capacity(WRITE_HIGH_WATER),
        need_flush: false,
        read_eof: false,
        phase: Phase::Running,
        deadline: None,
        gone,
        ended,
    };
    tokio::spawn(poll_fn(move |cx| driver.poll_drive(cx)));
    (conn, incoming)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// GOAWAY sent or received: ends once no stream is active (or at the
    /// deadline, if one is set).
    Draining,
    /// Flushing what is buffered, then shutting the io.
    Closing,
    Done,
}

struct Driver<T> {
    io: T,
    shared: Arc<Shared>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    tx: mpsc::UnboundedSender<Cmd>,
    incoming: Option<mpsc::UnboundedSender<Stream>>,
    encoder: Result<Encoder, frame::FrameError>,
    decoder: Decoder,
    rbuf: BytesMut,
    wbuf: BytesMut,
    need_flush: bool,
    read_eof: bool,
    phase: Phase,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    gone: CancellationToken,
    ended: CancellationToken,
}

impl<T: AsyncRead + AsyncWrite + Unpin> Driver<T> {
    fn poll_drive(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.shared.driver.register(cx.waker());
        if let Err(e) = &self.encoder {
            let e = Error::Frame(e.clone());
            self.finish(e);
        }
        for _ in 0..MAX_TURNS {
            match self.phase {
                Phase::Done => return Poll::Ready(()),
                Phase::Closing => return self.poll_closing(cx),
                Phase::Running | Phase::Draining => {}
            }
            let mut progress = false;

            // Commands, while the output buffer has room.
            while self.wbuf.len() < WRITE_HIGH_WATER {
                match self.rx.poll_recv(cx) {
                    Poll::Ready(Some(cmd)) => {
                        progress = true;
                        self.command(cmd);
                    }
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            if !self.live() {
                continue;
            }

            // Output.
            match self.poll_write_out(cx, &mut progress) {
                Poll::Ready(Err(e)) => {
                    self.fail(Error::Io(Arc::new(e)));
                    continue;
                }
                Poll::Ready(Ok(())) | Poll::Pending => {}
            }

            // Input, unless a stream's buffer is full or the peer is not
            // reading what we answer.
            let blocked = self.shared.lock().blocked > 0 || self.wbuf.len() >= READ_HIGH_WATER;
            if !self.read_eof && !blocked {
                match self.poll_read_in(cx) {
                    Poll::Ready(Ok(0)) => {
                        progress = true;
                        self.read_eof = true;
                    }
                    Poll::Ready(Ok(_)) => progress = true,
                    Poll::Ready(Err(e)) => {
                        self.fail(Error::Io(Arc::new(e)));
                        continue;
                    }
                    Poll::Pending => {}
                }
            }
            loop {
                match self.decoder.decode(&mut self.rbuf) {
                    Ok(Some(frame)) => {
                        progress = true;
                        self.on_frame(frame);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "SPDY: undecodable frame from peer");
                        self.protocol_error(e);
                        break;
                    }
                }
            }
            if !self.live() {
                continue;
            }
            if self.read_eof {
                // The peer closed: whatever streams remain are cut off.
                self.begin_closing(Error::Closed, false);
                continue;
            }

            // Lifecycle.
            if self.shared.handles.load(Ordering::SeqCst) == 0 {
                self.begin_closing(Error::Closed, true);
                continue;
            }
            if self.phase == Phase::Draining {
                let active = self.shared.lock().streams.values().any(Slot::active);
                let expired = self
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if !active || expired {
                    self.begin_closing(Error::Closed, true);
                    continue;
                }
            }
            if !progress {
                return Poll::Pending;
            }
        }
        // Let other tasks run; come back at once.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn live(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Draining)
    }

    fn encode(&mut self, frame: &Frame) {
        let Ok(encoder) = &mut self.encoder else {
            return;
        };
        match encoder.encode(frame, &mut self.wbuf) {
            Ok(()) => self.need_flush = true,
            Err(e) => {
                // Only our own malformed frames get here; a failed
                // compression leaves the peer's context out of step.
                tracing::warn!(error = %e, "SPDY: cannot encode frame");
                if matches!(e, frame::FrameError::Compress(_)) {
                    self.fail(Error::Frame(e));
                }
            }
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Frame(frame) => {
                match &frame {
                    Frame::SynReply { stream_id, .. } => {
                        let st = self.shared.lock();
                        if st.streams.get(stream_id).is_none_or(|s| s.reset.is_some()) {
                            return;
                        }
                    }
                    Frame::RstStream { stream_id, .. } => {
                        let mut st = self.shared.lock();
                        if let Some(slot) = st.streams.get_mut(stream_id) {
                            slot.rst_sent = true;
                        }
                        st.maybe_remove(*stream_id);
                    }
                    _ => {}
                }
                self.encode(&frame);
            }
            Cmd::Data {
                stream_id,
                data,
                fin,
                _permit,
            } => {
                {
                    let mut st = self.shared.lock();
                    // Gone, reset by the peer or after our RST went out:
                    // drop it. (Data queued before our RST still goes, as
                    // Go's synchronous writes would have.)
                    let Some(slot) = st.streams.get_mut(&stream_id) else {
                        return;
                    };
                    if matches!(slot.reset, Some(Reset::Peer(_))) || slot.rst_sent || slot.fin_sent
                    {
                        return;
                    }
                    if fin {
                        slot.fin_sent = true;
                        st.maybe_remove(stream_id);
                    }
                }
                match frame::encode_data(stream_id, fin, &data, &mut self.wbuf) {
                    Ok(()) => self.need_flush = true,
                    Err(e) => tracing::warn!(error = %e, "SPDY: cannot encode DATA"),
                }
                // `_permit` is released here: its bytes are in the buffer.
            }
            Cmd::Close => {
                let last = {
                    let mut st = self.shared.lock();
                    if st.goaway_sent {
                        None
                    } else {
                        st.goaway_sent = true;
                        Some(st.last_peer_stream_id)
                    }
                };
                if let Some(last_good_stream_id) = last {
                    self.encode(&Frame::GoAway {
                        last_good_stream_id,
                        status: frame::GOAWAY_OK,
                    });
                }
                self.gone.cancel();
                self.phase = Phase::Draining;
                let deadline = tokio::time::Instant::now() + CLOSE_GRACE;
                match &mut self.deadline {
                    Some(d) if d.deadline() <= deadline => {}
                    _ => self.deadline = Some(Box::pin(tokio::time::sleep_until(deadline))),
                }
            }
        }
    }

    fn on_frame(&mut self, frame: Frame) {
        match frame {
            Frame::SynStream {
                stream_id,
                fin,
                unidirectional,
                headers,
                ..
            } => self.on_syn_stream(stream_id, fin, unidirectional, headers),
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            } => {
                let mut st = self.shared.lock();
                let Some(slot) = st.streams.get_mut(&stream_id) else {
                    return;
                };
                if slot.replied {
                    return;
                }
                slot.replied = true;
                slot.remote_fin |= fin;
                if let Some(tx) = slot.reply_tx.take() {
                    let _ = tx.send(Ok(headers));
                }
                slot.wake_reader();
                st.maybe_remove(stream_id);
            }
            Frame::RstStream { stream_id, status } => {
                let wake = {
                    let mut st = self.shared.lock();
                    let Some(slot) = st.streams.get_mut(&stream_id) else {
                        return;
                    };
                    if slot.reset.is_none() {
                        slot.reset = Some(Reset::Peer(status));
                    }
                    slot.fin_queued = true;
                    if let Some(tx) = slot.reply_tx.take() {
                        let _ = tx.send(Err(Error::Reset {
                            id: stream_id,
                            status,
                        }));
                    }
                    slot.wake_reader();
                    // Unread data stays readable (spdystream delivers what
                    // came before the RST, then EOF).
                    let wake = if slot.reader {
                        false
                    } else {
                        st.discard(stream_id)
                    };
                    st.maybe_remove(stream_id);
                    wake
                };
                if wake {
                    self.shared.driver.wake();
                }
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => {
                let mut st = self.shared.lock();
                let st = &mut *st;
                let Some(slot) = st.streams.get_mut(&stream_id) else {
                    // spdystream drops data for unknown streams too.
                    return;
                };
                if slot.remote_fin {
                    return;
                }
                if slot.reader && slot.reset.is_none() && !data.is_empty() {
                    slot.recv_len += data.len();
                    slot.recv.push_back(data);
                    if !slot.over && slot.recv_len >= STREAM_RECV_BUFFER {
                        slot.over = true;
                        st.blocked += 1;
                    }
                }
                slot.remote_fin |= fin;
                slot.wake_reader();
                st.maybe_remove(stream_id);
            }
            Frame::Headers { stream_id, fin, .. } => {
                let mut st = self.shared.lock();
                if let Some(slot) = st.streams.get_mut(&stream_id) {
                    if fin {
                        slot.remote_fin = true;
                        slot.wake_reader();
                    }
                }
                st.maybe_remove(stream_id);
            }
            Frame::Ping { id } => {
                let ours = {
                    let mut st = self.shared.lock();
                    if st.ours(id) {
                        if let Some(tx) = st.pings.remove(&id) {
                            let _ = tx.send(());
                        }
                        true
                    } else {
                        false
                    }
                };
                if !ours {
                    self.encode(&Frame::Ping { id });
                }
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                tracing::debug!(last_good_stream_id, status, "SPDY: GOAWAY from peer");
                let mut st = self.shared.lock();
                st.goaway_received = true;
                let refused: Vec<u32> = st
                    .streams
                    .iter()
                    .filter(|(id, s)| **id > last_good_stream_id && s.reply_tx.is_some())
                    .map(|(id, _)| *id)
                    .collect();
                let is_client = st.is_client;
                for id in refused {
                    if (id % 2 == 1) != is_client {
                        continue;
                    }
                    if let Some(slot) = st.streams.get_mut(&id) {
                        slot.reset = Some(Reset::Peer(RstStatus::REFUSED_STREAM));
                        if let Some(tx) = slot.reply_tx.take() {
                            let _ = tx.send(Err(Error::GoneAway));
                        }
                    }
                }
                drop(st);
                self.gone.cancel();
                if self.phase == Phase::Running {
                    self.phase = Phase::Draining;
                }
            }
            Frame::Settings { .. } | Frame::WindowUpdate { .. } | Frame::Unknown { .. } => {
                // spdystream ignores these too (no flow control, see above).
            }
        }
    }

    fn on_syn_stream(&mut self, id: u32, fin: bool, unidirectional: bool, headers: Headers) {
        let refuse = |driver: &mut Self, status: RstStatus| {
            tracing::debug!(stream_id = id, %status, "SPDY: refusing stream");
            driver.encode(&Frame::RstStream {
                stream_id: id,
                status,
            });
        };
        let stream = {
            let mut st = self.shared.lock();
            if st.ours(id) || id <= st.last_peer_stream_id {
                drop(st);
                return refuse(self, RstStatus::PROTOCOL_ERROR);
            }
            st.last_peer_stream_id = id;
            let open = st
                .streams
                .iter()
                .filter(|(sid, s)| !st.ours(**sid) && s.active())
                .count();
            if st.goaway_sent || self.incoming.is_none() || open >= MAX_PEER_STREAMS {
                drop(st);
                return refuse(self, RstStatus::REFUSED_STREAM);
            }
            let mut slot = Slot::new();
            slot.remote_fin = fin;
            if unidirectional {
                slot.fin_queued = true;
                slot.fin_sent = true;
            }
            st.streams.insert(id, slot);
            Stream::new(id, &self.shared, &self.tx, Arc::new(headers))
        };
        if let Some(incoming) = &self.incoming {
            if let Err(mpsc::error::SendError(stream)) = incoming.send(stream) {
                // Incoming dropped: the stream's drop refuses it.
                self.incoming = None;
                drop(stream);
            }
        }
    }

    fn poll_write_out(
        &mut self,
        cx: &mut Context<'_>,
        progress: &mut bool,
    ) -> Poll<io::Result<()>> {
        while !self.wbuf.is_empty() {
            let n = std::task::ready!(Pin::new(&mut self.io).poll_write(cx, &self.wbuf))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.wbuf.advance(n);
            *progress = true;
        }
        if self.need_flush {
            std::task::ready!(Pin::new(&mut self.io).poll_flush(cx))?;
            self.need_flush = false;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_read_in(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let start = self.rbuf.len();
        self.rbuf.resize(start + READ_CHUNK, 0);
        let Some(spare) = self.rbuf.get_mut(start..) else {
            return Poll::Ready(Ok(0));
        };
        let mut buf = ReadBuf::new(spare);
        let result = Pin::new(&mut self.io).poll_read(cx, &mut buf);
        let n = buf.filled().len();
        self.rbuf.truncate(start + n);
        match result {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(n)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn protocol_error(&mut self, e: frame::FrameError) {
        let last = {
            let mut st = self.shared.lock();
            let last = st.last_peer_stream_id;
            st.goaway_sent = true;
            last
        };
        self.encode(&Frame::GoAway {
            last_good_stream_id: last,
            status: frame::GOAWAY_PROTOCOL_ERROR,
        });
        self.begin_closing(Error::Frame(e), false);
    }

    /// An io error: nothing more can be written.
    fn fail(&mut self, e: Error) {
        tracing::debug!(error = %e, "SPDY: connection failed");
        self.wbuf.clear();
        self.finish(e);
    }

    /// Marks the session ended and flushes what is buffered (GOAWAY first
    /// if `goaway` and none went out yet).
    fn begin_closing(&mut self, reason: Error, goaway: bool) {
        if matches!(self.phase, Phase::Closing | Phase::Done) {
            return;
        }
        // Frames handles queued before letting go (FINs, RSTs).
        while let Ok(cmd) = self.rx.try_recv() {
            self.command(cmd);
            if matches!(self.phase, Phase::Done) {
                return;
            }
        }
        let last = {
            let mut st = self.shared.lock();
            let send = goaway && !st.goaway_sent;
            st.goaway_sent = true;
            send.then_some(st.last_peer_stream_id)
        };
        if let Some(last_good_stream_id) = last {
            self.encode(&Frame::GoAway {
                last_good_stream_id,
                status: frame::GOAWAY_OK,
            });
        }
        self.end_state(reason);
        self.phase = Phase::Closing;
        self.deadline = Some(Box::pin(tokio::time::sleep(SHUTDOWN_TIMEOUT)));
    }

    fn poll_closing(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut progress = false;
        let done = match self.poll_write_out(cx, &mut progress) {
            // Its outcome does not matter: the io is dropped next.
            Poll::Ready(Ok(())) => Pin::new(&mut self.io).poll_shutdown(cx).is_ready(),
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        let expired = self
            .deadline
            .as_mut()
            .is_some_and(|d| d.as_mut().poll(cx).is_ready());
        if done || expired {
            self.phase = Phase::Done;
            self.ended.cancel();
            return Poll::Ready(());
        }
        Poll::Pending
    }

    /// Ends at once (the io is dropped with the driver).
    fn finish(&mut self, reason: Error) {
        self.end_state(reason);
        self.phase = Phase::Done;
        self.ended.cancel();
    }

    /// Tells every handle the session is over.
    fn end_state(&mut self, reason: Error) {
        {
            let mut st = self.shared.lock();
            if st.ended.is_none() {
                st.ended = Some(reason.clone());
            }
            let ended = st.ended_error();
            for slot in st.streams.values_mut() {
                if let Some(tx) = slot.reply_tx.take() {
                    let _ = tx.send(Err(ended.clone()));
                }
                slot.wake_reader();
            }
            st.pings.clear();
        }
        self.incoming = None;
        self.shared.budget.close();
        self.rx.close();
        self.gone.cancel();
    }
}
