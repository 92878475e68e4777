//! A peer pair's TCP behaviour, summarised from its connections' per-direction statistics.

use lnetcap_tcp::perf::{median, DirPerf};
use serde::Serialize;

use crate::report::Side;
use crate::stats::Quantiles;

/// TCP behaviour of a peer pair.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TcpPeerReport {
    /// Retransmitted segments (all connections, both directions).
    pub retransmits: u64,
    /// ... after 3 duplicate ACKs.
    pub retransmits_fast: u64,
    /// ... after a silence (timeout).
    pub retransmits_timeout: u64,
    /// ... of data already acknowledged.
    pub retransmits_spurious: u64,
    /// Share of bulk payload bytes sent again.
    pub retransmitted_share: f64,
    /// Duplicate ACKs.
    pub dup_acks: u64,
    /// Zero-window advertisements.
    pub zero_windows: u64,
    /// Largest bytes in flight of one bulk direction (sender's view).
    pub bytes_in_flight_max: u64,
    /// Congestion window estimate: the largest per-RTT envelope of bytes in flight, summed
    /// over the connections carrying bulk in the main direction.
    pub cwnd_estimate_max: u64,
    /// Median of the per-RTT envelopes in the steady window.
    pub cwnd_estimate_p50: u64,
    /// Their mean (what the model uses: a window cut by losses and grown again carries, on
    /// average, its mean per round trip, which the median of a skewed series understates).
    pub cwnd_estimate_mean: u64,
    /// Median advertised receive window in the steady window, summed likewise (bytes).
    pub rwnd_p50: Option<u64>,
    /// Window scaling was not captured (windows are raw).
    pub rwnd_scale_unknown: bool,
    /// Share of the model throughput lost to TCP (filled in by the model).
    pub efficiency_loss: f64,
    /// Time with nothing in flight for more than a round trip, ms.
    pub idle_ms: f64,
}

/// RTT of a peer pair from its connections' loop samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RttReport {
    /// Smallest RTT: sum of the smallest loop on each side, µs.
    pub min: Option<f64>,
    /// Median RTT: sum of the median loops, µs. Delayed ACKs and a receiver that holds its
    /// ACK until it answers (one RPC in flight) pull it up.
    pub p50: Option<f64>,
    /// The path's RTT floor, what the model uses, µs: per side, the smaller of its loops' 1st
    /// percentile and the median of its per-interval minima, summed. Every side has prompt
    /// samples somewhere in a capture (bulk ACKed every second segment, the handshake, the
    /// first exchanges) while its delayed ones are late by tens of ms; the percentile and the
    /// median leave out the few packets a path delivers early, and the interval minima the
    /// samples queued behind a burst (4 MiB RPCs fill the path's buffers every round trip).
    /// A standing queue does not raise it: the per-interval RTT does.
    pub floor: Option<f64>,
    /// Loop between the capture point and the client (µs, median).
    pub client_loop_us: Option<f64>,
    /// Loop between the capture point and the server (µs, median).
    pub server_loop_us: Option<f64>,
    /// Where the capture point seems to be: `client`, `server`, `middle`.
    pub capture_side: Option<Side>,
    /// Samples used.
    pub samples: usize,
}

/// The quantile of a side's loops taken as its floor (see [`RttReport::floor`]).
pub const FLOOR_QUANTILE: f64 = 0.01;

/// One connection's two directions, with which side sends bulk data and which is the
/// client: (perf, client sends on dir 0, carries bulk).
pub struct ConnPerfRef<'a> {
    /// Direction 0 (from the active side), direction 1.
    pub dirs: [&'a DirPerf; 2],
    /// The active side is the client.
    pub active_is_client: bool,
}

