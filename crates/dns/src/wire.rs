//! The few pieces of the DNS wire format (RFC 1035, EDNS per RFC 6891)
//! that the hot path reads and writes by hand so that it allocates
//! nothing: a query's header, its one question (lowercased into a stack
//! buffer for the index lookup) and its OPT record; a response's header
//! and OPT record; and a walk over a whole message's records, which the
//! forward cache uses to find TTLs and drop an upstream's OPT record.
//!
//! Everything else (record data, names in records, whole messages in the
//! public lookup and the tests) is hickory-proto's. This module must not
//! know the cluster, the index or sockets, and must never panic on any
//! input: every read is bounds-checked.

use std::ops::Range;

/// Length of a DNS header.
pub(crate) const HEADER_LEN: usize = 12;
/// The largest UDP payload we send or announce (DNS flag day 2020: no
/// IP fragmentation).
pub(crate) const UDP_MAX: u16 = 1232;
/// The UDP payload every client takes (RFC 1035) when it sent no OPT.
pub(crate) const UDP_MIN: u16 = 512;
/// The longest name on the wire (RFC 1035 §2.3.4).
pub(crate) const MAX_NAME: usize = 255;

/// Record types and classes the hand-written paths compare against.
pub(crate) const TYPE_A: u16 = 1;
pub(crate) const TYPE_CNAME: u16 = 5;
pub(crate) const TYPE_SOA: u16 = 6;
pub(crate) const TYPE_AAAA: u16 = 28;
pub(crate) const TYPE_OPT: u16 = 41;
pub(crate) const TYPE_IXFR: u16 = 251;
pub(crate) const TYPE_AXFR: u16 = 252;
pub(crate) const TYPE_ANY: u16 = 255;
pub(crate) const CLASS_IN: u16 = 1;
pub(crate) const CLASS_ANY: u16 = 255;

/// Response codes the hand-written paths send.
pub(crate) const RCODE_NOERROR: u8 = 0;
pub(crate) const RCODE_FORMERR: u8 = 1;
pub(crate) const RCODE_SERVFAIL: u8 = 2;
pub(crate) const RCODE_NXDOMAIN: u8 = 3;
pub(crate) const RCODE_NOTIMP: u8 = 4;
pub(crate) const RCODE_REFUSED: u8 = 5;
/// Extended (12-bit) BADVERS: its upper 8 bits go in the OPT record.
pub(crate) const RCODE_BADVERS: u16 = 16;

/// Header flag bits.
pub(crate) const FLAG_QR: u16 = 0x8000;
pub(crate) const FLAG_AA: u16 = 0x0400;
pub(crate) const FLAG_TC: u16 = 0x0200;
pub(crate) const FLAG_RD: u16 = 0x0100;
pub(crate) const FLAG_RA: u16 = 0x0080;
pub(crate) const FLAG_AD: u16 = 0x0020;
pub(crate) const FLAG_CD: u16 = 0x0010;
const OPCODE_MASK: u16 = 0x7800;
/// EDNS DO bit in the OPT record's flags.
const EDNS_DO: u16 = 0x8000;

/// Why a message could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum Error {
    #[error("message ends inside {0}")]
    Truncated(&'static str),
    #[error("bad label length byte {0:#04x}")]
    BadLabel(u8),
    #[error("name longer than 255 bytes or looping through pointers")]
    NameTooLong,
    #[error("compressed name where none may be")]
    Compressed,
}

/// A query's name, lowercased, in wire form (labels, then the root's 0):
/// the index's key. Lives on the stack.
#[derive(Clone)]
pub(crate) struct NameKey {
    len: u8,
    bytes: [u8; MAX_NAME],
}

