//! Turns one query packet into a response from the index, or says that
//! it must be forwarded (or dropped): header and flags, the question
//! echoed as asked, the encoded records copied from the index, CNAMEs
//! inside the zone followed, the SOA on NXDOMAIN/NODATA, EDNS, and
//! truncation to what the client takes over UDP.
//!
//! The hot path of the server: it must not allocate beyond `out` (which
//! the caller reuses), take locks (the caller holds the index), do I/O,
//! or panic on any packet.

use std::net::IpAddr;

use crate::records::{Answer, Records, Resolved, MAX_CNAME_HOPS};
use crate::wire::{self, Edns, Query, Rejected};

/// How the response travels (what it may weigh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Up to 512 bytes, or the client's EDNS size up to [`wire::UDP_MAX`].
    Udp,
    /// Up to 65535 bytes.
    Tcp,
}

/// What to do after [`respond`].
// The query (with its name on the stack) is returned once per packet and
// never stored: boxing it would only add an allocation per forward.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Outcome<'p> {
    /// Send `out`.
    Reply,
    /// Not ours: forward this query (`out` is empty).
    Forward(Query<'p>),
    /// Send nothing.
    Drop,
    /// `out` holds the answer up to a CNAME whose target is outside the
    /// zone: resolve the target (this type) upstream and add its records.
    Chase(hickory_proto::rr::Name, u16),
}

/// Answers `packet` from `records` into `out` (cleared first).
pub(crate) fn respond<'p>(
    records: &Records,
    packet: &'p [u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> Outcome<'p> {
    out.clear();
    let q = match wire::parse_query(packet) {
        Ok(q) => q,
        Err(Rejected::Drop) => return Outcome::Drop,
        Err(Rejected::Rcode {
            id,
            flags,
            rcode,
            question_end,
            edns,
        }) => {
            let question = question_end.map(|end| &packet[wire::HEADER_LEN..end]);
            write_error(out, id, flags, rcode, question, edns);
            return Outcome::Reply;
        }
    };
    let key = q.key.as_bytes();
    if q.qtype == wire::TYPE_AXFR || q.qtype == wire::TYPE_IXFR {
        write_error_to(out, &q, wire::RCODE_REFUSED);
        return Outcome::Reply;
    }
    let resolved = if q.qclass == wire::CLASS_IN || q.qclass == wire::CLASS_ANY {
        records.resolve(key, q.qtype)
    } else if records.in_zone(key) {
        write_error_to(out, &q, wire::RCODE_REFUSED);
        return Outcome::Reply;
    } else {
        Resolved::NotOurs
    };
    match resolved {
        Resolved::NotOurs => Outcome::Forward(q),
        Resolved::NotReady => {
            write_error_to(out, &q, wire::RCODE_SERVFAIL);
            Outcome::Reply
        }
        found => {
            let limit = match transport {
                Transport::Udp => q.udp_limit(),
                Transport::Tcp => usize::from(u16::MAX),
            };
            match write_answer(records, &q, found, limit, out) {
                Some(target) => Outcome::Chase(target, q.qtype),
                None => Outcome::Reply,
            }
        }
    }
}

/// Writes the error `rcode` in answer to the parsed query `q`.
pub(crate) fn write_error_to(out: &mut Vec<u8>, q: &Query<'_>, rcode: u8) {
    write_error(
        out,
        q.id,
        q.flags,
        u16::from(rcode),
        Some(q.question()),
        q.edns,
    );
}

/// Writes an error response: the question if it could be read, our OPT
/// if the client sent one.
pub(crate) fn write_error(
    out: &mut Vec<u8>,
    id: u16,
    flags: u16,
    rcode: u16,
    question: Option<&[u8]>,
    edns: Option<Edns>,
) {
    out.clear();
    let counts = [
        u16::from(question.is_some()),
        0,
        0,
        u16::from(edns.is_some()),
    ];
    wire::write_header(out, id, wire::response_flags(flags, rcode, false), counts);
    if let Some(question) = question {
        out.extend_from_slice(question);
    }
    if let Some(edns) = edns {
        wire::write_opt(out, edns, rcode);
    }
}

