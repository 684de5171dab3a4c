//! Tests of quantity parsing and pod request arithmetic.

use super::*;
use skiff_client::testing::pod;

#[test]
fn parses_quantities() {
    let milli = [
        ("100m", 100),
        ("1", 1000),
        ("0.5", 500),
        (".5", 500),
        ("2.", 2000),
        ("1.5k", 1_500_000),
        ("1e3", 1_000_000),
        ("1E-3", 1),
        ("0.0001", 1), // rounds up
        ("+2", 2000),
        ("-1", -1000),
        ("0", 0),
    ];
    for (s, want) in milli {
        assert_eq!(parse_milli(s), Ok(want), "{s}");
    }
    let value = [
        ("128Mi", 128 * 1024 * 1024),
        ("1Gi", 1 << 30),
        ("1G", 1_000_000_000),
        ("1e3", 1000),
        ("1E", 1_000_000_000_000_000_000),
        ("1Ki", 1024),
        ("1k", 1000),
        ("100m", 1), // Value() rounds up
        ("1.5Gi", 3 << 29),
        ("110", 110),
        ("0.1", 1),
        ("12e+2", 1200),
    ];
    for (s, want) in value {
        assert_eq!(parse_value(s), Ok(want), "{s}");
    }
    for bad in [
        "", "m", "1x", "1 Mi", "1e", "1..2", "Mi", "1KiB", "1e1.5", "--1", ".",
    ] {
        assert!(
            matches!(parse_value(bad), Err(ResourceError::Format(_))),
            "{bad}"
        );
    }
    assert!(matches!(
        parse_value("100Ei"),
        Err(ResourceError::Overflow(_))
    ));
    assert!(matches!(
        parse_value("1e40"),
        Err(ResourceError::Overflow(_))
    ));
}

#[test]
fn pod_requests_follow_upstream_rules() {
    let mi = 1024 * 1024;
    let cases: Vec<(&str, Pod, MissingRequests, i64, i64)> = vec![
        (
            "one container",
            pod("a").req_cpu("100m").req_mem("64Mi").build(),
            MissingRequests::Zero,
            100,
            64 * mi,
        ),
        (
            "containers sum",
            pod("a")
                .req_cpu("100m")
                .container("b", "img")
                .req_cpu("250m")
                .build(),
            MissingRequests::Zero,
            350,
            0,
        ),
        (
            "init container max",
            pod("a")
                .req_cpu("100m")
                .init_container("i", "2", "1Gi")
                .build(),
            MissingRequests::Zero,
            2000,
            1024 * mi,
        ),
        (
            "sidecar adds and raises later init containers",
            pod("a")
                .req_cpu("100m")
                .sidecar("s", "200m", "0")
                .init_container("i", "150m", "0")
                .build(),
            MissingRequests::Zero,
            350, // max(100+200, 200+150)
            0,
        ),
        (
            "overhead",
            pod("a").req_cpu("100m").overhead("50m", "10Mi").build(),
            MissingRequests::Zero,
            150,
            10 * mi,
        ),
        (
            "non-zero defaults",
            pod("a").build(),
            MissingRequests::NonZeroDefaults,
            100,
            200 * mi,
        ),
        (
            "explicit zero is kept",
            pod("a").req_cpu("0").build(),
            MissingRequests::NonZeroDefaults,
            0,
            200 * mi,
        ),
    ];
    for (name, p, missing, cpu, mem) in cases {
        let r = pod_requests(&p, missing).expect(name);
        assert_eq!((r.milli_cpu, r.memory), (cpu, mem), "{name}");
    }
}

#[test]
fn invalid_request_names_the_resource() {
    let p = pod("a").req_cpu("lots").build();
    let err = pod_requests(&p, MissingRequests::Zero).expect_err("bad cpu");
    assert!(
        err.to_string()
            .starts_with("resource cpu: quantities must match"),
        "{err}"
    );
}