impl std::fmt::Debug for NameKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NameKey({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl NameKey {
    /// The wire bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// A query's EDNS (OPT record) fields that shape the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edns {
    /// The client's UDP payload size.
    pub(crate) payload: u16,
    pub(crate) dnssec_ok: bool,
    pub(crate) version: u8,
}

/// A parsed standard query with exactly one question.
#[derive(Debug, Clone)]
pub(crate) struct Query<'a> {
    pub(crate) packet: &'a [u8],
    pub(crate) id: u16,
    /// The query's flags word (RD and CD are copied into the answer).
    pub(crate) flags: u16,
    /// End of the question section (it starts at [`HEADER_LEN`]).
    pub(crate) question_end: usize,
    pub(crate) qtype: u16,
    pub(crate) qclass: u16,
    pub(crate) key: NameKey,
    pub(crate) edns: Option<Edns>,
}

impl Query<'_> {
    /// The question section as the client sent it (case kept).
    pub(crate) fn question(&self) -> &[u8] {
        &self.packet[HEADER_LEN..self.question_end]
    }

    /// The largest UDP response this client takes (and we send).
    pub(crate) fn udp_limit(&self) -> usize {
        usize::from(
            self.edns
                .map_or(UDP_MIN, |e| e.payload.clamp(UDP_MIN, UDP_MAX)),
        )
    }
}

/// What to do with a packet that is not a query we answer normally.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejected {
    /// Not worth an answer (too short for a header, or a response).
    Drop,
    /// Answer with this rcode (12-bit, BADVERS included), echoing the
    /// question when it could be read.
    Rcode {
        id: u16,
        flags: u16,
        rcode: u16,
        question_end: Option<usize>,
        edns: Option<Edns>,
    },
}

fn u16_at(buf: &[u8], at: usize, what: &'static str) -> Result<u16, Error> {
    match buf.get(at..at + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(Error::Truncated(what)),
    }
}

fn u32_at(buf: &[u8], at: usize, what: &'static str) -> Result<u32, Error> {
    match buf.get(at..at + 4) {
        Some(b) => Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(Error::Truncated(what)),
    }
}

/// Reads the uncompressed name at `at` into `key` (lowercased); returns
/// where the name ends.
fn read_question_name(buf: &[u8], mut at: usize, key: &mut NameKey) -> Result<usize, Error> {
    let mut len = 0usize;
    loop {
        let label = *buf.get(at).ok_or(Error::Truncated("question name"))?;
        if label & 0xC0 == 0xC0 {
            return Err(Error::Compressed);
        }
        if label & 0xC0 != 0 {
            return Err(Error::BadLabel(label));
        }
        let n = usize::from(label);
        if len + 1 + n > MAX_NAME {
            return Err(Error::NameTooLong);
        }
        let src = buf
            .get(at..at + 1 + n)
            .ok_or(Error::Truncated("question name"))?;
        for (dst, b) in key.bytes[len..len + 1 + n].iter_mut().zip(src) {
            *dst = b.to_ascii_lowercase();
        }
        // The length byte itself is never a letter's code (it is < 64),
        // so lowercasing it above changed nothing.
        len += 1 + n;
        at += 1 + n;
        if n == 0 {
            key.len = len as u8;
            return Ok(at);
        }
    }
}

/// Skips a (possibly compressed) name at `at`; returns where it ends.
pub(crate) fn skip_name(buf: &[u8], mut at: usize) -> Result<usize, Error> {
    let mut seen = 0usize;
    loop {
        let label = *buf.get(at).ok_or(Error::Truncated("name"))?;
        match label & 0xC0 {
            0xC0 => {
                if at + 2 > buf.len() {
                    return Err(Error::Truncated("name pointer"));
                }
                return Ok(at + 2);
            }
            0 => {
                let n = usize::from(label);
                seen += 1 + n;
                if seen > MAX_NAME {
                    return Err(Error::NameTooLong);
                }
                at += 1 + n;
                if n == 0 {
                    return Ok(at);
                }
            }
            _ => return Err(Error::BadLabel(label)),
        }
    }
}

