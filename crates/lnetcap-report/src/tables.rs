//! Tables for polars, pandas and DuckDB: `rpcs`, `messages`, `connections`, `peers` and
//! `timeseries`, as Parquet or CSV, written in batches so memory stays bounded whatever
//! the number of rows.
//!
//! Every table is a list of columns, each with its name (units in the name), type, meaning
//! and the function that reads it from the report model: the schema, the rows and
//! docs/tables.md come from the same list (a test keeps the docs equal to it).

use std::borrow::Cow;
use std::io::Write;

use lnetcap_lnet::record::{Hex, Hex32, MessageRecord};
use lnetcap_rpc::report::IntervalRow;
use lnetcap_rpc::{RpcRecord, Side};
use polars::io::csv::write::BatchedWriter as CsvBatchedWriter;
use polars::io::parquet::write::BatchedWriter as ParquetBatchedWriter;
use polars::prelude::{
    Column, CsvWriter, DataFrame, DataType, Field, IntoSeries, NamedFrom, ParquetWriter, PolarsError, Schema,
    SerWriter, Series, StringChunkedBuilder,
};

use lnetcap_analysis::report::{ConnectionEntry, DirectionEntry, DirectionInterval, IntervalModel, PeerEntry, Report};

/// Rows buffered before a batch is written.
pub const BATCH_ROWS: usize = 16_384;

/// File format of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Apache Parquet (typed columns, compressed).
    Parquet,
    /// CSV with a header line (`,` separated, RFC 4180 quoting, empty = null).
    Csv,
}

impl TableFormat {
    /// File extension.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Parquet => "parquet",
            Self::Csv => "csv",
        }
    }
}

/// Column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer (match bits, cookies, XIDs).
    U64,
    /// 64-bit float.
    F64,
    /// UTF-8 text.
    Str,
    /// Boolean.
    Bool,
}

impl Ty {
    fn dtype(self) -> DataType {
        match self {
            Self::I64 => DataType::Int64,
            Self::U64 => DataType::UInt64,
            Self::F64 => DataType::Float64,
            Self::Str => DataType::String,
            Self::Bool => DataType::Boolean,
        }
    }

    /// The name used in docs/tables.md.
    pub fn name(self) -> &'static str {
        match self {
            Self::I64 => "int64",
            Self::U64 => "uint64",
            Self::F64 => "float64",
            Self::Str => "string",
            Self::Bool => "bool",
        }
    }
}

/// One value. Text borrows from the row it was read from where it can: a table of
/// messages reads a dozen strings a row, and a copy of each was most of the table's cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    /// Unknown or not applicable.
    Null,
    /// Signed integer.
    I(i64),
    /// Unsigned integer.
    U(u64),
    /// Float.
    F(f64),
    /// Text.
    S(Cow<'a, str>),
    /// Boolean.
    B(bool),
}

impl From<i64> for Cell<'_> {
    fn from(v: i64) -> Self {
        Self::I(v)
    }
}
impl From<u64> for Cell<'_> {
    fn from(v: u64) -> Self {
        Self::U(v)
    }
}
impl From<u32> for Cell<'_> {
    fn from(v: u32) -> Self {
        Self::U(u64::from(v))
    }
}
impl From<i32> for Cell<'_> {
    fn from(v: i32) -> Self {
        Self::I(i64::from(v))
    }
}
impl From<u8> for Cell<'_> {
    fn from(v: u8) -> Self {
        Self::U(u64::from(v))
    }
}
impl From<f64> for Cell<'_> {
    fn from(v: f64) -> Self {
        Self::F(v)
    }
}
impl From<bool> for Cell<'_> {
    fn from(v: bool) -> Self {
        Self::B(v)
    }
}
impl<'a> From<&'a str> for Cell<'a> {
    fn from(v: &'a str) -> Self {
        Self::S(Cow::Borrowed(v))
    }
}
impl From<String> for Cell<'_> {
    fn from(v: String) -> Self {
        Self::S(Cow::Owned(v))
    }
}
impl<'a> From<&'a String> for Cell<'a> {
    fn from(v: &'a String) -> Self {
        Self::S(Cow::Borrowed(v))
    }
}
impl<'a> From<&'a std::sync::Arc<str>> for Cell<'a> {
    fn from(v: &'a std::sync::Arc<str>) -> Self {
        Self::S(Cow::Borrowed(v))
    }
}
impl<'a, T: Into<Cell<'a>>> From<Option<T>> for Cell<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl From<Hex> for Cell<'_> {
    fn from(v: Hex) -> Self {
        Self::U(v.0)
    }
}
impl From<Hex32> for Cell<'_> {
    fn from(v: Hex32) -> Self {
        Self::U(u64::from(v.0))
    }
}

/// One column: name, type, meaning, and how to read it from a row source `T`.
pub struct Col<T: ?Sized> {
    /// Column name (units in the name: `_ns`, `_us`, `_bytes`, `_per_s`).
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// What it holds.
    pub doc: &'static str,
    /// Reads the value.
    pub get: for<'a> fn(&'a T) -> Cell<'a>,
}

macro_rules! col {
    ($name:literal, $ty:ident, $doc:literal, $get:expr) => {
        Col { name: $name, ty: Ty::$ty, doc: $doc, get: $get }
    };
}

/// A table: its name and columns.
pub struct Table<T: ?Sized + 'static> {
    /// File name without extension.
    pub name: &'static str,
    /// What a row is.
    pub doc: &'static str,
    /// Columns, in order.
    pub cols: &'static [Col<T>],
}

/// The column buffers of a batch.
enum Buf {
    I(Vec<Option<i64>>),
    U(Vec<Option<u64>>),
    F(Vec<Option<f64>>),
    /// Text straight into the column's storage (one buffer, no string per cell).
    S(StringChunkedBuilder),
    B(Vec<Option<bool>>),
}

