//! `lnetcap batch`: archives of captures into one dataset, on every core, resumable,
//! sharded for Slurm job arrays.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lnetcap_batch::slurm::{self, Ended, Job};
use lnetcap_batch::{dataset, run_batch, BatchOptions, Outcome, Ui};

use crate::analyze::AnalysisArgs;
use crate::exit;

#[derive(Args, Debug)]
pub(crate) struct BatchArgs {
    /// Captures (pcap/pcapng, plain, .gz or .zst), tar archives of them (.tar, .tar.gz,
    /// .tar.zst), directories (searched recursively), globs, `@FILE` (one path per
    /// line). With --merge: the shard directories to join.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The dataset directory (created if missing; rerunning into it redoes only what
    /// changed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Worker threads, one unit (a capture, a rotated set, an archive) each. Default:
    /// one per core.
    #[arg(long, short = 'j', value_name = "N")]
    pub jobs: Option<usize>,
    /// Analyse every file by itself: do not group rotated sets.
    #[arg(long)]
    pub no_group: bool,
    /// Redo every unit, even those the manifest records as done and unchanged.
    #[arg(long)]
    pub force: bool,
    /// Also write report.html beside each capture's report.json.
    #[arg(long)]
    pub html: bool,
    /// Analyse only shard K of N (0-based): a deterministic, size-balanced share of the
    /// units. Join the shards' directories with --merge.
    #[arg(long, value_name = "K/N", value_parser = parse_shard, conflicts_with_all = ["merge", "slurm"])]
    pub shard: Option<(usize, usize)>,
    /// Join the batch directories given as PATHS (shards) into --out.
    #[arg(long, conflicts_with = "slurm")]
    pub merge: bool,
    /// Run on Slurm: a job array of --shards tasks (each `--shard K/N` into
    /// DIR/shards/K) and a merge job after it (afterok); scripts are written to
    /// DIR/slurm/ and submitted with sbatch.
    #[arg(long)]
    pub slurm: bool,
    /// Array tasks for --slurm.
    #[arg(long, value_name = "N", default_value_t = 4, requires = "slurm")]
    pub shards: usize,
    /// Extra sbatch options for --slurm, e.g. '--partition=batch --time=2:00:00'
    /// (each becomes an #SBATCH line of both scripts).
    #[arg(long, value_name = "OPTS", requires = "slurm", allow_hyphen_values = true)]
    pub slurm_opts: Option<String>,
    /// With --slurm: write the scripts, do not submit.
    #[arg(long, requires = "slurm")]
    pub dry_run: bool,
    /// With --slurm: wait for the jobs and report how each ended (exit 4 when a shard
    /// failed or the merge did not run).
    #[arg(long, requires = "slurm", conflicts_with = "dry_run")]
    pub wait: bool,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// No progress bar and no summary lines (failures are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let (k, n) = s.split_once('/').ok_or("expected K/N, e.g. 0/4")?;
    let k: usize = k.trim().parse().map_err(|_| format!("K in {s} is not a number"))?;
    let n: usize = n.trim().parse().map_err(|_| format!("N in {s} is not a number"))?;
    if n == 0 || k >= n {
        return Err(format!("shard {s}: K must be 0 … N-1 and N at least 1"));
    }
    Ok((k, n))
}

/// The progress bar over the bytes to analyse (stderr, TTY only) and message lines.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
}

