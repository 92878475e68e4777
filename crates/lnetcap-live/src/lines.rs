//! `--no-tui` (or no terminal): one plain line per peer pair per refresh, on stderr, for
//! logs and pipes.

use std::fmt::Write as _;

use crate::view::{LiveView, PeerRow};

/// Bytes per second as a short rate (decimal, bits like link rates: `9.41 Gbit/s`).
pub fn rate(bytes_per_s: f64) -> String {
    let bits = bytes_per_s * 8.0;
    let (v, u) = match bits {
        b if b >= 1e9 => (b / 1e9, "Gbit/s"),
        b if b >= 1e6 => (b / 1e6, "Mbit/s"),
        b if b >= 1e3 => (b / 1e3, "kbit/s"),
        b => (b, "bit/s"),
    };
    format!("{v:.2} {u}")
}

/// Bytes as a short size (binary).
pub fn size(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// The lines of one refresh: a header with the process counters, then one per pair.
pub fn lines(v: &LiveView) -> String {
    let mut s = format!(
        "lnetcap live {} t={:.0}s packets {} ({}) dropped {} peers {}\n",
        v.source,
        v.elapsed_s,
        v.packets,
        size(v.bytes),
        v.dropped + v.dropped_interface,
        v.peers.len()
    );
    for p in &v.peers {
        let _ = writeln!(s, "  {}", peer_line(p));
    }
    s
}

/// One pair: `client -> server now … run … rif … msgs …/credits rtt … inflight … retr … limit …`.
pub fn peer_line(p: &PeerRow) -> String {
    let opt = |o: Option<String>| o.unwrap_or_else(|| "-".into());
    format!(
        "{} -> {} now {} run {} rpcs {} rif {:.1} msgs {}/{} rtt {} inflight {}/{} retr {} limit {} (run {})",
        p.client,
        p.server,
        rate(p.now_bytes_per_s),
        rate(p.run_bytes_per_s),
        p.rpcs,
        p.rpcs_in_flight,
        p.messages_in_flight,
        opt(p.credits.map(|c| c.to_string())),
        opt(p.rtt_us.map(|r| format!("{:.2}ms", r / 1e3))),
        opt(p.bytes_in_flight.map(size)),
        opt(p.cwnd.map(size)),
        p.retransmits,
        p.limit_now.unwrap_or("-"),
        p.limit_run
    )
}
