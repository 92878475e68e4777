//! Capture files read through a memory map, and a file that shrinks under its map.
//!
//! Asked for with `LNETCAP_MAP=1` (`CaptureReader::open_mapped`), and the default for a
//! whole-frame file of large records whose packets other threads decode
//! (`CaptureReader::open_threaded`: there a read run's reading thread copies every byte
//! before any worker sees it); other files are read by default. The map's gain for one
//! thread depends on how the file came into the page cache: a file
//! read back from disk sits in large folios and ran 1.04-1.11x faster mapped; one
//! tcpdump had just written in 4 KiB writes sits a small folio a page, each populated
//! and unmapped on its own, and ran 0.73-0.80x as fast (README Speed, "Read against
//! map"). A process cannot see which it has, so for one thread, and for small records,
//! the default is the read, which loses least; a parallel run of large records maps by
//! default: it gained in both states on the Intel VM of 2026-12-01 (1.18-1.51x), and on
//! the AMD VM of 2026-12-02 gained read back from disk (1.05-1.20x) and lost on a file
//! written in 4 KiB writes (0.72-0.78x).
//!
//! A map hands the page cache's pages to the parser without the kernel's copy into a read
//! buffer (benches/read-vs-map.c: 10 ms a GB of full payload against 150 ms read; perf:
//! that copy was a third to a half of a full-payload run). Its hazard: when another
//! process truncates the file while it is mapped (a `tcpdump -W` ring reusing its oldest
//! file, logrotate's copytruncate), touching a page past the new end raises SIGBUS, which
//! kills the process by default. Here every mapped file's address range is registered,
//! and one SIGBUS handler (installed once, before the first map) puts a zero-filled page
//! over a faulting page of a registered range and marks the file as shrunk: the load that
//! faulted then reads zeros, and the reader, which looks at the mark before it hands out
//! records, stops at the file's new end with an error that says so. A SIGBUS anywhere
//! else goes to the action installed before this one, as if it had never been here.
//!
//! This is the workspace's one module allowed `unsafe`: mapping a file, the handler, and
//! the page it maps. Everything outside it sees a `&[u8]` that is valid for the map's
//! life (in a shrunk file, zeros where the file was cut).

#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};

use memmap2::{Advice, Mmap, MmapOptions, UncheckedAdvice};

use crate::limits::MAX_MAPPED_FILES;

/// A registered mapping: its address range, whether a page of it faulted (the file
/// shrank under it, or a page could not be read) and the offset of the first page that
/// did (`usize::MAX`: none). `len` 0: a free slot.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    shrank: AtomicBool,
    fault: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    shrank: AtomicBool::new(false),
    fault: AtomicUsize::new(usize::MAX),
};
static SLOTS: [Slot; MAX_MAPPED_FILES] = [FREE; MAX_MAPPED_FILES];
/// Slots taken or being taken (the first `claimed` bit of each is the owner's).
static CLAIMED: [AtomicBool; MAX_MAPPED_FILES] = [const { AtomicBool::new(false) }; MAX_MAPPED_FILES];
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
/// The SIGBUS action in place before ours, for faults outside our maps; unset when ours
/// could not be installed (then nothing is mapped).
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

struct Previous(libc::sigaction);
// A plain C struct of numbers and a function address, read by the handler only.
unsafe impl Sync for Previous {}
unsafe impl Send for Previous {}

/// The SIGBUS handler: a fault inside a registered map gets a zero page and marks the
/// file; any other goes back to the action before ours and happens again under it (the
/// faulting instruction is retried on return). Only async-signal-safe calls: atomics,
/// mmap, sigaction.
extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for slot in &SLOTS {
        let len = slot.len.load(Ordering::Acquire);
        let start = slot.start.load(Ordering::Acquire);
        if len == 0 || addr < start || addr - start >= len {
            continue;
        }
        let at = addr & !(page - 1);
        // SAFETY: `at` is a page of a mapping this module made and still owns (the slot is
        // cleared before the map is unmapped); MAP_FIXED replaces that page only.
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            slot.fault.fetch_min(at - start, Ordering::AcqRel);
            slot.shrank.store(true, Ordering::Release);
            return;
        }
    }
    if let Some(prev) = PREVIOUS.get() {
        // SAFETY: restores an action the kernel gave us; the retried access faults under it.
        unsafe { libc::sigaction(libc::SIGBUS, &prev.0, std::ptr::null_mut()) };
    }
}

