//! What the tracker tells about each peer pair once the capture is read: RPC counts and
//! latency, RPCs and messages in flight (with the credit limit inferred from their
//! plateau), the capture point, the connections by type, the time series.

use lnetcap_lnet::wire::conn_type;
use lnetcap_tcp::CapturePoint;

use lnetcap_lnet::Nid;

use super::{ConnTrack, PeerState, Tracker, OVERFLOW_PEER};
use crate::report::{
    CapturePointReport, ConnReport, InFlightReport, LatencyReport, MessagesDirection, MessagesInFlight, OpcodeLatency,
    PeerReport, PhaseReport, Side,
};

/// Share of the busy time the messages in flight must sit at their maximum for that maximum
/// to be a credit limit (and more than just below it: a ceiling piles the count up at the
/// maximum, where without one the maximum is the thin end of the distribution).
/// On the real-kernel lab captures, pairs whose messages waited for
/// credits on 23 % or more of their RPCs held it 23–79 % of the time, pairs with fewer
/// waits at most 11 %.
pub const CREDIT_PLATEAU_SHARE: f64 = 0.2;

impl Tracker {
    /// Per-peer reports (call after [`finish`](Self::finish)), sorted by client then server.
    pub fn reports(&self) -> Vec<PeerReport> {
        // Connections by the unordered NID pair their HELLOs named, once (a scan of every
        // connection per peer is quadratic on a server with thousands of clients).
        let mut by_pair: std::collections::HashMap<(Nid, Nid), Vec<u32>> = std::collections::HashMap::new();
        for (id, c) in &self.conns {
            if let [Some(a), Some(b)] = c.nid {
                by_pair.entry(if a <= b { (a, b) } else { (b, a) }).or_default().push(*id);
            }
        }
        self.peers
            .iter()
            .filter(|(k, _)| **k != OVERFLOW_PEER)
            .map(|(_, p)| {
                let key = if p.client <= p.server { (p.client, p.server) } else { (p.server, p.client) };
                self.peer_report(p, by_pair.get(&key).map_or(&[][..], Vec::as_slice))
            })
            .collect()
    }
    pub(super) fn peer_report(&self, p: &PeerState, pair_conns: &[u32]) -> PeerReport {
        let interval = self.cfg.interval_ns;
        let window = match (p.first_ns, p.last_ns) {
            (Some(a), Some(b)) if b > a => {
                let fifth = (b - a) / 5;
                Some([a + fifth, b - fifth])
            }
            _ => None,
        };
        let throughput = window.map_or(0.0, |[a, b]| self.window_bytes(p, a, b) as f64 / ((b - a) as f64 / 1e9));
        let mut ids: Vec<u32> = p.conns.iter().chain(pair_conns).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut conns: Vec<ConnReport> = ids
            .iter()
            .filter_map(|id| self.conns.get(id).map(|c| (id, c)))
            .map(|(id, c)| {
                let (t, inferred) = conn_type_of(c);
                let active_is_client = c.active_is_client.unwrap_or(c.nid[0] == Some(p.client));
                ConnReport {
                    id: *id,
                    tcp: c.tcp.map(|[a, b]| format!("{a}->{b}")).unwrap_or_default(),
                    conn_type: conn_type::name(t),
                    type_inferred: inferred,
                    active_is_client,
                }
            })
            .collect();
        conns.sort_by_key(|c| c.id);
        let cps: Vec<(CapturePoint, bool)> =
            conns.iter().filter_map(|c| self.capture_points.get(&c.id).map(|cp| (*cp, c.active_is_client))).collect();
        let rtt = cps.iter().map(|(cp, _)| cp.rtt_ns()).min().map(|n| n as f64 / 1000.0);
        let capture_point = capture_point_report(&cps);
        let dirs = p.messages_directions();
        // Request → bulk start: where a server waits for a credit to send its bulk
        // (bulk end → reply includes the inherent ZC-ACK / LNet ACK round trip).
        let mds = if p.rpcs > 0 { ((p.bulk_msgs as f64 / p.rpcs as f64).round() as u64).max(1) } else { 1 };
        // Bulk the server sends (reads) waits at the server for a credit: the slowest
        // tenth of the RPCs start their bulk a tenth of a round trip or more after
        // their request arrived (lab: 11 % of the RPCs of 12 RPCs on 8 credits at
        // 40 ms; the simulator's 8 RPCs on 8 credits: 7 %, in the first round).
        let wait_floor = rtt.map_or(1000.0, |r| (0.1 * r).max(1000.0));
        let server_waits = p.phase[1].quantile(0.9).map(|w| w >= wait_floor);
        let messages_in_flight = credit_inference(dirs, p.rif.max, mds, p.rpcs + p.partial, server_waits);
        let series = p.series(interval);
        PeerReport {
            client_nid: p.client.to_string(),
            server_nid: p.server.to_string(),
            connections: conns,
            handshake_rtt_us: rtt,
            capture_point,
            rpcs: p.rpcs,
            rpcs_partial: p.partial,
            missing: p.missing.clone(),
            rpcs_by_opcode: p.by_opc.iter().map(|(k, n)| (k.clone(), *n)).collect(),
            selftest: p.selftest,
            bytes_read: p.bytes_read,
            bytes_written: p.bytes_written,
            throughput_bytes_per_s: throughput,
            steady_window_ns: window,
            active_window_ns: p.first_ns.zip(p.last_ns).map(|(a, b)| [a, b]),
            latency_by_opcode: p
                .opc_latency
                .iter()
                .map(|(k, (l, sv))| {
                    (
                        k.clone(),
                        OpcodeLatency {
                            rpcs: l.count(),
                            mean_us: l.mean(),
                            p50_us: l.quantile(0.5),
                            p95_us: l.quantile(0.95),
                            server_mean_us: sv.mean(),
                        },
                    )
                })
                .collect(),
            rpcs_in_flight: InFlightReport {
                mean: p.rif.mean(),
                max: p.rif.max,
                histogram: p.rif.at_increase.clone(),
                steady_mean: window.map_or(0.0, |[a, b]| p.rif.mean_between(a, b)),
            },
            messages_in_flight,
            latency_us: LatencyReport {
                p50: p.latency.quantile(0.5),
                p95: p.latency.quantile(0.95),
                p99: p.latency.quantile(0.99),
                max: p.latency.max(),
                mean: p.latency.mean(),
                histogram: p.latency_hist.clone(),
            },
            pages_per_rpc: p.pages.clone(),
            phases: PhaseReport {
                request_us: p.phase[0].mean(),
                server_wait_us: p.phase[1].mean(),
                bulk_us: p.phase[2].mean(),
                server_us: p.phase[3].mean(),
                reply_us: p.phase[4].mean(),
                service_time_s: p.service.mean(),
                server_wait_min_us: p.phase[1].min(),
                server_min_us: p.phase[3].min(),
            },
            timeseries: series,
        }
    }
    /// Bulk bytes of RPCs that completed in [a, b), counted exactly at interval resolution
    /// plus the partial intervals at the edges prorated (the per-RPC list is not kept).
    fn window_bytes(&self, p: &PeerState, a: i64, b: i64) -> u64 {
        let iv = self.cfg.interval_ns;
        let mut total = 0f64;
        for (&idx, c) in p.completed.range(a.div_euclid(iv)..=b.div_euclid(iv)) {
            let (s, e) = (idx * iv, (idx + 1) * iv);
            let overlap = (e.min(b) - s.max(a)).max(0) as f64 / iv as f64;
            total += (c.0 + c.1) as f64 * overlap;
        }
        total.round() as u64
    }
    /// Bulk bytes of RPCs completed (reply last byte) in [a, b), for a given peer, at the
    /// tracker's interval resolution (exact when a and b fall on interval boundaries).
    pub fn bytes_completed_between(&self, client: &str, server: &str, a: i64, b: i64) -> Option<u64> {
        let p = self.peers.values().find(|p| p.client.to_string() == client && p.server.to_string() == server)?;
        Some(self.window_bytes(p, a, b))
    }
}