impl Buf {
    fn new(ty: Ty, name: &str) -> Self {
        match ty {
            Ty::I64 => Self::I(Vec::new()),
            Ty::U64 => Self::U(Vec::new()),
            Ty::F64 => Self::F(Vec::new()),
            Ty::Str => Self::S(text_column(name)),
            Ty::Bool => Self::B(Vec::new()),
        }
    }

    /// Appends a cell; a cell of another type than the column's is a bug in the column's
    /// reader and becomes null (debug builds stop).
    fn push(&mut self, c: Cell, name: &str) {
        match (self, c) {
            (Self::I(v), Cell::I(x)) => v.push(Some(x)),
            (Self::I(v), Cell::U(x)) => v.push(i64::try_from(x).ok()),
            (Self::U(v), Cell::U(x)) => v.push(Some(x)),
            (Self::U(v), Cell::I(x)) => v.push(u64::try_from(x).ok()),
            (Self::F(v), Cell::F(x)) => v.push(x.is_finite().then_some(x)),
            (Self::F(v), Cell::I(x)) => v.push(Some(x as f64)),
            (Self::F(v), Cell::U(x)) => v.push(Some(x as f64)),
            (Self::S(v), Cell::S(x)) => v.append_value(x),
            (Self::B(v), Cell::B(x)) => v.push(Some(x)),
            (b, Cell::Null) => b.push_null(),
            (b, c) => {
                debug_assert!(false, "column {name}: {c:?} does not fit");
                b.push_null();
            }
        }
    }

    fn push_null(&mut self) {
        match self {
            Self::I(v) => v.push(None),
            Self::U(v) => v.push(None),
            Self::F(v) => v.push(None),
            Self::S(v) => v.append_null(),
            Self::B(v) => v.push(None),
        }
    }

    fn take(&mut self, name: &str) -> Column {
        let s = match self {
            Self::I(v) => Series::new(name.into(), std::mem::take(v)),
            Self::U(v) => Series::new(name.into(), std::mem::take(v)),
            Self::F(v) => Series::new(name.into(), std::mem::take(v)),
            Self::S(v) => std::mem::replace(v, text_column(name)).finish().into_series(),
            Self::B(v) => Series::new(name.into(), std::mem::take(v)),
        };
        s.into()
    }
}

/// An empty text column of a batch.
fn text_column(name: &str) -> StringChunkedBuilder {
    StringChunkedBuilder::new(name.into(), BATCH_ROWS)
}

/// Error writing a table.
#[derive(Debug)]
pub struct TableError(pub String);

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TableError {}

impl From<PolarsError> for TableError {
    fn from(e: PolarsError) -> Self {
        Self(e.to_string())
    }
}

enum Sink<W: Write> {
    Parquet(Box<ParquetBatchedWriter<W>>),
    Csv(CsvBatchedWriter<W>),
}

/// Writes one table in batches; every table starts with a `file` column (the capture).
pub struct TableWriter<T: ?Sized + 'static, W: Write> {
    table: &'static Table<T>,
    files: StringChunkedBuilder,
    bufs: Vec<Buf>,
    pending: usize,
    rows: u64,
    sink: Sink<W>,
}

impl<T: ?Sized + 'static, W: Write> TableWriter<T, W> {
    /// Starts `table` in `format` on `w`.
    pub fn new(table: &'static Table<T>, format: TableFormat, w: W) -> Result<Self, TableError> {
        let schema = Schema::from_iter(
            std::iter::once(Field::new("file".into(), DataType::String))
                .chain(table.cols.iter().map(|c| Field::new(c.name.into(), c.ty.dtype()))),
        );
        let sink = match format {
            TableFormat::Parquet => {
                Sink::Parquet(Box::new(ParquetWriter::new(w).set_parallel(false).batched(&schema)?))
            }
            TableFormat::Csv => Sink::Csv(CsvWriter::new(w).n_threads(1).batched(&schema)?),
        };
        Ok(Self {
            table,
            files: text_column("file"),
            bufs: table.cols.iter().map(|c| Buf::new(c.ty, c.name)).collect(),
            pending: 0,
            rows: 0,
            sink,
        })
    }

    /// Adds a row read from `src`, of capture `file`.
    pub fn push(&mut self, file: &str, src: &T) -> Result<(), TableError> {
        self.files.append_value(file);
        for (c, b) in self.table.cols.iter().zip(&mut self.bufs) {
            b.push((c.get)(src), c.name);
        }
        self.pending += 1;
        self.rows += 1;
        if self.pending >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TableError> {
        if self.pending == 0 {
            return Ok(());
        }
        let files = std::mem::replace(&mut self.files, text_column("file")).finish().into_series();
        let mut cols: Vec<Column> = vec![files.into()];
        cols.extend(self.table.cols.iter().zip(&mut self.bufs).map(|(c, b)| b.take(c.name)));
        let df = DataFrame::new(self.pending, cols)?;
        match &mut self.sink {
            Sink::Parquet(w) => w.write_batch(&df)?,
            Sink::Csv(w) => w.write_batch(&df)?,
        }
        self.pending = 0;
        Ok(())
    }

    /// Writes what is buffered and ends the file; returns the rows written.
    pub fn finish(mut self) -> Result<u64, TableError> {
        self.flush()?;
        match &mut self.sink {
            Sink::Parquet(w) => {
                w.finish()?;
            }
            Sink::Csv(w) => w.finish()?,
        }
        Ok(self.rows)
    }
}

