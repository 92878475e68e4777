//! Named limits of the TCP layer. Hitting one produces a gap or an anomaly, never an abort.

/// Captured bytes held per direction while waiting for a hole to fill.
pub const MAX_OOO_BYTES: usize = 8 * 1024 * 1024;

/// Out-of-order segments held per direction.
pub const MAX_OOO_SEGMENTS: usize = 8192;

/// Bytes of recently delivered stream kept per direction to compare retransmitted copies
/// with the first copy.
pub const HISTORY_BYTES: usize = 64 * 1024;

/// Open connections tracked at once. Past this, the oldest closed connections are forgotten
/// first; open ones are never dropped silently (the table reports the overflow).
pub const MAX_CONNECTIONS: usize = 1 << 20;

/// How far beyond the highest byte seen an acknowledgement may reach and still be used to
/// declare holes lost (the largest scaled TCP window is 2^30 bytes).
pub const MAX_ACK_AHEAD: u64 = 1 << 30;
