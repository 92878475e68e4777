//! Owned results of the decoder: messages and framing events.

use lnetcap_tcp::{ConnId, Dir, Stamp};

use crate::wire::{lnet_type_name, Connreq, Hello, KsockHdr, LnetHdr, PingInfo, PtlrpcInfo, SrpcInfo};

/// socklnd protocol version spoken on one direction of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    /// V1: bare 72-byte LNet headers.
    V1,
    /// V2: ksock header + nid4 LNet header, checksums possible.
    V2,
    /// V3: ksock header + nid4 LNet header.
    V3,
    /// V4: ksock header + nid16 LNet header.
    V4,
}

impl Proto {
    /// From a HELLO version number.
    pub fn from_version(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::V1,
            2 => Self::V2,
            3 => Self::V3,
            4 => Self::V4,
            _ => return None,
        })
    }

    /// The version number.
    pub fn version(self) -> u8 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
            Self::V3 => 3,
            Self::V4 => 4,
        }
    }

    /// True when messages carry the 24-byte ksock header.
    pub fn has_ksock(self) -> bool {
        self != Self::V1
    }
}

/// What an LNet PUT/REPLY payload was decoded as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum App {
    /// Not decoded (bulk data, not captured, unknown).
    None,
    /// PtlRPC lustre_msg.
    Ptlrpc(PtlrpcInfo),
    /// LNet self-test srpc_msg.
    Srpc(SrpcInfo),
    /// LNet ping / push info.
    Ping(PingInfo),
}

/// The content of a message.
// Nearly every message is LNet, and messages travel boxed (LnetEvent::Message): boxing the
// LNet variant as well would only add an allocation per message.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// Acceptor connection request.
    Connreq(Connreq),
    /// socklnd HELLO.
    Hello(Hello),
    /// ksock NOOP (ZC-ACK or keepalive).
    Noop(KsockHdr),
    /// An LNet message.
    Lnet {
        /// ksock header (absent in V1).
        ksock: Option<KsockHdr>,
        /// LNet header.
        hdr: LnetHdr,
        /// Decoded payload.
        app: App,
    },
}

/// One decoded message of a byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Connection.
    pub conn: ConnId,
    /// Direction.
    pub dir: Dir,
    /// Stream offset of the first byte.
    pub offset: u64,
    /// Bytes the message occupies in the stream (headers + payload).
    pub wire_len: u64,
    /// Segment carrying the first header byte.
    pub first: Stamp,
    /// Segment carrying the last byte.
    pub last: Stamp,
    /// socklnd version framing this direction (None before the HELLO).
    pub proto: Option<Proto>,
    /// Content.
    pub body: Body,
    /// Every header byte was captured.
    pub header_complete: bool,
    /// Payload bytes captured (≤ payload length).
    pub payload_captured: u64,
    /// Not decoded but inferred: its header fell into bytes the capture lost, and the run
    /// of lost bytes is an exact number of messages like its decoded neighbours (see
    /// `framer` for the rules). Only fields the neighbours determine are filled in.
    pub inferred: bool,
}

impl Message {
    /// `CONNREQ`, `HELLO`, `NOOP`, `PUT`, `GET`, `REPLY`, `ACK` (or `UNKNOWN`).
    pub fn kind(&self) -> &'static str {
        match &self.body {
            Body::Connreq(_) => "CONNREQ",
            Body::Hello(_) => "HELLO",
            Body::Noop(_) => "NOOP",
            Body::Lnet { hdr, .. } => lnet_type_name(hdr.msg_type),
        }
    }

    /// The LNet header, if this is an LNet message.
    pub fn lnet(&self) -> Option<&LnetHdr> {
        match &self.body {
            Body::Lnet { hdr, .. } => Some(hdr),
            _ => None,
        }
    }

    /// The ksock header, if any.
    pub fn ksock(&self) -> Option<&KsockHdr> {
        match &self.body {
            Body::Noop(k) => Some(k),
            Body::Lnet { ksock, .. } => ksock.as_ref(),
            _ => None,
        }
    }

    /// The decoded payload.
    pub fn app(&self) -> &App {
        match &self.body {
            Body::Lnet { app, .. } => app,
            _ => &App::None,
        }
    }
}

/// Why framing was lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DesyncReason {
    /// A message header fell into bytes the capture did not hold.
    #[error("a message header fell into uncaptured bytes")]
    HeaderNotCaptured,
    /// The capture cut a message header before its length field.
    #[error("a message header was cut before its length field")]
    HeaderCut,
    /// An acceptor connection request of an unknown version.
    #[error("acceptor connreq version {0} is unknown")]
    ConnreqVersion(u32),
    /// A payload length above LNET_MTU.
    #[error("LNet payload_length {0} exceeds LNET_MTU")]
    PayloadOverMtu(u32),
    /// A ksock message type that is neither NOOP nor LNET.
    #[error("ksock message type 0x{0:x} is neither NOOP (0xc0) nor LNET (0xc1)")]
    KsockType(u32),
    /// The bytes did not parse as the structure expected there.
    #[error(transparent)]
    Wire(#[from] crate::wire::WireError),
}

/// Framing events besides messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramingEvent {
    /// Framing was lost at `offset` (a header fell into uncaptured bytes, or bytes did not
    /// parse as the expected structure).
    Desync {
        /// Stream offset where framing was lost.
        offset: u64,
        /// Why.
        reason: DesyncReason,
    },
    /// Framing found again at `offset` after skipping `skipped` bytes.
    Resync {
        /// Stream offset of the first message after the resync.
        offset: u64,
        /// Bytes skipped since the desync (or since the stream start when picked up
        /// mid-stream).
        skipped: u64,
    },
}

/// An event of the decoder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LnetEvent {
    /// A decoded message.
    Message(Box<Message>),
    /// A framing event on one half-stream.
    Framing {
        /// Connection.
        conn: ConnId,
        /// Direction.
        dir: Dir,
        /// Frame that triggered it.
        stamp: Stamp,
        /// What happened.
        event: FramingEvent,
    },
}
