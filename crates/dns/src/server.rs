//! The sockets: binds the UDP and TCP listeners (IP_FREEBIND, so the
//! pod-bridge gateway may not exist yet; SO_REUSEPORT, one UDP socket per
//! worker) and runs their loops: read a query, answer it from the shared
//! index under a read lock held for microseconds, or hand it to the
//! forwarder in a task of its own (a cache hit is answered inline).
//! TCP carries length-prefixed queries, several per connection, until an
//! idle timeout.
//!
//! Owns the sockets and connection state only: it must not build answers
//! (answer.rs) nor speak to upstreams (forward.rs), and must not hold the
//! index's lock across an await.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::answer::{self, write_error_to, Outcome, Transport};
use crate::external;
use crate::forward::Forwarder;
use crate::wire;
use crate::{Config, SharedRecords};

/// How long a TCP connection may sit idle between queries.
const TCP_IDLE: Duration = Duration::from_secs(10);
/// Open TCP connections per listener; more wait to be accepted.
const TCP_CONNECTIONS: usize = 256;
/// Forwarded queries in flight; more are answered SERVFAIL at once.
const FORWARDS_IN_FLIGHT: usize = 1024;
/// Receive buffer for UDP sockets (bursts from dnsperf-like clients).
const UDP_RECV_BUFFER: usize = 4 << 20;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot bind DNS {proto} socket on {addr}")]
    Bind {
        proto: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// Listeners bound and not yet serving: [`Bound::local_addrs`] tells the
/// ports chosen for port 0.
#[derive(Debug)]
pub struct Bound {
    udp: Vec<UdpSocket>,
    tcp: Vec<TcpListener>,
    addrs: Vec<SocketAddr>,
    upstreams: Vec<SocketAddr>,
    cache_ttl: Duration,
}

/// Binds UDP (`config.workers` sockets each) and TCP on every listen
/// address, TCP on the same port as UDP.
pub async fn bind(config: &Config) -> Result<Bound, Error> {
    let mut bound = Bound {
        udp: Vec::new(),
        tcp: Vec::new(),
        addrs: Vec::new(),
        upstreams: config.upstreams.clone(),
        cache_ttl: config.cache_ttl,
    };
    for &addr in &config.listen {
        let bind_err = |proto| {
            move |source| Error::Bind {
                proto,
                addr,
                source,
            }
        };
        // With port 0 the UDP port is the kernel's pick, which TCP may
        // have in use: pick again a few times.
        let tries = if addr.port() == 0 { 20 } else { 1 };
        let mut attempt = 0;
        let (udp, tcp, local) = loop {
            attempt += 1;
            let first = udp_socket(addr).map_err(bind_err("UDP"))?;
            let local = first.local_addr().map_err(bind_err("UDP"))?;
            match tcp_listener(local) {
                Ok(tcp) => {
                    let mut udp = vec![first];
                    for _ in 1..config.workers.max(1) {
                        udp.push(udp_socket(local).map_err(bind_err("UDP"))?);
                    }
                    break (udp, tcp, local);
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempt < tries => continue,
                Err(e) => return Err(bind_err("TCP")(e)),
            }
        };
        bound.udp.extend(udp);
        bound.tcp.push(tcp);
        bound.addrs.push(local);
    }
    Ok(bound)
}

fn socket(addr: SocketAddr, ty: Type, protocol: Protocol) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), ty, Some(protocol))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
        socket.set_freebind_v6(true)?;
    } else {
        socket.set_freebind_v4(true)?;
    }
    socket.set_nonblocking(true)?;
    Ok(socket)
}

fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket(addr, Type::DGRAM, Protocol::UDP)?;
    socket.set_reuse_port(true)?;
    // A bigger buffer only absorbs bursts; the kernel's cap is fine too.
    let _ = socket.set_recv_buffer_size(UDP_RECV_BUFFER);
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket(addr, Type::STREAM, Protocol::TCP)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

impl Bound {
    /// The addresses bound, one per listen address (UDP and TCP share
    /// the port).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Answers queries from `records` until `shutdown`.
    pub async fn serve(self, records: SharedRecords, shutdown: CancellationToken) {
        let forwarder = Arc::new(Forwarder::new(self.upstreams, self.cache_ttl));
        let forwards = Arc::new(Semaphore::new(FORWARDS_IN_FLIGHT));
        let mut tasks = JoinSet::new();
        for socket in self.udp {
            tasks.spawn(udp_loop(
                Arc::new(socket),
                records.clone(),
                forwarder.clone(),
                forwards.clone(),
            ));
        }
        for listener in self.tcp {
            tasks.spawn(tcp_loop(listener, records.clone(), forwarder.clone()));
        }
        tracing::info!(addrs = ?self.addrs, "cluster DNS serving");
        shutdown.cancelled().await;
        tasks.shutdown().await;
    }
}

