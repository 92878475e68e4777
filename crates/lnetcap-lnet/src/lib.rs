//! socklnd / LNet / PtlRPC / LNet self-test decoding over reassembled TCP streams.
//!
//! - [`wire`]: byte layouts (parse and emit) of every structure in
//!   `shared/design/wire-format.md`: acceptor connreq v1/v2, HELLO V1–V4, ksock header,
//!   LNet headers nid4/nid16, lustre_msg_v2 + ptlrpc_body, srpc_msg, ping info.
//! - [`nid`]: NIDs, printed the way Lustre prints them.
//! - [`framer`]: one direction's message framing, resynchronisation after lost headers.
//! - [`pipeline`]: packets → TCP streams → messages, with frame and byte accounting.
//! - [`record`]: a message as a flat record; [`jsonw`]: records written as JSON lines.
//!
//! Nothing here reads files, clocks or the environment; times are capture timestamps.

pub mod framer;
pub mod jsonw;
pub mod limits;
pub mod message;
pub mod names;
pub mod nid;
pub mod pipeline;
pub mod record;
pub mod wire;

pub use message::{App, Body, FramingEvent, LnetEvent, Message, Proto};
pub use nid::Nid;
pub use pipeline::{ConnSummary, DecodeConfig, DecodeSummary, DirSummary, FrameAccounting, Pipeline};
