//! lnetcap-report: the renderers of the report lnetcap-analysis builds.
//!
//! - [`summary`]: the terminal summary.
//! - [`tables`]: Parquet / CSV tables (polars).
//! - [`charts`], [`html`]: the charts (plotters; SVG, PNG) and the self-contained HTML page.
//! - [`gate`], [`diff`]: CI gates over the JSON report (`--fail-if`, `lnetcap diff`).
//!
//! Renderers read the report and write to `impl Write`; the CLI opens the files.

pub mod charts;
pub mod diff;
pub mod fmt;
pub mod gate;
pub mod html;
pub mod index;
pub mod output;
pub mod summary;
pub mod tables;
