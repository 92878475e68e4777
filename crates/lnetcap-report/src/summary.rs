//! The terminal summary.

use std::io::{Result, Write};

use crate::fmt::{bytes, ms};
use lnetcap_analysis::report::{PeerEntry, Report};
use lnetcap_model::Limit;

/// A pair without bulk data: its RPC rate against RIF / (RTT + service), the latency split
/// and the latency per opcode.
fn print_rate(out: &mut impl Write, e: &PeerEntry) -> Result<()> {
    writeln!(out, "  observed vs model: no bulk traffic, so the question is the RPC rate")?;
    let Some(r) = &e.rate else { return Ok(()) };
    let (i, o) = (&r.inputs, &r.out);
    let us = |s: f64| ms(Some(s * 1e6));
    if o.rpcs_per_s > 0.0 {
        writeln!(
            out,
            "    rate         {} complete RPCs at {:.0} RPCs/s over {}; RPCs in flight {:.2} mean (rate × latency), max {}",
            i.rpcs,
            o.rpcs_per_s,
            us(i.span_s),
            o.rif_mean,
            i.rif_max
        )?;
    }
    if i.latency_s > 0.0 {
        writeln!(
            out,
            "    latency      {} = round trip {} ({:.0} %) + server {}{} ({:.0} %) + other {} ({:.0} %)",
            us(i.latency_s),
            us(i.rtt_s),
            o.rtt_share * 100.0,
            if i.service_exact { "" } else { "≤ " },
            us(i.service_s),
            o.service_share * 100.0,
            us((i.latency_s - i.rtt_s - i.service_s).max(0.0)),
            o.other_share * 100.0
        )?;
    }
    if o.model_rpcs_per_s > 0.0 {
        writeln!(
            out,
            "    model        RIF / (RTT + service) = {:.2} / {} = {:.0} RPCs/s; observed {:.0} % of it",
            o.rif_mean,
            us(i.rtt_s + i.service_s),
            o.model_rpcs_per_s,
            o.efficiency * 100.0
        )?;
    }
    writeln!(out, "    binding      {}: {}", o.binding, o.why)?;
    let ops: Vec<String> = e
        .peer
        .latency_by_opcode
        .iter()
        .map(|(k, l)| format!("{k} {}: mean {}, server {}", l.rpcs, ms(l.mean_us), ms(l.server_mean_us)))
        .collect();
    if !ops.is_empty() {
        writeln!(out, "    by opcode    {}", ops.join("; "))?;
    }
    Ok(())
}

fn print_model(out: &mut impl Write, e: &PeerEntry) -> Result<()> {
    let m = &e.model;
    let r = &e.rtt_us;
    if e.binding_limit == lnetcap_analysis::BindingLimit::NoBulk {
        return print_rate(out, e);
    }
    writeln!(
        out,
        "  observed vs model{}",
        if m.steady_state {
            ""
        } else {
            "  (caution: the steady window is shorter than 10 round trips; slow start and ramp-up weigh on every number)"
        }
    )?;
    writeln!(
        out,
        "    RTT          {} (the path's floor, rtt_us.floor; median {}, min {}; capture point near the {}: client loop {}, server loop {})",
        ms(r.floor),
        ms(r.p50),
        ms(r.min),
        r.capture_side.map_or("?", |s| s.as_str()),
        ms(r.client_loop_us),
        ms(r.server_loop_us)
    )?;
    let t = &e.tcp;
    writeln!(
        out,
        "    TCP          {} retransmits ({} fast, {} timeout, {} spurious; {:.2} % of bulk bytes), bytes in flight max {}, cwnd estimate {} (max {}), receive window {}",
        t.retransmits,
        t.retransmits_fast,
        t.retransmits_timeout,
        t.retransmits_spurious,
        t.retransmitted_share * 100.0,
        bytes(t.bytes_in_flight_max as f64),
        bytes(t.cwnd_estimate_p50 as f64),
        bytes(t.cwnd_estimate_max as f64),
        t.rwnd_p50.map_or("unknown (no SYN)".into(), |w| bytes(w as f64))
    )?;
    writeln!(
        out,
        "    T_rpc        RIF {:.1} × {} / ({} × {}) = {}/s{}",
        m.inputs.rif,
        bytes(m.inputs.bs_bytes),
        m.inputs.trips(),
        ms(Some(m.inputs.rtt_s * 1e6)),
        bytes(m.t_rpc_bytes_per_s),
        if m.inputs.trips() < 2.0 {
            "  (one round trip per RPC: each reply left right behind its bulk data, no acknowledgement awaited)"
        } else {
            ""
        }
    )?;
    let b: Vec<String> = m.bounds.iter().map(|b| format!("{} {}/s", b.limit.as_str(), bytes(b.bytes_per_s))).collect();
    writeln!(out, "    bounds       {}", b.join(" < "))?;
    writeln!(
        out,
        "    observed     {}/s = {:.0} % of the model; binding limit: {}{}",
        bytes(m.inputs.observed),
        m.efficiency * 100.0,
        e.binding_limit,
        match m.link_source {
            "not given" => format!(" (link not given; best 1 s rate seen {}/s)", bytes(m.best_sustained_bytes_per_s)),
            "--link-rate" => String::new(),
            s if s.starts_with("not given") => {
                format!(" (link {s}; best 1 s rate seen {}/s)", bytes(m.best_sustained_bytes_per_s))
            }
            other => format!(" (link: {other}, {}/s)", bytes(m.best_sustained_bytes_per_s)),
        }
    )?;
    let (name, reference) = match m.inputs.link {
        Some((l, true)) => ("the link", l),
        Some((l, false)) => ("the path's best rate", l),
        None => ("T_rpc", m.t_rpc_bytes_per_s),
    };
    if reference > 0.0 && reference.is_finite() {
        let parts: Vec<String> =
            m.shares_lost.iter().map(|s| format!("{} {:.1} %", s.limit, s.share * 100.0)).collect();
        writeln!(
            out,
            "    lost         {} of {name} {}/s; {:.1} % reached",
            if parts.is_empty() { "nothing".into() } else { parts.join(", ") },
            bytes(reference),
            100.0 * m.inputs.observed / reference
        )?;
    }
    if let Some(line) = limit_over_time(e) {
        writeln!(out, "    over time    {line}")?;
    }
    for a in &e.advice {
        writeln!(out, "    advice       {} = {}: {}", a.setting, a.value, a.reason)?;
        writeln!(out, "                 $ {}", a.command)?;
    }
    Ok(())
}

