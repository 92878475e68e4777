//! Named limits of the capture layer.

/// Largest record (pcap record or pcapng block) accepted, in bytes. Larger records are
/// reported as malformed: no real capture has them, and a corrupt length must not make the
/// streaming reader allocate gigabytes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Bytes read from a stream (stdin, compressed file) per refill.
pub const STREAM_CHUNK_BYTES: usize = 1024 * 1024;

/// Stream buffers a reader keeps for reuse while other threads still hold the blocks
/// its packets lie in (a parallel run): at most this many, each at most
/// [`MAX_SHARED_BLOCK_BYTES`]; beyond that a block is freed when its last holder drops it.
pub const MAX_SPARE_BLOCKS: usize = 8;

/// Largest stream buffer whose packets are shared with other threads: a buffer grown
/// for a huge record (up to [`MAX_RECORD_BYTES`]) is not, its packets are copied.
pub const MAX_SHARED_BLOCK_BYTES: usize = 2 * STREAM_CHUNK_BYTES;

/// Most pcapng interfaces per section that are tracked.
pub const MAX_INTERFACES: usize = 65_536;
