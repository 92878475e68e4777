//! `DIR/manifest.json`: what a batch directory holds: every input with its identity and
//! status, every unit with the identities it was analysed from and its captures. It
//! holds no run-time field (no clock, no host), so a sharded and merged run writes the
//! same manifest as a single run.

use std::path::Path;

use lnetcap_report::index::FleetPeer;
use serde::{Deserialize, Serialize};

use crate::chain::Cut;
use crate::discover::Identity;

/// Version of the manifest's layout; a directory of another version is analysed afresh.
pub const MANIFEST_VERSION: u32 = 1;

/// The manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub manifest_version: u32,
    /// lnetcap version and analysis options: results of other ones are redone.
    pub settings: String,
    /// Every input, by path.
    pub inputs: Vec<InputRecord>,
    /// Every unit analysed, by key.
    pub units: Vec<UnitRecord>,
}

/// What became of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Analysed, read to its end.
    Ok,
    /// Could not be read (to its end): not a capture, truncated, unreadable.
    Failed,
    /// Not a capture, found in a directory walk under a name that is not a capture's.
    Skipped,
}

impl Status {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }
}

/// An input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRecord {
    /// Path as given or found.
    pub path: String,
    /// Identity, when it could be read.
    pub identity: Option<Identity>,
    /// What became of it.
    pub status: Status,
    /// Why it failed or was skipped.
    pub error: Option<String>,
    /// The unit it belongs to.
    pub unit: Option<String>,
}

/// A unit and its results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitRecord {
    /// Its key (a path, a ring's pattern).
    pub key: String,
    /// The identities of its inputs when analysed.
    pub inputs: Vec<Identity>,
    /// How its inputs were grouped.
    pub rule: String,
    /// Its captures.
    pub captures: Vec<CaptureRecord>,
    /// Errors by input path (a piece that ended early, a member that is not a capture).
    pub errors: Vec<(String, String)>,
    /// Archive members that are not captures, skipped.
    pub skipped_members: Vec<String>,
}

/// A capture analysed: one report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureRecord {
    /// Partition and directory name.
    pub id: String,
    /// Its name in the report.
    pub name: String,
    /// The files (or members) it was read from, in time order.
    pub pieces: Vec<String>,
    /// The check of each cut between pieces (and of the cut that ended it, if split).
    pub cuts: Vec<Cut>,
    /// Read to its end.
    pub complete: bool,
    /// Frames read.
    pub frames: u64,
    /// RPCs reconstructed.
    pub rpcs: u64,
    /// First and last LNet frame (ns).
    pub span_ns: Option<[i64; 2]>,
    /// Its peer pairs.
    pub peers: Vec<FleetPeer>,
}

impl Manifest {
    /// Reads `DIR/manifest.json`; `None` when absent, unreadable or of another version
    /// (the reason is returned for the user).
    pub fn load(dir: &Path) -> (Option<Self>, Option<String>) {
        let path = dir.join("manifest.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (None, None),
            Err(e) => return (None, Some(format!("{}: {e}; analysing afresh", path.display()))),
        };
        match serde_json::from_str::<Self>(&text) {
            Ok(m) if m.manifest_version == MANIFEST_VERSION => (Some(m), None),
            Ok(m) => (None, Some(format!("{}: version {}, analysing afresh", path.display(), m.manifest_version))),
            Err(e) => (None, Some(format!("{}: {e}; analysing afresh", path.display()))),
        }
    }

    /// Inputs with the given status.
    pub fn inputs_with(&self, status: Status) -> usize {
        self.inputs.iter().filter(|i| i.status == status).count()
    }

    /// Inputs that failed.
    pub fn failed_inputs(&self) -> usize {
        self.inputs_with(Status::Failed)
    }

    /// Sorts inputs and units by their keys.
    pub fn sort(&mut self) {
        self.inputs.sort_by(|a, b| a.path.cmp(&b.path));
        self.units.sort_by(|a, b| a.key.cmp(&b.key));
    }

    /// Writes `DIR/manifest.json` (to a temporary name, then renamed).
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_vec_pretty(self)?;
        text.push(b'\n');
        write_atomic(&dir.join("manifest.json"), &text)
    }
}

/// Writes a file whole or not at all (the CLI's staging: a temporary file beside it, renamed).
pub use lnetcap_report::output::write_atomic;
