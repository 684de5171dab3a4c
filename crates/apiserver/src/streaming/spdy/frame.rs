//! SPDY/3 frames: their layout on the wire, and the zlib contexts that
//! compress header blocks.
//!
//! The layout follows the SPDY/3 draft as `github.com/moby/spdystream/spdy`
//! (Go's old `go.net/spdy` framer) writes and reads it:
//!
//! ```text
//! control: |1| version (15) | type (16) | flags (8) | length (24) | payload
//! data:    |0| stream id (31)           | flags (8) | length (24) | payload
//! ```
//!
//! Header blocks (SYN_STREAM, SYN_REPLY, HEADERS) are
//! `u32 count, (u32 len, name, u32 len, value)*`, with several values of one
//! name joined by NUL, compressed with zlib primed with the SPDY/3
//! dictionary. Each direction of a connection has one compression context
//! for its whole life: every block is a sync-flushed continuation of the
//! previous one, so the [`Encoder`] and [`Decoder`] must see every header
//! block of their direction, in order, even those of refused streams.
//!
//! This module only converts frames to bytes and back; it knows nothing of
//! streams (that is `session.rs`).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// The SPDY version these frames carry.
pub const VERSION: u16 = 3;
/// Bytes before any frame's payload.
pub const HEADER_LEN: usize = 8;
/// The largest payload a frame's 24-bit length can describe.
pub const MAX_PAYLOAD: usize = (1 << 24) - 1;
/// The largest decompressed header block accepted (upstream has no limit;
/// Kubernetes' blocks are a few dozen bytes). It also bounds the parsed
/// headers: each value costs its name's and its own bytes plus
/// [`HEADER_OVERHEAD`] (a value of NULs splits into many).
pub const MAX_HEADER_BLOCK: usize = 1 << 20;
/// What one parsed header value costs beyond its bytes (HTTP/2's 32).
pub const HEADER_OVERHEAD: usize = 32;
/// The most [`Decoder::decode`] reserves ahead of bytes that have not
/// arrived: a length field alone does not allocate 16 MiB.
pub const MAX_RESERVE_AHEAD: usize = 64 * 1024;

/// FIN: the sender will send nothing more on this stream.
pub const FLAG_FIN: u8 = 0x01;
/// UNIDIRECTIONAL (SYN_STREAM): the receiver must not send on this stream.
pub const FLAG_UNIDIRECTIONAL: u8 = 0x02;
/// CLEAR_SETTINGS (SETTINGS).
pub const FLAG_SETTINGS_CLEAR: u8 = 0x01;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

const STREAM_ID_MASK: u32 = 0x7fff_ffff;

/// A RST_STREAM status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RstStatus(pub u32);

impl RstStatus {
    pub const PROTOCOL_ERROR: RstStatus = RstStatus(1);
    pub const INVALID_STREAM: RstStatus = RstStatus(2);
    pub const REFUSED_STREAM: RstStatus = RstStatus(3);
    pub const UNSUPPORTED_VERSION: RstStatus = RstStatus(4);
    pub const CANCEL: RstStatus = RstStatus(5);
    pub const INTERNAL_ERROR: RstStatus = RstStatus(6);
    pub const FLOW_CONTROL_ERROR: RstStatus = RstStatus(7);
    pub const STREAM_IN_USE: RstStatus = RstStatus(8);
    pub const STREAM_ALREADY_CLOSED: RstStatus = RstStatus(9);
    pub const INVALID_CREDENTIALS: RstStatus = RstStatus(10);
    pub const FRAME_TOO_LARGE: RstStatus = RstStatus(11);
}

impl std::fmt::Display for RstStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            1 => "PROTOCOL_ERROR",
            2 => "INVALID_STREAM",
            3 => "REFUSED_STREAM",
            4 => "UNSUPPORTED_VERSION",
            5 => "CANCEL",
            6 => "INTERNAL_ERROR",
            7 => "FLOW_CONTROL_ERROR",
            8 => "STREAM_IN_USE",
            9 => "STREAM_ALREADY_CLOSED",
            10 => "INVALID_CREDENTIALS",
            11 => "FRAME_TOO_LARGE",
            other => return write!(f, "status {other}"),
        };
        f.write_str(name)
    }
}

/// GOAWAY status: OK.
pub const GOAWAY_OK: u32 = 0;
/// GOAWAY status: PROTOCOL_ERROR.
pub const GOAWAY_PROTOCOL_ERROR: u32 = 1;
/// GOAWAY status: INTERNAL_ERROR.
pub const GOAWAY_INTERNAL_ERROR: u32 = 2;

/// A stream's name/value header block. Names are lowercase on the wire;
/// lookups ignore case (Go's `http.Header` canonicalises what it reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    pub fn new() -> Headers {
        Headers(Vec::new())
    }

    /// Adds a value; a name given twice is sent once with NUL-joined values.
    pub fn append(&mut self, name: &str, value: &str) {
        self.0.push((name.to_ascii_lowercase(), value.to_string()));
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All (name, value) pairs, names lowercase.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&[(&str, &str)]> for Headers {
    fn from(pairs: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (n, v) in pairs {
            h.append(n, v);
        }
        h
    }
}

/// One SETTINGS entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub flags: u8,
    pub id: u32,
    pub value: u32,
}

