//! The flow table: 4-tuple → connection, with the two half-streams of each.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;

use lnetcap_capture::{Origin, TcpSegment};

use crate::limits::{CONNECTION_PARTITIONS, MAX_HOLE_WAIT_NS, MAX_OPEN_CONNECTIONS};
use crate::perf::{ConnPerf, DirPerf, SegInfo};
use crate::stream::{HalfStats, StreamHalf};
use crate::{Stamp, StreamEvent, StreamSink};

mod cache;
mod rooms;

pub use rooms::partition_of;
use rooms::Room;

/// Index of a connection in the table: connections are numbered 0, 1, 2, ... in the order
/// of their first captured packet, so ids are stable for a given capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// Direction within a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// From the active side (the one that sent the SYN / connects to the LNet port).
    FromActive = 0,
    /// From the passive side.
    FromPassive = 1,
}

impl Dir {
    /// Index 0 / 1.
    pub fn index(self) -> usize {
        self as usize
    }
    /// The other direction.
    pub fn reverse(self) -> Self {
        match self {
            Self::FromActive => Self::FromPassive,
            Self::FromPassive => Self::FromActive,
        }
    }
}

/// One end of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// Address.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            IpAddr::V4(a) => write!(f, "{}:{}", lnetcap_capture::Ipv4Text::new(a), self.port),
            IpAddr::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// Canonical (sorted) 4-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConnKey(pub Endpoint, pub Endpoint);

/// Each end as one or two words (address and port packed): the derived hash fed an
/// IPv4 address to the hasher byte slice by byte slice, a tenth of the flow table's
/// per-packet work. Equal keys hash equally, as `Eq` requires.
impl std::hash::Hash for ConnKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for e in [self.0, self.1] {
            match e.ip {
                IpAddr::V4(a) => h.write_u64((u64::from(u32::from(a)) << 16) | u64::from(e.port)),
                IpAddr::V6(a) => {
                    let x = u128::from(a);
                    h.write_u64(x as u64);
                    h.write_u64(((x >> 64) as u64) ^ (u64::from(e.port) << 1 | 1));
                }
            }
        }
    }
}

impl ConnKey {
    fn of(a: Endpoint, b: Endpoint) -> Self {
        if a <= b {
            Self(a, b)
        } else {
            Self(b, a)
        }
    }

    /// A hash of the unordered 4-tuple of a segment from `src` to `dst`, the same both
    /// ways (each end hashed alone, then combined by XOR, so no ordering is needed): a
    /// parallel run routes a connection's packets to a worker by it.
    pub fn route(src: Endpoint, dst: Endpoint) -> u64 {
        let word = |ip: IpAddr| match ip {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        Self::route_words(word(src.ip), src.port, word(dst.ip), dst.port)
    }

    /// [`ConnKey::route`] of addresses given as integers (`u128::from` an IPv4 address's
    /// `u32` or an IPv6 address), as a parallel run's reader reads them
    /// (`lnetcap_capture::tcp_tuple`).
    #[inline]
    pub fn route_words(src: u128, src_port: u16, dst: u128, dst_port: u16) -> u64 {
        fn one(ip: u128, port: u16) -> u64 {
            let x = (ip as u64) ^ ((ip >> 64) as u64).rotate_left(17) ^ (u64::from(port) << 40);
            let mut h = FastHasher::default();
            h.write_u64(x);
            h.write_u64(x >> 29);
            h.finish()
        }
        let x = one(src, src_port) ^ one(dst, dst_port);
        x ^ (x >> 31)
    }
}

/// How the active side was determined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveRule {
    /// The SYN (or SYN-ACK) was captured.
    Handshake,
    /// The other end's port is a configured LNet (acceptor) port.
    AcceptorPort,
    /// Neither: the sender of the first captured packet is taken as active.
    FirstPacket,
}

/// What the table knows of a connection, independent of its stream state.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Id.
    pub id: ConnId,
    /// `endpoints[0]` is the active side, `endpoints[1]` the passive side.
    pub endpoints: [Endpoint; 2],
    /// How the active side was determined.
    pub active_rule: ActiveRule,
    /// Frame and time of the first packet.
    pub first: Stamp,
    /// Frame and time of the latest packet.
    pub last: Stamp,
    /// A RST was seen.
    pub reset: bool,
    /// The SYN of each direction (index [`Dir::index`]) was captured: its stream offsets
    /// start at the true first byte.
    pub syn_seen: [bool; 2],
    /// Capture times of the handshake: the active side's SYN, the passive side's SYN-ACK,
    /// and the active side's first ACK after it.
    pub handshake_ns: [Option<i64>; 3],
}

