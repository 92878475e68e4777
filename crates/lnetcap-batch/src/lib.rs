//! lnetcap-batch: archives of captures in, one dataset out.
//!
//! - [`discover`]: PATHS (files, directories, globs, `@lists`) to inputs, judged by
//!   content, each with its identity (size, mtime, hashes of its first and last MiB).
//! - [`plan`]: inputs to units: rotated rings grouped by name and first packets,
//!   archives one unit each; a size-balanced share of units per shard.
//! - [`chain`]: a ring read as one stream, each cut checked as it is crossed.
//! - [`archive`]: tar members as streams, never unpacked.
//! - [`run`]: one unit through the analysis entry point (lnetcap-analysis) into its
//!   reports and table partitions.
//! - [`manifest`]: what DIR holds, so a rerun redoes only what changed.
//! - [`dataset`]: the inputs table and index.html of DIR; merging shard directories.
//! - [`slurm`]: the job array and the dependent merge job for a Slurm cluster.
//!
//! Units run in parallel on a rayon pool; each unit's memory is the analysis's
//! (bounded by its named limits), so a run's memory is bounded by the pool size.

pub mod archive;
pub mod chain;
pub mod dataset;
pub mod discover;
pub mod manifest;
pub mod plan;
pub mod run;
pub mod slurm;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;
use lnetcap_analysis::AnalysisConfig;
use rayon::prelude::*;

use crate::discover::{Content, Input};
use crate::manifest::{InputRecord, Manifest, Status, UnitRecord, MANIFEST_VERSION};
use crate::plan::{Survey, Unit};

/// How a run is told about: a progress bar over the input bytes and message lines.
pub trait Ui: Sync {
    /// The bytes to analyse in this run.
    fn start(&self, _total_bytes: u64) {}
    /// Bytes analysed since the last call.
    fn advance(&self, _bytes: u64) {}
    /// A line for the user (a warning about one input).
    fn message(&self, _line: &str) {}
    /// The run is over.
    fn finish(&self) {}
}

/// A UI that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Ui for Silent {}

/// How to run a batch.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// The analysis of each capture.
    pub analysis: AnalysisConfig,
    /// Write report.html per capture.
    pub html: bool,
    /// Group rotated sets.
    pub group: bool,
    /// Redo every unit, done or not.
    pub force: bool,
    /// Worker threads (0: one per core).
    pub jobs: usize,
    /// Only shard K of N (0-based).
    pub shard: Option<(usize, usize)>,
}

impl BatchOptions {
    /// What results depend on besides the inputs: a manifest written under other
    /// settings is not reused.
    pub fn settings(&self) -> String {
        let a = &self.analysis;
        format!(
            "lnetcap {}; ports {:?}; detect {}; interval_ns {}; link_rate {:?}; html {}; group {}",
            env!("CARGO_PKG_VERSION"),
            a.ports,
            a.detect,
            a.interval_ns,
            a.link_rate,
            self.html,
            self.group
        )
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Inputs found.
    pub inputs: usize,
    /// Units of this run (this shard's).
    pub units: usize,
    /// Units analysed now.
    pub analysed: usize,
    /// Units already done and unchanged.
    pub up_to_date: usize,
    /// Inputs that failed.
    pub failed: usize,
    /// Inputs skipped (not captures).
    pub skipped: usize,
    /// Captures in DIR.
    pub captures: usize,
    /// Problems with PATHS themselves (no such file, a glob matching nothing).
    pub problems: Vec<String>,
    /// Notes (a manifest not reused and why).
    pub notes: Vec<String>,
}

/// Runs a batch over `paths` into `dir`.
pub fn run_batch(paths: &[PathBuf], dir: &Path, opts: &BatchOptions, ui: &dyn Ui) -> anyhow::Result<Outcome> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.jobs).build()?;
    let (inputs, problems) = discover::discover(paths, Some(dir));
    let surveys: BTreeMap<usize, Result<Survey, String>> = pool.install(|| {
        inputs
            .par_iter()
            .enumerate()
            .filter(|(_, i)| i.content == Ok(Content::Capture))
            .map(|(n, i)| (n, plan::survey(&i.path)))
            .collect()
    });
    let good: BTreeMap<usize, Survey> =
        surveys.iter().filter_map(|(n, s)| s.as_ref().ok().map(|s| (*n, s.clone()))).collect();
    let units = plan::units(&inputs, &good, opts.group);
    let mine = match opts.shard {
        Some((k, n)) => plan::shard(&units, k, n),
        None => (0..units.len()).collect(),
    };
    let mut out = Outcome { inputs: inputs.len(), units: mine.len(), problems, ..Outcome::default() };
    let (old, note) = Manifest::load(dir);
    out.notes.extend(note);
    let settings = opts.settings();
    let old = old.filter(|m| {
        let same = m.settings == settings;
        if !same {
            out.notes.push(format!(
                "{}: written with other settings; analysing afresh",
                dir.join("manifest.json").display()
            ));
        }
        same
    });
    let old_units: BTreeMap<&str, &UnitRecord> =
        old.iter().flat_map(|m| &m.units).map(|u| (u.key.as_str(), u)).collect();
    let (done, todo): (Vec<usize>, Vec<usize>) = mine.iter().partition(|&&u| {
        !opts.force && old_units.get(units[u].key.as_str()).is_some_and(|r| r.inputs == units[u].identities(&inputs))
    });
    out.analysed = todo.len();
    out.up_to_date = done.len();
    ui.start(todo.iter().map(|&u| units[u].bytes).sum());
    let ctx = run::Ctx { cfg: &opts.analysis, dir, html: opts.html, ui };
    let results: Vec<anyhow::Result<UnitRecord>> =
        pool.install(|| todo.par_iter().map(|&u| run::analyse(&units[u], &inputs, &good, &ctx)).collect());
    ui.finish();
    let mut records: Vec<UnitRecord> = done.iter().map(|&u| (*old_units[units[u].key.as_str()]).clone()).collect();
    for r in results {
        records.push(r?);
    }
    let mut manifest = Manifest {
        manifest_version: MANIFEST_VERSION,
        settings,
        inputs: input_records(&inputs, &surveys, &units, &mine, &records, opts.shard),
        units: records,
    };
    manifest.sort();
    remove_stale(dir, old.as_ref(), &manifest);
    manifest.save(dir)?;
    dataset::finalize(dir, &manifest)?;
    out.failed = manifest.failed_inputs();
    out.skipped = manifest.inputs_with(Status::Skipped);
    out.captures = manifest.units.iter().map(|u| u.captures.len()).sum();
    Ok(out)
}

