//! The field registry of a peer in the JSON report: every value a gate (`--fail-if`) or
//! `diff` can read, with its type, unit, which way is better, the tolerance `diff` uses,
//! and what it means. `--fail-if` checks its field names against it when the expression
//! is parsed, converts units by it and `diff` compares by it; the field table of
//! docs/analyze-json.md is generated from it. tests/golden.rs keeps it equal to the
//! report: every scalar the report writes for a peer is here, and every field here is
//! written with its type.
//!
//! A path segment `*` stands for a key of a map keyed by data (an opcode name, a
//! histogram row, a missing part): `rpcs_by_opcode.OST_WRITE`, `missing.reply`.

/// What a field holds, and in which unit the JSON writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count.
    Count,
    /// A plain number: a ratio, share or mean count (0.05 = 5 %).
    Ratio,
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerS,
    /// RPCs per second.
    RpcsPerS,
    /// Text; `values` lists the words it takes, when they are fixed.
    Text(&'static [&'static str]),
    /// `true` or `false`.
    Bool,
    /// A list: gates compare its length.
    List,
}

impl Unit {
    /// The unit as the docs write it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Ratio => "ratio",
            Self::Ns => "ns",
            Self::Us => "µs",
            Self::Ms => "ms",
            Self::S => "s",
            Self::Bytes => "bytes",
            Self::BytesPerS => "bytes/s",
            Self::RpcsPerS => "RPCs/s",
            Self::Text(_) => "text",
            Self::Bool => "true/false",
            Self::List => "list (length)",
        }
    }

    /// Seconds per unit of a duration (None: not a duration).
    pub fn seconds(self) -> Option<f64> {
        match self {
            Self::Ns => Some(1e-9),
            Self::Us => Some(1e-6),
            Self::Ms => Some(1e-3),
            Self::S => Some(1.0),
            _ => None,
        }
    }

    /// Whether the JSON writes a number (or null) for it.
    pub fn is_number(self) -> bool {
        !matches!(self, Self::Text(_) | Self::Bool | Self::List)
    }
}

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Larger is better (throughput).
    Higher,
    /// Smaller is better (latency).
    Lower,
    /// Neither: reported, never a regression (RTT is the network's, not the code's).
    Neither,
}

/// How much change `diff` tolerates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// A share of the base value (0.05 = 5 %).
    Relative(f64),
    /// An amount in the field's unit.
    Absolute(f64),
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Relative(r) => write!(f, "{}%", r * 100.0),
            Self::Absolute(a) => write!(f, "{a}"),
        }
    }
}

/// One field of a peer.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Key path in the peer object (`*`: any key of a map).
    pub path: &'static str,
    /// Short name for gates and `diff`, if it has one.
    pub alias: Option<&'static str>,
    /// Type and unit.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// `diff` compares it with this default tolerance (None: not compared).
    pub diff: Option<Tolerance>,
    /// What it means.
    pub meaning: &'static str,
}

impl Field {
    /// The name gates and `diff` show: the alias, else the path.
    pub fn name(&self) -> &'static str {
        self.alias.unwrap_or(self.path)
    }

    /// Whether a concrete key path is this field (`*` matches one key).
    pub fn matches(&self, path: &str) -> bool {
        let mut want = self.path.split('.');
        let mut got = path.split('.');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(g)) if w == "*" || w == g => {}
                _ => return false,
            }
        }
    }
}

/// The binding limits a peer can name (`binding_limit`; a test keeps it equal to
/// `BindingLimit::ALL`).
pub const LIMITS: &[&str] =
    &["link", "lnet_credits", "rpc_window", "tcp_congestion", "receive_window", "server", "none (no bulk traffic)"];
/// Where the capture was taken (`capture_point.side`, `rtt_us.capture_side`).
pub const SIDES: &[&str] = &["client", "server", "middle"];
/// What binds the RPC rate of a pair without bulk data (`rate.binding`).
pub const RATE_BINDINGS: &[&str] = &["rpcs_in_flight", "round_trip", "server", "undetermined"];

const fn f(path: &'static str, unit: Unit, better: Better, meaning: &'static str) -> Field {
    Field { path, alias: None, unit, better, diff: None, meaning }
}

const fn a(alias: &'static str, field: Field) -> Field {
    Field { alias: Some(alias), ..field }
}

const fn d(tolerance: Tolerance, field: Field) -> Field {
    Field { diff: Some(tolerance), ..field }
}

use Better::{Higher, Lower, Neither};
use Tolerance::{Absolute, Relative};
use Unit::*;

