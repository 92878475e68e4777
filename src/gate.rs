//! `lnetcap gate`: `--fail-if` over stored reports (`analyze --json`), for CI that keeps
//! the reports of a run and gates later, and what `analyze --fail-if` and `diff` share.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use lnetcap_analysis::REPORT_SCHEMA_VERSION;
use lnetcap_report::gate::{check, Failure, Gate};
use serde_json::Value;

use crate::exit;

#[derive(Args, Debug)]
pub(crate) struct GateArgs {
    /// JSON reports written by `analyze --json`.
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// Exit 3 when EXPR holds for any peer of any report (as `analyze --fail-if`);
    /// repeatable.
    #[arg(long = "fail-if", value_name = "EXPR", value_parser = Gate::parse, required = true)]
    pub fail_if: Vec<Gate>,
}

/// Reads a JSON report.
pub(crate) fn read_report(p: &Path) -> Result<Value> {
    let text = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    let v: Value = serde_json::from_slice(&text).with_context(|| format!("{}: not a JSON report", p.display()))?;
    anyhow::ensure!(
        v.get("peers").is_some_and(Value::is_array),
        "{}: not an lnetcap JSON report (no peers array)",
        p.display()
    );
    Ok(v)
}

/// A report of another schema_version than this lnetcap writes: its fields may mean
/// something else, so it is neither compared nor gated.
pub(crate) fn other_schema(p: &Path, v: &Value, remedy: &str) -> Option<String> {
    let have = v.get("schema_version").and_then(Value::as_u64);
    (have != Some(u64::from(REPORT_SCHEMA_VERSION))).then(|| {
        format!(
            "{}: report schema_version {}, this lnetcap reads {REPORT_SCHEMA_VERSION}: {remedy}",
            p.display(),
            have.map_or("missing".to_string(), |h| h.to_string())
        )
    })
}

/// Prints the gates that held, on stderr.
pub(crate) fn print_failures(failures: &[Failure]) {
    for f in failures {
        let values = if f.values.is_empty() { String::new() } else { format!(": {}", f.values.join(", ")) };
        eprintln!("lnetcap: gate failed: --fail-if '{}' holds for {}{values}", f.gate, f.peer);
    }
}

pub(crate) fn run(a: &GateArgs) -> Result<u8> {
    let mut code = exit::OK;
    for p in &a.reports {
        let v = read_report(p)?;
        if let Some(why) = other_schema(p, &v, "gate the report with the lnetcap that wrote it, or analyze again") {
            eprintln!("lnetcap gate: {why}");
            return Ok(exit::USAGE);
        }
        match check(&a.fail_if, &v) {
            Err(e) => {
                eprintln!("lnetcap gate: {}: {e}", p.display());
                return Ok(exit::USAGE);
            }
            Ok(failures) => {
                print_failures(&failures);
                if !failures.is_empty() {
                    code = exit::GATE;
                }
            }
        }
    }
    Ok(code)
}
