//! Throughput models of shared/design/models.md as pure functions: the RPC window
//! (seed 000), the bounds an interval's throughput meets (LNet credits, TCP window, receive
//! window, server, link), the binding limit, efficiency, and advice with numbers. Units:
//! bytes, seconds, bytes per second; MB = 10^6 bytes and MiB = 2^20 bytes where printed.

pub mod rate;
pub mod rules;

use serde::Serialize;

/// T_rpc = RIF × BS / (2 × RTT) (seed 000, equation 1): on TCP a bulk RPC costs two round
/// trips (½ RTT request, one RTT bulk, ½ RTT reply), so RIF RPCs of BS bytes move
/// RIF × BS every 2 RTT.
pub fn t_rpc(rif: f64, bs_bytes: f64, rtt_s: f64) -> f64 {
    if rtt_s <= 0.0 {
        return f64::INFINITY;
    }
    rif * bs_bytes / (2.0 * rtt_s)
}

/// Bandwidth-delay product, bytes.
pub fn bdp(link_bytes_per_s: f64, rtt_s: f64) -> f64 {
    link_bytes_per_s * rtt_s
}

/// RPCs in flight needed to fill a link: RIF > 2 × BDP / BS (seed 000, equation 2). The
/// smallest integer strictly above.
pub fn needed_rif(link_bytes_per_s: f64, rtt_s: f64, bs_bytes: f64) -> u64 {
    if bs_bytes <= 0.0 {
        return 0;
    }
    let x = 2.0 * bdp(link_bytes_per_s, rtt_s) / bs_bytes;
    (x.floor() as u64) + 1
}

/// The credit window: `messages` LNet messages of `msg_bytes` in flight, each holding its
/// credit for about one RTT (until the zero-copy ACK returns).
pub fn credit_window(messages: f64, msg_bytes: f64, rtt_s: f64) -> f64 {
    if rtt_s <= 0.0 {
        return f64::INFINITY;
    }
    messages * msg_bytes / rtt_s
}

/// A window of `bytes` per RTT (TCP congestion window, receive window).
pub fn window_rate(bytes: f64, rtt_s: f64) -> f64 {
    if rtt_s <= 0.0 {
        return f64::INFINITY;
    }
    bytes / rtt_s
}

/// Seed 003, equation 4: predicted bandwidth b1 from a base point (s0, c0, l0, b0) for RPC
/// size s1, RPCs in flight c1 and latency l1, with the fitted constant k.
#[allow(clippy::too_many_arguments)]
pub fn seed003_b1(k: f64, s0: f64, c0: f64, l0: f64, b0: f64, s1: f64, c1: f64, l1: f64) -> f64 {
    (1.0 / k) * (s1 / s0) * (c1 / c0) * (l0 / l1) * b0
}

/// Fits seed 003's k from observations (s, c, l, b) against a base observation: k is the
/// geometric mean of the per-point k; returns (k, max relative error of the fitted model).
pub fn fit_seed003_k(base: (f64, f64, f64, f64), points: &[(f64, f64, f64, f64)]) -> Option<(f64, f64)> {
    let (s0, c0, l0, b0) = base;
    let ks: Vec<f64> = points
        .iter()
        .map(|&(s, c, l, b)| (s / s0) * (c / c0) * (l0 / l) * b0 / b)
        .filter(|k| k.is_finite() && *k > 0.0)
        .collect();
    if ks.is_empty() {
        return None;
    }
    let k = (ks.iter().map(|k| k.ln()).sum::<f64>() / ks.len() as f64).exp();
    let err =
        points.iter().map(|&(s, c, l, b)| (seed003_b1(k, s0, c0, l0, b0, s, c, l) - b).abs() / b).fold(0.0, f64::max);
    Some((k, err))
}

/// Fits seed 002's buffer-limited profile Θ(τ) = B / τ by least squares on 1/τ; returns
/// (B bytes, max relative error).
pub fn fit_buffer_profile(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let (mut num, mut den) = (0.0, 0.0);
    for &(tau, theta) in points {
        if tau > 0.0 {
            num += theta / tau;
            den += 1.0 / (tau * tau);
        }
    }
    if den == 0.0 {
        return None;
    }
    let b = num / den;
    let err =
        points.iter().filter(|p| p.0 > 0.0).map(|&(tau, theta)| ((b / tau) - theta).abs() / theta).fold(0.0, f64::max);
    Some((b, err))
}

/// The limits an interval's throughput can meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// RPCs in flight × RPC size per two round trips.
    RpcWindow,
    /// LNet peer credits (messages in flight × size per round trip).
    LnetCredits,
    /// TCP congestion window (and loss).
    TcpCongestion,
    /// TCP receive window (socket buffers).
    ReceiveWindow,
    /// Server processing.
    Server,
    /// The link.
    Link,
}

