//! Scale-out on Slurm: a job array whose task K runs `batch --shard K/N` into
//! `DIR/shards/K`, and a merge job that runs after the whole array succeeded
//! (`--dependency=afterok:<array>`). Both scripts are written to `DIR/slurm/` so a site
//! can edit and resubmit them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

/// How often `--wait` asks squeue.
pub const POLL: Duration = Duration::from_secs(1);

/// A batch to run as a job array.
#[derive(Debug, Clone)]
pub struct Job {
    /// The lnetcap executable the tasks run.
    pub exe: PathBuf,
    /// `batch` arguments of every shard (PATHS and options; not `--out`, `--shard`).
    pub args: Vec<String>,
    /// The output directory.
    pub dir: PathBuf,
    /// Directory the jobs run in (where relative PATHS resolve).
    pub workdir: PathBuf,
    /// Number of shards (array tasks).
    pub shards: usize,
    /// Extra sbatch options, one `#SBATCH` line each.
    pub options: Vec<String>,
}

/// Quotes a word for the shell.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:,@%+".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn words(w: &[String]) -> String {
    w.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// The end of both scripts: exit 1 (some inputs failed) is a success for Slurm, so the
/// merge still runs and lists them; any other failure fails the job.
const TOLERATE_FAILED_INPUTS: &str = "rc=$?\n\
     # 1: some inputs failed; they are recorded in the manifest and the merge reports them.\n\
     if [ \"$rc\" -eq 1 ]; then exit 0; fi\n\
     exit \"$rc\"\n";

fn header(job: &Job, name: &str, out: &str) -> String {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!("#SBATCH --job-name={name}\n#SBATCH --chdir={}\n", quote(&job.workdir.display().to_string())));
    s.push_str(&format!("#SBATCH --output={}\n", quote(&job.dir.join("slurm").join(out).display().to_string())));
    for o in &job.options {
        s.push_str(&format!("#SBATCH {o}\n"));
    }
    s
}

/// The job array's script.
pub fn array_script(job: &Job) -> String {
    let mut s = header(job, "lnetcap-batch", "shard-%a.out");
    s.push_str(&format!("#SBATCH --array=0-{}\n", job.shards.saturating_sub(1)));
    s.push_str(&format!(
        "# Task K analyses shard K of {n} (a size-balanced share of the captures) into DIR/shards/K.\n\
         set -u\n\
         {exe} batch {args} --out {dir}/shards/\"$SLURM_ARRAY_TASK_ID\" --shard \"$SLURM_ARRAY_TASK_ID\"/{n} --quiet\n",
        n = job.shards,
        exe = quote(&job.exe.display().to_string()),
        args = words(&job.args),
        dir = quote(&job.dir.display().to_string()),
    ));
    s.push_str(TOLERATE_FAILED_INPUTS);
    s
}

/// The merge job's script.
pub fn merge_script(job: &Job) -> String {
    let mut s = header(job, "lnetcap-merge", "merge.out");
    let shards: Vec<String> =
        (0..job.shards).map(|k| job.dir.join("shards").join(k.to_string()).display().to_string()).collect();
    s.push_str(&format!(
        "# Runs after every array task succeeded: joins DIR/shards/* into DIR.\n\
         set -u\n\
         {} batch --merge {} --out {} --quiet\n",
        quote(&job.exe.display().to_string()),
        words(&shards),
        quote(&job.dir.display().to_string())
    ));
    s.push_str(TOLERATE_FAILED_INPUTS);
    s
}

/// Writes both scripts into `DIR/slurm/`; returns their paths.
pub fn write_scripts(job: &Job) -> anyhow::Result<(PathBuf, PathBuf)> {
    let sdir = job.dir.join("slurm");
    std::fs::create_dir_all(&sdir).with_context(|| format!("creating {}", sdir.display()))?;
    let a = sdir.join("array.sh");
    let m = sdir.join("merge.sh");
    crate::manifest::write_atomic(&a, array_script(job).as_bytes())?;
    crate::manifest::write_atomic(&m, merge_script(job).as_bytes())?;
    Ok((a, m))
}

