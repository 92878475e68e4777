//! `lnetcap synth`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use lnetcap_synth::attack::{write_attack, ATTACKS};
use lnetcap_synth::{generate, scenario, Container, SCENARIOS};

use crate::exit;

#[derive(Args, Debug)]
#[command(after_help = scenario_help())]
pub(crate) struct SynthArgs {
    /// Scenario name (see the list below).
    #[arg(long)]
    pub scenario: String,
    /// Seed: the same seed gives the same capture.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output capture file.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
    /// Ground-truth file (JSON lines). Default: the output name with `.truth.jsonl`.
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Round-trip time in ms (overrides the scenario).
    #[arg(long)]
    pub rtt_ms: Option<f64>,
    /// Link rate in Gbit/s (overrides the scenario).
    #[arg(long)]
    pub rate_gbit: Option<f64>,
    /// Segment loss probability, 0-1 (overrides the scenario).
    #[arg(long)]
    pub loss: Option<f64>,
    /// Reordering probability, 0-1.
    #[arg(long)]
    pub reorder: Option<f64>,
    /// Duplicate probability, 0-1.
    #[arg(long)]
    pub duplicate: Option<f64>,
    /// Capture snaplen in bytes.
    #[arg(long)]
    pub snaplen: Option<u32>,
    /// RPCs each client issues.
    #[arg(long)]
    pub rpcs: Option<usize>,
    /// RPCs in flight per client and server.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// LNet peer credits.
    #[arg(long)]
    pub peer_credits: Option<i32>,
    /// Clients, each with its typed connections to every server (overrides the scenario;
    /// 1-4096).
    #[arg(long)]
    pub clients: Option<usize>,
    /// Size of an adversarial scenario (connections, requests, probes: see the list).
    #[arg(long)]
    pub count: Option<u64>,
    /// The server's time per RPC in ms, from the request's arrival to its bulk (or reply);
    /// any number of RPCs at once.
    #[arg(long)]
    pub service_ms: Option<f64>,
    /// The capture file's format (overrides the scenario): pcap with µs or ns timestamps,
    /// or pcapng (one interface, ns resolution), as dumpcap and Wireshark write it.
    #[arg(long, value_enum)]
    pub container: Option<ContainerArg>,
}

/// `--container`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ContainerArg {
    /// Classic pcap, µs timestamps (tcpdump's default).
    Pcap,
    /// Classic pcap, ns timestamps (`tcpdump --time-stamp-precision nano`).
    PcapNs,
    /// pcapng.
    Pcapng,
}

fn scenario_help() -> String {
    let mut s = String::from("Scenarios:\n");
    for sc in SCENARIOS {
        s.push_str(&format!("  {:<15} {}\n", sc.name, sc.about));
    }
    s.push_str("\nAdversarial scenarios (written as they are made; --count sets n, the truth file is one JSON object of counts):\n");
    for a in ATTACKS {
        s.push_str(&format!("  {:<15} {} (default n = {})\n", a.name, a.about, a.default_count));
    }
    s
}

fn truth_path(a: &SynthArgs) -> PathBuf {
    a.truth.clone().unwrap_or_else(|| {
        let mut p = a.output.clone().into_os_string();
        p.push(".truth.jsonl");
        PathBuf::from(p)
    })
}

/// An adversarial scenario, streamed to the output.
fn run_attack(a: &SynthArgs) -> Option<Result<u8>> {
    let attack = ATTACKS.iter().find(|x| x.name == a.scenario)?;
    let n = a.count.unwrap_or(attack.default_count);
    let res = (|| -> Result<u8> {
        let f = File::create(&a.output).with_context(|| format!("writing {}", a.output.display()))?;
        let truth = write_attack(attack.name, n, BufWriter::with_capacity(1 << 20, f))
            .context("unknown adversarial scenario")?
            .with_context(|| format!("writing {}", a.output.display()))?;
        let tp = truth_path(a);
        let mut line = serde_json::to_string(&truth)?;
        line.push('\n');
        std::fs::write(&tp, line).with_context(|| format!("writing {}", tp.display()))?;
        eprintln!("lnetcap: wrote {} ({} packets) and {}", a.output.display(), truth.packets, tp.display());
        Ok(exit::OK)
    })();
    Some(res)
}

pub(crate) fn run(a: &SynthArgs) -> Result<u8> {
    if a.container.is_some() && ATTACKS.iter().any(|x| x.name == a.scenario) {
        bail!("--container is for the simulated scenarios; {:?} writes classic pcap", a.scenario);
    }
    if let Some(r) = run_attack(a) {
        return r;
    }
    let Some(mut cfg) = scenario(&a.scenario) else {
        bail!(
            "unknown scenario {:?}; known: {}",
            a.scenario,
            SCENARIOS.iter().map(|s| s.name).chain(ATTACKS.iter().map(|x| x.name)).collect::<Vec<_>>().join(", ")
        );
    };
    if a.count.is_some() {
        bail!("--count is for the adversarial scenarios; {:?} is sized by --rpcs", a.scenario);
    }
    if let Some(c) = a.container {
        cfg.container = match c {
            ContainerArg::Pcap => Container::PcapUs,
            ContainerArg::PcapNs => Container::PcapNs,
            ContainerArg::Pcapng => Container::PcapNg,
        };
    }
    if let Some(v) = a.rtt_ms {
        cfg.rtt_ns = (v * 1e6) as i64;
    }
    if let Some(v) = a.rate_gbit {
        cfg.rate_bps = v * 1e9;
    }
    for (dst, src) in [(&mut cfg.loss, a.loss), (&mut cfg.reorder, a.reorder), (&mut cfg.duplicate, a.duplicate)] {
        if let Some(v) = src {
            if !(0.0..1.0).contains(&v) {
                bail!("probabilities must be in [0, 1), got {v}");
            }
            *dst = v;
        }
    }
    if let Some(v) = a.snaplen {
        cfg.snaplen = v.max(64);
    }
    if let Some(v) = a.rpcs {
        cfg.rpcs_per_client = v;
    }
    if let Some(v) = a.clients {
        let max = lnetcap_synth::sim::MAX_CLIENTS;
        if !(1..=max).contains(&v) {
            bail!("--clients must be between 1 and {max}, got {v}");
        }
        cfg.clients = v;
    }
    if let Some(v) = a.concurrency {
        cfg.concurrency = v.max(1);
    }
    if let Some(v) = a.peer_credits {
        cfg.peer_credits = v.max(1);
    }
    if let Some(v) = a.service_ms {
        if !(0.0..=600_000.0).contains(&v) {
            bail!("--service-ms must be between 0 and 600000, got {v}");
        }
        cfg.service_ns = (v * 1e6) as i64;
    }
    let out = generate(&a.scenario, cfg, a.seed);
    if let Some(t) = out.stopped_at_ns {
        bail!(
            "the simulation of {:?} stopped at its event limit, {:.3} s into the run, before the workload finished; nothing was written",
            a.scenario,
            t as f64 / 1e9
        );
    }
    std::fs::write(&a.output, &out.capture).with_context(|| format!("writing {}", a.output.display()))?;
    let truth = truth_path(a);
    let mut w = BufWriter::new(File::create(&truth).with_context(|| format!("writing {}", truth.display()))?);
    for rec in &out.truth {
        serde_json::to_writer(&mut w, rec)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    eprintln!(
        "lnetcap: wrote {} ({} packets, {} bytes) and {}",
        a.output.display(),
        out.packets,
        out.capture.len(),
        truth.display()
    );
    Ok(exit::OK)
}