/// Reads a query: header, exactly one question and at most one OPT
/// record in the additional section.
pub(crate) fn parse_query(packet: &[u8]) -> Result<Query<'_>, Rejected> {
    if packet.len() < HEADER_LEN {
        return Err(Rejected::Drop);
    }
    let id = u16::from_be_bytes([packet[0], packet[1]]);
    let flags = u16::from_be_bytes([packet[2], packet[3]]);
    if flags & FLAG_QR != 0 {
        return Err(Rejected::Drop);
    }
    let reject = |rcode: u8, question_end: Option<usize>, edns: Option<Edns>| Rejected::Rcode {
        id,
        flags,
        rcode: u16::from(rcode),
        question_end,
        edns,
    };
    if flags & OPCODE_MASK != 0 {
        return Err(reject(RCODE_NOTIMP, None, None));
    }
    let qdcount = u16::from_be_bytes([packet[4], packet[5]]);
    let ancount = u16::from_be_bytes([packet[6], packet[7]]);
    let nscount = u16::from_be_bytes([packet[8], packet[9]]);
    let arcount = u16::from_be_bytes([packet[10], packet[11]]);
    if qdcount != 1 || ancount != 0 || nscount != 0 {
        return Err(reject(RCODE_FORMERR, None, None));
    }
    let mut key = NameKey {
        len: 0,
        bytes: [0; MAX_NAME],
    };
    let Ok(name_end) = read_question_name(packet, HEADER_LEN, &mut key) else {
        return Err(reject(RCODE_FORMERR, None, None));
    };
    let (Ok(qtype), Ok(qclass)) = (
        u16_at(packet, name_end, "qtype"),
        u16_at(packet, name_end + 2, "qclass"),
    ) else {
        return Err(reject(RCODE_FORMERR, None, None));
    };
    let question_end = name_end + 4;
    let mut edns = None;
    let mut at = question_end;
    for _ in 0..arcount {
        let Ok(record) = read_record(packet, at) else {
            return Err(reject(RCODE_FORMERR, Some(question_end), None));
        };
        if record.rtype == TYPE_OPT {
            if edns.is_some() {
                // RFC 6891 §6.1.1: more than one OPT is a FORMERR.
                return Err(reject(RCODE_FORMERR, Some(question_end), None));
            }
            edns = Some(Edns {
                payload: record.class,
                version: (record.ttl >> 16) as u8,
                dnssec_ok: record.ttl as u16 & EDNS_DO != 0,
            });
        }
        at = record.end;
    }
    if let Some(e) = edns {
        if e.version != 0 {
            return Err(Rejected::Rcode {
                id,
                flags,
                rcode: RCODE_BADVERS,
                question_end: Some(question_end),
                edns,
            });
        }
    }
    Ok(Query {
        packet,
        id,
        flags,
        question_end,
        qtype,
        qclass,
        key,
        edns,
    })
}

/// One resource record's position in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordAt {
    pub(crate) start: usize,
    pub(crate) rtype: u16,
    pub(crate) class: u16,
    pub(crate) ttl: u32,
    /// Where the TTL is (4 bytes).
    pub(crate) ttl_at: usize,
    pub(crate) rdata: Range<usize>,
    pub(crate) end: usize,
}

/// Reads the record at `at`.
pub(crate) fn read_record(buf: &[u8], at: usize) -> Result<RecordAt, Error> {
    let fixed = skip_name(buf, at)?;
    let rtype = u16_at(buf, fixed, "record type")?;
    let class = u16_at(buf, fixed + 2, "record class")?;
    let ttl = u32_at(buf, fixed + 4, "record ttl")?;
    let rdlen = usize::from(u16_at(buf, fixed + 8, "record length")?);
    let rdata = fixed + 10..fixed + 10 + rdlen;
    if rdata.end > buf.len() {
        return Err(Error::Truncated("record data"));
    }
    Ok(RecordAt {
        start: at,
        rtype,
        class,
        ttl,
        ttl_at: fixed + 4,
        end: rdata.end,
        rdata,
    })
}

/// A whole message's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Walked {
    pub(crate) id: u16,
    pub(crate) flags: u16,
    /// End of the question section.
    pub(crate) question_end: usize,
    pub(crate) answers: Vec<RecordAt>,
    pub(crate) authorities: Vec<RecordAt>,
    pub(crate) additionals: Vec<RecordAt>,
}