/// Every field of a peer, in the order of the report.
pub const PEER_FIELDS: &[Field] = &[
    f("file", Text(&[]), Neither, "the capture the pair comes from"),
    f("client_nid", Text(&[]), Neither, "the NID that sends the requests"),
    f("server_nid", Text(&[]), Neither, "the NID that answers them"),
    f("connections", List, Neither, "the pair's TCP connections"),
    f("handshake_rtt_us", Us, Neither, "smallest TCP handshake RTT of the pair's connections"),
    f("capture_point.client_one_way_us", Us, Neither, "capture point → client (from the handshake)"),
    f("capture_point.server_one_way_us", Us, Neither, "capture point → server (from the handshake)"),
    f("capture_point.side", Text(SIDES), Neither, "the side the capture was taken nearer"),
    d(Absolute(0.0), f("rpcs", Count, Higher, "complete RPCs")),
    d(Absolute(0.0), f("rpcs_partial", Count, Lower, "RPCs with a part not captured")),
    f("missing.*", Count, Lower, "RPCs by the part not captured (`request`, `bulk`, `reply`, ...)"),
    f("rpcs_by_opcode.*", Count, Neither, "RPCs by opcode name"),
    f("bytes_read", Bytes, Neither, "bulk bytes, server → client"),
    f("bytes_written", Bytes, Neither, "bulk bytes, client → server"),
    d(
        Relative(0.05),
        a("throughput", f("throughput_bytes_per_s", BytesPerS, Higher, "bulk throughput over the steady window")),
    ),
    f("steady_window_ns", List, Neither, "[start, end] of the steady window, capture ns"),
    f("active_window_ns", List, Neither, "[start, end] of the active period, capture ns"),
    f("latency_by_opcode.*.rpcs", Count, Neither, "complete RPCs of the opcode"),
    f("latency_by_opcode.*.mean_us", Us, Lower, "mean client-time latency of the opcode"),
    f("latency_by_opcode.*.p50_us", Us, Lower, "median latency of the opcode"),
    f("latency_by_opcode.*.p95_us", Us, Lower, "95th percentile latency of the opcode"),
    f("latency_by_opcode.*.server_mean_us", Us, Lower, "mean server time of the opcode"),
    f("rpcs_in_flight.mean", Ratio, Neither, "RPCs in flight, time-weighted mean (client time)"),
    a("rpcs_in_flight_max", f("rpcs_in_flight.max", Count, Neither, "most RPCs in flight")),
    d(
        Relative(0.05),
        a("rif", f("rpcs_in_flight.steady_mean", Ratio, Neither, "mean RPCs in flight over the steady window")),
    ),
    f("rpcs_in_flight.histogram.*", Count, Neither, "rpc_stats rows: RPCs sent with that many in flight"),
    a("messages_in_flight_max", f("messages_in_flight.max", Count, Neither, "most LNet messages in flight")),
    a("peer_credits", f("messages_in_flight.inferred_peer_credits", Count, Neither, "the credit limit, when it binds")),
    f("messages_in_flight.evidence", Text(&[]), Neither, "why the credits bind or not"),
    f("messages_in_flight.directions", List, Neither, "messages in flight per direction"),
    d(Relative(0.10), a("latency_p50", f("latency_us.p50", Us, Lower, "median client-time RPC latency"))),
    a("latency_p95", f("latency_us.p95", Us, Lower, "95th percentile RPC latency")),
    d(Relative(0.10), a("latency_p99", f("latency_us.p99", Us, Lower, "99th percentile RPC latency"))),
    a("latency_max", f("latency_us.max", Us, Lower, "largest RPC latency")),
    f("latency_us.mean", Us, Lower, "mean RPC latency"),
    f("latency_us.histogram.*", Count, Neither, "RPC latency rows (power-of-two µs)"),
    f("pages_per_rpc.*", Count, Neither, "pages per RPC rows (4 KiB pages of bulk)"),
    f("phases.request_us", Us, Lower, "mean request transfer at the capture point"),
    f("phases.server_wait_us", Us, Lower, "mean request end → bulk start"),
    f("phases.bulk_us", Us, Lower, "mean bulk transfer"),
    f("phases.server_us", Us, Lower, "mean bulk end → reply"),
    f("phases.reply_us", Us, Lower, "mean reply transfer"),
    f("phases.service_time_s", S, Lower, "mean pb_service_time (whole seconds, as Lustre reports)"),
    f("phases.server_wait_min_us", Us, Lower, "the quickest RPC's request end → bulk start"),
    f("phases.server_min_us", Us, Lower, "the quickest RPC's bulk end → reply"),
    a("rtt_min", f("rtt_us.min", Us, Neither, "sum of each side's smallest loop")),
    d(Relative(0.05), a("rtt", f("rtt_us.p50", Us, Neither, "sum of each side's median loop"))),
    f("rtt_us.floor", Us, Neither, "the RTT the model uses"),
    f("rtt_us.client_loop_us", Us, Neither, "capture point → client → capture point"),
    f("rtt_us.server_loop_us", Us, Neither, "capture point → server → capture point"),
    f("rtt_us.capture_side", Text(SIDES), Neither, "the side whose loop is the shorter"),
    f("rtt_us.samples", Count, Neither, "RTT samples"),
    d(Relative(0.10), a("retransmits", f("tcp.retransmits", Count, Lower, "retransmitted segments, all causes"))),
    f("tcp.retransmits_fast", Count, Lower, "retransmissions after 3 duplicate ACKs"),
    f("tcp.retransmits_timeout", Count, Lower, "retransmissions after a silence"),
    f("tcp.retransmits_spurious", Count, Lower, "retransmissions of acknowledged data"),
    a("retransmitted_share", f("tcp.retransmitted_share", Ratio, Lower, "share of bulk bytes retransmitted")),
    f("tcp.dup_acks", Count, Lower, "duplicate ACKs"),
    f("tcp.zero_windows", Count, Lower, "zero-window ACKs"),
    f("tcp.bytes_in_flight_max", Bytes, Neither, "largest bytes in flight (sender's view)"),
    a("cwnd", f("tcp.cwnd_estimate_max", Bytes, Neither, "largest congestion-window estimate")),
    f("tcp.cwnd_estimate_p50", Bytes, Neither, "median window estimate over the steady window"),
    f("tcp.cwnd_estimate_mean", Bytes, Neither, "mean window estimate over the steady window"),
    f("tcp.rwnd_p50", Bytes, Neither, "median advertised receive window, bulk connections summed"),
    f("tcp.rwnd_scale_unknown", Bool, Neither, "a receive window's scale was not captured"),
    a(
        "tcp_efficiency_loss",
        f("tcp.efficiency_loss", Ratio, Lower, "share of what the other limits allow that TCP cannot carry"),
    ),
    f("tcp.idle_ms", Ms, Neither, "time with nothing outstanding"),
    a("t_rpc", f("model.t_rpc_bytes_per_s", BytesPerS, Neither, "T_rpc = RIF × BS / (n × RTT)")),
    d(Relative(0.05), a("t_model", f("model.t_model_bytes_per_s", BytesPerS, Neither, "the smallest bound"))),
    a("needed_rif", f("model.needed_rif", Count, Neither, "RPCs in flight to fill the link or reach the next bound")),
    d(Absolute(0.05), a("efficiency", f("model.efficiency", Ratio, Higher, "observed / T_model"))),
    f("model.bounds", List, Neither, "every bound, ascending"),
    f("model.shares_lost", List, Neither, "the waterfall from the reference to the observed rate"),
    f("model.inputs.observed", BytesPerS, Higher, "observed throughput the model compares"),
    f("model.inputs.rtt_s", S, Neither, "RTT the model uses"),
    f("model.inputs.bs_bytes", Bytes, Neither, "bulk bytes per RPC"),
    f("model.inputs.rif", Ratio, Neither, "RPCs in flight the model uses"),
    f("model.inputs.round_trips", Ratio, Neither, "round trips an RPC costs, serialized"),
    f("model.inputs.credits", List, Neither, "[credits, bytes per message] when credits are known"),
    f("model.inputs.cwnd_bytes", Bytes, Neither, "TCP window the model uses"),
    f("model.inputs.cwnd_acting", Bool, Neither, "congestion control seen acting"),
    f("model.inputs.rwnd_bytes", Bytes, Neither, "receive window the model uses"),
    f("model.inputs.server_s", S, Lower, "the server's own time per RPC"),
    f("model.inputs.link", List, Neither, "[rate, given by --link-rate]"),
    f("model.inputs.link_unused", BytesPerS, Neither, "a --link-rate given but not used"),
    f("model.best_sustained_bytes_per_s", BytesPerS, Higher, "best rate over a 1 s window"),
    f("model.link_source", Text(&[]), Neither, "where the link rate comes from"),
    a("steady_state", f("model.steady_state", Bool, Neither, "the steady window spans at least 10 RTTs")),
    f("binding_limit", Text(LIMITS), Neither, "the smallest bound"),
    f("advice", List, Lower, "what to change"),
    f("intervals", List, Neither, "the model per time-series interval"),
    f("rate.inputs.rpcs", Count, Neither, "complete RPCs (pairs without bulk data)"),
    f("rate.inputs.span_s", S, Neither, "the active period, client time"),
    f("rate.inputs.latency_s", S, Lower, "mean client latency"),
    f("rate.inputs.rtt_s", S, Neither, "the RTT floor"),
    f("rate.inputs.service_s", S, Lower, "mean server time less the loop to the server"),
    f("rate.inputs.service_exact", Bool, Neither, "the loop to the server was known"),
    f("rate.inputs.rif_max", Count, Neither, "most RPCs in flight"),
    f("rate.rpcs_per_s", RpcsPerS, Higher, "the RPC rate"),
    f("rate.rif_mean", Ratio, Neither, "rate × latency (Little's law)"),
    f("rate.model_rpcs_per_s", RpcsPerS, Neither, "RIF / (RTT + service)"),
    f("rate.efficiency", Ratio, Higher, "(RTT + service) / latency"),
    f("rate.rtt_share", Ratio, Neither, "share of the latency that is round trip"),
    f("rate.service_share", Ratio, Neither, "share of the latency that is service"),
    f("rate.other_share", Ratio, Lower, "share of the latency neither explains"),
    f("rate.binding", Text(RATE_BINDINGS), Neither, "what binds the RPC rate"),
    f("rate.why", Text(&[]), Neither, "the numbers the rate verdict comes from"),
    f("timeseries", List, Neither, "per-interval rows"),
];

