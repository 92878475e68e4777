//! socklnd / LNet / PtlRPC / selftest wire structures: parse (decoder) and emit (generator).
//!
//! Layouts, byte orders and constants follow `shared/design/wire-format.md`; the section of
//! that document is named beside each structure. Parsers take a byte slice and either
//! return an owned repr or a [`WireError`] that names the structure, the offset and what
//! was wrong; they never panic. Emitters write little-endian senders (every deployed Lustre
//! host is little-endian) and are the generator's only way to produce bytes.

use crate::nid::Nid;

/// Constants (wire-format.md §10).
pub mod consts {
    /// `LNET_PROTO_ACCEPTOR_MAGIC`.
    pub const ACCEPTOR_MAGIC: u32 = 0xACCE_7100;
    /// `LNET_PROTO_MAGIC` (socklnd HELLO V2+).
    pub const PROTO_MAGIC: u32 = 0x4572_6963;
    /// `LNET_PROTO_TCP_MAGIC` (socklnd HELLO V1).
    pub const TCP_MAGIC: u32 = 0xEEBC_0DED;
    /// `KSOCK_MSG_NOOP`.
    pub const KSOCK_NOOP: u32 = 0xC0;
    /// `KSOCK_MSG_LNET`.
    pub const KSOCK_LNET: u32 = 0xC1;
    /// LNet message types.
    pub const LNET_ACK: u32 = 0;
    /// PUT.
    pub const LNET_PUT: u32 = 1;
    /// GET.
    pub const LNET_GET: u32 = 2;
    /// REPLY.
    pub const LNET_REPLY: u32 = 3;
    /// HELLO (V1 only).
    pub const LNET_HELLO: u32 = 4;
    /// `LNET_MTU`.
    pub const LNET_MTU: u32 = 1 << 20;
    /// `LNET_PID_LUSTRE`.
    pub const PID_LUSTRE: u32 = 12345;
    /// The LNet acceptor's TCP port (`accept_port`, 988 unless configured).
    pub const ACCEPTOR_PORT: u16 = 988;
    /// `LNET_PID_USERFLAG`.
    pub const PID_USERFLAG: u32 = 0x8000_0000;
    /// `LNET_PROTO_PING_MATCHBITS`.
    pub const PING_MATCHBITS: u64 = 0x8000_0000_0000_0000;
    /// `LNET_PROTO_PING_MAGIC`.
    pub const PING_MAGIC: u32 = 0x7069_6E67;
    /// `LUSTRE_MSG_MAGIC_V2`.
    pub const LUSTRE_MSG_MAGIC_V2: u32 = 0x0BD0_0BD3;
    /// `LUSTRE_MSG_MAGIC_V2` byte-swapped.
    pub const LUSTRE_MSG_MAGIC_V2_SWABBED: u32 = 0xD30B_D00B;
    /// `PTL_RPC_MSG_REQUEST`.
    pub const PTL_RPC_MSG_REQUEST: u32 = 4711;
    /// `PTL_RPC_MSG_ERR`.
    pub const PTL_RPC_MSG_ERR: u32 = 4712;
    /// `PTL_RPC_MSG_REPLY`.
    pub const PTL_RPC_MSG_REPLY: u32 = 4713;
    /// `SRPC_MSG_MAGIC`.
    pub const SRPC_MSG_MAGIC: u32 = 0xEEB0_F00D;
    /// `LNET_WIRE_HANDLE_COOKIE_NONE`.
    pub const WMD_NONE: u64 = u64::MAX;
    /// Sizes.
    pub const KSOCK_HDR_LEN: usize = 24;
    /// `lnet_hdr_nid4`.
    pub const LNET_HDR_NID4_LEN: usize = 72;
    /// `lnet_hdr_nid16`.
    pub const LNET_HDR_NID16_LEN: usize = 96;
    /// `ksock_hello_msg_nid4` fixed part.
    pub const HELLO_V3_LEN: usize = 56;
    /// `ksock_hello_msg` (V4).
    pub const HELLO_V4_LEN: usize = 80;
    /// V1 HELLO (an LNet header).
    pub const HELLO_V1_LEN: usize = 72;
    /// Most IPs a HELLO may list (`LNET_INTERFACES_NUM`).
    pub const HELLO_MAX_IPS: u32 = 16;
    /// `sizeof(struct srpc_msg)`.
    pub const SRPC_MSG_LEN: usize = 160;
}
use consts::*;

/// Why bytes did not parse as the named structure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not enough bytes.
    #[error("{structure}: needs {needed} bytes, has {got}")]
    Truncated {
        /// Structure being parsed.
        structure: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A field holds a value the structure cannot have.
    #[error("{structure}: field {field} at offset {offset} is 0x{value:x}, which is not valid")]
    BadField {
        /// Structure being parsed.
        structure: &'static str,
        /// Field name.
        field: &'static str,
        /// Offset of the field in the structure.
        offset: usize,
        /// Value found.
        value: u64,
    },
}

/// Little/big-endian reads over a slice; the caller checks the length first.
#[derive(Clone, Copy)]
pub(crate) struct Rd<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) be: bool,
}

