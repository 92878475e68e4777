//! One capture on several cores (`--threads N`), with the output of the single-threaded
//! run, byte for byte.
//!
//! The calling thread reads: each packet through the front of the pipeline (frame
//! accounting, clock, series bound, link decoding, the sweep schedule), then into the
//! batch of the shard its unordered 4-tuple hashes to, so that every packet of a
//! connection, and of a later connection on the same tuple, meets the same flow table.
//! Shards, [`SHARDS_PER_THREAD`] per worker thread ([`MAX_SHARDS`] in all at most), each
//! holding whole partitions of the connection limit, own a pipeline for the back
//! (flow table, TCP behaviour, framing) over their share; a rayon pool of N − 1 threads
//! runs them, and the calling thread too whenever it would wait on the merge
//! ([`help_until`]), each shard's batches one at a time in the order sent, whichever
//! thread is free taking the next shard with a batch waiting ([`Shard`]). N threads
//! share N cores: with a pool of N beside the reader, N + 1 threads took turns on them
//! (two threads on the header-only bench capture 1.06-1.10x faster, 1 GB of full
//! payload 1.13-1.27x, in paired rounds). It helps only while every pool thread is busy:
//! helping whenever it waited cost the metadata capture (one pair of peers, one share,
//! the merge and the RPC tracker half of the run) 0.92-0.95x, its batches run on the
//! reading thread between its merges; with the rule, 1.01x. With a shard per thread
//! (the former design) a thread whose share fell behind held the merge while the other
//! waited: connections hash unevenly when a few heavy ones carry the load. Each output
//! is tagged with its place in the capture: (frame, phase, sub), the phases in the order
//! one `Pipeline::push` produces them (connections folded, then a sweep's events by
//! connection, then the packet's own). The calling thread merges the shards' outputs of
//! each set of batches by that key, numbers connections in the order of their first
//! packets as the single flow table does, and feeds the RPC tracker and the sink as the
//! single-threaded loop does. At the end its pipeline absorbs the shards' tables and
//! decoders. Outputs come back on crossbeam channels; each set of batches holds at
//! most [`BATCH_BYTES`] of copied records and about [`SET_HELD_BYTES`] of the reader's
//! input blocks, and the sets in flight are at most [`DEPTH`] and about
//! [`IN_FLIGHT_BYTES`] of records and estimated outputs ([`InFlight`]), which bounds
//! the shards' queues and output channels. The events the merge consumed go back to
//! their shard with its next batch and are dropped on a pool thread, not the merging
//! one (a message freed by the merging thread made the workers' allocations wait on
//! its malloc arena's lock).
//!
//! The connection limit (`MAX_OPEN_CONNECTIONS`) is kept per partition of the
//! connections (`CONNECTION_PARTITIONS`, by the same 4-tuple hash as the route), by
//! whichever table holds the partition: a shard holds whole partitions, so a parallel run
//! retires the connections a one-thread run retires, and its memory stays that of one
//! table.

use std::collections::VecDeque;

use std::sync::Mutex;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, RecvError, RecvTimeoutError, Sender, TryRecvError};
use lnetcap_capture::prefetch::prefetch_lines;
use lnetcap_capture::{Packet, Shared, SharedBlock};
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::{LnetEvent, Message};
use lnetcap_tcp::{partition_of, CapturePoint, ConnId, Connection, Stamp};

use crate::analysis::Sink;
use crate::drive::{packet_warnings, record_warnings, warnings, Notice, Observer, PROGRESS_EVERY_PACKETS, RUN_RECORDS};
use crate::source::{Next, PacketSource};

/// A worker asks for the first [`PREFETCH_BYTES`] of the packet this many items ahead of
/// the one it decodes ([`prefetch_lines`]): the reading thread's core wrote them, and a first
/// touch one packet at a time was 63 % of the samples in the worker's loop. Measured
/// 2026-11-28 (paired rounds, two threads, against none): header-only bench capture 1.28x
/// at 2, 4 or 8 ahead and 1.33x at 3; 1,200 connections 1.11x; 1 GB of full payload 1.09x
/// (1.11x with 2 KiB); metadata 1.00x. 128 bytes gave 1.19x on the header-only capture.
const PREFETCH_AHEAD: usize = 3;
/// Bytes of a packet prefetched: the whole record at a header-only capture's snap length
/// of 256 (Ethernet, IP and TCP headers, then the ksock and LNet headers and the start of
/// a PtlRPC body); 512 bytes and 2 KiB measured the same.
const PREFETCH_BYTES: usize = 256;
/// The worker's ring of the packets prefetched and not yet decoded (a power of two).
const AHEAD_RING: usize = (PREFETCH_AHEAD + 1).next_power_of_two();