/// Writes an authoritative answer; the target to resolve upstream when
/// it ends in a CNAME out of the zone.
fn write_answer(
    records: &Records,
    q: &Query<'_>,
    found: Resolved<'_>,
    limit: usize,
    out: &mut Vec<u8>,
) -> Option<hickory_proto::rr::Name> {
    let mut external = None;
    wire::write_header(out, q.id, 0, [1, 0, 0, 0]);
    out.extend_from_slice(q.question());
    let question_end = out.len();
    let mut answers = 0u16;
    let mut rcode = wire::RCODE_NOERROR;
    let mut soa = false;
    let mut extra: Option<&Answer> = None;
    match found {
        Resolved::Answer(a) => {
            let start = out.len();
            out.extend_from_slice(&a.records);
            answers = a.count;
            if a.extra_count > 0 {
                extra = Some(a);
            }
            if a.rtype == wire::TYPE_CNAME
                && q.qtype != wire::TYPE_CNAME
                && q.qtype != wire::TYPE_ANY
            {
                let chased = chase(records, a, start, q.qtype, out);
                external = chased.external;
                answers = answers.saturating_add(chased.answers);
                if chased.nxdomain {
                    rcode = wire::RCODE_NXDOMAIN;
                }
                soa = chased.soa;
            }
        }
        Resolved::Pod(ip) => {
            write_address(out, wire::HEADER_LEN as u16, ip, records.ttl());
            answers = 1;
        }
        Resolved::NoData => soa = true,
        Resolved::NxDomain => {
            rcode = wire::RCODE_NXDOMAIN;
            soa = true;
        }
        Resolved::NotReady | Resolved::NotOurs => {}
    }
    let mut authorities = 0u16;
    if soa {
        out.extend_from_slice(records.soa_authority());
        authorities = 1;
    }
    let before_extra = out.len();
    let mut additionals = 0u16;
    if let Some(a) = extra {
        out.extend_from_slice(&a.extra);
        additionals = a.extra_count;
    }
    let opt_len = if q.edns.is_some() { wire::OPT_LEN } else { 0 };
    let mut tc = 0;
    if out.len() + opt_len > limit {
        if extra.is_some() && before_extra + opt_len <= limit {
            // Additional records go first, without TC (RFC 2181 §9).
            out.truncate(before_extra);
            additionals = 0;
        } else {
            out.truncate(question_end);
            answers = 0;
            authorities = 0;
            additionals = 0;
            tc = wire::FLAG_TC;
        }
    }
    if let Some(edns) = q.edns {
        wire::write_opt(out, edns, 0);
        additionals += 1;
    }
    wire::set_flags(
        out,
        wire::response_flags(q.flags, u16::from(rcode), true) | tc,
    );
    wire::set_counts(out, [1, answers, authorities, additionals]);
    external.filter(|_| tc == 0)
}

/// What following a CNAME added.
struct Chased {
    answers: u16,
    nxdomain: bool,
    /// The chain ended at a CNAME to this name outside the zone.
    external: Option<hickory_proto::rr::Name>,
    soa: bool,
}

/// Follows CNAMEs inside the zone from the one written at `start`: each
/// target's records are copied with their owner pointing at the target
/// name inside the previous CNAME's data.
fn chase(records: &Records, first: &Answer, start: usize, qtype: u16, out: &mut Vec<u8>) -> Chased {
    let mut chased = Chased {
        answers: 0,
        nxdomain: false,
        soa: false,
        external: None,
    };
    let mut current = first;
    // The CNAME's data (its target) follows the 12 bytes of pointer,
    // type, class, TTL and length.
    let mut target_at = start + 12;
    for _ in 0..MAX_CNAME_HOPS {
        let Some(target) = &current.cname_target else {
            chased.external = current.external_target.clone();
            break;
        };
        let Ok(owner) = u16::try_from(target_at) else {
            break;
        };
        if owner > 0x3FFF {
            break;
        }
        match records.resolve(target, qtype) {
            Resolved::Answer(a) => {
                let at = out.len();
                if !copy_rebased(out, &a.records, owner) {
                    out.truncate(at);
                    break;
                }
                chased.answers = chased.answers.saturating_add(a.count);
                if a.rtype != wire::TYPE_CNAME {
                    break;
                }
                current = a;
                target_at = at + 12;
            }
            Resolved::Pod(ip) => {
                write_address(out, owner, ip, records.ttl());
                chased.answers = chased.answers.saturating_add(1);
                break;
            }
            Resolved::NoData => {
                chased.soa = true;
                break;
            }
            Resolved::NxDomain => {
                chased.nxdomain = true;
                chased.soa = true;
                break;
            }
            Resolved::NotReady | Resolved::NotOurs => break,
        }
    }
    chased
}

/// Copies encoded records (each owned by a 2-byte pointer) with their
/// owner pointing at `owner` instead; false if they do not walk.
fn copy_rebased(out: &mut Vec<u8>, records: &[u8], owner: u16) -> bool {
    let mut at = 0;
    while at < records.len() {
        let Some(len) = records.get(at + 10..at + 12) else {
            return false;
        };
        let end = at + 12 + usize::from(u16::from_be_bytes([len[0], len[1]]));
        let Some(record) = records.get(at..end) else {
            return false;
        };
        out.extend_from_slice(&(0xC000 | owner).to_be_bytes());
        out.extend_from_slice(&record[2..]);
        at = end;
    }
    true
}

/// Writes an A or AAAA record owned by the name at `owner`.
fn write_address(out: &mut Vec<u8>, owner: u16, ip: IpAddr, ttl: u32) {
    match ip {
        IpAddr::V4(v4) => wire::write_pointer_record(out, owner, wire::TYPE_A, ttl, &v4.octets()),
        IpAddr::V6(v6) => {
            wire::write_pointer_record(out, owner, wire::TYPE_AAAA, ttl, &v6.octets())
        }
    }
}