/// Where the capture point lies between the two ends of a connection, from the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturePoint {
    /// One-way delay between the capture point and the active side, ns (half the time
    /// from the SYN-ACK to the active side's ACK).
    pub active_owd_ns: i64,
    /// One-way delay between the capture point and the passive side, ns (half the time
    /// from the SYN to the SYN-ACK).
    pub passive_owd_ns: i64,
}

impl CapturePoint {
    /// Round-trip time.
    pub fn rtt_ns(&self) -> i64 {
        2 * (self.active_owd_ns + self.passive_owd_ns)
    }
}

impl Connection {
    /// The capture point's position, when the whole handshake was captured. The SYN
    /// reaches the passive side and its SYN-ACK comes back past the capture point 2·d_p
    /// later; the active side's ACK comes 2·d_a after that.
    pub fn capture_point(&self) -> Option<CapturePoint> {
        let [Some(syn), Some(synack), Some(ack)] = self.handshake_ns else { return None };
        (synack >= syn && ack >= synack)
            .then_some(CapturePoint { active_owd_ns: (ack - synack) / 2, passive_owd_ns: (synack - syn) / 2 })
    }

    /// `src→dst` of the given direction, e.g. `10.0.0.2:1023->10.0.0.1:988`.
    pub fn tuple(&self, dir: Dir) -> String {
        let (a, b) = match dir {
            Dir::FromActive => (self.endpoints[0], self.endpoints[1]),
            Dir::FromPassive => (self.endpoints[1], self.endpoints[0]),
        };
        format!("{a}->{b}")
    }
}

/// Whether the sink wants the connection's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep reassembling.
    Follow,
    /// Not interesting (e.g. not LNet): count its packets, deliver nothing more.
    Ignore,
}

/// What one segment did, for per-frame accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentOutcome {
    /// Connection.
    pub conn: ConnId,
    /// Direction.
    pub dir: Dir,
    /// The connection is ignored (not followed).
    pub ignored: bool,
}

struct Slot {
    info: Connection,
    halves: [StreamHalf; 2],
    perf: ConnPerf,
    ignored: bool,
    closed: [bool; 2],
    /// In `FlowTable::waiting` (a half holds bytes beyond a hole).
    waiting: bool,
    /// Its partition of the connection limit (index in `FlowTable::rooms`).
    room: u16,
}

/// A connection the table no longer follows: retired to make room (see
/// [`MAX_OPEN_CONNECTIONS`]). What the report needs of it is kept; its buffers are gone.
struct Retired {
    info: Connection,
    stats: [HalfStats; 2],
    perf: Option<Box<[DirPerf; 2]>>,
}

/// A connection's place in the table (its id is the index).
enum Entry {
    /// Followed.
    Live(Box<Slot>),
    /// Retired with its record kept.
    Retired(Box<Retired>),
    /// Retired and folded into the sink's aggregate (a connection that only set up).
    Folded,
}

/// Connections retired to stay within [`MAX_OPEN_CONNECTIONS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retirements {
    /// Connections retired (their streams flushed as at the end of the capture).
    pub retired: u64,
    /// Of those, the ones the sink folded into its aggregate (no record kept).
    pub folded: u64,
}

/// Holes of connections that receive no more segments still expire: every this much
/// capture time the table ages the holes of the connections in its waiting list.
const SWEEP_NS: i64 = MAX_HOLE_WAIT_NS / 8;

/// When a table sweeps: at the first TCP segment at or after the next sweep time, which
/// then moves [`SWEEP_NS`] past that segment. The table keeps one; the reader of a
/// parallel run keeps its own over every segment and tells the workers.
#[derive(Debug, Default, Clone, Copy)]
pub struct SweepClock(Option<i64>);

impl SweepClock {
    /// Whether a segment at `ts_ns` sweeps (and the clock moves on).
    pub fn tick(&mut self, ts_ns: i64) -> bool {
        Self::due(&mut self.0, ts_ns)
    }

    fn due(next: &mut Option<i64>, ts_ns: i64) -> bool {
        if next.is_none_or(|t| ts_ns >= t) {
            *next = Some(ts_ns.saturating_add(SWEEP_NS));
            return true;
        }
        false
    }
}

