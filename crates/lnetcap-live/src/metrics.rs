//! The Prometheus text format of a live view: per peer pair (labels `client`, `server`)
//! the wire-side numbers lustrefs-exporter lacks, and per process the packets, bytes and
//! drops. [`METRICS`] is the one list: the encoder registers from it and the README's
//! table (docs/metrics.md) is generated from it.

use prometheus::{Encoder, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use crate::view::{LiveView, PeerRow};

/// Kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Goes up and down.
    Gauge,
    /// Only goes up over a run.
    Counter,
}

/// One metric: name, kind, labels, help.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Full name.
    pub name: &'static str,
    /// Gauge or counter.
    pub kind: Kind,
    /// Label names.
    pub labels: &'static [&'static str],
    /// HELP text.
    pub help: &'static str,
}

const PAIR: &[&str] = &["client", "server"];

/// Every metric lnetcap serves.
pub const METRICS: &[Metric] = &[
    Metric { name: "lnetcap_packets_total", kind: Kind::Counter, labels: &[], help: "Packets read from the interface." },
    Metric { name: "lnetcap_bytes_total", kind: Kind::Counter, labels: &[], help: "Bytes on the wire of the packets read." },
    Metric {
        name: "lnetcap_packets_dropped_total",
        kind: Kind::Counter,
        labels: &["where"],
        help: "Packets the capture missed: where=\"buffer\" (libpcap ps_drop, lnetcap's buffer was full) or where=\"interface\" (ps_ifdrop).",
    },
    Metric {
        name: "lnetcap_lnet_connections",
        kind: Kind::Gauge,
        labels: &[],
        help: "TCP connections carrying LNet seen so far.",
    },
    Metric {
        name: "lnetcap_peer_throughput_bytes_per_second",
        kind: Kind::Gauge,
        labels: &["client", "server", "window"],
        help: "Bulk bytes per second: window=\"now\" over the last complete interval, window=\"run\" over the run's steady window.",
    },
    Metric { name: "lnetcap_peer_rpcs_total", kind: Kind::Counter, labels: PAIR, help: "Complete RPCs." },
    Metric {
        name: "lnetcap_peer_rpcs_in_flight",
        kind: Kind::Gauge,
        labels: PAIR,
        help: "Mean RPCs in flight in the last complete interval (client's time).",
    },
    Metric {
        name: "lnetcap_peer_messages_in_flight",
        kind: Kind::Gauge,
        labels: PAIR,
        help: "Most LNet messages in flight in either direction in the last complete interval.",
    },
    Metric {
        name: "lnetcap_peer_inferred_credits",
        kind: Kind::Gauge,
        labels: PAIR,
        help: "Peer credits the plateau of messages in flight shows (absent until one binds).",
    },
    Metric { name: "lnetcap_peer_rtt_seconds", kind: Kind::Gauge, labels: PAIR, help: "Round-trip time the model uses." },
    Metric {
        name: "lnetcap_peer_bytes_in_flight",
        kind: Kind::Gauge,
        labels: PAIR,
        help: "Bulk sender's bytes in flight (most in the last complete interval).",
    },
    Metric {
        name: "lnetcap_peer_cwnd_estimate_bytes",
        kind: Kind::Gauge,
        labels: PAIR,
        help: "Bulk sender's congestion-window estimate in the last complete interval.",
    },
    Metric {
        name: "lnetcap_peer_retransmits_total",
        kind: Kind::Counter,
        labels: PAIR,
        help: "Retransmitted TCP segments of the pair's connections.",
    },
    Metric {
        name: "lnetcap_peer_binding_limit",
        kind: Kind::Gauge,
        labels: &["client", "server", "window", "limit"],
        help: "1 for the limit that binds (window=\"now\": last complete interval with bulk; window=\"run\": the run so far), 0 for the others.",
    },
];

/// The limits the binding-limit gauge names (and `none` for a pair without bulk).
const LIMITS: [&str; 7] = ["rpc_window", "lnet_credits", "tcp_congestion", "receive_window", "server", "link", "none"];

