//! Outputs written whole or not at all. Every file a run writes (JSON report, RPC lines,
//! tables, report.html, PNGs) goes to a temporary name in its destination directory
//! (tempfile) and is renamed over the destination only when the whole run's outputs are
//! complete: a run killed at any moment leaves each destination either as it was or
//! complete. A run that fails removes its temporary files. The CLI stages a run's
//! outputs together; a batch stages each capture's report and table partitions.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tempfile::TempPath;

/// The outputs of one run, waiting to be renamed into place.
#[derive(Clone, Default)]
pub struct Staged {
    inner: Arc<Mutex<StagedFiles>>,
}

#[derive(Default)]
struct StagedFiles {
    files: Vec<(TempPath, PathBuf)>,
    /// The first error of a writer that could only report it when dropped.
    error: Option<String>,
}

/// A temporary file in `path`'s directory, named after it (hidden, random suffix), with
/// `suffix` kept last (plotters picks the image format from it).
fn temp_beside(path: &Path, suffix: &str) -> io::Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let (prefix, suffix) = (format!(".{name}."), format!(".tmp{suffix}"));
    let mut b = tempfile::Builder::new();
    b.prefix(&prefix).suffix(&suffix);
    // Outputs are as readable as any file the user creates (0666 less the umask), not
    // tempfile's private 0600.
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    b.tempfile_in(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("creating a temporary file for {}: {e}", path.display())))
}

/// Where the bytes for `path` go: a staged temporary that replaces it, or `path` itself.
enum Target {
    /// Staged beside this path (the destination; a symlink's target, so the link stays).
    Stage(PathBuf),
    /// An existing file that is not a regular file — a device such as /dev/null, a FIFO,
    /// a socket — cannot be replaced, only written: it is opened and written in place.
    Direct,
}

fn target(path: &Path) -> Target {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Target::Direct,
        // An existing symlink: replace what it points to, not the link.
        Ok(_) if path.is_symlink() => Target::Stage(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
        _ => Target::Stage(path.to_path_buf()),
    }
}

impl Staged {
    /// A buffered writer whose bytes become `path` at [`Staged::commit`] (or go straight
    /// to it when it is a device or a FIFO: `--json /dev/null` stays /dev/null).
    pub fn create(&self, path: &Path) -> io::Result<StagedWriter> {
        let (file, direct) = match target(path) {
            Target::Direct => (
                File::create(path).map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?,
                true,
            ),
            Target::Stage(dest) => {
                let (file, tmp) = temp_beside(&dest, "")?.into_parts();
                self.lock().files.push((tmp, dest));
                (file, false)
            }
        };
        Ok(StagedWriter {
            w: Some(BufWriter::with_capacity(1 << 16, file)),
            path: path.to_path_buf(),
            direct,
            staged: self.clone(),
        })
    }

    /// A temporary path, ending in `suffix`, whose file becomes `path` at commit (for
    /// writers that take a path); `path` itself when it is a device or a FIFO.
    pub fn path_for(&self, path: &Path, suffix: &str) -> io::Result<PathBuf> {
        let Target::Stage(dest) = target(path) else { return Ok(path.to_path_buf()) };
        let tmp = temp_beside(&dest, suffix)?.into_temp_path();
        let p = tmp.to_path_buf();
        self.lock().files.push((tmp, dest));
        Ok(p)
    }

    /// Every path it stages: each temporary file and the destination it becomes.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.lock().files.iter().flat_map(|(tmp, dest)| [tmp.to_path_buf(), dest.clone()]).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StagedFiles> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Renames every staged file into place, in the order staged; fails (and removes
    /// them all) if any writer failed.
    pub fn commit(self) -> anyhow::Result<()> {
        let mut g = self.lock();
        if let Some(e) = g.error.take() {
            g.files.clear();
            anyhow::bail!("{e}");
        }
        for (tmp, dest) in g.files.drain(..) {
            tmp.persist(&dest).map_err(|e| anyhow::anyhow!("renaming into {}: {}", dest.display(), e.error))?;
        }
        Ok(())
    }
}

/// Writes one file whole or not at all (a staged file committed at once).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let staged = Staged::default();
    let mut w = staged.create(path)?;
    w.write_all(bytes).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    drop(w);
    staged.commit()
}

/// A writer of one staged file: flushes when dropped and, if that fails, fails the commit.
pub struct StagedWriter {
    w: Option<BufWriter<File>>,
    path: PathBuf,
    /// Written in place (a device or FIFO): flushed, not synced (fsync of /dev/null fails).
    direct: bool,
    staged: Staged,
}

impl Write for StagedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.w.as_mut() {
            Some(w) => w.write(buf),
            None => Err(io::Error::other("closed")),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self.w.as_mut() {
            Some(w) => w.write_all(buf),
            None => Err(io::Error::other("closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.as_mut().map_or(Ok(()), |w| w.flush())
    }
}

impl Drop for StagedWriter {
    fn drop(&mut self) {
        let Some(w) = self.w.take() else { return };
        let direct = self.direct;
        if let Err(e) =
            w.into_inner().map_err(|e| e.into_error()).and_then(|f| if direct { Ok(()) } else { f.sync_data() })
        {
            let mut g = self.staged.lock();
            g.error.get_or_insert_with(|| format!("writing {}: {e}", self.path.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_in_place_before_commit_and_all_is_after() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        std::fs::write(&a, "old").unwrap();
        let s = Staged::default();
        let mut w = s.create(&a).unwrap();
        w.write_all(b"new").unwrap();
        drop(w);
        let png = s.path_for(&dir.path().join("c.png"), ".png").unwrap();
        assert!(png.to_string_lossy().ends_with(".png"));
        std::fs::write(&png, "png").unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        assert!(!dir.path().join("c.png").exists());
        s.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(dir.path().join("c.png")).unwrap(), "png");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
        #[cfg(unix)]
        {
            // The same mode as a file the user creates plainly (0666 less the umask).
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            let plain = dir.path().join("plain");
            File::create(&plain).unwrap();
            assert_eq!(mode(&a), mode(&plain), "{:o}", mode(&a));
            std::fs::remove_file(plain).unwrap();
        }
    }

    #[test]
    #[cfg(unix)]
    fn a_fifo_is_written_in_place_and_a_symlink_keeps_pointing_at_the_new_file() {
        // `--json /dev/null` once renamed a regular file over /dev/null (as root): a
        // destination that is not a regular file is written, never replaced. A FIFO stands
        // in for the device here (the same file type test; no risk to the machine's /dev).
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let real = dir.path().join("real.json");
        std::fs::write(&real, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real.json", &link).unwrap();
        let s = Staged::default();
        for (p, text) in [(&fifo, "to the fifo"), (&link, "new")] {
            let mut w = s.create(p).unwrap();
            w.write_all(text.as_bytes()).unwrap();
        }
        assert_eq!(reader.join().unwrap(), "to the fifo");
        s.commit().unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO is still a FIFO");
        assert!(link.is_symlink(), "the link is still a link");
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 3, "no temporary file left: {left:?}");
    }

    #[test]
    fn a_run_that_fails_leaves_the_old_files_and_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        std::fs::write(&a, "old").unwrap();
        let s = Staged::default();
        let mut w = s.create(&a).unwrap();
        w.write_all(b"half").unwrap();
        drop(w);
        drop(s);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
