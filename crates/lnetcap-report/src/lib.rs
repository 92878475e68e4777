//! lnetcap-report: the analysis result as one owned model, and its renderers.
//!
//! - [`model`]: the report (files, peers, the model per peer and interval).
//! - [`build`]: fills it from the pipeline and the RPC tracker, through lnetcap-model.
//! - [`summary`]: the terminal summary.
//! - [`tables`]: Parquet / CSV tables (polars).
//! - [`charts`], [`html`]: the charts (plotters; SVG, PNG) and the self-contained HTML page.
//! - [`gate`], [`diff`]: CI gates over the JSON report (`--fail-if`, `lnetcap diff`).
//!
//! Renderers write to `impl Write`; the CLI opens the files.

pub mod build;
pub mod charts;
pub mod diff;
pub mod fmt;
pub mod gate;
pub mod html;
pub mod model;
pub mod summary;
pub mod tables;

pub use model::{
    ConnectionEntry, DirectionEntry, DirectionInterval, DirectionTcp, FileReport, Fits, IntervalModel, ModelReport,
    PeerEntry, Report, REPORT_SCHEMA_VERSION,
};
