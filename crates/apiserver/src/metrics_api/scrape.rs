//! Reading a node agent's `/metrics/resource` answer (the kubelet's
//! resource metrics in the Prometheus text format) into plain figures:
//! the node's, each pod's and each container's cumulative CPU seconds and
//! working-set bytes, with the sample's own timestamp when it has one (the
//! kubelet writes them; Skiff's agent does not, so the scraper's clock is
//! used). Pure: no I/O, no clock; it keeps nothing and computes no rates
//! (that is `super::store`).

use std::collections::BTreeMap;

/// One object's figures in one scrape.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Point {
    /// Cumulative CPU time, core-seconds.
    pub cpu_seconds: Option<f64>,
    /// Working set, bytes.
    pub memory_bytes: Option<f64>,
    /// The CPU sample's timestamp (ms since the epoch), when it had one.
    pub timestamp_ms: Option<i64>,
}

/// A pod's figures and its containers'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodPoint {
    pub pod: Point,
    /// By container name.
    pub containers: BTreeMap<String, Point>,
}

/// Everything one `/metrics/resource` answer says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    pub node: Point,
    /// By (namespace, name).
    pub pods: BTreeMap<(String, String), PodPoint>,
    /// `resource_scrape_error` was 1: the agent could not list its runtime.
    pub error: bool,
}

/// Why an answer could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("line {line}: not a sample of the text format: {text:?}")]
    Line { line: usize, text: String },
    #[error("line {line}: bad sample value {value:?}")]
    Value { line: usize, value: String },
}

/// One sample line: name, labels, value, timestamp.
type Sample<'a> = (&'a str, Vec<(String, String)>, f64, Option<i64>);

/// Splits `name{a="b",c="d"} value [timestamp]`.
fn sample(line: &str, n: usize) -> Result<Sample<'_>, Error> {
    let bad = || Error::Line {
        line: n,
        text: line.to_string(),
    };
    let name_end = line.find(['{', ' ', '\t']).ok_or_else(bad)?;
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let mut key = String::new();
        let close;
        loop {
            let (i, c) = chars.next().ok_or_else(bad)?;
            match c {
                '}' => {
                    close = i;
                    break;
                }
                ',' | ' ' => {}
                '=' => {
                    if chars.next().map(|(_, c)| c) != Some('"') {
                        return Err(bad());
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next().ok_or_else(bad)?.1 {
                            '"' => break,
                            '\\' => match chars.next().ok_or_else(bad)?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.push((std::mem::take(&mut key).trim().to_string(), value));
                }
                other => key.push(other),
            }
        }
        rest = &body[close + 1..];
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or_else(bad)?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|_| Error::Value {
            line: n,
            value: v.to_string(),
        })?,
    };
    let timestamp = fields.next().and_then(|t| t.parse::<i64>().ok());
    Ok((name, labels, value, timestamp))
}

fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Reads `text`; families other than the resource ones are skipped.
pub fn parse(text: &str) -> Result<Scrape, Error> {
    let mut out = Scrape::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, labels, value, timestamp) = sample(line, i + 1)?;
        let (object, figure) = match name.split_once('_') {
            Some((object @ ("node" | "pod" | "container"), figure)) => (object, figure),
            _ => {
                if name == "resource_scrape_error" {
                    out.error = value != 0.0;
                }
                continue;
            }
        };
        let cpu = match figure {
            "cpu_usage_seconds_total" => true,
            "memory_working_set_bytes" => false,
            _ => continue,
        };
        let point = match object {
            "node" => &mut out.node,
            _ => {
                let (Some(ns), Some(pod)) = (label(&labels, "namespace"), label(&labels, "pod"))
                else {
                    continue;
                };
                let entry = out
                    .pods
                    .entry((ns.to_string(), pod.to_string()))
                    .or_default();
                if object == "pod" {
                    &mut entry.pod
                } else {
                    let Some(c) = label(&labels, "container") else {
                        continue;
                    };
                    entry.containers.entry(c.to_string()).or_default()
                }
            }
        };
        if cpu {
            point.cpu_seconds = Some(value);
            point.timestamp_ms = timestamp;
        } else {
            point.memory_bytes = Some(value);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Skiff's agent writes it (crates/node/src/metrics/resource.rs).
    const AGENT: &str = r#"# HELP container_cpu_usage_seconds [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds counter
container_cpu_usage_seconds_total{container="main",namespace="apps",pod="web"} 2.5
container_cpu_usage_seconds_total{container="side",namespace="apps",pod="web"} 0.25
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="main",namespace="apps",pod="web"} 2048
container_memory_working_set_bytes{container="side",namespace="apps",pod="web"} 1024
# TYPE node_cpu_usage_seconds counter
node_cpu_usage_seconds_total 90
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1024000
# TYPE pod_cpu_usage_seconds counter
pod_cpu_usage_seconds_total{namespace="apps",pod="web"} 3
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="apps",pod="web"} 4096
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# TYPE scrape_error gauge
scrape_error 0
# EOF
"#;

    #[test]
    fn reads_the_agents_text() {
        let s = parse(AGENT).unwrap();
        assert_eq!(s.node.cpu_seconds, Some(90.0));
        assert_eq!(s.node.memory_bytes, Some(1024000.0));
        assert!(!s.error);
        let web = &s.pods[&("apps".to_string(), "web".to_string())];
        assert_eq!(web.pod.cpu_seconds, Some(3.0));
        assert_eq!(web.pod.memory_bytes, Some(4096.0));
        assert_eq!(web.containers.len(), 2);
        assert_eq!(
            web.containers["main"],
            Point {
                cpu_seconds: Some(2.5),
                memory_bytes: Some(2048.0),
                timestamp_ms: None
            }
        );
        assert_eq!(web.containers["side"].cpu_seconds, Some(0.25));
    }

    #[test]
    fn reads_the_kubelets_timestamps_escapes_and_errors() {
        let text = "node_cpu_usage_seconds_total 12.5 1700000000123\n\
            container_cpu_usage_seconds_total{container=\"a\\\"b\",namespace=\"n\",pod=\"p\"} 1e-3 1700000000456\n\
            container_start_time_seconds{container=\"a\",namespace=\"n\",pod=\"p\"} 1.7e9\n\
            resource_scrape_error 1\n";
        let s = parse(text).unwrap();
        assert_eq!(s.node.timestamp_ms, Some(1_700_000_000_123));
        assert!(s.error);
        let p = &s.pods[&("n".to_string(), "p".to_string())];
        assert_eq!(p.containers["a\"b"].cpu_seconds, Some(0.001));
        assert_eq!(p.containers["a\"b"].timestamp_ms, Some(1_700_000_000_456));
        // A family it does not read makes no entry.
        assert_eq!(p.containers.get("a"), None);
    }

    #[test]
    fn refuses_what_is_not_the_text_format() {
        assert!(matches!(
            parse("node_cpu_usage_seconds_total\n"),
            Err(Error::Line { line: 1, .. })
        ));
        assert!(matches!(
            parse("\nnode_memory_working_set_bytes abc\n"),
            Err(Error::Value { line: 2, .. })
        ));
        assert!(matches!(
            parse("pod_cpu_usage_seconds_total{pod=\"x 1\n"),
            Err(Error::Line { .. })
        ));
    }
}
