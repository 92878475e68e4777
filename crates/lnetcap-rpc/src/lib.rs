//! RPC reconstruction over decoded socklnd / LNet messages, sans-IO.
//!
//! [`Tracker`] takes the decoder's messages in capture order and
//! - groups a NID pair's typed TCP connections into one [`PeerReport`] (connection types
//!   from the HELLOs, or inferred from the traffic when the HELLO was not captured);
//! - rebuilds every RPC: PtlRPC (request PUT on a request portal with match bits = XID →
//!   bulk GET+REPLY or PUT(+LNet ACK) with match bits XID..XID+n−1 → early replies → final
//!   reply on the reply portal (XID or pb_mbits) → LNet ACK of a difficult reply), LNet
//!   self-test (portal 50 request; bulk and reply on portal 52 by bulkid / rpyid) and LNet
//!   ping (GET portal 0 → REPLY); resends, errors, multi-MD bulk;
//! - keeps RPCs and LNet messages in flight as time-weighted step functions, Lustre
//!   `rpc_stats` histograms, latency quantiles and throughput per interval.
//!
//! Memory is bounded by open RPCs and peers ([`limits`]); finished RPCs are handed to the
//! caller (for `--rpcs` output) and only their statistics are kept.

pub mod limits;
pub mod report;
pub mod stats;
pub mod tcp;
mod track;

pub use report::{InFlightReport, LatencyReport, MessagesInFlight, Missing, PeerReport, PhaseReport, RpcRecord, Side};
pub use track::{RpcConfig, Tracker};