impl<'a> Rd<'a> {
    pub(crate) fn le(b: &'a [u8]) -> Self {
        Self { b, be: false }
    }
    /// The `N` bytes at `o`, in one bounds check (a check a byte cost `LnetHdr::parse` 31 %
    /// of its instructions). Past the end (the caller checks the length first, so never)
    /// they read as zero.
    #[inline]
    fn arr<const N: usize>(&self, o: usize) -> [u8; N] {
        self.b.get(o..o + N).and_then(|s| <[u8; N]>::try_from(s).ok()).unwrap_or([0; N])
    }
    #[inline]
    pub(crate) fn u16(&self, o: usize) -> u16 {
        let x = self.arr::<2>(o);
        if self.be {
            u16::from_be_bytes(x)
        } else {
            u16::from_le_bytes(x)
        }
    }
    #[inline]
    pub(crate) fn u32(&self, o: usize) -> u32 {
        let x = self.arr::<4>(o);
        if self.be {
            u32::from_be_bytes(x)
        } else {
            u32::from_le_bytes(x)
        }
    }
    #[inline]
    pub(crate) fn u64(&self, o: usize) -> u64 {
        let x = self.arr::<8>(o);
        if self.be {
            u64::from_be_bytes(x)
        } else {
            u64::from_le_bytes(x)
        }
    }
    #[inline]
    pub(crate) fn nid20(&self, o: usize) -> Nid {
        Nid::from_lnet_nid(&self.arr::<20>(o))
    }
}

fn need(structure: &'static str, b: &[u8], n: usize) -> Result<(), WireError> {
    if b.len() < n {
        Err(WireError::Truncated { structure, needed: n, got: b.len() })
    } else {
        Ok(())
    }
}

/// Reads a u32 at `o` little-endian, or `None` past the end.
pub fn le32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

/// Acceptor connection request (§2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connreq {
    /// 1 (nid4 target) or 2 (`struct lnet_nid` target).
    pub version: u32,
    /// Target NID (the passive node's NID the initiator wants).
    pub target_nid: Nid,
    /// Sender is big-endian.
    pub flip: bool,
}

impl Connreq {
    /// Size on the wire of a connreq of this version.
    pub fn wire_len(version: u32) -> Option<usize> {
        match version {
            1 => Some(16),
            2 => Some(28),
            _ => None,
        }
    }

    /// Parses a connreq.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        const S: &str = "acceptor connreq";
        need(S, b, 8)?;
        let flip = match le32_at(b, 0) {
            Some(ACCEPTOR_MAGIC) => false,
            Some(m) if m.swap_bytes() == ACCEPTOR_MAGIC => true,
            m => {
                return Err(WireError::BadField {
                    structure: S,
                    field: "acr_magic",
                    offset: 0,
                    value: u64::from(m.unwrap_or(0)),
                })
            }
        };
        let r = Rd { b, be: flip };
        let version = r.u32(4);
        let Some(len) = Self::wire_len(version) else {
            return Err(WireError::BadField {
                structure: S,
                field: "acr_version",
                offset: 4,
                value: u64::from(version),
            });
        };
        need(S, b, len)?;
        let target_nid = if version == 1 { Nid::from_u64(r.u64(8)) } else { r.nid20(8) };
        Ok(Self { version, target_nid, flip })
    }

    /// Emits a connreq (LE sender): v1 for nid4 targets, v2 otherwise.
    pub fn emit(target: &Nid) -> Vec<u8> {
        let mut v = Vec::with_capacity(28);
        v.extend_from_slice(&ACCEPTOR_MAGIC.to_le_bytes());
        if target.is_nid4() {
            v.extend_from_slice(&1u32.to_le_bytes());
            v.extend_from_slice(&target.to_u64().to_le_bytes());
        } else {
            v.extend_from_slice(&2u32.to_le_bytes());
            v.extend_from_slice(&target.to_lnet_nid());
        }
        v
    }
}

/// socklnd connection types (§2.8).
pub mod conn_type {
    /// Refusal / retry.
    pub const NONE: u32 = 0xFFFF_FFFF;
    /// Untyped.
    pub const ANY: u32 = 0;
    /// Small messages.
    pub const CONTROL: u32 = 1;
    /// I receive bulk here (my ZC-ACKs go back on it).
    pub const BULK_IN: u32 = 2;
    /// I send bulk here.
    pub const BULK_OUT: u32 = 3;

    /// Name as Lustre spells it.
    pub fn name(t: u32) -> &'static str {
        match t {
            NONE => "NONE",
            ANY => "ANY",
            CONTROL => "CONTROL",
            BULK_IN => "BULK_IN",
            BULK_OUT => "BULK_OUT",
            _ => "UNKNOWN",
        }
    }
}

/// socklnd HELLO of any version (§2.4–§2.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// 1, 2, 3 or 4.
    pub version: u32,
    /// Sender is big-endian (V2+ only; V1 is always LE).
    pub flip: bool,
    /// Sender's NID.
    pub src_nid: Nid,
    /// NID the sender believes the peer has (not in V1).
    pub dst_nid: Option<Nid>,
    /// Sender's pid.
    pub src_pid: u32,
    /// `kshm_dst_pid` (0 in practice).
    pub dst_pid: u32,
    /// Sender's incarnation (NI start time, ns).
    pub src_incarnation: u64,
    /// `kshm_dst_incarnation` (0 in practice).
    pub dst_incarnation: u64,
    /// Connection type from the sender's point of view.
    pub conn_type: u32,
    /// IP addresses listed (host-order integers).
    pub ips: Vec<u32>,
}

