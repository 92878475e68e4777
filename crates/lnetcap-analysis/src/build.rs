//! Fills the report model from the pipeline's TCP analysis and the RPC tracker's reports,
//! through lnetcap-model.

use std::collections::BTreeSet;

use lnetcap_lnet::pipeline::{DecodeSummary, Pipeline};
use lnetcap_model::rate::{rate_model, RateInput};
use lnetcap_model::{advise, evaluate, rules, ModelInput};
use lnetcap_rpc::tcp::{bulk_directions, rtt_report, tcp_report, ConnPerfRef, RttReport};
use lnetcap_rpc::{PeerReport, Side};
use lnetcap_tcp::perf::DirPerf;
use lnetcap_tcp::ConnId;

use crate::analysis::AnalysisConfig;
use crate::report::{
    BindingLimit, ConnectionEntry, DirectionEntry, DirectionInterval, DirectionTcp, FitPoint, Fits, IntervalModel,
    ModelReport, PeerEntry, RateReport,
};

/// Fits across the captures' peers (seeds 002 and 003), with two points or more.
pub fn fits(peers: &[PeerEntry]) -> Option<Fits> {
    let points: Vec<FitPoint> = peers
        .iter()
        .filter(|e| e.model.inputs.rtt_s > 0.0 && e.model.inputs.observed > 0.0)
        .map(|e| FitPoint {
            file: e.file.clone(),
            rtt_s: e.model.inputs.rtt_s,
            rpc_bytes: e.model.inputs.bs_bytes,
            rif: e.model.inputs.rif,
            throughput_bytes_per_s: e.model.inputs.observed,
        })
        .collect();
    if points.len() < 2 {
        return None;
    }
    let buf = lnetcap_model::fit_buffer_profile(
        &points.iter().map(|p| (p.rtt_s, p.throughput_bytes_per_s)).collect::<Vec<_>>(),
    );
    let seed003 = |p: &FitPoint| (p.rpc_bytes, p.rif, p.rtt_s, p.throughput_bytes_per_s);
    let base = seed003(&points[0]);
    let rest: Vec<(f64, f64, f64, f64)> = points[1..].iter().map(seed003).collect();
    let k = lnetcap_model::fit_seed003_k(base, &rest);
    Some(Fits {
        points,
        buffer_bytes: buf.map(|b| b.0),
        buffer_fit_error: buf.map(|b| b.1),
        k: k.map(|x| x.0),
        k_fit_error: k.map(|x| x.1),
    })
}

/// The server's own time per RPC, s: the quickest RPC's (so a bound: queueing behind
/// credits or in a busy TCP connection, which a capture cannot tell from work, is left
/// out), with the network round trips it waited for taken out. At the capture
/// point the server's wait (request → bulk start) is one server loop L_s plus its first
/// part of work; bulk end → reply is L_s plus its second part, plus the client loop L_c on
/// reads when the server waited for the bulk's acknowledgement (LNet ACK or zero-copy ACK;
/// taken when that phase is at least 80 % of L_c + L_s, the loops' jitter allowed). None
/// when LNet credits bind (the wait for a credit at the server cannot be told from its
/// work) or the loops are unknown. pb_service_time is whole seconds of the server's clock
/// and at least 1 (Lustre reports max(1, elapsed seconds)), so only a value v > 1 says
/// something: at least v − 1 s.
fn server_time_s(peer: &PeerReport, rtt: &RttReport, reads: bool) -> Option<f64> {
    if peer.messages_in_flight.inferred_peer_credits.is_some() {
        return None;
    }
    let (ls, lc) = (rtt.server_loop_us?, rtt.client_loop_us?);
    let ph = &peer.phases;
    let wait = ph.server_wait_min_us.map(|w| (w - ls).max(0.0));
    let after = ph.server_min_us.map(|v| {
        let acked = reads && ph.server_wait_min_us.is_some() && rules::waited_for_bulk_ack(v, lc, ls);
        (v - ls - if acked { lc } else { 0.0 }).max(0.0)
    });
    if wait.is_none() && after.is_none() {
        return None;
    }
    let s = (wait.unwrap_or(0.0) + after.unwrap_or(0.0)) / 1e6;
    Some(s.max(ph.service_time_s.unwrap_or(0.0) - 1.0))
}

