//! Sessions against each other over an in-memory pipe, and against a raw
//! frame-level peer that behaves like spdystream.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::frame::{self, Decoder, Encoder, Frame, Headers, RstStatus};
use super::*;

const PIPE: usize = 64 * 1024;

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(60), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

fn pair() -> ((Connection, Incoming), (Connection, Incoming)) {
    let (a, b) = tokio::io::duplex(PIPE);
    (Connection::client(a), Connection::server(b))
}

/// Opens a stream from `conn` while `incoming` accepts it.
async fn open_accept(
    conn: &Connection,
    incoming: &mut Incoming,
    headers: &[(&str, &str)],
) -> (Stream, Stream) {
    let (opened, accepted) = within("open/accept", async {
        tokio::join!(conn.open(headers), incoming.accept())
    })
    .await;
    (opened.unwrap(), accepted.unwrap())
}

async fn read_all(r: &mut (impl AsyncReadExt + Unpin)) -> Vec<u8> {
    let mut out = Vec::new();
    within("read to EOF", r.read_to_end(&mut out))
        .await
        .unwrap();
    out
}

#[tokio::test]
async fn streams_carry_data_both_ways_with_spdy_ids() {
    let ((client, mut client_in), (server, mut server_in)) = pair();

    let echo = tokio::spawn(async move {
        let mut ids = Vec::new();
        for _ in 0..3 {
            let mut s = server_in.accept().await.unwrap();
            ids.push(s.id());
            tokio::spawn(async move {
                let kind = s.headers().get("streamType").unwrap().to_string();
                let mut got = Vec::new();
                s.read_to_end(&mut got).await.unwrap();
                let reply = format!("{kind}:{}", String::from_utf8(got).unwrap());
                s.write_all(reply.as_bytes()).await.unwrap();
                s.shutdown().await.unwrap();
            });
        }
        (ids, server_in)
    });

    let mut streams = Vec::new();
    for kind in ["error", "stdin", "stdout"] {
        let s = within("open", client.open(&[("streamType", kind)]))
            .await
            .unwrap();
        assert_eq!(s.headers().get("streamtype"), Some(kind));
        streams.push(s);
    }
    assert_eq!(
        streams.iter().map(Stream::id).collect::<Vec<_>>(),
        [1, 3, 5]
    );
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(format!("hello {i}").as_bytes()).await.unwrap();
        s.shutdown().await.unwrap();
    }
    for (i, s) in streams.iter_mut().enumerate() {
        let kind = s.headers().get("streamtype").unwrap().to_string();
        assert_eq!(
            String::from_utf8(read_all(s).await).unwrap(),
            format!("{kind}:hello {i}")
        );
    }
    let (ids, _server_in) = within("server", echo).await.unwrap();
    assert_eq!(ids, [1, 3, 5]);

    // The server opens even ids; dropping a writable stream sends FIN.
    let (from_server, mut at_client) =
        open_accept(&server, &mut client_in, &[("port", "80")]).await;
    assert_eq!((from_server.id(), at_client.id()), (2, 2));
    assert_eq!(at_client.headers().get("port"), Some("80"));
    drop(from_server);
    assert!(read_all(&mut at_client).await.is_empty());
}

#[tokio::test]
async fn half_close_leaves_the_other_direction_open() {
    let ((client, _ci), (_server, mut server_in)) = pair();
    let (mut c, mut s) = open_accept(&client, &mut server_in, &[("streamtype", "stdin")]).await;

    c.write_all(b"to server").await.unwrap();
    c.shutdown().await.unwrap();
    let err = c.write_all(b"more").await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(read_all(&mut s).await, b"to server");

    // The server can still write after the client's FIN.
    s.write_all(b"after fin").await.unwrap();
    s.shutdown().await.unwrap();
    assert_eq!(read_all(&mut c).await, b"after fin");
}

#[tokio::test]
async fn reset_ends_the_stream_after_the_data_before_it() {
    let ((client, _ci), (_server, mut server_in)) = pair();
    let (mut c, s) = open_accept(&client, &mut server_in, &[]).await;

    let (mut sr, mut sw) = s.split();
    sw.write_all(b"abc").await.unwrap();
    sw.reset();
    // As with spdystream: the data, then EOF.
    assert_eq!(read_all(&mut c).await, b"abc");
    assert_eq!(c.peer_reset(), Some(RstStatus::CANCEL));
    // Writes to a reset stream fail on both sides.
    let mut failed = None;
    for _ in 0..64 {
        if let Err(e) = c.write_all(b"x").await {
            failed = Some(e);
            break;
        }
    }
    assert_eq!(failed.unwrap().kind(), io::ErrorKind::ConnectionReset);
    assert!(sw.write_all(b"y").await.is_err());
    assert!(read_all(&mut sr).await.is_empty());
    assert_eq!(sr.peer_reset(), None);
}