/// Size of a HELLO from its first bytes: `Ok(None)` when more bytes are needed.
pub fn hello_size(b: &[u8]) -> Result<Option<usize>, WireError> {
    const S: &str = "socklnd HELLO";
    let Some(magic) = le32_at(b, 0) else {
        return Ok(None);
    };
    if magic == TCP_MAGIC {
        let Some(pl) = le32_at(b, 28) else {
            return Ok(None);
        };
        if pl > HELLO_MAX_IPS * 4 || pl % 4 != 0 {
            return Err(WireError::BadField {
                structure: S,
                field: "payload_length",
                offset: 28,
                value: u64::from(pl),
            });
        }
        return Ok(Some(HELLO_V1_LEN + pl as usize));
    }
    let flip = match magic {
        PROTO_MAGIC => false,
        m if m.swap_bytes() == PROTO_MAGIC => true,
        m => return Err(WireError::BadField { structure: S, field: "kshm_magic", offset: 0, value: u64::from(m) }),
    };
    let Some(v) = le32_at(b, 4).map(|v| if flip { v.swap_bytes() } else { v }) else {
        return Ok(None);
    };
    match v {
        2 | 3 => {
            let Some(n) = le32_at(b, 52).map(|v| if flip { v.swap_bytes() } else { v }) else {
                return Ok(None);
            };
            if n > HELLO_MAX_IPS {
                return Err(WireError::BadField { structure: S, field: "kshm_nips", offset: 52, value: u64::from(n) });
            }
            Ok(Some(HELLO_V3_LEN + 4 * n as usize))
        }
        4 => Ok(Some(HELLO_V4_LEN)),
        v => Err(WireError::BadField { structure: S, field: "kshm_version", offset: 4, value: u64::from(v) }),
    }
}

impl Hello {
    /// Parses a complete HELLO.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        const S: &str = "socklnd HELLO";
        let Some(size) = hello_size(b)? else {
            return Err(WireError::Truncated { structure: S, needed: 56, got: b.len() });
        };
        need(S, b, size)?;
        if le32_at(b, 0) == Some(TCP_MAGIC) {
            let r = Rd::le(b);
            let (major, minor) = (r.u16(4), r.u16(6));
            if (major, minor) != (1, 0) {
                return Err(WireError::BadField {
                    structure: S,
                    field: "version_major/minor",
                    offset: 4,
                    value: u64::from(r.u32(4)),
                });
            }
            let n = r.u32(28) as usize / 4;
            return Ok(Self {
                version: 1,
                flip: false,
                src_nid: Nid::from_u64(r.u64(8)),
                dst_nid: None,
                src_pid: r.u32(20),
                dst_pid: r.u32(16),
                src_incarnation: r.u64(32),
                dst_incarnation: 0,
                conn_type: r.u32(40),
                ips: (0..n).map(|i| r.u32(72 + 4 * i)).collect(),
            });
        }
        let flip = le32_at(b, 0) != Some(PROTO_MAGIC);
        let r = Rd { b, be: flip };
        let version = r.u32(4);
        if version == 4 {
            return Ok(Self {
                version,
                flip,
                src_nid: r.nid20(8),
                dst_nid: Some(r.nid20(28)),
                src_pid: r.u32(48),
                dst_pid: r.u32(52),
                src_incarnation: r.u64(56),
                dst_incarnation: r.u64(64),
                conn_type: r.u32(72),
                ips: Vec::new(),
            });
        }
        let n = r.u32(52) as usize;
        Ok(Self {
            version,
            flip,
            src_nid: Nid::from_u64(r.u64(8)),
            dst_nid: Some(Nid::from_u64(r.u64(16))),
            src_pid: r.u32(24),
            dst_pid: r.u32(28),
            src_incarnation: r.u64(32),
            dst_incarnation: r.u64(40),
            conn_type: r.u32(48),
            ips: (0..n).map(|i| r.u32(56 + 4 * i)).collect(),
        })
    }

    /// Emits the HELLO (LE sender).
    pub fn emit(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(96);
        let p32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
        let p64 = |v: &mut Vec<u8>, x: u64| v.extend_from_slice(&x.to_le_bytes());
        match self.version {
            1 => {
                p32(&mut v, TCP_MAGIC);
                v.extend_from_slice(&1u16.to_le_bytes());
                v.extend_from_slice(&0u16.to_le_bytes());
                p64(&mut v, self.src_nid.to_u64());
                p32(&mut v, self.dst_pid);
                p32(&mut v, self.src_pid);
                p32(&mut v, LNET_HELLO);
                p32(&mut v, 4 * self.ips.len() as u32);
                p64(&mut v, self.src_incarnation);
                p32(&mut v, self.conn_type);
                v.resize(HELLO_V1_LEN, 0);
                for ip in &self.ips {
                    p32(&mut v, *ip);
                }
            }
            4 => {
                p32(&mut v, PROTO_MAGIC);
                p32(&mut v, 4);
                v.extend_from_slice(&self.src_nid.to_lnet_nid());
                v.extend_from_slice(&self.dst_nid.unwrap_or(Nid::ANY).to_lnet_nid());
                p32(&mut v, self.src_pid);
                p32(&mut v, self.dst_pid);
                p64(&mut v, self.src_incarnation);
                p64(&mut v, self.dst_incarnation);
                p32(&mut v, self.conn_type);
                p32(&mut v, 0);
            }
            ver => {
                p32(&mut v, PROTO_MAGIC);
                p32(&mut v, ver);
                p64(&mut v, self.src_nid.to_u64());
                p64(&mut v, self.dst_nid.unwrap_or(Nid::ANY).to_u64());
                p32(&mut v, self.src_pid);
                p32(&mut v, self.dst_pid);
                p64(&mut v, self.src_incarnation);
                p64(&mut v, self.dst_incarnation);
                p32(&mut v, self.conn_type);
                p32(&mut v, self.ips.len() as u32);
                for ip in &self.ips {
                    p32(&mut v, *ip);
                }
            }
        }
        v
    }
}