impl Limit {
    /// Every limit, in the order bounds tie-break (the link first).
    pub const ALL: [Self; 6] =
        [Self::Link, Self::LnetCredits, Self::RpcWindow, Self::TcpCongestion, Self::ReceiveWindow, Self::Server];

    /// What it is, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::RpcWindow => "RPC window (RPCs in flight × size / 2·RTT)",
            Self::LnetCredits => "LNet credits",
            Self::TcpCongestion => "TCP congestion window",
            Self::ReceiveWindow => "TCP receive window",
            Self::Server => "server time",
            Self::Link => "the link",
        }
    }

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RpcWindow => "rpc_window",
            Self::LnetCredits => "lnet_credits",
            Self::TcpCongestion => "tcp_congestion",
            Self::ReceiveWindow => "receive_window",
            Self::Server => "server",
            Self::Link => "link",
        }
    }
}

/// Inputs of the model for one peer pair (or one interval).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModelInput {
    /// Observed bulk throughput, bytes/s.
    pub observed: f64,
    /// Round-trip time, s.
    pub rtt_s: f64,
    /// Bulk bytes per RPC.
    pub bs_bytes: f64,
    /// RPCs in flight (time-weighted mean, client's time).
    pub rif: f64,
    /// Round trips an RPC costs, serialized: 2 (seed 000: ½ request, 1 bulk, ½ reply) when
    /// the bulk is acknowledged before the reply (writes; reads with an LNet ACK or zero
    /// copy), 1 when the reply follows the bulk data at once (a read without zero copy).
    /// 0 stands for 2.
    pub round_trips: f64,
    /// The credit limit when messages in flight plateau (inferred), with the bulk message
    /// size.
    pub credits: Option<(f64, f64)>,
    /// TCP congestion window estimate summed over the bulk connections, bytes.
    pub cwnd_bytes: Option<f64>,
    /// Congestion control was seen acting: loss recovery, or the window still opening.
    /// Without it a steady flight with no loss is the path's or the application's doing
    /// (a full link, a paced sender), not TCP's, and the TCP window is no bound.
    pub cwnd_acting: bool,
    /// Receive window summed over the bulk connections, bytes.
    pub rwnd_bytes: Option<f64>,
    /// The server's own time per RPC, s: what it spends between receiving a request and
    /// answering it, the network round trips it waits for taken out (or pb_service_time
    /// when that is larger; it counts whole seconds).
    pub server_s: Option<f64>,
    /// Link rate, bytes/s, and whether the user gave it (else: the best rate seen).
    pub link: Option<(f64, bool)>,
    /// The `--link-rate` the user gave when the model could not use it, bytes/s: the path
    /// was full well below it (`link` is then the best rate seen), or the capture carried
    /// more than it (a nominal speed, such as a veth's, not the path's).
    pub link_unused: Option<f64>,
}

impl ModelInput {
    /// The RTT that enters T_rpc = RIF × BS / (2 × RTT): the RTT scaled by the RPC's round
    /// trips over seed 000's two.
    pub fn rpc_rtt_s(&self) -> f64 {
        if self.round_trips > 0.0 {
            self.rtt_s * self.round_trips / 2.0
        } else {
            self.rtt_s
        }
    }

    /// T_rpc per RPC in flight, bytes/s: the slope of throughput against RPCs in flight
    /// (0 without an RTT or a size).
    pub fn t_rpc_per_rif(&self) -> f64 {
        if self.rtt_s > 0.0 && self.bs_bytes > 0.0 {
            t_rpc(1.0, self.bs_bytes, self.rpc_rtt_s())
        } else {
            0.0
        }
    }

    /// The round trips per RPC used.
    pub fn trips(&self) -> f64 {
        if self.round_trips > 0.0 {
            self.round_trips
        } else {
            2.0
        }
    }
}

/// One bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bound {
    /// Which limit.
    pub limit: Limit,
    /// Bytes per second it allows.
    pub bytes_per_s: f64,
}

/// The model's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelOutput {
    /// T_rpc, bytes/s.
    pub t_rpc_bytes_per_s: f64,
    /// min of all bounds, bytes/s.
    pub t_model_bytes_per_s: f64,
    /// Observed / T_model.
    pub efficiency: f64,
    /// The smallest bound.
    pub binding_limit: Limit,
    /// Every bound computed, ascending.
    pub bounds: Vec<Bound>,
    /// RPCs in flight needed to fill the link (when a link rate is known).
    pub needed_rif: Option<u64>,
    /// Share of the model lost to TCP: how much of what the other limits allow the TCP
    /// window cannot carry (0 when TCP is not below them).
    pub tcp_efficiency_loss: f64,
    /// Where the throughput went, as shares of the reference (the link when given, else
    /// T_rpc): each limit below the one above it takes its step down, from the reference
    /// down to T_model; `other` is T_model − observed (what no bound explains). With
    /// the observed share they add up to 1 (less when observed exceeds the model).
    pub shares_lost: Vec<ShareLost>,
}

