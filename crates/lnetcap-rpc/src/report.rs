//! Owned, serialisable results of the RPC layer. Field names carry their units.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use lnetcap_lnet::record::Hex;
use serde::Serialize;

use crate::stats::{LinearHist, Log2Hist};

mod json;

/// Phases of one RPC as seen at the capture point, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Phases {
    /// Request first byte → request last byte.
    pub request_us: Option<f64>,
    /// Request last byte → first bulk byte (server reaction; plus one one-way delay when
    /// the capture is on the client side).
    pub server_wait_us: Option<f64>,
    /// First bulk byte → last bulk byte.
    pub bulk_us: Option<f64>,
    /// Last bulk byte (or request last byte without bulk) → reply first byte.
    pub server_us: Option<f64>,
    /// Reply first byte → reply last byte.
    pub reply_us: Option<f64>,
}

/// One reconstructed RPC (the `--rpcs` JSON-lines record).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcRecord {
    /// Schema version of this record.
    pub schema_version: u32,
    /// Sequence number in the order RPCs were first seen.
    pub id: u64,
    /// Input file (when several are analysed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Client NID (the sender of the request): text shared by every record naming this NID.
    pub client_nid: Arc<str>,
    /// Server NID.
    pub server_nid: Arc<str>,
    /// `ptlrpc`, `lst_brw`, `lst_ping`, `lst_framework`, `lnet_ping`.
    pub kind: RpcKind,
    /// PtlRPC XID, selftest rpyid, or the ping match bits, as a hex string.
    pub xid: Option<Hex>,
    /// PtlRPC opcode.
    pub opc: Option<u32>,
    /// PtlRPC opcode name, or the selftest kind (`BRW_READ`, `BRW_WRITE`, `PING`), or
    /// `LNET_PING` (a name from the table, or `opcN` for an opcode it does not know).
    pub opc_name: Option<Cow<'static, str>>,
    /// `read` or `write` for bulk RPCs.
    pub op: Option<&'static str>,
    /// Request portal.
    pub portal: Option<u32>,
    /// Bulk bytes moved (payload of the bulk data messages; from the LNet ACK's mlength
    /// when the data message's header was not captured).
    pub bytes: u64,
    /// Bulk data messages seen.
    pub bulk_messages: u32,
    /// Request first byte (capture time, ns).
    pub t_start_ns: Option<i64>,
    /// Request last byte.
    pub t_req_end_ns: Option<i64>,
    /// First byte of the first bulk message (the GET of a write, the data PUT of a read).
    pub t_bulk_start_ns: Option<i64>,
    /// Last byte of the last bulk data message.
    pub t_bulk_end_ns: Option<i64>,
    /// Reply PUT's first byte.
    pub t_reply_ns: Option<i64>,
    /// Reply's last byte.
    pub t_end_ns: Option<i64>,
    /// LNet ACK of a difficult reply (last byte).
    pub t_reply_ack_ns: Option<i64>,
    /// Request first byte → reply last byte at the capture point, µs.
    pub latency_us: Option<f64>,
    /// Latency as the client sees it: `latency_us` plus the round trip between the capture
    /// point and the client (from the handshake; equal to `latency_us` when unknown).
    pub client_latency_us: Option<f64>,
    /// Phases, µs.
    pub phases: Phases,
    /// Early replies seen.
    pub early_replies: u32,
    /// Times the request was sent again with the same XID.
    pub resends: u32,
    /// Reply status (pb_status, or the selftest status).
    pub status: Option<i32>,
    /// pb_service_time of the reply (s), when captured.
    pub service_time_s: Option<u32>,
    /// Job id, when captured.
    pub jobid: Option<String>,
    /// Some part of the RPC was not captured (see `missing`).
    pub partial: bool,
    /// What is missing: `request` (not captured), `request_body` (header only: no opcode),
    /// `bulk` (no bulk message), `bulk_header` (some bulk data messages not decoded; bytes
    /// from the request, the GETs or the LNet ACKs), `bulk_unknown` (the number of bulk
    /// MDs is unknown and the pair had unclaimed messages meanwhile), `reply`, `reply_ack`,
    /// `timeout`, `evicted`.
    pub missing: Vec<Missing>,
    /// Frame of the first message of the RPC seen.
    pub first_frame: u64,
}

/// What protocol an RPC is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RpcKind {
    /// A Lustre PtlRPC (by XID).
    Ptlrpc,
    /// An LNet selftest bulk read or write (`lst add_test brw`).
    LstBrw,
    /// An LNet selftest ping.
    LstPing,
    /// An LNet selftest framework (console) RPC.
    LstFramework,
    /// An LNet ping or discovery.
    LnetPing,
}