/// `struct ksock_msg_hdr` (§3.1), 24 bytes, sender order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KsockHdr {
    /// `KSOCK_MSG_NOOP` 0xC0 or `KSOCK_MSG_LNET` 0xC1.
    pub msg_type: u32,
    /// Checksum (0 = none).
    pub csum: u32,
    /// `ksm_zc_cookies[0]`: ZC request cookie (LNET) / second ACK cookie (NOOP).
    pub zc_req_cookie: u64,
    /// `ksm_zc_cookies[1]`: ZC ACK cookie being returned.
    pub zc_ack_cookie: u64,
}

impl KsockHdr {
    /// Parses the 24-byte header.
    pub fn parse(b: &[u8], flip: bool) -> Result<Self, WireError> {
        need("ksock_msg_hdr", b, KSOCK_HDR_LEN)?;
        let r = Rd { b, be: flip };
        Ok(Self { msg_type: r.u32(0), csum: r.u32(4), zc_req_cookie: r.u64(8), zc_ack_cookie: r.u64(16) })
    }

    /// Emits the header (LE).
    pub fn emit(&self, v: &mut Vec<u8>) {
        v.extend_from_slice(&self.msg_type.to_le_bytes());
        v.extend_from_slice(&self.csum.to_le_bytes());
        v.extend_from_slice(&self.zc_req_cookie.to_le_bytes());
        v.extend_from_slice(&self.zc_ack_cookie.to_le_bytes());
    }

    /// Number of ZC cookies a header with these cookies acknowledges (§3.5).
    pub fn acked_cookies(&self) -> Vec<u64> {
        let c2 = self.zc_ack_cookie;
        if c2 == 0 {
            return Vec::new();
        }
        let c1 = if self.msg_type == KSOCK_NOOP && self.zc_req_cookie != 0 { self.zc_req_cookie } else { c2 };
        if c1 > c2 {
            vec![c2, c1]
        } else {
            // A range: bounded so that a corrupt header cannot make us allocate much.
            (c1..=c2).take(4096).collect()
        }
    }
}

/// An LNet MD wire handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Wmd {
    /// Interface cookie.
    pub interface: u64,
    /// Object cookie.
    pub object: u64,
}

impl Wmd {
    /// The "none" handle.
    pub const NONE: Wmd = Wmd { interface: WMD_NONE, object: WMD_NONE };

    /// Stands for a handle that was not captured (inferred messages); never on the wire
    /// (object cookies of real MDs have their two low bits set to 1).
    pub const UNKNOWN: Wmd = Wmd { interface: 0, object: 0 };

    /// True for the handle that stands for "not captured".
    pub fn is_unknown(&self) -> bool {
        *self == Self::UNKNOWN
    }

    /// True for the "none" handle.
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }
}

/// Per-type part of the LNet header (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LnetDetail {
    /// ACK.
    Ack {
        /// = the PUT's ack_wmd.
        dst_wmd: Wmd,
        /// The PUT's match bits.
        match_bits: u64,
        /// Bytes the PUT deposited.
        mlength: u32,
    },
    /// PUT.
    Put {
        /// Sender's MD handle if an ACK is wanted.
        ack_wmd: Wmd,
        /// Match bits.
        match_bits: u64,
        /// Out-of-band data.
        hdr_data: u64,
        /// Portal.
        ptl_index: u32,
        /// Offset in the target MD.
        offset: u32,
    },
    /// GET.
    Get {
        /// Getter's MD handle (echoed in the REPLY).
        return_wmd: Wmd,
        /// Match bits.
        match_bits: u64,
        /// Portal.
        ptl_index: u32,
        /// Offset in the target MD.
        src_offset: u32,
        /// Bytes wanted.
        sink_length: u32,
    },
    /// REPLY.
    Reply {
        /// = the GET's return_wmd.
        dst_wmd: Wmd,
    },
    /// V1 HELLO carried as an LNet header.
    Hello {
        /// Incarnation.
        incarnation: u64,
        /// Connection type.
        conn_type: u32,
    },
    /// A type number outside 0–4.
    Unknown,
}

/// LNet header, nid4 (72 B) or nid16 (96 B) (§4.1, §4.2). Common fields always LE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LnetHdr {
    /// Final destination.
    pub dest_nid: Nid,
    /// Originator.
    pub src_nid: Nid,
    /// Destination pid.
    pub dest_pid: u32,
    /// Source pid.
    pub src_pid: u32,
    /// 0 ACK, 1 PUT, 2 GET, 3 REPLY, 4 HELLO.
    pub msg_type: u32,
    /// Payload bytes that follow.
    pub payload_length: u32,
    /// The per-type union, when the bytes its type uses were captured (the padding after
    /// them may be missing).
    pub detail: Option<LnetDetail>,
    /// What a header cut short by the snaplen still shows of the union when `detail` is
    /// `None`: its first handle and the low half of the match bits.
    pub cut: Option<CutUnion>,
}