/// `messages`: one row per socklnd/LNet message.
pub static MESSAGES: Table<MessageRecord> = Table {
    name: "messages",
    doc: "one row per socklnd / LNet message, in the order the decoder finished them (the jsonl of `lnetcap decode`, typed)",
    cols: &[
        col!("frame", U64, "1-based frame holding the first header byte", |r| r.frame.into()),
        col!("frame_last", U64, "frame holding the last byte", |r| r.frame_last.into()),
        col!("ts_ns", I64, "capture time of `frame`, ns since the epoch", |r| r.ts_ns.into()),
        col!("ts_last_ns", I64, "capture time of `frame_last`", |r| r.ts_last_ns.into()),
        col!("conn_id", U64, "connection id (order of first packet)", |r| r.conn.into()),
        col!("tcp", Str, "`src:port->dst:port` of the sending direction", |r| (&r.tcp).into()),
        col!("kind", Str, "CONNREQ, HELLO, NOOP, PUT, GET, REPLY, ACK", |r| r.kind.into()),
        col!("proto", U64, "socklnd version framing the message", |r| r.proto.into()),
        col!("stream_offset", U64, "stream offset of the first byte", |r| r.stream_offset.into()),
        col!("wire_bytes", U64, "bytes the message occupies in the stream", |r| r.wire_len.into()),
        col!("header_complete", Bool, "every header byte was captured", |r| r.header_complete.into()),
        col!("payload_captured_bytes", U64, "payload bytes captured", |r| r.payload_captured.into()),
        col!("inferred", Bool, "inferred in a run the capture lost (only the fields its neighbours determine)", |r| r
            .inferred
            .into()),
        col!("src_nid", Str, "source NID", |r| r.src_nid.as_ref().into()),
        col!("dst_nid", Str, "destination NID", |r| r.dst_nid.as_ref().into()),
        col!("src_pid", U64, "source pid", |r| r.src_pid.into()),
        col!("dst_pid", U64, "destination pid", |r| r.dst_pid.into()),
        col!("connreq_version", U64, "acceptor connreq version", |r| r.connreq_version.into()),
        col!("hello_version", U64, "HELLO version", |r| r.hello_version.into()),
        col!("conn_type", Str, "HELLO connection type", |r| r.conn_type.into()),
        col!("incarnation", U64, "HELLO incarnation", |r| r.incarnation.into()),
        col!("csum", U64, "ksock checksum (when non-zero)", |r| r.csum.into()),
        col!("zc_req_cookie", U64, "zero-copy request cookie", |r| r.zc_req_cookie.into()),
        col!("zc_ack_cookie", U64, "zero-copy ACK cookie", |r| r.zc_ack_cookie.into()),
        col!("payload_length_bytes", U64, "LNet payload length", |r| r.payload_length.into()),
        col!("portal", U64, "portal (PUT, GET)", |r| r.portal.into()),
        col!("portal_name", Str, "portal name", |r| r.portal_name.into()),
        col!("match_bits", U64, "match bits (PUT, GET, ACK)", |r| r.match_bits.into()),
        col!("hdr_data", U64, "PUT hdr_data", |r| r.hdr_data.into()),
        col!("put_offset_bytes", U64, "PUT offset in the target MD", |r| r.put_offset.into()),
        col!("ack_wmd", Str, "PUT ack_wmd", |r| r.ack_wmd.as_ref().into()),
        col!("return_wmd", Str, "GET return_wmd", |r| r.return_wmd.as_ref().into()),
        col!("dst_wmd", Str, "REPLY / ACK dst_wmd", |r| r.dst_wmd.as_ref().into()),
        col!("sink_length_bytes", U64, "GET sink_length", |r| r.sink_length.into()),
        col!("src_offset_bytes", U64, "GET src_offset", |r| r.src_offset.into()),
        col!("mlength_bytes", U64, "ACK mlength", |r| r.mlength.into()),
        col!("ptlrpc", Str, "PtlRPC request, reply or error", |r| r.ptlrpc.into()),
        col!("opc", U64, "PtlRPC opcode", |r| r.opc.into()),
        col!("opc_name", Str, "PtlRPC opcode name", |r| r.opc_name.into()),
        col!("status", I64, "PtlRPC pb_status", |r| r.status.into()),
        col!("service_time_s", U64, "PtlRPC pb_service_time (whole seconds, at least 1)", |r| r.service_time.into()),
        col!("pb_mbits", U64, "PtlRPC pb_mbits", |r| r.pb_mbits.into()),
        col!("jobid", Str, "PtlRPC jobid", |r| r.jobid.as_ref().into()),
        col!("early_reply", Bool, "PtlRPC early reply", |r| r.early_reply.into()),
        col!("srpc_type", Str, "self-test message type", |r| r.srpc_type.into()),
        col!("rpyid", U64, "self-test rpyid", |r| r.rpyid.into()),
        col!("bulkid", U64, "self-test bulkid", |r| r.bulkid.into()),
        col!("brw_rw", Str, "self-test BRW direction", |r| r.brw_rw.into()),
        col!("brw_len_bytes", U64, "self-test BRW bulk length", |r| r.brw_len.into()),
        col!("srpc_status", U64, "self-test reply status", |r| r.srpc_status.into()),
        col!("ping_nids", Str, "LNet ping: NIDs listed, space separated", |r| r
            .ping_nids
            .as_ref()
            .map(|v| v.join(" "))
            .into()),
    ],
};