/// The field a name stands for: an alias, or a key path (with `*` for map keys).
pub fn field(name: &str) -> Option<&'static Field> {
    PEER_FIELDS.iter().find(|f| f.alias == Some(name)).or_else(|| PEER_FIELDS.iter().find(|f| f.matches(name)))
}

/// The key path a name reads: an alias's path, or the name.
pub fn path_of(name: &str) -> &str {
    PEER_FIELDS.iter().find(|f| f.alias == Some(name)).map_or(name, |f| f.path)
}

/// Up to `n` field names (aliases and paths) nearest to a mistyped one, nearest first.
pub fn nearest(name: &str, n: usize) -> Vec<&'static str> {
    let mut scored: Vec<(f64, &'static str)> = PEER_FIELDS
        .iter()
        .flat_map(|f| f.alias.into_iter().chain(std::iter::once(f.path)))
        .map(|cand| {
            // A key of a nested object counts too, a little below a name in full.
            let last = cand.rsplit('.').next().unwrap_or(cand);
            let s = strsim::jaro_winkler(name, cand).max(0.97 * strsim::jaro_winkler(name, last));
            (s, cand)
        })
        .collect();
    scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(y.1)));
    scored.dedup_by(|x, y| x.1 == y.1);
    scored.into_iter().take(n).map(|s| s.1).collect()
}