/// What a step of the waterfall is lost to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostTo {
    /// A bound below the one above it.
    Limit(Limit),
    /// What no bound explains: T_model − observed.
    Other,
}

impl LostTo {
    /// The JSON name: the limit's, or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Limit(l) => l.as_str(),
            Self::Other => "other",
        }
    }
}

impl Serialize for LostTo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for LostTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of the waterfall from the reference rate down to the observed one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShareLost {
    /// The limit (`rpc_window`, `lnet_credits`, ...) or `other`.
    pub limit: LostTo,
    /// Share of the reference rate, 0-1.
    pub share: f64,
}

/// The waterfall: from `reference` down through every bound below it (`bounds` is in
/// ascending order; the steps come out top down), then to `observed`.
pub fn shares_lost(reference: f64, bounds: &[Bound], observed: f64) -> Vec<ShareLost> {
    let mut v = Vec::new();
    if !(reference.is_finite() && reference > 0.0) {
        return v;
    }
    let mut level = reference;
    for b in bounds.iter().rev() {
        if b.bytes_per_s < level {
            v.push(ShareLost { limit: LostTo::Limit(b.limit), share: (level - b.bytes_per_s) / reference });
            level = b.bytes_per_s;
        }
    }
    if observed < level {
        v.push(ShareLost { limit: LostTo::Other, share: (level - observed.max(0.0)) / reference });
    }
    v
}

/// Whether the observed rate refutes the server time of `inp`: its bound lies below what
/// the pair carried (beyond [`rules::RATE_SLACK`]), so the time was over-estimated. It
/// rests on the smallest bulk-end → reply gap, one sample that a single late timestamp
/// can shorten below the bulk's ACK loop (then the wait for that ACK counts as the
/// server's).
pub fn server_time_refuted(inp: &ModelInput) -> bool {
    inp.server_s.is_some_and(|t| {
        t > 0.0 && !rules::within_rate(inp.observed, server_bound(inp.rif, inp.bs_bytes, inp.rpc_rtt_s(), t))
    })
}

/// The RPC window with the server's time per RPC: RIF × BS / (2 × RTT + server time).
pub fn server_bound(rif: f64, bs_bytes: f64, rtt_s: f64, server_s: f64) -> f64 {
    let d = 2.0 * rtt_s + server_s;
    if d > 0.0 {
        rif * bs_bytes / d
    } else {
        f64::INFINITY
    }
}

/// Bytes per round trip the application offers TCP: half the RPC window's bulk (an RPC's
/// bulk takes one of its two round trips), the credit window or what the server serves in
/// a round trip, whichever is smallest.
pub fn app_window_bytes(inp: &ModelInput) -> f64 {
    let rpc = inp.rif * inp.bs_bytes / 2.0;
    let app = match inp.credits {
        Some((m, size)) => rpc.min(m * size),
        None => rpc,
    };
    // A slow server offers no more per round trip than it serves in one.
    match inp.server_s {
        Some(s) if s > 0.0 => app.min(server_bound(inp.rif, inp.bs_bytes, inp.rpc_rtt_s(), s) * inp.rtt_s),
        _ => app,
    }
}