/// The visible start of an LNet header union cut short by the snaplen (§3.1 pitfall 7):
/// at snaplen 128 with TCP timestamps, 76 payload bytes hold the ksock header, both NIDs,
/// pids, type, payload length, the first handle and the low 32 bits of the match bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CutUnion {
    /// PUT ack_wmd, GET return_wmd, ACK dst_wmd (REPLY's dst_wmd is all of its union and
    /// makes `detail` whole instead).
    pub wmd: Option<Wmd>,
    /// Low 32 bits of the match bits (PUT, GET, ACK); the high half was not captured.
    pub match_bits_lo: Option<u32>,
    /// Union bytes captured.
    pub seen: u8,
}

/// Union bytes each message type uses (the rest is zero padding).
pub fn union_used(msg_type: u32) -> usize {
    match msg_type {
        LNET_ACK => 28,
        LNET_PUT => 40,
        LNET_GET => 36,
        LNET_REPLY => 16,
        LNET_HELLO => 12,
        _ => usize::MAX,
    }
}

/// Offsets inside an LNet header, by layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdrLayout {
    /// Header size.
    pub len: usize,
    /// Offset of `type`.
    pub type_off: usize,
    /// Offset of `payload_length`.
    pub plen_off: usize,
    /// Offset of the union.
    pub union_off: usize,
}

/// nid4 layout.
pub const NID4: HdrLayout = HdrLayout { len: 72, type_off: 24, plen_off: 28, union_off: 32 };
/// nid16 layout.
pub const NID16: HdrLayout = HdrLayout { len: 96, type_off: 48, plen_off: 52, union_off: 56 };

impl LnetHdr {
    /// Parses an LNet header. With fewer bytes than the full header but at least up to
    /// `payload_length`, returns the common fields, with `detail` when the union bytes the
    /// type uses were captured and otherwise `detail: None` and what [`CutUnion`] shows.
    pub fn parse(b: &[u8], layout: HdrLayout) -> Result<Self, WireError> {
        need("lnet_hdr", b, layout.plen_off + 4)?;
        let r = Rd::le(b);
        let (dest_nid, src_nid, pids) = if layout == NID16 {
            (r.nid20(0), r.nid20(20), 40)
        } else {
            (Nid::from_u64(r.u64(0)), Nid::from_u64(r.u64(8)), 16)
        };
        let msg_type = r.u32(layout.type_off);
        let payload_length = r.u32(layout.plen_off);
        let u = layout.union_off;
        let used = union_used(msg_type);
        let whole = b.len() >= layout.len || (used != usize::MAX && b.len() >= u + used);
        let cut = (!whole && b.len() > u).then(|| {
            let seen = b.len() - u;
            let has_mb = matches!(msg_type, LNET_PUT | LNET_GET | LNET_ACK);
            CutUnion {
                wmd: (seen >= 16 && has_mb).then(|| Wmd { interface: r.u64(u), object: r.u64(u + 8) }),
                match_bits_lo: (seen >= 20 && has_mb).then(|| r.u32(u + 16)),
                seen: seen.min(255) as u8,
            }
        });
        let detail = whole.then(|| {
            let u = layout.union_off;
            let wmd = |o: usize| Wmd { interface: r.u64(u + o), object: r.u64(u + o + 8) };
            match msg_type {
                LNET_ACK => LnetDetail::Ack { dst_wmd: wmd(0), match_bits: r.u64(u + 16), mlength: r.u32(u + 24) },
                LNET_PUT => LnetDetail::Put {
                    ack_wmd: wmd(0),
                    match_bits: r.u64(u + 16),
                    hdr_data: r.u64(u + 24),
                    ptl_index: r.u32(u + 32),
                    offset: r.u32(u + 36),
                },
                LNET_GET => LnetDetail::Get {
                    return_wmd: wmd(0),
                    match_bits: r.u64(u + 16),
                    ptl_index: r.u32(u + 24),
                    src_offset: r.u32(u + 28),
                    sink_length: r.u32(u + 32),
                },
                LNET_REPLY => LnetDetail::Reply { dst_wmd: wmd(0) },
                LNET_HELLO => LnetDetail::Hello { incarnation: r.u64(u), conn_type: r.u32(u + 8) },
                _ => LnetDetail::Unknown,
            }
        });
        Ok(Self {
            dest_nid,
            src_nid,
            dest_pid: r.u32(pids),
            src_pid: r.u32(pids + 4),
            msg_type,
            payload_length,
            detail,
            cut,
        })
    }

    /// Match bits (PUT, GET, ACK).
    pub fn match_bits(&self) -> Option<u64> {
        match self.detail? {
            LnetDetail::Put { match_bits, .. }
            | LnetDetail::Get { match_bits, .. }
            | LnetDetail::Ack { match_bits, .. } => Some(match_bits),
            _ => None,
        }
    }

    /// Portal (PUT, GET).
    pub fn portal(&self) -> Option<u32> {
        match self.detail? {
            LnetDetail::Put { ptl_index, .. } | LnetDetail::Get { ptl_index, .. } => Some(ptl_index),
            _ => None,
        }
    }