/// Where the capture was taken, from the connection with the smallest handshake RTT.
fn capture_point_report(cps: &[(CapturePoint, bool)]) -> Option<CapturePointReport> {
    cps.iter().min_by_key(|(cp, _)| cp.rtt_ns()).map(|(cp, active_is_client)| {
        let (c, s) = if *active_is_client {
            (cp.active_owd_ns, cp.passive_owd_ns)
        } else {
            (cp.passive_owd_ns, cp.active_owd_ns)
        };
        let rtt = (2 * (c + s)).max(1) as f64;
        let side = if 2.0 * c as f64 <= 0.1 * rtt {
            Side::Client
        } else if 2.0 * s as f64 <= 0.1 * rtt {
            Side::Server
        } else {
            Side::Middle
        };
        CapturePointReport { client_one_way_us: c as f64 / 1000.0, server_one_way_us: s as f64 / 1000.0, side }
    })
}

/// Connection type from the active side's point of view, and whether it was inferred.
fn conn_type_of(c: &ConnTrack) -> (u32, bool) {
    if let Some(t) = c.hello_type[0] {
        return (t, false);
    }
    if let Some(t) = c.hello_type[1] {
        let inv = match t {
            conn_type::BULK_IN => conn_type::BULK_OUT,
            conn_type::BULK_OUT => conn_type::BULK_IN,
            t => t,
        };
        return (inv, false);
    }
    // From the traffic (socklnd V3 rules, wire-format.md §2.8): large LNet messages from a
    // side go on its BULK_OUT; the other direction of a bulk connection carries only NOOPs.
    let t = if c.large[0] > 0 && c.small[0] == 0 && c.small[1] == 0 && c.large[1] == 0 {
        conn_type::BULK_OUT
    } else if c.large[1] > 0 && c.small[1] == 0 && c.small[0] == 0 && c.large[0] == 0 {
        conn_type::BULK_IN
    } else if c.small[0] + c.small[1] > 0 {
        conn_type::CONTROL
    } else if c.noop[0] > 0 && c.noop[1] == 0 {
        conn_type::BULK_IN
    } else if c.noop[1] > 0 && c.noop[0] == 0 {
        conn_type::BULK_OUT
    } else {
        conn_type::ANY
    };
    (t, true)
}

