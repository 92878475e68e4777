//! The packet loop, written once: a [`PacketSource`] through the decode pipeline.

use lnetcap_capture::CaptureError;
use lnetcap_lnet::pipeline::{DecodeConfig, Pipeline};
use lnetcap_lnet::LnetEvent;

use crate::analysis::Sink;
use crate::parallel::MessagesOnly;
use crate::source::{Next, PacketSource};

/// Packets between two progress reports.
pub const PROGRESS_EVERY_PACKETS: u64 = 4096;

/// Records a packet loop takes from a file at once ([`PacketSource::next_run`]): 5 KiB
/// of [`Rec`](lnetcap_capture::Rec)s, read back from the first-level cache.
pub const RUN_RECORDS: usize = 1024;

/// What a run tells its observer besides the events.
#[derive(Debug)]
pub enum Notice<'a> {
    /// A frame or record that could not be decoded, with where (frame, offset); the run
    /// went on and the frame is counted in the accounting.
    Warning(String),
    /// The source failed and ended; what came before it stands.
    ReadError(&'a CaptureError),
    /// The whole source held no LNet traffic.
    NoLnet {
        /// Frames read.
        frames: u64,
        /// The acceptor ports followed.
        ports: &'a [u16],
        /// Connections were also detected by their content.
        detect: bool,
    },
}

/// Told what happens while a source is read: notices (for stderr) and progress (for a
/// progress bar). Every method has a default that does nothing.
pub trait Observer {
    /// A notice about the source named `source`.
    fn notice(&mut self, _source: &str, _notice: Notice<'_>) {}
    /// Input bytes read so far of `source`, and its size when known.
    fn progress(&mut self, _source: &str, _done: u64, _total: Option<u64>) {}
    /// The source was read to its end (or to its error).
    fn finished(&mut self, _source: &str) {}
}

/// An observer that hears nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Quiet;

impl Observer for Quiet {}

/// A source after the loop.
#[derive(Debug)]
pub struct Decoded {
    /// The pipeline after the last packet (its accounting, connections, TCP behaviour).
    pub pipe: Pipeline,
    /// The source was read to its end (no read error).
    pub complete: bool,
}

/// Reads `source` (named `name` in notices) to its end through a new pipeline of `cfg`.
/// `on_events` sees the events after every packet, and after the final flush, with the
/// pipeline for connection lookups; an error from it stops the run and is returned.
pub fn decode_source<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    cfg: DecodeConfig,
    obs: &mut dyn Observer,
    on_events: impl FnMut(&Pipeline, &mut Vec<LnetEvent>) -> anyhow::Result<()>,
) -> anyhow::Result<Decoded> {
    let mut pipe = Pipeline::new(cfg);
    let complete = drive(name, source, &mut pipe, obs, on_events)?;
    Ok(Decoded { pipe, complete })
}

/// A source through the decode pipeline on `threads` threads, its messages to `sink`
/// ([`Sink::message`]) in capture order with their connections: `decode`. One thread runs
/// [`drive`]; more run the parallel engine of `analyze` (the reading thread and a pool of
/// `threads` − 1 workers, each owning whole connections) without the RPC tracker. Either
/// way the messages and their order are the same, and so is the pipeline's accounting.
pub fn decode_messages<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    cfg: DecodeConfig,
    obs: &mut dyn Observer,
    threads: usize,
    sink: &mut dyn Sink,
) -> anyhow::Result<Decoded> {
    if threads <= 1 {
        return decode_source(name, source, cfg, obs, |pipe, events| {
            for ev in events.drain(..) {
                if let LnetEvent::Message(m) = &ev {
                    sink.message(name, m, pipe.connection(m.conn))?;
                }
            }
            Ok(())
        });
    }
    let mut pipe = Pipeline::new(cfg);
    let complete = crate::parallel::read(name, source, &mut pipe, &mut MessagesOnly, sink, obs, threads)?;
    Ok(Decoded { pipe, complete })
}

/// The loop itself, into a pipeline the caller owns: returns whether the source was read
/// to its end. The pipeline is flushed (`finish`) at the end.
pub fn drive<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    pipe: &mut Pipeline,
    obs: &mut dyn Observer,
    on_events: impl FnMut(&Pipeline, &mut Vec<LnetEvent>) -> anyhow::Result<()>,
) -> anyhow::Result<bool> {
    drive_piece(name, source, pipe, obs, on_events, true)
}