#[tokio::test]
async fn goaway_refuses_new_streams_and_lets_open_ones_finish() {
    let ((client, _ci), (server, mut server_in)) = pair();
    let (mut c, mut s) = open_accept(&client, &mut server_in, &[]).await;

    let closing = tokio::spawn({
        let server = server.clone();
        async move { server.close().await }
    });
    within("client sees GOAWAY", client.closed()).await;
    assert!(matches!(
        within("open after GOAWAY", client.open(&[])).await,
        Err(Error::GoneAway)
    ));
    assert!(matches!(server.open(&[]).await, Err(Error::Closed)));

    // The open stream still works both ways.
    c.write_all(b"late").await.unwrap();
    c.shutdown().await.unwrap();
    assert_eq!(read_all(&mut s).await, b"late");
    assert!(!closing.is_finished(), "close waits for the open stream");
    s.write_all(b"reply").await.unwrap();
    s.shutdown().await.unwrap();
    assert_eq!(read_all(&mut c).await, b"reply");

    within("close after streams end", closing).await.unwrap();
    assert!(within("accept after close", server_in.accept())
        .await
        .is_none());
    within("client ends", client.closed()).await;
}

#[tokio::test]
async fn close_without_streams_is_prompt() {
    let ((client, mut client_in), (server, mut server_in)) = pair();
    within("close", client.close()).await;
    within("server sees it", server.closed()).await;
    assert!(within("accept", server_in.accept()).await.is_none());
    assert!(within("accept", client_in.accept()).await.is_none());
    assert!(server.open(&[]).await.is_err());
    assert!(client.ping().await.is_err());
}

#[tokio::test]
async fn pings_are_echoed_both_ways() {
    let ((client, _ci), (server, _si)) = pair();
    within("client ping", client.ping()).await.unwrap();
    within("server ping", server.ping()).await.unwrap();
    within("client ping", client.ping()).await.unwrap();
}

#[tokio::test]
async fn dropping_every_handle_ends_the_session() {
    let ((client, client_in), (server, mut server_in)) = pair();
    drop(client);
    drop(client_in);
    within("server sees the end", server.closed()).await;
    assert!(within("accept", server_in.accept()).await.is_none());
}

