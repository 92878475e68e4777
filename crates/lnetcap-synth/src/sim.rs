//! A discrete-event simulation of socklnd peers over TCP, written out as a capture.
//!
//! What is modelled: per-direction links with a rate and a one-way delay (shared by every
//! TCP connection between two hosts), TCP segmentation with an MSS (or TSO super-segments
//! on the capturing host), delayed ACKs (every second segment, or at the end of a burst),
//! loss with retransmission one RTT later, reordering, duplication; socklnd typed
//! connections (CONTROL, BULK_IN, BULK_OUT, `conns_per_peer`), acceptor connreq and HELLO,
//! ksock NOOP / zero-copy cookies, LNet peer credits (a zero-copy message holds its credit
//! until its ZC-ACK returns); and the RPC flows of PtlRPC BRW, metadata RPCs (early
//! replies, difficult replies with LNet ACK), LNet self-test BRW and LNet ping.
//!
//! What is not: congestion control (the sender is limited by the link only), receive
//! windows, SACK. The capture is taken on the server host (or the client host).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lnetcap_lnet::names::{opc_name, portal_name};
use lnetcap_lnet::nid::{lnd, Nid};
use lnetcap_lnet::wire::consts::*;
use lnetcap_lnet::wire::{
    conn_type, Connreq, Hello, KsockHdr, LnetDetail, LnetHdr, PingInfo, PtlrpcEmit, SrpcInfo, Wmd, NID16, NID4,
};
use serde_json::{json, Map, Value};

use crate::pcapw::{build_packet, CaptureWriter, Container, Link, TcpPacket};
use crate::rng::Rng;

/// What the clients do.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// LNet self-test BRW.
    LstBrw {
        /// Write (GET + REPLY) rather than read (PUT).
        write: bool,
        /// Bulk bytes per RPC (≤ 1 MiB).
        size: u32,
    },
    /// PtlRPC OST_READ / OST_WRITE.
    OstBrw {
        /// Write.
        write: bool,
        /// Bulk bytes per RPC (> 1 MiB uses several LNet messages).
        size: u32,
    },
    /// Metadata RPCs: MDS_GETATTR, LDLM_ENQUEUE (early replies), MDS_REINT (difficult
    /// reply with LNet ACK), OBD_PING; plus an LNet ping at start.
    Metadata,
    /// A mix: BRW reads and writes of 1–4 MiB and metadata.
    Mixed,
}

/// Where the capture is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureAt {
    /// On the server hosts (every server's traffic).
    Server,
    /// On the client hosts.
    Client,
}

/// Scenario parameters.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clients (at most [`MAX_CLIENTS`]).
    pub clients: usize,
    /// Servers.
    pub servers: usize,
    /// socklnd version per client (cycled): 1, 2, 3, 4 (4 = IPv6 peer).
    pub protos: Vec<u32>,
    /// Typed bulk connections of each kind per peer.
    pub conns_per_peer: usize,
    /// Workload.
    pub workload: Workload,
    /// RPCs each client issues.
    pub rpcs_per_client: usize,
    /// RPCs in flight per client→server.
    pub concurrency: usize,
    /// LNet peer credits.
    pub peer_credits: i32,
    /// Round-trip time, ns.
    pub rtt_ns: i64,
    /// Link rate, bit/s.
    pub rate_bps: f64,
    /// MTU.
    pub mtu: usize,
    /// Segment loss probability.
    pub loss: f64,
    /// Segment reordering probability.
    pub reorder: f64,
    /// Captured duplicate probability.
    pub duplicate: f64,
    /// Capture snaplen.
    pub snaplen: u32,
    /// Capture point.
    pub capture_at: CaptureAt,
    /// Drop captured packets before this fraction of the run (mid-stream start).
    pub midstream: Option<f64>,
    /// TSO super-segments on the capturing host.
    pub tso: bool,
    /// Server processing time per RPC, ns.
    pub service_ns: i64,
    /// Link type.
    pub link: Link,
    /// Container.
    pub container: Container,
    /// ISNs near 2^32 (sequence wrap inside the capture).
    pub isn_near_wrap: bool,
    /// Zero-copy for large messages.
    pub zero_copy: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            clients: 1,
            servers: 1,
            protos: vec![3],
            conns_per_peer: 1,
            workload: Workload::LstBrw { write: true, size: 1 << 20 },
            rpcs_per_client: 16,
            concurrency: 8,
            peer_credits: 8,
            rtt_ns: 2_000_000,
            rate_bps: 10e9,
            mtu: 1500,
            loss: 0.0,
            reorder: 0.0,
            duplicate: 0.0,
            snaplen: 262_144,
            capture_at: CaptureAt::Server,
            midstream: None,
            tso: false,
            service_ns: 50_000,
            link: Link::Ethernet,
            container: Container::PcapUs,
            isn_near_wrap: false,
            zero_copy: true,
        }
    }
}

/// Generator output.
pub struct Output {
    /// The capture file bytes.
    pub capture: Vec<u8>,
    /// Truth records: one `scenario`, then `message`s (stream order per direction), then
    /// `rpc`s (by start).
    pub truth: Vec<Value>,
    /// Packets written.
    pub packets: usize,
    /// The simulation was cut short by its event limit (a generator bug, or a scenario far
    /// larger than any preset): the capture and truth stop this many ns into the run.
    pub stopped_at_ns: Option<i64>,
    /// Events the simulation ran.
    pub events: u64,
}

/// Clients a scenario may have: each has its own address and its own ranges of XIDs and
/// selftest ids (a client's selftest ids carry its number in bits 24-35, below the lowest
/// bit set in their common base, 37).
pub const MAX_CLIENTS: usize = 4096;

/// Events the simulator runs at most (the largest preset, `bench`, needs about 5 M).
const MAX_EVENTS: u64 = 200_000_000;

const BASE_TIME_NS: i64 = 1_795_300_000_000_000_000;
/// Initial congestion window (RFC 6928).
const INITIAL_CWND_SEGMENTS: u64 = 10;
/// Largest congestion window (the socket buffers' limit), bytes.
const MAX_CWND: f64 = 64.0 * 1024.0 * 1024.0;
/// The congestion-window truth is kept per bucket of this many ns (the default interval of
/// `lnetcap analyze`).
const CWND_BUCKET_NS: i64 = 100_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    LinkFree(usize),
    SegArrive {
        conn: usize,
        dir: usize,
        off: u64,
        len: u64,
        /// The sender's TSval on the segment.
        tsval: u32,
    },
    Retransmit {
        conn: usize,
        dir: usize,
        off: u64,
        len: u64,
    },
    Connect(usize),
    SynAckDone(usize),
    ServerStart(usize),
    FinalReply(usize),
    ClientIssue(usize),
    /// An ACK for direction `dir`'s data reaches its sender.
    AckArrive {
        conn: usize,
        dir: usize,
        ack: u64,
        /// The ACK sender's TSval.
        tsval: u32,
    },
    /// The receiver of direction `dir`'s data sends a delayed ACK.
    DelAck {
        conn: usize,
        dir: usize,
    },
}

/// Bytes written into a stream, or a message payload: literal bytes, or zeros (bulk data)
/// that are never materialised unless a segment carries them.
#[derive(Clone)]
enum Piece {
    Bytes(Vec<u8>),
    Zeros(u64),
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Self::Bytes(b) => b.len() as u64,
            Self::Zeros(n) => *n,
        }
    }
}

#[derive(Default)]
struct TxDir {
    isn: u32,
    pieces: Vec<(u64, Piece)>,
    written: u64,
    snd_nxt: u64,
    /// Acknowledged up to here (at the sender).
    snd_una: u64,
    /// Congestion window and slow-start threshold, bytes (Reno-style: slow start, then
    /// one MSS per round trip; halved on a loss).
    cwnd: f64,
    ssthresh: f64,
    /// Congestion-window truth: per `CWND_BUCKET_NS` bucket of sender time, (smallest,
    /// largest, window cuts), from the first segment on.
    cwnd_trace: BTreeMap<i64, (u64, u64, u32)>,
}

impl TxDir {
    /// Records the window at `now` (after a change), `cut`: it was a loss cut.
    fn note_cwnd(&mut self, now: i64, cut: bool) {
        let w = self.cwnd as u64;
        let e = self.cwnd_trace.entry(now.div_euclid(CWND_BUCKET_NS) * CWND_BUCKET_NS).or_insert((w, w, 0));
        e.0 = e.0.min(w);
        e.1 = e.1.max(w);
        e.2 += u32::from(cut);
    }

    fn write(&mut self, p: Piece) -> u64 {
        let off = self.written;
        self.written += p.len();
        self.pieces.push((off, p));
        off
    }

    fn bytes(&self, off: u64, len: u64, out: &mut Vec<u8>) {
        let end = off + len;
        let mut i = self.pieces.partition_point(|(o, p)| o + p.len() <= off);
        while i < self.pieces.len() && self.pieces[i].0 < end {
            let (po, p) = &self.pieces[i];
            let a = off.max(*po);
            let b = end.min(po + p.len());
            match p {
                Piece::Bytes(v) => out.extend_from_slice(&v[(a - po) as usize..(b - po) as usize]),
                Piece::Zeros(_) => out.resize(out.len() + (b - a) as usize, 0),
            }
            i += 1;
        }
    }
}