/// Share of the steady window's intervals in which the path held a queue: the far sides'
/// smallest loop `STANDING_QUEUE_SHARE` of the RTT floor above it (`mins`), or the loops on
/// the bulk data twice that above their floor on average (`means`).
fn queued_share(
    mins: &std::collections::BTreeMap<i64, f64>,
    means: &std::collections::BTreeMap<i64, f64>,
    floor_us: f64,
    window: Option<[i64; 2]>,
) -> f64 {
    let Some([a, b]) = window else { return 0.0 };
    if floor_us <= 0.0 {
        return 0.0;
    }
    let share = lnetcap_model::STANDING_QUEUE_SHARE;
    let keys: BTreeSet<i64> = mins.range(a..b).chain(means.range(a..b)).map(|(t, _)| *t).collect();
    let queued = keys
        .iter()
        .filter(|t| {
            mins.get(t).is_some_and(|q| *q >= share * floor_us)
                || means.get(t).is_some_and(|q| *q >= 2.0 * share * floor_us)
        })
        .count();
    if keys.is_empty() {
        0.0
    } else {
        queued as f64 / keys.len() as f64
    }
}

/// The bulk connections were never idle for long: idle (nothing in flight for more than a
/// loop) under a tenth of the pair's active time.
fn bulk_busy(conns: &[ConnPerfRef<'_>], bulk: &[(usize, usize)], peer: &PeerReport) -> bool {
    let span = match (peer.timeseries.first(), peer.timeseries.last()) {
        (Some(a), Some(b)) if b.t_ns > a.t_ns => (b.t_ns - a.t_ns) as f64,
        _ => return false,
    };
    !bulk.is_empty() && bulk.iter().all(|&(ci, d)| (conns[ci].dirs[d].idle_ns as f64) < 0.1 * span)
}

/// The link the model uses, and where it comes from (`link_source`). A `--link-rate` the
/// capture carried more than is not the path's (a veth reports a nominal 10 Gbit/s and
/// carries what the host copies): it is set aside in `link_unused`, never an efficiency
/// above 100 %. A path seen full (`full`) well below the given rate binds at its best rate.
fn choose_link(inp: &mut ModelInput, link_rate: Option<f64>, full: bool, best: f64) -> &'static str {
    let usable = link_rate.filter(|l| rules::within_rate(inp.observed, *l));
    inp.link_unused = link_rate.filter(|l| usable.is_none() || (full && best < rules::FULL_BELOW_LINK * l));
    match (usable, inp.link_unused, full) {
        (Some(l), None, _) => {
            inp.link = Some((l, true));
            "--link-rate"
        }
        (_, _, true) => {
            inp.link = Some((best, false));
            match (usable, link_rate) {
                (Some(_), _) => "best sustained rate (the path was full below --link-rate)",
                (None, Some(_)) => {
                    "best sustained rate (the path was full; --link-rate below the observed rate, not used)"
                }
                (None, None) => "best sustained rate (the path was full)",
            }
        }
        (_, Some(_), false) => "not given (--link-rate below the observed rate, not used)",
        (_, None, false) => "not given",
    }
}

/// Round trips an RPC costs, from the message sequence the capture shows: a read whose
/// reply leaves right behind its bulk data (bulk end → reply well under the client's loop:
/// no zero-copy ACK or LNet ACK awaited) costs one (½ request, ½ bulk and reply); every
/// other bulk RPC seed 000's two.
fn round_trips(peer: &PeerReport, rtt: &RttReport, reads: bool) -> f64 {
    rules::round_trips(reads, peer.phases.server_min_us, peer.phases.server_us, rtt.floor)
}

