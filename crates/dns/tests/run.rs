//! `run` end to end against the real API server in-process: Services and
//! EndpointSlices written through the API reach the answers through the
//! shared informers.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use skiff_client::informer::Informers;
use skiff_dns::Config;
use skiff_testkit::apiserver::{Options, TestApiServer};
use tokio_util::sync::CancellationToken;

mod support;

use support::{data, query, udp};

/// Asks until `done` holds for the answer (the informers are eventually
/// consistent), or fails after a while.
async fn until(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
    done: impl Fn(&Message) -> bool,
) -> Message {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = udp(server, &query(name, qtype)).await;
        if done(&reply) {
            return reply;
        }
        assert!(Instant::now() < deadline, "{name} {qtype}: still {reply:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_services_and_slices_through_the_informers() {
    let api = TestApiServer::start(|c| c, Options::default()).await;
    let client = api.client().await;
    let shutdown = CancellationToken::new();
    let informers = Informers::new(client.clone(), shutdown.clone());
    let port = skiff_testkit::free_port().unwrap();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let server = tokio::spawn(skiff_dns::run(
        Config::new(vec![addr], "cluster.local"),
        informers,
        shutdown.clone(),
    ));

    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let web: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }))
    .unwrap();
    let web = services.create(&PostParams::default(), &web).await.unwrap();
    let ip = web.spec.unwrap().cluster_ip.expect("a cluster IP");
    let reply = until(addr, "web.default.svc.cluster.local.", RecordType::A, |r| {
        !r.answers.is_empty()
    })
    .await;
    assert_eq!(data(&reply), [ip]);

    let headless: Service = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]},
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &headless)
        .await
        .unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "db-1", "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.42.0.7"], "hostname": "db-0", "conditions": {"ready": true}},
            {"addresses": ["10.42.0.8"], "conditions": {"ready": false}},
        ],
        "ports": [{"name": "pg", "protocol": "TCP", "port": 5432}],
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    let reply = until(
        addr,
        "db-0.db.default.svc.cluster.local.",
        RecordType::A,
        |r| !r.answers.is_empty(),
    )
    .await;
    assert_eq!(data(&reply), ["10.42.0.7"]);
    let reply = udp(
        addr,
        &query("_pg._tcp.db.default.svc.cluster.local.", RecordType::SRV),
    )
    .await;
    assert_eq!(
        data(&reply),
        ["0 100 5432 db-0.db.default.svc.cluster.local."]
    );

    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    until(addr, "web.default.svc.cluster.local.", RecordType::A, |r| {
        r.metadata.response_code == ResponseCode::NXDomain
    })
    .await;

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("run stops on shutdown")
        .unwrap()
        .unwrap();
}
