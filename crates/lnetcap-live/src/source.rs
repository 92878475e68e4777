//! Live packet sources: what they share (counters other threads read, the stop flag),
//! a capture replayed at its recorded pace, and a tee that keeps the packets in a ring.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lnetcap_analysis::{Next, PacketSource};
use lnetcap_capture::{CaptureError, CaptureReader, Packet, Rec, Run};

use crate::control::{Stop, StopReason};
use crate::ring::Ring;

/// How long a source waits for a packet before it ticks.
pub const POLL: Duration = Duration::from_millis(100);

/// What a live source has read, for the views on other threads.
#[derive(Debug, Default)]
pub struct Counters {
    /// Packets given to the analysis.
    pub packets: AtomicU64,
    /// Their bytes on the wire (original lengths).
    pub bytes: AtomicU64,
    /// libpcap's `ps_recv`: packets the kernel passed to the capture.
    pub received: AtomicU64,
    /// libpcap's `ps_drop`: dropped because the capture buffer was full.
    pub dropped: AtomicU64,
    /// libpcap's `ps_ifdrop`: dropped by the interface or driver.
    pub dropped_interface: AtomicU64,
}

impl Counters {
    /// One packet read.
    #[inline]
    pub fn count(&self, origlen: u32) {
        self.packets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(u64::from(origlen), Ordering::Relaxed);
    }

    /// A value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// When a live run ends on its own.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// `duration` from now, or never.
    pub fn after(duration: Option<Duration>) -> Self {
        Self(duration.map(|d| Instant::now() + d))
    }

    /// Sets `stop` when the deadline has passed; whether the run is to stop.
    pub fn check(&self, stop: &Stop) -> bool {
        if self.0.is_some_and(|d| Instant::now() >= d) {
            stop.set(StopReason::Duration);
        }
        stop.is_set()
    }
}

/// A capture file replayed at its recorded pace (or `speed` times faster): the live
/// view, the metrics and the ring, without an interface or libpcap. The end of the file
/// ends the run.
pub struct Replay {
    reader: CaptureReader,
    speed: f64,
    /// (wall clock, capture time) of the first packet.
    origin: Option<(Instant, i64)>,
    /// The packet read and not yet given: its header, with its bytes in `buf`.
    pending: Option<Packet<'static>>,
    buf: Vec<u8>,
    stop: Stop,
    deadline: Deadline,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").field("speed", &self.speed).finish_non_exhaustive()
    }
}

impl Replay {
    /// Replays `reader` at `speed` × its recorded pace.
    pub fn new(reader: CaptureReader, speed: f64, stop: Stop, deadline: Deadline, counters: Arc<Counters>) -> Self {
        let speed = if speed.is_finite() && speed > 0.0 { speed } else { 1.0 };
        Self { reader, speed, origin: None, pending: None, buf: Vec::new(), stop, deadline, counters }
    }

    /// Reads the next record into `pending`; false at the end.
    fn fill(&mut self) -> Result<bool, CaptureError> {
        let Some(p) = self.reader.next_packet()? else { return Ok(false) };
        self.buf.clear();
        self.buf.extend_from_slice(p.data);
        self.pending = Some(Packet { data: &[], shared: None, ..p });
        Ok(true)
    }
}

/// Where a replay stands before giving a packet.
enum Step {
    /// The pending packet is due.
    Ready(Packet<'static>),
    /// Not yet: a tick.
    Tick,
    /// The end of the file, or a stop.
    End,
}

impl Replay {
    fn step(&mut self) -> Result<Step, CaptureError> {
        if self.deadline.check(&self.stop) {
            return Ok(Step::End);
        }
        if self.pending.is_none() && !self.fill()? {
            self.stop.set(StopReason::Duration);
            return Ok(Step::End);
        }
        let Some(p) = self.pending else { return Ok(Step::End) };
        let now = Instant::now();
        let (wall0, ts0) = *self.origin.get_or_insert((now, p.ts_ns));
        let offset = ((p.ts_ns - ts0).max(0) as f64 / self.speed) as u64;
        let due = wall0 + Duration::from_nanos(offset);
        if due > now {
            let wait = due - now;
            std::thread::sleep(wait.min(POLL));
            if wait > POLL {
                return Ok(Step::Tick);
            }
        }
        self.pending = None;
        self.counters.count(p.origlen);
        self.counters.received.fetch_add(1, Ordering::Relaxed);
        Ok(Step::Ready(p))
    }
}

impl PacketSource for Replay {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        loop {
            match self.step()? {
                Step::Tick => continue,
                Step::End => return Ok(None),
                Step::Ready(p) => return Ok(Some(Packet { data: &self.buf, shared: None, ..p })),
            }
        }
    }

