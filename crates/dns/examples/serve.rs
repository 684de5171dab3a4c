//! Serves a synthetic cluster (no API server) for load tests with
//! dnsperf: `cargo run --release -p skiff-dns --example serve -- ADDR
//! [SERVICES] [UPSTREAM]` answers `svc-<i>.default.svc.cluster.local`
//! (ClusterIP 10.96.x.y) for i below SERVICES (default 1000) on ADDR
//! (default 127.0.0.1:5300), on one thread, forwarding other names to
//! UPSTREAM if given.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Service;
use serde_json::json;
use skiff_dns::{Config, Records, SharedRecords};
use tokio_util::sync::CancellationToken;

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .as_deref()
        .unwrap_or("127.0.0.1:5300")
        .parse()
        .expect("ADDR");
    let services: u32 = args
        .next()
        .as_deref()
        .unwrap_or("1000")
        .parse()
        .expect("SERVICES");
    let upstream: Option<SocketAddr> = args.next().map(|u| u.parse().expect("UPSTREAM"));

    let mut records = Records::new("cluster.local", 5);
    for i in 0..services {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"namespace": "default", "name": format!("svc-{i}")},
            "spec": {
                "clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
                "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
            },
        }))
        .expect("a Service");
        records.apply_service(&svc);
    }
    let mut config = Config::new(vec![addr], "cluster.local");
    config.upstreams = upstream.into_iter().collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let bound = skiff_dns::bind(&config).await.expect("bind");
        eprintln!("serving {services} services on {:?}", bound.local_addrs());
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            stop.cancel();
        });
        bound.serve(SharedRecords::new(records), shutdown).await;
    });
}