/// Messages holding their credits are on the wire: k of them put about k × their size in
/// flight. Far less in flight (`flight`, bytes) means the messages queued behind a slower
/// path, whose pace (not a credit limit) kept the count at its ceiling: the inferred credit
/// limit is withdrawn and the evidence says why.
fn unless_in_flight(m: &mut lnetcap_rpc::report::MessagesInFlight, flight: f64, bulk_msg: f64) {
    let Some(k) = m.inferred_peer_credits else { return };
    if !rules::credits_on_wire(flight, k as f64, bulk_msg) {
        m.inferred_peer_credits = None;
        m.evidence = format!(
            "not binding: {} ({:.1} MB in flight at most, under half of {k} × {:.2} MiB: the messages queued behind the path)",
            m.evidence,
            flight / 1e6,
            bulk_msg / rules::LNET_MTU_BYTES
        );
    }
}

/// The per-interval series the interval models read.
struct IntervalInputs<'a> {
    interval_ns: i64,
    /// Loss recovery seen on the pair (congestion control acting throughout).
    loss: bool,
    /// The peer's RTT floor, µs.
    rtt_us: f64,
    cwnd: &'a std::collections::BTreeMap<i64, u64>,
    /// Queue on the path per interval, µs.
    queue: &'a std::collections::BTreeMap<i64, f64>,
    rtt: &'a std::collections::BTreeMap<i64, lnetcap_rpc::tcp::IntervalRtt>,
}

/// The model per time-series interval with bulk traffic: the peer's inputs with the
/// interval's throughput, RPCs in flight, window estimate and queue.
fn interval_models(peer: &PeerReport, inp: &ModelInput, s: &IntervalInputs<'_>) -> Vec<IntervalModel> {
    peer.timeseries
        .iter()
        .filter(|r| r.read_bytes_per_s + r.write_bytes_per_s > 0.0 && r.rpcs_in_flight_mean > 0.0)
        .map(|r| {
            let cw = s.cwnd.get(&r.t_ns).copied();
            // The window opening (slow start, or growth after a cut) by more than a tenth
            // into or out of this interval.
            let opening =
                |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if rules::window_opening(a, b));
            let acting = s.loss
                || opening(s.cwnd.get(&(r.t_ns - s.interval_ns)).copied(), cw)
                || opening(cw, s.cwnd.get(&(r.t_ns + s.interval_ns)).copied());
            let rtt = s.rtt.get(&r.t_ns).copied();
            let model_rtt_us = s.rtt_us + s.queue.get(&r.t_ns).copied().unwrap_or(0.0);
            let i = ModelInput {
                observed: r.read_bytes_per_s + r.write_bytes_per_s,
                rtt_s: model_rtt_us / 1e6,
                rif: r.rpcs_in_flight_mean,
                cwnd_bytes: cw.map(|c| c as f64),
                cwnd_acting: acting,
                ..inp.clone()
            };
            let o = evaluate(&i);
            IntervalModel {
                t_ns: r.t_ns,
                rtt_us: rtt,
                model_rtt_us,
                observed_bytes_per_s: i.observed,
                t_rpc_bytes_per_s: o.t_rpc_bytes_per_s,
                t_model_bytes_per_s: o.t_model_bytes_per_s,
                binding_limit: o.binding_limit,
                cwnd_estimate: cw,
            }
        })
        .collect()
}

