//! lnetcap-live: packets from a live interface (libpcap, feature `pcap`) or a capture
//! replayed at its recorded pace, through the one analysis entry point
//! (`lnetcap_analysis::FileAnalysis::read_live`), with what people watch while it runs.
//!
//! - [`control`]: the stop flag (signals, keys, duration) and why the run stopped.
//! - [`source`]: live sources: [`source::Replay`], the pcap ring tee ([`source::Tee`]),
//!   and (feature `pcap`) [`iface::Interface`]; shared packet / drop counters.
//! - [`view`]: a [`view::LiveView`] per snapshot: one row per peer pair, "now" (the last
//!   complete interval) beside the run so far, from the same report `analyze` writes.
//! - [`tui`]: the terminal view (ratatui); [`lines`]: plain periodic lines.
//! - [`metrics`]: the Prometheus text format of a view; [`serve`]: /metrics over HTTP.
//! - [`ring`]: pcap files rotated like tcpdump's `-C` / `-W` / `-G`.

pub mod control;
#[cfg(feature = "pcap")]
pub mod iface;
pub mod lines;
pub mod metrics;
pub mod ring;
pub mod serve;
pub mod source;
pub mod tui;
pub mod view;

pub use control::{Stop, StopReason};
pub use view::{Board, LiveView, PeerRow};
