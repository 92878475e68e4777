//! One unit analysed: its captures through the analysis entry point, their reports and
//! table partitions written, their summaries returned for the manifest.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use lnetcap_analysis::{Analysis, AnalysisConfig, FileAnalysis, Notice, Observer, Sink};
use lnetcap_capture::CaptureReader;
use lnetcap_report::index::FleetPeer;
use lnetcap_report::output::Staged;
use lnetcap_report::tables::{TableError, TableFormat, TableOut, TableSet};
use lnetcap_rpc::RpcRecord;

use crate::archive::{self, MemberSource};
use crate::chain::{Cursor, Piece};
use crate::discover::Input;
use crate::manifest::{CaptureRecord, UnitRecord};
use crate::plan::{output_id, Survey, Unit, UnitKind};
use crate::Ui;

/// The tables of the dataset, each a directory of partitions `capture=<id>`.
pub const TABLES: [&str; 4] = ["rpcs", "connections", "peers", "timeseries"];

/// Warnings printed per unit (the rest are counted in the reports' accounting).
const MAX_WARNINGS: u64 = 3;

/// What every unit of a run shares.
pub struct Ctx<'a> {
    /// Analysis options.
    pub cfg: &'a AnalysisConfig,
    /// The output directory.
    pub dir: &'a Path,
    /// Also write report.html.
    pub html: bool,
    /// Progress and messages.
    pub ui: &'a dyn Ui,
}

/// A partition file of `table` for capture `id`.
pub fn partition(dir: &Path, table: &str, id: &str) -> PathBuf {
    dir.join(table).join(format!("capture={id}"))
}

/// Removes a capture's report directory and partitions.
pub fn remove_capture(dir: &Path, id: &str) {
    let _ = std::fs::remove_dir_all(dir.join("captures").join(id));
    for t in TABLES {
        let _ = std::fs::remove_dir_all(partition(dir, t, id));
    }
}

/// Removes what a capture's report directory and partitions hold except `keep` (the
/// files about to be renamed over, and their temporaries): the previous run's outputs
/// that the new one does not replace, and temporaries a killed run left.
pub(crate) fn remove_capture_except(dir: &Path, id: &str, keep: &[PathBuf]) {
    // Compared as absolute paths (tempfile names its files absolutely).
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let keep: Vec<PathBuf> = keep.iter().map(|p| abs(p)).collect();
    let dirs = std::iter::once(dir.join("captures").join(id)).chain(TABLES.iter().map(|t| partition(dir, t, id)));
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if keep.contains(&abs(&p)) {
                continue;
            }
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
}

/// Where RPCs stream: the capture's `rpcs` partition.
struct TableSink {
    tables: TableSet,
    rpcs: u64,
}

impl Sink for TableSink {
    fn rpc(&mut self, file: &str, r: &mut RpcRecord) -> anyhow::Result<()> {
        self.rpcs += 1;
        Ok(self.tables.rpc(file, r)?)
    }
}

/// Tells the run's UI about one unit: progress in the unit's bytes, a few warnings,
/// and the read error that ended a piece.
struct UnitObserver<'a> {
    ui: &'a dyn Ui,
    reported: u64,
    warnings: u64,
    error: Option<String>,
}

impl Observer for UnitObserver<'_> {
    fn notice(&mut self, source: &str, n: Notice<'_>) {
        match n {
            Notice::Warning(msg) => {
                self.warnings += 1;
                if self.warnings <= MAX_WARNINGS {
                    self.ui.message(&format!("{source}: {msg}"));
                }
            }
            Notice::ReadError(e) => {
                self.ui.message(&format!("{source}: {e}"));
                self.error = Some(e.to_string());
            }
            Notice::NoLnet { .. } => {}
        }
    }

    fn progress(&mut self, _source: &str, done: u64, _total: Option<u64>) {
        if done > self.reported {
            self.ui.advance(done - self.reported);
            self.reported = done;
        }
    }
}

/// A capture being analysed.
struct Open {
    id: String,
    name: String,
    fa: FileAnalysis,
    sink: TableSink,
    /// Its report and table partitions, renamed into place together when it closes.
    staged: Staged,
    pieces: Vec<String>,
    cuts: Vec<crate::chain::Cut>,
    complete: bool,
}