/// TCP behaviour and the throughput model for one peer pair.
/// The RPC rate model of a pair without bulk data, in the client's time: the capture
/// point's loop to the server is taken out of the server phase, and where the capture point
/// is not known (no handshake) the rest of the path's round trip (its floor less that loop:
/// the loop to the client as data→ACK samples show it carries delayed ACKs) is added to the
/// latencies and the span, which were taken at the capture point.
fn rate_report(peer: &PeerReport, rtt: &RttReport) -> RateReport {
    let us = |x: Option<f64>| x.unwrap_or(0.0) / 1e6;
    let to_client = match (peer.capture_point.is_some(), rtt.server_loop_us) {
        (true, _) => 0.0,
        (false, Some(_)) => (us(rtt.floor) - us(rtt.server_loop_us)).max(0.0),
        (false, None) => us(rtt.client_loop_us),
    };
    let server = us(peer.phases.server_us);
    let inputs = RateInput {
        rpcs: peer.rpcs,
        span_s: peer.active_window_ns.map_or(0.0, |[a, b]| (b - a) as f64 / 1e9 + to_client),
        latency_s: peer.latency_us.mean.map_or(0.0, |l| l / 1e6 + to_client),
        rtt_s: us(rtt.floor),
        service_s: (server - us(rtt.server_loop_us)).max(0.0),
        service_exact: rtt.server_loop_us.is_some(),
        rif_max: peer.rpcs_in_flight.max,
    };
    RateReport { inputs, out: rate_model(&inputs) }
}

/// The best sustained rate: the largest 1 s mean of the per-interval bulk rate (windows
/// of a third of the active period when that is shorter than 1 s).
fn best_sustained(peer: &PeerReport, interval_ns: i64) -> f64 {
    let rates: Vec<f64> = peer.timeseries.iter().map(|r| r.read_bytes_per_s + r.write_bytes_per_s).collect();
    let span = rules::best_rate_window(interval_ns, peer.timeseries.len());
    rates.windows(span.min(rates.len()).max(1)).map(|w| w.iter().sum::<f64>() / w.len() as f64).fold(0.0, f64::max)
}