/// Evaluates the bounds and names the binding one. Bounds within 5 % of the smallest are
/// resolved in favour of the link (a full link is the goal, nothing else would help), then
/// the one lnetcap can act on most directly: LNet credits, then the RPC window (a measured
/// plateau beats an arithmetic bound).
pub fn evaluate(inp: &ModelInput) -> ModelOutput {
    let trpc = t_rpc(inp.rif, inp.bs_bytes, inp.rpc_rtt_s());
    let mut bounds = vec![Bound { limit: Limit::RpcWindow, bytes_per_s: trpc }];
    if let Some((m, size)) = inp.credits {
        bounds.push(Bound { limit: Limit::LnetCredits, bytes_per_s: credit_window(m, size, inp.rtt_s) });
    }
    if let Some(c) = inp.cwnd_bytes {
        // The flight the sender showed is only a lower bound of its congestion window: when
        // the RPC window or the credits offered no more data per round trip than that, the
        // sender was application-limited and TCP did not bind.
        let offered = app_window_bytes(inp);
        if inp.cwnd_acting && rules::below_offered(c, offered) {
            bounds.push(Bound { limit: Limit::TcpCongestion, bytes_per_s: window_rate(c, inp.rtt_s) });
        }
    }
    if let Some(w) = inp.rwnd_bytes {
        bounds.push(Bound { limit: Limit::ReceiveWindow, bytes_per_s: window_rate(w, inp.rtt_s) });
    }
    if let Some(t) = inp.server_s {
        // Each RPC holds its slot of the RPC window for two round trips plus the server's
        // time; the server is a bound of its own when that time is a real share of it.
        if t > 0.0 {
            bounds.push(Bound {
                limit: Limit::Server,
                bytes_per_s: server_bound(inp.rif, inp.bs_bytes, inp.rpc_rtt_s(), t),
            });
        }
    }
    if let Some((l, _)) = inp.link {
        bounds.push(Bound { limit: Limit::Link, bytes_per_s: l });
    }
    bounds.retain(|b| b.bytes_per_s.is_finite() && b.bytes_per_s > 0.0);
    bounds.sort_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s));
    let t_model = bounds.first().map_or(f64::INFINITY, |b| b.bytes_per_s);
    let mut near: Vec<Limit> =
        bounds.iter().filter(|b| b.bytes_per_s <= t_model * rules::BOUND_TIE).map(|b| b.limit).collect();
    // Credits inferred from a plateau mean messages waited for them: they bind even where
    // their window (k × size per round trip) is above T_rpc, for RPCs issued in bursts
    // wait for the credits a burst takes (12 RPCs on 8 credits at 40 ms: the RPC window's
    // 155 MB/s is above the observed 144 MB/s only because a third of the RPCs waited).
    // Only a full link or a TCP window below them comes first.
    if inp.credits.is_some() && !near.iter().any(|l| matches!(l, Limit::Link | Limit::TcpCongestion)) {
        near.push(Limit::LnetCredits);
    }
    let binding = [Limit::Link, Limit::LnetCredits, Limit::RpcWindow]
        .into_iter()
        .find(|l| near.contains(l))
        .unwrap_or_else(|| near.first().copied().unwrap_or(Limit::RpcWindow));
    let others =
        bounds.iter().filter(|b| b.limit != Limit::TcpCongestion).map(|b| b.bytes_per_s).fold(f64::INFINITY, f64::min);
    let tcp = bounds.iter().find(|b| b.limit == Limit::TcpCongestion).map(|b| b.bytes_per_s);
    let tcp_loss = match tcp {
        Some(t) if others.is_finite() && t < others => 1.0 - t / others,
        _ => 0.0,
    };
    let needed_rif = match inp.link {
        Some((l, _)) => Some(needed_rif(l, inp.rpc_rtt_s(), inp.bs_bytes)),
        // Without a link rate: the RPCs in flight that would reach the next limit above
        // the RPC window.
        None => bounds
            .iter()
            .filter(|b| b.limit != Limit::RpcWindow && b.bytes_per_s > trpc)
            .map(|b| b.bytes_per_s)
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))))
            .filter(|_| inp.bs_bytes > 0.0)
            .map(|t| (t * 2.0 * inp.rpc_rtt_s() / inp.bs_bytes).ceil() as u64),
    };
    let lost = shares_lost(inp.link.map_or(trpc, |(l, _)| l), &bounds, inp.observed);
    ModelOutput {
        t_rpc_bytes_per_s: trpc,
        t_model_bytes_per_s: t_model,
        efficiency: if t_model.is_finite() && t_model > 0.0 { inp.observed / t_model } else { 0.0 },
        binding_limit: binding,
        bounds,
        needed_rif,
        tcp_efficiency_loss: tcp_loss,
        shares_lost: lost,
    }
}

/// Below this efficiency the RPC window does not explain the throughput and no RPC-window
/// advice is given.
pub const UNEXPLAINED_BELOW: f64 = 0.5;

/// One piece of advice: the setting, the value, the command an admin runs, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Advice {
    /// The setting.
    pub setting: String,
    /// The value to set.
    pub value: String,
    /// The command.
    pub command: String,
    /// The evidence.
    pub reason: String,
}