impl Open {
    fn new(name: String, ctx: &Ctx<'_>) -> anyhow::Result<Self> {
        let id = output_id(&name);
        let staged = Staged::default();
        let tables =
            TableSet::new(TableFormat::Parquet, partitions(ctx.dir.to_path_buf(), id.clone(), staged.clone()))?;
        let fa = FileAnalysis::new(&name, ctx.cfg);
        let sink = TableSink { tables, rpcs: 0 };
        Ok(Self { id, name, fa, sink, staged, pieces: vec![], cuts: vec![], complete: true })
    }

    /// Ends the capture: report, tables, summary.
    fn close(self, ctx: &Ctx<'_>) -> anyhow::Result<CaptureRecord> {
        let Self { id, name, fa, mut sink, staged, pieces, cuts, complete } = self;
        let mut analysis = Analysis::new(ctx.cfg.clone());
        analysis.add_file(fa, complete, &mut sink)?;
        let report = analysis.finish();
        let TableSink { tables, rpcs } = sink;
        tables.finish(&report)?;
        let cdir = ctx.dir.join("captures").join(&id);
        std::fs::create_dir_all(&cdir).with_context(|| format!("creating {}", cdir.display()))?;
        let mut json = staged.create(&cdir.join("report.json"))?;
        serde_json::to_writer_pretty(&mut json, &report)?;
        json.write_all(b"\n")?;
        drop(json);
        if ctx.html {
            let mut page = staged.create(&cdir.join("report.html"))?;
            lnetcap_report::html::write_html(&mut page, &report)?;
        }
        // The previous run's outputs of this capture give way to the new ones, each file
        // whole at every moment: a run killed before this leaves the old ones.
        remove_capture_except(ctx.dir, &id, &staged.paths());
        staged.commit()?;
        let file = report.files.first();
        let value = serde_json::to_value(&report.peers)?;
        let peers = value.as_array().map(|a| a.iter().map(fleet_peer).collect()).unwrap_or_default();
        Ok(CaptureRecord {
            id,
            name,
            pieces,
            cuts,
            complete,
            frames: file.map_or(0, |f| f.frames.frames),
            rpcs,
            span_ns: file.and_then(|f| f.span_ns),
            peers,
        })
    }
}

/// A peer of the report, read through the field registry's paths.
fn fleet_peer(p: &serde_json::Value) -> FleetPeer {
    let at = |name: &str| {
        lnetcap_analysis::fields::path_of(name).split('.').try_fold(p, |v, k| v.get(k)).and_then(|v| v.as_f64())
    };
    let text = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
    FleetPeer {
        client: text("client_nid"),
        server: text("server_nid"),
        rpcs: p.get("rpcs").and_then(|v| v.as_u64()).unwrap_or(0),
        throughput_bytes_per_s: at("throughput"),
        t_model_bytes_per_s: at("t_model"),
        efficiency: at("efficiency"),
        binding_limit: text("binding_limit"),
        rtt_us: at("rtt"),
    }
}

/// Table files of capture `id` as partitions of the dataset; the `messages` table is not
/// part of a batch dataset.
fn partitions(dir: PathBuf, id: String, staged: Staged) -> lnetcap_report::tables::OpenTable {
    Box::new(move |file_name: &str| {
        let table = file_name.split('.').next().unwrap_or(file_name);
        if !TABLES.contains(&table) {
            return Ok(Box::new(std::io::sink()) as TableOut);
        }
        let part = partition(&dir, table, &id);
        std::fs::create_dir_all(&part).map_err(|e| TableError(format!("creating {}: {e}", part.display())))?;
        let path = part.join(format!("part-0.{}", TableFormat::Parquet.extension()));
        // Staged: the partition appears, whole, when the capture's outputs are committed.
        let f = staged.create(&path).map_err(|e| TableError(format!("creating {}: {e}", path.display())))?;
        Ok(Box::new(f) as TableOut)
    })
}

/// Analyses one unit. Input problems are recorded in the result; an error is returned
/// only when an output cannot be written.
pub fn analyse(
    unit: &Unit,
    inputs: &[Input],
    surveys: &std::collections::BTreeMap<usize, Survey>,
    ctx: &Ctx<'_>,
) -> anyhow::Result<UnitRecord> {
    let identities = unit.identities(inputs);
    let rule = match &unit.kind {
        UnitKind::Files { rule, .. } => rule.clone(),
        UnitKind::Archive { .. } => "archive: each member capture by itself, read as a stream".into(),
    };
    let mut rec = UnitRecord {
        key: unit.key.clone(),
        inputs: identities,
        rule,
        captures: vec![],
        errors: vec![],
        skipped_members: vec![],
    };
    let mut obs = UnitObserver { ui: ctx.ui, reported: 0, warnings: 0, error: None };
    match &unit.kind {
        UnitKind::Files { pieces, .. } => files(unit, pieces, inputs, surveys, ctx, &mut rec, &mut obs)?,
        UnitKind::Archive { input } => members(unit, &inputs[*input], ctx, &mut rec, &mut obs)?,
    }
    ctx.ui.advance(unit.bytes.saturating_sub(obs.reported));
    Ok(rec)
}

