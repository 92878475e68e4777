//! Reading captures for the subcommands: opening them, and telling the user on stderr
//! what lnetcap-analysis's packet loop reports (bad input with file, frame and offset;
//! progress).

use std::path::Path;

use lnetcap_analysis::{Notice, Observer};
use lnetcap_capture::CaptureReader;

/// Inputs smaller than this get no progress bar (they take well under a second).
const PROGRESS_MIN_BYTES: u64 = 32 << 20;

/// A progress bar on stderr for one input: bytes read of the file (compressed bytes for a
/// compressed file), rate and ETA; only when stderr is a terminal.
pub(crate) struct Progress(indicatif::ProgressBar);

impl Progress {
    fn new(name: &str, total: Option<u64>) -> Option<Self> {
        use std::io::IsTerminal;
        // LNETCAP_PROGRESS_MIN_BYTES lowers the threshold (for tests).
        let min =
            std::env::var("LNETCAP_PROGRESS_MIN_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(PROGRESS_MIN_BYTES);
        if !std::io::stderr().is_terminal() || total.is_some_and(|t| t < min) {
            return None;
        }
        let bar = match total {
            Some(t) => bytes_bar(name, t)?,
            // stdin and pipes: no total, so no ETA.
            None => {
                let b = indicatif::ProgressBar::new_spinner().with_style(
                    indicatif::ProgressStyle::with_template("{msg} {spinner} {bytes} {binary_bytes_per_sec}").ok()?,
                );
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
                b.set_message(name.to_string());
                b
            }
        };
        Some(Self(bar))
    }

    fn update(&self, done: u64) {
        self.0.set_position(done);
    }

    fn finish(self) {
        self.0.finish_and_clear();
    }
}

/// A progress bar on stderr over `total` bytes, labelled `label`: rate and ETA. The
/// caller decides whether stderr is a terminal.
pub(crate) fn bytes_bar(label: &str, total: u64) -> Option<indicatif::ProgressBar> {
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .ok()?
    .progress_chars("=> ");
    let bar = indicatif::ProgressBar::new(total).with_style(style);
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    bar.set_message(label.to_string());
    Some(bar)
}

/// Most per-frame warnings printed per file (the rest are counted in the summary).
const MAX_WARNINGS: u64 = 20;

/// The terminal's observer of a run: notices on stderr (file, frame, offset), at most
/// `MAX_WARNINGS` per file, and a progress bar per file when wanted.
pub(crate) struct Stderr {
    progress: bool,
    bar: Option<Progress>,
    warned: u64,
}

impl Stderr {
    pub(crate) fn new(progress: bool) -> Self {
        Self { progress, bar: None, warned: 0 }
    }
}

impl Observer for Stderr {
    fn notice(&mut self, name: &str, n: Notice<'_>) {
        match n {
            Notice::Warning(msg) => {
                self.warned += 1;
                if self.warned <= MAX_WARNINGS {
                    eprintln!("lnetcap: {name}: {msg}");
                }
            }
            Notice::ReadError(e) => eprintln!("lnetcap: {name}: {e}"),
            Notice::NoLnet { frames, ports, detect } => eprintln!(
                "lnetcap: {name}: no LNet traffic found ({frames} frames; ports {ports:?}{})",
                if detect { " and detection by content" } else { "" }
            ),
        }
    }

    fn progress(&mut self, name: &str, done: u64, total: Option<u64>) {
        if self.progress && self.bar.is_none() {
            self.bar = Progress::new(name, total);
        }
        if let Some(b) = &self.bar {
            b.update(done);
        }
    }

    fn finished(&mut self, name: &str) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
        if self.warned > MAX_WARNINGS {
            eprintln!(
                "lnetcap: {name}: {} more warnings not shown (see the summary's undecodable counts)",
                self.warned - MAX_WARNINGS
            );
        }
        self.warned = 0;
    }
}

/// Opens a capture (`-` is stdin); `None` when it cannot be opened (the error is printed).
/// `parallel`: other threads will decode its packets (`--threads N`, N > 1): a
/// whole-frame file of large records is mapped unless `LNETCAP_NO_MAP` is set
/// (`CaptureReader::open_threaded`; README Speed, "Read against map").
pub(crate) fn open(path: &Path, parallel: bool) -> Option<CaptureReader> {
    let opened = if parallel { CaptureReader::open_threaded(path) } else { CaptureReader::open(path) };
    match opened {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("lnetcap: {}: {e}", path.display());
            None
        }
    }
}