/// FxHash-style hasher: flow keys are not attacker-chosen hash-flooding material in an
/// offline analyzer, and SipHash costs more than the rest of the per-packet work.
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// The table of TCP connections.
pub struct FlowTable {
    map: HashMap<ConnKey, u32, BuildHasherDefault<FastHasher>>,
    slots: Vec<Entry>,
    /// Entries that are [`Entry::Live`].
    live: usize,
    /// The partitions of the connection limit ([`CONNECTION_PARTITIONS`], or one with
    /// [`FlowTable::with_max_open`]), each with its live connections and candidates.
    rooms: Vec<Room>,
    /// Most live connections of a partition before its idlest are retired.
    room_max: usize,
    /// The box of the connection retired last, for the next connection to open in.
    spare: Option<Box<Slot>>,
    retirements: Retirements,
    acceptor_ports: Vec<u16>,
    last_key: Option<(ConnKey, u32)>,
    /// IPv4 and IPv6 tuples → slots, in front of `map` (which it never contradicts).
    cache: cache::TupleCache,
    /// Interval of the per-connection loop (RTT) series, ns.
    series_ns: i64,
    /// Analyse TCP behaviour (RTT, flight, retransmissions); off for a pure decode.
    perf_on: bool,
    /// Connections with a half holding bytes beyond a hole (ids), for the sweep.
    waiting: Vec<u32>,
    /// Capture time of the next sweep of `waiting`.
    next_sweep_ns: Option<i64>,
    /// Sweeps are told ([`FlowTable::sweep_at`]) by whoever sees every packet (a worker
    /// of a parallel run sees only its connections' packets).
    sweep_told: bool,
}

impl std::fmt::Debug for FlowTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowTable").field("connections", &self.slots.len()).finish_non_exhaustive()
    }
}

impl FlowTable {
    /// A table; `acceptor_ports` (988 by default in the CLI) decide the active side when the
    /// handshake was not captured.
    pub fn new(acceptor_ports: &[u16]) -> Self {
        Self {
            map: HashMap::default(),
            slots: Vec::new(),
            live: 0,
            rooms: (0..CONNECTION_PARTITIONS).map(|_| Room::default()).collect(),
            room_max: MAX_OPEN_CONNECTIONS / CONNECTION_PARTITIONS,
            spare: None,
            retirements: Retirements::default(),
            acceptor_ports: acceptor_ports.to_vec(),
            last_key: None,
            cache: cache::TupleCache::default(),
            series_ns: crate::perf::DEFAULT_SERIES_NS,
            perf_on: true,
            waiting: Vec::new(),
            next_sweep_ns: None,
            sweep_told: false,
        }
    }

    /// Sweeps only when told ([`FlowTable::sweep_at`], at the packets
    /// [`SweepClock::due`] names): the table of a worker that sees a share of the packets.
    pub fn with_told_sweeps(mut self) -> Self {
        self.sweep_told = true;
        self
    }

    /// Turns the TCP behaviour analysis off (`perf` then reports nothing): a decode that
    /// only wants the byte streams runs faster.
    pub fn without_perf(mut self) -> Self {
        self.perf_on = false;
        self
    }

    /// Sets the interval of the per-connection RTT series (default 100 ms) for connections
    /// opened from now on.
    pub fn with_series_interval(mut self, ns: i64) -> Self {
        self.series_ns = ns.max(1);
        self
    }

    /// The interval of the time series, ns (coarser than asked once the capture has run
    /// [`crate::limits::MAX_SERIES_INTERVALS`] of them: see [`FlowTable::coarsen_series`]).
    pub fn series_interval(&self) -> i64 {
        self.series_ns
    }

    /// Keeps every connection's series (followed or retired) at `ns`, a multiple of the
    /// current interval, from now on: their buckets are merged into the coarser ones.
    pub fn coarsen_series(&mut self, ns: i64) {
        debug_assert!(ns % self.series_ns == 0 && ns >= self.series_ns);
        self.series_ns = ns;
        for e in &mut self.slots {
            match e {
                Entry::Live(s) if s.perf.series_ns() != ns => s.perf.coarsen(ns),
                Entry::Retired(r) => {
                    for d in r.perf.iter_mut().flat_map(|p| p.iter_mut()) {
                        d.coarsen(ns);
                    }
                }
                _ => {}
            }
        }
    }