/// Frames read into one set of batches at most.
pub const BATCH_PACKETS: usize = 4096;
/// Bytes of records copied into one set of batches at most (records from sources that
/// cannot share their input blocks).
pub const BATCH_BYTES: usize = 512 << 10;
/// Bytes of the reader's input blocks one set of batches points into at most (each block
/// counted once, when the set first uses it; a block is at most
/// `lnetcap_capture::limits::MAX_SHARED_BLOCK_BYTES`, so a set holds at most this plus
/// one block).
pub const SET_HELD_BYTES: usize = 2 << 20;
// A set must be able to hold the packets of more than one input block: a block counts in
// full when a set first uses it, so with blocks as large as this bound every set would close
// after its first packet. Measured 2026-11-28 with 4 MiB read chunks (STREAM_CHUNK_BYTES):
// the two-thread run of the header-only bench file took 4.1 s instead of 0.10 s.
const _: () = assert!(2 * lnetcap_capture::limits::STREAM_CHUNK_BYTES <= SET_HELD_BYTES);
/// Sets of batches read ahead of the merge at most. 4, down from 16 with the reader's
/// 256 KiB blocks (2026-11-28, paired rounds, two threads): peak RSS 55 MiB instead of
/// 62 on 1,200 connections, 21 instead of 27 on the header-only bench capture, at
/// 0.99-1.06x the speed (the workers read what the reader wrote while it is still cached).
pub const DEPTH: usize = 4;
/// What the sets in flight may hold, bytes: their records (copied, or the input blocks
/// they point into, counted as for [`BATCH_BYTES`] and [`SET_HELD_BYTES`]) and the
/// outputs the workers make of them, estimated per frame from the sets merged before (a
/// message and its connection's copy per frame on a flood of small messages, far fewer
/// on bulk traffic; an estimate, which a sudden change of traffic passes for a set or
/// two). Past it the reader merges the oldest set before it reads on. 16 MiB read ahead
/// a little faster but brought the adversarial floods within 7 MiB of their bound.
pub const IN_FLIGHT_BYTES: usize = 8 << 20;
/// Shares of the connections per worker thread. Shares, not threads, own flow tables:
/// the pool's threads take whichever share has a batch waiting, so a share that falls
/// behind (connections hash unevenly: a capture's load is often a few heavy ones) does
/// not leave a core idle while the others wait for the merge.
pub const SHARDS_PER_THREAD: usize = 8;
/// Shares in all at most: each costs the merge a batch and a result per set, and past a
/// few threads the reading thread, not the balance of the shares, bounds the run. As
/// many as the partitions of the connection limit, which shares hold whole (more
/// threads than this find no share to run).
pub const MAX_SHARDS: usize = lnetcap_tcp::limits::CONNECTION_PARTITIONS;

#[derive(Debug, Clone, Copy)]
enum Item {
    Packet { stamp: Stamp, raw: RawPacket },
    Sweep(Stamp),
    Coarsen(i64),
}

#[derive(Debug, Clone, Copy)]
struct RawPacket {
    linktype: u32,
    origlen: u32,
    offset: u64,
    interface: u32,
    /// Where its bytes are: in the batch's `blocks[block]` (the reader's input, shared,
    /// not copied) or, when `block` is [`COPIED`], in the batch's `bytes`
    /// (< BATCH_BYTES + one record).
    block: u32,
    start: u32,
    len: u32,
}

/// [`RawPacket::block`] of a packet copied into the batch.
const COPIED: u32 = u32::MAX;

#[derive(Debug, Default)]
struct Batch {
    bytes: Vec<u8>,
    /// Input blocks the batch's packets lie in (held until the worker is done with them).
    blocks: Vec<SharedBlock>,
    items: Vec<Item>,
    finish: Option<Stamp>,
    /// The shard's events of earlier batches, merged: dropped on a pool thread, not the
    /// merging one (see the module's comment).
    spent: Vec<LnetEvent>,
    /// Tests only: the worker panics on this batch (a bug, as a shard would meet it).
    #[cfg(test)]
    fail: bool,
}

impl Batch {
    /// Adds a packet: by reference into the reader's shareable block when it has one
    /// (returns that block's address and length), else copied. Inlined into
    /// [`Filling::take`]: as a call, its saved registers were a fifth of its instructions.
    #[inline(always)]
    fn add(&mut self, stamp: Stamp, pkt: &Packet<'_>) -> Option<(usize, usize)> {
        let mut held = None;
        let (block, start) = match pkt.shared_data() {
            Some((b, start)) if u32::try_from(start + pkt.data.len()).is_ok() => {
                if !self.blocks.last().is_some_and(|l| SharedBlock::ptr_eq(l, b)) {
                    self.blocks.push(SharedBlock::clone(b));
                }
                held = Some((b.as_ptr() as usize, b.len()));
                (self.blocks.len() as u32 - 1, start as u32)
            }
            _ => {
                let start = self.bytes.len() as u32;
                self.bytes.extend_from_slice(pkt.data);
                (COPIED, start)
            }
        };
        let raw = RawPacket {
            linktype: pkt.linktype,
            origlen: pkt.origlen,
            offset: pkt.offset,
            interface: pkt.interface,
            block,
            start,
            len: pkt.data.len() as u32,
        };
        self.items.push(Item::Packet { stamp, raw });
        held
    }

    /// A packet's bytes.
    fn data(&self, raw: &RawPacket) -> &[u8] {
        let all = match raw.block {
            COPIED => &self.bytes[..],
            i => self.blocks.get(i as usize).map_or(&[][..], |b| &b[..]),
        };
        all.get(raw.start as usize..(raw.start + raw.len) as usize).unwrap_or(&[])
    }

    /// The reader's block a packet lies in (for its origin: `Packet::origin`), unless it
    /// was copied into the batch.
    #[inline(always)]
    fn shared(&self, raw: &RawPacket) -> Option<Shared<'_>> {
        let block = self.blocks.get(raw.block as usize)?;
        Some(Shared { block, start: raw.start as usize })
    }
}

/// The share of each partition of the connection limit, of `n` shares: partition % n,
/// so that a share holds whole partitions, read from a table (one division a packet was
/// a tenth of routing). When `n` does not divide the 64 partitions (3, 5, 6 or 7
/// threads: 24, 40, 48 or 56 shares) some shares hold one partition more than others
/// (3 against 2 at 24 shares, 2 against 1 from 40): the pool's threads take whichever
/// share has work, so the uneven shares even out over a thread's eight.
fn share_table(n: usize) -> [u8; MAX_SHARDS] {
    const { assert!(MAX_SHARDS <= 256) };
    std::array::from_fn(|p| (p % n.clamp(1, MAX_SHARDS)) as u8)
}

/// Where a worker's output goes in the capture: (frame, phase, sub).
type Key = (u64, u8, u64);
const PHASE_FOLD: u8 = 0;
const PHASE_SWEEP: u8 = 1;
const PHASE_PACKET: u8 = 2;
/// The reading thread's notices of a frame: after the worker's (why the packet is not
/// decodable), as the single loop gives them after the packet.
const PHASE_NOTICE: u8 = 3;