fn sbatch(args: &[&str]) -> anyhow::Result<String> {
    let o = Command::new("sbatch")
        .arg("--parsable")
        .args(args)
        .output()
        .context("running sbatch (is Slurm's client installed and SLURM_CONF set?)")?;
    if !o.status.success() {
        bail!("sbatch {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim());
    }
    let out = String::from_utf8_lossy(&o.stdout);
    // --parsable prints "id" or "id;cluster".
    Ok(out.trim().split(';').next().unwrap_or("").to_string())
}

/// Submits the array, then the merge after it; returns their job ids.
pub fn submit(array: &Path, merge: &Path) -> anyhow::Result<(String, String)> {
    let a = sbatch(&[&array.display().to_string()])?;
    let m = sbatch(&[&format!("--dependency=afterok:{a}"), "--kill-on-invalid-dep=yes", &merge.display().to_string()])?;
    Ok((a, m))
}

/// A job (or array task) when it left the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// `12` or `12_3` for task 3 of array 12.
    pub id: String,
    /// JobState (COMPLETED, FAILED, CANCELLED, TIMEOUT, …).
    pub state: String,
    /// Reason (DependencyNeverSatisfied, NonZeroExitCode, None…).
    pub reason: String,
    /// ExitCode `code:signal`.
    pub exit: String,
}

/// Parses `scontrol show job -o` output: one line per job or array task.
pub fn parse_scontrol(text: &str) -> Vec<Ended> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| l.contains("JobId=")) {
        let field = |k: &str| {
            line.split_whitespace().find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('='))).unwrap_or("")
        };
        let id = match (field("ArrayJobId"), field("ArrayTaskId")) {
            ("", _) | (_, "") => field("JobId").to_string(),
            (a, t) => format!("{a}_{t}"),
        };
        out.push(Ended {
            id,
            state: field("JobState").into(),
            reason: field("Reason").into(),
            exit: field("ExitCode").into(),
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Waits until both jobs have left the queue; returns how each task and the merge ended.
pub fn wait(array: &str, merge: &str) -> anyhow::Result<(Vec<Ended>, Vec<Ended>)> {
    loop {
        let o = Command::new("squeue").args(["-h", "-o", "%i", "-j", &format!("{array},{merge}")]).output()?;
        if o.status.success() && String::from_utf8_lossy(&o.stdout).trim().is_empty() {
            break;
        }
        std::thread::sleep(POLL);
    }
    let show = |id: &str| -> anyhow::Result<Vec<Ended>> {
        let o = Command::new("scontrol").args(["show", "job", "-o", id]).output()?;
        if !o.status.success() {
            bail!("scontrol show job {id}: {}", String::from_utf8_lossy(&o.stderr).trim());
        }
        Ok(parse_scontrol(&String::from_utf8_lossy(&o.stdout)))
    };
    Ok((show(array)?, show(merge)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("a/b.pcap"), "a/b.pcap");
        assert_eq!(quote("it's here"), "'it'\\''s here'");
        assert_eq!(quote("*.pcap"), "'*.pcap'");
    }

    #[test]
    fn scontrol_lines() {
        // As Slurm 22.05 prints them (tests/tools/slurm-local.sh cluster).
        let text = "JobId=7 ArrayJobId=4 ArrayTaskId=3 JobName=lnetcap-batch UserId=root(0) JobState=COMPLETED Reason=None Dependency=(null) ExitCode=0:0\n\
                    JobId=6 ArrayJobId=4 ArrayTaskId=2 JobName=lnetcap-batch JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=2:0\n\
                    JobId=8 JobName=lnetcap-merge JobState=CANCELLED Reason=DependencyNeverSatisfied Dependency=afterok:4_*(failed) ExitCode=0:0\n";
        let e = parse_scontrol(text);
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0],
            Ended { id: "4_2".into(), state: "FAILED".into(), reason: "NonZeroExitCode".into(), exit: "2:0".into() }
        );
        assert_eq!(e[2].id, "8");
        assert_eq!(e[2].reason, "DependencyNeverSatisfied");
    }

    #[test]
    fn scripts_run_each_shard_and_merge_after() {
        let job = Job {
            exe: "/usr/bin/lnetcap".into(),
            args: vec!["caps/".into(), "--html".into()],
            dir: "/scratch/out".into(),
            workdir: "/home/u".into(),
            shards: 4,
            options: vec!["--partition=debug".into()],
        };
        let a = array_script(&job);
        assert!(a.contains("#SBATCH --array=0-3\n"), "{a}");
        assert!(a.contains("#SBATCH --partition=debug\n"));
        assert!(a.contains("--shard \"$SLURM_ARRAY_TASK_ID\"/4"));
        assert!(a.ends_with(TOLERATE_FAILED_INPUTS));
        let m = merge_script(&job);
        assert!(m.contains("--merge /scratch/out/shards/0 /scratch/out/shards/1 /scratch/out/shards/2 /scratch/out/shards/3 --out /scratch/out"), "{m}");
        assert!(m.ends_with(TOLERATE_FAILED_INPUTS));
    }
}