impl Ui for Bar {
    fn start(&self, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
        }
    }

    fn advance(&self, bytes: u64) {
        if let Some(b) = &self.bar {
            b.inc(bytes);
        }
    }

    fn message(&self, line: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.suspend(|| eprintln!("lnetcap: {line}")),
            None => eprintln!("lnetcap: {line}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

fn bar(quiet: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    crate::input::bytes_bar("batch", 0)
}

pub(crate) fn run(a: &BatchArgs) -> Result<u8> {
    let res = if a.merge {
        merge(a)
    } else if a.slurm {
        on_slurm(a)
    } else {
        local(a)
    };
    match res {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("lnetcap: batch: {e:#}");
            Ok(exit::RUN)
        }
    }
}

fn options(a: &BatchArgs) -> BatchOptions {
    BatchOptions {
        analysis: a.analysis.config(),
        html: a.html,
        group: !a.no_group,
        force: a.force,
        jobs: a.jobs.unwrap_or(0),
        shard: a.shard,
    }
}

fn local(a: &BatchArgs) -> Result<u8> {
    let ui = Bar { bar: bar(a.quiet), quiet: a.quiet };
    let t0 = std::time::Instant::now();
    let out = run_batch(&a.paths, &a.out, &options(a), &ui)?;
    report(a, &out, t0.elapsed().as_secs_f64());
    Ok(if out.failed > 0 || !out.problems.is_empty() { exit::INPUT } else { exit::OK })
}

fn report(a: &BatchArgs, o: &Outcome, secs: f64) {
    for p in &o.problems {
        eprintln!("lnetcap: {p}");
    }
    if a.quiet {
        return;
    }
    for n in &o.notes {
        eprintln!("lnetcap: {n}");
    }
    eprintln!(
        "lnetcap: batch: {} inputs, {} units: {} analysed, {} up to date; {} captures in {}; {} inputs failed, {} skipped ({:.1} s)",
        o.inputs,
        o.units,
        o.analysed,
        o.up_to_date,
        o.captures,
        a.out.display(),
        o.failed,
        o.skipped,
        secs
    );
    if o.failed > 0 {
        eprintln!("lnetcap: the failed inputs and why: {}", a.out.join("index.html").display());
    }
}

fn merge(a: &BatchArgs) -> Result<u8> {
    let m = dataset::merge(&a.paths, &a.out)?;
    let failed = m.failed_inputs();
    if !a.quiet {
        let captures: usize = m.units.iter().map(|u| u.captures.len()).sum();
        eprintln!(
            "lnetcap: merged {} shard directories into {}: {} units, {} captures, {failed} inputs failed",
            a.paths.len(),
            a.out.display(),
            m.units.len(),
            captures
        );
    }
    Ok(if failed > 0 { exit::INPUT } else { exit::OK })
}

/// The arguments every shard runs with.
fn shard_args(a: &BatchArgs) -> Vec<String> {
    let mut v: Vec<String> = a.paths.iter().map(|p| p.display().to_string()).collect();
    let an = &a.analysis;
    for p in &an.ports {
        v.extend(["--port".into(), p.to_string()]);
    }
    v.extend(["--interval-ms".into(), an.interval_ms.to_string()]);
    if let Some(r) = an.link_rate {
        v.extend(["--link-rate".into(), format!("{r}B/s")]);
    }
    for (flag, on) in
        [("--no-detect", an.no_detect), ("--no-group", a.no_group), ("--force", a.force), ("--html", a.html)]
    {
        if on {
            v.push(flag.into());
        }
    }
    if let Some(j) = a.jobs {
        v.extend(["--jobs".into(), j.to_string()]);
    }
    v
}

fn on_slurm(a: &BatchArgs) -> Result<u8> {
    let abs = |p: &PathBuf| std::path::absolute(p).unwrap_or_else(|_| p.clone());
    let job = Job {
        exe: std::env::current_exe()?,
        args: shard_args(a),
        dir: abs(&a.out),
        workdir: std::env::current_dir()?,
        shards: a.shards.max(1),
        options: a.slurm_opts.as_deref().unwrap_or("").split_whitespace().map(str::to_string).collect(),
    };
    let (array, merge) = slurm::write_scripts(&job)?;
    if a.dry_run {
        println!("{}\n{}", array.display(), merge.display());
        eprintln!("lnetcap: wrote {} and {} (not submitted: --dry-run)", array.display(), merge.display());
        return Ok(exit::OK);
    }
    let (aid, mid) = slurm::submit(&array, &merge)?;
    println!("{aid} {mid}");
    eprintln!(
        "lnetcap: submitted job array {aid} ({} shards) and merge job {mid} (after the array succeeds)\n\
         lnetcap: follow with: squeue -j {aid},{mid}; logs in {}; the dataset will be {}",
        job.shards,
        job.dir.join("slurm").display(),
        job.dir.display()
    );
    if !a.wait {
        return Ok(exit::OK);
    }
    let (tasks, merged) = slurm::wait(&aid, &mid)?;
    Ok(judge(a, &tasks, &merged))
}

/// How the cluster run ended, told and as an exit code.
fn judge(a: &BatchArgs, tasks: &[Ended], merged: &[Ended]) -> u8 {
    let mut ok = true;
    for t in tasks.iter().filter(|t| t.state != "COMPLETED") {
        ok = false;
        eprintln!("lnetcap: shard task {} {} ({}, exit {})", t.id, t.state, t.reason, t.exit);
    }
    match merged.first() {
        Some(m) if m.state == "COMPLETED" && ok => {
            let (m, _) = lnetcap_batch::manifest::Manifest::load(&a.out);
            let failed = m.map_or(0, |m| m.failed_inputs());
            eprintln!("lnetcap: merge job {} COMPLETED; {failed} inputs failed", merged[0].id);
            if failed > 0 {
                exit::INPUT
            } else {
                exit::OK
            }
        }
        Some(m) => {
            eprintln!("lnetcap: merge job {} {} ({}): the dataset was not merged", m.id, m.state, m.reason);
            exit::RUN
        }
        None => {
            eprintln!("lnetcap: merge job unknown to scontrol");
            exit::RUN
        }
    }
}