/// What an admin can tune, from the verdict and the evidence. Never advises beyond what the
/// capture shows: each item names the numbers it comes from. `messages_wanted`: the LNet
/// messages the open RPCs put in flight at once (RPCs in flight × bulk messages per RPC).
#[allow(clippy::too_many_arguments)]
pub fn advise(
    inp: &ModelInput,
    out: &ModelOutput,
    selftest: bool,
    writes: bool,
    messages_wanted: f64,
    peers_of_server: u64,
    retrans_share: f64,
) -> Vec<Advice> {
    let mut v = Vec::new();
    let next_bound =
        out.bounds.iter().filter(|b| b.limit != out.binding_limit).map(|b| b.bytes_per_s).fold(f64::INFINITY, f64::min);
    match out.binding_limit {
        // Far below every bound: the RPC window is not what holds the throughput back, and
        // raising it would be a guess.
        Limit::RpcWindow if out.efficiency < UNEXPLAINED_BELOW => v.push(Advice {
            setting: "none (the model does not explain the throughput)".into(),
            value: "-".into(),
            command: "lnetcap analyze --rpcs rpcs.jsonl ...  # the RPC timeline: gaps between RPCs, server phases".into(),
            reason: format!(
                "{:.1} MB/s is {:.0} % of the smallest bound ({:.1} MB/s): the limit is one the capture does not show (the application's I/O size or queue depth, client cache or grants, server storage) or bulk it could not see (RPCs with `bulk_unknown`); more RPCs in flight may not help",
                inp.observed / 1e6,
                100.0 * out.efficiency,
                out.t_model_bytes_per_s / 1e6
            ),
        }),
        Limit::RpcWindow => v.extend(window_advice(inp, out, selftest, writes, peers_of_server, next_bound)),
        Limit::LnetCredits => {
            let n = messages_wanted.ceil().max(1.0) as u64;
            v.push(credits_advice(
                n,
                peers_of_server,
                &format!(
                    "LNet messages in flight plateau at {:.0} (peer_credits) while the RPCs in flight asked for {n} at once (RPCs × bulk messages per RPC): raise peer_credits to at least that",
                    inp.credits.map_or(0.0, |c| c.0)
                ),
            ));
        }
        Limit::TcpCongestion => v.push(Advice {
            setting: "TCP congestion control / loss".into(),
            value: format!("{:.1} % of data retransmitted", retrans_share * 100.0),
            command: "sysctl net.ipv4.tcp_congestion_control  # check loss on the path; consider conns_per_peer (options ksocklnd conns_per_peer=N) to spread bulk over more connections".into(),
            reason: format!(
                "the congestion window estimate carries {:.1} MB/s, below the other limits ({:.1} MB/s)",
                out.bounds.iter().find(|b| b.limit == Limit::TcpCongestion).map_or(0.0, |b| b.bytes_per_s / 1e6),
                next_bound / 1e6
            ),
        }),
        Limit::ReceiveWindow => {
            let want = (2.0 * out.bounds.iter().map(|b| b.bytes_per_s).filter(|x| *x > 0.0).fold(0.0, f64::max).min(next_bound) * inp.rtt_s).ceil() as u64;
            v.push(Advice {
                setting: "TCP socket buffers".into(),
                value: format!("{want} bytes"),
                command: format!("sysctl -w net.core.rmem_max={want} net.ipv4.tcp_rmem='4096 87380 {want}'  # and ksocklnd rx_buffer_size/tx_buffer_size if set"),
                reason: format!("the advertised receive window carries {:.1} MB/s at this RTT", out.t_model_bytes_per_s / 1e6),
            });
        }
        Limit::Server => {
            let s = inp.server_s.unwrap_or(0.0);
            v.push(Advice {
                setting: "server".into(),
                value: "-".into(),
                command: "lctl get_param ost.OSS.ost_io.stats ost.OSS.ost_io.threads_started  # on the server: service times and threads busy".into(),
                reason: format!(
                    "the server holds each RPC {:.1} ms of its own against {:.1} ms of round trips ({:.0} % of an RPC's time); more RPCs in flight help only while the server has idle service threads, which a capture cannot show",
                    s * 1e3,
                    2.0 * inp.rpc_rtt_s() * 1e3,
                    100.0 * s / (s + 2.0 * inp.rpc_rtt_s())
                ),
            });
        }
        Limit::Link => {
            let (l, given) = inp.link.unwrap_or((out.t_model_bytes_per_s, false));
            v.push(Advice {
                setting: "none (the path is full)".into(),
                value: "-".into(),
                command: match (given, inp.link_unused) {
                    (true, _) => "# nothing to tune on the Lustre side: a faster link or more of them (LNet multi-rail) raise this bound".into(),
                    (false, Some(u)) if u >= inp.observed => "mpstat -P ALL 1  # on both hosts during a transfer: a core near 100 % (sys, soft) is the hosts' limit; else look for a slower hop on the path".into(),
                    (false, _) => "ethtool <ifname>  # the link speed on both ends; pass --link-rate to compare against it".into(),
                },
                reason: if given {
                    format!("{:.1} MB/s is {:.0} % of the {:.1} MB/s link; more RPCs in flight or credits would only queue", inp.observed / 1e6, 100.0 * inp.observed / l, l / 1e6)
                } else {
                    path_full_reason(inp, l)
                },
            });
        }
    }
    v
}

