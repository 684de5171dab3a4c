//! The rest of an answer that ends in a CNAME out of the zone (an
//! ExternalName Service's): the target is resolved through the upstreams
//! (and their cache) and its records are added after the CNAME, as
//! CoreDNS's kubernetes plugin does, so that stub resolvers which do not
//! follow CNAMEs themselves (glibc, busybox) get an address.
//!
//! The slow path of a rare query: it decodes and encodes whole messages
//! with hickory-proto. It must not touch the index.

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use crate::forward::Forwarder;
use crate::wire;

/// `ours` (the answer up to the CNAME) completed with `target`'s records
/// of type `qtype`; `ours` unchanged when the target cannot be resolved
/// or the whole would not fit in `limit` bytes.
pub(crate) async fn complete(
    forwarder: &Forwarder,
    ours: &[u8],
    target: &Name,
    qtype: u16,
    limit: usize,
) -> Vec<u8> {
    let mut target = target.clone();
    target.set_fqdn(true);
    let mut query = Message::query();
    query.add_query(Query::query(target, RecordType::from(qtype)));
    query.metadata.recursion_desired = true;
    let Ok(packet) = query.to_vec() else {
        return ours.to_vec();
    };
    let Ok(q) = wire::parse_query(&packet) else {
        return ours.to_vec();
    };
    let mut reply = Vec::new();
    forwarder
        .forward(&q, usize::from(u16::MAX), &mut reply)
        .await;
    let (Ok(mut answer), Ok(upstream)) = (Message::from_vec(ours), Message::from_vec(&reply))
    else {
        return ours.to_vec();
    };
    if upstream.answers.is_empty() {
        // The name the CNAME leads to does not exist (RFC 6604: the
        // rcode is the last name's).
        if upstream.metadata.response_code == ResponseCode::NXDomain {
            answer.metadata.response_code = ResponseCode::NXDomain;
        }
    } else {
        answer.authorities.clear();
    }
    answer.add_answers(upstream.answers);
    match answer.to_vec() {
        Ok(bytes) if bytes.len() <= limit => bytes,
        _ => ours.to_vec(),
    }
}