    fn poll(&mut self) -> Result<Next<'_>, CaptureError> {
        Ok(match self.step()? {
            Step::Tick => Next::Tick,
            Step::End => Next::End,
            Step::Ready(p) => Next::Packet(Packet { data: &self.buf, shared: None, ..p }),
        })
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        self.reader.drain_warnings()
    }

    fn has_warnings(&self) -> bool {
        self.reader.has_warnings()
    }
}

/// A source whose packets are also written to a pcap [`Ring`] (when there is one).
#[derive(Debug)]
pub struct Tee<S> {
    inner: S,
    ring: Option<Ring>,
    /// The first write error (the analysis goes on; the run reports it at the end).
    error: Option<std::io::Error>,
}

impl<S> Tee<S> {
    /// Packets of `inner` also into `ring`.
    pub fn new(inner: S, ring: Option<Ring>) -> Self {
        Self { inner, ring, error: None }
    }

    /// The source.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Closes the ring: the files written, or the first write error.
    pub fn finish(self) -> std::io::Result<Vec<std::path::PathBuf>> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.ring.map_or(Ok(Vec::new()), Ring::finish)
    }
}

impl<S: PacketSource> PacketSource for Tee<S> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let Self { inner, ring, error } = self;
        let p = inner.next_packet()?;
        if let (Some(p), Some(r), None) = (&p, ring.as_mut(), &error) {
            *error = r.write(p).err();
        }
        Ok(p)
    }

    fn poll(&mut self) -> Result<Next<'_>, CaptureError> {
        let Self { inner, ring, error } = self;
        let n = inner.poll()?;
        if let (Next::Packet(p), Some(r), None) = (&n, ring.as_mut(), &error) {
            *error = r.write(p).err();
        }
        Ok(n)
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        self.inner.drain_warnings()
    }

    fn has_warnings(&self) -> bool {
        self.inner.has_warnings()
    }
}

/// A source that ends when the stop flag is set (a signal during `analyze`), remembering
/// the last packet it gave: the report says where reading stopped.
#[derive(Debug)]
pub struct Until<S> {
    inner: S,
    stop: Stop,
    last: lnetcap_analysis::ReadPoint,
    stopped: bool,
}

impl<S> Until<S> {
    /// `inner` until `stop`.
    pub fn new(inner: S, stop: Stop) -> Self {
        Self { inner, stop, last: lnetcap_analysis::ReadPoint::default(), stopped: false }
    }

    /// Where reading stopped, when the flag stopped it.
    pub fn stopped_at(&self) -> Option<lnetcap_analysis::ReadPoint> {
        self.stopped.then_some(self.last)
    }
}

impl<S: PacketSource> PacketSource for Until<S> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        if self.stop.is_set() {
            self.stopped = true;
            return Ok(None);
        }
        let p = self.inner.next_packet()?;
        if let Some(p) = &p {
            self.last = lnetcap_analysis::ReadPoint { frame: p.frame, offset: p.offset };
        }
        Ok(p)
    }

    fn next_run(&mut self, out: &mut Vec<Rec>, max: usize) -> Option<Run<'_>> {
        // Stopped: `poll` says so.
        if self.stop.is_set() {
            return None;
        }
        let first = out.len();
        let Self { inner, last, .. } = self;
        let run = inner.next_run(out, max)?;
        if let Some(r) = out[first..].last() {
            *last = lnetcap_analysis::ReadPoint { frame: r.frame, offset: r.offset };
        }
        Some(run)
    }

    fn poll(&mut self) -> Result<Next<'_>, CaptureError> {
        if self.stop.is_set() {
            self.stopped = true;
            return Ok(Next::End);
        }
        let n = self.inner.poll()?;
        if let Next::Packet(p) = &n {
            self.last = lnetcap_analysis::ReadPoint { frame: p.frame, offset: p.offset };
        }
        Ok(n)
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        self.inner.drain_warnings()
    }

    fn has_warnings(&self) -> bool {
        self.inner.has_warnings()
    }

    fn progress(&self) -> (u64, Option<u64>) {
        self.inner.progress()
    }
}
