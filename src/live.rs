//! `lnetcap live`: the analysis of `analyze`, fed from an interface (libpcap, feature
//! `live`) or a capture replayed at its recorded pace, with a terminal view, /metrics and
//! a rotated pcap ring while it runs, and the same outputs as `analyze` at the end.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_analysis::{Analysis, AnalysisConfig, FileAnalysis, LiveCapture, Observer, PacketSource, Quiet};
use lnetcap_live::ring::{Ring, RingConfig};
use lnetcap_live::serve::Server;
use lnetcap_live::source::{Counters, Deadline, Replay, Tee};
use lnetcap_live::{lines, tui, Board, LiveView, Stop, StopReason};

use crate::analyze::{write_outputs, AnalysisArgs, OutputArgs, Outputs};
use crate::exit;
use crate::input::{open, Stderr};

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("from").required(true).args(["interface", "replay"]))]
pub(crate) struct LiveArgs {
    /// Capture on this interface (`any` for all; needs the `live` feature and
    /// CAP_NET_RAW or root).
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Option<String>,
    /// Instead of an interface, replay this capture at its recorded pace (no libpcap,
    /// no privileges): demos, training, and the views on a stored capture.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// With `--replay`: this many times faster than recorded.
    #[arg(long, default_value_t = 1.0, requires = "replay")]
    pub speed: f64,
    /// Stop after this long (`90s`, `5m`, `1h`; a bare number is seconds). Default: until
    /// Ctrl-C, SIGTERM or `q` (a replay also stops at the end of its file).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Bytes kept per packet (256 keep every LNet header at the start of a segment).
    #[arg(long, default_value_t = 256, value_name = "BYTES")]
    pub snaplen: u32,
    /// BPF capture filter. Default: `tcp port P` for the `--port`s (988).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Put the interface in promiscuous mode (off by default: a host sees its own
    /// traffic; a mirror port needs it).
    #[arg(long)]
    pub promisc: bool,
    /// Kernel capture buffer (`64MiB`, `256M`, bytes). A larger one drops fewer packets
    /// in bursts.
    #[arg(long, default_value = "64MiB", value_name = "SIZE", value_parser = parse_size)]
    pub buffer_size: u64,
    /// Plain lines on stderr at each refresh instead of the terminal view (the default
    /// when stdout is not a terminal).
    #[arg(long)]
    pub no_tui: bool,
    /// How often the views (terminal, lines, /metrics) are refreshed.
    #[arg(long, default_value = "1s", value_name = "TIME", value_parser = parse_duration)]
    pub refresh: Duration,
    /// Serve Prometheus metrics on ADDR:PORT/metrics while running (README: "Metrics").
    #[arg(long, value_name = "ADDR:PORT")]
    pub prometheus: Option<String>,
    /// Keep the packets as pcap in FILE (rotated with the options below; `lnetcap batch`
    /// groups the ring back into one capture).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Start a new file before one grows past SIZE (`100MB`, `1GiB`), as tcpdump -C.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "write")]
    pub rotate_size: Option<u64>,
    /// Keep at most N files, reusing the oldest (FILE0 … FILE{N-1}), as tcpdump -W.
    #[arg(long, value_name = "N", requires = "write", value_parser = clap::value_parser!(u32).range(1..))]
    pub rotate_count: Option<u32>,
    /// Start a new file every S seconds of capture, as tcpdump -G.
    #[arg(long, value_name = "S", requires = "write", value_parser = clap::value_parser!(u64).range(1..))]
    pub rotate_seconds: Option<u64>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// `90s`, `5m`, `1h30m`, `500ms` (humantime), or a bare number of seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|e| format!("{s}: {e}"));
    }
    humantime::parse_duration(s).map_err(|e| format!("{s}: {e} (e.g. 90s, 5m, 1h)"))
}

/// Bytes: a number with an optional unit: k/M/G (decimal, with or without B) or
/// KiB/MiB/GiB.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s}: not a size (e.g. 100MB, 64MiB, 1G)"))?;
    let k = match unit.trim() {
        "" | "B" => 1.0,
        "k" | "K" | "kB" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1_048_576.0,
        "GiB" => 1_073_741_824.0,
        u => return Err(format!("{s}: unknown size unit '{u}' (B, kB, MB, GB, KiB, MiB, GiB)")),
    };
    Ok((n * k) as u64)
}

/// The default filter: TCP on the acceptor ports.
fn default_filter(ports: &[u16]) -> String {
    let p: Vec<String> = ports.iter().map(|p| format!("port {p}")).collect();
    format!("tcp and ({})", p.join(" or "))
}

/// What a run needs besides its source.
struct Run<'a> {
    a: &'a LiveArgs,
    cfg: AnalysisConfig,
    stop: Stop,
    counters: Arc<Counters>,
    name: String,
    filter: String,
}

pub(crate) fn run(a: &LiveArgs) -> Result<u8> {
    let cfg = a.analysis.config();
    let stop = Stop::with_signals().context("installing the SIGINT/SIGTERM handlers")?;
    let counters = Arc::new(Counters::default());
    let deadline = Deadline::after(a.duration);
    let filter = a.filter.clone().unwrap_or_else(|| default_filter(&cfg.ports));
    let ring = a.write.as_ref().map(|path| {
        let rc =
            RingConfig { path: path.clone(), size: a.rotate_size, seconds: a.rotate_seconds, count: a.rotate_count };
        Ring::new(rc, a.snaplen)
    });
    if let Some(file) = &a.replay {
        let Some(reader) = open(file, false) else { return Ok(exit::INPUT) };
        let src = Replay::new(reader, a.speed, stop.clone(), deadline, Arc::clone(&counters));
        let name = file.display().to_string();
        let r = Run { a, cfg, stop, counters, name, filter: String::new() };
        return r.go(Tee::new(src, ring));
    }
    let iface = a.interface.clone().unwrap_or_default();
    interface(Run { a, cfg, stop, counters, name: iface, filter }, deadline, ring)
}

