//! A tiny DNS client on hickory-proto for the integration tests.

// Each test file uses its own subset.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::net::UdpSocket;

/// How long any answer may take.
pub const WAIT: Duration = Duration::from_secs(5);

/// A query with RD set; the name keeps its case.
pub fn query(name: &str, qtype: RecordType) -> Message {
    let mut msg = Message::query();
    msg.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    msg.metadata.recursion_desired = true;
    msg
}

/// `msg` with an OPT record announcing `payload`.
pub fn with_edns(mut msg: Message, payload: u16) -> Message {
    let mut edns = Edns::new();
    edns.set_max_payload(payload);
    msg.set_edns(edns);
    msg
}

/// Sends `packet` over UDP; the answer, if one comes within [`WAIT`].
pub async fn udp_raw(server: SocketAddr, packet: &[u8]) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(packet, server).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(WAIT, socket.recv(&mut buf))
        .await
        .ok()?
        .unwrap();
    buf.truncate(n);
    Some(buf)
}

/// Asks over UDP; checks the answer carries the query's id.
pub async fn udp(server: SocketAddr, msg: &Message) -> Message {
    let reply = udp_raw(server, &msg.to_vec().unwrap())
        .await
        .expect("no UDP answer");
    let reply = Message::from_vec(&reply).unwrap();
    assert_eq!(reply.metadata.id, msg.metadata.id, "the client's id");
    reply
}

/// The answers' data as text, in order.
pub fn data(reply: &Message) -> Vec<String> {
    reply.answers.iter().map(|r| r.data.to_string()).collect()
}