impl RpcKind {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ptlrpc => "ptlrpc",
            Self::LstBrw => "lst_brw",
            Self::LstPing => "lst_ping",
            Self::LstFramework => "lst_framework",
            Self::LnetPing => "lnet_ping",
        }
    }
}

/// A part of an RPC the capture did not show (the RPC lines' `missing`). Declared in the
/// alphabetical order of the JSON names, so that maps keyed by it keep their key order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// No bulk message and no size.
    Bulk,
    /// Some bulk data messages' headers not decoded (bytes from the request, the GETs or
    /// the LNet ACKs).
    BulkHeader,
    /// The number of bulk MDs is unknown and the pair had unclaimed messages meanwhile
    /// (not partial).
    BulkUnknown,
    /// Replaced by a new RPC of the same key.
    Evicted,
    /// No reply.
    Reply,
    /// The LNet ACK of a reply that asked for one.
    ReplyAck,
    /// The request was not captured.
    Request,
    /// The request's header only: no opcode (not partial).
    RequestBody,
    /// Closed by the idle timeout.
    Timeout,
    /// The headers were cut by the snaplen inside the match bits: the XID holds their low
    /// 32 bits (not partial).
    XidHighBits,
}

impl Missing {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::RequestBody => "request_body",
            Self::Bulk => "bulk",
            Self::BulkHeader => "bulk_header",
            Self::BulkUnknown => "bulk_unknown",
            Self::XidHighBits => "xid_high_bits",
            Self::Reply => "reply",
            Self::ReplyAck => "reply_ack",
            Self::Timeout => "timeout",
            Self::Evicted => "evicted",
        }
    }

    /// Whether it makes the RPC partial: a part known to be missing, rather than a field
    /// that could not be seen (`request_body`, `bulk_unknown`, `xid_high_bits`).
    pub fn makes_partial(self) -> bool {
        !matches!(self, Self::RequestBody | Self::BulkUnknown | Self::XidHighBits)
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A side of a peer pair: who sends a direction's data, or where the capture was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The client (sends the requests).
    #[default]
    Client,
    /// The server.
    Server,
    /// Neither: a capture point within neither side's tenth of the round trip.
    Middle,
}

impl Side {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
            Self::Middle => "middle",
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A connection of a peer pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnReport {
    /// Connection id (as in `decode`).
    pub id: u32,
    /// `active:port->passive:port`.
    pub tcp: String,
    /// Type from the active side's point of view (`CONTROL`, `BULK_IN`, `BULK_OUT`, `ANY`).
    pub conn_type: &'static str,
    /// The type was inferred from the traffic (the HELLO was not captured).
    pub type_inferred: bool,
    /// The active side is the peer pair's client.
    pub active_is_client: bool,
}

/// RPCs in flight over time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct InFlightReport {
    /// Time-weighted mean while the peer pair was active.
    pub mean: f64,
    /// Highest count.
    pub max: i64,
    /// Lustre `rpc_stats` "rpcs in flight" rows: for every RPC sent, the number in flight
    /// including it (key = row, value = RPCs).
    pub histogram: LinearHist,
    /// Time-weighted mean over the steady window.
    pub steady_mean: f64,
}

/// LNet messages in flight from one side to the other.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MessagesDirection {
    /// Sender NID.
    pub from: String,
    /// Receiver NID.
    pub to: String,
    /// LNet messages sent.
    pub messages: u64,
    /// Of which zero-copy (held until the peer's ZC-ACK).
    pub zero_copy: u64,
    /// Highest count in flight held for at least 100 µs in all.
    pub max: i64,
    /// Time-weighted mean.
    pub mean: f64,
    /// Share of the busy time (≥ 1 in flight) spent at the maximum.
    pub time_at_max: f64,
    /// Share of the busy time at one below the maximum.
    pub time_below_max: f64,
}

/// LNet messages in flight (what peer_credits bounds).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MessagesInFlight {
    /// Highest count in either direction.
    pub max: i64,
    /// The credit limit the plateau shows, when it binds.
    pub inferred_peer_credits: Option<i64>,
    /// Why (or why not).
    pub evidence: String,
    /// Per direction.
    pub directions: Vec<MessagesDirection>,
}

/// Latency percentiles, µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyReport {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// Lustre 2.17 `rpc_stats` "RPC latency (us)" power-of-two rows.
    pub histogram: Log2Hist,
}

/// Mean phase durations, µs (complete RPCs).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PhaseReport {
    /// Request first → last byte.
    pub request_us: Option<f64>,
    /// Request → bulk start.
    pub server_wait_us: Option<f64>,
    /// Bulk.
    pub bulk_us: Option<f64>,
    /// Bulk end → reply.
    pub server_us: Option<f64>,
    /// Reply first → last byte.
    pub reply_us: Option<f64>,
    /// Mean pb_service_time (s), when captured.
    pub service_time_s: Option<f64>,
    /// Request → bulk start, smallest (the quickest RPC: no queueing behind credits or
    /// TCP).
    pub server_wait_min_us: Option<f64>,
    /// Bulk end → reply, smallest.
    pub server_min_us: Option<f64>,
}