/// Removes the outputs of captures the old manifest had and the new one has not.
fn remove_stale(dir: &Path, old: Option<&Manifest>, new: &Manifest) {
    let keep: BTreeSet<&str> = new.units.iter().flat_map(|u| &u.captures).map(|c| c.id.as_str()).collect();
    for c in old.iter().flat_map(|m| &m.units).flat_map(|u| &u.captures) {
        if !keep.contains(c.id.as_str()) {
            run::remove_capture(dir, &c.id);
        }
    }
}

/// Every input of this run (of this shard: its units' inputs, and shard 0 the inputs of
/// no unit), with its status.
fn input_records(
    inputs: &[Input],
    surveys: &BTreeMap<usize, Result<Survey, String>>,
    units: &[Unit],
    mine: &[usize],
    records: &[UnitRecord],
    shard: Option<(usize, usize)>,
) -> Vec<InputRecord> {
    // input → (its unit's key, the unit is this shard's)
    let mut unit_of: BTreeMap<usize, (&str, bool)> = BTreeMap::new();
    for (u, unit) in units.iter().enumerate() {
        for i in unit.inputs() {
            unit_of.insert(i, (unit.key.as_str(), mine.contains(&u)));
        }
    }
    let errors: BTreeMap<String, Vec<String>> =
        records.iter().flat_map(|r| &r.errors).fold(BTreeMap::new(), |mut m, (path, e)| {
            m.entry(path.clone()).or_default().push(e.clone());
            m
        });
    let mut out = Vec::new();
    for (n, inp) in inputs.iter().enumerate() {
        let unit = unit_of.get(&n).copied();
        let another_shards = match unit {
            Some((_, mine)) => !mine,
            None => shard.is_some_and(|(k, _)| k != 0),
        };
        if another_shards {
            continue;
        }
        let (status, error) = match (&inp.content, surveys.get(&n)) {
            (Err(e), _) => (Status::Failed, Some(e.clone())),
            (Ok(_), _) if inp.skipped() => (Status::Skipped, Some("not a capture".into())),
            (Ok(Content::Other), _) => (Status::Failed, Some("not a capture: no pcap, pcapng or tar header".into())),
            (Ok(_), Some(Err(e))) => (Status::Failed, Some(e.clone())),
            _ => match errors.get(&inp.key()) {
                Some(e) => (Status::Failed, Some(e.join("; "))),
                None => (Status::Ok, None),
            },
        };
        out.push(InputRecord {
            path: inp.key(),
            identity: inp.identity.clone(),
            status,
            error,
            unit: unit.map(|(key, _)| key.to_string()),
        });
    }
    out
}