fn files(
    unit: &Unit,
    pieces: &[usize],
    inputs: &[Input],
    surveys: &std::collections::BTreeMap<usize, Survey>,
    ctx: &Ctx<'_>,
    rec: &mut UnitRecord,
    obs: &mut UnitObserver<'_>,
) -> anyhow::Result<()> {
    let mut cursor = Cursor::new(unit.bytes);
    let mut cur: Option<Open> = None;
    for (n, &i) in pieces.iter().enumerate() {
        let path = inputs[i].key();
        if let Some(open) = cur.as_mut() {
            let cut = cursor.check_cut(&surveys.get(&i).cloned().unwrap_or_default());
            let joined = cut.joined;
            if !joined {
                ctx.ui.message(&format!("{}: not joined to {}: {}", unit.key, path, cut.why));
            }
            open.cuts.push(cut);
            if !joined {
                if let Some(done) = cur.take() {
                    rec.captures.push(done.close(ctx)?);
                }
                cursor.frame_base = 0;
            }
        }
        if cur.is_none() {
            let name = if pieces.len() == 1 {
                path.clone()
            } else if n == 0 {
                unit.key.clone()
            } else {
                format!("{} from {path}", unit.key)
            };
            cur = Some(Open::new(name, ctx)?);
        }
        let Some(open) = cur.as_mut() else { continue };
        open.pieces.push(path.clone());
        obs.error = None;
        match CaptureReader::open(&inputs[i].path) {
            Ok(reader) => {
                let mut piece = Piece { source: reader, cursor: &mut cursor };
                let complete = open.fa.read_piece(&mut piece, &mut open.sink, obs, false)?;
                cursor.frame_base += piece.source.frames_read();
                if !complete {
                    open.complete = false;
                    rec.errors.push((path, obs.error.take().unwrap_or_else(|| "not read to its end".into())));
                }
            }
            Err(e) => {
                open.complete = false;
                rec.errors.push((path, e.to_string()));
            }
        }
        cursor.bytes_base += inputs[i].identity.as_ref().map_or(0, |id| id.size);
    }
    if let Some(open) = cur {
        rec.captures.push(open.close(ctx)?);
    }
    Ok(())
}

fn members(
    unit: &Unit,
    input: &Input,
    ctx: &Ctx<'_>,
    rec: &mut UnitRecord,
    obs: &mut UnitObserver<'_>,
) -> anyhow::Result<()> {
    let path = input.key();
    let (rx, read) = match archive::members(&input.path) {
        Ok(m) => m,
        Err(e) => {
            rec.errors.push((path, e.to_string()));
            return Ok(());
        }
    };
    for m in rx {
        let member = match m {
            Ok(m) => m,
            Err(e) => {
                rec.errors.push((path.clone(), e));
                break;
            }
        };
        let name = format!("{path}:{}", member.name);
        let reader = match CaptureReader::from_reader(&name, Box::new(member.reader), Some(member.size)) {
            Ok(r) => r,
            Err(e) => {
                if crate::discover::capture_name(Path::new(&member.name)) {
                    rec.errors.push((path.clone(), format!("{}: {e}", member.name)));
                } else {
                    rec.skipped_members.push(member.name);
                }
                continue;
            }
        };
        let mut open = Open::new(name.clone(), ctx)?;
        open.pieces.push(member.name.clone());
        let mut src = MemberSource { reader, read: read.clone(), total: unit.bytes };
        obs.error = None;
        if !open.fa.read_piece(&mut src, &mut open.sink, obs, false)? {
            open.complete = false;
            let why = obs.error.take().unwrap_or_else(|| "not read to its end".into());
            rec.errors.push((path.clone(), format!("{}: {why}", member.name)));
        }
        rec.captures.push(open.close(ctx)?);
    }
    Ok(())
}