/// Summarises RTT from all connections of a pair: the client-side loop is measured on data
/// the server sends (the client acknowledges it), the server-side loop on data the client
/// sends.
pub fn rtt_report(conns: &[ConnPerfRef<'_>]) -> RttReport {
    let (client_loop, server_loop) = loops_by_side(conns);
    let med = |q: &Quantiles| q.quantile(0.5).map(|x| x as i64);
    let (cm, sm) = (med(&client_loop), med(&server_loop));
    let (cmin, smin) = (client_loop.min().map(|x| x as i64), server_loop.min().map(|x| x as i64));
    let iv = interval_mins_by_side(conns);
    let low = |q: &Quantiles, side: usize| {
        let p = q.quantile(FLOOR_QUANTILE).map(|x| x as i64);
        let mins: Vec<i64> = iv[side].values().copied().collect();
        match (p, median(&mins)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    };
    let us = |x: i64| x as f64 / 1000.0;
    let side = match (cm, sm) {
        (Some(c), Some(s)) => {
            let rtt = (c + s).max(1) as f64;
            Some(if (c as f64) < 0.1 * rtt {
                Side::Client
            } else if (s as f64) < 0.1 * rtt {
                Side::Server
            } else {
                Side::Middle
            })
        }
        _ => None,
    };
    RttReport {
        min: cmin.zip(smin).map(|(a, b)| us(a + b)),
        p50: cm.zip(sm).map(|(a, b)| us(a + b)),
        floor: low(&client_loop, 0).zip(low(&server_loop, 1)).map(|(a, b)| us(a + b)),
        client_loop_us: cm.map(us),
        server_loop_us: sm.map(us),
        capture_side: side,
        samples: (client_loop.count() + server_loop.count()) as usize,
    }
}

/// Per side (client, server): the smallest loop of each series interval.
fn interval_mins_by_side(conns: &[ConnPerfRef<'_>]) -> [std::collections::BTreeMap<i64, i64>; 2] {
    let mut out: [std::collections::BTreeMap<i64, i64>; 2] = Default::default();
    for c in conns {
        for (d, dir) in c.dirs.iter().enumerate() {
            // Data of direction 0 is acknowledged by the passive side; its loop is that side's.
            let side = usize::from((d == 0) == c.active_is_client);
            for (&t, b) in dir.loop_series.iter().filter(|(_, b)| b.n > 0) {
                let m = out[side].entry(t).or_insert(i64::MAX);
                *m = (*m).min(b.min);
            }
        }
    }
    out
}

/// (client-side loops, server-side loops) over all connections of a pair.
fn loops_by_side(conns: &[ConnPerfRef<'_>]) -> (Quantiles, Quantiles) {
    let (mut client_loop, mut server_loop) = (Quantiles::default(), Quantiles::default());
    for c in conns {
        // Direction 0 is from the active side: its receiver is the passive side.
        let (to_passive, to_active) = (&c.dirs[0].loops, &c.dirs[1].loops);
        if c.active_is_client {
            server_loop.merge(to_passive);
            client_loop.merge(to_active);
        } else {
            client_loop.merge(to_passive);
            server_loop.merge(to_active);
        }
    }
    (client_loop, server_loop)
}

/// RTT of one series interval, µs: each side's loop in the interval, summed (a side
/// without samples in the interval counts with its value over the whole capture).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IntervalRtt {
    /// Smallest loops summed: the path's RTT plus any standing queue in the interval.
    pub min_us: f64,
    /// Mean loops summed (delayed ACKs and bursts pull it up).
    pub mean_us: f64,
}

/// RTT per series interval, for the intervals with samples on at least one side.
pub fn rtt_by_interval(conns: &[ConnPerfRef<'_>]) -> std::collections::BTreeMap<i64, IntervalRtt> {
    let (client_all, server_all) = loops_by_side(conns);
    // interval → per side (client, server): (min, sum, n)
    let mut acc: std::collections::BTreeMap<i64, [(i64, i64, u64); 2]> = std::collections::BTreeMap::new();
    for c in conns {
        for (d, dir) in c.dirs.iter().enumerate() {
            // Data of direction 0 is acknowledged by the passive side.
            let side = usize::from((d == 0) == c.active_is_client);
            for (&t, b) in &dir.loop_series {
                let e = &mut acc.entry(t).or_insert([(i64::MAX, 0, 0); 2])[side];
                e.0 = e.0.min(b.min);
                e.1 += b.sum;
                e.2 += u64::from(b.n);
            }
        }
    }
    let all = [&client_all, &server_all];
    acc.into_iter()
        .filter_map(|(t, sides)| {
            let (mut min, mut mean) = (0.0, 0.0);
            for (k, &(lo, sum, n)) in sides.iter().enumerate() {
                if n > 0 {
                    min += lo as f64;
                    mean += sum as f64 / n as f64;
                } else {
                    min += all[k].min()?;
                    mean += all[k].quantile(0.5)?;
                }
            }
            Some((t, IntervalRtt { min_us: min / 1000.0, mean_us: mean / 1000.0 }))
        })
        .collect()
}

/// Summarises TCP behaviour. `bulk_dirs` are (connection index, direction) that carry the
/// pair's main bulk flow; `window` is the steady window.
pub fn tcp_report(conns: &[ConnPerfRef<'_>], bulk_dirs: &[(usize, usize)], window: Option<[i64; 2]>) -> TcpPeerReport {
    let mut r = TcpPeerReport::default();
    let (mut bytes_sent, mut retrans) = (0u64, 0u64);
    for c in conns {
        for d in c.dirs {
            r.retransmits += d.retransmits;
            r.retransmits_fast += d.retransmits_fast;
            r.retransmits_timeout += d.retransmits_timeout;
            r.retransmits_spurious += d.retransmits_spurious;
            r.dup_acks += d.dup_acks;
            r.zero_windows += d.zero_windows;
            r.idle_ms += d.idle_ns as f64 / 1e6;
        }
    }
    // Per series interval, summed over the bulk directions: the largest flight outside
    // loss recovery, and the last receive window.
    let mut env_sum: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    let mut rwnd: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    for &(ci, d) in bulk_dirs {
        let p = conns[ci].dirs[d];
        r.bytes_in_flight_max = r.bytes_in_flight_max.max(p.inflight_max);
        r.rwnd_scale_unknown |= p.wscale_inferred || p.rcv_wscale.is_none();
        bytes_sent += p.payload_bytes;
        retrans += p.bytes_retransmitted;
        for (&t, b) in &p.flight_series {
            if b.max_flight > 0 {
                *env_sum.entry(t).or_default() += b.max_flight;
            }
            *rwnd.entry(t).or_default() += b.rwnd;
        }
    }
    let in_window = |t: &i64| window.is_none_or(|[a, b]| *t >= a && *t < b);
    r.cwnd_estimate_max = env_sum.values().copied().max().unwrap_or(0);
    let mut env: Vec<i64> = env_sum.iter().filter(|(t, _)| in_window(t)).map(|(_, f)| *f as i64).collect();
    if env.is_empty() {
        env = env_sum.values().map(|f| *f as i64).collect();
    }
    r.cwnd_estimate_p50 = median(&env).unwrap_or(0) as u64;
    r.cwnd_estimate_mean = if env.is_empty() { 0 } else { (env.iter().sum::<i64>() / env.len() as i64) as u64 };
    let rw: Vec<i64> = rwnd.iter().filter(|(t, _)| in_window(t)).map(|(_, x)| *x as i64).collect();
    r.rwnd_p50 = median(&rw).map(|x| x as u64);
    r.retransmitted_share = if bytes_sent > 0 { retrans as f64 / bytes_sent as f64 } else { 0.0 };
    r
}

/// The directions that carry a pair's bulk in its main direction: (connection index,
/// direction) of every connection direction from the bulk sender with at least a tenth of
/// the bytes. `server_sends`: bulk flows server → client (reads).
pub fn bulk_directions(conns: &[ConnPerfRef<'_>], server_sends: bool) -> Vec<(usize, usize)> {
    let dir_of = |c: &ConnPerfRef<'_>| usize::from(c.active_is_client == server_sends);
    let total: u64 = conns.iter().map(|c| c.dirs[dir_of(c)].payload_bytes).sum();
    conns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.dirs[dir_of(c)].payload_bytes * 10 >= total && total > 0)
        .map(|(i, c)| (i, dir_of(c)))
        .collect()
}

/// Congestion-window estimate per series interval, summed over the bulk directions: each
/// direction's largest flight since its last loss recovery or idle restart
/// (`lnetcap_tcp::perf::CwndHeld`), at its largest within the interval. Intervals where a
/// direction was in loss recovery throughout count without it.
pub fn cwnd_by_interval(
    conns: &[ConnPerfRef<'_>],
    bulk_dirs: &[(usize, usize)],
) -> std::collections::BTreeMap<i64, u64> {
    let mut out = std::collections::BTreeMap::new();
    for &(ci, d) in bulk_dirs {
        for (&t, b) in &conns[ci].dirs[d].flight_series {
            if b.cwnd > 0 {
                *out.entry(t).or_default() += b.cwnd;
            }
        }
    }
    out
}

/// A standing queue per series interval, µs: how far each far side's loop (the side with
/// a path between it and the capture point) rose above its floor in the interval, summed.
/// A queue sits on a path; the loop to a side at the capture point has none, and only an
/// application holding its ACK (one RPC in flight: the server ACKs the request with its
/// reply) or a delayed-ACK timer makes it long, so near sides are left out.
pub fn queue_by_interval(conns: &[ConnPerfRef<'_>]) -> std::collections::BTreeMap<i64, f64> {
    let (client_all, server_all) = loops_by_side(conns);
    let floors = [client_all.quantile(FLOOR_QUANTILE), server_all.quantile(FLOOR_QUANTILE)];
    let [Some(fc), Some(fs)] = floors else { return Default::default() };
    let floor = [fc, fs];
    let mins = interval_mins_by_side(conns);
    let mut out = std::collections::BTreeMap::new();
    for side in (0..2).filter(|&k| floor[k] >= 0.1 * (fc + fs)) {
        for (&t, &m) in &mins[side] {
            *out.entry(t).or_insert(0.0) += (m as f64 - floor[side]).max(0.0) / 1000.0;
        }
    }
    out
}

/// Per series interval, the rise of the mean loop measured on the bulk data above the
/// floor of those loops, µs. Bulk data is acknowledged every second segment, so its loops
/// are prompt: a mean well above their floor is a queue that builds and drains within the
/// interval (a burst of RPCs through a slower link), which the interval's minimum misses.
pub fn bulk_queue_mean_by_interval(
    conns: &[ConnPerfRef<'_>],
    bulk_dirs: &[(usize, usize)],
) -> std::collections::BTreeMap<i64, f64> {
    let mut all = Quantiles::default();
    let mut acc: std::collections::BTreeMap<i64, (i64, u64)> = std::collections::BTreeMap::new();
    for &(ci, d) in bulk_dirs {
        let p = conns[ci].dirs[d];
        all.merge(&p.loops);
        for (&t, b) in &p.loop_series {
            let e = acc.entry(t).or_default();
            e.0 += b.sum;
            e.1 += u64::from(b.n);
        }
    }
    let Some(floor) = all.quantile(FLOOR_QUANTILE) else { return Default::default() };
    acc.into_iter()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(t, (sum, n))| (t, (sum as f64 / n as f64 - floor).max(0.0) / 1000.0))
        .collect()
}

/// Loop samples each direction needs before [`capture_point_from_loops`] trusts them.
pub const CAPTURE_POINT_MIN_LOOPS: u64 = 16;

/// The capture point of a connection whose handshake was not captured (a capture started
/// mid-stream): each side's one-way delay is half the floor of the loop measured on the data
/// it receives (direction 0's data is received by the passive side). The floor, not the
/// median: a receiver that holds its ACKs makes the median long.
pub fn capture_point_from_loops(dirs: [&DirPerf; 2]) -> Option<lnetcap_tcp::CapturePoint> {
    if dirs.iter().any(|d| d.loops.count() < CAPTURE_POINT_MIN_LOOPS) {
        return None;
    }
    let passive = dirs[0].loops.quantile(FLOOR_QUANTILE)?;
    let active = dirs[1].loops.quantile(FLOOR_QUANTILE)?;
    Some(lnetcap_tcp::CapturePoint { active_owd_ns: (active / 2.0) as i64, passive_owd_ns: (passive / 2.0) as i64 })
}