    /// Emits the header (LE), nid4 or nid16 layout.
    pub fn emit(&self, layout: HdrLayout, v: &mut Vec<u8>) {
        let start = v.len();
        if layout == NID16 {
            v.extend_from_slice(&self.dest_nid.to_lnet_nid());
            v.extend_from_slice(&self.src_nid.to_lnet_nid());
        } else {
            v.extend_from_slice(&self.dest_nid.to_u64().to_le_bytes());
            v.extend_from_slice(&self.src_nid.to_u64().to_le_bytes());
        }
        for x in [self.dest_pid, self.src_pid, self.msg_type, self.payload_length] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        let mut u = Vec::with_capacity(40);
        let wmd = |u: &mut Vec<u8>, w: &Wmd| {
            u.extend_from_slice(&w.interface.to_le_bytes());
            u.extend_from_slice(&w.object.to_le_bytes());
        };
        match self.detail.unwrap_or(LnetDetail::Unknown) {
            LnetDetail::Ack { dst_wmd, match_bits, mlength } => {
                wmd(&mut u, &dst_wmd);
                u.extend_from_slice(&match_bits.to_le_bytes());
                u.extend_from_slice(&mlength.to_le_bytes());
            }
            LnetDetail::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset } => {
                wmd(&mut u, &ack_wmd);
                u.extend_from_slice(&match_bits.to_le_bytes());
                u.extend_from_slice(&hdr_data.to_le_bytes());
                u.extend_from_slice(&ptl_index.to_le_bytes());
                u.extend_from_slice(&offset.to_le_bytes());
            }
            LnetDetail::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length } => {
                wmd(&mut u, &return_wmd);
                u.extend_from_slice(&match_bits.to_le_bytes());
                u.extend_from_slice(&ptl_index.to_le_bytes());
                u.extend_from_slice(&src_offset.to_le_bytes());
                u.extend_from_slice(&sink_length.to_le_bytes());
            }
            LnetDetail::Reply { dst_wmd } => wmd(&mut u, &dst_wmd),
            LnetDetail::Hello { incarnation, conn_type } => {
                u.extend_from_slice(&incarnation.to_le_bytes());
                u.extend_from_slice(&conn_type.to_le_bytes());
            }
            LnetDetail::Unknown => {}
        }
        u.resize(40, 0);
        v.extend_from_slice(&u);
        debug_assert_eq!(v.len() - start, layout.len);
    }
}

/// Type name of an LNet message type.
pub fn lnet_type_name(t: u32) -> &'static str {
    match t {
        LNET_ACK => "ACK",
        LNET_PUT => "PUT",
        LNET_GET => "GET",
        LNET_REPLY => "REPLY",
        LNET_HELLO => "HELLO",
        _ => "UNKNOWN",
    }
}

fn round8(x: usize) -> usize {
    (x + 7) & !7
}

/// What the captured bytes of a `lustre_msg_v2` + `ptlrpc_body` say (§5.4). Fields past
/// the captured bytes are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PtlrpcInfo {
    /// Sender was big-endian (magic read swapped).
    pub swabbed: bool,
    /// `lm_bufcount`.
    pub bufcount: u32,
    /// `lm_secflvr`.
    pub secflvr: u32,
    /// `lm_flags`.
    pub lm_flags: u32,
    /// `lm_cksum` (non-zero in early replies).
    pub lm_cksum: u32,
    /// `lm_buflens[0]`: 184 (v3 body) or 152 (v2 body).
    pub body_len: Option<u32>,
    /// `pb_type`: 4711 request, 4712 error, 4713 reply.
    pub pb_type: Option<u32>,
    /// `pb_version`.
    pub pb_version: Option<u32>,
    /// `pb_opc`.
    pub opc: Option<u32>,
    /// `pb_status`.
    pub status: Option<i32>,
    /// `pb_flags`.
    pub pb_flags: Option<u32>,
    /// `pb_timeout`.
    pub timeout: Option<u32>,
    /// `pb_service_time`.
    pub service_time: Option<u32>,
    /// `pb_mbits`.
    pub mbits: Option<u64>,
    /// `pb_jobid`, when captured and non-empty.
    pub jobid: Option<String>,
    /// Security flavour is not null: the body was not decoded further.
    pub wrapped: bool,
}

