//! Capture input for lnetcap: packet records out of pcap / pcapng files (plain, gzip or
//! zstd, recognised by content), and the link/IP/TCP slicing of each record.
//!
//! Two layers:
//! - [`reader`]: [`CaptureReader`] yields [`Packet`]s (1-based frame number, capture
//!   timestamp in ns, link type, captured bytes, original length). Files, stdin and
//!   compressed input all go through one bounded streaming buffer and are parsed in place.
//!   Container parsing uses `pcap-parser` (a pcap record's 16-byte header, on every frame,
//!   is read in place).
//! - [`link`]: [`decode_packet`] turns a record into a [`TcpSegment`] view (addresses, ports,
//!   sequence numbers, flags, options, captured payload and the payload length the IP header
//!   claims) or says why it is not one ([`NotTcp`]).
//!
//! Nothing here panics on input: every malformed record is a typed value with the offset.

pub mod error;
pub mod limits;
pub mod link;
mod map;
pub mod prefetch;
pub mod reader;
pub mod reread;

pub use error::CaptureError;
pub use link::{decode_packet, tcp_tuple, Decoded, IpPair, Ipv4Text, NotTcp, TcpFlags, TcpSegment, TupleWords};
pub use reader::{CaptureFormat, CaptureReader, Compression, InputBlock, Packet, Rec, Run, Shared, SharedBlock};
pub use reread::{Origin, Reread};

/// Well-known link types (LINKTYPE_* values as stored in pcap / pcapng).
pub mod linktype {
    /// BSD loopback / null: 4-byte address family in host order.
    pub const NULL: u32 = 0;
    /// Ethernet II (with optional 802.1Q / QinQ tags).
    pub const ETHERNET: u32 = 1;
    /// Raw IP on some platforms (DLT_RAW = 12 on OpenBSD, 14 elsewhere).
    pub const RAW_12: u32 = 12;
    /// Raw IP, alternate DLT value.
    pub const RAW_14: u32 = 14;
    /// Raw IP (LINKTYPE_RAW): IPv4 or IPv6 by the version nibble.
    pub const RAW: u32 = 101;
    /// OpenBSD loopback: 4-byte address family in network order.
    pub const LOOP: u32 = 108;
    /// Linux cooked capture v1 (`tcpdump -i any`, older libpcap).
    pub const LINUX_SLL: u32 = 113;
    /// Raw IPv4.
    pub const IPV4: u32 = 228;
    /// Raw IPv6.
    pub const IPV6: u32 = 229;
    /// Linux cooked capture v2 (`tcpdump -i any`, libpcap ≥ 1.10).
    pub const LINUX_SLL2: u32 = 276;
}
