//! Named limits of the capture layer.

/// Largest record (pcap record or pcapng block) accepted, in bytes. Larger records are
/// reported as malformed: no real capture has them, and a corrupt length must not make the
/// streaming reader allocate gigabytes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Bytes read from a stream (stdin, compressed file) per refill.
pub const STREAM_CHUNK_BYTES: usize = 1024 * 1024;

/// Most pcapng interfaces per section that are tracked.
pub const MAX_INTERFACES: usize = 65_536;