impl PtlrpcInfo {
    /// Parses the captured prefix of a lustre_msg. Needs the header through `lm_magic` at
    /// least; returns what the captured bytes hold.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        const S: &str = "lustre_msg_v2";
        need(S, b, 12)?;
        let swabbed = match le32_at(b, 8) {
            Some(LUSTRE_MSG_MAGIC_V2) => false,
            Some(LUSTRE_MSG_MAGIC_V2_SWABBED) => true,
            m => {
                return Err(WireError::BadField {
                    structure: S,
                    field: "lm_magic",
                    offset: 8,
                    value: u64::from(m.unwrap_or(0)),
                })
            }
        };
        let r = Rd { b, be: swabbed };
        let bufcount = r.u32(0);
        if bufcount == 0 || bufcount > 32 {
            return Err(WireError::BadField {
                structure: S,
                field: "lm_bufcount",
                offset: 0,
                value: u64::from(bufcount),
            });
        }
        let mut info = PtlrpcInfo { swabbed, bufcount, secflvr: r.u32(4), ..Self::default() };
        if b.len() >= 24 {
            info.lm_cksum = r.u32(16);
            info.lm_flags = r.u32(20);
        }
        // `lm_buflens[0]` only: the other buffers' lengths were read into a vector no one
        // read (an allocation a message).
        info.body_len = (b.len() >= 36).then(|| r.u32(32));
        if info.secflvr & 0xF != 0 {
            info.wrapped = true;
            return Ok(info);
        }
        let body = round8(32 + 4 * bufcount as usize);
        let f32 = |o: usize| (b.len() >= body + o + 4).then(|| r.u32(body + o));
        info.pb_type = f32(8);
        info.pb_version = f32(12);
        info.opc = f32(16);
        info.status = f32(20).map(|s| s as i32);
        info.pb_flags = f32(56);
        info.timeout = f32(68);
        info.service_time = f32(72);
        info.mbits = (b.len() >= body + 128).then(|| r.u64(body + 120));
        if info.body_len.unwrap_or(0) >= 184 && b.len() >= body + 184 {
            let j = &b[body + 152..body + 184];
            let end = j.iter().position(|&c| c == 0).unwrap_or(32);
            if end > 0 {
                info.jobid = Some(String::from_utf8_lossy(&j[..end]).into_owned());
            }
        }
        Ok(info)
    }

    /// Request / reply / error.
    pub fn kind_name(&self) -> Option<&'static str> {
        Some(match self.pb_type? {
            PTL_RPC_MSG_REQUEST => "request",
            PTL_RPC_MSG_REPLY => "reply",
            PTL_RPC_MSG_ERR => "error",
            _ => "unknown",
        })
    }

    /// An adaptive-timeout early reply (PUT offset 0, one buffer, AT_SUPPORT, checksum).
    pub fn looks_early_reply(&self) -> bool {
        self.bufcount == 1 && self.lm_flags & 1 != 0 && self.lm_cksum != 0 && self.pb_type != Some(PTL_RPC_MSG_REQUEST)
    }
}

/// Fields of a lustre_msg to emit (generator).
#[derive(Debug, Clone, Default)]
pub struct PtlrpcEmit {
    /// pb_type.
    pub pb_type: u32,
    /// pb_version.
    pub pb_version: u32,
    /// pb_opc.
    pub opc: u32,
    /// pb_status.
    pub status: i32,
    /// lm_flags.
    pub lm_flags: u32,
    /// lm_cksum.
    pub lm_cksum: u32,
    /// pb_service_time.
    pub service_time: u32,
    /// pb_timeout.
    pub timeout: u32,
    /// pb_mbits.
    pub mbits: u64,
    /// jobid (≤ 31 bytes).
    pub jobid: String,
    /// Lengths of buffers 1.. (their content is zeros).
    pub extra_buflens: Vec<u32>,
}

impl PtlrpcEmit {
    /// Emits a lustre_msg_v2 with a 184-byte ptlrpc_body and zero-filled extra buffers.
    pub fn emit(&self) -> Vec<u8> {
        let bufcount = 1 + self.extra_buflens.len();
        let mut v = Vec::new();
        let p32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
        p32(&mut v, bufcount as u32);
        p32(&mut v, 0);
        p32(&mut v, LUSTRE_MSG_MAGIC_V2);
        p32(&mut v, 1024);
        p32(&mut v, self.lm_cksum);
        p32(&mut v, self.lm_flags);
        p32(&mut v, 0);
        p32(&mut v, 0);
        p32(&mut v, 184);
        for l in &self.extra_buflens {
            p32(&mut v, *l);
        }
        v.resize(round8(v.len()), 0);
        let body = v.len();
        v.resize(body + 184, 0);
        let mut put = |o: usize, b: &[u8]| v[body + o..body + o + b.len()].copy_from_slice(b);
        put(8, &self.pb_type.to_le_bytes());
        put(12, &self.pb_version.to_le_bytes());
        put(16, &self.opc.to_le_bytes());
        put(20, &self.status.to_le_bytes());
        put(68, &self.timeout.to_le_bytes());
        put(72, &self.service_time.to_le_bytes());
        put(120, &self.mbits.to_le_bytes());
        let j = self.jobid.as_bytes();
        put(152, &j[..j.len().min(31)]);
        for l in &self.extra_buflens {
            v.resize(v.len() + round8(*l as usize), 0);
        }
        v
    }
}

/// LNet self-test `srpc_msg` (§6.2), the fields lnetcap uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrpcInfo {
    /// Sender big-endian.
    pub swabbed: bool,
    /// `msg_type` (12 BRW request, 13 BRW reply, 14/15 PING, ...).
    pub msg_type: u32,
    /// `msg_ses_feats`.
    pub ses_feats: u32,
    /// Requests: `rpyid` (match bits of the reply).
    pub rpyid: Option<u64>,
    /// BRW/TEST requests: `bulkid`.
    pub bulkid: Option<u64>,
    /// BRW request: 1 read, 2 write.
    pub brw_rw: Option<u32>,
    /// BRW request: bulk length.
    pub brw_len: Option<u32>,
    /// BRW request: check flags.
    pub brw_flags: Option<u32>,
    /// Replies: status.
    pub status: Option<u32>,
}

/// srpc message types.
pub mod srpc {
    /// BRW request.
    pub const BRW_REQST: u32 = 12;
    /// BRW reply.
    pub const BRW_REPLY: u32 = 13;
    /// PING request.
    pub const PING_REQST: u32 = 14;
    /// PING reply.
    pub const PING_REPLY: u32 = 15;