fn install() -> bool {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: a zeroed sigaction is a valid starting point; the fields are set below.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sigemptyset on a field we own; sigaction with valid pointers.
        let mut prev: libc::sigaction = unsafe { std::mem::zeroed() };
        let ok = unsafe {
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGBUS, &act, &mut prev) == 0
        };
        if ok {
            let _ = PREVIOUS.set(Previous(prev));
        }
    });
    PREVIOUS.get().is_some()
}

/// Asks the CPU to bring the cache line at `p` in, ahead of its use (a hint: an address
/// outside any mapping is ignored, never a fault). A mapped file's records are parsed
/// one after the other, each header's length giving the next header's place: without
/// hints ahead, every new cache line of the file is a wait on memory in turn (perf: the
/// record loop went from 6 % to 22 % of a header-only decode when mapped).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 reads nothing and cannot fault, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A capture file mapped read-only, registered with the SIGBUS handler for its life.
pub struct MappedFile {
    map: Mmap,
    slot: usize,
    file: File,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile").field("len", &self.map.len()).finish_non_exhaustive()
    }
}

impl MappedFile {
    /// Maps `file` (`len`: its length now), or gives it back when it cannot be mapped
    /// (empty, [`MAX_MAPPED_FILES`] maps open, no handler, the system refuses): the
    /// caller reads it instead.
    pub fn open(file: File, len: u64) -> Result<Arc<Self>, File> {
        let Ok(len) = usize::try_from(len) else { return Err(file) };
        if len == 0 || !install() {
            return Err(file);
        }
        let Some(slot) = CLAIMED.iter().position(|c| !c.swap(true, Ordering::AcqRel)) else { return Err(file) };
        // SAFETY: the map is read-only; a file changed under it gives other bytes (as a
        // read would), one cut short gives zeros past its end through the handler above,
        // registered before any byte of the map is touched.
        let map = match unsafe { MmapOptions::new().len(len).map(&file) } {
            Ok(m) => m,
            Err(_) => {
                CLAIMED[slot].store(false, Ordering::Release);
                return Err(file);
            }
        };
        let s = &SLOTS[slot];
        s.shrank.store(false, Ordering::Relaxed);
        s.fault.store(usize::MAX, Ordering::Relaxed);
        s.start.store(map.as_ptr() as usize, Ordering::Release);
        s.len.store(map.len(), Ordering::Release);
        // Readahead of the whole file ahead of the cursor (advice only: errors ignored).
        let _ = map.advise(Advice::Sequential);
        Ok(Arc::new(Self { map, slot, file }))
    }

    /// The file's bytes as mapped.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Whether a page of the map faulted: the file is shorter now than when it was mapped.
    #[inline]
    pub fn shrank(&self) -> bool {
        SLOTS[self.slot].shrank.load(Ordering::Acquire)
    }

    /// The offset in the file of the first page that faulted (after
    /// [`shrank`](Self::shrank)): past the file's new end when it was cut, inside it when
    /// the page could not be read for another reason (an I/O error of its device).
    pub fn first_fault(&self) -> Option<usize> {
        Some(SLOTS[self.slot].fault.load(Ordering::Acquire)).filter(|&f| f != usize::MAX)
    }

    /// The system's page size (4,096 until the first map reads it).
    pub fn page_size() -> usize {
        PAGE.load(Ordering::Relaxed)
    }

    /// The file's length now (after [`shrank`](Self::shrank)), if the system says.
    pub fn length_now(&self) -> Option<u64> {
        self.file.metadata().ok().map(|m| m.len())
    }

