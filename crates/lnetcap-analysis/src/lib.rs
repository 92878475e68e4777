//! lnetcap-analysis: the one way from packets to a [`Report`], for the CLI, the tests, the
//! benches, batch runs and live capture alike.
//!
//! - [`source`]: where packets come from ([`PacketSource`]: a capture file or stream, and
//!   next a live interface).
//! - [`drive`]: the packet loop, written once: a source through the decode pipeline, with
//!   warnings and progress told to an [`Observer`]; [`decode_messages`] gives `decode`
//!   the messages of a source read on one thread or several (parallel.rs, no tracker).
//! - [`analysis`]: [`Analysis`] turns sources into a [`Report`]; finished RPCs and decoded
//!   messages stream to a [`Sink`] as they come; [`FileAnalysis`] is the same per packet.
//!   With `AnalysisConfig::threads` > 1 a source read to its end runs on worker threads
//!   (parallel.rs), with the same output.
//! - [`report`]: the report, the stable interface (docs/analyze-json.md); [`build`] fills
//!   it from the pipeline and the RPC tracker through lnetcap-model.
//! - [`fields`]: the field registry of a peer (type, unit, better, meaning), from which
//!   gates, `diff` and the docs' field table are made.
//! - [`defaults`]: the defaults every front end shares (acceptor port, interval) and the
//!   one parser of rates.
//!
//! No file is opened here: the caller opens captures and outputs.

pub mod analysis;
pub mod build;
pub mod defaults;
pub mod drive;
pub mod fields;
mod parallel;
pub mod report;
pub mod source;

pub use analysis::{Analysis, AnalysisConfig, FileAnalysis, FileOutcome, NoSink, Sink, Snapshot};
pub use drive::{decode_messages, decode_source, drive_piece, Decoded, Notice, Observer, Quiet};
pub use report::{
    BindingLimit, ConnectionEntry, DirectionEntry, DirectionInterval, DirectionTcp, FileReport, FitPoint, Fits,
    IntervalModel, LimitHit, LiveCapture, ModelReport, PeerEntry, ReadPoint, Report, REPORT_SCHEMA_VERSION,
};
pub use source::{Next, PacketSource};