/// A frame in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream_id: u32,
        associated_to: u32,
        /// 0 (highest) to 7.
        priority: u8,
        slot: u8,
        fin: bool,
        unidirectional: bool,
        headers: Headers,
    },
    SynReply {
        stream_id: u32,
        fin: bool,
        headers: Headers,
    },
    RstStream {
        stream_id: u32,
        status: RstStatus,
    },
    Settings {
        clear: bool,
        entries: Vec<Setting>,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    Headers {
        stream_id: u32,
        fin: bool,
        headers: Headers,
    },
    WindowUpdate {
        stream_id: u32,
        delta: u32,
    },
    Data {
        stream_id: u32,
        fin: bool,
        data: Bytes,
    },
    /// A control frame of a type SPDY/3 does not define (CREDENTIAL, or
    /// later drafts'): the spec says to ignore it.
    Unknown {
        kind: u16,
        flags: u8,
        payload: Bytes,
    },
}

/// Why bytes are not a valid frame, or a frame cannot be written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FrameError {
    #[error("SPDY version {0} control frame (only 3 is spoken)")]
    UnsupportedVersion(u16),
    #[error("{kind} frame with invalid length {len}")]
    InvalidLength { kind: &'static str, len: usize },
    #[error("{kind} frame for stream 0")]
    ZeroStreamId { kind: &'static str },
    #[error("{kind} frame with status 0")]
    ZeroStatus { kind: &'static str },
    #[error("PING frame with id 0")]
    ZeroPingId,
    #[error("frame payload of {len} bytes exceeds the 24-bit length")]
    TooLarge { len: usize },
    #[error("malformed header block: {0}")]
    HeaderBlock(&'static str),
    #[error("header block larger than {limit} bytes decompressed")]
    HeaderBlockTooLarge { limit: usize },
    #[error("header block wants zlib dictionary {adler:#010x}, not SPDY/3's")]
    WrongDictionary { adler: u32 },
    #[error("header block decompression failed")]
    Decompress(#[source] flate2::DecompressError),
    #[error("header block compression failed")]
    Compress(#[source] flate2::CompressError),
}

/// The SPDY/3 zlib dictionary, byte for byte as Go's framer has it
/// (`moby/spdystream/spdy/dictionary.go`; the draft's, without a trailing
/// NUL). zlib names it by its Adler-32, so one wrong byte fails every
/// header block.
pub const DICTIONARY: &[u8] = b"\
\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\
\x00\x00\x00\x03put\x00\x00\x00\x06delete\x00\x00\x00\x05trace\
\x00\x00\x00\x06accept\x00\x00\x00\x0eaccept-charset\
\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language\
\x00\x00\x00\x0daccept-ranges\x00\x00\x00\x03age\x00\x00\x00\x05allow\
\x00\x00\x00\x0dauthorization\x00\x00\x00\x0dcache-control\
\x00\x00\x00\x0aconnection\x00\x00\x00\x0ccontent-base\
\x00\x00\x00\x10content-encoding\x00\x00\x00\x10content-language\
\x00\x00\x00\x0econtent-length\x00\x00\x00\x10content-location\
\x00\x00\x00\x0bcontent-md5\x00\x00\x00\x0dcontent-range\
\x00\x00\x00\x0ccontent-type\x00\x00\x00\x04date\x00\x00\x00\x04etag\
\x00\x00\x00\x06expect\x00\x00\x00\x07expires\x00\x00\x00\x04from\
\x00\x00\x00\x04host\x00\x00\x00\x08if-match\
\x00\x00\x00\x11if-modified-since\x00\x00\x00\x0dif-none-match\
\x00\x00\x00\x08if-range\x00\x00\x00\x13if-unmodified-since\
\x00\x00\x00\x0dlast-modified\x00\x00\x00\x08location\
\x00\x00\x00\x0cmax-forwards\x00\x00\x00\x06pragma\
\x00\x00\x00\x12proxy-authenticate\x00\x00\x00\x13proxy-authorization\
\x00\x00\x00\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after\
\x00\x00\x00\x06server\x00\x00\x00\x02te\x00\x00\x00\x07trailer\
\x00\x00\x00\x11transfer-encoding\x00\x00\x00\x07upgrade\
\x00\x00\x00\x0auser-agent\x00\x00\x00\x04vary\x00\x00\x00\x03via\
\x00\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\
\x00\x00\x00\x06method\x00\x00\x00\x03get\x00\x00\x00\x06status\
\x00\x00\x00\x06200 OK\x00\x00\x00\x07version\x00\x00\x00\x08HTTP/1.1\
\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00\x0aset-cookie\
\x00\x00\x00\x0akeep-alive\x00\x00\x00\x06origin\
100101201202205206300302303304305306307402405406407408409410411412413414\
415416417502504505\
203 Non-Authoritative Information204 No Content301 Moved Permanently\
400 Bad Request401 Unauthorized403 Forbidden404 Not Found\
500 Internal Server Error501 Not Implemented503 Service Unavailable\
Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 \
Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT\
chunked,text/html,image/png,image/jpg,image/gif,application/xml,\
application/xhtml+xml,text/plain,text/javascript,public\
privatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

/// Compresses this side's header blocks (one context per connection).
pub struct Encoder {
    deflate: Compress,
    raw: Vec<u8>,
    packed: Vec<u8>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("total_in", &self.deflate.total_in())
            .finish()
    }
}

impl Encoder {
    /// A fresh context, zlib level 9 (Go's `zlib.BestCompression`) with the
    /// SPDY/3 dictionary.
    pub fn new() -> Result<Encoder, FrameError> {
        let mut deflate = Compress::new(Compression::best(), true);
        deflate
            .set_dictionary(DICTIONARY)
            .map_err(FrameError::Compress)?;
        Ok(Encoder {
            deflate,
            raw: Vec::new(),
            packed: Vec::new(),
        })
    }

    /// Appends `frame` to `dst`.
    pub fn encode(&mut self, frame: &Frame, dst: &mut BytesMut) -> Result<(), FrameError> {
        match frame {
            Frame::SynStream {
                stream_id,
                associated_to,
                priority,
                slot,
                fin,
                unidirectional,
                headers,
            } => {
                nonzero(*stream_id, "SYN_STREAM")?;
                self.compress(headers)?;
                let flags = flag(*fin, FLAG_FIN) | flag(*unidirectional, FLAG_UNIDIRECTIONAL);
                control_header(dst, TYPE_SYN_STREAM, flags, 10 + self.packed.len())?;
                dst.put_u32(stream_id & STREAM_ID_MASK);
                dst.put_u32(associated_to & STREAM_ID_MASK);
                dst.put_u8((priority & 0x07) << 5);
                dst.put_u8(*slot);
                dst.extend_from_slice(&self.packed);
            }
            Frame::SynReply {
                stream_id,
                fin,
                headers,
            } => {
                nonzero(*stream_id, "SYN_REPLY")?;
                self.compress(headers)?;
                control_header(
                    dst,
                    TYPE_SYN_REPLY,
                    flag(*fin, FLAG_FIN),
                    4 + self.packed.len(),
                )?;
                dst.put_u32(stream_id & STREAM_ID_MASK);
                dst.extend_from_slice(&self.packed);
            }
            Frame::Headers {
                stream_id,
                fin,
                headers,
            } => {
                nonzero(*stream_id, "HEADERS")?;
                self.compress(headers)?;
                control_header(
                    dst,
                    TYPE_HEADERS,
                    flag(*fin, FLAG_FIN),
                    4 + self.packed.len(),
                )?;
                dst.put_u32(stream_id & STREAM_ID_MASK);
                dst.extend_from_slice(&self.packed);
            }
            Frame::RstStream { stream_id, status } => {
                nonzero(*stream_id, "RST_STREAM")?;
                if status.0 == 0 {
                    return Err(FrameError::ZeroStatus { kind: "RST_STREAM" });
                }
                control_header(dst, TYPE_RST_STREAM, 0, 8)?;
                dst.put_u32(stream_id & STREAM_ID_MASK);
                dst.put_u32(status.0);
            }
            Frame::Settings { clear, entries } => {
                control_header(
                    dst,
                    TYPE_SETTINGS,
                    flag(*clear, FLAG_SETTINGS_CLEAR),
                    4 + 8 * entries.len(),
                )?;
                dst.put_u32(len_u32(entries.len())?);
                for e in entries {
                    dst.put_u32((u32::from(e.flags) << 24) | (e.id & 0x00ff_ffff));
                    dst.put_u32(e.value);
                }
            }
            Frame::Ping { id } => {
                if *id == 0 {
                    return Err(FrameError::ZeroPingId);
                }
                control_header(dst, TYPE_PING, 0, 4)?;
                dst.put_u32(*id);
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                control_header(dst, TYPE_GOAWAY, 0, 8)?;
                dst.put_u32(last_good_stream_id & STREAM_ID_MASK);
                dst.put_u32(*status);
            }
            Frame::WindowUpdate { stream_id, delta } => {
                control_header(dst, TYPE_WINDOW_UPDATE, 0, 8)?;
                dst.put_u32(stream_id & STREAM_ID_MASK);
                dst.put_u32(delta & STREAM_ID_MASK);
            }
            Frame::Data {
                stream_id,
                fin,
                data,
            } => encode_data(*stream_id, *fin, data, dst)?,
            Frame::Unknown {
                kind,
                flags,
                payload,
            } => {
                control_header(dst, *kind, *flags, payload.len())?;
                dst.extend_from_slice(payload);
            }
        }
        Ok(())
    }

    /// Serialises `headers` and compresses them into `self.packed`, a
    /// sync-flushed continuation of this context's stream.
    fn compress(&mut self, headers: &Headers) -> Result<(), FrameError> {
        self.raw.clear();
        write_header_block(headers, &mut self.raw)?;
        self.packed.clear();
        let mut consumed = 0;
        loop {
            self.packed
                .reserve(self.raw.len().saturating_sub(consumed) + 64);
            let before = self.deflate.total_in();
            let input = self.raw.get(consumed..).unwrap_or_default();
            self.deflate
                .compress_vec(input, &mut self.packed, FlushCompress::Sync)
                .map_err(FrameError::Compress)?;
            consumed += usize::try_from(self.deflate.total_in() - before).unwrap_or(usize::MAX);
            // Sync flush is complete once all input is taken and the output
            // was not filled to the brim (zlib's avail_out != 0).
            if consumed >= self.raw.len() && self.packed.len() < self.packed.capacity() {
                return Ok(());
            }
        }
    }
}

/// Appends a DATA frame (no compression involved).
pub fn encode_data(
    stream_id: u32,
    fin: bool,
    data: &[u8],
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    nonzero(stream_id, "DATA")?;
    if data.len() > MAX_PAYLOAD {
        return Err(FrameError::TooLarge { len: data.len() });
    }
    dst.reserve(HEADER_LEN + data.len());
    dst.put_u32(stream_id & STREAM_ID_MASK);
    dst.put_u32((u32::from(flag(fin, FLAG_FIN)) << 24) | len_u32(data.len())?);
    dst.extend_from_slice(data);
    Ok(())
}

/// Decompresses the peer's header blocks (one context per connection).
pub struct Decoder {
    inflate: Decompress,
    max_header_block: usize,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("total_in", &self.inflate.total_in())
            .finish()
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            inflate: Decompress::new(true),
            max_header_block: MAX_HEADER_BLOCK,
        }
    }

    /// Takes one frame off the front of `buf`, or `None` if `buf` does not
    /// hold a whole frame yet. An error leaves the connection unusable
    /// (the compression context may be out of step).
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(head) = buf
            .get(..HEADER_LEN)
            .and_then(|h| <[u8; HEADER_LEN]>::try_from(h).ok())
        else {
            return Ok(None);
        };
        let [a, b, c, d, flags, l0, l1, l2] = head;
        let first = u32::from_be_bytes([a, b, c, d]);
        let len = usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2);
        if buf.len() < HEADER_LEN + len {
            // The rest arrives as it does; only a bounded part is reserved.
            buf.reserve((HEADER_LEN + len - buf.len()).min(MAX_RESERVE_AHEAD));
            return Ok(None);
        }
        buf.advance(HEADER_LEN);
        let mut payload = buf.split_to(len).freeze();
        if first & 0x8000_0000 == 0 {
            let stream_id = first & STREAM_ID_MASK;
            nonzero(stream_id, "DATA")?;
            return Ok(Some(Frame::Data {
                stream_id,
                fin: flags & FLAG_FIN != 0,
                data: payload,
            }));
        }
        let version = ((first >> 16) & 0x7fff) as u16;
        let kind = (first & 0xffff) as u16;
        if version != VERSION {
            return Err(FrameError::UnsupportedVersion(version));
        }
        let fin = flags & FLAG_FIN != 0;
        let frame = match kind {
            TYPE_SYN_STREAM => {
                at_least(&payload, 10, "SYN_STREAM")?;
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                let associated_to = payload.get_u32() & STREAM_ID_MASK;
                let priority = payload.get_u8() >> 5;
                let slot = payload.get_u8();
                let headers = self.decompress(&payload)?;
                nonzero(stream_id, "SYN_STREAM")?;
                Frame::SynStream {
                    stream_id,
                    associated_to,
                    priority,
                    slot,
                    fin,
                    unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                    headers,
                }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                let name = if kind == TYPE_SYN_REPLY {
                    "SYN_REPLY"
                } else {
                    "HEADERS"
                };
                at_least(&payload, 4, name)?;
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                let headers = self.decompress(&payload)?;
                nonzero(stream_id, name)?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply {
                        stream_id,
                        fin,
                        headers,
                    }
                } else {
                    Frame::Headers {
                        stream_id,
                        fin,
                        headers,
                    }
                }
            }
            TYPE_RST_STREAM => {
                exactly(&payload, 8, "RST_STREAM")?;
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                let status = RstStatus(payload.get_u32());
                nonzero(stream_id, "RST_STREAM")?;
                if status.0 == 0 {
                    return Err(FrameError::ZeroStatus { kind: "RST_STREAM" });
                }
                Frame::RstStream { stream_id, status }
            }
            TYPE_SETTINGS => {
                at_least(&payload, 4, "SETTINGS")?;
                let count = payload.get_u32() as usize;
                if payload.len() != count.saturating_mul(8) {
                    return Err(FrameError::InvalidLength {
                        kind: "SETTINGS",
                        len,
                    });
                }
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    let word = payload.get_u32();
                    entries.push(Setting {
                        flags: (word >> 24) as u8,
                        id: word & 0x00ff_ffff,
                        value: payload.get_u32(),
                    });
                }
                Frame::Settings {
                    clear: flags & FLAG_SETTINGS_CLEAR != 0,
                    entries,
                }
            }
            TYPE_PING => {
                exactly(&payload, 4, "PING")?;
                let id = payload.get_u32();
                if id == 0 {
                    return Err(FrameError::ZeroPingId);
                }
                Frame::Ping { id }
            }
            TYPE_GOAWAY => {
                exactly(&payload, 8, "GOAWAY")?;
                Frame::GoAway {
                    last_good_stream_id: payload.get_u32() & STREAM_ID_MASK,
                    status: payload.get_u32(),
                }
            }
            TYPE_WINDOW_UPDATE => {
                exactly(&payload, 8, "WINDOW_UPDATE")?;
                Frame::WindowUpdate {
                    stream_id: payload.get_u32() & STREAM_ID_MASK,
                    delta: payload.get_u32() & STREAM_ID_MASK,
                }
            }
            kind => Frame::Unknown {
                kind,
                flags,
                payload,
            },
        };
        Ok(Some(frame))
    }

    /// Inflates one header block (a sync-flushed piece of the connection's
    /// zlib stream) and parses it.
    fn decompress(&mut self, input: &[u8]) -> Result<Headers, FrameError> {
        let mut out = Vec::with_capacity(input.len().saturating_mul(4).max(256));
        let mut consumed = 0;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= self.max_header_block {
                    return Err(FrameError::HeaderBlockTooLarge {
                        limit: self.max_header_block,
                    });
                }
                out.reserve(out.len().max(256));
            }
            let before_in = self.inflate.total_in();
            let before_out = out.len();
            let rest = input.get(consumed..).unwrap_or_default();
            let result = self
                .inflate
                .decompress_vec(rest, &mut out, FlushDecompress::Sync);
            consumed += usize::try_from(self.inflate.total_in() - before_in).unwrap_or(usize::MAX);
            match result {
                Ok(Status::StreamEnd) => break,
                Ok(_) => {
                    if consumed >= input.len() && out.len() < out.capacity() {
                        break;
                    }
                    if out.len() == before_out
                        && self.inflate.total_in() == before_in
                        && out.len() < out.capacity()
                    {
                        return Err(FrameError::HeaderBlock("truncated zlib data"));
                    }
                }
                Err(e) => match e.needs_dictionary() {
                    Some(adler) => {
                        let ours = self
                            .inflate
                            .set_dictionary(DICTIONARY)
                            .map_err(FrameError::Decompress)?;
                        if ours != adler {
                            return Err(FrameError::WrongDictionary { adler });
                        }
                    }
                    None => return Err(FrameError::Decompress(e)),
                },
            }
        }
        if out.len() > self.max_header_block {
            return Err(FrameError::HeaderBlockTooLarge {
                limit: self.max_header_block,
            });
        }
        read_header_block(&out)
    }
}