    /// Sets the most connections followed at once, in one partition (by default
    /// [`MAX_OPEN_CONNECTIONS`] in [`CONNECTION_PARTITIONS`] partitions).
    pub fn with_max_open(mut self, n: usize) -> Self {
        self.rooms = vec![Room::default()];
        self.room_max = n.max(8);
        self
    }

    /// The partition a connection between `a` and `b` belongs to.
    fn room_of(&self, a: Endpoint, b: Endpoint) -> usize {
        if self.rooms.len() == 1 {
            0
        } else {
            partition_of(ConnKey::route(a, b))
        }
    }

    /// Connections retired to make room so far.
    pub fn retirements(&self) -> Retirements {
        self.retirements
    }

    /// Connections followed now.
    pub fn live(&self) -> usize {
        self.live
    }

    fn slot(&self, i: u32) -> Option<&Slot> {
        match self.slots.get(i as usize) {
            Some(Entry::Live(s)) => Some(s),
            _ => None,
        }
    }

    fn slot_mut(&mut self, i: u32) -> &mut Slot {
        match &mut self.slots[i as usize] {
            Entry::Live(s) => s,
            _ => unreachable!("connection {i} is not live"),
        }
    }

    /// Number of connections seen.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no connection was seen.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// A connection's description (none once folded).
    pub fn connection(&self, id: ConnId) -> Option<&Connection> {
        match self.slots.get(id.0 as usize)? {
            Entry::Live(s) => Some(&s.info),
            Entry::Retired(r) => Some(&r.info),
            Entry::Folded => None,
        }
    }

    /// One half-stream's state (counters, offsets), while the connection is followed.
    pub fn half(&self, id: ConnId, dir: Dir) -> Option<&StreamHalf> {
        self.slot(id.0).map(|s| &s.halves[dir.index()])
    }

    /// One half-stream's counters (none once folded).
    pub fn half_stats(&self, id: ConnId, dir: Dir) -> Option<&HalfStats> {
        match self.slots.get(id.0 as usize)? {
            Entry::Live(s) => Some(&s.halves[dir.index()].stats),
            Entry::Retired(r) => Some(&r.stats[dir.index()]),
            Entry::Folded => None,
        }
    }

    /// True when the sink said to ignore the connection.
    pub fn is_ignored(&self, id: ConnId) -> bool {
        self.slot(id.0).is_some_and(|s| s.ignored)
    }

    /// All connections not folded, in id order.
    pub fn connections(&self) -> impl Iterator<Item = &Connection> {
        self.slots.iter().filter_map(|e| match e {
            Entry::Live(s) => Some(&s.info),
            Entry::Retired(r) => Some(&r.info),
            Entry::Folded => None,
        })
    }

    #[inline(never)]
    fn new_slot(&mut self, seg: &TcpSegment<'_>, stamp: Stamp, room: usize, sink: &mut impl StreamSink) -> u32 {
        let src = Endpoint { ip: seg.ip.src, port: seg.src_port };
        let dst = Endpoint { ip: seg.ip.dst, port: seg.dst_port };
        let (active, rule) = if seg.flags.syn() {
            (if seg.flags.ack() { dst } else { src }, ActiveRule::Handshake)
        } else if self.acceptor_ports.contains(&dst.port) && !self.acceptor_ports.contains(&src.port) {
            (src, ActiveRule::AcceptorPort)
        } else if self.acceptor_ports.contains(&src.port) && !self.acceptor_ports.contains(&dst.port) {
            (dst, ActiveRule::AcceptorPort)
        } else {
            (src, ActiveRule::FirstPacket)
        };
        let passive = if active == src { dst } else { src };
        let id = self.slots.len() as u32;
        let info = Connection {
            id: ConnId(id),
            endpoints: [active, passive],
            active_rule: rule,
            first: stamp,
            last: stamp,
            reset: false,
            syn_seen: [false; 2],
            handshake_ns: [None; 3],
        };
        let verdict = sink.on_open(&info);
        self.live += 1;
        let slot = Slot {
            info,
            halves: [StreamHalf::default(), StreamHalf::default()],
            perf: ConnPerf::new(self.series_ns),
            ignored: verdict == Verdict::Ignore,
            closed: [false; 2],
            waiting: false,
            room: room as u16,
        };
        let boxed = match self.spare.take() {
            Some(mut b) => {
                *b = slot;
                b
            }
            None => Box::new(slot),
        };
        self.slots.push(Entry::Live(boxed));
        self.rooms[room].opened(id);
        id
    }