pub fn peer_entry(
    pipe: &Pipeline,
    peer: PeerReport,
    peers_of_server: u64,
    cfg: &AnalysisConfig,
    file: &str,
) -> PeerEntry {
    let (link_rate, interval_ns) = (cfg.link_rate, cfg.interval_ns);
    let conns: Vec<ConnPerfRef<'_>> = peer
        .connections
        .iter()
        .filter_map(|c| {
            pipe.tcp_perf(ConnId(c.id)).map(|dirs| ConnPerfRef { dirs, active_is_client: c.active_is_client })
        })
        .collect();
    let rtt = rtt_report(&conns);
    let mut peer = peer;
    // The model's RTT is the path's floor (see RttReport::floor): the median of the loops
    // carries delayed ACKs and application waits (one RPC in flight: twice the path's RTT).
    let rtt_us = rtt.floor.or(peer.handshake_rtt_us).unwrap_or(0.0);
    let reads = peer.bytes_read >= peer.bytes_written;
    let bulk = bulk_directions(&conns, reads);
    let mut tcp = tcp_report(&conns, &bulk, peer.steady_window_ns);
    let rpcs = peer.rpcs + peer.rpcs_partial;
    let bs = if rpcs > 0 { (peer.bytes_read + peer.bytes_written) as f64 / rpcs as f64 } else { 0.0 };
    let best = best_sustained(&peer, interval_ns);
    let bulk_msg = rules::bulk_message_bytes(bs);
    unless_in_flight(&mut peer.messages_in_flight, tcp.cwnd_estimate_max as f64, bulk_msg);
    // Loss recovery (retransmissions that were not spurious) is congestion control acting.
    let loss = tcp.retransmits > tcp.retransmits_spurious;
    let steady_state = rules::steady_state(peer.steady_window_ns, rtt_us);
    let cwnd_iv = lnetcap_rpc::tcp::cwnd_by_interval(&conns, &bulk);
    // The window still opening over the steady window (its last interval's estimate a
    // tenth above its first's) is congestion control acting too.
    let opening_in_steady = peer.steady_window_ns.is_some_and(|[a, b]| {
        let mut r = cwnd_iv.range(a.div_euclid(interval_ns) * interval_ns..b).map(|(_, c)| *c);
        let first = r.next();
        matches!((first, r.next_back()), (Some(f), Some(l)) if rules::window_opening(f, l))
    });
    // A standing queue on the path (the far sides' loops above their floor for most of the
    // steady window) is the positive evidence of a full link.
    let queue_iv = lnetcap_rpc::tcp::queue_by_interval(&conns);
    let queued_share = queued_share(
        &queue_iv,
        &lnetcap_rpc::tcp::bulk_queue_mean_by_interval(&conns, &bulk),
        rtt_us,
        peer.steady_window_ns,
    );
    let mut inp = ModelInput {
        observed: peer.throughput_bytes_per_s,
        rtt_s: rtt_us / 1e6,
        bs_bytes: bs,
        rif: peer.rpcs_in_flight.steady_mean,
        round_trips: round_trips(&peer, &rtt, reads),
        credits: peer.messages_in_flight.inferred_peer_credits.map(|c| (c as f64, bulk_msg)),
        cwnd_bytes: (tcp.cwnd_estimate_mean > 0).then_some(tcp.cwnd_estimate_mean as f64),
        cwnd_acting: loss || opening_in_steady,
        rwnd_bytes: if tcp.rwnd_scale_unknown { None } else { tcp.rwnd_p50.map(|x| x as f64) },
        server_s: server_time_s(&peer, &rtt, reads),
        link: None,
        link_unused: None,
    };
    if lnetcap_model::server_time_refuted(&inp) {
        // Not a bound here, nor in any interval.
        inp.server_s = None;
    }
    let full = steady_state
        && lnetcap_model::path_full(&inp, queued_share, !loss, bulk_busy(&conns, &bulk, &peer))
        && best > 0.0
        && rules::within_rate(inp.observed, best);
    let link_source = choose_link(&mut inp, link_rate, full, best);
    let out = evaluate(&inp);
    tcp.efficiency_loss = out.tcp_efficiency_loss;
    let series = IntervalInputs {
        interval_ns,
        loss,
        rtt_us,
        cwnd: &cwnd_iv,
        queue: &queue_iv,
        rtt: &lnetcap_rpc::tcp::rtt_by_interval(&conns),
    };
    let intervals = interval_models(&peer, &inp, &series);
    let selftest = peer.selftest;
    // A pair without bulk data (metadata, pings) has no throughput to explain.
    let no_bulk = peer.bytes_read + peer.bytes_written == 0;
    // Messages each RPC puts in flight at once: its bulk MDs (4 for a 4 MiB RPC).
    let wanted = f64::from(peer.rpcs_in_flight.max as u32) * (bs / bulk_msg.max(1.0)).round().max(1.0);
    let advice = if no_bulk {
        Vec::new()
    } else {
        advise(&inp, &out, selftest, !reads, wanted, peers_of_server, tcp.retransmitted_share)
    };
    let rate = no_bulk.then(|| rate_report(&peer, &rtt));
    PeerEntry {
        rate,
        file: file.to_string(),
        rtt_us: rtt,
        tcp,
        binding_limit: if no_bulk { BindingLimit::NoBulk } else { BindingLimit::Bound(out.binding_limit) },
        model: ModelReport {
            t_rpc_bytes_per_s: out.t_rpc_bytes_per_s,
            t_model_bytes_per_s: out.t_model_bytes_per_s,
            needed_rif: out.needed_rif,
            efficiency: out.efficiency,
            bounds: out.bounds,
            shares_lost: out.shares_lost,
            inputs: inp,
            best_sustained_bytes_per_s: best,
            link_source,
            steady_state,
        },
        advice,
        intervals,
        peer,
    }
}

