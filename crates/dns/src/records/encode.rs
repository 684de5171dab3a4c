//! Encodes a name's records once, when they change, into the bytes the
//! query path copies: each record's owner is a pointer to the question
//! (offset 12), names in data are uncompressed (so the bytes are valid
//! in any message), and SRV targets' addresses are kept apart for the
//! additional section. Must not decide which records a name has.

use std::collections::BTreeSet;
use std::net::IpAddr;

use hickory_proto::rr::rdata::{A, AAAA, CNAME, PTR, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};
use hickory_proto::ProtoError;

use super::names::Rec;
use super::{key_of, suffix_at_label, Answer};
use crate::wire;

/// Encodes a node's records: one [`Answer`] per type, plus ANY; a CNAME
/// hides everything else.
pub(super) fn compile(
    sources: &[(u64, Vec<Rec>)],
    ttl: u32,
    soa: &RData,
    zone_key: &[u8],
) -> Box<[Answer]> {
    let mut recs: Vec<&Rec> = sources.iter().flat_map(|(_, r)| r).collect();
    recs.sort();
    recs.dedup();
    if let Some(Rec::Cname(target)) = recs.iter().find(|r| matches!(r, Rec::Cname(_))) {
        let mut records = Vec::new();
        if emit_record(
            &mut records,
            None,
            ttl,
            &RData::CNAME(CNAME(target.clone())),
        )
        .is_err()
        {
            return Box::new([]);
        }
        let target_key = key_of(target);
        let inside = suffix_at_label(&target_key, zone_key).is_some();
        return Box::new([Answer {
            rtype: wire::TYPE_CNAME,
            count: 1,
            records: records.into(),
            extra_count: 0,
            extra: Box::new([]),
            cname_target: inside.then_some(target_key),
            external_target: (!inside).then(|| target.clone()),
        }]);
    }
    let mut answers: Vec<Answer> = Vec::new();
    let mut any = Answer {
        rtype: wire::TYPE_ANY,
        count: 0,
        records: Box::new([]),
        extra_count: 0,
        extra: Box::new([]),
        cname_target: None,
        external_target: None,
    };
    let mut any_records = Vec::new();
    let mut at = 0;
    while at < recs.len() {
        let rtype = rec_type(recs[at]);
        let group_len = recs[at..]
            .iter()
            .take_while(|r| rec_type(r) == rtype)
            .count();
        let group = &recs[at..at + group_len];
        at += group_len;
        let weight = u16::try_from((100 / group.len()).max(1)).unwrap_or(1);
        let mut records = Vec::new();
        let mut extra = Vec::new();
        let mut count = 0u16;
        let mut extra_count = 0u16;
        let mut extra_seen: BTreeSet<(&Name, IpAddr)> = BTreeSet::new();
        for rec in group {
            let rdata = match rec {
                Rec::A(ip) => RData::A(A(*ip)),
                Rec::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
                Rec::Srv {
                    port,
                    target,
                    target_ips,
                } => {
                    for ip in target_ips {
                        if extra_seen.insert((target, *ip))
                            && emit_record(&mut extra, Some(target), ttl, &ip_rdata(*ip)).is_ok()
                        {
                            extra_count = extra_count.saturating_add(1);
                        }
                    }
                    RData::SRV(SRV::new(0, weight, *port, target.clone()))
                }
                Rec::Ptr(target) => RData::PTR(PTR(target.clone())),
                Rec::Cname(target) => RData::CNAME(CNAME(target.clone())),
                Rec::Txt(text) => RData::TXT(TXT::new(vec![text.clone()])),
                Rec::Soa => soa.clone(),
            };
            if emit_record(&mut records, None, ttl, &rdata).is_ok() {
                count = count.saturating_add(1);
            }
        }
        any_records.extend_from_slice(&records);
        any.count = any.count.saturating_add(count);
        answers.push(Answer {
            rtype,
            count,
            records: records.into(),
            extra_count,
            extra: extra.into(),
            cname_target: None,
            external_target: None,
        });
    }
    if any.count > 0 {
        any.records = any_records.into();
        answers.push(any);
    }
    answers.into()
}

fn rec_type(rec: &Rec) -> u16 {
    let rtype = match rec {
        Rec::A(_) => RecordType::A,
        Rec::Aaaa(_) => RecordType::AAAA,
        Rec::Srv { .. } => RecordType::SRV,
        Rec::Ptr(_) => RecordType::PTR,
        Rec::Cname(_) => RecordType::CNAME,
        Rec::Txt(_) => RecordType::TXT,
        Rec::Soa => RecordType::SOA,
    };
    u16::from(rtype)
}

fn ip_rdata(ip: IpAddr) -> RData {
    match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    }
}

/// Appends one record, class IN, names uncompressed; the owner is
/// `owner`, or (None) a pointer to the question's name at offset 12.
pub(super) fn emit_record(
    out: &mut Vec<u8>,
    owner: Option<&Name>,
    ttl: u32,
    rdata: &RData,
) -> Result<(), ProtoError> {
    let mut buf = Vec::with_capacity(64);
    let mut enc = BinEncoder::new(&mut buf);
    enc.set_name_encoding(NameEncoding::Uncompressed);
    match owner {
        Some(name) => name.emit(&mut enc)?,
        None => enc.emit_u16(0xC000 | wire::HEADER_LEN as u16)?,
    }
    rdata.record_type().emit(&mut enc)?;
    DNSClass::IN.emit(&mut enc)?;
    enc.emit_u32(ttl)?;
    let place = enc.place::<u16>()?;
    rdata.emit(&mut enc)?;
    let len = enc.len_since_place(&place);
    place.replace(
        &mut enc,
        u16::try_from(len).map_err(|_| ProtoError::from("record too long"))?,
    )?;
    out.extend_from_slice(&buf);
    Ok(())
}