// Nearly every output is an event: its connection is carried inline (128 bytes) rather
// than boxed, which cost an allocation per message freed by the merging thread.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Out {
    /// The worker's next connection id was opened.
    Opened,
    /// A connection (worker id) was folded.
    Folded(u32),
    /// A packet the worker found not decodable: the notice.
    Notice(String),
    /// An event, with what the RPC tracker asks of its connection at that point (a copy).
    Event { ev: LnetEvent, conn: Option<Connection>, cp: Option<CapturePoint> },
}

type Outs = Vec<(Key, Out)>;

/// A worker's outputs for one batch, and the batch, its input blocks released, for the
/// merge to empty and reuse ([`trimmed`]: its buffers keep their capacity, no allocation
/// or page fault per batch).
type Done = (Outs, Batch);

struct Worker {
    pipe: Pipeline,
    /// Connections whose capture point the TCP loops gave already (the tracker notes
    /// the first one and asks no more).
    cp_given: Vec<bool>,
    /// The pipeline's events of the packet at hand (kept for its capacity).
    evs: Vec<LnetEvent>,
}

impl Worker {
    /// Runs one batch: its outputs, and the batch with its input blocks released.
    fn process(&mut self, mut batch: Batch) -> Done {
        #[cfg(test)]
        assert!(!batch.fail, "a failing worker (test)");
        let mut evs = std::mem::take(&mut self.evs);
        let evs = &mut evs;
        batch.spent.clear();
        let mut out = Vec::new();
        // A sweep's events wait for the packet that triggered it, when it is this
        // worker's: the single loop hands them over after the whole packet.
        let mut swept: Option<(Stamp, Vec<LnetEvent>)> = None;
        // The bytes of the packets prefetched, by item index modulo the ring's length: a
        // packet's place is looked up once (it was 2 % of the worker's instructions).
        let mut ahead: [&[u8]; AHEAD_RING] = [&[]; AHEAD_RING];
        for (i, item) in batch.items.iter().enumerate() {
            if let Some(Item::Packet { raw, .. }) = batch.items.get(i + PREFETCH_AHEAD) {
                let data = batch.data(raw);
                prefetch_lines(data, PREFETCH_BYTES);
                ahead[(i + PREFETCH_AHEAD) % AHEAD_RING] = data;
            }
            match *item {
                Item::Coarsen(ns) => self.pipe.follow_series(ns),
                Item::Sweep(at) => {
                    self.flush_sweep(&mut swept, &mut out);
                    let mut sev = Vec::new();
                    self.pipe.sweep_at(at.ts_ns, &mut sev);
                    swept = Some((at, sev));
                }
                Item::Packet { stamp, raw } => {
                    let pkt = Packet {
                        frame: stamp.frame,
                        ts_ns: stamp.ts_ns,
                        linktype: raw.linktype,
                        origlen: raw.origlen,
                        data: if i < PREFETCH_AHEAD { batch.data(&raw) } else { ahead[i % AHEAD_RING] },
                        offset: raw.offset,
                        interface: raw.interface,
                        shared: batch.shared(&raw),
                    };
                    let f = stamp.frame;
                    // A sweep of another worker's frame: its events as they stand now
                    // (nothing of this worker's came between).
                    if swept.as_ref().is_some_and(|(at, _)| at.frame != f) {
                        self.flush_sweep(&mut swept, &mut out);
                    }
                    let opened = self.pipe.connections_opened();
                    let folded = self.pipe.folded_connections().len();
                    let why = self.pipe.push_routed(&pkt, stamp, evs);
                    if let Some(why) = why {
                        out.push(((f, PHASE_PACKET, 0), Out::Notice(format!("frame {f}: not decodable: {why}"))));
                    }
                    for &id in &self.pipe.folded_connections()[folded..] {
                        out.push(((f, PHASE_FOLD, 0), Out::Folded(id)));
                    }
                    if swept.as_ref().is_some_and(|(at, _)| at.frame == f) {
                        self.flush_sweep(&mut swept, &mut out);
                    }
                    for _ in opened..self.pipe.connections_opened() {
                        out.push(((f, PHASE_PACKET, 0), Out::Opened));
                    }
                    // Most packets end no message.
                    if !evs.is_empty() {
                        self.attach(evs, &mut out, |_| (f, PHASE_PACKET, 0));
                    }
                }
            }
        }
        self.flush_sweep(&mut swept, &mut out);
        if let Some(last) = batch.finish {
            self.pipe.finish_at(last, evs);
            self.attach(evs, &mut out, |c| (u64::MAX, PHASE_SWEEP, c.map_or(0, |c| c.first.frame)));
        }
        // Its input blocks released here; its records and items are plain bytes and
        // values, emptied by the merge, which trims what a large set or a huge record
        // grew by what the share used (`trimmed`).
        batch.blocks.clear();
        self.evs = std::mem::take(evs);
        (out, batch)
    }

    fn flush_sweep(&mut self, swept: &mut Option<(Stamp, Vec<LnetEvent>)>, out: &mut Outs) {
        if let Some((at, mut sev)) = swept.take() {
            self.attach(&mut sev, out, |c| (at.frame, PHASE_SWEEP, c.map_or(0, |c| c.first.frame)));
        }
    }

    /// Moves `evs` to `out` under `key`, each message with its connection and, while the
    /// handshake gave none, the capture point from the TCP loops.
    fn attach(&mut self, evs: &mut Vec<LnetEvent>, out: &mut Outs, key: impl Fn(Option<&Connection>) -> Key) {
        for ev in evs.drain(..) {
            let id = match &ev {
                LnetEvent::Message(m) => m.conn,
                LnetEvent::Framing { conn, .. } => *conn,
            };
            let conn = self.pipe.connection(id);
            let k = key(conn);
            let (mut c, mut cp) = (None, None);
            if let (LnetEvent::Message(_), Some(conn)) = (&ev, conn) {
                let i = id.0 as usize;
                if self.cp_given.len() <= i {
                    self.cp_given.resize(i + 1, false);
                }
                if conn.capture_point().is_none() && !self.cp_given[i] {
                    cp = self.pipe.tcp_perf(id).and_then(lnetcap_rpc::tcp::capture_point_from_loops);
                    self.cp_given[i] = cp.is_some();
                }
                c = Some(conn.clone());
            }
            out.push((k, Out::Event { ev, conn: c, cp }));
        }
    }
}