#[derive(Default)]
struct RxDir {
    rcv_nxt: u64,
    ooo: BTreeMap<u64, u64>,
    unacked_segs: u32,
    /// (end offset, message index) in stream order, not yet delivered.
    pending: VecDeque<(u64, usize)>,
    /// TS.Recent: the newest TSval received from this direction's sender, echoed as TSecr.
    last_tsval: u32,
}

impl RxDir {
    /// A segment or ACK carrying `tsval` arrived: TS.Recent only moves forward (RFC 7323;
    /// a reordered older segment does not pull it back).
    fn note_tsval(&mut self, tsval: u32) {
        if (tsval.wrapping_sub(self.last_tsval) as i32) > 0 || self.last_tsval == 0 {
            self.last_tsval = tsval;
        }
    }
}

struct Conn {
    /// hosts[0] active (client), hosts[1] passive (server).
    hosts: [usize; 2],
    ports: [u16; 2],
    tx: [TxDir; 2],
    rx: [RxDir; 2],
    peer: usize,
    ctype: u32,
    hellos_done: bool,
    ip_id: [u16; 2],
}

struct Host {
    /// [IPv4, IPv6].
    ip: [IpAddr; 2],
    /// [nid of the IPv4 address, nid of the IPv6 address].
    nid: [Nid; 2],
    ts_base_ms: u32,
    server: bool,
}

struct LinkState {
    free_at: i64,
    users: Vec<(usize, usize)>,
    rr: usize,
    /// The pending LinkFree event's time: one at a time (an older one still queued when the
    /// link was pumped early is stale and ignored).
    scheduled_at: Option<i64>,
}

struct Peer {
    /// 1 when the peers talk over IPv6 (socklnd V4), else 0.
    fam: usize,
    client: usize,
    server: usize,
    proto: u32,
    control: usize,
    /// Client's BULK_IN connections (server → client bulk).
    bulk_in: Vec<usize>,
    /// Client's BULK_OUT connections (client → server bulk).
    bulk_out: Vec<usize>,
    rr: [usize; 2],
    /// Side 0 = client sending, side 1 = server sending.
    credits: [i32; 2],
    queue: [VecDeque<usize>; 2],
    zc_next: [u64; 2],
    zc_out: [HashMap<u64, usize>; 2],
    ready: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Connreq,
    Hello,
    Noop,
    Request,
    EarlyReply,
    Reply,
    BulkGet(u32),
    BulkData(u32),
    BulkAck(u32),
    ReplyAck,
    PingGet,
    PingReply,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Self::Connreq => "connreq",
            Self::Hello => "hello",
            Self::Noop => "noop",
            Self::Request => "request",
            Self::EarlyReply => "early_reply",
            Self::Reply => "reply",
            Self::BulkGet(_) => "bulk_get",
            Self::BulkData(_) => "bulk_data",
            Self::BulkAck(_) => "bulk_ack",
            Self::ReplyAck => "reply_ack",
            Self::PingGet => "ping_get",
            Self::PingReply => "ping_reply",
        }
    }
}

struct Msg {
    peer: usize,
    side: usize,
    role: Role,
    rpc: Option<usize>,
    hdr: Option<LnetHdr>,
    payload: Piece,
    /// Truth fields describing the payload (opc, srpc ids, ...).
    extra: Map<String, Value>,
    /// Set when written.
    conn: usize,
    dir: usize,
    off: u64,
    len: u64,
    zc_cookie: u64,
    kind: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RpcKind {
    LstRead,
    LstWrite,
    OstRead,
    OstWrite,
    Meta { opc: u32, early: bool, difficult: bool },
    Ping,
}

struct Rpc {
    peer: usize,
    kind: RpcKind,
    xid: u64,
    bulkid: u64,
    size: u32,
    n_md: u32,
    done_parts: u32,
    msgs: Vec<usize>,
    completed: bool,
}

struct ClientState {
    peers: Vec<usize>,
    issued: usize,
    inflight: Vec<usize>,
    next_peer: usize,
    xid: u64,
    rpyid: u64,
    started: bool,
}

struct CapPkt {
    ts: i64,
    seqno: u64,
    data: Vec<u8>,
    /// (conn, dir, stream offset, len) of the data carried.
    span: Option<(usize, usize, u64, u64)>,
    /// (conn, dir, stream offset of the sequence number) of any non-SYN segment.
    seq_at: Option<(usize, usize, u64)>,
}

/// A captured data segment's payload: (offset, end, frame, ts, captured bytes).
type Span = (u64, u64, u64, i64, u64);

/// Per (conn, dir): the captured data segments.
type SpanMap = HashMap<(usize, usize), SpanIndex>;

/// The payload spans of one direction's packets as captured, (start offset, end offset,
/// frame, ts, captured payload bytes), sorted by start, with the largest end of each
/// prefix: which frame first carried a stream offset is a binary search and a short walk
/// back over the spans that may still cover it, where a scan of every span made the
/// truth of a metadata capture quadratic (20,000 RPCs: 48 s, 5,000: 3.5 s).
struct SpanIndex {
    spans: Vec<Span>,
    max_end: Vec<u64>,
}

impl SpanIndex {
    fn new(mut spans: Vec<Span>) -> Self {
        spans.sort_by_key(|s| (s.0, s.2));
        let mut most = 0;
        let max_end = spans
            .iter()
            .map(|s| {
                most = most.max(s.1);
                most
            })
            .collect();
        Self { spans, max_end }
    }

    /// The earliest frame whose payload covers `off`: (frame, ts, whether `off` is within
    /// its captured bytes).
    fn at(&self, off: u64) -> Option<(u64, i64, bool)> {
        let mut j = self.spans.partition_point(|s| s.0 <= off);
        let mut best: Option<&Span> = None;
        while j > 0 && self.max_end[j - 1] > off {
            j -= 1;
            let s = &self.spans[j];
            if s.1 > off && best.is_none_or(|b| s.2 < b.2) {
                best = Some(s);
            }
        }
        best.map(|s| (s.2, s.3, off < s.0 + s.4))
    }
}

/// The simulator.
pub struct Sim {
    cfg: Config,
    rng: Rng,
    now: i64,
    evseq: u64,
    q: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    hosts: Vec<Host>,
    conns: Vec<Conn>,
    links: Vec<LinkState>,
    link_of: HashMap<(usize, usize), usize>,
    peers: Vec<Peer>,
    msgs: Vec<Msg>,
    rpcs: Vec<Rpc>,
    clients: Vec<ClientState>,
    pkts: Vec<CapPkt>,
}

fn hexs(v: u64) -> String {
    format!("0x{v:x}")
}

impl Sim {
    /// Builds the topology for `cfg`.
    pub fn new(cfg: Config, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut hosts = Vec::new();
        for s in 0..cfg.servers {
            hosts.push(Self::make_host(s, true, &mut rng));
        }
        let mut sim = Self {
            cfg,
            rng,
            now: BASE_TIME_NS,
            evseq: 0,
            q: BinaryHeap::new(),
            hosts,
            conns: Vec::new(),
            links: Vec::new(),
            link_of: HashMap::new(),
            peers: Vec::new(),
            msgs: Vec::new(),
            rpcs: Vec::new(),
            clients: Vec::new(),
            pkts: Vec::new(),
        };
        let mut port_next: HashMap<usize, u16> = HashMap::new();
        for c in 0..sim.cfg.clients {
            let proto = sim.cfg.protos[c % sim.cfg.protos.len()];
            let host = Self::make_host(c, false, &mut sim.rng);
            let hi = sim.hosts.len();
            sim.hosts.push(host);
            let mut cs = ClientState {
                peers: Vec::new(),
                issued: 0,
                inflight: Vec::new(),
                next_peer: 0,
                xid: (1_795_300_000u64 << 20) + 128 * c as u64 * 1_000_000,
                rpyid: (1_795_300_000u64 << 32) | ((c as u64) << 24),
                started: false,
            };
            for s in 0..sim.cfg.servers {
                let pi = sim.peers.len();
                let mut peer = Peer {
                    fam: usize::from(proto == 4),
                    client: hi,
                    server: s,
                    proto,
                    control: 0,
                    bulk_in: Vec::new(),
                    bulk_out: Vec::new(),
                    rr: [0; 2],
                    credits: [sim.cfg.peer_credits; 2],
                    queue: Default::default(),
                    zc_next: [2; 2],
                    zc_out: Default::default(),
                    ready: 0,
                };
                // Lustre connects CONTROL first, then alternates BULK_IN / BULK_OUT.
                let mut types = vec![conn_type::CONTROL];
                for _ in 0..sim.cfg.conns_per_peer {
                    types.push(conn_type::BULK_IN);
                    types.push(conn_type::BULK_OUT);
                }
                for (k, t) in types.into_iter().enumerate() {
                    let port = port_next.entry(hi).or_insert(1023);
                    let p = *port;
                    *port -= 1;
                    let ci = sim.add_conn(hi, s, p, pi, t);
                    match t {
                        conn_type::CONTROL => peer.control = ci,
                        conn_type::BULK_IN => peer.bulk_in.push(ci),
                        _ => peer.bulk_out.push(ci),
                    }
                    let t0 = BASE_TIME_NS + 1_000_000 * (pi as i64) + 300_000 * k as i64;
                    sim.schedule(t0, Ev::Connect(ci));
                }
                sim.peers.push(peer);
                cs.peers.push(pi);
            }
            sim.clients.push(cs);
        }
        sim
    }