/// Advice when the RPC window binds: the RPCs in flight that reach the next bound (or
/// fill the link), the credits that let them, and dirty cache for writes.
fn window_advice(
    inp: &ModelInput,
    out: &ModelOutput,
    selftest: bool,
    writes: bool,
    peers_of_server: u64,
    next_bound: f64,
) -> Vec<Advice> {
    let mut v = Vec::new();
    let mib = inp.bs_bytes / 1_048_576.0;
    // RIF to reach the next bound (or the link).
    let target = inp.link.map_or(next_bound, |(l, _)| l.min(next_bound));
    if target.is_finite() && inp.bs_bytes > 0.0 {
        let mut n = (target * 2.0 * inp.rpc_rtt_s() / inp.bs_bytes).ceil().max(inp.rif.ceil() + 1.0) as u64;
        // Without the link rate the capture cannot tell how far the window may grow:
        // advise no more than doubling it.
        let capped = inp.link.is_none() && n as f64 > 2.0 * inp.rif.ceil();
        if capped {
            n = (2.0 * inp.rif.ceil()).max(inp.rif.ceil() + 1.0) as u64;
        }
        let trips = inp.trips();
        let unknown = if capped {
            " (the link rate is not known: this doubles the window; give --link-rate for the value that fills the link)"
        } else {
            ""
        };
        let (setting, command) = if selftest {
            ("lst --concurrency".to_string(), format!("lst add_test ... --concurrency {n} ..."))
        } else {
            ("osc.*.max_rpcs_in_flight".to_string(), format!("lctl set_param osc.*.max_rpcs_in_flight={n}"))
        };
        v.push(Advice {
            setting,
            value: n.to_string(),
            command,
            reason: format!(
                "throughput follows T_rpc = RIF × BS / ({trips} × RTT) = {:.1} × {:.2} MiB / ({trips} × {:.1} ms) = {:.1} MB/s; {n} RPCs in flight would carry {:.1} MB/s (next limit {:.1} MB/s){unknown}",
                inp.rif,
                mib,
                inp.rtt_s * 1e3,
                out.t_rpc_bytes_per_s / 1e6,
                t_rpc(n as f64, inp.bs_bytes, inp.rpc_rtt_s()).min(target) / 1e6,
                target / 1e6
            ),
        });
        v.push(credits_advice(n, peers_of_server, "peer_credits must be at least max_rpcs_in_flight so the larger RPC window is not held back by LNet credits"));
        if writes && !selftest {
            let dirty = ((4.0 * n as f64 * mib).ceil() as u64).max(1);
            v.push(Advice {
                setting: "osc.*.max_dirty_mb".into(),
                value: dirty.to_string(),
                command: format!("lctl set_param osc.*.max_dirty_mb={dirty}"),
                reason: format!("writes need dirty cache a few times the RPC window: 4 × {n} RPCs × {mib:.2} MiB"),
            });
        }
    }
    v
}

/// Why a path seen full (no link rate, or one it could not use) binds.
fn path_full_reason(inp: &ModelInput, best: f64) -> String {
    let seen = format!(
        "the path carried at most {:.1} MB/s with more data offered than in flight ({} of {} per round trip), no loss and the receive window open",
        best / 1e6,
        size(inp.cwnd_bytes.unwrap_or(0.0)),
        size(app_window_bytes(inp))
    );
    match inp.link_unused {
        Some(l) if l < inp.observed => format!(
            "{seen}; the --link-rate given ({:.1} MB/s) is below the {:.1} MB/s the capture carried, so it is not the path's (virtual interfaces such as veth report a nominal speed) and was not used: a full link, a rate limit on the path or the hosts (CPU, memory copies) bind, not a Lustre setting",
            l / 1e6,
            inp.observed / 1e6
        ),
        Some(l) => format!(
            "{seen}, at {:.0} % of the {:.1} MB/s link given: a slower hop or a rate limit on the path, or the hosts (CPU, memory copies; a veth between namespaces is a copy in one host) hold it below the link, not a Lustre setting",
            100.0 * best / l,
            l / 1e6
        ),
        None => format!("{seen}: a full link, a rate limit on the path or the hosts (CPU, memory copies) bind, not a Lustre setting"),
    }
}

/// Bytes as MB, or kB below 0.1 MB.
fn size(b: f64) -> String {
    if b >= 1e5 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}

/// Share of the RTT floor by which the RTT must rise for an interval to show a queue.
pub const STANDING_QUEUE_SHARE: f64 = 0.2;

/// Share of the steady window's intervals that must show a queue for the path to be full.
pub const QUEUED_INTERVALS: f64 = 0.25;

/// The path was full without a link rate given. It needs positive evidence of a
/// bottleneck: a queue on the path (the RTT up by `STANDING_QUEUE_SHARE` of its floor) in
/// at least `QUEUED_INTERVALS` of the steady window's intervals (`queued_share`) with no
/// loss (`lossless`): the window grew into a queue and the rate did not follow it, so the
/// best sustained rate is the path's. Without a queue, a flight below what was offered is
/// not enough (one RPC in flight sends one bulk per round trip, in slow start after each
/// idle period). The receive window must not be what held the flight.
///
/// A sender paced at the bottleneck (no queue at all) shows it differently: a steady window
/// (not opening, `cwnd_acting` false) below what the application offered while the bulk
/// connections never went idle (`busy`: idle for under a tenth of the time).
pub fn path_full(inp: &ModelInput, queued_share: f64, lossless: bool, busy: bool) -> bool {
    let queue = inp.rtt_s > 0.0 && queued_share >= QUEUED_INTERVALS;
    match inp.cwnd_bytes {
        Some(c) if lossless && c > 0.0 && inp.rwnd_bytes.is_none_or(|w| rules::below_offered(c, w)) => {
            queue || (busy && !inp.cwnd_acting && rules::below_offered(c, app_window_bytes(inp)))
        }
        _ => false,
    }
}

