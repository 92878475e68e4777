//! `lnetcap diff`.

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_report::diff::{diff, parse_tolerance, write_text, Tolerance};

use crate::exit;
use crate::gate::{other_schema, read_report};

#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// The reference report (`analyze --json`).
    pub base: PathBuf,
    /// The report to check against it.
    pub new: PathBuf,
    /// Tolerance of a metric: `NAME=5%` (relative to the base) or `NAME=0.02` (absolute,
    /// in the field's unit); repeatable. Compared by default: rpcs (0), rpcs_partial (0),
    /// throughput (5%), rif (5%), latency_p50 (10%), latency_p99 (10%), rtt (5%),
    /// retransmits (10%), t_model (5%), efficiency (0.05); rif, rtt and t_model are
    /// reported, never regressions. Any other numeric field of docs/analyze-json.md
    /// (`tcp.dup_acks=0`) is compared when given a tolerance.
    #[arg(long = "tolerance", value_name = "NAME=VALUE", value_parser = parse_tolerance)]
    pub tolerances: Vec<(String, Tolerance)>,
    /// Show every compared value, not only the changed ones.
    #[arg(long)]
    pub all: bool,
    /// Write the comparison as JSON here (`-` for stdout instead of the text).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub(crate) fn run(a: &DiffArgs) -> Result<u8> {
    let (base, new) = (read_report(&a.base)?, read_report(&a.new)?);
    for (p, v) in [(&a.base, &base), (&a.new, &new)] {
        if let Some(why) = other_schema(p, v, "analyze both captures with the same lnetcap") {
            eprintln!("lnetcap diff: {why}");
            return Ok(exit::USAGE);
        }
    }
    let tol: BTreeMap<String, Tolerance> = a.tolerances.iter().cloned().collect();
    let d = diff(&base, &new, &tol);
    let to_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if let Some(p) = &a.json {
        let w: Box<dyn Write> = if to_stdout {
            Box::new(io::stdout())
        } else {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        };
        let mut w = BufWriter::new(w);
        serde_json::to_writer_pretty(&mut w, &d)?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
    if !to_stdout {
        let stdout = io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        write_text(&mut out, &d, a.all)?;
        out.flush()?;
    }
    Ok(if d.regressions > 0 { exit::GATE } else { exit::OK })
}