/// The binding limit over time, as runs of consecutive intervals with bulk traffic:
/// `tcp_congestion 0.0-0.3 s, lnet_credits 0.3-3.0 s` (seconds from the peer's first
/// interval). None when one limit binds throughout.
fn limit_over_time(e: &PeerEntry) -> Option<String> {
    const SHOWN: usize = 6;
    let iv = &e.intervals;
    let t0 = e.peer.timeseries.first()?.t_ns;
    let step = match e.peer.timeseries.as_slice() {
        [a, b, ..] => b.t_ns - a.t_ns,
        _ => return None,
    };
    let mut runs: Vec<(Limit, i64, i64)> = Vec::new();
    for i in iv {
        match runs.last_mut() {
            Some(r) if r.0 == i.binding_limit && r.2 == i.t_ns => r.2 = i.t_ns + step,
            _ => runs.push((i.binding_limit, i.t_ns, i.t_ns + step)),
        }
    }
    if runs.iter().all(|r| Some(r.0) == e.binding_limit.limit()) {
        return None;
    }
    let s = |t: i64| (t - t0) as f64 / 1e9;
    let mut parts: Vec<String> =
        runs.iter().take(SHOWN).map(|(l, a, b)| format!("{} {:.1}-{:.1} s", l.as_str(), s(*a), s(*b))).collect();
    if runs.len() > SHOWN {
        parts.push(format!("... {} more runs (--json intervals)", runs.len() - SHOWN));
    }
    Some(format!("{} (per {} ms interval)", parts.join(", "), step / 1_000_000))
}

/// Writes the summary of every file and peer, then the fits.
pub fn write_summary(out: &mut impl Write, r: &Report) -> Result<()> {
    print_files(out, r)?;
    if let Some(f) = &r.fits {
        writeln!(out)?;
        writeln!(out, "fits across {} captures", f.points.len())?;
        if let (Some(b), Some(e)) = (f.buffer_bytes, f.buffer_fit_error) {
            writeln!(out, "  seed 002  Θ(τ) = B / τ with B = {} (largest error {:.0} %): a buffer of that size bounds data in transit", bytes(b), e * 100.0)?;
        }
        if let (Some(k), Some(e)) = (f.k, f.k_fit_error) {
            writeln!(out, "  seed 003  k = {k:.2} (largest error {:.0} %) against {}", e * 100.0, f.points[0].file)?;
        }
    }
    Ok(())
}