/// `rpcs`: one row per RPC.
pub static RPCS: Table<RpcRecord> = Table {
    name: "rpcs",
    doc: "one row per RPC, in the order they finished (the lines of `--rpcs`, typed; times are capture timestamps)",
    cols: &[
        col!("id", U64, "sequence number in the order RPCs were first seen", |r| r.id.into()),
        col!("client_nid", Str, "client NID (the request's sender)", |r| (&r.client_nid).into()),
        col!("server_nid", Str, "server NID", |r| (&r.server_nid).into()),
        col!("kind", Str, "ptlrpc, lst_brw, lst_ping, lst_framework, lnet_ping", |r| r.kind.as_str().into()),
        col!("xid", U64, "PtlRPC XID, self-test rpyid or ping match bits", |r| r.xid.into()),
        col!("opc", U64, "PtlRPC opcode", |r| r.opc.into()),
        col!("opc_name", Str, "opcode name or self-test kind (BRW_READ, BRW_WRITE, PING, LNET_PING)", |r| r
            .opc_name
            .as_deref()
            .into()),
        col!("op", Str, "read or write (bulk RPCs)", |r| r.op.into()),
        col!("portal", U64, "request portal", |r| r.portal.into()),
        col!("bulk_bytes", U64, "bulk bytes moved", |r| r.bytes.into()),
        col!("bulk_messages", U64, "bulk data messages seen", |r| r.bulk_messages.into()),
        col!("t_start_ns", I64, "request first byte", |r| r.t_start_ns.into()),
        col!("t_req_end_ns", I64, "request last byte", |r| r.t_req_end_ns.into()),
        col!("t_bulk_start_ns", I64, "first byte of the first bulk message", |r| r.t_bulk_start_ns.into()),
        col!("t_bulk_end_ns", I64, "last byte of the last bulk data message", |r| r.t_bulk_end_ns.into()),
        col!("t_reply_ns", I64, "reply first byte", |r| r.t_reply_ns.into()),
        col!("t_end_ns", I64, "reply last byte", |r| r.t_end_ns.into()),
        col!("t_reply_ack_ns", I64, "LNet ACK of a difficult reply", |r| r.t_reply_ack_ns.into()),
        col!("latency_us", F64, "request first byte to reply last byte at the capture point", |r| r.latency_us.into()),
        col!("client_latency_us", F64, "latency as the client sees it", |r| r.client_latency_us.into()),
        col!("request_us", F64, "phase: request first to last byte", |r| r.phases.request_us.into()),
        col!("server_wait_us", F64, "phase: request to bulk start", |r| r.phases.server_wait_us.into()),
        col!("bulk_us", F64, "phase: bulk", |r| r.phases.bulk_us.into()),
        col!("server_us", F64, "phase: bulk end (or request) to reply", |r| r.phases.server_us.into()),
        col!("reply_us", F64, "phase: reply first to last byte", |r| r.phases.reply_us.into()),
        col!("early_replies", U64, "early replies seen", |r| r.early_replies.into()),
        col!("resends", U64, "requests sent again with the same XID", |r| r.resends.into()),
        col!("status", I64, "reply status", |r| r.status.into()),
        col!("service_time_s", U64, "pb_service_time (whole seconds, at least 1)", |r| r.service_time_s.into()),
        col!("jobid", Str, "job id", |r| r.jobid.as_ref().into()),
        col!("partial", Bool, "some part of the RPC was not captured", |r| r.partial.into()),
        col!("missing", Str, "what was not captured, space separated (docs/analyze-json.md)", |r| r
            .missing
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(" ")
            .into()),
        col!("first_frame", U64, "frame of the first message seen", |r| r.first_frame.into()),
    ],
};

/// `peers`: one row per peer pair.
pub static PEERS: Table<PeerEntry> = Table {
    name: "peers",
    doc: "one row per client/server NID pair and capture: the JSON report's peers, flat",
    cols: &[
        col!("client_nid", Str, "client NID", |p| (&p.peer.client_nid).into()),
        col!("server_nid", Str, "server NID", |p| (&p.peer.server_nid).into()),
        col!("connections", U64, "TCP connections of the pair", |p| (p.peer.connections.len() as u64).into()),
        col!("rpcs", U64, "complete RPCs", |p| p.peer.rpcs.into()),
        col!("rpcs_partial", U64, "partial RPCs", |p| p.peer.rpcs_partial.into()),
        col!("bytes_read", U64, "bulk bytes server to client", |p| p.peer.bytes_read.into()),
        col!("bytes_written", U64, "bulk bytes client to server", |p| p.peer.bytes_written.into()),
        col!("throughput_bytes_per_s", F64, "bulk throughput over the steady window", |p| p
            .peer
            .throughput_bytes_per_s
            .into()),
        col!("rpcs_in_flight_mean", F64, "time-weighted mean of RPCs in flight", |p| p.peer.rpcs_in_flight.mean.into()),
        col!("rpcs_in_flight_steady_mean", F64, "... over the steady window", |p| p
            .peer
            .rpcs_in_flight
            .steady_mean
            .into()),
        col!("rpcs_in_flight_max", I64, "most RPCs in flight", |p| p.peer.rpcs_in_flight.max.into()),
        col!("messages_in_flight_max", I64, "most LNet messages in flight, either direction", |p| p
            .peer
            .messages_in_flight
            .max
            .into()),
        col!("inferred_peer_credits", I64, "where peer_credits binds (null: not seen binding)", |p| p
            .peer
            .messages_in_flight
            .inferred_peer_credits
            .into()),
        col!("latency_p50_us", F64, "RPC latency as the client sees it, median", |p| p.peer.latency_us.p50.into()),
        col!("latency_p95_us", F64, "... 95th percentile", |p| p.peer.latency_us.p95.into()),
        col!("latency_p99_us", F64, "... 99th percentile", |p| p.peer.latency_us.p99.into()),
        col!("latency_max_us", F64, "... largest", |p| p.peer.latency_us.max.into()),
        col!("rtt_min_us", F64, "smallest RTT", |p| p.rtt_us.min.into()),
        col!("rtt_p50_us", F64, "median RTT", |p| p.rtt_us.p50.into()),
        col!("client_loop_us", F64, "capture point to client and back, median", |p| p.rtt_us.client_loop_us.into()),
        col!("server_loop_us", F64, "capture point to server and back, median", |p| p.rtt_us.server_loop_us.into()),
        col!("capture_side", Str, "client, server or middle", |p| p.rtt_us.capture_side.map(|s| s.as_str()).into()),
        col!("retransmits", U64, "retransmitted segments", |p| p.tcp.retransmits.into()),
        col!("retransmitted_share", F64, "retransmitted share of bulk bytes", |p| p.tcp.retransmitted_share.into()),
        col!("bytes_in_flight_max", U64, "largest bytes in flight on a bulk connection", |p| p
            .tcp
            .bytes_in_flight_max
            .into()),
        col!("cwnd_estimate_p50_bytes", U64, "congestion-window estimate, median over the steady window", |p| p
            .tcp
            .cwnd_estimate_p50
            .into()),
        col!("cwnd_estimate_max_bytes", U64, "congestion-window estimate, largest", |p| p.tcp.cwnd_estimate_max.into()),
        col!("rwnd_p50_bytes", U64, "receive window, median", |p| p.tcp.rwnd_p50.into()),
        col!("tcp_efficiency_loss", F64, "share of the other bounds TCP's window cannot carry", |p| p
            .tcp
            .efficiency_loss
            .into()),
        col!("t_rpc_bytes_per_s", F64, "RIF × BS / (2 × RTT)", |p| p.model.t_rpc_bytes_per_s.into()),
        col!("t_model_bytes_per_s", F64, "the smallest bound", |p| p.model.t_model_bytes_per_s.into()),
        col!("efficiency", F64, "observed / T_model", |p| p.model.efficiency.into()),
        col!("needed_rif", U64, "RPCs in flight to fill the link or reach the next bound", |p| p
            .model
            .needed_rif
            .into()),
        col!(
            "binding_limit",
            Str,
            "rpc_window, lnet_credits, tcp_congestion, receive_window, server, link, or none (no bulk traffic)",
            |p| p.binding_limit.as_str().into()
        ),
        col!("link_source", Str, "where the link rate comes from", |p| p.model.link_source.into()),
        col!("best_sustained_bytes_per_s", F64, "best 1 s rate seen", |p| p.model.best_sustained_bytes_per_s.into()),
        col!("steady_state", Bool, "the steady window spans at least 10 round trips", |p| p.model.steady_state.into()),
        col!("advice", Str, "settings to change, `setting=value` joined by `; `", |p| p
            .advice
            .iter()
            .map(|a| format!("{}={}", a.setting, a.value))
            .collect::<Vec<_>>()
            .join("; ")
            .into()),
    ],
};