    /// Maps the pages of `bytes[at..at + len]` into the page table in one call rather
    /// than a fault a few pages (advice only: older kernels refuse it, and nothing changes).
    pub fn populate(&self, at: usize, len: usize) {
        let len = len.min(self.map.len().saturating_sub(at));
        if len > 0 {
            let _ = self.map.advise_range(Advice::PopulateRead, at, len);
        }
    }

    /// Drops the process's mapping of `bytes[at..at + len]` (the pages stay in the page
    /// cache; touching them again maps them again), so that what the process holds does
    /// not grow with the file.
    pub fn release(&self, at: usize, len: usize) {
        let len = len.min(self.map.len().saturating_sub(at));
        if len > 0 {
            // SAFETY: a read-only shared file map: MADV_DONTNEED unmaps the pages and a later
            // access maps the file's pages again, with the same bytes.
            let _ = unsafe { self.map.unchecked_advise_range(UncheckedAdvice::DontNeed, at, len) };
        }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // Unregistered before `map` is unmapped (fields drop after this body).
        let s = &SLOTS[self.slot];
        s.len.store(0, Ordering::Release);
        s.start.store(0, Ordering::Release);
        CLAIMED[self.slot].store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// In a child process (the test binary run again on this test with
    /// `LNETCAP_FOREIGN_SIGBUS` set): installs the handler through a registered map, then
    /// maps another file itself, cuts that file and touches a page past its end. The
    /// handler must not take that fault for one of its own: the child dies of SIGBUS, as
    /// it would without the handler.
    #[test]
    fn a_sigbus_outside_the_registered_maps_still_kills() {
        if let Some(path) = std::env::var_os("LNETCAP_FOREIGN_SIGBUS") {
            let ours = std::path::PathBuf::from(&path).with_extension("ours");
            std::fs::write(&ours, vec![1u8; 65536]).unwrap();
            let _registered = MappedFile::open(File::open(&ours).unwrap(), 65536).unwrap();
            let f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
            // SAFETY: the point of the test: a map of a file cut under it, outside ours.
            let foreign = unsafe { MmapOptions::new().len(65536).map(&f).unwrap() };
            f.set_len(0).unwrap();
            let touched = std::hint::black_box(foreign[40000]);
            // Not reached when the fault kills the process, as it must.
            std::process::exit(i32::from(touched) + 100);
        }
        let path = std::env::temp_dir().join(format!("lnetcap-foreign-{}.pcap", std::process::id()));
        std::fs::write(&path, vec![7u8; 65536]).unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "map::tests::a_sigbus_outside_the_registered_maps_still_kills", "--nocapture"])
            .env("LNETCAP_FOREIGN_SIGBUS", &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(path.with_extension("ours"));
        assert_eq!(status.signal(), Some(libc::SIGBUS), "the child ended {status:?}, not by SIGBUS");
    }

    /// The other side: a fault inside a registered map gets a zero page and marks the
    /// file, and the process lives on.
    #[test]
    fn a_sigbus_inside_a_registered_map_reads_zeros_and_marks_the_file() {
        let path = std::env::temp_dir().join(format!("lnetcap-own-{}", std::process::id()));
        std::fs::write(&path, vec![9u8; 3 * 4096]).unwrap();
        let map = MappedFile::open(File::open(&path).unwrap(), 3 * 4096).unwrap();
        assert_eq!(map.bytes()[5000], 9);
        assert!(!map.shrank());
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
        assert_eq!(std::hint::black_box(map.bytes()[2 * 4096 + 10]), 0);
        assert!(map.shrank());
        assert_eq!(map.first_fault(), Some(2 * 4096), "the page touched, not the one before it");
        assert_eq!(map.length_now(), Some(4096));
        assert_eq!(map.bytes()[100], 9, "bytes before the cut are the file's");
        drop(map);
        let _ = std::fs::remove_file(&path);
    }
}