    /// Host `i` (from 0): clients at 10.0.1.(i + 1) and fd00:0:0:1::(i + 1), servers at
    /// 10.0.2.(i + 1) and fd00:0:0:2::(i + 1); clients from i = 254 on at
    /// 10.1.(j / 250).(j % 250 + 1), j = i − 254 (up to [`MAX_CLIENTS`]).
    fn make_host(i: usize, server: bool, rng: &mut Rng) -> Host {
        let n = u16::try_from(i + 1).unwrap_or(u16::MAX);
        let ip6 = Ipv6Addr::new(0xfd00, 0, 0, if server { 2 } else { 1 }, 0, 0, 0, n);
        let ip4 = if server || i < 254 {
            Ipv4Addr::new(10, 0, if server { 2 } else { 1 }, u8::try_from(i + 1).unwrap_or(u8::MAX))
        } else {
            let j = i - 254;
            Ipv4Addr::new(10, 1, u8::try_from(j / 250).unwrap_or(u8::MAX), (j % 250 + 1) as u8)
        };
        Host {
            ip: [IpAddr::V4(ip4), IpAddr::V6(ip6)],
            nid: [Nid::ipv4(ip4, lnd::TCP, 0), Nid::ipv6(ip6, lnd::TCP, 0)],
            ts_base_ms: rng.next_u64() as u32,
            server,
        }
    }

    fn fam(&self, conn: usize) -> usize {
        self.peers.get(self.conns[conn].peer).map_or(0, |p| p.fam)
    }

    fn add_conn(&mut self, client: usize, server: usize, port: u16, peer: usize, ctype: u32) -> usize {
        let ci = self.conns.len();
        let wrap = self.cfg.isn_near_wrap;
        let mut isn = || if wrap { u32::MAX - self.rng.range(0, 5000) as u32 } else { self.rng.next_u64() as u32 };
        let (i0, i1) = (isn(), isn());
        let mut c = Conn {
            hosts: [client, server],
            ports: [port, ACCEPTOR_PORT],
            tx: [TxDir::default(), TxDir::default()],
            rx: [RxDir::default(), RxDir::default()],
            peer,
            ctype,
            hellos_done: false,
            ip_id: [self.rng.next_u64() as u16, self.rng.next_u64() as u16],
        };
        c.tx[0].isn = i0;
        c.tx[1].isn = i1;
        self.conns.push(c);
        for dir in 0..2 {
            let (a, b) = if dir == 0 { (client, server) } else { (server, client) };
            let li = *self.link_of.entry((a, b)).or_insert_with(|| {
                self.links.push(LinkState { free_at: 0, users: Vec::new(), rr: 0, scheduled_at: None });
                self.links.len() - 1
            });
            self.links[li].users.push((ci, dir));
        }
        ci
    }

    fn schedule(&mut self, t: i64, ev: Ev) {
        self.evseq += 1;
        self.q.push(Reverse((t, self.evseq, ev)));
    }

    fn owd(&self) -> i64 {
        self.cfg.rtt_ns / 2
    }

    fn capture_host(&self, h: usize) -> bool {
        self.hosts[h].server == (self.cfg.capture_at == CaptureAt::Server)
    }

    fn mss(&self, conn: usize) -> u64 {
        let ip = if self.fam(conn) == 0 { 20 } else { 40 };
        (self.cfg.mtu - ip - 20 - 12) as u64
    }

    fn tsval(&self, h: usize, t: i64) -> u32 {
        self.hosts[h].ts_base_ms.wrapping_add((t / 1_000_000) as u32)
    }

    #[allow(clippy::too_many_arguments)]
    fn emit_packet(
        &mut self,
        conn: usize,
        dir: usize,
        flags: u8,
        off: u64,
        payload: &[u8],
        data_len: u64,
        t_send: i64,
        delivered: Option<i64>,
    ) {
        let c = &self.conns[conn];
        let src_h = c.hosts[dir];
        let dst_h = c.hosts[1 - dir];
        let syn = flags & 0x02 != 0;
        let seq = if syn { c.tx[dir].isn } else { c.tx[dir].isn.wrapping_add(1).wrapping_add(off as u32) };
        let ack_flag = flags & 0x10 != 0;
        let ack =
            if ack_flag { c.tx[1 - dir].isn.wrapping_add(1).wrapping_add(c.rx[1 - dir].rcv_nxt as u32) } else { 0 };
        let mut opts = Vec::with_capacity(24);
        if syn {
            let mss = self.mss(conn) as u16 + 12;
            opts.extend_from_slice(&[2, 4]);
            opts.extend_from_slice(&mss.to_be_bytes());
            opts.extend_from_slice(&[4, 2, 1, 3, 3, 11]);
        } else {
            opts.extend_from_slice(&[1, 1]);
        }
        opts.extend_from_slice(&[8, 10]);
        opts.extend_from_slice(&self.tsval(src_h, t_send).to_be_bytes());
        opts.extend_from_slice(&c.rx[1 - dir].last_tsval.to_be_bytes());
        if syn {
            opts.extend_from_slice(&[1, 1]);
            opts.truncate(20);
            while opts.len() % 4 != 0 {
                opts.push(1);
            }
        }
        // 32768 << 11 = 64 MiB: the receive window never limits below the congestion window cap.
        let window: u16 = if syn { 65_535 } else { 32_768 };
        let ip_id = c.ip_id[dir];
        let fam = self.fam(conn);
        let c = &self.conns[conn];
        let pkt = build_packet(
            self.cfg.link,
            &TcpPacket {
                src: self.hosts[src_h].ip[fam],
                dst: self.hosts[dst_h].ip[fam],
                sport: c.ports[dir],
                dport: c.ports[1 - dir],
                seq,
                ack,
                flags,
                window,
                options: &opts,
                payload,
                ip_id,
            },
        );
        self.conns[conn].ip_id[dir] = ip_id.wrapping_add(1);
        let span = (data_len > 0).then_some((conn, dir, off, data_len));
        let seq_at = (!syn).then_some((conn, dir, off));
        let ts = if self.capture_host(src_h) { Some(t_send) } else { delivered };
        if let Some(ts) = ts {
            self.evseq += 1;
            let dup = self.rng.chance(self.cfg.duplicate);
            if dup {
                self.pkts.push(CapPkt { ts: ts + 1000, seqno: self.evseq, data: pkt.clone(), span, seq_at });
                self.evseq += 1;
            }
            self.pkts.push(CapPkt { ts, seqno: self.evseq, data: pkt, span, seq_at });
        }
    }

    fn pure_ack(&mut self, conn: usize, dir: usize) {
        // An ACK from the host at `dir` end for data flowing the other way.
        let t = self.now;
        let arrive = t + self.owd();
        let src_h = self.conns[conn].hosts[dir];
        let tsval = self.tsval(src_h, t);
        self.emit_packet(conn, dir, 0x10, self.conns[conn].tx[dir].snd_nxt, &[], 0, t, Some(arrive));
        let ack = self.conns[conn].rx[1 - dir].rcv_nxt;
        self.schedule(arrive, Ev::AckArrive { conn, dir: 1 - dir, ack, tsval });
    }

    fn on_ack_arrive(&mut self, conn: usize, dir: usize, ack: u64) {
        let mss = self.mss(conn) as f64;
        let tx = &mut self.conns[conn].tx[dir];
        if ack > tx.snd_una {
            let acked = (ack - tx.snd_una) as f64;
            tx.snd_una = ack;
            if tx.cwnd < tx.ssthresh {
                tx.cwnd += acked;
            } else {
                tx.cwnd += mss * acked / tx.cwnd;
            }
            tx.cwnd = tx.cwnd.min(MAX_CWND);
            tx.note_cwnd(self.now, false);
            self.kick(conn, dir);
        }
    }

    fn send_segment(&mut self, conn: usize, dir: usize, off: u64, len: u64, retrans: bool) -> i64 {
        let mut payload = Vec::with_capacity(len as usize);
        self.conns[conn].tx[dir].bytes(off, len, &mut payload);
        let src_h = self.conns[conn].hosts[dir];
        let ser = ((len + 66) as f64 * 8e9 / self.cfg.rate_bps) as i64;
        let lost = self.rng.chance(self.cfg.loss);
        let mut arrive = self.now + ser + self.owd();
        if self.rng.chance(self.cfg.reorder) {
            arrive += 3 * ser.max(1000);
        }
        let psh = !retrans && off + len == self.conns[conn].tx[dir].written;
        let flags = 0x10 | if psh { 0x08 } else { 0 };
        let tsval = self.tsval(src_h, self.now);
        self.emit_packet(conn, dir, flags, off, &payload, len, self.now, (!lost).then_some(arrive));
        if !lost {
            self.schedule(arrive, Ev::SegArrive { conn, dir, off, len, tsval });
        } else {
            let rto = self.cfg.rtt_ns + (self.cfg.rtt_ns / 4).max(1_000_000);
            self.schedule(self.now + rto, Ev::Retransmit { conn, dir, off, len });
        }
        ser
    }

