//! Named limits of the LNet layer.

/// Header bytes kept per message in progress (largest: V1 HELLO with 16 IPs = 136).
pub const HDR_CAP: usize = 160;

/// Payload bytes kept per message to decode lustre_msg / srpc_msg / ping info.
pub const PEEK_BYTES: usize = 512;

/// Connections that carried only connection setup (connreq / HELLO, or a bare handshake)
/// listed one by one in a report; further ones, and those retired by the flow table, are
/// counted in `folded` (a SYN or HELLO flood would otherwise make the report its size).
pub const MAX_LISTED_SETUP_ONLY: usize = 1024;

/// A timestamp this far (ns) before the frame before it is a clock step, not reordering
/// (packets captured on different CPUs disagree by microseconds; an NTP step by seconds at
/// most). From it on, timestamps are shifted to carry on from the frame before.
pub const MAX_CLOCK_BACKWARD_NS: i64 = 10 * 1_000_000_000;

/// A timestamp this far (ns) after the frame before it is a clock step too: LNet pings a
/// peer every 25 s, and a day without a frame is a lie or a clock set by hand.
pub const MAX_CLOCK_FORWARD_NS: i64 = 86_400 * 1_000_000_000;

/// NIDs whose text the record writers keep (`record::NidTexts`, direct-mapped by the top
/// bits of a hash, so a power of two): a NID whose slot another took is formatted again,
/// nothing is lost.
pub const RECORD_NID_TEXTS: usize = 64;
const _: () = assert!(RECORD_NID_TEXTS.is_power_of_two() && RECORD_NID_TEXTS > 1 && RECORD_NID_TEXTS <= 1 << 16);