    /// At the limit of the partition `room` (see [`CONNECTION_PARTITIONS`]), retires one
    /// of its connections to make room: the idlest of the candidates [`Room::choose_idle`]
    /// chose last (the idlest eighth of the partition's live connections, least recent
    /// packet first), skipping those that carried a packet since; a retired connection's
    /// streams are flushed as at the end of the capture, the sink decides whether it is
    /// folded, and its tuple is forgotten (a later packet opens a new connection, as a
    /// capture that starts mid-stream would). One connection retired per connection
    /// opened, not an eighth at once: what the retired one frees, the new one takes.
    /// Thousands of frees then thousands of allocations overflowed the allocator's
    /// per-thread caches and, in a parallel run's workers, took its arena lock each time.
    fn make_room(&mut self, room: usize, now: Stamp, sink: &mut impl StreamSink) {
        if self.rooms[room].live >= self.room_max {
            self.retire_idlest(room, now, sink);
        }
    }

    /// [`FlowTable::make_room`] at the limit: out of line, so that the per-segment path
    /// that calls it stays small enough for the stream code to be inlined into it.
    #[cold]
    #[inline(never)]
    fn retire_idlest(&mut self, room: usize, now: Stamp, sink: &mut impl StreamSink) {
        while self.rooms[room].live >= self.room_max {
            let Some((seen, i)) = self.rooms[room].next.pop_front() else {
                let cands = (self.room_max / 8).max(1);
                self.rooms[room].choose_idle(&self.slots, cands);
                if self.rooms[room].next.is_empty() {
                    // No live connection listed (`live` and `ids` disagree): open past
                    // the limit rather than loop.
                    debug_assert!(false, "{} live, none listed", self.rooms[room].live);
                    return;
                }
                continue;
            };
            if matches!(&self.slots[i as usize], Entry::Live(s) if s.info.last.frame == seen) {
                self.retire(i, now, sink);
                self.last_key = None;
            }
        }
    }

    fn retire(&mut self, i: u32, now: Stamp, sink: &mut impl StreamSink) {
        let Entry::Live(mut slot) = std::mem::replace(&mut self.slots[i as usize], Entry::Folded) else { return };
        self.live -= 1;
        self.rooms[usize::from(slot.room)].live -= 1;
        self.retirements.retired += 1;
        let ended = Stamp { frame: now.frame, ts_ns: slot.info.last.ts_ns.max(now.ts_ns) };
        if !slot.ignored {
            flush_slot(self.perf_on, &mut slot, ended, sink);
        }
        let key = ConnKey::of(slot.info.endpoints[0], slot.info.endpoints[1]);
        if self.map.get(&key) == Some(&i) {
            self.map.remove(&key);
            self.cache.forget(slot.info.endpoints[0], slot.info.endpoints[1]);
        }
        if sink.on_retire(&slot.info) {
            self.retirements.folded += 1;
        } else {
            let [d0, d1] = &mut slot.perf.dirs;
            self.slots[i as usize] = Entry::Retired(Box::new(Retired {
                info: slot.info.clone(),
                stats: [std::mem::take(&mut slot.halves[0].stats), std::mem::take(&mut slot.halves[1].stats)],
                perf: self.perf_on.then(|| Box::new([std::mem::take(&mut d0.perf), std::mem::take(&mut d1.perf)])),
            }));
        }
        self.spare = Some(slot);
    }

    /// The segment's connection (opened if new) and direction.
    fn lookup(&mut self, seg: &TcpSegment<'_>, stamp: Stamp, sink: &mut impl StreamSink) -> (u32, Dir) {
        let mut found = self.cache.get_v4_of(seg);
        if found.is_none() {
            found = self.lookup_map(seg);
        }
        // A fresh SYN on a tuple whose connection ended (or whose stream has moved on)
        // starts a new connection: port reuse.
        if let Some((i, _)) = found {
            let Some(slot) = self.slot(i) else { unreachable!("the map holds live connections only") };
            if seg.flags.syn() && !seg.flags.ack() {
                let h = &slot.halves[Dir::FromActive.index()];
                let same_syn = h.syn_seen() && h.base_seq() == seg.seq.wrapping_add(1);
                let ended = slot.closed.iter().any(|c| *c) || slot.info.reset;
                if !same_syn && (ended || h.started()) {
                    found = None;
                }
            }
        }
        match found {
            Some(f) => f,
            None => self.open(seg, stamp, sink),
        }
    }