/// Every LNet connection of a capture: the decode accounting, the peer pair it belongs to,
/// and its TCP behaviour per direction with the per-interval series (`interval_ns`).
pub fn connection_entries(
    pipe: &Pipeline,
    summary: &DecodeSummary,
    peers: &[PeerReport],
    file: &str,
    interval_ns: i64,
) -> Vec<ConnectionEntry> {
    let per_s = 1e9 / interval_ns.max(1) as f64;
    // Connection id → its peer pair, built once (searching the peers per connection is
    // quadratic when thousands of peers each have a connection).
    let mut owners = std::collections::HashMap::new();
    for p in peers {
        for pc in &p.connections {
            owners.entry(pc.id).or_insert((p, pc));
        }
    }
    summary
        .connections
        .iter()
        .map(|c| {
            let owner = owners.get(&c.id).copied();
            let perf = pipe.tcp_perf(ConnId(c.id));
            let direction = |d: usize| {
                let sender =
                    owner.map(|(_, pc)| if (d == 0) == pc.active_is_client { Side::Client } else { Side::Server });
                let (tcp_perf, series) = match perf {
                    Some(p) => direction_tcp(p[d], p[1 - d], per_s),
                    None => (DirectionTcp::default(), Vec::new()),
                };
                DirectionEntry { sender, stream: c.dirs[d].clone(), tcp_perf, series }
            };
            ConnectionEntry {
                file: file.to_string(),
                id: c.id,
                client_nid: owner.map(|(p, _)| p.client_nid.clone()),
                server_nid: owner.map(|(p, _)| p.server_nid.clone()),
                conn_type: owner.map(|(_, pc)| pc.conn_type),
                type_inferred: owner.is_some_and(|(_, pc)| pc.type_inferred),
                active: c.active.clone(),
                passive: c.passive.clone(),
                active_rule: c.active_rule,
                first_frame: c.first_frame,
                last_frame: c.last_frame,
                directions: [direction(0), direction(1)],
            }
        })
        .collect()
}

/// A direction's TCP summary and series: `p` is its data's analysis (loops are measured on
/// its data; `_rev` is the reverse direction, unused today).
fn direction_tcp(p: &DirPerf, _rev: &DirPerf, per_s: f64) -> (DirectionTcp, Vec<DirectionInterval>) {
    let us = |x: f64| x / 1000.0;
    let s = DirectionTcp {
        payload_bytes: p.payload_bytes,
        data_segments: p.data_segments,
        retransmits: p.retransmits,
        retransmits_fast: p.retransmits_fast,
        retransmits_timeout: p.retransmits_timeout,
        retransmits_spurious: p.retransmits_spurious,
        out_of_order: p.out_of_order,
        dup_acks: p.dup_acks,
        zero_windows: p.zero_windows,
        loop_min_us: p.loops.min().map(us),
        loop_p50_us: p.loops.quantile(0.5).map(us),
        loop_p95_us: p.loops.quantile(0.95).map(us),
        loop_samples: p.loops.count(),
        bytes_in_flight_max: p.inflight_max,
        cwnd_estimate_max: p.flight_series.values().map(|b| b.cwnd).max().unwrap_or(0),
        rcv_wscale: p.rcv_wscale,
        wscale_inferred: p.wscale_inferred,
        idle_ms: p.idle_ns as f64 / 1e6,
    };
    let keys: BTreeSet<i64> =
        p.tx_series.keys().chain(p.flight_series.keys()).chain(p.loop_series.keys()).copied().collect();
    let series = keys
        .into_iter()
        .map(|t| {
            let tx = p.tx_series.get(&t).copied().unwrap_or_default();
            let fl = p.flight_series.get(&t);
            let lp = p.loop_series.get(&t);
            DirectionInterval {
                t_ns: t,
                payload_bytes_per_s: tx.bytes as f64 * per_s,
                retransmits: tx.retransmits,
                bytes_in_flight_max: fl.filter(|b| b.samples > b.recovery).map(|b| b.max_flight),
                cwnd_estimate: fl.filter(|b| b.cwnd > 0).map(|b| b.cwnd),
                rwnd: fl.map(|b| b.rwnd),
                loop_min_us: lp.map(|b| us(b.min as f64)),
                loop_mean_us: lp.filter(|b| b.n > 0).map(|b| us(b.sum as f64 / f64::from(b.n))),
            }
        })
        .collect();
    (s, series)
}
