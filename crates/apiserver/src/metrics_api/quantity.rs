//! How metrics.k8s.io answers write their figures, as metrics-server
//! writes them through apimachinery's `resource.Quantity` and Go's
//! `time.Duration`: CPU as a decimal quantity scaled from nanocores
//! (`123456n`, `250m`, `2`), memory as a binary quantity from bytes
//! (`2048Ki`, `1Mi`, or plain bytes when not a multiple of 1024), the
//! window as a Go duration (`15.003s`). Pure formatting, nothing else.

use std::time::Duration;

/// Nanocores as the canonical decimal quantity (`NewScaledQuantity(n, -9)`).
pub fn cpu(nanocores: u64) -> String {
    if nanocores == 0 {
        return "0".into();
    }
    let (mut value, mut exponent) = (nanocores, -9i32);
    while value % 1000 == 0 && exponent < 18 {
        value /= 1000;
        exponent += 3;
    }
    let suffix = match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        _ => "E",
    };
    format!("{value}{suffix}")
}

/// Bytes as the canonical binary quantity (`NewQuantity(b, BinarySI)`).
pub fn memory(bytes: u64) -> String {
    if bytes < 1024 {
        return bytes.to_string();
    }
    let (mut value, mut power) = (bytes, 0usize);
    while value % 1024 == 0 && power < 6 {
        value /= 1024;
        power += 1;
    }
    let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
    format!("{value}{suffix}")
}

/// Go's `time.Duration.String()`.
pub fn window(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let fraction = |value: u128, unit: u128| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.ilog10() as usize;
            let text = format!("{rest:0digits$}");
            format!("{whole}.{}", text.trim_end_matches('0'))
        }
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", fraction(ns, 1_000));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", fraction(ns, 1_000_000));
    }
    let seconds = ns / 1_000_000_000;
    let sub = ns % 1_000_000_000;
    let (h, m, s) = (seconds / 3600, (seconds / 60) % 60, seconds % 60);
    let secs = fraction(s * 1_000_000_000 + sub, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_scaled_as_apimachinery_does() {
        assert_eq!(cpu(0), "0");
        assert_eq!(cpu(123_456), "123456n");
        assert_eq!(cpu(123_456_000), "123456u");
        assert_eq!(cpu(200_000_000), "200m");
        assert_eq!(cpu(2_000_000_000), "2");
        assert_eq!(cpu(1_500_000_001), "1500000001n");
    }

    #[test]
    fn memory_is_binary() {
        assert_eq!(memory(0), "0");
        assert_eq!(memory(1000), "1000");
        assert_eq!(memory(2048), "2Ki");
        assert_eq!(memory(4096 * 3), "12Ki");
        assert_eq!(memory(1 << 20), "1Mi");
        assert_eq!(memory(12_345_678), "12345678");
    }

    #[test]
    fn windows_are_go_durations() {
        assert_eq!(window(Duration::from_secs(15)), "15s");
        assert_eq!(window(Duration::from_millis(15_003)), "15.003s");
        assert_eq!(window(Duration::from_millis(500)), "500ms");
        assert_eq!(window(Duration::from_millis(90_500)), "1m30.5s");
        assert_eq!(window(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(window(Duration::from_nanos(1500)), "1.5µs");
    }
}
