//! Names that are not ours, sent to the host's resolvers (CoreDNS's
//! `forward . /etc/resolv.conf`) and their answers cached (`cache 30`).
//!
//! Owns the upstream list and the cache: answers are kept by (lowercased
//! name, type, class) for the smallest TTL of their records (negative
//! ones for the SOA's, RFC 2308), capped at the configured TTL, in a map
//! of bounded size. A hit is patched in place (client's id, question and
//! flags, TTLs counted down) without parsing the message again.
//!
//! It must not look at the cluster index, and [`Forwarder::forward`]
//! waits on the network: the server runs it in a task of its own, never
//! in a receive loop.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UdpSocket};

use crate::answer::write_error_to;
use crate::wire::{self, Query};

/// How long one upstream has to answer before the next is asked.
pub(crate) const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);
/// How many answers the cache keeps.
pub(crate) const CACHE_CAPACITY: usize = 10_000;
/// Longest cache key: a name and its type and class.
const KEY_MAX: usize = wire::MAX_NAME + 4;

/// Why one upstream did not answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("upstream {upstream}: {source}")]
    Io {
        upstream: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("upstream {upstream} did not answer within {timeout:?}")]
    Timeout {
        upstream: SocketAddr,
        timeout: Duration,
    },
    #[error("upstream {upstream} sent an answer that does not parse")]
    Malformed {
        upstream: SocketAddr,
        #[source]
        source: wire::Error,
    },
}

/// The upstreams and the cache of their answers.
#[derive(Debug)]
pub(crate) struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
    cache_ttl: u32,
    capacity: usize,
    cache: Mutex<HashMap<Box<[u8]>, Entry>>,
}

/// A cached answer.
#[derive(Debug, Clone)]
struct Entry {
    /// The upstream's message without its OPT record, TTLs capped.
    message: Box<[u8]>,
    /// Where each record's TTL is in `message`.
    ttls: Box<[usize]>,
    question_end: usize,
    stored: Instant,
    expires: Instant,
}

