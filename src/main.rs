//! `lnetcap`: Lustre LNet (socklnd) capture analyzer. The thin CLI: argument parsing,
//! files, output and exit codes; all analysis lives in the library crates.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod analyze;
mod decode;
mod input;
mod synth;

/// Exit codes (also documented in README.md).
pub(crate) mod exit {
    /// Success: every input was read to its end.
    pub const OK: u8 = 0;
    /// An input could not be opened, or could not be read to its end (truncated, not a
    /// capture, I/O error). What could be read was still decoded and reported.
    pub const INPUT: u8 = 1;
    /// Command-line usage error.
    pub const USAGE: u8 = 2;
}

#[derive(Parser, Debug)]
#[command(name = "lnetcap", version, about = "Lustre LNet (socklnd) capture analyzer: decode socklnd/LNet/PtlRPC from tcpdump captures", long_about = None)]
#[command(
    after_help = "Exit codes: 0 success; 1 an input could not be opened or read to its end (what was read is still reported); 2 usage error."
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
    /// Decode every socklnd / LNet / PtlRPC message of one or more captures.
    Decode(decode::DecodeArgs),
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
        Cmd::Decode(a) => decode::run(&a),
        Cmd::Synth(a) => synth::run(&a),
    };
    match res {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if e.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe) {
                return ExitCode::from(exit::OK);
            }
            let _ = io::stdout().flush();
            eprintln!("lnetcap: {e:#}");
            ExitCode::from(exit::INPUT)
        }
    }
}