/// A worker's outputs for one batch, or `Err` when the worker failed (a bug: it panicked).
type Result1 = Result<Done, ()>;

/// One share of the connections: its worker and the batches waiting for it, run on the
/// pool one batch at a time in the order sent (whichever pool thread is free takes the
/// shard's next batch), its outputs in that order on `done`.
struct Shard {
    queue: Mutex<ShardQueue>,
    done: Sender<Result1>,
    /// Pool tasks inside [`Shard::drain`], of every shard (one counter, shared).
    busy: Arc<AtomicUsize>,
}

struct ShardQueue {
    /// Out while a thread runs a batch; `None` after a failure.
    worker: Option<Worker>,
    batches: VecDeque<Batch>,
    /// A task of the pool runs (or is about to run) this shard's batches.
    running: bool,
    /// A thread (a pool task, or the reading thread helping) is in [`Shard::drain`]: the
    /// one that runs the shard's batches, one at a time in the order sent.
    active: bool,
}

impl Shard {
    /// A shard with a fresh worker; its results go to `done`. The worker's pipeline is a
    /// one-thread run's: its flow table keeps the connection limit per partition
    /// (`CONNECTION_PARTITIONS`) and the shard holds whole partitions, so the run's memory
    /// stays that of one table and it retires the connections one thread would.
    fn new(cfg: &DecodeConfig, done: Sender<Result1>, busy: Arc<AtomicUsize>) -> Self {
        let worker = Worker { pipe: Pipeline::new(cfg.clone()), cp_given: Vec::new(), evs: Vec::new() };
        let queue = ShardQueue { worker: Some(worker), batches: VecDeque::new(), running: false, active: false };
        Shard { queue: Mutex::new(queue), done, busy }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ShardQueue> {
        self.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Its worker, after the pool is done (`None` when it failed).
    fn into_worker(self) -> Option<Worker> {
        self.queue.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).worker
    }

    /// Queues a batch; starts a task on the pool when none runs this shard.
    fn submit<'s>(&'s self, scope: &rayon::Scope<'s>, batch: Batch) {
        let mut q = self.lock();
        q.batches.push_back(batch);
        if !q.running {
            q.running = true;
            scope.spawn(move |_| {
                self.busy.fetch_add(1, Ordering::Relaxed);
                self.drain();
                self.busy.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }

    /// Runs the queued batches until none is left, unless another thread is running them
    /// (then it takes these too).
    fn drain(&self) {
        {
            let mut q = self.lock();
            if q.active {
                return;
            }
            q.active = true;
        }
        loop {
            let (worker, batch) = {
                let mut q = self.lock();
                let Some(b) = q.batches.pop_front() else {
                    q.running = false;
                    q.active = false;
                    return;
                };
                (q.worker.take(), b)
            };
            // After a failure the shard stays `running` and `active`: nothing more is
            // started for it nor run (and should a batch be taken, the merge hears of
            // the failure again).
            let Some(mut w) = worker else {
                let _ = self.done.send(Err(()));
                return;
            };
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.process(batch))) {
                Ok(done) => {
                    self.lock().worker = Some(w);
                    if self.done.send(Ok(done)).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    self.lock().batches.clear();
                    let _ = self.done.send(Err(()));
                    return;
                }
            }
        }
    }
}

/// A batch back from its shard, emptied, its buffers' capacity cut to twice what its
/// share used in it, or twice its part of a set (a set's packets and copied bytes spread
/// over `shards` shares) if that is more, and never more than twice a whole set's
/// ([`BATCH_PACKETS`], [`BATCH_BYTES`]: a huge copied record's room, up to 64 MiB, is
/// given back at once). It goes back to the same share ([`Merge::spare`]): a share with
/// heavy connections fills more than its part every set and keeps the room it needs
/// (regrowing it each set from its part, the batch going to any share, was 40 % of a
/// two-thread run's page faults on the header-only bench capture, the reading thread's
/// reallocations), while a share that falls quiet gives the room back as each of its
/// batches comes back (within the sets in flight, [`DEPTH`], and one); before that,
/// regrowing every batch from nothing took 5,600 reallocations copying 24 MB. Bounded:
/// the batches of the sets a share's batches last carried hold at most twice those sets'
/// records, plus twice a part per batch.
fn trimmed(mut b: Batch, shards: usize) -> Batch {
    let keep = |used: usize, whole: usize| (2 * used.max(whole / shards.max(1) + 32)).min(2 * whole);
    let (items, bytes) = (b.items.len(), b.bytes.len());
    b.items.clear();
    b.bytes.clear();
    b.items.shrink_to(keep(items, BATCH_PACKETS));
    b.bytes.shrink_to(keep(bytes, BATCH_BYTES));
    b
}

/// What the merge feeds the events of a parallel run to, in capture order: the RPC
/// tracker of `analyze` (`Rpcs`), or the messages alone for `decode` ([`MessagesOnly`]).
pub(crate) trait Consumer {
    /// One event, with its connection and, while the handshake gave none, the capture
    /// point the TCP loops give it.
    fn on_event(
        &mut self,
        name: &str,
        ev: &LnetEvent,
        conn: Option<&Connection>,
        cp: Option<CapturePoint>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<()>;
    /// The end of a frame's events: what they finished goes to the sink.
    fn emit(&mut self, _name: &str, _sink: &mut dyn Sink) -> anyhow::Result<()> {
        Ok(())
    }
    /// The series interval the pipeline reached.
    fn coarsen(&mut self, _ns: i64) {}
    /// One more connection folded.
    fn forget_one_folded(&mut self, _id: u32) {}
}

/// The messages to the sink, nothing else (`decode`): no RPC tracker.
#[derive(Debug)]
pub(crate) struct MessagesOnly;

impl Consumer for MessagesOnly {
    fn on_event(
        &mut self,
        name: &str,
        ev: &LnetEvent,
        conn: Option<&Connection>,
        _cp: Option<CapturePoint>,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<()> {
        match ev {
            LnetEvent::Message(m) => sink.message(name, m, conn),
            LnetEvent::Framing { .. } => Ok(()),
        }
    }
}

/// The calling thread's side: connection numbering, the consumer (the tracker), the sink.
struct Merge<'a> {
    name: &'a str,
    obs: &'a mut dyn Observer,
    state: &'a mut dyn Consumer,
    sink: &'a mut dyn Sink,
    /// Per shard, its connection ids → the run's.
    ids: Vec<Vec<u32>>,
    /// Connections opened so far, in all shards.
    opened: u32,
    /// Per worker, its events merged since its last batch (see [`Batch::spent`]).
    spent: Vec<Vec<LnetEvent>>,
    /// Series intervals the reader reached, from the frame on.
    coarsen: VecDeque<(u64, i64)>,
    /// Per shard, its emptied batches, for the reader to fill again.
    spare: Vec<Vec<Batch>>,
    /// The reading thread's notices of each batch in flight, oldest first: they reach the
    /// observer in capture order with the workers' (stderr as the single loop's).
    notes: VecDeque<Outs>,
    /// Threads of the pool.
    pool: usize,
}

/// The reading thread's notices of the batch being read, keyed after the frame's packet.
#[derive(Default)]
struct Notes {
    list: Outs,
    seq: u64,
}

impl Notes {
    fn add(&mut self, frame: u64, text: String) {
        self.list.push(((frame, PHASE_NOTICE, self.seq), Out::Notice(text)));
        self.seq += 1;
    }
}

impl Merge<'_> {
    /// Merges the oldest set of batches in flight; returns the bytes its outputs held
    /// (the messages with them).
    fn batch(&mut self, shards: &[Shard], rxs: &[Receiver<Result1>]) -> anyhow::Result<usize> {
        let mut all: Vec<(Key, usize, Out)> = Vec::new();
        all.extend(self.notes.pop_front().unwrap_or_default().into_iter().map(|(k, o)| (k, 0, o)));
        for (w, rx) in rxs.iter().enumerate() {
            let (outs, spare) = help_until(shards, w, rx, self.pool)
                .map_err(|_| anyhow::anyhow!("{}: a worker of the parallel run stopped", self.name))?
                .map_err(|()| anyhow::anyhow!("{}: a worker of the parallel run failed", self.name))?;
            all.extend(outs.into_iter().map(|(k, o)| (k, w, o)));
            self.spare[w].push(trimmed(spare, rxs.len()));
        }
        let mut held = all.len() * size_of::<(Key, Out)>();
        // Stable: a packet's outputs (and a connection's) come from one worker, in order.
        all.sort_by_key(|(k, _, _)| *k);
        let mut frame = None;
        for (k, w, o) in all {
            if frame.is_some_and(|f| f != k.0) {
                self.state.emit(self.name, self.sink)?;
            }
            frame = Some(k.0);
            while self.coarsen.front().is_some_and(|(f, _)| *f <= k.0) {
                let (_, ns) = self.coarsen.pop_front().unwrap_or_default();
                self.state.coarsen(ns);
            }
            match o {
                Out::Notice(text) => self.obs.notice(self.name, Notice::Warning(text)),
                Out::Opened => {
                    self.ids[w].push(self.opened);
                    self.opened += 1;
                }
                Out::Folded(id) => {
                    self.state.forget_one_folded(self.ids[w][id as usize]);
                }
                Out::Event { mut ev, mut conn, cp } => {
                    if matches!(ev, LnetEvent::Message(_)) {
                        held += size_of::<Message>();
                    }
                    let ids = &self.ids[w];
                    match &mut ev {
                        LnetEvent::Message(m) => m.conn = ConnId(ids[m.conn.0 as usize]),
                        LnetEvent::Framing { conn, .. } => *conn = ConnId(ids[conn.0 as usize]),
                    }
                    if let Some(c) = conn.as_mut() {
                        c.id = ConnId(ids[c.id.0 as usize]);
                    }
                    self.state.on_event(self.name, &ev, conn.as_ref(), cp, self.sink)?;
                    self.spent[w].push(ev);
                }
            }
        }
        self.state.emit(self.name, self.sink)?;
        Ok(held)
    }
}

/// How long the reading thread waits for a result before it looks again whether every
/// pool thread is busy (and it should run a share itself).
const HELP_POLL: Duration = Duration::from_micros(200);

/// The result of shard `w`'s oldest batch. Until it comes, and while every one of the
/// `pool` threads is running a share, the reading thread runs the batches of a share no
/// thread is running, `w`'s first (the merge waits for it), as a pool task would: with a
/// pool of one thread fewer than `--threads`, the reading thread is the last worker
/// whenever it would otherwise wait. While a pool thread is free it leaves the shares to
/// the pool (a capture whose packets all fall in one share, one pair of peers, would
/// otherwise have its batches run on the reading thread between its merges, one after
/// the other), and it blocks when every share with batches waiting is being run.
fn help_until(shards: &[Shard], w: usize, rx: &Receiver<Result1>, pool: usize) -> Result<Result1, RecvError> {
    loop {
        match rx.try_recv() {
            Ok(r) => return Ok(r),
            Err(TryRecvError::Disconnected) => return Err(RecvError),
            Err(TryRecvError::Empty) => {}
        }
        if shards.first().is_some_and(|s| s.busy.load(Ordering::Relaxed) < pool) {
            match rx.recv_timeout(HELP_POLL) {
                Ok(r) => return Ok(r),
                Err(RecvTimeoutError::Disconnected) => return Err(RecvError),
                Err(RecvTimeoutError::Timeout) => continue,
            }
        }
        let free = |s: &Shard| {
            let q = s.lock();
            !q.active && !q.batches.is_empty()
        };
        let first = std::iter::once(w).chain((0..shards.len()).filter(|&i| i != w));
        match first.map(|i| &shards[i]).find(|s| free(s)) {
            Some(s) => s.drain(),
            None => return rx.recv(),
        }
    }
}

/// Reads `source` to its end on `workers` threads (this one and a pool of `workers` − 1,
/// at least one, running `workers` × [`SHARDS_PER_THREAD`] shards, at most
/// [`MAX_SHARDS`]; a pool of at most as many threads as shards) into `pipe` (a new pipeline: the front's, which absorbs the shards' at the
/// end) and `state`. Returns whether the source was read to its end.
pub(crate) fn read<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    pipe: &mut Pipeline,
    state: &mut dyn Consumer,
    sink: &mut dyn Sink,
    obs: &mut dyn Observer,
    workers: usize,
) -> anyhow::Result<bool> {
    let cfg = pipe.config().clone();
    let shards = (workers * SHARDS_PER_THREAD).min(MAX_SHARDS);
    // The reading thread is the last worker (it runs shards whenever it would wait on
    // the merge, `help_until`): a pool of one thread fewer, so that N threads share N
    // cores instead of N + 1 taking turns.
    let pool_threads = workers.saturating_sub(1).clamp(1, shards);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(pool_threads)
        .thread_name(|i| format!("lnetcap-worker-{i}"))
        .build()
        .map_err(|e| anyhow::anyhow!("{name}: cannot start {pool_threads} worker threads: {e}"))?;
    let mut rxs = Vec::new();
    let busy = Arc::new(AtomicUsize::new(0));
    let shards: Vec<Shard> = (0..shards)
        .map(|_| {
            let (done, rx) = unbounded();
            rxs.push(rx);
            Shard::new(&cfg, done, Arc::clone(&busy))
        })
        .collect();
    let mut merge = Merge {
        name,
        obs,
        state,
        sink,
        ids: vec![Vec::new(); shards.len()],
        opened: 0,
        spent: (0..shards.len()).map(|_| Vec::new()).collect(),
        coarsen: VecDeque::new(),
        spare: (0..shards.len()).map(|_| Vec::new()).collect(),
        notes: VecDeque::new(),
        pool: pool_threads,
    };
    // The reader runs here; the shards' batches on the pool. The scope ends when every
    // task has (after an error, once the batch each task is running is done).
    let complete = pool.in_place_scope(|scope| {
        let r = read_into(name, source, pipe, scope, &shards, &rxs, &mut merge);
        if r.is_err() {
            shards.iter().for_each(|s| s.lock().batches.clear());
        }
        r
    })?;
    let mut parts = Vec::new();
    for (shard, ids) in shards.into_iter().zip(std::mem::take(&mut merge.ids)) {
        let w = shard.into_worker().ok_or_else(|| anyhow::anyhow!("{name}: a worker of the parallel run failed"))?;
        parts.push((w.pipe, ids));
    }
    let total = parts.iter().map(|(_, ids)| ids.len()).sum();
    pipe.absorb(parts, total);
    if !pipe.has_lnet_connections() {
        let cfg = pipe.config();
        merge.obs.notice(name, Notice::NoLnet { frames: pipe.frames_seen(), ports: &cfg.ports, detect: cfg.detect });
    }
    Ok(complete)
}