    fn pump(&mut self, li: usize) {
        if self.links[li].free_at > self.now {
            let t = self.links[li].free_at;
            if self.links[li].scheduled_at != Some(t) {
                self.links[li].scheduled_at = Some(t);
                self.schedule(t, Ev::LinkFree(li));
            }
            return;
        }
        let n = self.links[li].users.len();
        for k in 0..n {
            let idx = (self.links[li].rr + k) % n;
            let (conn, dir) = self.links[li].users[idx];
            let mss = self.mss(conn);
            let tx = &mut self.conns[conn].tx[dir];
            if tx.cwnd == 0.0 {
                tx.cwnd = (INITIAL_CWND_SEGMENTS * mss) as f64;
                tx.ssthresh = MAX_CWND;
                tx.note_cwnd(self.now, false);
            }
            let room = (tx.cwnd as u64).saturating_sub(tx.snd_nxt - tx.snd_una);
            let pending = tx.written - tx.snd_nxt;
            let src_h = self.conns[conn].hosts[dir];
            let max = if self.cfg.tso && self.capture_host(src_h) { mss * 7 } else { mss };
            if pending > 0 && room >= pending.min(max) {
                let tx = &self.conns[conn].tx[dir];
                let off = tx.snd_nxt;
                let len = (tx.written - off).min(max).min(room);
                self.conns[conn].tx[dir].snd_nxt += len;
                let ser = self.send_segment(conn, dir, off, len, false);
                self.links[li].rr = idx + 1;
                self.links[li].free_at = self.now + ser;
                let t = self.links[li].free_at;
                self.links[li].scheduled_at = Some(t);
                self.schedule(t, Ev::LinkFree(li));
                return;
            }
        }
    }

    fn kick(&mut self, conn: usize, dir: usize) {
        let c = &self.conns[conn];
        let li = self.link_of[&(c.hosts[dir], c.hosts[1 - dir])];
        self.pump(li);
    }

    fn on_arrive(&mut self, conn: usize, dir: usize, off: u64, len: u64, tsval: u32) {
        let rx = &mut self.conns[conn].rx[dir];
        rx.note_tsval(tsval);
        let end = off + len;
        let mut out_of_order = false;
        let had_hole = !rx.ooo.is_empty();
        if off <= rx.rcv_nxt {
            rx.rcv_nxt = rx.rcv_nxt.max(end);
            while let Some((&o, &e)) = rx.ooo.first_key_value() {
                if o > rx.rcv_nxt {
                    break;
                }
                rx.rcv_nxt = rx.rcv_nxt.max(e);
                rx.ooo.pop_first();
            }
        } else {
            let e = rx.ooo.entry(off).or_insert(end);
            *e = (*e).max(end);
            out_of_order = true;
        }
        let filled_hole = !out_of_order && had_hole;
        rx.unacked_segs += 1;
        let burst_end = self.conns[conn].tx[dir].snd_nxt == end;
        let rx = &mut self.conns[conn].rx[dir];
        if out_of_order || filled_hole || rx.unacked_segs >= 2 || burst_end {
            rx.unacked_segs = 0;
            self.pure_ack(conn, 1 - dir);
        } else if rx.unacked_segs == 1 {
            let t = self.now + (self.cfg.rtt_ns / 8).clamp(50_000, 1_000_000);
            self.schedule(t, Ev::DelAck { conn, dir });
        }
        // Deliver complete messages.
        loop {
            let rx = &mut self.conns[conn].rx[dir];
            match rx.pending.front() {
                Some(&(e, m)) if e <= rx.rcv_nxt => {
                    rx.pending.pop_front();
                    self.deliver(m);
                }
                _ => break,
            }
        }
    }

    /// Writes message `m` on a connection now.
    fn write_msg(&mut self, m: usize, conn: usize, dir: usize) {
        let peer = self.msgs[m].peer;
        let proto = self.peers[peer].proto;
        let mut bytes = Vec::new();
        let zc = self.cfg.zero_copy && proto >= 2 && self.msgs[m].payload.len() >= 16384 && self.msgs[m].hdr.is_some();
        let side = self.msgs[m].side;
        if zc {
            let c = self.peers[peer].zc_next[side];
            self.peers[peer].zc_next[side] += 1;
            self.peers[peer].zc_out[side].insert(c, m);
            self.msgs[m].zc_cookie = c;
        }
        if let Some(h) = &self.msgs[m].hdr {
            if proto >= 2 {
                KsockHdr { msg_type: KSOCK_LNET, csum: 0, zc_req_cookie: self.msgs[m].zc_cookie, zc_ack_cookie: 0 }
                    .emit(&mut bytes);
            }
            h.emit(if proto == 4 { NID16 } else { NID4 }, &mut bytes);
        }
        let tx = &mut self.conns[conn].tx[dir];
        let off = tx.written;
        tx.write(Piece::Bytes(bytes));
        if self.msgs[m].payload.len() > 0 {
            tx.write(self.msgs[m].payload.clone());
        }
        let len = tx.written - off;
        let msg = &mut self.msgs[m];
        msg.conn = conn;
        msg.dir = dir;
        msg.off = off;
        msg.len = len;
        self.conns[conn].rx[dir].pending.push_back((off + len, m));
        self.kick(conn, dir);
        if self.msgs[m].hdr.is_some() && !zc {
            // Send completion = handed to the socket: the credit returns now.
            self.release_credit(peer, side);
            self.send_complete(m);
        }
    }

    /// Writes raw bytes (connreq, HELLO, NOOP) as a message.
    fn write_raw(
        &mut self,
        conn: usize,
        dir: usize,
        bytes: Vec<u8>,
        role: Role,
        kind: &'static str,
        extra: Map<String, Value>,
    ) -> usize {
        let peer = self.conns[conn].peer;
        let m = self.msgs.len();
        let tx = &mut self.conns[conn].tx[dir];
        let off = tx.written;
        let len = bytes.len() as u64;
        tx.write(Piece::Bytes(bytes));
        self.msgs.push(Msg {
            peer,
            side: dir,
            role,
            rpc: None,
            hdr: None,
            payload: Piece::Zeros(0),
            extra,
            conn,
            dir,
            off,
            len,
            zc_cookie: 0,
            kind,
        });
        self.conns[conn].rx[dir].pending.push_back((off + len, m));
        self.kick(conn, dir);
        m
    }

    fn release_credit(&mut self, peer: usize, side: usize) {
        self.peers[peer].credits[side] += 1;
        if let Some(next) = self.peers[peer].queue[side].pop_front() {
            self.peers[peer].credits[side] -= 1;
            let (conn, dir) = self.pick_conn(next);
            self.write_msg(next, conn, dir);
        }
    }

    fn pick_conn(&mut self, m: usize) -> (usize, usize) {
        let peer = self.msgs[m].peer;
        let side = self.msgs[m].side;
        let nob = 24 + 72 + self.msgs[m].payload.len();
        let p = &mut self.peers[peer];
        if nob >= 1024 {
            let list = if side == 0 { &p.bulk_out } else { &p.bulk_in };
            let c = list[p.rr[side] % list.len()];
            p.rr[side] += 1;
            (c, side)
        } else {
            (p.control, side)
        }
    }