impl Walked {
    /// The 4-bit rcode of the header.
    pub(crate) fn rcode(&self) -> u8 {
        (self.flags & 0x000F) as u8
    }
}

/// Walks a message with at most one question; fails on anything that
/// does not parse or on bytes left over.
pub(crate) fn walk(msg: &[u8]) -> Result<Walked, Error> {
    if msg.len() < HEADER_LEN {
        return Err(Error::Truncated("header"));
    }
    let count = |at: usize| u16::from_be_bytes([msg[at], msg[at + 1]]);
    let (qd, an, ns, ar) = (count(4), count(6), count(8), count(10));
    let mut at = HEADER_LEN;
    for _ in 0..qd {
        at = skip_name(msg, at)? + 4;
        if at > msg.len() {
            return Err(Error::Truncated("question"));
        }
    }
    let question_end = at;
    let section = |n: u16, at: &mut usize| -> Result<Vec<RecordAt>, Error> {
        let mut records = Vec::with_capacity(usize::from(n).min(64));
        for _ in 0..n {
            let record = read_record(msg, *at)?;
            *at = record.end;
            records.push(record);
        }
        Ok(records)
    };
    let answers = section(an, &mut at)?;
    let authorities = section(ns, &mut at)?;
    let additionals = section(ar, &mut at)?;
    Ok(Walked {
        id: count(0),
        flags: count(2),
        question_end,
        answers,
        authorities,
        additionals,
    })
}

/// The response flags word for a query's flags: QR, the opcode, RD and CD
/// copied, RA set, and the low 4 bits of `rcode`.
pub(crate) fn response_flags(query_flags: u16, rcode: u16, authoritative: bool) -> u16 {
    let mut flags = FLAG_QR | FLAG_RA | (query_flags & (OPCODE_MASK | FLAG_RD | FLAG_CD));
    if authoritative {
        flags |= FLAG_AA;
    }
    flags | (rcode & 0x000F)
}

/// Writes a header (counts as given; [`set_counts`] patches them later).
pub(crate) fn write_header(out: &mut Vec<u8>, id: u16, flags: u16, counts: [u16; 4]) {
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    for c in counts {
        out.extend_from_slice(&c.to_be_bytes());
    }
}

/// Patches the four section counts of the header at the start of `out`.
pub(crate) fn set_counts(out: &mut [u8], counts: [u16; 4]) {
    for (i, c) in counts.into_iter().enumerate() {
        out[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
    }
}

/// Patches the flags word of the header at the start of `out`.
pub(crate) fn set_flags(out: &mut [u8], flags: u16) {
    out[2..4].copy_from_slice(&flags.to_be_bytes());
}

/// Appends our OPT record answering a query's `edns`: our payload size,
/// the upper bits of a 12-bit `rcode`, version 0, DO copied.
pub(crate) fn write_opt(out: &mut Vec<u8>, edns: Edns, rcode: u16) {
    out.push(0); // root owner
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&UDP_MAX.to_be_bytes());
    out.push((rcode >> 4) as u8);
    out.push(0); // version
    let flags = if edns.dnssec_ok { EDNS_DO } else { 0 };
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // no options
}

/// Length of the OPT record [`write_opt`] writes.
pub(crate) const OPT_LEN: usize = 11;