/// The sets of batches in flight, and whether the reader must merge the oldest before it
/// reads on: [`DEPTH`] sets, or [`IN_FLIGHT_BYTES`] of records and estimated outputs.
struct InFlight {
    /// Oldest first: (bytes of records, frames).
    sets: VecDeque<(usize, usize)>,
    /// Output bytes per frame, from the sets merged so far (see [`InFlight::merged`]).
    out_per_frame: usize,
}

impl InFlight {
    /// Before any set was merged, outputs are estimated at `out_per_frame` a frame.
    fn new(out_per_frame: usize) -> Self {
        Self { sets: VecDeque::new(), out_per_frame }
    }

    /// A set of `bytes` of records over `frames` frames was sent to the workers.
    fn sent(&mut self, bytes: usize, frames: usize) {
        self.sets.push_back((bytes, frames));
    }

    fn len(&self) -> usize {
        self.sets.len()
    }

    /// The oldest set must be merged before another is read.
    fn full(&self) -> bool {
        let held = self.sets.iter().map(|&(b, frames)| b.saturating_add(frames.saturating_mul(self.out_per_frame)));
        !self.sets.is_empty()
            && (self.sets.len() >= DEPTH || held.fold(0usize, usize::saturating_add) > IN_FLIGHT_BYTES)
    }