/// [`drive`] over one piece of a capture cut in pieces (a rotated ring): the pipeline is
/// flushed only after the `last` piece, so connections and RPCs run across the cuts.
/// `on_events` is also called, with no events, when a live source ticks.
pub fn drive_piece<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    pipe: &mut Pipeline,
    obs: &mut dyn Observer,
    mut on_events: impl FnMut(&Pipeline, &mut Vec<LnetEvent>) -> anyhow::Result<()>,
    last: bool,
) -> anyhow::Result<bool> {
    let mut events = Vec::new();
    let mut complete = true;
    let mut n = 0u64;
    let mut recs = Vec::with_capacity(RUN_RECORDS);
    loop {
        recs.clear();
        if let Some(run) = source.next_run(&mut recs, RUN_RECORDS) {
            if !recs.is_empty() {
                for r in &recs {
                    let pkt = run.packet(r);
                    let why = pipe.push(&pkt, &mut events);
                    packet_notices(name, &pkt, why, pipe, obs);
                    if !events.is_empty() {
                        on_events(pipe, &mut events)?;
                    }
                }
                let before = n;
                n += recs.len() as u64;
                if n / PROGRESS_EVERY_PACKETS != before / PROGRESS_EVERY_PACKETS {
                    let (done, total) = source.progress();
                    obs.progress(name, done, total);
                }
                continue;
            }
        }
        n += 1;
        if n % PROGRESS_EVERY_PACKETS == 0 {
            let (done, total) = source.progress();
            obs.progress(name, done, total);
        }
        match source.poll() {
            Ok(Next::Packet(pkt)) => {
                let why = pipe.push(&pkt, &mut events);
                packet_notices(name, &pkt, why, pipe, obs);
            }
            Ok(Next::Tick) => {
                warnings(name, source, pipe, obs);
                on_events(pipe, &mut events)?;
                continue;
            }
            Ok(Next::End) => break,
            Err(e) => {
                obs.notice(name, Notice::ReadError(&e));
                complete = false;
                break;
            }
        }
        warnings(name, source, pipe, obs);
        if !events.is_empty() {
            on_events(pipe, &mut events)?;
        }
    }
    warnings(name, source, pipe, obs);
    obs.finished(name);
    if !last {
        return Ok(complete);
    }
    pipe.finish(&mut events);
    on_events(pipe, &mut events)?;
    if !pipe.has_lnet_connections() {
        let cfg = pipe.config();
        obs.notice(name, Notice::NoLnet { frames: pipe.frames_seen(), ports: &cfg.ports, detect: cfg.detect });
    }
    Ok(complete)
}

/// What a packet the pipeline took tells the observer: why it is not decodable, a step
/// of the capture's clock.
#[inline]
pub(crate) fn packet_notices(
    name: &str,
    pkt: &lnetcap_capture::Packet<'_>,
    why: Option<lnetcap_capture::NotTcp>,
    pipe: &mut Pipeline,
    obs: &mut dyn Observer,
) {
    packet_warnings(pkt, why, pipe, |text| obs.notice(name, Notice::Warning(text)));
}

/// [`packet_notices`], each warning's text to `note`. The usual packet has none: that
/// test is inlined into the per-packet loops, the rest is not.
#[inline(always)]
pub(crate) fn packet_warnings(
    pkt: &lnetcap_capture::Packet<'_>,
    why: Option<lnetcap_capture::NotTcp>,
    pipe: &mut Pipeline,
    note: impl FnMut(String),
) {
    if why.is_some() || pipe.clock_stepped() {
        note_packet_warnings(pkt, why, pipe, note);
    }
}

#[cold]
#[inline(never)]
fn note_packet_warnings(
    pkt: &lnetcap_capture::Packet<'_>,
    why: Option<lnetcap_capture::NotTcp>,
    pipe: &mut Pipeline,
    mut note: impl FnMut(String),
) {
    if let Some(why) = why {
        note(format!("frame {}: not decodable: {why}", pkt.frame));
    }
    if let Some((frame, raw, jump, shift)) = pipe.take_clock_step() {
        note(format!(
            "frame {frame} (offset {}): timestamp {:.6} s jumps {:+.3} s from the frame before; this frame and those after it are shifted by {:+.3} s",
            pkt.offset,
            raw as f64 / 1e9,
            jump as f64 / 1e9,
            shift as f64 / 1e9
        ));
    }
}

/// The source's record warnings: each an unreadable frame in the accounting.
#[inline]
pub(crate) fn warnings<S: PacketSource + ?Sized>(
    name: &str,
    source: &mut S,
    pipe: &mut Pipeline,
    obs: &mut dyn Observer,
) {
    record_warnings(source, pipe, |text| obs.notice(name, Notice::Warning(text)));
}

/// [`warnings`], each warning's text to `note`. The test is inlined into the per-packet
/// loops, the rest is not.
#[inline(always)]
pub(crate) fn record_warnings<S: PacketSource + ?Sized>(source: &mut S, pipe: &mut Pipeline, note: impl FnMut(String)) {
    if source.has_warnings() {
        note_record_warnings(source, pipe, note);
    }
}

#[cold]
#[inline(never)]
fn note_record_warnings<S: PacketSource + ?Sized>(source: &mut S, pipe: &mut Pipeline, mut note: impl FnMut(String)) {
    for w in source.drain_warnings() {
        if !w.frame_delivered() {
            pipe.count_unreadable_frame();
        }
        note(w.to_string());
    }
}