impl Forwarder {
    pub(crate) fn new(upstreams: Vec<SocketAddr>, cache_ttl: Duration) -> Self {
        Self {
            upstreams,
            timeout: UPSTREAM_TIMEOUT,
            cache_ttl: u32::try_from(cache_ttl.as_secs()).unwrap_or(u32::MAX),
            capacity: CACHE_CAPACITY,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Writes the cached answer to `q` into `out`, if there is one.
    pub(crate) fn answer_from_cache(&self, q: &Query<'_>, limit: usize, out: &mut Vec<u8>) -> bool {
        let mut key = [0u8; KEY_MAX];
        let key = cache_key(q, &mut key);
        let now = Instant::now();
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(key) {
            Some(entry) if entry.expires > now => serve(entry, q, limit, now, out),
            _ => false,
        }
    }

    /// Asks the upstreams (cache first) and writes the answer to `q` into
    /// `out`: SERVFAIL when none answers.
    pub(crate) async fn forward(&self, q: &Query<'_>, limit: usize, out: &mut Vec<u8>) {
        if self.answer_from_cache(q, limit, out) {
            return;
        }
        let id: u16 = rand::random();
        let mut request = Vec::with_capacity(q.question().len() + wire::HEADER_LEN + wire::OPT_LEN);
        wire::write_header(
            &mut request,
            id,
            wire::FLAG_RD | (q.flags & wire::FLAG_CD),
            [1, 0, 0, 1],
        );
        request.extend_from_slice(q.question());
        let edns = wire::Edns {
            payload: wire::UDP_MAX,
            dnssec_ok: false,
            version: 0,
        };
        wire::write_opt(&mut request, edns, 0);

        let mut fallback = None;
        for &upstream in &self.upstreams {
            let reply = match self.exchange(upstream, &request, id, q.question()).await {
                Ok(reply) => reply,
                Err(e) => {
                    tracing::debug!(error = %e, "forwarding failed; trying the next upstream");
                    continue;
                }
            };
            let entry = match self.entry(&reply) {
                Ok(entry) => entry,
                Err(source) => {
                    let e = Error::Malformed { upstream, source };
                    tracing::debug!(error = %e, "forwarding failed; trying the next upstream");
                    continue;
                }
            };
            let rcode = entry.0.message[3] & 0x0F;
            if rcode == wire::RCODE_SERVFAIL || rcode == wire::RCODE_REFUSED {
                fallback = Some(entry.0);
                continue;
            }
            let (entry, ttl) = entry;
            if ttl > 0 {
                self.insert(q, entry.clone(), ttl);
            }
            if !serve(&entry, q, limit, entry.stored, out) {
                write_error_to(out, q, wire::RCODE_SERVFAIL);
            }
            return;
        }
        match fallback {
            Some(entry) if serve(&entry, q, limit, entry.stored, out) => {}
            _ => write_error_to(out, q, wire::RCODE_SERVFAIL),
        }
    }

    /// One upstream's answer over UDP, again over TCP if it was truncated.
    async fn exchange(
        &self,
        upstream: SocketAddr,
        request: &[u8],
        id: u16,
        question: &[u8],
    ) -> Result<Vec<u8>, Error> {
        let io = |source| Error::Io { upstream, source };
        let timeout = Error::Timeout {
            upstream,
            timeout: self.timeout,
        };
        let udp = async {
            let local: SocketAddr = if upstream.is_ipv4() {
                (Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let socket = UdpSocket::bind(local).await.map_err(io)?;
            socket.connect(upstream).await.map_err(io)?;
            socket.send(request).await.map_err(io)?;
            let mut buf = vec![0u8; usize::from(u16::MAX)];
            loop {
                let n = socket.recv(&mut buf).await.map_err(io)?;
                if answers(&buf[..n], id, question) {
                    buf.truncate(n);
                    return Ok(buf);
                }
            }
        };
        let reply = tokio::time::timeout(self.timeout, udp)
            .await
            .map_err(|_| timeout)??;
        if u16::from_be_bytes([reply[2], reply[3]]) & wire::FLAG_TC == 0 {
            return Ok(reply);
        }
        let tcp = async {
            let mut stream = TcpStream::connect(upstream).await.map_err(io)?;
            let mut framed = Vec::with_capacity(request.len() + 2);
            framed.extend_from_slice(&(request.len() as u16).to_be_bytes());
            framed.extend_from_slice(request);
            stream.write_all(&framed).await.map_err(io)?;
            let len = stream.read_u16().await.map_err(io)?;
            let mut buf = vec![0u8; usize::from(len)];
            stream.read_exact(&mut buf).await.map_err(io)?;
            Ok(buf)
        };
        let timeout = Error::Timeout {
            upstream,
            timeout: self.timeout,
        };
        let reply = tokio::time::timeout(self.timeout, tcp)
            .await
            .map_err(|_| timeout)??;
        if answers(&reply, id, question) {
            Ok(reply)
        } else {
            Err(Error::Malformed {
                upstream,
                source: wire::Error::Truncated("a reply to another question"),
            })
        }
    }

    /// A cacheable copy of an upstream reply (its OPT record and what
    /// follows dropped, TTLs capped) and how long it may be cached.
    fn entry(&self, reply: &[u8]) -> Result<(Entry, u32), wire::Error> {
        let walked = wire::walk(reply)?;
        let opt = walked
            .additionals
            .iter()
            .position(|r| r.rtype == wire::TYPE_OPT);
        let kept_additionals = opt.unwrap_or(walked.additionals.len());
        let end = match opt {
            Some(i) => walked.additionals[i].start,
            None => walked.additionals.last().map_or_else(
                || {
                    walked
                        .authorities
                        .last()
                        .or(walked.answers.last())
                        .map_or(walked.question_end, |r| r.end)
                },
                |r| r.end,
            ),
        };
        let mut message = reply[..end].to_vec();
        wire::set_counts(
            &mut message,
            [
                1,
                walked.answers.len() as u16,
                walked.authorities.len() as u16,
                kept_additionals as u16,
            ],
        );
        let records = walked
            .answers
            .iter()
            .chain(&walked.authorities)
            .chain(&walked.additionals[..kept_additionals]);
        let mut ttls = Vec::new();
        for record in records {
            let capped = record.ttl.min(self.cache_ttl);
            message[record.ttl_at..record.ttl_at + 4].copy_from_slice(&capped.to_be_bytes());
            ttls.push(record.ttl_at);
        }
        let truncated = walked.flags & wire::FLAG_TC != 0;
        let ttl = match walked.rcode() {
            _ if truncated => 0,
            wire::RCODE_NOERROR if !walked.answers.is_empty() => {
                walked.answers.iter().map(|r| r.ttl).min().unwrap_or(0)
            }
            wire::RCODE_NOERROR | wire::RCODE_NXDOMAIN => walked
                .authorities
                .iter()
                .find(|r| r.rtype == wire::TYPE_SOA)
                .and_then(|soa| {
                    let minimum = reply.get(soa.rdata.end.checked_sub(4)?..soa.rdata.end)?;
                    let minimum =
                        u32::from_be_bytes([minimum[0], minimum[1], minimum[2], minimum[3]]);
                    Some(soa.ttl.min(minimum))
                })
                .unwrap_or(0),
            _ => 0,
        };
        let now = Instant::now();
        let ttl = ttl.min(self.cache_ttl);
        Ok((
            Entry {
                message: message.into(),
                ttls: ttls.into(),
                question_end: walked.question_end,
                stored: now,
                expires: now + Duration::from_secs(u64::from(ttl)),
            },
            ttl,
        ))
    }

    fn insert(&self, q: &Query<'_>, entry: Entry, _ttl: u32) {
        let mut key = [0u8; KEY_MAX];
        let key: Box<[u8]> = cache_key(q, &mut key).into();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= self.capacity && !cache.contains_key(&key) {
            let now = Instant::now();
            cache.retain(|_, e| e.expires > now);
            // Still full of live answers: drop a tenth, whichever come
            // first (simple, and cheap enough at this size).
            if cache.len() >= self.capacity {
                let drop: Vec<Box<[u8]>> =
                    cache.keys().take(self.capacity / 10 + 1).cloned().collect();
                for k in drop {
                    cache.remove(&k);
                }
            }
        }
        cache.insert(key, entry);
    }

    #[cfg(test)]
    fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Whether `reply` answers our request `id` for `question`.
fn answers(reply: &[u8], id: u16, question: &[u8]) -> bool {
    let end = wire::HEADER_LEN + question.len();
    let Some(asked) = reply.get(wire::HEADER_LEN..end) else {
        return false;
    };
    let (name, tail) = question.split_at(question.len() - 4);
    u16::from_be_bytes([reply[0], reply[1]]) == id
        && reply[2] & 0x80 != 0
        && u16::from_be_bytes([reply[4], reply[5]]) == 1
        && asked[..name.len()].eq_ignore_ascii_case(name)
        && asked[name.len()..] == *tail
}

/// The cache key of a query: lowercased name, type, class.
fn cache_key<'k>(q: &Query<'_>, buf: &'k mut [u8; KEY_MAX]) -> &'k [u8] {
    let name = q.key.as_bytes();
    buf[..name.len()].copy_from_slice(name);
    buf[name.len()..name.len() + 2].copy_from_slice(&q.qtype.to_be_bytes());
    buf[name.len() + 2..name.len() + 4].copy_from_slice(&q.qclass.to_be_bytes());
    &buf[..name.len() + 4]
}

/// Writes `entry` as the answer to `q`: the client's id, question and RD/CD
/// bits, TTLs less the time spent in the cache, our OPT, truncated (TC)
/// if over `limit`. False if the entry does not fit the question.
fn serve(entry: &Entry, q: &Query<'_>, limit: usize, now: Instant, out: &mut Vec<u8>) -> bool {
    let question = q.question();
    if entry.question_end != wire::HEADER_LEN + question.len() {
        return false;
    }
    out.clear();
    out.extend_from_slice(&entry.message);
    out[0..2].copy_from_slice(&q.id.to_be_bytes());
    out[wire::HEADER_LEN..entry.question_end].copy_from_slice(question);
    let upstream = u16::from_be_bytes([out[2], out[3]]);
    let mut flags = (upstream & !(wire::FLAG_RD | wire::FLAG_CD | wire::FLAG_TC))
        | (q.flags & (wire::FLAG_RD | wire::FLAG_CD))
        | wire::FLAG_QR;
    let wants_ad = q.flags & wire::FLAG_AD != 0 || q.edns.is_some_and(|e| e.dnssec_ok);
    if !wants_ad {
        flags &= !wire::FLAG_AD;
    }
    let elapsed =
        u32::try_from(now.saturating_duration_since(entry.stored).as_secs()).unwrap_or(u32::MAX);
    if elapsed > 0 {
        for &at in &*entry.ttls {
            let ttl = u32::from_be_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
            out[at..at + 4].copy_from_slice(&ttl.saturating_sub(elapsed).to_be_bytes());
        }
    }
    let mut additionals = u16::from_be_bytes([out[10], out[11]]);
    let opt_len = if q.edns.is_some() { wire::OPT_LEN } else { 0 };
    if out.len() + opt_len > limit {
        out.truncate(entry.question_end);
        flags |= wire::FLAG_TC;
        wire::set_counts(out, [1, 0, 0, 0]);
        additionals = 0;
    }
    if let Some(edns) = q.edns {
        wire::write_opt(out, edns, 0);
        additionals += 1;
    }
    out[10..12].copy_from_slice(&additionals.to_be_bytes());
    wire::set_flags(out, flags);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &[u8], qtype: u16) -> Vec<u8> {
        let mut q = Vec::new();
        wire::write_header(&mut q, 0x4242, wire::FLAG_RD, [1, 0, 0, 0]);
        q.extend_from_slice(name);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&wire::CLASS_IN.to_be_bytes());
        q
    }

    /// An upstream reply to `request` with one A record of `ttl` and an
    /// OPT record.
    fn reply(request: &[u8], ttl: u32, rcode: u8) -> Vec<u8> {
        let mut r = request[..request.len()].to_vec();
        r[2] = 0x81;
        r[3] = 0x80 | rcode;
        wire::set_counts(&mut r, [1, u16::from(rcode == 0), 0, 1]);
        if rcode == 0 {
            wire::write_pointer_record(&mut r, 12, wire::TYPE_A, ttl, &[192, 0, 2, 1]);
        }
        wire::write_opt(
            &mut r,
            wire::Edns {
                payload: 4096,
                dnssec_ok: false,
                version: 0,
            },
            0,
        );
        r
    }

    #[test]
    fn entries_drop_opt_cap_ttls_and_serve_with_the_clients_id() {
        let forwarder = Forwarder::new(Vec::new(), Duration::from_secs(30));
        let packet = query(b"\x07example\x03com\x00", wire::TYPE_A);
        let (entry, ttl) = forwarder.entry(&reply(&packet, 300, 0)).unwrap();
        assert_eq!(ttl, 30);
        let walked = wire::walk(&entry.message).unwrap();
        assert!(walked.additionals.is_empty());
        assert_eq!(walked.answers[0].ttl, 30);

        let mut asked = query(b"\x07EXAMPLE\x03com\x00", wire::TYPE_A);
        asked[0..2].copy_from_slice(&7u16.to_be_bytes());
        let q = wire::parse_query(&asked).unwrap();
        forwarder.insert(&q, entry, ttl);
        assert_eq!(forwarder.cached(), 1);
        let mut out = Vec::new();
        assert!(forwarder.answer_from_cache(&q, 512, &mut out));
        let walked = wire::walk(&out).unwrap();
        assert_eq!(walked.id, 7);
        assert_eq!(&out[12..25], &asked[12..25], "question echoed as asked");
        assert_eq!(walked.answers.len(), 1);
        assert!(
            walked.additionals.is_empty(),
            "no OPT for a client without one"
        );
    }

    #[test]
    fn negative_answers_use_the_soa_minimum_and_failures_are_not_kept() {
        let forwarder = Forwarder::new(Vec::new(), Duration::from_secs(30));
        let packet = query(b"\x04nope\x00", wire::TYPE_A);
        let mut r = packet.clone();
        r[2] = 0x81;
        r[3] = 0x83;
        wire::set_counts(&mut r, [1, 0, 1, 0]);
        // SOA rdata: two root names and five numbers, minimum 7.
        let mut soa = vec![0, 0];
        for n in [1u32, 2, 3, 4, 7] {
            soa.extend_from_slice(&n.to_be_bytes());
        }
        wire::write_pointer_record(&mut r, 12, wire::TYPE_SOA, 60, &soa);
        assert_eq!(forwarder.entry(&r).unwrap().1, 7);
        assert_eq!(forwarder.entry(&reply(&packet, 300, 2)).unwrap().1, 0);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut forwarder = Forwarder::new(Vec::new(), Duration::from_secs(30));
        forwarder.capacity = 50;
        for i in 0..200u32 {
            let name = format!("\x04{i:04}\x00");
            let packet = query(name.as_bytes(), wire::TYPE_A);
            let q = wire::parse_query(&packet).unwrap();
            let (entry, ttl) = forwarder.entry(&reply(&packet, 300, 0)).unwrap();
            forwarder.insert(&q, entry, ttl);
            assert!(forwarder.cached() <= 50);
        }
    }

    #[tokio::test]
    async fn no_upstreams_is_servfail() {
        let forwarder = Forwarder::new(Vec::new(), Duration::from_secs(30));
        let packet = query(b"\x07example\x03com\x00", wire::TYPE_A);
        let q = wire::parse_query(&packet).unwrap();
        let mut out = Vec::new();
        forwarder.forward(&q, 512, &mut out).await;
        let walked = wire::walk(&out).unwrap();
        assert_eq!(walked.rcode(), wire::RCODE_SERVFAIL);
        assert_eq!(walked.id, 0x4242);
    }
}