/// A connection direction row.
pub struct DirectionRow {
    /// The connection.
    pub conn: ConnectionEntry,
    /// 0: from the active side, 1: from the passive side.
    pub dir: usize,
}

impl DirectionRow {
    fn d(&self) -> &DirectionEntry {
        &self.conn.directions[self.dir]
    }
}

/// `connections`: one row per connection direction.
pub static CONNECTIONS: Table<DirectionRow> = Table {
    name: "connections",
    doc: "one row per TCP connection and direction with LNet traffic: decode accounting and TCP behaviour",
    cols: &[
        col!("conn_id", U64, "connection id (order of first packet)", |r| r.conn.id.into()),
        col!("from_active", Bool, "the direction starts at the active side (the SYN / connreq sender)", |r| (r.dir
            == 0)
            .into()),
        col!("tcp", Str, "`src:port->dst:port`", |r| (&r.d().stream.tcp).into()),
        col!("sender", Str, "client or server (null outside any peer pair)", |r| r
            .d()
            .sender
            .map(|s| s.as_str())
            .into()),
        col!("client_nid", Str, "the peer pair's client NID", |r| r.conn.client_nid.as_ref().into()),
        col!("server_nid", Str, "the peer pair's server NID", |r| r.conn.server_nid.as_ref().into()),
        col!("conn_type", Str, "CONTROL, BULK_IN, BULK_OUT, ANY (active side's view)", |r| r.conn.conn_type.into()),
        col!("type_inferred", Bool, "the type was inferred from the traffic", |r| r.conn.type_inferred.into()),
        col!("first_frame", U64, "first frame of the connection", |r| r.conn.first_frame.into()),
        col!("last_frame", U64, "last frame", |r| r.conn.last_frame.into()),
        col!("segments", U64, "TCP segments", |r| r.d().stream.segments.into()),
        col!("bytes_on_wire", U64, "payload bytes on the wire (IP lengths)", |r| r.d().stream.bytes_on_wire.into()),
        col!("stream_bytes", U64, "stream bytes (first copies)", |r| r.d().stream.stream_bytes.into()),
        col!("bytes_captured", U64, "stream bytes captured", |r| r.d().stream.bytes_captured.into()),
        col!("bytes_snaplen", U64, "stream bytes cut by the snaplen", |r| r.d().stream.bytes_snaplen.into()),
        col!("bytes_lost", U64, "stream bytes the capture lost", |r| r.d().stream.bytes_lost.into()),
        col!("bytes_retransmitted", U64, "bytes seen again", |r| r.d().stream.bytes_retransmitted.into()),
        col!("messages", U64, "messages decoded", |r| r.d().stream.messages.into()),
        col!("messages_inferred", U64, "messages inferred in skipped runs", |r| r.d().stream.messages_inferred.into()),
        col!("bytes_skipped", U64, "bytes skipped while desynchronised", |r| r.d().stream.bytes_skipped.into()),
        col!("headers_lost", U64, "headers lost to the snaplen", |r| r.d().stream.headers_lost.into()),
        col!("desyncs", U64, "framing lost", |r| r.d().stream.desyncs.into()),
        col!("payload_bytes", U64, "TCP payload bytes (retransmissions included)", |r| r
            .d()
            .tcp_perf
            .payload_bytes
            .into()),
        col!("data_segments", U64, "payload segments", |r| r.d().tcp_perf.data_segments.into()),
        col!("retransmits", U64, "retransmitted segments", |r| r.d().tcp_perf.retransmits.into()),
        col!("retransmits_fast", U64, "... after 3 duplicate ACKs", |r| r.d().tcp_perf.retransmits_fast.into()),
        col!("retransmits_timeout", U64, "... after a timeout", |r| r.d().tcp_perf.retransmits_timeout.into()),
        col!("retransmits_spurious", U64, "... of data already acknowledged", |r| r
            .d()
            .tcp_perf
            .retransmits_spurious
            .into()),
        col!("out_of_order", U64, "segments filling a hole the capture had not seen", |r| r
            .d()
            .tcp_perf
            .out_of_order
            .into()),
        col!("dup_acks", U64, "duplicate ACKs from the receiver", |r| r.d().tcp_perf.dup_acks.into()),
        col!("zero_windows", U64, "zero-window ACKs from the receiver", |r| r.d().tcp_perf.zero_windows.into()),
        col!("loop_min_us", F64, "capture point to the receiver and back, smallest", |r| r
            .d()
            .tcp_perf
            .loop_min_us
            .into()),
        col!("loop_p50_us", F64, "... median", |r| r.d().tcp_perf.loop_p50_us.into()),
        col!("loop_p95_us", F64, "... 95th percentile", |r| r.d().tcp_perf.loop_p95_us.into()),
        col!("loop_samples", U64, "loop samples", |r| r.d().tcp_perf.loop_samples.into()),
        col!("bytes_in_flight_max", U64, "largest bytes in flight (sender's view)", |r| r
            .d()
            .tcp_perf
            .bytes_in_flight_max
            .into()),
        col!("cwnd_estimate_max_bytes", U64, "largest congestion-window estimate", |r| r
            .d()
            .tcp_perf
            .cwnd_estimate_max
            .into()),
        col!("rcv_wscale", U64, "receiver's window scale (from its SYN)", |r| r.d().tcp_perf.rcv_wscale.into()),
        col!("wscale_inferred", Bool, "the scale was not seen", |r| r.d().tcp_perf.wscale_inferred.into()),
        col!("idle_ms", F64, "time with nothing outstanding and nothing sent for more than a loop", |r| r
            .d()
            .tcp_perf
            .idle_ms
            .into()),
    ],
};