/// The field table of docs/analyze-json.md, generated from the registry.
pub fn markdown() -> String {
    let mut s = String::from("| field | alias | unit | better | diff | meaning |\n|---|---|---|---|---|---|\n");
    for f in PEER_FIELDS {
        let unit = match f.unit {
            Text(values) if !values.is_empty() => {
                format!("text: {}", values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", "))
            }
            u => u.name().to_string(),
        };
        let better = match f.better {
            Higher => "higher",
            Lower => "lower",
            Neither => "",
        };
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            f.path,
            f.alias.map_or(String::new(), |a| format!("`{a}`")),
            unit,
            better,
            f.diff.map_or(String::new(), |t| format!("±{t}")),
            f.meaning
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_patterns_match_one_key() {
        assert_eq!(field("rtt").unwrap().path, "rtt_us.p50");
        assert_eq!(path_of("efficiency"), "model.efficiency");
        assert_eq!(path_of("tcp.dup_acks"), "tcp.dup_acks");
        assert_eq!(field("rpcs_by_opcode.OST_WRITE").unwrap().path, "rpcs_by_opcode.*");
        assert_eq!(field("latency_by_opcode.OST_READ.p95_us").unwrap().unit, Us);
        assert!(field("rpcs_by_opcode").is_none(), "a map is not a field");
        assert!(field("latency_by_opcode.OST_READ").is_none());
        assert!(field("rtt_typo").is_none());
    }

    #[test]
    fn fixed_words_are_the_enums_words() {
        let limits: Vec<&str> = crate::BindingLimit::ALL.iter().map(|l| l.as_str()).collect();
        assert_eq!(limits, LIMITS);
    }

    #[test]
    fn no_name_twice_and_every_alias_unique() {
        let mut names: Vec<&str> =
            PEER_FIELDS.iter().flat_map(|f| f.alias.into_iter().chain(std::iter::once(f.path))).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn nearest_names_a_typo_s_field_first() {
        assert_eq!(nearest("rtt_typo", 3)[0], "rtt");
        assert_eq!(nearest("effciency", 1), ["efficiency"]);
        assert_eq!(nearest("retransmit", 1), ["retransmits"]);
    }
}
