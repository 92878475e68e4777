//! Named limits of the RPC layer.

/// RPCs held at once: open (request seen, reply not yet; more than 16,000 clients with 8
/// RPCs in flight each) and finished ones waiting out `EMIT_DELAY_NS`. When it is full the
/// finished ones are reported first, complete, the longest waiting first (the report counts
/// them under `limits` as `MAX_FINISHED_RPCS`); only when none is finished, the least recently
/// active eighth are reported as partial (`missing: evicted`) to make room, and the report
/// lists the evictions under `limits`. An open RPC with its GET and ACK handles costs under
/// 1 KiB (tests/adversarial.rs).
pub const MAX_OPEN_RPCS: usize = 1 << 17;

/// NIDs whose text form (`10.0.1.1@tcp`) is kept for the RPC records: formatting a NID
/// costs more than the rest of closing an RPC. More than the peers of any server; when
/// full it is emptied and fills again (a flood of distinct NIDs only costs the formatting).
pub const MAX_NID_NAMES: usize = 4096;

/// An open RPC with no activity for this long (capture time) is reported as partial:
/// longer than LNet's transaction timeout (150 s) plus PtlRPC's adaptive timeouts.
pub const RPC_IDLE_TIMEOUT_NS: i64 = 600 * 1_000_000_000;

/// How far back in capture time a message's first byte may lie when the message is
/// reported (its last byte): the reorder horizon of the in-flight step functions.
pub const REORDER_HORIZON_NS: i64 = 30 * 1_000_000_000;

/// Steps a pair's series of LNet messages in flight (one per direction) holds while they
/// wait out `REORDER_HORIZON_NS`: two a message, 1 MiB. A pair sending more than 1,092
/// messages a second one way held more for 30 s: memory grew with the rate (8.6 MB of
/// steps a series at 9,000 messages a second, 48 MB at 50,000, in vectors of up to four
/// times that). Past it the earliest are applied at once; a step that comes later for a
/// time before them counts at the time reached (the report counts the steps applied early
/// under `limits`). A message's steps come as it is reported, late by its own duration at
/// most: 65,536 steps are 3.6 s at 9,000 messages a second.
pub const MAX_PENDING_STEPS: usize = 1 << 16;

/// The same for a pair's series of RPCs in flight: an RPC's end is stepped when it is
/// reported, at most `MAX_FINISHED_RPCS` finished RPCs (and their steps) late, so it
/// holds eight times that (4 MiB).
pub const MAX_PENDING_RPC_STEPS: usize = 8 * MAX_FINISHED_RPCS;

/// Bulk match bits are searched at most this far above an RPC's XID when the request's
/// pb_mbits was not captured (a 1 MiB LNet message per MD, at most 256 MDs per RPC).
pub const MAX_BULK_MDS: u64 = 256;

/// In-flight counts are rebuilt in the client's (or sender's) time from the capture point
/// and a one-way delay measured on the handshake; that estimate is good to a few hundred µs,
/// so a slot freed and reused within this much does not count twice.
pub const STEP_TOLERANCE_NS: i64 = 250_000;

/// ... and never less than this share of the client's loop (two one-way delays): one-way
/// delays vary from packet to packet with timer slack and queueing on the path (on the real
/// kernel lab captures by up to 3 % of the loop: a loop of 29.5 ms on a 30.4 ms path), so
/// a reply and the next request that the client sent after it may seem to overlap by that
/// much in the client's rebuilt time.
pub const STEP_TOLERANCE_PER_LOOP: i64 = 25;

/// A finished RPC is reported this long (capture time) after its reply, so that a request
/// inferred late (when framing is found again after lost headers) still joins it. Must stay
/// below REORDER_HORIZON_NS.
pub const EMIT_DELAY_NS: i64 = 10 * 1_000_000_000;

/// Finished RPCs held at once for `EMIT_DELAY_NS`: the 10 s of a server finishing up to
/// 3,276 RPCs a second (2.5 s at 13,000 a second, where 10 s of them filled the open RPC
/// index; 32 MiB at most). Past this the longest held is reported at once, complete; the
/// report counts them under `limits`. A request inferred later than that for one of them
/// starts an RPC of its own (reported partial).
pub const MAX_FINISHED_RPCS: usize = 1 << 15;

/// A count of messages in flight must be held this long in all to be its maximum (many
/// messages in one segment share one timestamp and stack up for an instant).
pub const SUSTAINED_NS: i64 = 100_000;

/// RPCs built from snaplen-cut headers waiting for their bulk or reply, per peer pair
/// (more than any concurrency a client runs; the oldest is dropped beyond it).
pub const MAX_CUT_RPCS: usize = 4096;

/// GET handles indexed at once (a GET waits for its REPLY about a round trip): more than
/// the open RPCs × MDs of any server (16 k clients × 8 RPCs × 2 MDs). Entries of finished
/// RPCs go first when it is full, and every second of capture time.
pub const MAX_GET_HANDLES: usize = 1 << 18;

/// ACK handles indexed at once (a PUT that asked for an LNet ACK), bounded like GETs.
pub const MAX_ACK_HANDLES: usize = 1 << 18;

/// Zero-copy messages waiting for their ZC-ACK (at most peer_credits per peer and
/// direction in flight); one older than RPC_IDLE_TIMEOUT_NS is dropped, and when the index
/// is full those older than REORDER_HORIZON_NS.
pub const MAX_ZC_PENDING: usize = 1 << 18;

/// The largest power of two a client's PtlRPC XIDs are aligned to: an upper bound of
/// PTLRPC_BULK_OPS_COUNT (bulk MDs per RPC) learnt from the XIDs a client sends.
pub const MAX_XID_ALIGN: u64 = 128;

/// Peer pairs (unordered NID pairs) tracked per source: more than the clients of any one
/// server the captures show, and a capture point sees one server's side at most. Messages
/// and RPCs of further pairs still count in the totals but are kept in one shared state
/// that is never reported as a pair; the report lists how often under `limits` (split
/// such a capture by client with a BPF filter). A pair costs about 10 KiB while tracked.
pub const MAX_PEERS: usize = 1 << 14;