/// A time-series row: a peer's interval (with its model) or a connection direction's.
pub enum SeriesRow {
    /// A peer pair in one interval.
    Peer {
        /// Client NID.
        client_nid: String,
        /// Server NID.
        server_nid: String,
        /// The interval.
        row: IntervalRow,
        /// The interval's model, when it had bulk traffic.
        model: Option<IntervalModel>,
        /// TCP over the pair's connections.
        tcp: PeerTcpInterval,
    },
    /// A connection direction in one interval.
    Conn {
        /// Client NID of the pair the connection belongs to.
        client_nid: Option<String>,
        /// Server NID.
        server_nid: Option<String>,
        /// Connection id.
        conn_id: u32,
        /// `src:port->dst:port`.
        tcp: String,
        /// `client` or `server`.
        sender: Option<Side>,
        /// The interval.
        iv: DirectionInterval,
    },
}

/// TCP of a peer pair in one interval: bytes in flight summed over the bulk sender's
/// directions, retransmits over all the pair's directions.
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerTcpInterval {
    /// Largest bytes in flight, summed over the bulk directions.
    pub bytes_in_flight_max: Option<u64>,
    /// Retransmitted segments, all directions.
    pub retransmits: u64,
}

macro_rules! peer_only {
    ($r:ident, $row:ident, $m:ident => $e:expr) => {
        match $r {
            SeriesRow::Peer { row: $row, model: $m, .. } => {
                let _ = (&$row, &$m);
                Cell::from($e)
            }
            SeriesRow::Conn { .. } => Cell::Null,
        }
    };
}

macro_rules! conn_only {
    ($r:ident, $iv:ident => $e:expr) => {
        match $r {
            SeriesRow::Conn { iv: $iv, .. } => Cell::from($e),
            SeriesRow::Peer { .. } => Cell::Null,
        }
    };
}

