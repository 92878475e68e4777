//! `lnetcap synth`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub(crate) struct SynthArgs {
    /// Scenario name.
    #[arg(long)]
    pub scenario: String,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output capture.
    #[arg(short = 'o', long)]
    pub output: PathBuf,
}

pub(crate) fn run(_a: &SynthArgs) -> Result<u8> {
    anyhow::bail!("synth: not yet available")
}
