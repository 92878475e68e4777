//! The defaults every front end shares, and the one parser of rates.

/// The LNet acceptor's TCP port (socklnd's `accept_port`), from the wire constants.
pub use lnetcap_lnet::wire::consts::ACCEPTOR_PORT;

/// Interval of the time series and the per-interval model, ns (`--interval-ms`): the TCP
/// layer's series interval, where it is defined.
pub const INTERVAL_NS: i64 = lnetcap_tcp::perf::DEFAULT_SERIES_NS;

/// [`INTERVAL_NS`] in ms.
pub const INTERVAL_MS: u64 = (INTERVAL_NS / 1_000_000) as u64;

/// Bytes per second in one unit of a rate, or `None` for a unit that is not a rate. Bits:
/// `bit/s`, `bps`, `Kbit`, `Mbit`, `Gbit`, `Tbit` (with or without `/s`; `Kbps` … `Tbps`),
/// and the shorthands `K`, `M`, `G`, `T`, `Kb`, `Mb`, `Gb`, `Tb` (a lower-case b is a bit;
/// the prefix may be lower case, as tc writes `600mbit`).
/// Bytes (upper-case B): `B/s`, `kB/s`, `MB/s`, `GB/s`, `TB/s` (SI) and `KiB/s`, `MiB/s`,
/// `GiB/s` (binary). The one rule for `--link-rate` and the gates' literals.
pub fn rate_unit(u: &str) -> Option<f64> {
    let bytes = match u {
        "B/s" => Some(1.0),
        "kB/s" | "KB/s" => Some(1e3),
        "MB/s" => Some(1e6),
        "GB/s" => Some(1e9),
        "TB/s" => Some(1e12),
        "KiB/s" => Some(1024.0),
        "MiB/s" => Some(1_048_576.0),
        "GiB/s" => Some(1_073_741_824.0),
        _ => None,
    };
    if bytes.is_some() {
        return bytes;
    }
    let bits = u.strip_suffix("/s").unwrap_or(u);
    let bits = bits
        .strip_suffix("bit")
        .or_else(|| bits.strip_suffix("bps"))
        .or_else(|| bits.strip_suffix('b'))
        .unwrap_or(bits);
    let factor = match bits {
        "" if !u.is_empty() => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        _ => return None,
    };
    Some(factor / 8.0)
}

/// A rate such as `10Gbit`, `25G`, `100Mbps` or `1250MB/s` in bytes per second.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("{s:?}: expected a number with a unit, like 10Gbit or 1250MB/s"))?;
    let per = rate_unit(unit.trim()).ok_or_else(|| {
        format!("{s:?}: unknown unit {:?} (bit rates: Kbit, Mbit, Gbit, Tbit, or G for Gbit; byte rates: kB/s, MB/s, GB/s, MiB/s, GiB/s)", unit.trim())
    })?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?}: a rate must be above zero"));
    }
    Ok(v * per)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_bytes_per_second() {
        // Hand-checked: 10 Gbit/s = 1.25e9 B/s; 1250 MB/s the same; 1 MiB/s = 1048576 B/s.
        for (s, want) in [
            ("10Gbit", 1.25e9),
            ("10G", 1.25e9),
            ("10Gb", 1.25e9),
            ("10Gbit/s", 1.25e9),
            ("10Gbps", 1.25e9),
            ("25G", 3.125e9),
            ("100Mbit", 12.5e6),
            ("100M", 12.5e6),
            ("800bit/s", 100.0),
            ("1250MB/s", 1.25e9),
            ("1.25GB/s", 1.25e9),
            ("1MiB/s", 1_048_576.0),
            ("64KiB/s", 65_536.0),
            ("8kbit", 1e3),
            ("600mbit", 75e6),
        ] {
            let got = parse_rate(s).unwrap();
            assert!((got - want).abs() < 1e-6 * want, "{s}: {got} vs {want}");
        }
        for bad in ["10", "fast", "10MB", "10 furlongs", "0G", "-1G", "10mB/s"] {
            assert!(parse_rate(bad).is_err(), "{bad} accepted");
        }
    }
}