fn print_files(out: &mut impl Write, r: &Report) -> Result<()> {
    for f in &r.files {
        let dur = f.span_ns.map_or(0.0, |[a, b]| (b - a) as f64 / 1e9);
        let und: u64 = f.frames.undecodable.values().sum();
        writeln!(
            out,
            "{}: {} frames ({} LNet data, {} TCP control, {} other, {} undecodable), LNet traffic over {:.3} s",
            f.file, f.frames.frames, f.frames.lnet_data, f.frames.tcp_control, f.frames.other_traffic, und, dur
        )?;
        if let Some(at) = &f.interrupted_at {
            writeln!(
                out,
                "  INTERRUPTED by a signal after frame {} (offset {}): the report covers the packets read up to there",
                at.frame, at.offset
            )?;
        }
        for h in &f.limits {
            writeln!(out, "  LIMIT {} ({}) acted {} times: {}", h.limit, h.value, h.count, h.effect)?;
        }
        if let Some(l) = &f.live {
            let drops = l.dropped + l.dropped_interface;
            writeln!(
                out,
                "  live capture: filter '{}', snaplen {}, {:.1} s, stopped by {}; {} packets received, {}",
                l.filter,
                l.snaplen,
                l.duration_s,
                l.stopped_by,
                l.received,
                if drops == 0 {
                    "none dropped".to_string()
                } else {
                    format!(
                        "{drops} DROPPED ({} buffer full, {} by the interface): not analysed",
                        l.dropped, l.dropped_interface
                    )
                }
            )?;
        }
        if !f.unmatched_messages.is_empty() {
            let u: Vec<String> = f.unmatched_messages.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "  messages outside any RPC: {}", u.join(", "))?;
        }
        for e in r.peers.iter().filter(|e| e.file == f.file) {
            let p = &e.peer;
            writeln!(out)?;
            let conns: Vec<String> = p
                .connections
                .iter()
                .map(|c| format!("{} c{}{}", c.conn_type, c.id, if c.type_inferred { " (inferred)" } else { "" }))
                .collect();
            writeln!(out, "peer {} (client) <-> {} (server)", p.client_nid, p.server_nid)?;
            writeln!(
                out,
                "  connections  {}{}",
                conns.join(", "),
                p.handshake_rtt_us.map_or(String::new(), |r| format!("; TCP handshake RTT {}", ms(Some(r))))
            )?;
            let ops: Vec<String> = p.rpcs_by_opcode.iter().map(|(k, v)| format!("{k} {v}")).collect();
            writeln!(out, "  RPCs         {} complete, {} partial: {}", p.rpcs, p.rpcs_partial, ops.join(", "))?;
            if !p.missing.is_empty() {
                let m: Vec<String> = p.missing.iter().map(|(k, v)| format!("{k} {v}")).collect();
                writeln!(out, "               not captured: {} (see --rpcs `missing`)", m.join(", "))?;
            }
            let win = p.steady_window_ns.map_or("-".into(), |[a, b]| format!("{:.2} s window", (b - a) as f64 / 1e9));
            writeln!(
                out,
                "  bulk         read {}, written {}; throughput {}/s ({win}, MB = 10^6 B)",
                bytes(p.bytes_read as f64),
                bytes(p.bytes_written as f64),
                bytes(p.throughput_bytes_per_s)
            )?;
            let l = &p.latency_us;
            writeln!(out, "  latency      p50 {}  p95 {}  p99 {}  max {}", ms(l.p50), ms(l.p95), ms(l.p99), ms(l.max))?;
            let ph = &p.phases;
            writeln!(
                out,
                "  phases       request {} | server wait {} | bulk {} | server {} | reply {}   (means at the capture point)",
                ms(ph.request_us),
                ms(ph.server_wait_us),
                ms(ph.bulk_us),
                ms(ph.server_us),
                ms(ph.reply_us)
            )?;
            writeln!(
                out,
                "  RPCs in flight      mean {:.1} (steady {:.1}), max {}",
                p.rpcs_in_flight.mean, p.rpcs_in_flight.steady_mean, p.rpcs_in_flight.max
            )?;
            for d in &p.messages_in_flight.directions {
                writeln!(out, "  LNet msgs in flight {} → {}: max {}, mean {:.1}, {:.0}% of busy time at max ({} messages, {} zero-copy)", d.from, d.to, d.max, d.mean, d.time_at_max * 100.0, d.messages, d.zero_copy)?;
            }
            match p.messages_in_flight.inferred_peer_credits {
                Some(c) => writeln!(out, "  peer_credits binds at {c}: {}", p.messages_in_flight.evidence)?,
                None => writeln!(out, "  peer_credits       {}", p.messages_in_flight.evidence)?,
            }
            let h: Vec<String> = p.rpcs_in_flight.histogram.0.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            writeln!(out, "  rpc_stats    rpcs in flight {}", h.join(" "))?;
            let h: Vec<String> = p.pages_per_rpc.0.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            if !h.is_empty() {
                writeln!(out, "               pages per rpc  {}", h.join(" "))?;
            }
            print_model(out, e)?;
        }
    }
    Ok(())
}