    /// [`FlowTable::lookup`] of a segment the IPv4 cache did not answer: through the
    /// IPv6 cache, else the map (and the `last_key` memo), caching the map's answer.
    #[inline(never)]
    fn lookup_map(&mut self, seg: &TcpSegment<'_>) -> Option<(u32, Dir)> {
        // An IPv6 tuple's key, made once: to ask its cache, and to fill it from the map.
        let v6 = cache::v6_key_of(seg);
        if let Some(f) = v6.as_ref().and_then(|k| self.cache.get_v6(k)) {
            return Some(f);
        }
        let (src, dst) =
            (Endpoint { ip: seg.ip.src, port: seg.src_port }, Endpoint { ip: seg.ip.dst, port: seg.dst_port });
        let key = ConnKey::of(src, dst);
        let i = match self.last_key {
            Some((k, i)) if k == key => i,
            _ => *self.map.get(&key)?,
        };
        let dir = self.dir_of(i, src);
        match v6.map(cache::Key::V6).or_else(|| cache::key_of(seg)) {
            Some(k) => self.cache.set(&k, i, dir),
            None => self.last_key = Some((key, i)),
        }
        Some((i, dir))
    }

    /// The direction of a segment from `src` on live connection `i`.
    fn dir_of(&self, i: u32, src: Endpoint) -> Dir {
        match self.slot(i) {
            Some(s) if s.info.endpoints[0] != src => Dir::FromPassive,
            _ => Dir::FromActive,
        }
    }

    /// A new connection for the segment's tuple (which the map then gives).
    #[inline(never)]
    fn open(&mut self, seg: &TcpSegment<'_>, stamp: Stamp, sink: &mut impl StreamSink) -> (u32, Dir) {
        let (src, dst) =
            (Endpoint { ip: seg.ip.src, port: seg.src_port }, Endpoint { ip: seg.ip.dst, port: seg.dst_port });
        let room = self.room_of(src, dst);
        self.make_room(room, stamp, sink);
        let i = self.new_slot(seg, stamp, room, sink);
        let key = ConnKey::of(src, dst);
        self.map.insert(key, i);
        self.cache.forget(src, dst);
        self.last_key = Some((key, i));
        (i, self.dir_of(i, src))
    }

    /// Processes one TCP segment.
    pub fn process(&mut self, seg: &TcpSegment<'_>, stamp: Stamp, sink: &mut impl StreamSink) -> SegmentOutcome {
        self.process_from(seg, None, stamp, sink)
    }

