//! Kubernetes quantities (`"100m"`, `"1"`, `"128Mi"`, `"1G"`, `"1e3"`):
//! parsing with upstream's grammar and exact comparison, for validation,
//! the QoS class, the scheduler and the node agent. Values are exact
//! (mantissa, powers of ten and two); [`parse_milli`] and [`parse_value`]
//! round up like upstream `Quantity.MilliValue()` / `Quantity.Value()`.

use std::cmp::Ordering;

/// Why a string is not a usable quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is not a quantity (upstream `ErrFormatWrong` wording).
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format(String),
    /// The quantity is valid but does not fit in 64 bits at the requested scale.
    #[error("quantity {0:?} is out of range")]
    Overflow(String),
}

/// Result alias for this module.
pub type Result<T, E = QuantityError> = std::result::Result<T, E>;

/// A parsed quantity: `(-1)^negative * mantissa * 10^exp10 * 2^exp2`, exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedQuantity {
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

impl ParsedQuantity {
    /// Parses a quantity string with the upstream grammar:
    /// `<sign><digits>[.<digits>]<suffix>`, where the suffix is a binary SI
    /// suffix (`Ki`..`Ei`), a decimal SI suffix (`n`, `u`, `m`, ``, `k`, `M`..`E`) or a
    /// decimal exponent (`e3`, `E-2`).
    pub fn parse(s: &str) -> Result<Self> {
        let err = || QuantityError::Format(s.to_string());
        let bytes = s.as_bytes();
        let mut pos = 0;
        let mut negative = false;
        if let Some(&c) = bytes.first() {
            if c == b'+' || c == b'-' {
                negative = c == b'-';
                pos = 1;
            }
        }
        let mut mantissa: u128 = 0;
        let mut exp10: i32 = 0;
        let mut digits = 0usize;
        let mut seen_dot = false;
        while pos < bytes.len() {
            match bytes.get(pos).copied().unwrap_or(0) {
                c @ b'0'..=b'9' => {
                    digits += 1;
                    if mantissa == 0 && c == b'0' {
                        // leading zeros add no precision
                    } else {
                        mantissa = mantissa
                            .checked_mul(10)
                            .and_then(|m| m.checked_add(u128::from(c - b'0')))
                            .ok_or_else(|| QuantityError::Overflow(s.to_string()))?;
                    }
                    if seen_dot {
                        exp10 -= 1;
                    }
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            pos += 1;
        }
        if digits == 0 {
            return Err(err());
        }
        let (suffix_exp10, exp2) = parse_suffix(s.get(pos..).unwrap_or("")).ok_or_else(err)?;
        Ok(Self {
            negative,
            mantissa,
            // An exponent near i32's limits would overflow: refused as
            // malformed rather than wrapped.
            exp10: exp10.checked_add(suffix_exp10).ok_or_else(err)?,
            exp2,
        })
    }

    /// The value times `10^scale`, rounded up to the next integer (towards
    /// positive infinity), like upstream `ScaledValue` with ceiling rounding;
    /// `None` when it does not fit in an `i64`.
    pub fn scaled_ceil(&self, scale: i32) -> Option<i64> {
        let base = self.mantissa.checked_mul(1u128 << self.exp2.min(120))?;
        let e = self.exp10.checked_add(scale)?;
        let magnitude = if e >= 0 {
            10u128
                .checked_pow(e.unsigned_abs())
                .and_then(|p| base.checked_mul(p))?
        } else {
            let divisor = 10u128.checked_pow(e.unsigned_abs());
            let (q, rem) = match divisor {
                Some(d) => (base / d, base % d != 0),
                None => (0, base != 0),
            };
            // ceil for positives rounds the magnitude up; for negatives down.
            if rem && !self.negative {
                q + 1
            } else {
                q
            }
        };
        let magnitude = i64::try_from(magnitude).ok()?;
        Some(if self.negative { -magnitude } else { magnitude })
    }
}

fn parse_suffix(suffix: &str) -> Option<(i32, u32)> {
    let binary = [
        ("Ki", 10),
        ("Mi", 20),
        ("Gi", 30),
        ("Ti", 40),
        ("Pi", 50),
        ("Ei", 60),
    ];
    if let Some((_, e)) = binary.iter().find(|(n, _)| *n == suffix) {
        return Some((0, *e));
    }
    let decimal = [
        ("n", -9),
        ("u", -6),
        ("m", -3),
        ("", 0),
        ("k", 3),
        ("M", 6),
        ("G", 9),
        ("T", 12),
        ("P", 15),
        ("E", 18),
    ];
    if let Some((_, e)) = decimal.iter().find(|(n, _)| *n == suffix) {
        return Some((*e, 0));
    }
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse::<i32>().ok().map(|e| (e, 0))
}

impl ParsedQuantity {
    /// Whether the value is below zero.
    pub fn is_negative(&self) -> bool {
        self.negative && self.mantissa != 0
    }

    /// The value in exact rational form `numerator / 10^k` for comparison:
    /// `None` if it does not fit in 128 bits.
    fn scaled(&self, exp10: i32) -> Option<i128> {
        let base = i128::try_from(self.mantissa)
            .ok()?
            .checked_mul(1i128.checked_shl(self.exp2)?)?;
        let shift = self.exp10.checked_sub(exp10)?;
        let m = base.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?;
        Some(if self.negative { -m } else { m })
    }

    /// Exact numeric comparison (`1` equals `1000m`).
    pub fn cmp_value(&self, other: &Self) -> Ordering {
        let low = self.exp10.min(other.exp10);
        match (self.scaled(low), other.scaled(low)) {
            (Some(a), Some(b)) => a.cmp(&b),
            // Out of 128-bit range: compare as floats (close enough there).
            _ => self.approx().total_cmp(&other.approx()),
        }
    }

    fn approx(&self) -> f64 {
        let v = self.mantissa as f64 * 2f64.powi(self.exp2 as i32) * 10f64.powi(self.exp10);
        if self.negative {
            -v
        } else {
            v
        }
    }
}

/// Parses `s` and returns its value in milli-units, rounded up (cpu).
pub fn parse_milli(s: &str) -> Result<i64> {
    ParsedQuantity::parse(s)?
        .scaled_ceil(3)
        .ok_or_else(|| QuantityError::Overflow(s.to_string()))
}

/// Parses `s` and returns its value in whole units, rounded up (bytes, counts).
pub fn parse_value(s: &str) -> Result<i64> {
    ParsedQuantity::parse(s)?
        .scaled_ceil(0)
        .ok_or_else(|| QuantityError::Overflow(s.to_string()))
}

/// Whether two quantity strings are numerically equal (both must parse).
pub fn equal(a: &str, b: &str) -> bool {
    match (ParsedQuantity::parse(a), ParsedQuantity::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp_value(&b) == Ordering::Equal,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_exactly() {
        assert!(equal("1", "1000m"));
        assert!(equal("1Ki", "1024"));
        assert!(equal("1e3", "1k"));
        assert!(!equal("1", "1001m"));
        assert!(!equal("lots", "lots"));
        let a = ParsedQuantity::parse("500m").unwrap();
        let b = ParsedQuantity::parse("1").unwrap();
        assert_eq!(a.cmp_value(&b), Ordering::Less);
        assert!(ParsedQuantity::parse("-1").unwrap().is_negative());
        assert!(!ParsedQuantity::parse("-0").unwrap().is_negative());
        assert!(ParsedQuantity::parse("lots").is_err());
        assert!(ParsedQuantity::parse("").is_err());
        assert!(ParsedQuantity::parse("1.5.5").is_err());
        // Nano and micro, as metrics.k8s.io writes CPU (upstream accepts
        // them everywhere).
        assert!(equal("1000000n", "1m"));
        assert!(equal("1500u", "1.5m"));
        assert_eq!(parse_milli("123456n").unwrap(), 1);
        assert_eq!(parse_milli("250000000n").unwrap(), 250);
    }
}
