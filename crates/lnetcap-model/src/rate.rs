//! The RPC rate of a pair without bulk data (metadata: connects, LDLM enqueues, llog,
//! getattr, pings): not bytes per second but RPCs per second against
//! RIF / (RTT + service time) — Little's law with the round trip and the server as the only
//! delays (models.md §3, seed 003's metadata rules).
//!
//! A client's RPC latency splits into the path's round trip, the server's time and the rest
//! (serialisation, socket queues, the client itself). Observed rate = RIF / latency over the
//! same span, so the model's efficiency is (RTT + service) / latency: the share of each
//! RPC's time the round trip and the server explain.

use serde::Serialize;

/// What the rate model needs, all in the client's time.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RateInput {
    /// Complete RPCs.
    pub rpcs: u64,
    /// From the first request to the last reply, s.
    pub span_s: f64,
    /// Mean latency of the complete RPCs as the client sees them, s.
    pub latency_s: f64,
    /// The path's round trip (its floor), s.
    pub rtt_s: f64,
    /// Mean server time per RPC, s (request's last byte to the reply, less the capture
    /// point's loop to the server).
    pub service_s: f64,
    /// Whether `service_s` had the capture point's loop to the server taken out (false: an
    /// upper bound).
    pub service_exact: bool,
    /// Most RPCs in flight at once.
    pub rif_max: i64,
}

/// The rate verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateOutput {
    /// Complete RPCs per second over the span.
    pub rpcs_per_s: f64,
    /// RPCs in flight, mean (Little: rate × latency).
    pub rif_mean: f64,
    /// RIF / (RTT + service): the rate the window would carry with no other delay.
    pub model_rpcs_per_s: f64,
    /// rpcs_per_s / model_rpcs_per_s = (RTT + service) / latency.
    pub efficiency: f64,
    /// Shares of the latency: round trip, server, the rest.
    pub rtt_share: f64,
    /// Server's share of the latency.
    pub service_share: f64,
    /// What neither explains.
    pub other_share: f64,
    /// `rpcs_in_flight`, `round_trip`, `server`, or `undetermined`.
    pub binding: &'static str,
    /// Why, in a sentence.
    pub why: String,
}

/// Evaluates the rate model.
pub fn rate_model(i: &RateInput) -> RateOutput {
    let rate = if i.span_s > 0.0 { i.rpcs as f64 / i.span_s } else { 0.0 };
    let lat = i.latency_s;
    let explained = i.rtt_s + i.service_s;
    let rif = rate * lat;
    let model = if explained > 0.0 { rif / explained } else { 0.0 };
    let share = |x: f64| if lat > 0.0 { x / lat } else { 0.0 };
    let (rtt_share, service_share) = (share(i.rtt_s), share(i.service_s));
    let mut out = RateOutput {
        rpcs_per_s: rate,
        rif_mean: rif,
        model_rpcs_per_s: model,
        efficiency: if model > 0.0 { rate / model } else { 0.0 },
        rtt_share,
        service_share,
        other_share: (1.0 - rtt_share - service_share).max(0.0),
        binding: "undetermined",
        why: String::new(),
    };
    let us = |s: f64| format!("{:.0} µs", s * 1e6);
    out.why = if i.rpcs < 2 || i.span_s <= 0.0 || lat <= 0.0 || i.rtt_s <= 0.0 {
        "fewer than two complete RPCs with a latency and a round trip: no rate to explain".into()
    } else if explained > lat * 1.05 {
        format!(
            "the round trip ({}) and the server ({}) add up to more than the RPCs' mean latency ({}): the capture point's delays are not known well enough to split it",
            us(i.rtt_s),
            us(i.service_s),
            us(lat)
        )
    } else if i.rif_max <= 1 {
        out.binding = "rpcs_in_flight";
        format!(
            "one RPC at a time: each waits for the one before (a serial application or a dependency chain), so the rate is at best 1 / (RTT + service) = {:.0} RPCs/s; more RPCs in flight need more parallel work from the client (threads, processes), not a larger max_rpcs_in_flight",
            1.0 / explained
        )
    } else if i.service_s >= i.rtt_s {
        out.binding = "server";
        format!(
            "the server's {}{} per RPC is more than the round trip ({}): more RPCs in flight help only as far as the server has threads for them",
            us(i.service_s),
            if i.service_exact { "" } else { " (at most)" },
            us(i.rtt_s)
        )
    } else {
        out.binding = "round_trip";
        format!(
            "the round trip ({}) is most of each RPC's {}: the rate follows RIF / RTT, so more RPCs in flight raise it when the client has the work (mdc.*.max_rpcs_in_flight, max_mod_rpcs_in_flight for modifying RPCs)",
            us(i.rtt_s),
            us(lat)
        )
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-checked: 100 RPCs over 1 s, 4 ms each, RTT 2 ms, server 1 ms: 100 RPCs/s,
    /// RIF 0.4, model 0.4 / 3 ms = 133.3 RPCs/s, efficiency 0.75 = 3 ms / 4 ms.
    #[test]
    fn little_and_the_split() {
        let o = rate_model(&RateInput {
            rpcs: 100,
            span_s: 1.0,
            latency_s: 0.004,
            rtt_s: 0.002,
            service_s: 0.001,
            service_exact: true,
            rif_max: 4,
        });
        assert!((o.rpcs_per_s - 100.0).abs() < 1e-9);
        assert!((o.rif_mean - 0.4).abs() < 1e-9);
        assert!((o.model_rpcs_per_s - 400.0 / 3.0).abs() < 1e-9);
        assert!((o.efficiency - 0.75).abs() < 1e-9);
        assert!((o.rtt_share - 0.5).abs() < 1e-9 && (o.service_share - 0.25).abs() < 1e-9);
        assert!((o.other_share - 0.25).abs() < 1e-9);
        assert_eq!(o.binding, "round_trip");
    }

    #[test]
    fn serial_server_and_undetermined() {
        let base = RateInput {
            rpcs: 10,
            span_s: 1.0,
            latency_s: 0.004,
            rtt_s: 0.001,
            service_s: 0.002,
            service_exact: true,
            rif_max: 1,
        };
        assert_eq!(rate_model(&base).binding, "rpcs_in_flight");
        assert_eq!(rate_model(&RateInput { rif_max: 8, ..base }).binding, "server");
        // Delays that add up to more than the latency: no verdict.
        let o = rate_model(&RateInput { rtt_s: 0.003, rif_max: 8, ..base });
        assert_eq!(o.binding, "undetermined");
        assert_eq!(rate_model(&RateInput { rpcs: 1, ..base }).binding, "undetermined");
    }
}