fn credits_advice(n: u64, peers: u64, reason: &str) -> Advice {
    let credits = (n * peers.max(1)).max(256);
    Advice {
        setting: "ksocklnd peer_credits / credits".into(),
        value: format!("peer_credits={n} credits={credits}"),
        command: format!("options ksocklnd peer_credits={n} credits={credits}  # /etc/modprobe.d/ksocklnd.conf on both ends; or lnetctl net add --net tcp --if <ifname> --peer-credits {n} --credits {credits}"),
        reason: format!("{reason}; credits ≥ peer_credits × peers ({n} × {peers})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1_048_576.0;

    #[test]
    fn test_seed000_reference_numbers() {
        // models.md §2: 1 MiB RPCs at 50.5 ms.
        let rtt = 0.0505;
        assert!((t_rpc(1.0, MIB, rtt) / 1e6 - 10.4).abs() < 0.05, "{}", t_rpc(1.0, MIB, rtt) / 1e6);
        assert!((t_rpc(8.0, MIB, rtt) / 1e6 - 83.0).abs() < 0.1, "{}", t_rpc(8.0, MIB, rtt) / 1e6);
        assert!((t_rpc(64.0, MIB, rtt) / 1e6 - 664.0).abs() < 1.0, "{}", t_rpc(64.0, MIB, rtt) / 1e6);
        // A 10 GbE NIC (1250 MB/s) needs RIF >= 121.
        assert_eq!(needed_rif(1.25e9, rtt, MIB), 121);
        // 100 Gb/s at 50.5 ms: BDP 631 MB, RIF > 2 × 631 MB / 1 MiB ≈ 1204 (not the seed's "5,000").
        assert!((bdp(12.5e9, rtt) / 1e6 - 631.25).abs() < 0.01);
        let exact = 2.0 * bdp(12.5e9, rtt) / MIB;
        assert!((exact - 1204.0).abs() < 0.5, "{exact}");
        // RIF must exceed 1204.01: the smallest whole number of RPCs is 1205.
        assert_eq!(needed_rif(12.5e9, rtt, MIB), 1205);
    }

    #[test]
    fn test_seed004_bdp() {
        // 2 × 10 Gb/s × 105 µs ≈ 262 kB.
        assert!((bdp(2.0 * 1.25e9, 105e-6) / 1e3 - 262.5).abs() < 0.1);
    }

    #[test]
    fn test_binding_limit_and_efficiency() {
        // lst_read_rtt50_c32_pc8: 32 RPCs in flight, 8 credits, 50.3 ms: credits bind.
        let inp = ModelInput {
            observed: 134.2e6,
            rtt_s: 0.0503,
            bs_bytes: MIB,
            rif: 32.0,
            credits: Some((8.0, MIB)),
            ..Default::default()
        };
        let out = evaluate(&inp);
        assert_eq!(out.binding_limit, Limit::LnetCredits);
        assert!((out.t_model_bytes_per_s / 1e6 - 166.8).abs() < 0.2, "{}", out.t_model_bytes_per_s);
        assert!((out.efficiency - 0.805).abs() < 0.01);
        let adv = advise(&inp, &out, true, false, 32.0, 1, 0.0);
        assert!(adv[0].value.starts_with("peer_credits=32"), "{adv:?}");
        // lst_write_rtt20_c8_pc8: RPC window binds.
        let inp = ModelInput { observed: 201.85e6, rtt_s: 0.0202, bs_bytes: MIB, rif: 8.0, ..Default::default() };
        let out = evaluate(&inp);
        assert_eq!(out.binding_limit, Limit::RpcWindow);
        assert!(out.efficiency > 0.9);
    }

    #[test]
    fn a_server_time_the_observed_rate_exceeds_is_refuted() {
        // lst_read_rtt10_c6_pc8 replayed live: one late timestamp made the smallest
        // bulk-end → reply gap 9.5 ms (below 0.8 × the 12.1 ms ACK loop), so 8.6 ms of
        // "server time" would bound the pair at 216 MB/s under an observed 267 MB/s.
        let inp = ModelInput {
            observed: 267.15e6,
            rtt_s: 0.01017,
            bs_bytes: MIB,
            rif: 5.95,
            server_s: Some(0.008594),
            ..Default::default()
        };
        let b = server_bound(inp.rif, inp.bs_bytes, inp.rpc_rtt_s(), 0.008594);
        assert!((b / 1e6 - 215.8).abs() < 2.0, "{b}");
        assert!(server_time_refuted(&inp));
        // Observed at or below the bound (within the slack): the time stands.
        assert!(!server_time_refuted(&ModelInput { observed: 220e6, ..inp.clone() }));
        assert!(!server_time_refuted(&ModelInput { server_s: None, ..inp }));
    }

    #[test]
    fn test_shares_lost_add_up() {
        // lst_read-like: T_rpc 325, credits 164, observed 127 (MB/s).
        let b = |limit, x: f64| Bound { limit, bytes_per_s: x * 1e6 };
        let bounds = [b(Limit::LnetCredits, 164.0), b(Limit::RpcWindow, 325.0), b(Limit::ReceiveWindow, 687.0)];
        let v = shares_lost(325e6, &bounds, 127e6);
        assert_eq!(v.iter().map(|s| s.limit.as_str()).collect::<Vec<_>>(), vec!["lnet_credits", "other"]);
        assert!((v[0].share - 161.0 / 325.0).abs() < 1e-12);
        assert!((v[1].share - 37.0 / 325.0).abs() < 1e-12);
        let total: f64 = v.iter().map(|s| s.share).sum::<f64>() + 127.0 / 325.0;
        assert!((total - 1.0).abs() < 1e-12);
        // With a 10 Gbit/s link as the reference, top down: the receive window, the RPC
        // window, the credits, then what no bound explains.
        let v = shares_lost(1250e6, &bounds, 127e6);
        let names: Vec<_> = v.iter().map(|s| s.limit.as_str()).collect();
        assert_eq!(names, vec!["receive_window", "rpc_window", "lnet_credits", "other"]);
        assert!((v[0].share - (1250.0 - 687.0) / 1250.0).abs() < 1e-12);
        assert!((v[1].share - (687.0 - 325.0) / 1250.0).abs() < 1e-12);
        // Observed above the model: nothing is `other`.
        assert!(shares_lost(325e6, &bounds, 200e6).iter().all(|s| s.limit != LostTo::Other));
    }

    #[test]
    fn test_path_full_link_first_and_unexplained() {
        let base = ModelInput {
            observed: 124e6,
            rtt_s: 0.002,
            bs_bytes: MIB,
            rif: 16.0,
            cwnd_bytes: Some(250e3),
            rwnd_bytes: Some(64.0 * MIB),
            ..Default::default()
        };
        // A queue in 40 % of the intervals with no loss: the window grew into a queue, the
        // path is full (even while the window still opens).
        assert!(path_full(&base, 0.4, true, false));
        assert!(path_full(&ModelInput { cwnd_acting: true, ..base.clone() }, 0.4, true, false));
        // A queue in a tenth of the intervals is no evidence: one bulk per round trip, a
        // flight below what is offered on a connection idle between bulks, is not a full
        // path.
        assert!(!path_full(&base, 0.1, true, false));
        // A sender paced at the bottleneck: no queue, but a steady flight of 250 kB with
        // 8 MiB offered per round trip on a connection never idle.
        assert!(path_full(&base, 0.0, true, true));
        assert!(!path_full(&ModelInput { cwnd_acting: true, ..base.clone() }, 0.0, true, true));
        assert!(!path_full(&ModelInput { rif: 0.4, ..base.clone() }, 0.0, true, true));
        // With loss, TCP may be the limit.
        assert!(!path_full(&base, 0.4, false, true));
        // The receive window holds the flight: not the path.
        assert!(!path_full(&ModelInput { rwnd_bytes: Some(260e3), ..base.clone() }, 0.4, true, true));
        // A link within 5 % of another bound (credits at 123 MB/s) is named before it.
        let inp = ModelInput { link: Some((125e6, false)), credits: Some((0.235, MIB)), ..base.clone() };
        let out = evaluate(&inp);
        assert_eq!(out.binding_limit, Limit::Link, "{:?}", out.bounds);
        assert!(advise(&inp, &out, false, false, 16.0, 1, 0.0)[0].setting.starts_with("none"));
        // Far below the RPC window with nothing else known: no RIF advice.
        let inp = ModelInput { observed: 100e6, cwnd_bytes: None, ..base };
        let out = evaluate(&inp);
        assert_eq!(out.binding_limit, Limit::RpcWindow);
        assert!(out.efficiency < UNEXPLAINED_BELOW);
        let adv = advise(&inp, &out, false, false, 16.0, 1, 0.0);
        assert_eq!(adv.len(), 1);
        assert!(adv[0].setting.contains("does not explain"), "{adv:?}");
    }

    #[test]
    fn test_fits() {
        // Θ(τ) = B / τ exactly.
        let pts: Vec<(f64, f64)> = [0.01, 0.02, 0.05, 0.1].iter().map(|t| (*t, 4e6 / t)).collect();
        let (b, err) = fit_buffer_profile(&pts).unwrap();
        assert!((b - 4e6).abs() < 1.0 && err < 1e-9);
        // Seed 003: points generated with k = 2.27.
        let base = (4096.0, 8.0, 0.00217, 100e6);
        let pts: Vec<_> = [(8192.0, 8.0, 0.00217), (4096.0, 16.0, 0.00414)]
            .iter()
            .map(|&(s, c, l)| (s, c, l, seed003_b1(2.27, base.0, base.1, base.2, base.3, s, c, l)))
            .collect();
        let (k, err) = fit_seed003_k(base, &pts).unwrap();
        assert!((k - 2.27).abs() < 1e-9 && err < 1e-9);
    }
}