/// `timeseries`: per peer and per connection direction, per interval.
pub static TIMESERIES: Table<SeriesRow> = Table {
    name: "timeseries",
    doc: "one row per interval (`--interval-ms`) of each peer pair (`scope` = peer) and of each connection direction (`scope` = connection); columns that do not apply to a scope are null",
    cols: &[
        col!("scope", Str, "peer or connection", |r| match r {
            SeriesRow::Peer { .. } => "peer".into(),
            SeriesRow::Conn { .. } => "connection".into(),
        }),
        col!("client_nid", Str, "the peer pair's client NID", |r| match r {
            SeriesRow::Peer { client_nid, .. } => client_nid.into(),
            SeriesRow::Conn { client_nid, .. } => client_nid.as_ref().into(),
        }),
        col!("server_nid", Str, "the peer pair's server NID", |r| match r {
            SeriesRow::Peer { server_nid, .. } => server_nid.into(),
            SeriesRow::Conn { server_nid, .. } => server_nid.as_ref().into(),
        }),
        col!("conn_id", U64, "connection id (connection rows)", |r| match r {
            SeriesRow::Conn { conn_id, .. } => (*conn_id).into(),
            SeriesRow::Peer { .. } => Cell::Null,
        }),
        col!("tcp", Str, "`src:port->dst:port` (connection rows)", |r| match r {
            SeriesRow::Conn { tcp, .. } => tcp.into(),
            SeriesRow::Peer { .. } => Cell::Null,
        }),
        col!("sender", Str, "client or server (connection rows)", |r| match r {
            SeriesRow::Conn { sender, .. } => sender.map(|s| s.as_str()).into(),
            SeriesRow::Peer { .. } => Cell::Null,
        }),
        col!("t_ns", I64, "interval start, ns since the epoch", |r| match r {
            SeriesRow::Peer { row, .. } => row.t_ns.into(),
            SeriesRow::Conn { iv, .. } => iv.t_ns.into(),
        }),
        col!("read_bytes_per_s", F64, "bulk read throughput (peer rows)", |r| peer_only!(r, row, m => row.read_bytes_per_s)),
        col!("write_bytes_per_s", F64, "bulk write throughput (peer rows)", |r| peer_only!(r, row, m => row.write_bytes_per_s)),
        col!("rpcs_completed", U64, "RPCs completed (peer rows)", |r| peer_only!(r, row, m => row.rpcs_completed)),
        col!("rpcs_in_flight_mean", F64, "RPCs in flight, time-weighted mean (peer rows)", |r| peer_only!(r, row, m => row.rpcs_in_flight_mean)),
        col!("rpcs_in_flight_max", I64, "RPCs in flight, most (peer rows)", |r| peer_only!(r, row, m => row.rpcs_in_flight_max)),
        col!("messages_in_flight_max_c2s", I64, "LNet messages in flight client to server, most (peer rows)", |r| peer_only!(r, row, m => row.messages_in_flight_max_c2s)),
        col!("messages_in_flight_max_s2c", I64, "LNet messages in flight server to client, most (peer rows)", |r| peer_only!(r, row, m => row.messages_in_flight_max_s2c)),
        col!("payload_bytes_per_s", F64, "TCP payload throughput, retransmissions included (connection rows)", |r| conn_only!(r, iv => iv.payload_bytes_per_s)),
        col!("bytes_in_flight_max", U64, "largest bytes in flight outside loss recovery (peer rows: summed over the bulk connections)", |r| match r {
            SeriesRow::Peer { tcp, .. } => tcp.bytes_in_flight_max.into(),
            SeriesRow::Conn { iv, .. } => iv.bytes_in_flight_max.into(),
        }),
        col!("cwnd_estimate_bytes", U64, "congestion-window estimate (peer rows: summed over the bulk connections)", |r| match r {
            SeriesRow::Peer { model, .. } => model.as_ref().and_then(|m| m.cwnd_estimate).into(),
            SeriesRow::Conn { iv, .. } => iv.cwnd_estimate.into(),
        }),
        col!("rwnd_bytes", U64, "receive window, last advertised (connection rows)", |r| conn_only!(r, iv => iv.rwnd)),
        col!("rtt_min_us", F64, "peer rows: smallest RTT; connection rows: smallest loop capture point to receiver and back", |r| match r {
            SeriesRow::Peer { model, .. } => model.as_ref().and_then(|m| m.rtt_us).map(|x| x.min_us).into(),
            SeriesRow::Conn { iv, .. } => iv.loop_min_us.into(),
        }),
        col!("rtt_mean_us", F64, "peer rows: mean RTT; connection rows: mean loop", |r| match r {
            SeriesRow::Peer { model, .. } => model.as_ref().and_then(|m| m.rtt_us).map(|x| x.mean_us).into(),
            SeriesRow::Conn { iv, .. } => iv.loop_mean_us.into(),
        }),
        col!("retransmits", U64, "retransmitted segments (peer rows: all the pair's connections)", |r| match r {
            SeriesRow::Peer { tcp, .. } => tcp.retransmits.into(),
            SeriesRow::Conn { iv, .. } => iv.retransmits.into(),
        }),
        col!("t_rpc_bytes_per_s", F64, "T_rpc with the interval's RPCs in flight (peer rows with bulk)", |r| peer_only!(r, row, m => m.as_ref().map(|m| m.t_rpc_bytes_per_s))),
        col!("t_model_bytes_per_s", F64, "the interval's smallest bound (peer rows with bulk)", |r| peer_only!(r, row, m => m.as_ref().map(|m| m.t_model_bytes_per_s))),
        col!("binding_limit", Str, "the interval's binding limit (peer rows with bulk)", |r| peer_only!(r, row, m => m.as_ref().map(|m| m.binding_limit.as_str()))),
    ],
};

/// The time-series rows of a report with their file, in order: each peer's intervals,
/// then each connection direction's.
pub fn series_rows(r: &Report) -> Vec<(String, SeriesRow)> {
    let mut out = Vec::new();
    for e in &r.peers {
        let conns: Vec<&ConnectionEntry> = r.connections.iter().filter(|c| e.owns(c)).collect();
        let bulk_sender = e.bulk_sender();
        for row in &e.peer.timeseries {
            let model = e.intervals.iter().find(|m| m.t_ns == row.t_ns).cloned();
            let mut tcp = PeerTcpInterval::default();
            for c in &conns {
                for d in &c.directions {
                    if let Some(iv) = d.series.iter().find(|iv| iv.t_ns == row.t_ns) {
                        tcp.retransmits += u64::from(iv.retransmits);
                        if d.sender == Some(bulk_sender) {
                            if let Some(f) = iv.bytes_in_flight_max {
                                *tcp.bytes_in_flight_max.get_or_insert(0) += f;
                            }
                        }
                    }
                }
            }
            out.push((
                e.file.clone(),
                SeriesRow::Peer {
                    client_nid: e.peer.client_nid.clone(),
                    server_nid: e.peer.server_nid.clone(),
                    row: row.clone(),
                    model,
                    tcp,
                },
            ));
        }
    }
    for c in &r.connections {
        for d in &c.directions {
            for iv in &d.series {
                out.push((
                    c.file.clone(),
                    SeriesRow::Conn {
                        client_nid: c.client_nid.clone(),
                        server_nid: c.server_nid.clone(),
                        conn_id: c.id,
                        tcp: d.stream.tcp.clone(),
                        sender: d.sender,
                        iv: *iv,
                    },
                ));
            }
        }
    }
    out
}