#[cfg(feature = "live")]
fn interface(r: Run<'_>, deadline: Deadline, ring: Option<Ring>) -> Result<u8> {
    use lnetcap_live::iface::{IfaceOptions, Interface};
    let o = IfaceOptions {
        name: r.name.clone(),
        snaplen: r.a.snaplen.max(64),
        filter: r.filter.clone(),
        promisc: r.a.promisc,
        buffer_size: r.a.buffer_size.min(i32::MAX as u64) as u32,
    };
    match Interface::open(&o, r.stop.clone(), deadline, Arc::clone(&r.counters)) {
        Ok(src) => r.go(Tee::new(src, ring)),
        Err(e) => {
            eprintln!("lnetcap: {e}");
            Ok(if e.is_usage() { exit::USAGE } else { exit::INPUT })
        }
    }
}

#[cfg(not(feature = "live"))]
fn interface(r: Run<'_>, _deadline: Deadline, _ring: Option<Ring>) -> Result<u8> {
    eprintln!(
        "lnetcap: live capture on '{}' needs the `live` feature (libpcap), not compiled into this binary: \
         install libpcap-dev and rebuild with `cargo install --path . --features live` \
         (or `cargo build --release --features live`); --replay FILE works without it",
        r.name
    );
    Ok(exit::USAGE)
}

impl Run<'_> {
    /// Reads `src` until it ends or the run is stopped, with the views, then writes the
    /// outputs.
    fn go<S: PacketSource>(self, mut src: Tee<S>) -> Result<u8> {
        let a = self.a;
        let o = &a.output;
        let Some(mut sink) = Outputs::open(o, false)? else { return Ok(exit::USAGE) };
        let board = Board::default();
        let to_stdout = [&o.json, &o.rpcs].iter().any(|p| p.as_ref().is_some_and(|p| p.as_os_str() == "-"));
        let tui = !a.no_tui && !o.quiet && !to_stdout && std::io::stdout().is_terminal();
        let server = a.prometheus.as_deref().map(|addr| Server::start(addr, board.clone())).transpose()?;
        if let (Some(s), false) = (&server, o.quiet) {
            eprintln!("lnetcap: serving metrics on http://{}/metrics", s.addr);
        }
        if !o.quiet {
            eprintln!(
                "lnetcap: capturing on {} ({}snaplen {}); Ctrl-C or SIGTERM stops and writes the report",
                self.name,
                if self.filter.is_empty() { String::new() } else { format!("filter '{}', ", self.filter) },
                a.snaplen
            );
        }
        let view_thread = if tui { Some(tui::spawn(board.clone(), self.stop.clone())?) } else { None };
        let started = Instant::now();
        let mut fa = FileAnalysis::new(&self.name, &self.cfg);
        let mut look = |snap: lnetcap_analysis::Snapshot<'_>| {
            let report = snap.report();
            let v = LiveView::new(&self.name, &report, snap.last_ns(), &self.counters, started.elapsed().as_secs_f64());
            if !tui && !o.quiet {
                eprint!("{}", lines::lines(&v));
            }
            board.publish(v);
        };
        let mut quiet = Quiet;
        let mut stderr = Stderr::new(false);
        let obs: &mut dyn Observer = if tui { &mut quiet } else { &mut stderr };
        let read = fa.read_live(&mut src, &mut sink, obs, &self.cfg, self.a.refresh, &mut look);
        if read.as_ref().map_or(true, |complete| !complete) {
            self.stop.set(StopReason::Error);
        }
        self.stop.set(StopReason::Duration);
        if let Some(t) = view_thread {
            let _ = t.join();
        }
        let complete = read?;
        let duration_s = started.elapsed().as_secs_f64();
        let ring = src.finish();
        let mut analysis = Analysis::new(self.cfg.clone());
        analysis.add_file(fa, complete, &mut sink)?;
        let mut report = analysis.finish();
        let live = self.capture(duration_s);
        if live.dropped + live.dropped_interface > 0 {
            eprintln!(
                "lnetcap: the capture dropped {} packets ({} buffer full, {} by the interface): the analysis did not see them; \
                 raise --buffer-size or narrow --filter",
                live.dropped + live.dropped_interface,
                live.dropped,
                live.dropped_interface
            );
        }
        if let Some(f) = report.files.first_mut() {
            f.live = Some(live);
        }
        if let Some(s) = server {
            s.stop();
        }
        let mut code = if complete { exit::OK } else { exit::INPUT };
        match ring {
            Ok(files) if !o.quiet => {
                for f in files {
                    eprintln!("lnetcap: wrote {}", f.display());
                }
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("lnetcap: --write: {e}");
                code = exit::RUN;
            }
        }
        write_outputs(o, sink, &report, code)
    }

    /// The report's record of the capture.
    fn capture(&self, duration_s: f64) -> LiveCapture {
        LiveCapture {
            interface: self.name.clone(),
            filter: self.filter.clone(),
            snaplen: self.a.snaplen,
            received: Counters::get(&self.counters.received),
            dropped: Counters::get(&self.counters.dropped),
            dropped_interface: Counters::get(&self.counters.dropped_interface),
            duration_s,
            stopped_by: self.stop.reason().unwrap_or(StopReason::Duration).as_str().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(default_filter(&[988, 1988]), "tcp and (port 988 or port 1988)");
    }
}
