//! Named limits of the TCP layer. Hitting one produces a gap or an anomaly, never an abort.

/// Captured bytes held per direction while waiting for a hole to fill: one full receive
/// window of the largest socket buffers in the lab captures (`tcp_rmem` max 64 MiB) at
/// full snaplen. A receiver's cumulative ACK cannot pass a hole it has not received, so a
/// sender puts at most one window beyond the hole however many round trips the hole lasts;
/// with a snaplen only the captured prefix of each segment is held (the rest is a length),
/// so the bound then covers many windows. Past it the hole becomes a
/// [`crate::GapReason::BufferLimit`] gap.
pub const MAX_OOO_BYTES: usize = 64 * 1024 * 1024;

/// Out-of-order segments held per direction: a 64 MiB window of 512-byte segments (each
/// held segment costs ~100 bytes besides its captured bytes).
pub const MAX_OOO_SEGMENTS: usize = 1 << 17;

/// How far (stream bytes) beyond a hole buffered bytes may reach before the hole is
/// declared lost by the capture ([`crate::GapReason::CaptureLoss`]): the largest TCP window
/// (65535 << 14 < 2^30, RFC 7323). A sender cannot send more than a window past the
/// receiver's cumulative ACK, so bytes further than that prove the receiver had the hole.
pub const MAX_HOLE_SPAN: u64 = 1 << 30;

/// How long (capture time, ns) a hole may wait for the sender's retransmission before it is
/// declared lost by the capture ([`crate::GapReason::CaptureLoss`]), counted from the
/// arrival of the first buffered segment beyond it. A segment lost before the capture
/// point is resent about one round trip later (fast retransmit, RACK, tail loss probe) or
/// after a retransmission timeout: Linux's RTO is at least 200 ms and doubles per attempt,
/// so 4 s covers the first timeout and three backoffs on the lab's 30 ms path
/// (0.23 + 0.46 + 0.92 + 1.84 s). It stays well below the RPC layer's report delay (10 s)
/// so that bytes delivered after the wait still join their RPCs.
pub const MAX_HOLE_WAIT_NS: i64 = 4_000_000_000;

/// Bytes of recently delivered stream kept per direction to compare retransmitted copies
/// with the first copy.
pub const HISTORY_BYTES: usize = 64 * 1024;

/// Connections followed at once, kept per partition of the connections
/// ([`CONNECTION_PARTITIONS`]: 512 each). A busy OSS with 5,000 clients has 15,000 (three
/// typed connections each). Past a partition's 512, one of its connections is retired for
/// each new one in it: the first of a list of candidates, the idlest eighth of the
/// partition by the time of their latest packet when chosen, passing over those that
/// carry a packet before their turn. Their streams are
/// flushed as at the end of the capture (messages in progress end as partial), their record is
/// kept without buffers, or folded into a count when they only set up (connreq / HELLO);
/// a later packet on one of their tuples opens a new connection. The report lists the
/// retirements under `limits`. A followed connection that carried only a handshake costs
/// about 3 KiB (measured by tests/adversarial.rs).
pub const MAX_OPEN_CONNECTIONS: usize = 1 << 15;

/// Partitions of the connections, by the hash of their unordered 4-tuple
/// (`ConnKey::route`): each holds at most `MAX_OPEN_CONNECTIONS / CONNECTION_PARTITIONS`
/// (512) live connections and retires its own idlest. The partition, not the whole table,
/// is the unit of the limit so that a parallel run, whose shares of the connections are
/// whole partitions, retires exactly the connections a one-thread run does, whatever the
/// number of threads. The price: with connections spread by a hash, the first partition
/// fills (and retires) from about 30,000 live in all (a generated SYN flood: between
/// 30,000 and 30,500; ~29,500 expected of random tuples).
pub const CONNECTION_PARTITIONS: usize = 64;

/// How far beyond the highest byte seen an acknowledgement may reach and still be used to
/// declare holes lost (the largest scaled TCP window is 2^30 bytes).
pub const MAX_ACK_AHEAD: u64 = 1 << 30;

/// Intervals a time series may span: once a source's capture time has run this many
/// intervals, every series of the source — TCP behaviour here, RPCs and messages in flight
/// and throughput in lnetcap-rpc — doubles its interval, merging neighbouring buckets, so a
/// series holds at most this many buckets however long the capture. 65,536 intervals are
/// 1.8 h at the default 100 ms; a 55-hour capture ends at 3.2 s.
pub const MAX_SERIES_INTERVALS: i64 = 1 << 16;