fn write_header_block(headers: &Headers, out: &mut Vec<u8>) -> Result<(), FrameError> {
    // Go's reader rejects (and drops the connection on) a name sent twice or
    // not in lowercase: merge values of one name with NUL, lowercase names.
    let mut merged: Vec<(String, String)> = Vec::new();
    for (name, value) in headers.iter() {
        let name = name.to_ascii_lowercase();
        match merged.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => {
                v.push('\0');
                v.push_str(value);
            }
            None => merged.push((name, value.to_string())),
        }
    }
    out.put_u32(len_u32(merged.len())?);
    for (name, value) in &merged {
        out.put_u32(len_u32(name.len())?);
        out.extend_from_slice(name.as_bytes());
        out.put_u32(len_u32(value.len())?);
        out.extend_from_slice(value.as_bytes());
    }
    Ok(())
}

fn read_header_block(mut block: &[u8]) -> Result<Headers, FrameError> {
    if block.len() < 4 {
        return Err(FrameError::HeaderBlock("no pair count"));
    }
    let count = block.get_u32();
    let mut headers = Headers::new();
    // Every value gets its own copy of the name: bound what that costs.
    let mut cost = 0usize;
    for _ in 0..count {
        let name = read_string(&mut block)?;
        let value = read_string(&mut block)?;
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        for v in value.split(|b| *b == 0) {
            cost = cost.saturating_add(name.len() + v.len() + HEADER_OVERHEAD);
            if cost > MAX_HEADER_BLOCK {
                return Err(FrameError::HeaderBlockTooLarge {
                    limit: MAX_HEADER_BLOCK,
                });
            }
            headers
                .0
                .push((name.clone(), String::from_utf8_lossy(v).into_owned()));
        }
    }
    Ok(headers)
}

