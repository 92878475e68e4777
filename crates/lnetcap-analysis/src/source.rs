//! Where packets come from.

use lnetcap_capture::{CaptureError, CaptureReader, Packet, Rec, Run};

/// What a source gives next.
#[derive(Debug)]
pub enum Next<'a> {
    /// A packet.
    Packet(Packet<'a>),
    /// A live source had no packet within its poll time (or a look at the analysis is
    /// due): the loop lets its consumer look at the analysis, then asks again.
    Tick,
    /// The end of the source.
    End,
}

/// A source of packets in capture order: a capture file or stream ([`CaptureReader`]),
/// or a live interface. A packet borrows the source until the next call.
pub trait PacketSource {
    /// The next packet; `Ok(None)` at the end. An error ends the source (what came before
    /// it stands).
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError>;

    /// The next packet, a tick, or the end: what the packet loop asks. Files never tick;
    /// live sources override this.
    #[inline]
    fn poll(&mut self) -> Result<Next<'_>, CaptureError> {
        Ok(match self.next_packet()? {
            Some(p) => Next::Packet(p),
            None => Next::End,
        })
    }

    /// The whole records the source holds now, at most `max` in `out` (see
    /// [`CaptureReader::next_run`]): packets in a batch without a call per packet. `None`
    /// or an empty run: ask [`PacketSource::poll`] for the next packet (a refill, a
    /// record that warns, the end, a source that gives no runs). Files only; the default
    /// gives none.
    #[inline]
    fn next_run(&mut self, _out: &mut Vec<Rec>, _max: usize) -> Option<Run<'_>> {
        None
    }

    /// Problems with single records since the last call (the source went on past them).
    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        Vec::new()
    }

    /// Whether [`PacketSource::drain_warnings`] has anything (asked after every packet:
    /// keep it cheap).
    fn has_warnings(&self) -> bool {
        false
    }

    /// Input bytes read so far and the total when known (for a progress bar).
    fn progress(&self) -> (u64, Option<u64>) {
        (0, None)
    }
}

impl PacketSource for CaptureReader {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        CaptureReader::next_packet(self)
    }

    #[inline]
    fn next_run(&mut self, out: &mut Vec<Rec>, max: usize) -> Option<Run<'_>> {
        CaptureReader::next_run(self, out, max)
    }

    fn drain_warnings(&mut self) -> Vec<CaptureError> {
        CaptureReader::drain_warnings(self)
    }

    #[inline]
    fn has_warnings(&self) -> bool {
        CaptureReader::has_warnings(self)
    }

    fn progress(&self) -> (u64, Option<u64>) {
        self.input_progress()
    }
}