    /// [`FlowTable::process`] of a segment whose captured payload lies at `origin` of a
    /// capture that can be read again: its retransmission history keeps that place
    /// instead of a copy.
    pub fn process_from(
        &mut self,
        seg: &TcpSegment<'_>,
        origin: Option<Origin<'_>>,
        stamp: Stamp,
        sink: &mut impl StreamSink,
    ) -> SegmentOutcome {
        if !self.sweep_told && SweepClock::due(&mut self.next_sweep_ns, stamp.ts_ns) {
            self.sweep(stamp.ts_ns, sink);
        }
        let (i, dir) = self.lookup(seg, stamp, sink);
        let perf_on = self.perf_on;
        let slot = self.slot_mut(i);
        slot.info.last = stamp;
        let outcome = SegmentOutcome { conn: slot.info.id, dir, ignored: slot.ignored };
        slot.halves[dir.index()].stats.segments += 1;
        if slot.ignored {
            return outcome;
        }
        let Slot { info, halves, ignored, closed, perf, .. } = slot;
        if perf_on {
            perf.on_segment(
                dir.index(),
                &SegInfo {
                    ts: stamp.ts_ns,
                    seq: seg.seq,
                    ack: seg.ack,
                    syn: seg.flags.syn(),
                    has_ack: seg.flags.ack(),
                    len: seg.payload_len,
                    window: seg.window,
                    options: seg.options,
                },
            );
        }
        if seg.flags.rst() {
            info.reset = true;
        }
        if seg.flags.syn() && !halves[dir.index()].started() {
            info.syn_seen[dir.index()] = true;
        }
        let hs = &mut info.handshake_ns;
        match (dir, seg.flags.syn(), seg.flags.ack()) {
            (Dir::FromActive, true, false) if hs[0].is_none() => hs[0] = Some(stamp.ts_ns),
            (Dir::FromPassive, true, true) if hs[0].is_some() && hs[1].is_none() => hs[1] = Some(stamp.ts_ns),
            (Dir::FromActive, false, true) if hs[1].is_some() && hs[2].is_none() => hs[2] = Some(stamp.ts_ns),
            _ => {}
        }
        let info = &*info;
        let mut verdict = Verdict::Follow;
        let mut emit_dir = |d: Dir, st: Stamp, ev: StreamEvent<'_>| {
            if sink_event(sink, info, d, st, ev) == Verdict::Ignore {
                verdict = Verdict::Ignore;
            }
        };
        let [h0, h1] = halves;
        let (this, peer) = if dir == Dir::FromActive { (h0, h1) } else { (h1, h0) };
        if seg.flags.syn() {
            this.on_syn(seg.seq);
        }
        // The ACK field acknowledges the peer's bytes: may resolve a hole there. Its
        // capture time ages the peer's holes too.
        if seg.flags.ack() && !seg.flags.rst() {
            peer.on_peer_ack(seg.ack, &mut |st, ev| emit_dir(dir.reverse(), st, ev));
        }
        peer.expire(stamp.ts_ns, &mut |st, ev| emit_dir(dir.reverse(), st, ev));
        let data_seq = if seg.flags.syn() { seg.seq.wrapping_add(1) } else { seg.seq };
        if seg.payload_len > 0 {
            let len = u64::from(seg.payload_len);
            this.on_data(data_seq, len, seg.payload, origin, stamp, &mut |st, ev| emit_dir(dir, st, ev));
        } else if !seg.flags.syn() && !seg.flags.rst() {
            // A pure ACK's sequence number is the next byte to send: a valid origin.
            this.start_at(seg.seq);
        }
        if seg.flags.fin() {
            this.on_fin(data_seq, u64::from(seg.payload_len), stamp, &mut |st, ev| emit_dir(dir, st, ev));
            closed[dir.index()] = true;
        }
        if seg.flags.rst() {
            emit_dir(dir, stamp, StreamEvent::Rst);
        }
        if verdict == Verdict::Ignore {
            *ignored = true;
            this.release();
            peer.release();
        }
        if perf_on {
            let owd = perf.sender_owd(|| info.capture_point());
            perf.settle(stamp.ts_ns, owd, false);
        }
        // Only data puts bytes beyond a hole (a half's out-of-order buffer).
        if seg.payload_len > 0 {
            self.note_waiting(i);
        }
        outcome
    }

    /// Lists connection `i` for the sweep when one of its halves holds bytes beyond a hole.
    #[inline(always)]
    fn note_waiting(&mut self, i: u32) {
        let slot = self.slot_mut(i);
        if !slot.waiting && !slot.ignored && slot.halves.iter().any(StreamHalf::has_pending) {
            slot.waiting = true;
            self.waiting.push(i);
        }
    }

    /// Ages the holes of every waiting connection to capture time `now` (holes past
    /// [`MAX_HOLE_WAIT_NS`] become capture-loss gaps even when their connection receives
    /// no more segments); keeps listed those still waiting.
    fn sweep(&mut self, now: i64, sink: &mut impl StreamSink) {
        let mut still = Vec::new();
        // In connection order (ids follow first packets), so that workers of a parallel
        // run, each sweeping its own connections, give the same events in the same order.
        self.waiting.sort_unstable();
        for i in std::mem::take(&mut self.waiting) {
            let Entry::Live(slot) = &mut self.slots[i as usize] else { continue };
            if !slot.ignored {
                expire_slot(slot, now, sink);
            }
            if !slot.ignored && slot.halves.iter().any(StreamHalf::has_pending) {
                still.push(i);
            } else {
                slot.waiting = false;
            }
        }
        self.waiting = still;
    }

    /// One table from the tables of a parallel run's workers: `ids[k][local]` is the
    /// global id (the order of first packets over the whole capture) of worker `k`'s
    /// connection `local`; together they cover `0..total` once each.
    pub fn merged(parts: Vec<(FlowTable, Vec<u32>)>, total: usize) -> FlowTable {
        // Placeholders, every one replaced: one table's worth of entries at a time.
        let mut slots: Vec<Entry> = (0..total).map(|_| Entry::Folded).collect();
        let mut parts = parts.into_iter();
        let Some((mut out, first_ids)) = parts.next() else { return FlowTable::new(&[]) };
        let mut place = |t: &mut FlowTable, ids: &[u32]| {
            for (local, e) in std::mem::take(&mut t.slots).into_iter().enumerate() {
                let g = ids[local];
                let e = match e {
                    Entry::Live(mut s) => {
                        s.info.id = ConnId(g);
                        Entry::Live(s)
                    }
                    Entry::Retired(mut r) => {
                        r.info.id = ConnId(g);
                        Entry::Retired(r)
                    }
                    Entry::Folded => Entry::Folded,
                };
                slots[g as usize] = e;
            }
        };
        place(&mut out, &first_ids);
        for (mut t, ids) in parts {
            place(&mut t, &ids);
            out.live += t.live;
            out.retirements.retired += t.retirements.retired;
            out.retirements.folded += t.retirements.folded;
            out.series_ns = out.series_ns.max(t.series_ns);
        }
        out.slots = slots;
        out.map.clear();
        out.cache.clear();
        out.waiting.clear();
        out.last_key = None;
        out.rooms.iter_mut().for_each(|r| *r = Room::default());
        for (i, e) in out.slots.iter().enumerate() {
            if let Entry::Live(s) = e {
                out.map.insert(ConnKey::of(s.info.endpoints[0], s.info.endpoints[1]), i as u32);
                out.rooms[usize::from(s.room)].opened(i as u32);
            }
        }
        out
    }

    /// A sweep told by the reader of a parallel run (see [`FlowTable::with_told_sweeps`]).
    pub fn sweep_at(&mut self, now: i64, sink: &mut impl StreamSink) {
        self.sweep(now, sink);
    }

    /// TCP behaviour of a connection's two directions (index [`Dir::index`]).
    pub fn perf(&self, id: ConnId) -> Option<[&DirPerf; 2]> {
        match self.slots.get(id.0 as usize)? {
            Entry::Live(s) => Some([&s.perf.dirs[0].perf, &s.perf.dirs[1].perf]),
            Entry::Retired(r) => r.perf.as_deref().map(|[a, b]| [a, b]),
            Entry::Folded => None,
        }
    }

    /// End of input: flushes every half-stream (holes become gaps, buffered data is
    /// delivered), at the given final stamp.
    pub fn finish(&mut self, stamp: Stamp, sink: &mut impl StreamSink) {
        for e in &mut self.slots {
            if let Entry::Live(slot) = e {
                if !slot.ignored {
                    flush_slot(self.perf_on, slot, stamp, sink);
                }
            }
        }
    }
}

