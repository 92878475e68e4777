//! The dataset of a batch directory: what is written from the manifest once the units
//! are done (the `inputs` table and index.html), and merging shard directories.
//!
//! ```text
//! DIR/manifest.json                          inputs, units, captures (no run-time field)
//! DIR/index.html                             captures, fleet view, inputs
//! DIR/captures/<id>/report.json[, .html]     one report per capture
//! DIR/{rpcs,peers,connections,timeseries}/capture=<id>/part-0.parquet
//! DIR/inputs/inputs.parquet                  every input with its status
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use lnetcap_report::index::{write_index, IndexCapture, IndexInput};
use lnetcap_report::output::Staged;
use lnetcap_report::tables::{Cell, Col, Table, TableFormat, TableWriter, Ty};

use crate::manifest::{write_atomic, InputRecord, Manifest};
use crate::run::{partition, TABLES};

/// The `inputs` table.
pub static INPUTS: Table<InputRecord> = Table {
    name: "inputs",
    doc: "One row per input found (`file` is its path): its status and identity.",
    cols: &[
        Col { name: "status", ty: Ty::Str, doc: "ok, failed or skipped", get: |r| Cell::S(r.status.as_str().into()) },
        Col { name: "error", ty: Ty::Str, doc: "why it failed or was skipped", get: |r| opt(r.error.clone()) },
        Col { name: "unit", ty: Ty::Str, doc: "the unit it was analysed in", get: |r| opt(r.unit.clone()) },
        Col {
            name: "size_bytes",
            ty: Ty::U64,
            doc: "size",
            get: |r| r.identity.as_ref().map_or(Cell::Null, |i| Cell::U(i.size)),
        },
        Col {
            name: "mtime_ns",
            ty: Ty::I64,
            doc: "modification time",
            get: |r| r.identity.as_ref().map_or(Cell::Null, |i| Cell::I(i.mtime_ns)),
        },
        Col {
            name: "head_xxh3",
            ty: Ty::Str,
            doc: "XXH3-128 of the first MiB",
            get: |r| opt(r.identity.as_ref().map(|i| i.head_xxh3.clone())),
        },
        Col {
            name: "tail_xxh3",
            ty: Ty::Str,
            doc: "XXH3-128 of the last MiB",
            get: |r| opt(r.identity.as_ref().map(|i| i.tail_xxh3.clone())),
        },
    ],
};

fn opt(s: Option<String>) -> Cell<'static> {
    s.map_or(Cell::Null, |s| Cell::S(s.into()))
}

/// Writes the `inputs` table and index.html of `dir` from its manifest.
pub fn finalize(dir: &Path, m: &Manifest) -> anyhow::Result<()> {
    let idir = dir.join("inputs");
    std::fs::create_dir_all(&idir).with_context(|| format!("creating {}", idir.display()))?;
    let mut buf = Vec::new();
    let mut w = TableWriter::new(&INPUTS, TableFormat::Parquet, &mut buf)?;
    for i in &m.inputs {
        w.push(&i.path, i)?;
    }
    w.finish()?;
    write_atomic(&idir.join("inputs.parquet"), &buf)?;

    let mut captures: Vec<IndexCapture> = m
        .units
        .iter()
        .flat_map(|u| {
            u.captures.iter().map(move |c| IndexCapture {
                id: c.id.clone(),
                name: c.name.clone(),
                pieces: c.pieces.len(),
                grouping: u.rule.clone(),
                span_ns: c.span_ns,
                complete: c.complete,
                has_html: m.settings.contains("html true"),
                peers: c.peers.clone(),
            })
        })
        .collect();
    captures.sort_by(|a, b| (a.span_ns.is_none(), a.span_ns, &a.id).cmp(&(b.span_ns.is_none(), b.span_ns, &b.id)));
    let inputs: Vec<IndexInput> = m
        .inputs
        .iter()
        .map(|i| IndexInput { path: i.path.clone(), status: i.status.as_str().into(), error: i.error.clone() })
        .collect();
    let mut page = Vec::new();
    write_index(&mut page, &captures, &inputs)?;
    write_atomic(&dir.join("index.html"), &page)
}

/// Combines shard directories into `out`: their captures' reports and partitions copied
/// (nothing to copy for a shard directory that is `out`), manifests joined, the
/// dataset's index and inputs written. Returns the merged manifest.
pub fn merge(shards: &[PathBuf], out: &Path) -> anyhow::Result<Manifest> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut merged: Option<Manifest> = None;
    let mut inputs: BTreeMap<String, InputRecord> = BTreeMap::new();
    for s in shards {
        let (m, why) = Manifest::load(s);
        let Some(m) = m else {
            bail!("{}: no batch manifest{}", s.display(), why.map(|w| format!(" ({w})")).unwrap_or_default());
        };
        let acc = merged.get_or_insert_with(|| Manifest { units: vec![], inputs: vec![], ..m.clone() });
        if acc.settings != m.settings {
            bail!(
                "{}: analysed with other settings ({}) than the first shard ({})",
                s.display(),
                m.settings,
                acc.settings
            );
        }
        let same_dir = s.canonicalize().ok() == out.canonicalize().ok();
        for u in &m.units {
            if acc.units.iter().any(|x| x.key == u.key) {
                bail!("{}: unit {} is also in another shard", s.display(), u.key);
            }
            if !same_dir {
                for c in &u.captures {
                    copy_capture(s, out, &c.id)?;
                }
            }
            acc.units.push(u.clone());
        }
        for i in m.inputs {
            inputs.entry(i.path.clone()).or_insert(i);
        }
    }
    let Some(mut m) = merged else { bail!("--merge: no shard directory given") };
    m.inputs = inputs.into_values().collect();
    m.sort();
    m.save(out)?;
    finalize(out, &m)?;
    Ok(m)
}

/// Copies a shard's capture (report and partitions) into the merged dataset, staged and
/// committed together like a capture a batch writes; temporaries a killed shard left
/// (hidden names) are not copied.
fn copy_capture(from: &Path, to: &Path, id: &str) -> anyhow::Result<()> {
    let staged = Staged::default();
    let mut dirs = vec![(from.join("captures").join(id), to.join("captures").join(id))];
    dirs.extend(TABLES.iter().map(|t| (partition(from, t, id), partition(to, t, id))));
    for (src, dst) in dirs {
        let Ok(entries) = std::fs::read_dir(&src) else { continue };
        std::fs::create_dir_all(&dst).with_context(|| format!("creating {}", dst.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("reading {}", src.display()))?;
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let mut w = staged.create(&dst.join(e.file_name()))?;
            let mut r = std::fs::File::open(e.path()).with_context(|| format!("opening {}", e.path().display()))?;
            std::io::copy(&mut r, &mut w)
                .with_context(|| format!("copying {} to {}", e.path().display(), dst.display()))?;
        }
    }
    crate::run::remove_capture_except(to, id, &staged.paths());
    staged.commit()
}