    /// Sends an LNet message through the peer's credits.
    fn send_lnet(&mut self, m: usize) {
        let peer = self.msgs[m].peer;
        let side = self.msgs[m].side;
        if self.peers[peer].credits[side] > 0 && self.peers[peer].queue[side].is_empty() {
            self.peers[peer].credits[side] -= 1;
            let (conn, dir) = self.pick_conn(m);
            self.write_msg(m, conn, dir);
        } else {
            self.peers[peer].queue[side].push_back(m);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new_lnet(
        &mut self,
        peer: usize,
        side: usize,
        role: Role,
        rpc: Option<usize>,
        msg_type: u32,
        detail: LnetDetail,
        payload: Piece,
        extra: Map<String, Value>,
    ) -> usize {
        let p = &self.peers[peer];
        let (src, dst) = if side == 0 { (p.client, p.server) } else { (p.server, p.client) };
        let fam = p.fam;
        let hdr = LnetHdr {
            dest_nid: self.hosts[dst].nid[fam],
            src_nid: self.hosts[src].nid[fam],
            dest_pid: PID_LUSTRE,
            src_pid: PID_LUSTRE,
            msg_type,
            payload_length: payload.len() as u32,
            detail: Some(detail),
            cut: None,
        };
        let m = self.msgs.len();
        self.msgs.push(Msg {
            peer,
            side,
            role,
            rpc,
            hdr: Some(hdr),
            payload,
            extra,
            conn: 0,
            dir: 0,
            off: 0,
            len: 0,
            zc_cookie: 0,
            kind: lnetcap_lnet::wire::lnet_type_name(msg_type),
        });
        if let Some(r) = rpc {
            self.rpcs[r].msgs.push(m);
        }
        m
    }

    fn wmd(&mut self, host: usize) -> Wmd {
        Wmd { interface: 0x17a5_0000_0000_0000 | host as u64, object: (self.rng.next_u64() & 0xffff_fffc) | 3 }
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &mut self,
        peer: usize,
        side: usize,
        role: Role,
        rpc: Option<usize>,
        portal: u32,
        mb: u64,
        offset: u32,
        ack: bool,
        payload: Piece,
        extra: Map<String, Value>,
    ) {
        let host = if side == 0 { self.peers[peer].client } else { self.peers[peer].server };
        let ack_wmd = if ack { self.wmd(host) } else { Wmd::NONE };
        let d = LnetDetail::Put { ack_wmd, match_bits: mb, hdr_data: 0, ptl_index: portal, offset };
        let m = self.new_lnet(peer, side, role, rpc, LNET_PUT, d, payload, extra);
        self.send_lnet(m);
    }

    fn deliver(&mut self, m: usize) {
        let role = self.msgs[m].role;
        let (conn, dir) = (self.msgs[m].conn, self.msgs[m].dir);
        let peer = self.msgs[m].peer;
        // Zero-copy: the receiver ACKs the cookie on the reverse direction of this TCP
        // connection (its BULK_IN / ACK connection).
        if self.msgs[m].zc_cookie != 0 {
            let c = self.msgs[m].zc_cookie;
            let mut b = Vec::new();
            KsockHdr { msg_type: KSOCK_NOOP, csum: 0, zc_req_cookie: 0, zc_ack_cookie: c }.emit(&mut b);
            let mut ex = Map::new();
            ex.insert("zc_ack_cookie".into(), json!(hexs(c)));
            self.write_raw(conn, 1 - dir, b, Role::Noop, "NOOP", ex);
        }
        match role {
            Role::Connreq => {}
            Role::Hello => {
                if dir == 0 {
                    // Passive side answers with its HELLO (conn type inverted).
                    let ct = match self.conns[conn].ctype {
                        conn_type::BULK_IN => conn_type::BULK_OUT,
                        conn_type::BULK_OUT => conn_type::BULK_IN,
                        t => t,
                    };
                    self.send_hello(conn, 1, ct);
                } else {
                    self.conns[conn].hellos_done = true;
                    self.peers[peer].ready += 1;
                    let p = &self.peers[peer];
                    if p.ready == 1 + 2 * self.cfg.conns_per_peer {
                        let client = self.client_of_peer(peer);
                        if !self.clients[client].started {
                            self.clients[client].started = true;
                            self.start_client(client);
                        }
                    }
                }
            }
            Role::Noop => {
                // The original sender gets its ZC-ACK: send complete, credit back.
                let c = self.msgs[m]
                    .extra
                    .get("zc_ack_cookie")
                    .and_then(Value::as_str)
                    .and_then(|s| u64::from_str_radix(&s[2..], 16).ok());
                if let Some(c) = c {
                    let side = if dir == 0 { 1 } else { 0 };
                    if let Some(orig) = self.peers[peer].zc_out[side].remove(&c) {
                        self.release_credit(peer, side);
                        self.send_complete(orig);
                    }
                }
            }
            _ => self.app_receive(m),
        }
    }

    fn client_of_peer(&self, peer: usize) -> usize {
        self.clients.iter().position(|c| c.peers.contains(&peer)).unwrap_or(0)
    }

    fn send_hello(&mut self, conn: usize, dir: usize, ctype: u32) {
        let peer = self.conns[conn].peer;
        let proto = self.peers[peer].proto;
        let me = self.conns[conn].hosts[dir];
        let other = self.conns[conn].hosts[1 - dir];
        let inc = 0x17a5_c3d2_e1f0_0000 + me as u64;
        let fam = self.peers[peer].fam;
        let h = Hello {
            version: proto,
            flip: false,
            src_nid: self.hosts[me].nid[fam],
            dst_nid: (proto > 1).then_some(self.hosts[other].nid[fam]),
            src_pid: PID_LUSTRE,
            dst_pid: 0,
            src_incarnation: inc,
            dst_incarnation: 0,
            conn_type: ctype,
            ips: Vec::new(),
        };
        let mut ex = Map::new();
        ex.insert("hello_version".into(), json!(proto));
        ex.insert("conn_type".into(), json!(conn_type::name(ctype)));
        ex.insert("src_nid".into(), json!(self.hosts[me].nid[fam].to_string()));
        if proto > 1 {
            ex.insert("dst_nid".into(), json!(self.hosts[other].nid[fam].to_string()));
        }
        ex.insert("incarnation".into(), json!(hexs(inc)));
        self.write_raw(conn, dir, h.emit(), Role::Hello, "HELLO", ex);
    }

    fn start_client(&mut self, c: usize) {
        let t = self.now + 200_000;
        if self.cfg.workload == Workload::Metadata {
            // LNet discovery ping of each server first.
            for k in 0..self.clients[c].peers.len() {
                let peer = self.clients[c].peers[k];
                let r = self.new_rpc(peer, RpcKind::Ping, 0, 0, 0, 0);
                let w = self.wmd(self.peers[peer].client);
                let d = LnetDetail::Get {
                    return_wmd: w,
                    match_bits: PING_MATCHBITS,
                    ptl_index: 0,
                    src_offset: 0,
                    sink_length: 4096,
                };
                let m = self.new_lnet(peer, 0, Role::PingGet, Some(r), LNET_GET, d, Piece::Zeros(0), Map::new());
                self.send_lnet(m);
            }
        }
        for _ in 0..self.cfg.concurrency * self.clients[c].peers.len() {
            self.schedule(t, Ev::ClientIssue(c));
        }
    }

    fn new_rpc(&mut self, peer: usize, kind: RpcKind, xid: u64, bulkid: u64, size: u32, n_md: u32) -> usize {
        self.rpcs.push(Rpc { peer, kind, xid, bulkid, size, n_md, done_parts: 0, msgs: Vec::new(), completed: false });
        self.rpcs.len() - 1
    }

    fn issue(&mut self, c: usize) {
        let cs = &mut self.clients[c];
        if cs.issued >= self.cfg.rpcs_per_client {
            return;
        }
        let k = cs.issued;
        cs.issued += 1;
        let peer = cs.peers[cs.next_peer % cs.peers.len()];
        cs.next_peer += 1;
        let kind = match &self.cfg.workload {
            Workload::LstBrw { write: true, size } => (RpcKind::LstWrite, *size),
            Workload::LstBrw { write: false, size } => (RpcKind::LstRead, *size),
            Workload::OstBrw { write: true, size } => (RpcKind::OstWrite, *size),
            Workload::OstBrw { write: false, size } => (RpcKind::OstRead, *size),
            Workload::Metadata => {
                let opc = [33, 101, 36, 400][k % 4];
                (RpcKind::Meta { opc, early: opc == 101, difficult: opc == 36 }, 0)
            }
            Workload::Mixed => match k % 5 {
                0 => (RpcKind::OstWrite, 4 << 20),
                1 => (RpcKind::OstRead, 1 << 20),
                2 => (RpcKind::OstRead, 3 << 20),
                3 => (RpcKind::OstWrite, 2 << 20),
                _ => (RpcKind::Meta { opc: 101, early: true, difficult: false }, 0),
            },
        };
        let (kind, size) = kind;
        let n_md = size.div_ceil(1 << 20).max(1);
        let cs = &mut self.clients[c];
        let (xid, bulkid) = match kind {
            RpcKind::LstRead | RpcKind::LstWrite => {
                cs.rpyid += 2;
                (cs.rpyid - 1, cs.rpyid)
            }
            _ => {
                cs.xid += 128;
                (cs.xid, cs.xid)
            }
        };
        let r = self.new_rpc(peer, kind, xid, bulkid, size, n_md);
        self.clients[c].inflight.push(r);
        let mut ex = Map::new();
        match kind {
            RpcKind::LstRead | RpcKind::LstWrite => {
                let rw = if kind == RpcKind::LstRead { 1 } else { 2 };
                ex.insert("srpc_type".into(), json!("BRW_REQST"));
                ex.insert("rpyid".into(), json!(hexs(xid)));
                ex.insert("bulkid".into(), json!(hexs(bulkid)));
                ex.insert("brw_len".into(), json!(size));
                ex.insert("brw_rw".into(), json!(if rw == 1 { "read" } else { "write" }));
                let body = SrpcInfo::emit_brw_request(xid, bulkid, rw, size, 1);
                self.put(peer, 0, Role::Request, Some(r), 50, 11, 0, false, Piece::Bytes(body), ex);
            }
            RpcKind::OstRead | RpcKind::OstWrite => {
                let opc = if kind == RpcKind::OstRead { 3 } else { 4 };
                let body = PtlrpcEmit {
                    pb_type: PTL_RPC_MSG_REQUEST,
                    pb_version: 0x0003_0003,
                    opc,
                    lm_flags: 3,
                    timeout: 11,
                    mbits: xid + u64::from(n_md) - 1,
                    jobid: format!("dd.{}", 1000 + c),
                    extra_buflens: vec![208, 24, 16 * n_md, 0, 0],
                    ..Default::default()
                }
                .emit();
                Self::ptlrpc_extra(&mut ex, opc, "request");
                self.put(peer, 0, Role::Request, Some(r), 6, xid, 0, false, Piece::Bytes(body), ex);
            }
            RpcKind::Meta { opc, .. } => {
                let portal = if opc == 400 { 28 } else { 12 };
                let version = if opc == 101 {
                    0x0004_0003
                } else if opc == 400 {
                    0x0001_0003
                } else {
                    0x0002_0003
                };
                let extra_buflens = match opc {
                    400 => vec![],
                    101 => vec![88, 216],
                    36 => vec![136, 216, 8],
                    _ => vec![216],
                };
                let body = PtlrpcEmit {
                    pb_type: PTL_RPC_MSG_REQUEST,
                    pb_version: version,
                    opc,
                    lm_flags: 3,
                    timeout: 11,
                    mbits: xid,
                    extra_buflens,
                    ..Default::default()
                }
                .emit();
                Self::ptlrpc_extra(&mut ex, opc, "request");
                self.put(peer, 0, Role::Request, Some(r), portal, xid, 0, false, Piece::Bytes(body), ex);
            }
            RpcKind::Ping => {}
        }
    }

    fn ptlrpc_extra(ex: &mut Map<String, Value>, opc: u32, kind: &str) {
        ex.insert("ptlrpc".into(), json!(kind));
        ex.insert("opc".into(), json!(opc));
        ex.insert("opc_name".into(), json!(opc_name(opc)));
    }

    fn app_receive(&mut self, m: usize) {
        let role = self.msgs[m].role;
        let Some(r) = self.msgs[m].rpc else { return };
        let peer = self.rpcs[r].peer;
        let kind = self.rpcs[r].kind;
        match role {
            Role::Request => {
                let t = self.now + self.cfg.service_ns;
                self.schedule(t, Ev::ServerStart(r));
            }
            Role::PingGet => {
                let nids = [self.hosts[self.peers[peer].server].nid[self.peers[peer].fam]];
                let info = PingInfo::emit(&nids, PID_LUSTRE);
                let dst_wmd = match self.msgs[m].hdr.and_then(|h| h.detail) {
                    Some(LnetDetail::Get { return_wmd, .. }) => return_wmd,
                    _ => Wmd::NONE,
                };
                let mut ex = Map::new();
                ex.insert("ping_nids".into(), json!(["0@lo", nids[0].to_string()]));
                let rm = self.new_lnet(
                    peer,
                    1,
                    Role::PingReply,
                    Some(r),
                    LNET_REPLY,
                    LnetDetail::Reply { dst_wmd },
                    Piece::Bytes(info),
                    ex,
                );
                self.send_lnet(rm);
            }
            Role::PingReply => self.complete_rpc(r),
            Role::BulkGet(i) => {
                // Client returns the data with a REPLY on its BULK_OUT connection.
                let (dst_wmd, sink) = match self.msgs[m].hdr.and_then(|h| h.detail) {
                    Some(LnetDetail::Get { return_wmd, sink_length, .. }) => (return_wmd, sink_length),
                    _ => (Wmd::NONE, 0),
                };
                let rm = self.new_lnet(
                    peer,
                    0,
                    Role::BulkData(i),
                    Some(r),
                    LNET_REPLY,
                    LnetDetail::Reply { dst_wmd },
                    Piece::Zeros(u64::from(sink)),
                    Map::new(),
                );
                self.send_lnet(rm);
            }
            Role::BulkData(i) => {
                if matches!(kind, RpcKind::LstWrite | RpcKind::OstWrite) {
                    // Server received the write data.
                    self.part_done(r);
                } else if kind == RpcKind::OstRead {
                    // Client acknowledges the PUT with an LNet ACK (ack_wmd was set).
                    let (ack_wmd, mb, len) =
                        match self.msgs[m].hdr.and_then(|h| h.detail.map(|d| (d, h.payload_length))) {
                            Some((LnetDetail::Put { ack_wmd, match_bits, .. }, len)) => (ack_wmd, match_bits, len),
                            _ => (Wmd::NONE, 0, 0),
                        };
                    let _ = i;
                    let am = self.new_lnet(
                        peer,
                        0,
                        Role::BulkAck(i),
                        Some(r),
                        LNET_ACK,
                        LnetDetail::Ack { dst_wmd: ack_wmd, match_bits: mb, mlength: len },
                        Piece::Zeros(0),
                        Map::new(),
                    );
                    self.send_lnet(am);
                }
            }
            Role::BulkAck(_) => self.part_done(r),
            Role::EarlyReply => {}
            Role::Reply => {
                if let RpcKind::Meta { difficult: true, .. } = kind {
                    let (ack_wmd, mb) = match self.msgs[m].hdr.and_then(|h| h.detail) {
                        Some(LnetDetail::Put { ack_wmd, match_bits, .. }) => (ack_wmd, match_bits),
                        _ => (Wmd::NONE, 0),
                    };
                    let len = self.msgs[m].payload.len() as u32;
                    let am = self.new_lnet(
                        peer,
                        0,
                        Role::ReplyAck,
                        Some(r),
                        LNET_ACK,
                        LnetDetail::Ack { dst_wmd: ack_wmd, match_bits: mb, mlength: len },
                        Piece::Zeros(0),
                        Map::new(),
                    );
                    self.send_lnet(am);
                }
                self.complete_rpc(r);
            }
            Role::ReplyAck => {}
            _ => {}
        }
    }

    /// Send completion of a message (ZC-ACK received, or written when not zero-copy).
    fn send_complete(&mut self, m: usize) {
        if let (Role::BulkData(_), Some(r)) = (self.msgs[m].role, self.msgs[m].rpc) {
            if self.rpcs[r].kind == RpcKind::LstRead {
                self.part_done(r);
            }
        }
    }

    fn part_done(&mut self, r: usize) {
        self.rpcs[r].done_parts += 1;
        if self.rpcs[r].done_parts == self.rpcs[r].n_md {
            self.send_reply(r, false);
        }
    }

    fn server_start(&mut self, r: usize) {
        let rpc = &self.rpcs[r];
        let (peer, kind, xid, bulkid, size, n_md) = (rpc.peer, rpc.kind, rpc.xid, rpc.bulkid, rpc.size, rpc.n_md);
        let server_host = self.peers[peer].server;
        for i in 0..n_md {
            let chunk = (size - i * (1 << 20)).min(1 << 20);
            match kind {
                RpcKind::LstRead => self.put(
                    peer,
                    1,
                    Role::BulkData(i),
                    Some(r),
                    52,
                    bulkid,
                    0,
                    false,
                    Piece::Zeros(u64::from(chunk)),
                    Map::new(),
                ),
                RpcKind::OstRead => self.put(
                    peer,
                    1,
                    Role::BulkData(i),
                    Some(r),
                    8,
                    xid + u64::from(i),
                    0,
                    true,
                    Piece::Zeros(u64::from(chunk)),
                    Map::new(),
                ),
                RpcKind::LstWrite | RpcKind::OstWrite => {
                    let (portal, mb) = if kind == RpcKind::LstWrite { (52, bulkid) } else { (8, xid + u64::from(i)) };
                    let w = self.wmd(server_host);
                    let d = LnetDetail::Get {
                        return_wmd: w,
                        match_bits: mb,
                        ptl_index: portal,
                        src_offset: 0,
                        sink_length: chunk,
                    };
                    let m = self.new_lnet(peer, 1, Role::BulkGet(i), Some(r), LNET_GET, d, Piece::Zeros(0), Map::new());
                    self.send_lnet(m);
                }
                RpcKind::Meta { early, .. } => {
                    if early {
                        self.send_reply(r, true);
                        let t = self.now + 3 * self.cfg.service_ns.max(1_000_000);
                        self.schedule(t, Ev::FinalReply(r));
                    } else {
                        self.send_reply(r, false);
                    }
                    return;
                }
                RpcKind::Ping => return,
            }
        }
    }

    fn send_reply(&mut self, r: usize, early: bool) {
        let rpc = &self.rpcs[r];
        let (peer, kind, xid, n_md) = (rpc.peer, rpc.kind, rpc.xid, rpc.n_md);
        let mut ex = Map::new();
        match kind {
            RpcKind::LstRead | RpcKind::LstWrite => {
                ex.insert("srpc_type".into(), json!("BRW_REPLY"));
                self.put(
                    peer,
                    1,
                    Role::Reply,
                    Some(r),
                    52,
                    xid,
                    0,
                    false,
                    Piece::Bytes(SrpcInfo::emit_brw_reply(0)),
                    ex,
                );
            }
            RpcKind::OstRead | RpcKind::OstWrite => {
                let opc = if kind == RpcKind::OstRead { 3 } else { 4 };
                let extra = if opc == 3 { vec![208, 0] } else { vec![208, 4 * n_md] };
                let body = PtlrpcEmit {
                    pb_type: PTL_RPC_MSG_REPLY,
                    pb_version: 0x0003_0003,
                    opc,
                    lm_flags: 1,
                    service_time: 1,
                    timeout: 11,
                    extra_buflens: extra,
                    ..Default::default()
                }
                .emit();
                Self::ptlrpc_extra(&mut ex, opc, "reply");
                self.put(peer, 1, Role::Reply, Some(r), 4, xid, 224, false, Piece::Bytes(body), ex);
            }
            RpcKind::Meta { opc, difficult, .. } => {
                let portal = if opc == 400 { 4 } else { 10 };
                if early {
                    let body = PtlrpcEmit {
                        pb_type: PTL_RPC_MSG_REPLY,
                        pb_version: 0x0004_0003,
                        opc,
                        lm_flags: 1,
                        lm_cksum: 0x5eed_c0de,
                        timeout: 30,
                        ..Default::default()
                    }
                    .emit();
                    Self::ptlrpc_extra(&mut ex, opc, "reply");
                    ex.insert("early_reply".into(), json!(true));
                    self.put(peer, 1, Role::EarlyReply, Some(r), portal, xid, 0, false, Piece::Bytes(body), ex);
                } else {
                    // Every third GETATTR fails with -ENOENT, to exercise error replies.
                    let status = if opc == 33 && (xid / 512) % 3 == 1 { -2 } else { 0 };
                    let extra = if opc == 400 { vec![] } else { vec![216, 64] };
                    let pb_type = if status != 0 { PTL_RPC_MSG_ERR } else { PTL_RPC_MSG_REPLY };
                    let body = PtlrpcEmit {
                        pb_type,
                        pb_version: 0x0002_0003,
                        opc,
                        status,
                        lm_flags: 1,
                        service_time: 1,
                        timeout: 11,
                        extra_buflens: extra,
                        ..Default::default()
                    }
                    .emit();
                    Self::ptlrpc_extra(&mut ex, opc, if status != 0 { "error" } else { "reply" });
                    if status != 0 {
                        ex.insert("status".into(), json!(status));
                    }
                    self.put(peer, 1, Role::Reply, Some(r), portal, xid, 224, difficult, Piece::Bytes(body), ex);
                }
            }
            RpcKind::Ping => {}
        }
    }

    fn complete_rpc(&mut self, r: usize) {
        if self.rpcs[r].completed {
            return;
        }
        self.rpcs[r].completed = true;
        let peer = self.rpcs[r].peer;
        let c = self.client_of_peer(peer);
        self.clients[c].inflight.retain(|x| *x != r);
        if self.rpcs[r].kind != RpcKind::Ping {
            let t = self.now + 20_000;
            self.schedule(t, Ev::ClientIssue(c));
        }
    }

    fn connect(&mut self, conn: usize) {
        // SYN, SYN-ACK, ACK; then connreq + HELLO from the active side.
        let t = self.now;
        let owd = self.owd();
        self.emit_packet(conn, 0, 0x02, 0, &[], 0, t, Some(t + owd));
        self.conns[conn].rx[0].last_tsval = self.tsval(self.conns[conn].hosts[0], t);
        self.now = t + owd;
        self.emit_packet(conn, 1, 0x12, 0, &[], 0, t + owd, Some(t + 2 * owd));
        self.conns[conn].rx[1].last_tsval = self.tsval(self.conns[conn].hosts[1], t + owd);
        self.now = t;
        self.schedule(t + 2 * owd, Ev::SynAckDone(conn));
    }

    fn syn_ack_done(&mut self, conn: usize) {
        self.pure_ack(conn, 0);
        let peer = self.conns[conn].peer;
        let server = self.peers[peer].server;
        let target = self.hosts[server].nid[self.peers[peer].fam];
        let mut ex = Map::new();
        ex.insert("connreq_version".into(), json!(if target.is_nid4() { 1 } else { 2 }));
        ex.insert("dst_nid".into(), json!(target.to_string()));
        self.write_raw(conn, 0, Connreq::emit(&target), Role::Connreq, "CONNREQ", ex);
        let ct = self.conns[conn].ctype;
        self.send_hello(conn, 0, ct);
    }

    /// `src:port->dst:port` of a connection direction, as the truth file names it.
    fn tcp_label(&self, conn: usize, dir: usize) -> String {
        let c = &self.conns[conn];
        let fam = self.peers[c.peer].fam;
        let ep = |h: usize, port: u16| match self.hosts[h].ip[fam] {
            IpAddr::V4(x) => format!("{x}:{port}"),
            IpAddr::V6(x) => format!("[{x}]:{port}"),
        };
        format!("{}->{}", ep(c.hosts[dir], c.ports[dir]), ep(c.hosts[1 - dir], c.ports[1 - dir]))
    }

    /// Runs the simulation to the end and writes the capture and truth.
    pub fn run(mut self, scenario: &str, seed: u64) -> Output {
        let mut events = 0u64;
        let mut stopped = None;
        while let Some(Reverse((t, _, ev))) = self.q.pop() {
            events += 1;
            if events > MAX_EVENTS {
                stopped = Some(t - BASE_TIME_NS);
                break;
            }
            self.now = t;
            match ev {
                Ev::LinkFree(li) => {
                    if self.links[li].scheduled_at == Some(t) {
                        self.links[li].scheduled_at = None;
                        self.pump(li);
                    }
                }
                Ev::SegArrive { conn, dir, off, len, tsval } => self.on_arrive(conn, dir, off, len, tsval),
                Ev::Retransmit { conn, dir, off, len } => {
                    // A loss: multiplicative decrease.
                    let mss = self.mss(conn) as f64;
                    let tx = &mut self.conns[conn].tx[dir];
                    tx.cwnd = (tx.cwnd / 2.0).max(2.0 * mss);
                    tx.ssthresh = tx.cwnd;
                    tx.note_cwnd(self.now, true);
                    self.send_segment(conn, dir, off, len, true);
                }
                Ev::AckArrive { conn, dir, ack, tsval } => {
                    // The ACK travelled in the other direction: its receiver keeps its TSval
                    // to echo.
                    self.conns[conn].rx[1 - dir].note_tsval(tsval);
                    self.on_ack_arrive(conn, dir, ack);
                }
                Ev::DelAck { conn, dir } => {
                    if self.conns[conn].rx[dir].unacked_segs > 0 {
                        self.conns[conn].rx[dir].unacked_segs = 0;
                        self.pure_ack(conn, 1 - dir);
                    }
                }
                Ev::Connect(c) => self.connect(c),
                Ev::SynAckDone(c) => self.syn_ack_done(c),
                Ev::ServerStart(r) => self.server_start(r),
                Ev::FinalReply(r) => self.send_reply(r, false),
                Ev::ClientIssue(c) => self.issue(c),
            }
        }
        let mut out = self.finish(scenario, seed);
        out.stopped_at_ns = stopped;
        out.events = events;
        out
    }

    fn finish(mut self, scenario: &str, seed: u64) -> Output {
        let mut pkts = std::mem::take(&mut self.pkts);
        pkts.sort_by_key(|p| (p.ts, p.seqno));
        if self.cfg.container == Container::PcapUs {
            // The truth records the timestamps the file stores.
            for p in &mut pkts {
                p.ts -= p.ts.rem_euclid(1000);
            }
        }
        let cut = self.cfg.midstream.map(|f| {
            let (a, b) = (pkts.first().map_or(0, |p| p.ts), pkts.last().map_or(0, |p| p.ts));
            a + ((b - a) as f64 * f) as i64
        });
        if let Some(cut) = cut {
            pkts.retain(|p| p.ts >= cut);
        }
        let mut w = CaptureWriter::new(self.cfg.container, self.cfg.link, self.cfg.snaplen);
        // For each (conn, dir): spans (off, end, frame, ts, captured payload bytes).
        let mut spans: HashMap<(usize, usize), Vec<Span>> = HashMap::new();
        let hdr_len = |link: Link, ip4: bool| -> u64 {
            let l = match link {
                Link::Ethernet => 14,
                Link::Sll2 => 20,
                Link::Raw => 0,
            };
            l + if ip4 { 20 } else { 40 } + 32
        };
        // Stream offset 0 of each direction as a decoder sees it: the first byte after the
        // SYN, or, when the capture starts mid-stream, the sequence number of the first
        // segment captured.
        let mut base: HashMap<(usize, usize), u64> = HashMap::new();
        for p in &pkts {
            if let Some((c, d, off)) = p.seq_at {
                base.entry((c, d)).or_insert(if cut.is_some() { off } else { 0 });
            }
        }
        for (i, p) in pkts.iter().enumerate() {
            w.packet(p.ts, &p.data);
            if let Some((c, d, off, len)) = p.span {
                let hl = hdr_len(self.cfg.link, self.peers[self.conns[c].peer].fam == 0);
                let captured = (u64::from(self.cfg.snaplen).saturating_sub(hl)).min(len);
                spans.entry((c, d)).or_default().push((off, off + len, i as u64 + 1, p.ts, captured));
            }
        }
        let spans: SpanMap = spans.into_iter().map(|(k, v)| (k, SpanIndex::new(v))).collect();
        let frame_of = |spans: &SpanMap, c: usize, d: usize, off: u64| spans.get(&(c, d))?.at(off);
        let mut truth = Vec::new();
        let cfg = &self.cfg;
        truth.push(json!({
            "type": "scenario", "scenario": scenario, "seed": seed, "clients": cfg.clients, "servers": cfg.servers,
            "protos": cfg.protos, "conns_per_peer": cfg.conns_per_peer, "workload": format!("{:?}", cfg.workload),
            "rpcs_per_client": cfg.rpcs_per_client, "concurrency": cfg.concurrency, "peer_credits": cfg.peer_credits,
            "rtt_ns": cfg.rtt_ns, "rate_bps": cfg.rate_bps, "mtu": cfg.mtu, "loss": cfg.loss, "reorder": cfg.reorder,
            "duplicate": cfg.duplicate, "snaplen": cfg.snaplen, "capture_at": format!("{:?}", cfg.capture_at),
            "midstream": cfg.midstream, "tso": cfg.tso, "packets": pkts.len(), "service_ns": cfg.service_ns,
        }));
        let mut msg_times: Vec<Option<(u64, i64, u64, i64)>> = vec![None; self.msgs.len()];
        let mut order: Vec<usize> = (0..self.msgs.len()).collect();
        order.sort_by_key(|&m| (self.msgs[m].conn, self.msgs[m].dir, self.msgs[m].off));
        for m in order {
            let msg = &self.msgs[m];
            let first = frame_of(&spans, msg.conn, msg.dir, msg.off);
            let last = frame_of(&spans, msg.conn, msg.dir, msg.off + msg.len - 1);
            let hdr_bytes = if msg.hdr.is_some() {
                (if self.peers[msg.peer].proto >= 2 { 24 } else { 0 })
                    + if self.peers[msg.peer].proto == 4 { 96 } else { 72 }
            } else {
                msg.len
            };
            let header_captured =
                (0..hdr_bytes).all(|k| frame_of(&spans, msg.conn, msg.dir, msg.off + k).is_some_and(|f| f.2));
            let mut o = Map::new();
            o.insert("type".into(), json!("message"));
            o.insert("captured".into(), json!(first.is_some() && last.is_some()));
            if let (Some(f), Some(l)) = (first, last) {
                o.insert("frame".into(), json!(f.0));
                o.insert("frame_last".into(), json!(l.0));
                o.insert("ts_ns".into(), json!(f.1));
                o.insert("ts_last_ns".into(), json!(l.1));
                msg_times[m] = Some((f.0, f.1, l.0, l.1));
            }
            o.insert("tcp".into(), json!(self.tcp_label(msg.conn, msg.dir)));
            o.insert("kind".into(), json!(msg.kind));
            match base.get(&(msg.conn, msg.dir)) {
                Some(&b) if msg.off >= b => {
                    o.insert("stream_offset".into(), json!(msg.off - b));
                }
                other => {
                    o.insert("before_capture".into(), json!(true));
                    // The part of a message that straddles the start of the capture.
                    if let Some(&b) = other {
                        if msg.off + msg.len > b {
                            o.insert("bytes_after_capture_start".into(), json!(msg.off + msg.len - b));
                        }
                    }
                }
            }
            o.insert("wire_len".into(), json!(msg.len));
            o.insert("header_captured".into(), json!(header_captured));
            o.insert("role".into(), json!(msg.role.name()));
            if let Some(r) = msg.rpc {
                o.insert("rpc".into(), json!(r));
            }
            self.header_truth(msg, &mut o);
            for (k, v) in &msg.extra {
                o.insert(k.clone(), v.clone());
            }
            truth.push(Value::Object(o));
        }
        truth.extend(self.rpc_truths(&msg_times));
        truth.extend(self.cwnd_truths());
        let n = pkts.len();
        Output { capture: w.finish(), truth, packets: n, stopped_at_ns: None, events: 0 }
    }

    /// One truth record per RPC, in order of its request's capture time.
    fn rpc_truths(&self, msg_times: &[Option<(u64, i64, u64, i64)>]) -> Vec<Value> {
        let mut truth = Vec::new();
        let client_nid = |peer: usize| self.hosts[self.peers[peer].client].nid[self.peers[peer].fam].to_string();
        let server_nid = |peer: usize| self.hosts[self.peers[peer].server].nid[self.peers[peer].fam].to_string();
        let mut rpcs: Vec<(i64, usize)> = Vec::new();
        for (r, rpc) in self.rpcs.iter().enumerate() {
            let req = rpc.msgs.iter().copied().find(|&m| matches!(self.msgs[m].role, Role::Request | Role::PingGet));
            let t0 = req.and_then(|m| msg_times[m]).map_or(i64::MAX, |t| t.1);
            rpcs.push((t0, r));
        }
        rpcs.sort();
        for (_, r) in rpcs {
            let rpc = &self.rpcs[r];
            let find = |pred: &dyn Fn(Role) -> bool| {
                rpc.msgs.iter().copied().filter(|&m| pred(self.msgs[m].role)).collect::<Vec<_>>()
            };
            let req = find(&|x| matches!(x, Role::Request | Role::PingGet));
            let bulk_first = find(&|x| matches!(x, Role::BulkGet(_) | Role::BulkData(_)));
            let bulk_data = find(&|x| matches!(x, Role::BulkData(_)));
            let reply = find(&|x| matches!(x, Role::Reply | Role::PingReply));
            let early = find(&|x| x == Role::EarlyReply);
            let t = |ms: &[usize], first: bool, last_byte: bool| -> Value {
                let v: Vec<i64> =
                    ms.iter().filter_map(|&m| msg_times[m]).map(|t| if last_byte { t.3 } else { t.1 }).collect();
                let x = if first { v.iter().min() } else { v.iter().max() };
                x.map_or(Value::Null, |x| json!(x))
            };
            let (kind, name) = match rpc.kind {
                RpcKind::LstRead => ("lst_brw_read", "BRW_READ"),
                RpcKind::LstWrite => ("lst_brw_write", "BRW_WRITE"),
                RpcKind::OstRead => ("ptlrpc", "OST_READ"),
                RpcKind::OstWrite => ("ptlrpc", "OST_WRITE"),
                RpcKind::Meta { opc, .. } => ("ptlrpc", opc_name(opc).unwrap_or("?")),
                RpcKind::Ping => ("lnet_ping", "LNET_PING"),
            };
            let complete = [&req, &reply].iter().all(|v| v.iter().all(|&m| msg_times[m].is_some()) && !v.is_empty())
                && bulk_first.iter().all(|&m| msg_times[m].is_some());
            truth.push(json!({
                "type": "rpc", "id": r, "kind": kind, "opc_name": name,
                "client_nid": client_nid(rpc.peer), "server_nid": server_nid(rpc.peer),
                "xid": hexs(if rpc.kind == RpcKind::Ping { PING_MATCHBITS } else { rpc.xid }),
                "bytes": rpc.size, "n_md": rpc.n_md, "completed": rpc.completed, "captured_whole": complete,
                "t_start_ns": t(&req, true, false),
                "t_bulk_start_ns": t(&bulk_first, true, false),
                "t_bulk_end_ns": t(&bulk_data, false, true),
                "t_reply_ns": t(&reply, true, false),
                "t_end_ns": t(&reply, false, true),
                "early_replies": early.len(),
                "messages": rpc.msgs.len(),
            }));
        }
        truth
    }

    /// The congestion-window truth per connection direction, in sender time.
    fn cwnd_truths(&self) -> Vec<Value> {
        let mut truth = Vec::new();
        for (ci, conn) in self.conns.iter().enumerate() {
            for dir in 0..2 {
                let tcp = self.tcp_label(ci, dir);
                for (&t, &(lo, hi, cuts)) in &conn.tx[dir].cwnd_trace {
                    truth.push(json!({
                        "type": "cwnd", "tcp": tcp, "t_ns": t, "min_bytes": lo, "max_bytes": hi, "cuts": cuts,
                    }));
                }
            }
        }
        truth
    }

    /// A message's LNet header fields (or a NOOP's protocol) in its truth record.
    fn header_truth(&self, msg: &Msg, o: &mut Map<String, Value>) {
        if let Some(h) = &msg.hdr {
            o.insert("src_nid".into(), json!(h.src_nid.to_string()));
            o.insert("dst_nid".into(), json!(h.dest_nid.to_string()));
            o.insert("src_pid".into(), json!(h.src_pid));
            o.insert("dst_pid".into(), json!(h.dest_pid));
            o.insert("payload_length".into(), json!(h.payload_length));
            if self.peers[msg.peer].proto >= 2 {
                o.insert("proto".into(), json!(self.peers[msg.peer].proto));
            }
            if msg.zc_cookie != 0 {
                o.insert("zc_req_cookie".into(), json!(hexs(msg.zc_cookie)));
            }
            match h.detail {
                Some(LnetDetail::Put { match_bits, ptl_index, offset, .. }) => {
                    o.insert("portal".into(), json!(ptl_index));
                    o.insert("portal_name".into(), json!(portal_name(ptl_index)));
                    o.insert("match_bits".into(), json!(hexs(match_bits)));
                    o.insert("hdr_data".into(), json!("0x0"));
                    o.insert("put_offset".into(), json!(offset));
                }
                Some(LnetDetail::Get { match_bits, ptl_index, sink_length, .. }) => {
                    o.insert("portal".into(), json!(ptl_index));
                    o.insert("portal_name".into(), json!(portal_name(ptl_index)));
                    o.insert("match_bits".into(), json!(hexs(match_bits)));
                    o.insert("sink_length".into(), json!(sink_length));
                }
                Some(LnetDetail::Ack { match_bits, mlength, .. }) => {
                    o.insert("match_bits".into(), json!(hexs(match_bits)));
                    o.insert("mlength".into(), json!(mlength));
                }
                _ => {}
            }
        } else if msg.kind == "NOOP" {
            o.insert("proto".into(), json!(self.peers[msg.peer].proto));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpanIndex;
    use crate::rng::Rng;

    /// The index against a scan of every span: overlapping spans (retransmissions, TSO
    /// bursts cut differently), spans out of order, offsets inside, between and past them.
    #[test]
    fn span_index_finds_the_earliest_frame_a_scan_finds() {
        let mut rng = Rng::new(7);
        for round in 0..50 {
            let mut all = Vec::new();
            for frame in 1..=200u64 {
                let start = rng.range(0, 19_999);
                let len = rng.range(1, if round % 2 == 0 { 1_500 } else { 9_000 });
                all.push((start, start + len, frame, frame as i64 * 10, rng.range(0, len)));
            }
            let idx = SpanIndex::new(all.clone());
            for _ in 0..500 {
                let off = rng.range(0, 29_999);
                let scan = all
                    .iter()
                    .filter(|s| s.0 <= off && off < s.1)
                    .min_by_key(|s| s.2)
                    .map(|s| (s.2, s.3, off < s.0 + s.4));
                assert_eq!(idx.at(off), scan, "offset {off}");
            }
        }
        assert_eq!(SpanIndex::new(Vec::new()).at(5), None);
    }
}