/// Flushes a connection's two halves (holes become gaps, buffered data is delivered) and
/// ends its TCP behaviour analysis (when `perf_on`), at `stamp`.
fn flush_slot(perf_on: bool, slot: &mut Slot, stamp: Stamp, sink: &mut impl StreamSink) {
    if perf_on {
        let owd = slot.perf.sender_owd(|| slot.info.capture_point());
        slot.perf.settle(stamp.ts_ns, owd, true);
        slot.perf.finish();
    }
    let Slot { info, halves, .. } = slot;
    for (d, half) in [Dir::FromActive, Dir::FromPassive].into_iter().zip(halves.iter_mut()) {
        half.flush(stamp, &mut |st, ev| {
            sink_event(sink, info, d, st, ev);
        });
    }
}

/// Ages both halves of a connection to capture time `now` (see `FlowTable::sweep`).
fn expire_slot(slot: &mut Slot, now: i64, sink: &mut impl StreamSink) {
    let Slot { info, halves, ignored, .. } = slot;
    let info = &*info;
    let mut verdict = Verdict::Follow;
    for (d, half) in [Dir::FromActive, Dir::FromPassive].into_iter().zip(halves.iter_mut()) {
        half.expire(now, &mut |st, ev| {
            if sink_event(sink, info, d, st, ev) == Verdict::Ignore {
                verdict = Verdict::Ignore;
            }
        });
    }
    if verdict == Verdict::Ignore {
        *ignored = true;
        for h in halves.iter_mut() {
            h.release();
        }
    }
}

fn sink_event(sink: &mut impl StreamSink, info: &Connection, dir: Dir, stamp: Stamp, ev: StreamEvent<'_>) -> Verdict {
    sink.on_event(info, dir, stamp, ev)
}