    /// Name of an srpc message type.
    pub fn type_name(t: u32) -> &'static str {
        match t {
            0 => "MKSN_REQST",
            1 => "MKSN_REPLY",
            2 => "RMSN_REQST",
            3 => "RMSN_REPLY",
            4 => "BATCH_REQST",
            5 => "BATCH_REPLY",
            6 => "STAT_REQST",
            7 => "STAT_REPLY",
            8 => "TEST_REQST",
            9 => "TEST_REPLY",
            10 => "DEBUG_REQST",
            11 => "DEBUG_REPLY",
            12 => "BRW_REQST",
            13 => "BRW_REPLY",
            14 => "PING_REQST",
            15 => "PING_REPLY",
            16 => "JOIN_REQST",
            17 => "JOIN_REPLY",
            _ => "UNKNOWN",
        }
    }
}

impl SrpcInfo {
    /// Parses the captured prefix of an srpc_msg.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        const S: &str = "srpc_msg";
        need(S, b, 12)?;
        let swabbed = match le32_at(b, 0) {
            Some(SRPC_MSG_MAGIC) => false,
            Some(m) if m.swap_bytes() == SRPC_MSG_MAGIC => true,
            m => {
                return Err(WireError::BadField {
                    structure: S,
                    field: "msg_magic",
                    offset: 0,
                    value: u64::from(m.unwrap_or(0)),
                })
            }
        };
        let r = Rd { b, be: swabbed };
        let msg_type = r.u32(8);
        let has = |n: usize| b.len() >= n;
        let is_req = msg_type % 2 == 0;
        let is_brw_or_test = matches!(msg_type, 8 | 12);
        Ok(Self {
            swabbed,
            msg_type,
            ses_feats: if has(24) { r.u32(20) } else { 0 },
            rpyid: (is_req && has(32)).then(|| r.u64(24)),
            bulkid: (is_req && is_brw_or_test && has(40)).then(|| r.u64(32)),
            brw_rw: (msg_type == srpc::BRW_REQST && has(44)).then(|| r.u32(40)),
            brw_len: (msg_type == srpc::BRW_REQST && has(48)).then(|| r.u32(44)),
            brw_flags: (msg_type == srpc::BRW_REQST && has(52)).then(|| r.u32(48)),
            status: (!is_req && has(28)).then(|| r.u32(24)),
        })
    }

    /// Emits a BRW request srpc_msg (160 bytes).
    pub fn emit_brw_request(rpyid: u64, bulkid: u64, rw: u32, len: u32, flags: u32) -> Vec<u8> {
        let mut v = vec![0u8; SRPC_MSG_LEN];
        v[0..4].copy_from_slice(&SRPC_MSG_MAGIC.to_le_bytes());
        v[4..8].copy_from_slice(&1u32.to_le_bytes());
        v[8..12].copy_from_slice(&srpc::BRW_REQST.to_le_bytes());
        v[20..24].copy_from_slice(&1u32.to_le_bytes());
        v[24..32].copy_from_slice(&rpyid.to_le_bytes());
        v[32..40].copy_from_slice(&bulkid.to_le_bytes());
        v[40..44].copy_from_slice(&rw.to_le_bytes());
        v[44..48].copy_from_slice(&len.to_le_bytes());
        v[48..52].copy_from_slice(&flags.to_le_bytes());
        v
    }

    /// Emits a BRW reply srpc_msg (160 bytes).
    pub fn emit_brw_reply(status: u32) -> Vec<u8> {
        let mut v = vec![0u8; SRPC_MSG_LEN];
        v[0..4].copy_from_slice(&SRPC_MSG_MAGIC.to_le_bytes());
        v[4..8].copy_from_slice(&1u32.to_le_bytes());
        v[8..12].copy_from_slice(&srpc::BRW_REPLY.to_le_bytes());
        v[20..24].copy_from_slice(&1u32.to_le_bytes());
        v[24..28].copy_from_slice(&status.to_le_bytes());
        v
    }
}

/// LNet ping info (§4.5), the header and the NIDs captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PingInfo {
    /// `pi_features`.
    pub features: u32,
    /// `pi_pid`.
    pub pid: u32,
    /// `pi_nnis`.
    pub nnis: u32,
    /// NIDs of the entries captured.
    pub nids: Vec<Nid>,
}

impl PingInfo {
    /// Parses the captured prefix of a ping info.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        const S: &str = "lnet_ping_info";
        need(S, b, 16)?;
        let be = match le32_at(b, 0) {
            Some(PING_MAGIC) => false,
            Some(m) if m.swap_bytes() == PING_MAGIC => true,
            m => {
                return Err(WireError::BadField {
                    structure: S,
                    field: "pi_magic",
                    offset: 0,
                    value: u64::from(m.unwrap_or(0)),
                })
            }
        };
        let r = Rd { b, be };
        let nnis = r.u32(12);
        let nids = (0..nnis.min(64) as usize)
            .take_while(|i| b.len() >= 16 + 16 * i + 8)
            .map(|i| Nid::from_u64(r.u64(16 + 16 * i)))
            .collect();
        Ok(Self { features: r.u32(4), pid: r.u32(8), nnis, nids })
    }

    /// Emits a ping info with the given NIDs (entry 0 is `0@lo`).
    pub fn emit(nids: &[Nid], pid: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [PING_MAGIC, 0x1 | 0x2 | 0x8 | 0x10, pid, nids.len() as u32 + 1] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&0x0009_0000_0000_0000u64.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        for n in nids {
            v.extend_from_slice(&n.to_u64().to_le_bytes());
            v.extend_from_slice(&0x15AA_C0DEu32.to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
        }
        v
    }
}