/// A view as the Prometheus text format (version 0.0.4).
pub fn render(v: &LiveView) -> Result<String, prometheus::Error> {
    let reg = Registry::new();
    let mut gauges = Vec::new();
    let mut counters = Vec::new();
    for m in METRICS {
        let opts = Opts::new(m.name, m.help);
        match m.kind {
            Kind::Gauge => {
                let g = GaugeVec::new(opts, m.labels)?;
                reg.register(Box::new(g.clone()))?;
                gauges.push((m.name, g));
            }
            Kind::Counter => {
                let c = IntCounterVec::new(opts, m.labels)?;
                reg.register(Box::new(c.clone()))?;
                counters.push((m.name, c));
            }
        }
    }
    let gauge = |name: &str| &gauges.iter().find(|(n, _)| *n == name).expect("registered").1;
    let counter = |name: &str| &counters.iter().find(|(n, _)| *n == name).expect("registered").1;
    counter("lnetcap_packets_total").with_label_values::<&str>(&[]).inc_by(v.packets);
    counter("lnetcap_bytes_total").with_label_values::<&str>(&[]).inc_by(v.bytes);
    counter("lnetcap_packets_dropped_total").with_label_values(&["buffer"]).inc_by(v.dropped);
    counter("lnetcap_packets_dropped_total").with_label_values(&["interface"]).inc_by(v.dropped_interface);
    gauge("lnetcap_lnet_connections").with_label_values::<&str>(&[]).set(v.lnet_connections as f64);
    for p in &v.peers {
        peer(p, &gauge, &counter);
    }
    let mut out = Vec::new();
    TextEncoder::new().encode(&reg.gather(), &mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn peer<'a>(p: &PeerRow, gauge: &dyn Fn(&str) -> &'a GaugeVec, counter: &dyn Fn(&str) -> &'a IntCounterVec) {
    let pair = [p.client.as_str(), p.server.as_str()];
    let set = |name: &str, v: f64| gauge(name).with_label_values(&pair).set(v);
    let tp = gauge("lnetcap_peer_throughput_bytes_per_second");
    tp.with_label_values(&[pair[0], pair[1], "now"]).set(p.now_bytes_per_s);
    tp.with_label_values(&[pair[0], pair[1], "run"]).set(p.run_bytes_per_s);
    counter("lnetcap_peer_rpcs_total").with_label_values(&pair).inc_by(p.rpcs);
    counter("lnetcap_peer_retransmits_total").with_label_values(&pair).inc_by(p.retransmits);
    set("lnetcap_peer_rpcs_in_flight", p.rpcs_in_flight);
    set("lnetcap_peer_messages_in_flight", p.messages_in_flight as f64);
    if let Some(c) = p.credits {
        set("lnetcap_peer_inferred_credits", c as f64);
    }
    if let Some(r) = p.rtt_us {
        set("lnetcap_peer_rtt_seconds", r / 1e6);
    }
    if let Some(b) = p.bytes_in_flight {
        set("lnetcap_peer_bytes_in_flight", b as f64);
    }
    if let Some(c) = p.cwnd {
        set("lnetcap_peer_cwnd_estimate_bytes", c as f64);
    }
    let bl = gauge("lnetcap_peer_binding_limit");
    for l in LIMITS {
        bl.with_label_values(&[pair[0], pair[1], "run", l]).set(f64::from(u8::from(l == p.limit_run)));
        if let Some(now) = p.limit_now {
            bl.with_label_values(&[pair[0], pair[1], "now", l]).set(f64::from(u8::from(l == now)));
        }
    }
}

/// The metrics as a Markdown table (docs/metrics.md).
pub fn markdown() -> String {
    let mut s = String::from("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for m in METRICS {
        let kind = match m.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        s.push_str(&format!("| `{}` | {kind} | {} | {} |\n", m.name, m.labels.join(", "), m.help.replace('|', "\\|")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> LiveView {
        LiveView {
            packets: 10,
            bytes: 1000,
            dropped: 2,
            peers: vec![PeerRow {
                client: "192.168.1.2@tcp".into(),
                server: "192.168.1.1@tcp".into(),
                now_bytes_per_s: 1.5e6,
                run_bytes_per_s: 1.25e6,
                rpcs: 7,
                credits: Some(8),
                rtt_us: Some(20_000.0),
                bytes_in_flight: Some(65536),
                cwnd: Some(131072),
                limit_run: "lnet_credits",
                limit_now: Some("rpc_window"),
                ..PeerRow::default()
            }],
            ..LiveView::default()
        }
    }

    #[test]
    fn every_metric_is_written_with_its_help_and_type() {
        let text = render(&view()).unwrap();
        for m in METRICS {
            assert!(text.contains(&format!("# HELP {} ", m.name)), "{}", m.name);
            let kind = if m.kind == Kind::Gauge { "gauge" } else { "counter" };
            assert!(text.contains(&format!("# TYPE {} {kind}\n", m.name)), "{}", m.name);
        }
        let pair = r#"client="192.168.1.2@tcp",server="192.168.1.1@tcp""#;
        assert!(text.contains(&format!("lnetcap_peer_rtt_seconds{{{pair}}} 0.02\n")), "{text}");
        let limit = |window: &str, limit: &str, v: u8| {
            text.lines().any(|l| {
                l.starts_with("lnetcap_peer_binding_limit{")
                    && l.contains(r#"client="192.168.1.2@tcp""#)
                    && l.contains(r#"server="192.168.1.1@tcp""#)
                    && l.contains(&format!("window=\"{window}\""))
                    && l.contains(&format!("limit=\"{limit}\""))
                    && l.ends_with(&format!("}} {v}"))
            })
        };
        assert!(limit("run", "lnet_credits", 1) && limit("run", "rpc_window", 0), "{text}");
        assert!(limit("now", "rpc_window", 1) && limit("now", "lnet_credits", 0), "{text}");
        assert!(text.contains("lnetcap_packets_dropped_total{where=\"buffer\"} 2\n"), "{text}");
        assert!(text.contains(&format!("lnetcap_peer_cwnd_estimate_bytes{{{pair}}} 131072\n")), "{text}");
        println!("{text}");
    }

    #[test]
    fn unknown_values_are_absent_not_zero() {
        let mut v = view();
        v.peers[0].rtt_us = None;
        v.peers[0].credits = None;
        let text = render(&v).unwrap();
        assert!(!text.contains("lnetcap_peer_rtt_seconds{"), "{text}");
        assert!(!text.contains("lnetcap_peer_inferred_credits{"), "{text}");
    }
}
