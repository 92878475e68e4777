//! Named limits of the capture layer.

/// Largest record (pcap record or pcapng block) accepted, in bytes. Larger records are
/// reported as malformed: no real capture has them, and a corrupt length must not make the
/// streaming reader allocate gigabytes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Bytes read from a file or stream per refill: the read buffer's size beyond one record.
/// 256 KiB, down from 1 MiB (2026-11-28, paired rounds on one core): the buffer the kernel
/// copies into and the parser reads stays in the core's L2 cache, and every run went
/// faster: `decode` of the header-only bench capture 1.08x, of 1 GB of full payload
/// 1.13x, of the metadata capture 1.09x; one-thread `analyze` 1.04-1.12x; two threads
/// 1.00x (header-only) to 1.07x (1,200 connections). 128 KiB ran within the noise of
/// 256 KiB, with twice the reads.
pub const STREAM_CHUNK_BYTES: usize = 256 * 1024;

/// Stream buffers a reader keeps for reuse while other threads still hold the blocks
/// its packets lie in (a parallel run): at most this many, each at most
/// [`MAX_SHARED_BLOCK_BYTES`]; beyond that a block is freed when its last holder drops it.
/// 8 MiB of [`STREAM_CHUNK_BYTES`] blocks (32 of 256 KiB): eight 1 MiB blocks were as
/// many bytes; fewer blocks of 256 KiB were no faster and left more memory resident.
pub const MAX_SPARE_BLOCKS: usize = (8 << 20) / STREAM_CHUNK_BYTES;

/// Bytes of a mapped file (`LNETCAP_MAP=1`) made readable at a time: each window's pages
/// are populated in one call, so a window larger than a read buffer costs no more.
pub const MAP_WINDOW_BYTES: usize = 1024 * 1024;

/// Largest stream buffer whose packets are shared with other threads: a buffer grown
/// for a huge record (up to [`MAX_RECORD_BYTES`]) is not, its packets are copied.
pub const MAX_SHARED_BLOCK_BYTES: usize = 2 * STREAM_CHUNK_BYTES;

/// Most pcapng interfaces per section that are tracked.
pub const MAX_INTERFACES: usize = 65_536;

/// Capture files mapped at once in a process (each registered with the SIGBUS handler,
/// `map`); a file opened beyond that is read instead.
pub const MAX_MAPPED_FILES: usize = 64;

/// Bytes of a mapped file the process keeps mapped behind the reader's cursor (other
/// threads may still read packets there); beyond that, mapped pages are released every
/// [`MAP_RELEASE_STEP`] bytes, so that resident memory does not grow with the file.
pub const MAP_KEEP_BEHIND: usize = 8 * 1024 * 1024;

/// Bytes released from a mapped file's front at a time (see [`MAP_KEEP_BEHIND`]).
pub const MAP_RELEASE_STEP: usize = 4 * 1024 * 1024;

/// Smallest snap length of a classic pcap file that is mapped rather than read when the
/// map is asked for (`LNETCAP_MAP=1`) or a parallel run's records are large
/// ([`MAP_THREADED_MIN_MEAN_RECORD`]; other files are read by default): a capture of whole
/// frames, most of whose bytes (bulk payload) the analysis never reads, so the kernel's
/// copy into a read buffer is mostly waste. A header-only capture (tcpdump -s
/// 256) is read: its records are read nearly whole anyway, a reused read buffer stays in
/// the cache and the TLB for the threads that share it, and mapped it ran no faster on
/// one thread and 19 % slower on two (README Speed, "Read against map").
pub const MAP_MIN_SNAPLEN: usize = 4096;

/// Mean length of a record, its 16-byte header included, at or above which a run whose
/// packets other threads decode (`--threads` > 1) maps a whole-frame file
/// ([`MAP_MIN_SNAPLEN`]) by default, over the records of its first [`MAP_PROBE_BYTES`].
/// Measured 2026-12-01 on the 2-core Intel VM, two threads mapped against read: 1 GB of
/// full payload (942 bytes a record in that probe) 1.39-1.51x faster as synth wrote it
/// (large writes, as a file read back from disk), 1.18-1.23x written in 4 KiB writes as
/// tcpdump writes it; the metadata capture (358) 1.07-1.17x; the
/// header-only bench capture given a whole-frame snap length (219) 0.83-0.95x. Between
/// 219 and 358 where the map starts to win is not known; 512 keeps small records read.
/// On the AMD EPYC VM of 2026-12-02 the same 1 GB file gained less (0.96-1.13x as synth
/// wrote it, 1.05-1.20x read back from disk) and lost written in 4 KiB writes
/// (0.72-0.78x): its copy out of the page cache is twice as fast and small folios cost
/// the map a page-table entry a page (README Speed, "Read against map"; `LNETCAP_NO_MAP`).
pub const MAP_THREADED_MIN_MEAN_RECORD: usize = 512;

/// Bytes after the file header whose records give the mean length of
/// [`MAP_THREADED_MIN_MEAN_RECORD`] (read once when the file is opened): 1 MiB, as a
/// capture's first 64 KiB is often its handshakes and small RPCs (the full-payload bench
/// capture: 377 bytes a record there, 942 over 1 MiB).
pub const MAP_PROBE_BYTES: usize = 1024 * 1024;