    /// The oldest set was merged; its outputs held `out_bytes`. The estimate follows a
    /// rising rate at once and a falling one by halves, so that a set without outputs
    /// (other traffic, pure ACKs) between sets of small messages does not let the next
    /// sets in as if they had none.
    fn merged(&mut self, out_bytes: usize) {
        if let Some((_, frames)) = self.sets.pop_front() {
            self.out_per_frame = out_bytes.div_ceil(frames.max(1)).max(self.out_per_frame / 2);
        }
    }
}

/// The set of batches being read: a batch per shard, what the set holds, the reading
/// thread's notices of its frames.
struct Filling {
    batches: Vec<Batch>,
    share_of: [u8; MAX_SHARDS],
    /// Frames read into the set.
    count: usize,
    /// Bytes of records copied into the set.
    bytes: usize,
    /// Bytes of the input blocks the set points into, and the last one counted.
    held: usize,
    last_block: usize,
    /// The series interval the front of the pipeline had at the last frame.
    interval: i64,
    notes: Notes,
}

impl Filling {
    /// A frame through the front of the pipeline (accounting, clock, series bound, link,
    /// sweep schedule) into its shard's batch; sweeps and coarsenings into every batch,
    /// the frame's notices into the set's.
    #[inline(always)]
    fn take(&mut self, pkt: &Packet<'_>, pipe: &mut Pipeline, coarsen: &mut VecDeque<(u64, i64)>) {
        let mut front = pipe.front(pkt);
        let f = pkt.frame;
        let notes = &mut self.notes;
        packet_warnings(pkt, front.not_decodable.take(), pipe, |text| notes.add(f, text));
        if pipe.series_interval_ns() != self.interval {
            self.interval = pipe.series_interval_ns();
            let ns = self.interval;
            self.batches.iter_mut().for_each(|b| b.items.push(Item::Coarsen(ns)));
            coarsen.push_back((pkt.frame, ns));
        }
        if front.sweep {
            self.batches.iter_mut().for_each(|b| b.items.push(Item::Sweep(front.stamp)));
        }
        if let Some(route) = front.route {
            match self.batches[usize::from(self.share_of[partition_of(route)])].add(front.stamp, pkt) {
                Some((at, len)) if at != self.last_block => (self.held, self.last_block) = (self.held + len, at),
                Some(_) => {}
                None => self.bytes += pkt.data.len(),
            }
        }
        // Every frame counts: sweeps and coarsenings go to every batch even when no
        // packet is routed.
        self.count += 1;
    }