async fn udp_loop(
    socket: Arc<UdpSocket>,
    records: SharedRecords,
    forwarder: Arc<Forwarder>,
    forwards: Arc<Semaphore>,
) {
    let mut buf = vec![0u8; usize::from(u16::MAX)];
    let mut out = Vec::with_capacity(usize::from(wire::UDP_MAX) + 64);
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(received) => received,
            Err(e) => {
                tracing::debug!(error = %e, "UDP receive failed");
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let outcome = {
            let index = records.read();
            answer::respond(&index, &buf[..n], Transport::Udp, &mut out)
        };
        match outcome {
            Outcome::Reply => {}
            Outcome::Drop => continue,
            Outcome::Chase(target, qtype) => {
                // Bounded as forwards are; beyond that, the CNAME alone.
                if let Ok(permit) = forwards.clone().try_acquire_owned() {
                    let limit = wire::parse_query(&buf[..n]).map_or(512, |q| q.udp_limit());
                    let ours = out.clone();
                    let (socket, forwarder) = (socket.clone(), forwarder.clone());
                    tokio::spawn(async move {
                        let _permit = permit;
                        let out =
                            external::complete(&forwarder, &ours, &target, qtype, limit).await;
                        send(&socket, &out, peer).await;
                    });
                    continue;
                }
            }
            Outcome::Forward(q) => {
                let limit = q.udp_limit();
                if !forwarder.answer_from_cache(&q, limit, &mut out) {
                    match forwards.clone().try_acquire_owned() {
                        Ok(permit) => {
                            let packet = buf[..n].to_vec();
                            let (socket, forwarder) = (socket.clone(), forwarder.clone());
                            tokio::spawn(async move {
                                let _permit = permit;
                                let Ok(q) = wire::parse_query(&packet) else {
                                    return;
                                };
                                let mut out = Vec::new();
                                forwarder.forward(&q, limit, &mut out).await;
                                send(&socket, &out, peer).await;
                            });
                            continue;
                        }
                        Err(_) => write_error_to(&mut out, &q, wire::RCODE_SERVFAIL),
                    }
                }
            }
        }
        send(&socket, &out, peer).await;
    }
}

async fn send(socket: &UdpSocket, out: &[u8], peer: SocketAddr) {
    if let Err(e) = socket.send_to(out, peer).await {
        tracing::debug!(error = %e, %peer, "UDP send failed");
    }
}

async fn tcp_loop(listener: TcpListener, records: SharedRecords, forwarder: Arc<Forwarder>) {
    let slots = Arc::new(Semaphore::new(TCP_CONNECTIONS));
    // Dropped with this loop: connections end with the server.
    let mut connections = JoinSet::new();
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "TCP accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (records, forwarder) = (records.clone(), forwarder.clone());
        connections.spawn(async move {
            let _slot = slot;
            if let Err(e) = connection(stream, records, forwarder).await {
                tracing::debug!(error = %e, "TCP connection ended");
            }
        });
    }
}

/// Serves one TCP connection: queries in order until EOF, an error, a
/// packet not worth answering, or [`TCP_IDLE`] without a query.
async fn connection(
    mut stream: TcpStream,
    records: SharedRecords,
    forwarder: Arc<Forwarder>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut packet = Vec::new();
    let mut out = Vec::new();
    let mut framed = Vec::new();
    loop {
        let len = match tokio::time::timeout(TCP_IDLE, stream.read_u16()).await {
            Ok(Ok(len)) => len,
            Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        packet.resize(usize::from(len), 0);
        match tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut packet)).await {
            Ok(read) => read?,
            Err(_) => return Ok(()),
        };
        let outcome = {
            let index = records.read();
            answer::respond(&index, &packet, Transport::Tcp, &mut out)
        };
        match outcome {
            Outcome::Reply => {}
            Outcome::Drop => return Ok(()),
            Outcome::Chase(target, qtype) => {
                let ours = std::mem::take(&mut out);
                out = external::complete(&forwarder, &ours, &target, qtype, usize::from(u16::MAX))
                    .await;
            }
            Outcome::Forward(q) => forwarder.forward(&q, usize::from(u16::MAX), &mut out).await,
        }
        framed.clear();
        framed.extend_from_slice(&(out.len() as u16).to_be_bytes());
        framed.extend_from_slice(&out);
        stream.write_all(&framed).await?;
    }
}
