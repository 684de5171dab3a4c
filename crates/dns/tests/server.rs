//! The server on 127.0.0.1 (port 0), fed through a shared index (no API
//! server), asked by a tiny hickory-proto client over UDP and TCP; a fake
//! upstream on 127.0.0.1 counts what is forwarded to it.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use skiff_dns::{Config, Records, SharedRecords};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;

mod support;

use support::{data, query, udp, udp_raw, with_edns, WAIT};

fn service(ns: &str, name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"namespace": ns, "name": name}, "spec": spec}))
        .unwrap()
}

fn slice(ns: &str, name: &str, svc: &str, ips: &[String]) -> EndpointSlice {
    let endpoints: Vec<_> = ips.iter().map(|ip| json!({"addresses": [ip]})).collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
    }))
    .unwrap()
}

/// A cluster with a ClusterIP Service, an ExternalName one, and headless
/// ones of 12, 30 and 100 endpoints.
fn cluster() -> Records {
    let mut r = Records::new("cluster.local", 5);
    r.apply_service(&service(
        "default",
        "web",
        json!({"clusterIP": "10.96.0.10", "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}),
    ));
    r.apply_service(&service(
        "default",
        "search",
        json!({"type": "ExternalName", "externalName": "www.example.com"}),
    ));
    for (name, n) in [("few", 12u32), ("mid", 30), ("big", 100)] {
        r.apply_service(&service("default", name, json!({"clusterIP": "None"})));
        let ips: Vec<String> = (0..n).map(|i| format!("10.42.{}.{}", n, i + 1)).collect();
        r.apply_slice(&slice("default", &format!("{name}-1"), name, &ips));
    }
    r
}

struct Server {
    addr: SocketAddr,
    records: SharedRecords,
    shutdown: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(records: Records, upstreams: Vec<SocketAddr>) -> Server {
    let mut config = Config::new(vec!["127.0.0.1:0".parse().unwrap()], "cluster.local");
    config.upstreams = upstreams;
    config.workers = 2;
    let bound = skiff_dns::bind(&config).await.unwrap();
    let addr = bound.local_addrs()[0];
    assert_ne!(addr.port(), 0);
    let records = SharedRecords::new(records);
    let shutdown = CancellationToken::new();
    tokio::spawn(bound.serve(records.clone(), shutdown.clone()));
    Server {
        addr,
        records,
        shutdown,
    }
}

async fn tcp(stream: &mut TcpStream, msg: &Message) -> Message {
    let packet = msg.to_vec().unwrap();
    stream
        .write_all(&(packet.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&packet).await.unwrap();
    let len = tokio::time::timeout(WAIT, stream.read_u16())
        .await
        .unwrap()
        .unwrap();
    let mut buf = vec![0u8; usize::from(len)];
    stream.read_exact(&mut buf).await.unwrap();
    let reply = Message::from_vec(&buf).unwrap();
    assert_eq!(reply.metadata.id, msg.metadata.id);
    reply
}

#[tokio::test]
async fn answers_cluster_names_over_udp() {
    let server = start(cluster(), Vec::new()).await;
    let reply = udp(
        server.addr,
        &query("web.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.metadata.authoritative);
    assert!(reply.metadata.recursion_available);
    assert!(reply.metadata.recursion_desired);
    assert_eq!(data(&reply), ["10.96.0.10"]);

    let reply = udp(
        server.addr,
        &query("_http._tcp.web.default.svc.cluster.local.", RecordType::SRV),
    )
    .await;
    assert_eq!(data(&reply), ["0 100 80 web.default.svc.cluster.local."]);
    assert_eq!(reply.additionals.len(), 1);

    let reply = udp(
        server.addr,
        &query("10.0.96.10.in-addr.arpa.", RecordType::PTR),
    )
    .await;
    assert_eq!(data(&reply), ["web.default.svc.cluster.local."]);

    let reply = udp(
        server.addr,
        &query("search.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert!(matches!(reply.answers[0].data, RData::CNAME(_)));
    assert_eq!(data(&reply), ["www.example.com."]);

    let reply = udp(
        server.addr,
        &query("nope.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    assert!(reply.answers.is_empty());
    assert!(matches!(reply.authorities[0].data, RData::SOA(_)));

    let reply = udp(
        server.addr,
        &query("web.default.svc.cluster.local.", RecordType::AAAA),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(reply.answers.is_empty());
    assert_eq!(reply.authorities.len(), 1);

    let reply = udp(
        server.addr,
        &query("10-1-2-3.default.pod.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(data(&reply), ["10.1.2.3"]);

    // The question comes back as asked.
    let reply = udp(
        server.addr,
        &query("WEB.Default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(
        reply.queries[0].name().to_ascii(),
        "WEB.Default.svc.cluster.local."
    );
    assert_eq!(data(&reply), ["10.96.0.10"]);
}

#[tokio::test]
async fn answers_several_queries_on_one_tcp_connection() {
    let server = start(cluster(), Vec::new()).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let reply = tcp(
        &mut stream,
        &query("web.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(data(&reply), ["10.96.0.10"]);
    let reply = tcp(
        &mut stream,
        &query("big.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.answers.len(), 100);
    assert!(!reply.metadata.truncation);
    let reply = tcp(
        &mut stream,
        &query("nope.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
}

#[tokio::test]
async fn large_answers_are_truncated_over_udp_and_whole_over_tcp() {
    let server = start(cluster(), Vec::new()).await;
    // 30 addresses: over 512 bytes, within an EDNS client's 1232.
    let reply = udp(
        server.addr,
        &query("mid.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert!(reply.metadata.truncation);
    assert!(reply.answers.is_empty());
    let reply = udp(
        server.addr,
        &with_edns(query("mid.default.svc.cluster.local.", RecordType::A), 4096),
    )
    .await;
    assert!(!reply.metadata.truncation);
    assert_eq!(reply.answers.len(), 30);
    assert_eq!(reply.edns.as_ref().map(|e| e.max_payload()), Some(1232));

    // 100 addresses: too big for any UDP answer; the client retries on TCP.
    let asked = with_edns(query("big.default.svc.cluster.local.", RecordType::A), 4096);
    let reply = udp(server.addr, &asked).await;
    assert!(reply.metadata.truncation);
    assert!(reply.answers.is_empty());
    assert!(reply.edns.is_some());
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let reply = tcp(&mut stream, &asked).await;
    assert_eq!(reply.answers.len(), 100);

    // SRV answers shed their additional records before truncating: 12
    // SRVs fit in 1232 bytes, not with their 12 addresses.
    let srv = query("_http._tcp.few.default.svc.cluster.local.", RecordType::SRV);
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(tcp(&mut stream, &srv).await.additionals.len(), 12);
    let reply = udp(server.addr, &with_edns(srv, 1232)).await;
    assert!(!reply.metadata.truncation);
    assert_eq!(reply.answers.len(), 12);
    assert!(reply.additionals.is_empty());
    assert!(reply.edns.is_some());
}

#[tokio::test]
async fn follows_changes_to_the_shared_index() {
    let server = start(Records::new("cluster.local", 5), Vec::new()).await;
    let name = "late.default.svc.cluster.local.";
    let reply = udp(server.addr, &query(name, RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    server.records.write().apply_service(&service(
        "default",
        "late",
        json!({"clusterIP": "10.96.0.99"}),
    ));
    let reply = udp(server.addr, &query(name, RecordType::A)).await;
    assert_eq!(data(&reply), ["10.96.0.99"]);
    server.records.replace(Records::new("cluster.local", 5));
    let reply = udp(server.addr, &query(name, RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
}

#[tokio::test]
async fn bad_packets_are_dropped_or_refused_and_the_server_goes_on() {
    let server = start(cluster(), Vec::new()).await;
    assert_eq!(udp_raw(server.addr, b"\x01\x02\x03").await, None);
    let mut two = query("web.default.svc.cluster.local.", RecordType::A);
    two.add_query(Query::query(Name::from_str("x.").unwrap(), RecordType::A));
    assert_eq!(
        udp(server.addr, &two).await.metadata.response_code,
        ResponseCode::FormErr
    );
    let reply = udp(server.addr, &query("cluster.local.", RecordType::AXFR)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::Refused);
    let mut notify = query("cluster.local.", RecordType::SOA);
    notify.metadata.op_code = OpCode::Notify;
    assert_eq!(
        udp(server.addr, &notify).await.metadata.response_code,
        ResponseCode::NotImp
    );
    // Garbage after a valid header.
    let mut junk = query("web.default.svc.cluster.local.", RecordType::A)
        .to_vec()
        .unwrap();
    junk.truncate(20);
    let reply = udp_raw(server.addr, &junk).await.expect("FORMERR");
    assert_eq!(reply[3] & 0x0F, 1);
    let reply = udp(
        server.addr,
        &query("web.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(data(&reply), ["10.96.0.10"]);
}

#[tokio::test]
async fn not_ready_index_is_servfail_in_the_zone() {
    let mut records = cluster();
    records.set_ready(false);
    let server = start(records, Vec::new()).await;
    let reply = udp(
        server.addr,
        &query("web.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
}

/// A fake upstream on UDP and TCP (same port): answers every A question
/// with 192.0.2.1 (TTL 60), except that names starting with "big" get a
/// truncated UDP answer (the whole one over TCP). Counts UDP queries.
struct Upstream {
    addr: SocketAddr,
    udp_queries: Arc<AtomicUsize>,
    tcp_queries: Arc<AtomicUsize>,
}

fn upstream_answer(request: &[u8], truncated: bool) -> Vec<u8> {
    let request = Message::from_vec(request).unwrap();
    let mut reply = Message::response(request.metadata.id, OpCode::Query);
    reply.metadata.recursion_desired = request.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.add_queries(request.queries.clone());
    let name = request.queries[0].name().clone();
    if truncated {
        reply.metadata.truncation = true;
    } else if name.to_ascii().starts_with("nx") {
        reply.metadata.response_code = ResponseCode::NXDomain;
    } else {
        reply.add_answer(Record::from_rdata(name, 60, RData::A(A::new(192, 0, 2, 1))));
    }
    reply.to_vec().unwrap()
}

async fn upstream() -> Upstream {
    // The kernel's UDP pick may be taken on TCP (another test's listener):
    // pick again until both are free.
    let mut attempt = 0;
    let (socket, addr, listener) = loop {
        attempt += 1;
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        match TcpListener::bind(addr).await {
            Ok(listener) => break (socket, addr, listener),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempt < 50 => continue,
            Err(e) => panic!("no port free on both UDP and TCP: {e}"),
        }
    };
    let udp_queries = Arc::new(AtomicUsize::new(0));
    let tcp_queries = Arc::new(AtomicUsize::new(0));
    let count = udp_queries.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65535];
        loop {
            let (n, peer) = socket.recv_from(&mut buf).await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let big = Message::from_vec(&buf[..n]).unwrap().queries[0]
                .name()
                .to_ascii()
                .starts_with("big");
            let reply = upstream_answer(&buf[..n], big);
            socket.send_to(&reply, peer).await.unwrap();
        }
    });
    let count = tcp_queries.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let len = stream.read_u16().await.unwrap();
            let mut buf = vec![0u8; usize::from(len)];
            stream.read_exact(&mut buf).await.unwrap();
            let reply = upstream_answer(&buf, false);
            stream
                .write_all(&(reply.len() as u16).to_be_bytes())
                .await
                .unwrap();
            stream.write_all(&reply).await.unwrap();
        }
    });
    Upstream {
        addr,
        udp_queries,
        tcp_queries,
    }
}

#[tokio::test]
async fn forwards_other_names_and_caches_the_answers() {
    let up = upstream().await;
    let server = start(cluster(), vec![up.addr]).await;
    let reply = udp(server.addr, &query("www.example.com.", RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert!(!reply.metadata.authoritative);
    assert_eq!(data(&reply), ["192.0.2.1"]);
    assert!(reply.answers[0].ttl <= 30, "capped at cache_ttl");
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);

    // Again (another id, another case): from the cache.
    let reply = udp(server.addr, &query("WWW.example.com.", RecordType::A)).await;
    assert_eq!(data(&reply), ["192.0.2.1"]);
    assert_eq!(reply.queries[0].name().to_ascii(), "WWW.example.com.");
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);
    // Over TCP too.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let reply = tcp(&mut stream, &query("www.example.com.", RecordType::A)).await;
    assert_eq!(data(&reply), ["192.0.2.1"]);
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);

    // Another type is another question.
    let reply = udp(server.addr, &query("www.example.com.", RecordType::TXT)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 2);

    // Reverse names we do not hold are forwarded too.
    let reply = udp(
        server.addr,
        &query("1.2.0.192.in-addr.arpa.", RecordType::PTR),
    )
    .await;
    assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 3);

    // NXDOMAIN without an SOA is passed on but not kept.
    for _ in 0..2 {
        let reply = udp(server.addr, &query("nx.example.com.", RecordType::A)).await;
        assert_eq!(reply.metadata.response_code, ResponseCode::NXDomain);
    }
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 5);

    // Cluster names never reach the upstream.
    udp(
        server.addr,
        &query("nope.default.svc.cluster.local.", RecordType::A),
    )
    .await;
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_truncated_upstream_answer_is_asked_again_over_tcp() {
    let up = upstream().await;
    let server = start(cluster(), vec![up.addr]).await;
    let reply = udp(server.addr, &query("big.example.com.", RecordType::A)).await;
    assert!(!reply.metadata.truncation);
    assert_eq!(data(&reply), ["192.0.2.1"]);
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);
    assert_eq!(up.tcp_queries.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_silent_upstream_is_skipped_and_none_at_all_is_servfail() {
    let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let up = upstream().await;
    let server = start(cluster(), vec![silent.local_addr().unwrap(), up.addr]).await;
    let started = std::time::Instant::now();
    let reply = udp(server.addr, &query("www.example.com.", RecordType::A)).await;
    assert_eq!(data(&reply), ["192.0.2.1"]);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited for the first upstream"
    );

    let none = start(cluster(), Vec::new()).await;
    let reply = udp(none.addr, &query("www.example.com.", RecordType::A)).await;
    assert_eq!(reply.metadata.response_code, ResponseCode::ServFail);
}

#[tokio::test]
async fn bind_fails_for_an_address_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let config = Config::new(vec![taken.local_addr().unwrap()], "cluster.local");
    let err = skiff_dns::bind(&config).await.unwrap_err();
    assert!(err.to_string().contains("TCP"), "{err}");
}

#[tokio::test]
async fn an_external_name_is_followed_through_the_upstreams() {
    let up = upstream().await;
    let server = start(cluster(), vec![up.addr]).await;
    for reply in [
        udp(
            server.addr,
            &query("search.default.svc.cluster.local.", RecordType::A),
        )
        .await,
        tcp(
            &mut TcpStream::connect(server.addr).await.unwrap(),
            &query("search.default.svc.cluster.local.", RecordType::A),
        )
        .await,
    ] {
        assert_eq!(reply.metadata.response_code, ResponseCode::NoError);
        assert_eq!(data(&reply), ["www.example.com.", "192.0.2.1"]);
        assert_eq!(reply.answers[1].name.to_ascii(), "www.example.com.");
    }
    // The second time from the forwarder's cache.
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);
    // Asked for the CNAME itself: no chase.
    let reply = udp(
        server.addr,
        &query("search.default.svc.cluster.local.", RecordType::CNAME),
    )
    .await;
    assert_eq!(data(&reply), ["www.example.com."]);
    assert_eq!(up.udp_queries.load(Ordering::SeqCst), 1);
}