fn pattern(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

const FIFTY_MIB: usize = 50 * 1024 * 1024;

/// Writes FIFTY_MIB of `pattern` in uneven chunks, counting progress.
async fn write_pattern(mut w: WriteHalf, written: Arc<AtomicUsize>) {
    let mut off = 0;
    let mut chunk = 1;
    while off < FIFTY_MIB {
        chunk = (chunk * 7 + 13) % 200_000 + 1;
        let n = chunk.min(FIFTY_MIB - off);
        w.write_all(&pattern(off, n)).await.unwrap();
        off += n;
        written.store(off, Ordering::SeqCst);
    }
    w.shutdown().await.unwrap();
}

/// Reads to EOF, checking the pattern; returns the byte count.
async fn check_pattern(mut r: ReadHalf) -> usize {
    let mut buf = vec![0u8; 100_000];
    let mut off = 0;
    loop {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            return off;
        }
        assert!(buf[..n] == pattern(off, n)[..], "corrupt at {off}");
        off += n;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mib_echoed_through_one_stream() {
    let ((client, _ci), (_server, mut server_in)) = pair();
    let (c, s) = open_accept(&client, &mut server_in, &[]).await;
    let echo = tokio::spawn(async move {
        let (mut r, mut w) = s.split();
        let n = tokio::io::copy(&mut r, &mut w).await.unwrap();
        w.shutdown().await.unwrap();
        n
    });
    let (r, w) = c.split();
    let writer = tokio::spawn(write_pattern(w, Arc::new(AtomicUsize::new(0))));
    let got = within("50 MiB echo", check_pattern(r)).await;
    assert_eq!(got, FIFTY_MIB);
    within("writer", writer).await.unwrap();
    assert_eq!(within("echo", echo).await.unwrap(), FIFTY_MIB as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_stalls_the_writer() {
    let ((client, _ci), (_server, mut server_in)) = pair();
    let (c, s) = open_accept(&client, &mut server_in, &[]).await;
    let (_cr, cw) = c.split();
    let written = Arc::new(AtomicUsize::new(0));
    let mut writer = tokio::spawn(write_pattern(cw, written.clone()));

    // Nobody reads: the writer must block, not buffer 50 MiB.
    let stalled = tokio::time::timeout(Duration::from_millis(500), &mut writer).await;
    assert!(stalled.is_err(), "the writer finished without a reader");
    let bound = STREAM_RECV_BUFFER + WRITE_BUDGET + 2 * 1024 * 1024;
    let so_far = written.load(Ordering::SeqCst);
    assert!(so_far <= bound, "{so_far} bytes accepted without a reader");

    let (sr, _sw) = s.split();
    assert_eq!(within("drain", check_pattern(sr)).await, FIFTY_MIB);
    within("writer", writer).await.unwrap();
}

// --- A raw peer: frames by hand, as spdystream would send them. ---

struct RawPeer {
    io: DuplexStream,
    enc: Encoder,
    dec: Decoder,
    buf: BytesMut,
}

impl RawPeer {
    fn new(io: DuplexStream) -> RawPeer {
        RawPeer {
            io,
            enc: Encoder::new().unwrap(),
            dec: Decoder::new(),
            buf: BytesMut::new(),
        }
    }

    async fn send(&mut self, f: Frame) {
        let mut out = BytesMut::new();
        self.enc.encode(&f, &mut out).unwrap();
        self.io.write_all(&out).await.unwrap();
    }

    /// The next frame, or None at EOF.
    async fn next(&mut self) -> Option<Frame> {
        within("a frame from the session", async {
            loop {
                if let Some(f) = self.dec.decode(&mut self.buf).unwrap() {
                    return Some(f);
                }
                if self.io.read_buf(&mut self.buf).await.unwrap() == 0 {
                    return None;
                }
            }
        })
        .await
    }
}

fn syn(id: u32, pairs: &[(&str, &str)]) -> Frame {
    Frame::SynStream {
        stream_id: id,
        associated_to: 0,
        priority: 0,
        slot: 0,
        fin: false,
        unidirectional: false,
        headers: Headers::from(pairs),
    }
}

#[tokio::test]
async fn speaks_to_a_peer_as_spdystream_expects() {
    let (a, b) = tokio::io::duplex(PIPE);
    let (server, mut incoming) = Connection::server(b);
    let mut peer = RawPeer::new(a);

    // SYN_STREAM -> accept -> SYN_REPLY with no headers, no FIN.
    peer.send(syn(1, &[("streamtype", "error")])).await;
    let s = within("accept", incoming.accept()).await.unwrap();
    assert_eq!(
        peer.next().await,
        Some(Frame::SynReply {
            stream_id: 1,
            fin: false,
            headers: Headers::new()
        })
    );

    // Flow-control frames are ignored; a PING with the peer's parity is
    // echoed unchanged.
    peer.send(Frame::Settings {
        clear: false,
        entries: vec![frame::Setting {
            flags: 0,
            id: 7,
            value: 1024,
        }],
    })
    .await;
    peer.send(Frame::WindowUpdate {
        stream_id: 1,
        delta: 1,
    })
    .await;
    peer.send(Frame::Ping { id: 1 }).await;
    assert_eq!(peer.next().await, Some(Frame::Ping { id: 1 }));

    // Stale and wrong-parity ids: RST_STREAM PROTOCOL_ERROR.
    peer.send(syn(1, &[])).await;
    assert_eq!(
        peer.next().await,
        Some(Frame::RstStream {
            stream_id: 1,
            status: RstStatus::PROTOCOL_ERROR
        })
    );
    peer.send(syn(4, &[])).await;
    assert_eq!(
        peer.next().await,
        Some(Frame::RstStream {
            stream_id: 4,
            status: RstStatus::PROTOCOL_ERROR
        })
    );

    // Data, then half-close as an empty DATA with FIN.
    let (mut r, mut w) = s.split();
    w.write_all(b"{\"status\":\"Success\"}").await.unwrap();
    w.shutdown().await.unwrap();
    assert_eq!(
        peer.next().await,
        Some(Frame::Data {
            stream_id: 1,
            fin: false,
            data: bytes::Bytes::from_static(b"{\"status\":\"Success\"}")
        })
    );
    assert_eq!(
        peer.next().await,
        Some(Frame::Data {
            stream_id: 1,
            fin: true,
            data: bytes::Bytes::new()
        })
    );
    // A FIN on the peer's last DATA frame ends our reads.
    peer.send(Frame::Data {
        stream_id: 1,
        fin: true,
        data: bytes::Bytes::from_static(b"in"),
    })
    .await;
    assert_eq!(read_all(&mut r).await, b"in");

    // Our SYN_STREAM: even id, names lowercase and once; a refusal fails
    // the open.
    let opening = tokio::spawn({
        let server = server.clone();
        async move {
            server
                .open(&[("StreamType", "data"), ("x", "1"), ("X", "2")])
                .await
        }
    });
    let Some(Frame::SynStream {
        stream_id, headers, ..
    }) = peer.next().await
    else {
        panic!("no SYN_STREAM")
    };
    assert_eq!(stream_id, 2);
    assert_eq!(
        headers.iter().collect::<Vec<_>>(),
        [("streamtype", "data"), ("x", "1"), ("x", "2")]
    );
    peer.send(Frame::RstStream {
        stream_id: 2,
        status: RstStatus::REFUSED_STREAM,
    })
    .await;
    assert!(matches!(
        within("open", opening).await.unwrap(),
        Err(Error::Reset {
            id: 2,
            status: RstStatus::REFUSED_STREAM
        })
    ));

    // kubectl's end of an exec: RST of what it did not finish, GOAWAY,
    // close. Nothing is left open, so the session answers GOAWAY and
    // closes the connection.
    peer.send(Frame::GoAway {
        last_good_stream_id: 0,
        status: frame::GOAWAY_OK,
    })
    .await;
    within("closed", server.closed()).await;
    assert_eq!(
        peer.next().await,
        Some(Frame::GoAway {
            last_good_stream_id: 1,
            status: frame::GOAWAY_OK
        })
    );
    assert_eq!(peer.next().await, None);
    assert!(within("accept", incoming.accept()).await.is_none());
}

#[tokio::test]
async fn a_broken_peer_gets_goaway_protocol_error() {
    let (a, b) = tokio::io::duplex(PIPE);
    let (server, _incoming) = Connection::server(b);
    let mut peer = RawPeer::new(a);
    // A SPDY/2 control frame.
    peer.io
        .write_all(&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1])
        .await
        .unwrap();
    assert_eq!(
        peer.next().await,
        Some(Frame::GoAway {
            last_good_stream_id: 0,
            status: frame::GOAWAY_PROTOCOL_ERROR
        })
    );
    assert_eq!(peer.next().await, None);
    within("closed", server.closed()).await;
    assert!(matches!(server.error(), Some(Error::Frame(_))));
}

#[tokio::test]
async fn streams_of_a_dead_connection_fail_reads() {
    let (a, b) = tokio::io::duplex(PIPE);
    let (server, mut incoming) = Connection::server(b);
    let mut peer = RawPeer::new(a);
    peer.send(syn(1, &[])).await;
    let mut s = within("accept", incoming.accept()).await.unwrap();
    drop(peer);
    let mut buf = [0u8; 8];
    // Not EOF: the stream was cut off (by EOF, or by the failed write of
    // the SYN_REPLY if that came first).
    let err = within("read", s.read(&mut buf)).await.unwrap_err();
    assert!(err.get_ref().is_some_and(|e| e.is::<Error>()), "{err:?}");
    within("closed", server.closed()).await;
}

/// Writes `frames` of the peer's PINGs (id 1, the client's parity, which
/// a server echoes) or wrong-parity SYN_STREAMs (which it refuses) and
/// never reads; returns how many bytes the session took before it stopped
/// reading, or all of them.
async fn flood_without_reading(kind: &str, frames: usize) -> usize {
    let (a, b) = tokio::io::duplex(PIPE);
    let (server, _incoming) = Connection::server(b);
    let (_read, mut write) = tokio::io::split(a);
    let kind = kind.to_string();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let mut writer = tokio::spawn(async move {
        // Header blocks share one zlib context: each batch is encoded anew.
        let mut enc = Encoder::new().unwrap();
        let mut id = 0u32;
        for _ in 0..frames / 1024 {
            let mut batch = BytesMut::new();
            for _ in 0..1024 {
                id += 2;
                let f = match kind.as_str() {
                    "ping" => Frame::Ping { id: 1 },
                    _ => syn(id, &[]),
                };
                enc.encode(&f, &mut batch).unwrap();
            }
            if let Err(e) = write.write_all(&batch).await {
                panic!("the session dropped the connection: {e}");
            }
            counter.fetch_add(batch.len(), Ordering::SeqCst);
        }
        // Held open: the session must not see EOF.
        std::future::pending::<()>().await;
    });
    // Wait until the writer stops making progress (or has sent it all).
    let mut last = usize::MAX;
    loop {
        if let Ok(done) = tokio::time::timeout(Duration::from_millis(300), &mut writer).await {
            panic!("{done:?}: the session ended: {:?}", server.error());
        }
        let now = written.load(Ordering::SeqCst);
        if now == last {
            writer.abort();
            return now;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_floods_without_reading_the_answers_is_stalled() {
    // 16 MiB of PINGs would be 16 MiB of echoes buffered for a peer that
    // reads none of them; the session stops reading instead.
    let frames = 16 * 1024 * 1024 / 12;
    let taken = within("ping flood", flood_without_reading("ping", frames)).await;
    assert!(taken < 4 * 1024 * 1024, "{taken} bytes of PINGs taken");
    // The same for streams it refuses (SYN_STREAMs with our parity, each
    // answered with RST_STREAM).
    let taken = within("refusal flood", flood_without_reading("syn", 1024 * 1024)).await;
    assert!(
        taken < 4 * 1024 * 1024,
        "{taken} bytes of SYN_STREAMs taken"
    );
}