fn read_string<'a>(block: &mut &'a [u8]) -> Result<&'a [u8], FrameError> {
    if block.len() < 4 {
        return Err(FrameError::HeaderBlock("truncated length"));
    }
    let len = block.get_u32() as usize;
    let Some(s) = block.get(..len) else {
        return Err(FrameError::HeaderBlock("truncated name or value"));
    };
    block.advance(len);
    Ok(s)
}

fn control_header(dst: &mut BytesMut, kind: u16, flags: u8, len: usize) -> Result<(), FrameError> {
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLarge { len });
    }
    dst.reserve(HEADER_LEN + len);
    dst.put_u16(0x8000 | VERSION);
    dst.put_u16(kind);
    dst.put_u32((u32::from(flags) << 24) | len_u32(len)?);
    Ok(())
}

fn flag(on: bool, bit: u8) -> u8 {
    if on {
        bit
    } else {
        0
    }
}

fn len_u32(len: usize) -> Result<u32, FrameError> {
    u32::try_from(len).map_err(|_| FrameError::TooLarge { len })
}

fn nonzero(stream_id: u32, kind: &'static str) -> Result<(), FrameError> {
    if stream_id & STREAM_ID_MASK == 0 {
        return Err(FrameError::ZeroStreamId { kind });
    }
    Ok(())
}