    /// The set is as large as a set may be.
    #[inline(always)]
    fn full(&self) -> bool {
        self.count >= BATCH_PACKETS || self.bytes >= BATCH_BYTES || self.held >= SET_HELD_BYTES
    }

    /// Sends the set's batches to their shards (each with its spent events), its notices
    /// to the merge; returns (bytes, frames) of the set and starts the next.
    fn send<'s>(&mut self, shards: &'s [Shard], scope: &rayon::Scope<'s>, merge: &mut Merge<'_>) -> (usize, usize) {
        merge.notes.push_back(std::mem::take(&mut self.notes.list));
        for (((shard, b), spent), spare) in
            shards.iter().zip(self.batches.iter_mut()).zip(merge.spent.iter_mut()).zip(merge.spare.iter_mut())
        {
            std::mem::swap(&mut b.spent, spent);
            let next = spare.pop().unwrap_or_default();
            shard.submit(scope, std::mem::replace(b, next));
        }
        let sent = (self.bytes + self.held, self.count);
        (self.count, self.bytes, self.held, self.last_block) = (0, 0, 0, 0);
        sent
    }
}

/// The reading loop: packets to batches, batches to the workers, merged behind as
/// [`InFlight`] says.
fn read_into<'s, S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    pipe: &mut Pipeline,
    scope: &rayon::Scope<'s>,
    shards: &'s [Shard],
    rxs: &[Receiver<Result1>],
    merge: &mut Merge<'_>,
) -> anyhow::Result<bool> {
    let n = shards.len();
    let mut fill = Filling {
        batches: (0..n).map(|_| Batch::default()).collect(),
        share_of: share_table(n),
        count: 0,
        bytes: 0,
        held: 0,
        last_block: 0,
        interval: pipe.series_interval_ns(),
        notes: Notes::default(),
    };
    let mut sets = InFlight::new(size_of::<(Key, Out)>() + size_of::<Message>());
    let mut seen = 0u64;
    let mut read_error = None;
    let mut recs = Vec::with_capacity(RUN_RECORDS);
    // Sends the set when it is full, then merges as long as too much is in flight.
    let send_full = |fill: &mut Filling, merge: &mut Merge<'_>, sets: &mut InFlight| -> anyhow::Result<()> {
        if fill.full() {
            let (bytes, frames) = fill.send(shards, scope, merge);
            sets.sent(bytes, frames);
            while sets.full() {
                let out_bytes = merge.batch(shards, rxs)?;
                sets.merged(out_bytes);
            }
        }
        Ok(())
    };
    loop {
        // The whole records of the input block at hand, without a call per packet.
        recs.clear();
        if let Some(run) = source.next_run(&mut recs, RUN_RECORDS) {
            if !recs.is_empty() {
                for r in &recs {
                    fill.take(&run.packet(r), pipe, &mut merge.coarsen);
                    send_full(&mut fill, merge, &mut sets)?;
                }
                let before = seen;
                seen += recs.len() as u64;
                if seen / PROGRESS_EVERY_PACKETS != before / PROGRESS_EVERY_PACKETS {
                    let (done, total) = source.progress();
                    merge.obs.progress(name, done, total);
                }
                continue;
            }
        }
        seen += 1;
        if seen % PROGRESS_EVERY_PACKETS == 0 {
            let (done, total) = source.progress();
            merge.obs.progress(name, done, total);
        }
        match source.poll() {
            Ok(Next::Packet(pkt)) => fill.take(&pkt, pipe, &mut merge.coarsen),
            Ok(Next::Tick) => continue,
            Ok(Next::End) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        }
        let f = pipe.last_stamp().frame;
        let notes = &mut fill.notes;
        record_warnings(source, pipe, |text| notes.add(f, text));
        send_full(&mut fill, merge, &mut sets)?;
    }
    let last = pipe.last_stamp();
    fill.batches.iter_mut().for_each(|b| b.finish = Some(last));
    let (bytes, frames) = fill.send(shards, scope, merge);
    sets.sent(bytes, frames);
    while sets.len() > 0 {
        let out_bytes = merge.batch(shards, rxs)?;
        sets.merged(out_bytes);
    }
    // After every frame's notices, as the single loop ends.
    if let Some(e) = &read_error {
        merge.obs.notice(name, Notice::ReadError(e));
    }
    warnings(name, source, pipe, merge.obs);
    merge.obs.finished(name);
    // The single loop hands the tracker the pipeline's interval once more at the end,
    // events or not.
    while let Some((_, ns)) = merge.coarsen.pop_front() {
        merge.state.coarsen(ns);
    }
    Ok(read_error.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> (Shard, Receiver<Result1>) {
        let (done, rx) = unbounded();
        (Shard::new(&DecodeConfig::default(), done, Arc::new(AtomicUsize::new(0))), rx)
    }

    /// A batch marked with `k` (its `finish` stamp's frame, which the worker leaves on the
    /// batch it hands back).
    fn marked(k: u64, fail: bool) -> Batch {
        Batch { finish: Some(Stamp { frame: k, ts_ns: 0 }), fail, ..Batch::default() }
    }

    fn mark(r: Result1) -> Option<u64> {
        r.ok().and_then(|(_, b)| b.finish).map(|s| s.frame)
    }

    #[test]
    fn test_shards_run_their_batches_in_order_and_report_a_failure() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let ((a, ra), (b, rb)) = (shard(), shard());
        pool.in_place_scope(|scope| {
            for k in 0..200 {
                a.submit(scope, marked(k, false));
                b.submit(scope, marked(k, k == 100));
            }
        });
        // Every batch of the healthy shard, in the order sent.
        let got: Vec<Option<u64>> = ra.try_iter().map(mark).collect();
        assert_eq!(got, (0..200).map(Some).collect::<Vec<_>>());
        // The failing one: its batches up to the failure, then the failure, then nothing.
        let got: Vec<Result1> = rb.try_iter().collect();
        assert_eq!(got.len(), 101);
        assert!(got[100].is_err());
        assert_eq!(got.into_iter().take(100).map(mark).collect::<Vec<_>>(), (0..100).map(Some).collect::<Vec<_>>());
        // Its worker is gone; later batches are not run (no task hangs on them).
        let (qa, qb) = (a.lock(), b.lock());
        assert!(qb.worker.is_none() && qb.running);
        assert!(qa.worker.is_some() && !qa.running && qa.batches.is_empty());
    }

    #[test]
    fn test_the_reading_thread_helps_and_keeps_each_shards_order() {
        // One pool thread and this thread taking the shards' batches as the merge does
        // (help_until): every result comes, in the order sent, whoever ran it.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let busy = Arc::new(AtomicUsize::new(0));
        let ((da, ra), (db, rb)) = (unbounded(), unbounded());
        let cfg = DecodeConfig::default();
        let shards = [Shard::new(&cfg, da, Arc::clone(&busy)), Shard::new(&cfg, db, Arc::clone(&busy))];
        let mut got = [Vec::new(), Vec::new()];
        pool.in_place_scope(|scope| {
            for round in 0..20u64 {
                for k in 0..10 {
                    shards[0].submit(scope, marked(round * 10 + k, false));
                    shards[1].submit(scope, marked(round * 10 + k, false));
                }
                for _ in 0..10 {
                    for (w, rx) in [&ra, &rb].into_iter().enumerate() {
                        got[w].push(help_until(&shards, w, rx, 1).ok().and_then(mark));
                    }
                }
            }
        });
        for g in got {
            assert_eq!(g, (0..200).map(Some).collect::<Vec<_>>());
        }
        for s in &shards {
            let q = s.lock();
            assert!(q.worker.is_some() && !q.active && !q.running && q.batches.is_empty());
        }
        // Nothing more was sent than asked for.
        assert!(ra.try_recv().is_err() && rb.try_recv().is_err());
        assert_eq!(busy.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn test_in_flight_bounds_sets_and_their_estimated_bytes() {
        // A flood of small messages: 4,096 frames of 100 bytes, 800 bytes of output a
        // frame, 3.7 MB a set: two sets fit in 8 MiB, the third makes it merge.
        let mut f = InFlight::new(800);
        for _ in 0..2 {
            f.sent(409_600, 4096);
            assert!(!f.full());
        }
        f.sent(409_600, 4096);
        assert!(f.full());
        // The oldest set had no outputs (other traffic): the estimate halves, no more.
        f.merged(0);
        assert_eq!(f.out_per_frame, 400);
        // Then small ones (bulk traffic): it keeps halving, and the depth, not the bytes,
        // bounds the sets.
        for _ in 0..6 {
            f.sent(409_600, 4096);
            f.merged(4096 * 10);
        }
        assert_eq!(f.out_per_frame, 10);
        assert_eq!(f.len(), 2);
        assert!(!f.full());
        while f.len() < DEPTH - 1 {
            f.sent(409_600, 4096);
            assert!(!f.full(), "{} sets", f.len());
        }
        f.sent(409_600, 4096);
        assert!(f.full());
        // Records alone over the budget (large blocks): merge.
        let mut g = InFlight::new(0);
        g.sent(IN_FLIGHT_BYTES, 10);
        assert!(!g.full());
        g.sent(1, 1);
        assert!(g.full());
        g.merged(0);
        assert!(!g.full());
    }

    #[test]
    fn test_a_returned_batch_keeps_the_room_its_share_used_and_no_more() {
        let filled = |items: usize, bytes: usize| {
            let mut b = Batch::default();
            b.items.resize(items, Item::Coarsen(0));
            b.bytes.resize(bytes, 0);
            b
        };
        // A heavy share: most of a set's packets and bytes. Emptied, its room kept.
        let heavy = trimmed(filled(3000, 300 << 10), 16);
        assert!(heavy.items.is_empty() && heavy.bytes.is_empty());
        assert!(heavy.items.capacity() >= 3000 && heavy.bytes.capacity() >= 300 << 10);
        // A share that fell quiet: down to twice its part of a set.
        let mut quiet = filled(3000, 300 << 10);
        quiet.items.truncate(10);
        quiet.bytes.truncate(100);
        let quiet = trimmed(quiet, 16);
        assert!(quiet.items.capacity() <= 2 * (BATCH_PACKETS / 16 + 32));
        assert!(quiet.bytes.capacity() <= 2 * (BATCH_BYTES / 16 + 32));
        // A huge copied record's room goes back at once: at most twice a whole set's.
        let huge = trimmed(filled(BATCH_PACKETS, 8 * BATCH_BYTES), 16);
        assert!(huge.bytes.capacity() <= 2 * BATCH_BYTES);
        assert!(huge.items.capacity() >= BATCH_PACKETS);
    }
}