/// The table's columns as a Markdown table (for docs/tables.md).
pub fn markdown<T: ?Sized>(t: &Table<T>) -> String {
    let mut s = format!(
        "## `{}`\n\n{}.\n\n| column | type | meaning |\n|---|---|---|\n| `file` | string | capture file |\n",
        t.name, t.doc
    );
    for c in t.cols {
        s.push_str(&format!("| `{}` | {} | {} |\n", c.name, c.ty.name(), c.doc));
    }
    s
}

/// A table written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Its name (`rpcs`, `messages`, `connections`, `peers`, `timeseries`).
    pub table: &'static str,
    /// Its file name in the format written (`rpcs.parquet`).
    pub file_name: String,
    /// Rows.
    pub rows: u64,
}

/// Where a table's bytes go. The caller opens it (a file of `--out DIR`, a partition of
/// a batch dataset, memory in the tests): this crate opens no file.
pub type TableOut = Box<dyn Write + Send>;

/// Opens the output of a table, given its file name (`rpcs.parquet`).
pub type OpenTable = Box<dyn FnMut(&str) -> Result<TableOut, TableError> + Send>;

/// The five tables of `--out DIR`: `messages` and `rpcs` stream during the run, the
/// others are written from the finished report.
pub struct TableSet {
    format: TableFormat,
    open: OpenTable,
    messages: TableWriter<MessageRecord, TableOut>,
    rpcs: TableWriter<RpcRecord, TableOut>,
}

/// A table's file name in `format`.
pub fn file_name<T: ?Sized>(table: &Table<T>, format: TableFormat) -> String {
    format!("{}.{}", table.name, format.extension())
}

fn start<T: ?Sized + 'static>(
    open: &mut OpenTable,
    table: &'static Table<T>,
    format: TableFormat,
) -> Result<TableWriter<T, TableOut>, TableError> {
    TableWriter::new(table, format, open(&file_name(table, format))?)
}

fn written<T: ?Sized>(table: &Table<T>, format: TableFormat, rows: u64) -> Written {
    Written { table: table.name, file_name: file_name(table, format), rows }
}

impl TableSet {
    /// Starts the streamed tables, each on what `open` gives for its file name.
    pub fn new(format: TableFormat, mut open: OpenTable) -> Result<Self, TableError> {
        let messages = start(&mut open, &MESSAGES, format)?;
        let rpcs = start(&mut open, &RPCS, format)?;
        Ok(Self { format, open, messages, rpcs })
    }

    /// Adds a message of capture `file`.
    pub fn message(&mut self, file: &str, m: &MessageRecord) -> Result<(), TableError> {
        self.messages.push(file, m)
    }

    /// Adds an RPC of capture `file`.
    pub fn rpc(&mut self, file: &str, r: &RpcRecord) -> Result<(), TableError> {
        self.rpcs.push(file, r)
    }

    /// Ends the streamed tables and writes `peers`, `connections` and `timeseries` from
    /// the report; returns every table written, in table order.
    pub fn finish(self, report: &Report) -> Result<Vec<Written>, TableError> {
        let Self { format, mut open, messages, rpcs } = self;
        let mut out = vec![written(&RPCS, format, rpcs.finish()?), written(&MESSAGES, format, messages.finish()?)];
        let mut w = start(&mut open, &CONNECTIONS, format)?;
        for c in &report.connections {
            for dir_ix in 0..c.directions.len() {
                w.push(&c.file, &DirectionRow { conn: c.clone(), dir: dir_ix })?;
            }
        }
        out.push(written(&CONNECTIONS, format, w.finish()?));
        let mut w = start(&mut open, &PEERS, format)?;
        for p in &report.peers {
            w.push(&p.file, p)?;
        }
        out.push(written(&PEERS, format, w.finish()?));
        let mut w = start(&mut open, &TIMESERIES, format)?;
        for (file, row) in series_rows(report) {
            w.push(&file, &row)?;
        }
        out.push(written(&TIMESERIES, format, w.finish()?));
        Ok(out)
    }
}

/// docs/tables.md: every table's columns.
pub fn tables_doc() -> String {
    let mut s = String::from(
        "# lnetcap tables\n\n\
         `lnetcap analyze FILE... --out DIR` writes five tables into DIR, as Apache Parquet\n\
         (default) or CSV (`--table-format csv`): `rpcs`, `messages`, `connections`, `peers`\n\
         and `timeseries`. Column names are stable and carry their units (`_ns`, `_us`,\n\
         `_ms`, `_s`, `_bytes`, `_bytes_per_s`); times (`t_*_ns`, `ts_*_ns`) are capture\n\
         timestamps in nanoseconds since the Unix epoch. Every table starts with `file`, the\n\
         capture the row comes from, so the tables of many captures concatenate. A null (an\n\
         empty CSV field) means not known or not applicable, never zero. Match bits, cookies\n\
         and XIDs are unsigned 64-bit integers (hex strings in the JSON).\n\n\
         This file is generated from the column lists in `crates/lnetcap-report/src/tables.rs`\n\
         (a test keeps it equal: `UPDATE_DOCS=1 cargo test --test tables` rewrites it).\n\n\
         ```python\n\
         import polars as pl\n\
         rpcs = pl.read_parquet(\"report/rpcs.parquet\")\n\
         rpcs.group_by(\"op\").agg(pl.col(\"latency_us\").median())\n\
         ```\n\n\
         ```sql\n\
         -- duckdb\n\
         SELECT binding_limit, count(*) FROM 'report/timeseries.parquet'\n\
         WHERE scope = 'peer' GROUP BY ALL;\n\
         ```\n\n",
    );
    for t in [markdown(&RPCS), markdown(&MESSAGES), markdown(&CONNECTIONS), markdown(&PEERS), markdown(&TIMESERIES)] {
        s.push_str(&t);
        s.push('\n');
    }
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}