/// One interval of the time series.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntervalRow {
    /// Interval start, ns.
    pub t_ns: i64,
    /// Bulk bytes read (server → client) in the interval, per second.
    pub read_bytes_per_s: f64,
    /// Bulk bytes written (client → server), per second.
    pub write_bytes_per_s: f64,
    /// RPCs completed in the interval.
    pub rpcs_completed: u64,
    /// Mean RPCs in flight.
    pub rpcs_in_flight_mean: f64,
    /// Most RPCs in flight.
    pub rpcs_in_flight_max: i64,
    /// Most LNet messages in flight client → server.
    pub messages_in_flight_max_c2s: i64,
    /// Most LNet messages in flight server → client.
    pub messages_in_flight_max_s2c: i64,
}

/// The capture point between client and server.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CapturePointReport {
    /// One-way delay capture point ↔ client, µs.
    pub client_one_way_us: f64,
    /// One-way delay capture point ↔ server, µs.
    pub server_one_way_us: f64,
    /// `client`, `server` or `middle` (the side within 10 % of the round trip).
    pub side: Side,
}

/// Everything about one client/server NID pair.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PeerReport {
    /// The pair ran LNet selftest BRW RPCs (advice names `lst` settings, not Lustre's).
    #[serde(skip)]
    pub selftest: bool,
    /// Client NID (the side sending requests).
    pub client_nid: String,
    /// Server NID.
    pub server_nid: String,
    /// TCP connections of the pair.
    pub connections: Vec<ConnReport>,
    /// Smallest TCP handshake round-trip time of the pair's connections, µs.
    pub handshake_rtt_us: Option<f64>,
    /// Where the capture was taken, from the handshakes.
    pub capture_point: Option<CapturePointReport>,
    /// Complete RPCs.
    pub rpcs: u64,
    /// RPCs with some part not captured.
    pub rpcs_partial: u64,
    /// RPCs by what was not seen of them (see the RPC lines' `missing`).
    pub missing: BTreeMap<Missing, u64>,
    /// RPCs by opcode name (complete and partial).
    pub rpcs_by_opcode: BTreeMap<String, u64>,
    /// Bulk bytes read (server → client).
    pub bytes_read: u64,
    /// Bulk bytes written (client → server).
    pub bytes_written: u64,
    /// Bulk bytes of RPCs completed in the steady window, per second.
    pub throughput_bytes_per_s: f64,
    /// The steady window: the active period (first request to last reply) without its first
    /// and last fifth (ramp-up and drain).
    pub steady_window_ns: Option<[i64; 2]>,
    /// RPCs in flight.
    pub rpcs_in_flight: InFlightReport,
    /// LNet messages in flight.
    pub messages_in_flight: MessagesInFlight,
    /// Latency of complete RPCs as the client sees it (capture-point latency plus the round
    /// trip between capture point and client, when the handshake shows it).
    pub latency_us: LatencyReport,
    /// Lustre `rpc_stats` "pages per rpc" rows (4 KiB pages of bulk).
    pub pages_per_rpc: Log2Hist,
    /// Mean phases.
    pub phases: PhaseReport,
    /// Per-interval series.
    pub timeseries: Vec<IntervalRow>,
    /// The active period: the first request (in the client's time) to the last reply.
    pub active_window_ns: Option<[i64; 2]>,
    /// Latency of complete RPCs per opcode name (`rpcs_by_opcode`'s names; beyond
    /// MAX_OPCODES names the rest count under `other`).
    pub latency_by_opcode: BTreeMap<String, OpcodeLatency>,
}

/// Latency of one opcode's complete RPCs, µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpcodeLatency {
    /// Complete RPCs.
    pub rpcs: u64,
    /// Mean client latency.
    pub mean_us: Option<f64>,
    /// Median.
    pub p50_us: Option<f64>,
    /// 95th percentile.
    pub p95_us: Option<f64>,
    /// Mean time from the request's (or bulk's) last byte to the reply at the capture point.
    pub server_mean_us: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::Missing;

    #[test]
    fn missing_orders_as_its_json_names() {
        use Missing::*;
        let mut v =
            [Request, RequestBody, Bulk, BulkHeader, BulkUnknown, XidHighBits, Reply, ReplyAck, Timeout, Evicted];
        v.sort();
        let names: Vec<&str> = v.iter().map(|m| m.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert!(!RequestBody.makes_partial() && !BulkUnknown.makes_partial() && !XidHighBits.makes_partial());
        assert!(Request.makes_partial() && Reply.makes_partial() && Bulk.makes_partial());
    }
}