/// Writes one record whose owner is a compression pointer to `owner_at`
/// (12 for the question's name), class IN.
pub(crate) fn write_pointer_record(
    out: &mut Vec<u8>,
    owner_at: u16,
    rtype: u16,
    ttl: u32,
    rdata: &[u8],
) {
    out.extend_from_slice(&(0xC000 | owner_at).to_be_bytes());
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &[u8], qtype: u16, extra: &[u8], arcount: u16) -> Vec<u8> {
        let mut q = Vec::new();
        write_header(&mut q, 0x1234, FLAG_RD, [1, 0, 0, arcount]);
        q.extend_from_slice(name);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q.extend_from_slice(extra);
        q
    }

    #[test]
    fn reads_a_query_lowercased_with_edns() {
        let mut opt = Vec::new();
        write_opt(
            &mut opt,
            Edns {
                payload: 4096,
                dnssec_ok: true,
                version: 0,
            },
            0,
        );
        // write_opt announces our own size; a client's 4096 goes in the class.
        opt[3..5].copy_from_slice(&4096u16.to_be_bytes());
        let packet = query(b"\x03WwW\x07Example\x00", TYPE_A, &opt, 1);
        let q = parse_query(&packet).unwrap();
        assert_eq!(q.id, 0x1234);
        assert_eq!(q.key.as_bytes(), b"\x03www\x07example\x00");
        assert_eq!(q.question(), &packet[12..12 + 13 + 4]);
        assert_eq!(q.qtype, TYPE_A);
        let edns = q.edns.unwrap();
        assert_eq!(edns.payload, 4096);
        assert!(edns.dnssec_ok);
        assert_eq!(q.udp_limit(), usize::from(UDP_MAX));
    }

    #[test]
    fn rejects_what_is_not_one_plain_question() {
        assert_eq!(parse_query(&[0; 5]).unwrap_err(), Rejected::Drop);
        let mut response = query(b"\x00", TYPE_A, &[], 0);
        response[2] |= 0x80;
        assert_eq!(parse_query(&response).unwrap_err(), Rejected::Drop);
        let mut two = query(b"\x00", TYPE_A, &[], 0);
        two[5] = 2;
        assert!(matches!(
            parse_query(&two).unwrap_err(),
            Rejected::Rcode {
                rcode: 1,
                id: 0x1234,
                ..
            }
        ));
        let pointer = query(b"\xC0\x0C", TYPE_A, &[], 0);
        assert!(matches!(
            parse_query(&pointer).unwrap_err(),
            Rejected::Rcode { rcode: 1, .. }
        ));
        let mut notify = query(b"\x00", TYPE_A, &[], 0);
        notify[2] |= 4 << 3;
        assert!(matches!(
            parse_query(&notify).unwrap_err(),
            Rejected::Rcode { rcode: 4, .. }
        ));
    }

    #[test]
    fn never_panics_on_garbage() {
        // Every prefix of a valid query, and every single-byte change.
        let mut opt = Vec::new();
        write_opt(
            &mut opt,
            Edns {
                payload: 1232,
                dnssec_ok: false,
                version: 0,
            },
            0,
        );
        let packet = query(b"\x01a\x02bc\x00", TYPE_A, &opt, 1);
        for n in 0..packet.len() {
            let _ = parse_query(&packet[..n]);
            let _ = walk(&packet[..n]);
        }
        for i in 0..packet.len() {
            for b in [0u8, 1, 0x3F, 0x40, 0x80, 0xC0, 0xFF] {
                let mut p = packet.clone();
                p[i] = b;
                let _ = parse_query(&p);
                let _ = walk(&p);
            }
        }
    }

    #[test]
    fn walks_records_and_pointer_loops_end() {
        let mut msg = Vec::new();
        write_header(&mut msg, 1, FLAG_QR, [1, 1, 0, 0]);
        msg.extend_from_slice(b"\x01a\x00\x00\x01\x00\x01");
        write_pointer_record(&mut msg, 12, TYPE_A, 30, &[10, 0, 0, 1]);
        let walked = walk(&msg).unwrap();
        assert_eq!(walked.answers.len(), 1);
        assert_eq!(walked.answers[0].ttl, 30);
        assert_eq!(&msg[walked.answers[0].rdata.clone()], &[10, 0, 0, 1]);
        // A pointer to itself is skipped, not followed.
        let mut looped = Vec::new();
        write_header(&mut looped, 1, FLAG_QR, [1, 0, 0, 0]);
        looped.extend_from_slice(b"\xC0\x0C\x00\x01\x00\x01");
        assert!(walk(&looped).is_ok());
    }
}
