//! `lnetcap`: Lustre LNet (socklnd) capture analyzer. The thin CLI: argument parsing,
//! files, output and exit codes; all analysis lives in the library crates.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod analyze;
mod batch;
mod decode;
mod diff;
mod gate;
mod input;
mod live;
mod synth;

/// Exit codes (also documented in README.md).
pub(crate) mod exit {
    /// Success: every input was read to its end.
    pub const OK: u8 = 0;
    /// An input could not be opened, or could not be read to its end (truncated, not a
    /// capture, I/O error). What could be read was still decoded and reported.
    pub const INPUT: u8 = 1;
    /// Command-line usage error (also a `--fail-if` expression that does not parse or
    /// names no field of the report, and a stored report of another schema_version given
    /// to `diff` or `gate`).
    pub const USAGE: u8 = 2;
    /// A gate failed: a `--fail-if` expression held for a peer, or `diff` found a
    /// regression. (1 takes precedence: an input not read to its end.)
    pub const GATE: u8 = 3;
    /// `batch`: the run itself failed: an output could not be written, a shard
    /// directory to merge is missing, or on Slurm a shard failed and the merge did not
    /// run.
    pub const RUN: u8 = 4;
    /// `analyze`: stopped by SIGINT or SIGTERM; the outputs were written for what was
    /// read and say so (`"interrupted": true`, each file's `interrupted_at`). A second
    /// signal exits at once with 128 + its number (130 for SIGINT), writing nothing.
    pub const INTERRUPTED: u8 = 5;
}

#[derive(Parser, Debug)]
#[command(name = "lnetcap", version, about = "Lustre LNet (socklnd) capture analyzer: decode socklnd/LNet/PtlRPC from tcpdump captures", long_about = None)]
#[command(
    after_help = "Exit codes: 0 success; 1 an input could not be opened or read to its end (what was read is still reported); 2 usage error; 3 a gate failed (--fail-if held, or diff found a regression); 4 batch: the run itself failed (an output not writable, a shard failed on Slurm); 5 analyze was interrupted by a signal (the report covers what was read)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Reconstruct every RPC per peer pair, with phases, RPCs and LNet messages in flight
    /// and throughput.
    Analyze(analyze::AnalyzeArgs),
    /// Analyse archives of captures into one dataset (reports, Parquet tables,
    /// index.html): rotated sets grouped, on every core, resumable, sharded for Slurm.
    Batch(batch::BatchArgs),
    /// Watch an interface (or replay a capture at its pace): a live view per peer pair,
    /// Prometheus metrics, a rotated pcap ring, and at the end the report of `analyze`.
    Live(live::LiveArgs),
    /// Decode every socklnd / LNet / PtlRPC message of one or more captures.
    Decode(decode::DecodeArgs),
    /// Compare two JSON reports (`analyze --json`): what changed per peer, and whether
    /// anything regressed beyond its tolerance (exit 3).
    Diff(diff::DiffArgs),
    /// Check `--fail-if` gates against stored JSON reports (`analyze --json`): exit 3 when
    /// one holds, 2 for a report of another schema_version.
    Gate(gate::GateArgs),
    /// Write a deterministic scenario capture and its ground-truth file.
    Synth(synth::SynthArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let res = match cli.cmd {
        Cmd::Analyze(a) => analyze::run(&a),
        Cmd::Batch(a) => batch::run(&a),
        Cmd::Live(a) => live::run(&a),
        Cmd::Decode(a) => decode::run(&a),
        Cmd::Diff(a) => diff::run(&a),
        Cmd::Gate(a) => gate::run(&a),
        Cmd::Synth(a) => synth::run(&a),
    };
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // A reader that stopped early (`| head`): a write error from std, or from
            // serde_json, which reports the one its writer gave as its own error type (a
            // JSON report larger than the buffers it is written through).
            let pipe = io::ErrorKind::BrokenPipe;
            if e.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == pipe)
                || e.downcast_ref::<serde_json::Error>().and_then(serde_json::Error::io_error_kind) == Some(pipe)
            {
                return ExitCode::from(exit::OK);
            }
            let _ = io::stdout().flush();
            eprintln!("lnetcap: {e:#}");
            ExitCode::from(exit::INPUT)
        }
    }
}