fn at_least(payload: &[u8], n: usize, kind: &'static str) -> Result<(), FrameError> {
    if payload.len() < n {
        return Err(FrameError::InvalidLength {
            kind,
            len: payload.len(),
        });
    }
    Ok(())
}

fn exactly(payload: &[u8], n: usize, kind: &'static str) -> Result<(), FrameError> {
    if payload.len() != n {
        return Err(FrameError::InvalidLength {
            kind,
            len: payload.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What kubectl 1.33 sent after the SPDY/3.1 upgrade of
    /// `echo hi | kubectl exec -i p -- cat` (captured on loopback): four
    /// SYN_STREAMs (error, stdin, stdout, stderr; ids 1, 3, 5, 7) whose
    /// header blocks share Go's zlib context, then "hi\n" on stdin and an
    /// empty DATA with FIN.
    const KUBECTL_CAPTURE: &str = "\
80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a6800000000ffff\
800300010000001700000003000000000000c22e555c92929907000000ffff\
800300010000001900000005000000000000c22ac5565c92925f5a02000000ffff\
800300010000001500000007000000000000c229975a5404000000ffff\
000000030000000368690a\
0000000301000000";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decode_all(decoder: &mut Decoder, bytes: &[u8]) -> Vec<Frame> {
        let mut buf = BytesMut::from(bytes);
        let mut frames = Vec::new();
        while let Some(f) = decoder.decode(&mut buf).unwrap() {
            frames.push(f);
        }
        assert!(buf.is_empty(), "{} bytes left", buf.len());
        frames
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        Headers::from(pairs)
    }

    #[test]
    fn dictionary_is_spdy3s() {
        assert_eq!(DICTIONARY.len(), 1423);
        let mut c = Compress::new(Compression::best(), true);
        // Go's zlib header in the capture names this Adler-32.
        assert_eq!(c.set_dictionary(DICTIONARY).unwrap(), 0xe3c6_a7c2);
    }

    #[test]
    fn decodes_kubectls_frames_with_one_context() {
        let frames = decode_all(&mut Decoder::new(), &unhex(KUBECTL_CAPTURE));
        let kinds: Vec<(u32, Option<&str>)> = frames
            .iter()
            .filter_map(|f| match f {
                Frame::SynStream {
                    stream_id, headers, ..
                } => Some((*stream_id, headers.get("streamType"))),
                _ => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (1, Some("error")),
                (3, Some("stdin")),
                (5, Some("stdout")),
                (7, Some("stderr"))
            ]
        );
        for f in &frames[..4] {
            let Frame::SynStream {
                fin,
                unidirectional,
                priority,
                headers,
                ..
            } = f
            else {
                unreachable!()
            };
            assert!(!fin && !unidirectional);
            assert_eq!(*priority, 0);
            assert_eq!(headers.len(), 1);
        }
        assert_eq!(
            frames[4..],
            [
                Frame::Data {
                    stream_id: 3,
                    fin: false,
                    data: Bytes::from_static(b"hi\n")
                },
                Frame::Data {
                    stream_id: 3,
                    fin: true,
                    data: Bytes::new()
                }
            ]
        );
    }

    #[test]
    fn a_context_that_missed_a_block_cannot_read_the_next() {
        let bytes = unhex(KUBECTL_CAPTURE);
        // Skip the first frame (0x29 + 8 bytes): the second block refers
        // back into the first one's output and lacks the zlib header.
        let mut fresh = Decoder::new();
        let mut buf = BytesMut::from(&bytes[8 + 0x29..]);
        assert!(fresh.decode(&mut buf).is_err());
    }

    #[test]
    fn header_blocks_need_the_dictionary() {
        let bytes = unhex(KUBECTL_CAPTURE);
        // The first block's zlib stream, inflated without a dictionary.
        let block = &bytes[8 + 10..8 + 0x29];
        let mut plain = Decompress::new(true);
        let mut out = Vec::with_capacity(256);
        let err = plain
            .decompress_vec(block, &mut out, FlushDecompress::Sync)
            .unwrap_err();
        assert_eq!(err.needs_dictionary(), Some(0xe3c6_a7c2));
    }

    #[test]
    fn every_frame_round_trips_and_blocks_share_a_context() {
        let frames = vec![
            Frame::SynStream {
                stream_id: 1,
                associated_to: 0,
                priority: 3,
                slot: 0,
                fin: false,
                unidirectional: true,
                headers: headers(&[("streamtype", "error")]),
            },
            Frame::SynReply {
                stream_id: 1,
                fin: false,
                headers: Headers::new(),
            },
            Frame::SynStream {
                stream_id: 3,
                associated_to: 1,
                priority: 7,
                slot: 2,
                fin: true,
                unidirectional: false,
                headers: headers(&[("streamtype", "data"), ("port", "8080"), ("requestid", "0")]),
            },
            Frame::Headers {
                stream_id: 3,
                fin: true,
                headers: headers(&[("x", "1")]),
            },
            Frame::RstStream {
                stream_id: 3,
                status: RstStatus::CANCEL,
            },
            Frame::Settings {
                clear: true,
                entries: vec![Setting {
                    flags: 1,
                    id: 7,
                    value: 65536,
                }],
            },
            Frame::Ping { id: 0x7fff_ffff },
            Frame::GoAway {
                last_good_stream_id: 7,
                status: GOAWAY_PROTOCOL_ERROR,
            },
            Frame::WindowUpdate {
                stream_id: 5,
                delta: 1 << 20,
            },
            Frame::Data {
                stream_id: 5,
                fin: false,
                data: Bytes::from(vec![7u8; 100_000]),
            },
            Frame::Data {
                stream_id: 5,
                fin: true,
                data: Bytes::new(),
            },
            Frame::Unknown {
                kind: 10,
                flags: 0,
                payload: Bytes::from_static(b"cred"),
            },
            Frame::SynReply {
                stream_id: 2,
                fin: true,
                headers: headers(&[("streamtype", "error")]),
            },
        ];
        let mut enc = Encoder::new().unwrap();
        let mut wire = BytesMut::new();
        for f in &frames {
            enc.encode(f, &mut wire).unwrap();
        }
        assert_eq!(decode_all(&mut Decoder::new(), &wire), frames);

        // Fed a byte at a time, nothing is decoded early.
        let mut dec = Decoder::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire.iter() {
            buf.extend_from_slice(&[*b]);
            while let Some(f) = dec.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
    }

    #[test]
    fn header_names_go_lowercase_and_once() {
        let mut h = Headers::new();
        h.append("StreamType", "data");
        h.append("X-Multi", "a");
        h.append("x-multi", "b");
        let mut raw = Vec::new();
        write_header_block(&h, &mut raw).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&2u32.to_be_bytes());
        for s in ["streamtype", "data", "x-multi", "a\0b"] {
            want.extend_from_slice(&(s.len() as u32).to_be_bytes());
            want.extend_from_slice(s.as_bytes());
        }
        assert_eq!(raw, want);
        let back = read_header_block(&raw).unwrap();
        assert_eq!(back.get_all("X-MULTI").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(back.get("streamtype"), Some("data"));
    }

    #[test]
    fn wire_layout_is_spdy3s() {
        let mut enc = Encoder::new().unwrap();
        let mut wire = BytesMut::new();
        enc.encode(&Frame::Ping { id: 2 }, &mut wire).unwrap();
        enc.encode(
            &Frame::RstStream {
                stream_id: 5,
                status: RstStatus::REFUSED_STREAM,
            },
            &mut wire,
        )
        .unwrap();
        enc.encode(
            &Frame::GoAway {
                last_good_stream_id: 3,
                status: GOAWAY_OK,
            },
            &mut wire,
        )
        .unwrap();
        encode_data(9, true, b"", &mut wire).unwrap();
        encode_data(9, false, b"ab", &mut wire).unwrap();
        assert_eq!(
            wire.to_vec(),
            unhex(concat!(
                "800300060000000400000002",
                "80030003000000080000000500000003",
                "80030007000000080000000300000000",
                "0000000901000000",
                "00000009000000026162",
            ))
        );
    }

    #[test]
    fn rejects_malformed_frames() {
        let cases: &[(&str, &str)] = &[
            ("80020006000000040000000a", "version 2"),
            ("800300030000000800000001 00000000", "RST status 0"),
            ("8003000600000003000001", "PING length 3"),
            ("80030006000000040000 0000", "PING id 0"),
            ("0000000000000001ff", "DATA stream 0"),
            ("80030007000000040000 0001", "GOAWAY length 4"),
            (
                "80030004000000080000000200000000",
                "SETTINGS count 2 in 4 bytes",
            ),
            ("8003000100000004 00000001", "SYN_STREAM too short"),
        ];
        for (hex, what) in cases {
            let bytes = unhex(&hex.replace(' ', ""));
            let mut buf = BytesMut::from(&bytes[..]);
            assert!(Decoder::new().decode(&mut buf).is_err(), "{what}");
        }
    }

    #[test]
    fn bounds_decompressed_header_blocks() {
        let big = "x".repeat(MAX_HEADER_BLOCK + 1);
        let mut enc = Encoder::new().unwrap();
        let mut wire = BytesMut::new();
        enc.encode(
            &Frame::SynReply {
                stream_id: 1,
                fin: false,
                headers: headers(&[("big", &big)]),
            },
            &mut wire,
        )
        .unwrap();
        // Compresses to a few KiB: a zip bomb for a decoder without a bound.
        assert!(wire.len() < 16 * 1024, "{}", wire.len());
        let err = Decoder::new().decode(&mut wire).unwrap_err();
        assert!(
            matches!(err, FrameError::HeaderBlockTooLarge { .. }),
            "{err}"
        );
    }

    /// Decodes what `bytes` holds, fed in chunks of `chunk` bytes: the
    /// frames, and whether it ended in an error. Never panics.
    fn decode_chunked(bytes: &[u8], chunk: usize) -> (Vec<Frame>, bool) {
        let mut dec = Decoder::new();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for piece in bytes.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match dec.decode(&mut buf) {
                    Ok(Some(f)) => frames.push(f),
                    Ok(None) => break,
                    Err(_) => return (frames, true),
                }
            }
        }
        (frames, false)
    }

    #[test]
    fn a_length_claiming_16_mib_allocates_little_before_it_arrives() {
        // DATA on stream 1 claiming the largest payload, and 10 bytes of it.
        let mut wire = vec![0, 0, 0, 1, 0, 0xff, 0xff, 0xff];
        wire.extend_from_slice(&[7; 10]);
        let mut buf = BytesMut::from(&wire[..]);
        let mut dec = Decoder::new();
        assert_eq!(dec.decode(&mut buf).unwrap(), None);
        assert!(
            buf.capacity() <= wire.len() + MAX_RESERVE_AHEAD,
            "{} bytes reserved",
            buf.capacity()
        );
        // The same for a control frame (an unknown type, so all of it is
        // payload).
        let mut buf = BytesMut::from(&[0x80, 0x03, 0x00, 0x0a, 0, 0xff, 0xff, 0xff][..]);
        assert_eq!(dec.decode(&mut buf).unwrap(), None);
        assert!(buf.capacity() <= 8 + MAX_RESERVE_AHEAD);
        // Once it has all arrived, it is one frame.
        let mut buf = BytesMut::from(&wire[..8]);
        buf.extend_from_slice(&vec![7; MAX_PAYLOAD]);
        match dec.decode(&mut buf).unwrap() {
            Some(Frame::Data {
                stream_id: 1, data, ..
            }) => assert_eq!(data.len(), MAX_PAYLOAD),
            other => panic!("{other:?}"),
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn zero_length_frames_are_decoded_or_refused() {
        let mut dec = Decoder::new();
        let mut buf = BytesMut::from(&[0, 0, 0, 5, 0, 0, 0, 0][..]);
        assert_eq!(
            dec.decode(&mut buf).unwrap(),
            Some(Frame::Data {
                stream_id: 5,
                fin: false,
                data: Bytes::new()
            })
        );
        // Every defined control type needs a payload; unknown ones are
        // ignored whatever they hold.
        for kind in 1..=9u8 {
            let mut buf = BytesMut::from(&[0x80, 0x03, 0x00, kind, 0, 0, 0, 0][..]);
            let got = Decoder::new().decode(&mut buf);
            match kind {
                5 => assert!(
                    matches!(got, Ok(Some(Frame::Unknown { kind: 5, .. }))),
                    "{got:?}"
                ),
                _ => assert!(got.is_err(), "type {kind}: {got:?}"),
            }
        }
        // SYN_STREAM and SYN_REPLY with an empty header block.
        for frame in [
            &[
                0x80, 0x03, 0x00, 0x01, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
            ][..],
            &[0x80, 0x03, 0x00, 0x02, 0, 0, 0, 4, 0, 0, 0, 1][..],
        ] {
            let mut buf = BytesMut::from(frame);
            assert!(Decoder::new().decode(&mut buf).is_err());
        }
        // SETTINGS claiming 4 billion entries in 4 bytes.
        let mut buf =
            BytesMut::from(&[0x80, 0x03, 0x00, 0x04, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff][..]);
        assert!(Decoder::new().decode(&mut buf).is_err());
    }

    #[test]
    fn header_values_split_on_nul_do_not_multiply_their_name() {
        // One name of 1 KiB whose value is 128 Ki NULs: 128 Ki values, each
        // with its own copy of the name (128 MiB) without a bound.
        let name = "n".repeat(1024);
        let nuls = "\0".repeat(128 * 1024);
        let mut enc = Encoder::new().unwrap();
        let mut wire = BytesMut::new();
        enc.encode(
            &Frame::SynReply {
                stream_id: 1,
                fin: false,
                headers: headers(&[(&name, &nuls)]),
            },
            &mut wire,
        )
        .unwrap();
        assert!(wire.len() < 4096, "{}", wire.len());
        let err = Decoder::new().decode(&mut wire).unwrap_err();
        assert!(
            matches!(err, FrameError::HeaderBlockTooLarge { .. }),
            "{err}"
        );
        // Many short values are still fine.
        let many = vec!["v"; 1000].join("\0");
        let mut wire = BytesMut::new();
        Encoder::new()
            .unwrap()
            .encode(
                &Frame::SynReply {
                    stream_id: 1,
                    fin: false,
                    headers: headers(&[("port", &many)]),
                },
                &mut wire,
            )
            .unwrap();
        let Some(Frame::SynReply { headers, .. }) = Decoder::new().decode(&mut wire).unwrap()
        else {
            panic!("no SYN_REPLY");
        };
        assert_eq!(headers.len(), 1000);
    }

    #[test]
    fn random_and_truncated_bytes_never_panic() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let capture = unhex(KUBECTL_CAPTURE);
        // Every prefix: whole frames decode, the rest waits.
        for cut in 0..capture.len() {
            let (frames, failed) = decode_chunked(&capture[..cut], cut.max(1));
            assert!(!failed, "prefix {cut}");
            assert!(frames.len() <= 6);
        }
        let mut rng = StdRng::seed_from_u64(7);
        for round in 0..3000 {
            let mut bytes = match round % 3 {
                // The capture with a few bytes changed.
                0 => {
                    let mut b = capture.clone();
                    for _ in 0..rng.random_range(1..4) {
                        let i = rng.random_range(0..b.len());
                        b[i] = rng.random();
                    }
                    b
                }
                // Control frame headers of every type with random payloads.
                1 => {
                    let len = rng.random_range(0..64u8);
                    let mut b = vec![
                        0x80,
                        0x03,
                        0x00,
                        rng.random_range(0..12),
                        rng.random(),
                        0,
                        0,
                        len,
                    ];
                    b.extend((0..len).map(|_| rng.random::<u8>()));
                    b
                }
                // Noise.
                _ => (0..rng.random_range(0..256))
                    .map(|_| rng.random())
                    .collect(),
            };
            bytes.truncate(rng.random_range(0..=bytes.len()));
            let chunk = rng.random_range(1..=bytes.len().max(1));
            let _ = decode_chunked(&bytes, chunk);
        }
    }
}
