//! Number formatting shared by the renderers.

/// A duration in µs as `12.3 ms` or `450 µs` (`-` when unknown).
pub fn ms(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| if v >= 1000.0 { format!("{:.1} ms", v / 1000.0) } else { format!("{v:.0} µs") })
}

/// Bytes (or bytes/s without the unit) in decimal units: `1.2 GB`, `3.4 MB`, `5.6 kB`.
pub fn bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}