/// Infers the peer_credits limit from the messages in flight per direction: a direction
/// whose messages reach a ceiling below what the open RPCs would put in flight
/// (`rif_max` × `mds` bulk messages each) and sit at it for a real share of the busy time
/// is held by credits. `rpcs` and `mds` (bulk messages per RPC) say how many messages the
/// direction should have shown: where most were not seen (lost headers), nothing is
/// inferred.
///
/// For bulk the server sends (direction 1), `server_waits` says whether a tenth of the RPCs'
/// bulk started well after their request reached the server (None: not measured); a ceiling with
/// every bulk leaving at once is the RPC window's own rhythm, not a credit limit.
fn credit_inference(
    dirs: Vec<MessagesDirection>,
    rif_max: i64,
    mds: u64,
    rpcs: u64,
    server_waits: Option<bool>,
) -> MessagesInFlight {
    let max = dirs.iter().map(|d| d.max).max().unwrap_or(0);
    let wanted = rif_max.saturating_mul(mds.max(1) as i64);
    let best = dirs.iter().filter(|d| d.max > 0).max_by(|a, b| a.time_at_max.total_cmp(&b.time_at_max));
    let per_rpc = |_: &MessagesDirection| if mds > 1 { format!(" × {mds} bulk messages each") } else { String::new() };
    let (inferred, evidence) = match best {
        Some(d) if wanted <= d.max => (
            None,
            format!("not reached: the RPCs in flight (max {rif_max}{}) never asked for more than the LNet messages in flight (max {})", per_rpc(d), d.max),
        ),
        Some(d) if 2 * d.messages < rpcs => (
            None,
            format!(
                "unknown: {} messages seen from {} for {rpcs} RPCs (headers lost or cut by the snaplen), too few to show a credit limit",
                d.messages, d.from
            ),
        ),
        Some(d) if 3 * d.max > 2 * wanted => (
            None,
            format!(
                "not binding: at most {} messages in flight for up to {wanted} wanted at once; an RPC window without a credit limit peaks there too (each bulk holds its credit for one of the RPC's two round trips), a credit limit shows as a ceiling at most two thirds of what is wanted",
                d.max
            ),
        ),
        Some(d) if d.max < 2 => (
            None,
            format!("no plateau: at most one message in flight from {} at a time is a lone message, not a credit limit", d.from),
        ),
        Some(d) if d.zero_copy == 0 => (
            None,
            format!(
                "not shown: no message from {} asked for a zero-copy ACK, so each returns its credit when its last byte is sent and the messages in flight cannot show a credit limit",
                d.from
            ),
        ),
        Some(d) if d.from == dirs[1].from && server_waits == Some(false) => (
            None,
            format!(
                "not binding: {} messages in flight at most, but every RPC's bulk left the server within a tenth of a round trip of its request",
                d.max
            ),
        ),
        Some(d) if d.time_at_max >= CREDIT_PLATEAU_SHARE && d.time_at_max >= d.time_below_max => (
            Some(d.max),
            format!(
                "{} → {}: at most {} LNet messages in flight, held for {:.0}% of the busy time while up to {rif_max} RPCs{} were in flight: messages waited for credits",
                d.from,
                d.to,
                d.max,
                d.time_at_max * 100.0,
                per_rpc(d)
            ),
        ),
        Some(d) => (
            None,
            format!(
                "no plateau: the maximum of {} messages in flight was held for {:.0}% of the busy time and one less for {:.0}% (a ceiling holds the count at its maximum at least {:.0}% of the time and more than just below it)",
                d.max,
                d.time_at_max * 100.0,
                d.time_below_max * 100.0,
                CREDIT_PLATEAU_SHARE * 100.0
            ),
        ),
        None if dirs.iter().any(|d| d.messages > 0) => (
            None,
            "not binding: no LNet message stayed in flight for 10 µs or more (each left for the socket at once; without zero copy a message is in flight only while it is written)".into(),
        ),
        None => (None, "no LNet messages between the pair".into()),
    };
    MessagesInFlight { max, inferred_peer_credits: inferred, evidence, directions: dirs }
}
