//! Link layer → IP → TCP slicing of one packet record.
//!
//! Link layers are walked by hand (Ethernet with any number of 802.1Q / 802.1ad tags, Linux
//! SLL and SLL2, BSD null / loopback, raw IP); IPv4 and IPv6 (with extension headers) and TCP
//! use etherparse's lax slices, so a packet cut by the snaplen still yields its headers and
//! the payload length the IP header claims.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{IpNumber, LaxIpSlice, LenSource, TcpSlice};

use crate::linktype;

/// TCP flag bits as in the TCP header's flags byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;

    /// SYN set.
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    /// FIN set.
    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    /// RST set.
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    /// ACK set.
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
}

/// Source and destination addresses of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPair {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
}

/// A TCP segment sliced out of a packet record.
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment<'a> {
    /// Addresses.
    pub ip: IpPair,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Raw sequence number.
    pub seq: u32,
    /// Raw acknowledgement number (meaningful when the ACK flag is set).
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Raw (unscaled) receive window.
    pub window: u16,
    /// TCP options bytes.
    pub options: &'a [u8],
    /// Payload bytes that were captured (a prefix of the segment's payload).
    pub payload: &'a [u8],
    /// Payload length of the segment on the wire: from the IP header's length field, or,
    /// when that is 0 (TSO / BIG TCP) or absent, from the record's original length.
    pub payload_len: u32,
}

/// What a record is when it is not a decodable TCP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTcp {
    /// Not IP at all (ARP, LLDP, ...): other traffic.
    NotIp {
        /// The EtherType / protocol the link layer named.
        ethertype: u16,
    },
    /// IP but not TCP (UDP, ICMP, ...): other traffic.
    OtherIpProtocol {
        /// IP protocol number.
        protocol: u8,
    },
    /// An IP fragment (TCP over fragmented IP cannot be decoded here).
    IpFragment,
    /// A link type this tool does not decode.
    UnknownLinkType {
        /// The link type.
        linktype: u32,
    },
    /// Headers cut short or invalid: the reason, with the layer and offset.
    Malformed {
        /// Layer that failed ("ethernet", "sll", "ipv4", "tcp", ...).
        layer: &'static str,
        /// Offset of that layer in the record.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
}

impl NotTcp {
    /// True for well-formed traffic that is simply not TCP (as opposed to undecodable).
    pub fn is_other_traffic(&self) -> bool {
        matches!(self, Self::NotIp { .. } | Self::OtherIpProtocol { .. })
    }
}

impl std::fmt::Display for NotTcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotIp { ethertype } => write!(f, "not IP (ethertype 0x{ethertype:04x})"),
            Self::OtherIpProtocol { protocol } => write!(f, "IP protocol {protocol}, not TCP"),
            Self::IpFragment => write!(f, "IP fragment"),
            Self::UnknownLinkType { linktype } => {
                write!(f, "link type {linktype} is not supported")
            }
            Self::Malformed { layer, offset, reason } => write!(f, "{layer} header at offset {offset}: {reason}"),
        }
    }
}

/// A decoded record.
pub type Decoded<'a> = Result<TcpSegment<'a>, NotTcp>;

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;

fn be16(d: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(o)?, *d.get(o + 1)?]))
}

fn short(layer: &'static str, offset: usize, need: usize, got: usize) -> NotTcp {
    NotTcp::Malformed { layer, offset, reason: format!("needs {need} bytes, record has {got}") }
}

/// [`link_to_ip`] with the usual frame first: Ethernet without a VLAN tag, read inline
/// (every packet comes through here, most of them this shape).
#[inline(always)]
fn link_to_ip_usual(linktype: u32, data: &[u8]) -> Result<(usize, u16), NotTcp> {
    if linktype == linktype::ETHERNET {
        if let Some(&[a, b]) = data.get(12..14) {
            let et = u16::from_be_bytes([a, b]);
            if !matches!(et, 0x8100 | 0x88a8 | 0x9100) {
                return Ok((14, et));
            }
        }
    }
    link_to_ip(linktype, data)
}

/// Finds the network layer: returns (offset of the IP header, ethertype).
#[inline(never)]
fn link_to_ip(linktype: u32, data: &[u8]) -> Result<(usize, u16), NotTcp> {
    match linktype {
        linktype::ETHERNET => {
            let mut off = 12;
            let mut et = be16(data, off).ok_or_else(|| short("ethernet", 0, 14, data.len()))?;
            off += 2;
            // 802.1Q (0x8100), 802.1ad (0x88a8) and the old QinQ 0x9100: any depth.
            while matches!(et, 0x8100 | 0x88a8 | 0x9100) {
                et = be16(data, off + 2).ok_or_else(|| short("vlan", off, off + 4, data.len()))?;
                off += 4;
            }
            Ok((off, et))
        }
        linktype::LINUX_SLL => {
            let et = be16(data, 14).ok_or_else(|| short("sll", 0, 16, data.len()))?;
            Ok((16, et))
        }
        linktype::LINUX_SLL2 => {
            let et = be16(data, 0).ok_or_else(|| short("sll2", 0, 20, data.len()))?;
            if data.len() < 20 {
                return Err(short("sll2", 0, 20, data.len()));
            }
            Ok((20, et))
        }
        linktype::NULL | linktype::LOOP => {
            let b: [u8; 4] =
                data.get(..4).and_then(|s| s.try_into().ok()).ok_or_else(|| short("null", 0, 4, data.len()))?;
            // The family is in the writer's byte order; accept either.
            let fam = if linktype == linktype::LOOP {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b).min(u32::from_be_bytes(b))
            };
            match fam {
                2 => Ok((4, ETH_IPV4)),
                // AF_INET6 differs by OS: 10 Linux, 24 NetBSD/OpenBSD, 28 FreeBSD, 30 macOS.
                10 | 24 | 28 | 30 => Ok((4, ETH_IPV6)),
                other => Err(NotTcp::NotIp { ethertype: other as u16 }),
            }
        }
        linktype::RAW | linktype::RAW_12 | linktype::RAW_14 | linktype::IPV4 | linktype::IPV6 => {
            let v = data.first().map(|b| b >> 4).ok_or_else(|| short("raw ip", 0, 1, 0))?;
            Ok((0, if v == 6 { ETH_IPV6 } else { ETH_IPV4 }))
        }
        other => Err(NotTcp::UnknownLinkType { linktype: other }),
    }
}

/// The addresses (as integers: an IPv4 address is its `u32`, an IPv6 one its `u128`,
/// both as `u128`, as `u128::from(IpAddr)` gives them) and ports of a packet that looks
/// like a TCP segment, read at the places [`decode_packet`] reads them, without checking
/// the rest: for routing packets by connection (a parallel run) without building
/// addresses. When `decode_packet` makes a TCP segment of the packet, this gives its
/// addresses and ports or `None` (IPv6 extension headers, cut headers: decode to know);
/// what it gives for a packet `decode_packet` rejects means nothing. Inlined into the
/// reading loop: as a call, its saved registers and its 40-byte result through memory
/// were a third of its instructions.
#[inline(always)]
pub fn tcp_tuple(linktype: u32, data: &[u8]) -> Option<TupleWords> {
    let (ip_off, _) = link_to_ip_usual(linktype, data).ok()?;
    let ip = data.get(ip_off..)?;
    let (src, dst, tcp_off) = match ip.first()? >> 4 {
        // TCP right after the IPv4 header (an AH header, which decode_packet skips,
        // would shift the ports): else decode to know.
        4 if ip.get(9) == Some(&6) => {
            let h: &[u8; 20] = ip.get(..20)?.try_into().ok()?;
            let a = |o: usize| u128::from(u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]));
            (a(12), a(16), usize::from(h[0] & 0x0f) * 4)
        }
        6 if ip.get(6) == Some(&6) => {
            let h: &[u8; 40] = ip.get(..40)?.try_into().ok()?;
            let a = |o: usize| u128::from_be_bytes(h[o..o + 16].try_into().unwrap_or_default());
            (a(8), a(24), 40)
        }
        _ => return None,
    };
    let t = ip.get(tcp_off..tcp_off + 4)?;
    Some(TupleWords {
        src,
        dst,
        src_port: u16::from_be_bytes([t[0], t[1]]),
        dst_port: u16::from_be_bytes([t[2], t[3]]),
    })
}

/// A TCP segment's addresses as integers and its ports ([`tcp_tuple`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TupleWords {
    /// Source address: `u128::from` the `IpAddr`.
    pub src: u128,
    /// Destination address, the same way.
    pub dst: u128,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

/// The IP layer of a TCP segment: its addresses, the TCP length its header claims (when
/// it claims one) and the bytes after it.
type IpLayer<'a> = (IpPair, Option<usize>, &'a [u8]);

/// The usual packet's IP layer read in place: IPv4 carrying TCP directly, not a fragment.
/// `None` for anything else, which [`ip_layer`] (etherparse) slices; where this gives an
/// answer it is `ip_layer`'s (a proptest holds them together), without building
/// etherparse's slices and extension views, which cost more than the rest of the decode.
#[inline]
fn ipv4_tcp_layer(ip: &[u8]) -> Option<IpLayer<'_>> {
    let h: &[u8; 20] = ip.get(..20)?.try_into().ok()?;
    let hl = usize::from(h[0] & 0x0f) * 4;
    // Version 4 (etherparse goes by the version, not the ethertype), a whole header, TCP,
    // and neither more fragments nor a fragment offset.
    if h[0] >> 4 != 4 || hl < 20 || ip.len() < hl || h[9] != 6 || u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    // The total length bounds the payload when it covers the header and fits the record
    // (Ethernet padding is cut); else the record's bytes are the payload (TSO, snaplen).
    let payload = if total < hl || ip.len() < total { &ip[hl..] } else { &ip[hl..total] };
    let pair = IpPair {
        src: IpAddr::V4(Ipv4Addr::new(h[12], h[13], h[14], h[15])),
        dst: IpAddr::V4(Ipv4Addr::new(h[16], h[17], h[18], h[19])),
    };
    Some((pair, (total >= hl).then(|| total - hl), payload))
}

/// The usual IPv6 packet's IP layer read in place: TCP right after the 40-byte header (no
/// extension header). `None` for anything else, which [`ip_layer`] (etherparse) slices;
/// where this gives an answer it is `ip_layer`'s (a proptest holds them together): a
/// payload length of 0 leaves the rest of the record to the payload (a jumbogram's, or a
/// TSO capture's), as etherparse's lax slicing does, and one past the record gives what
/// the record holds (the snap length). Etherparse's slicing was 213 instructions an IPv6
/// packet, a tenth of `decode`'s.
#[inline]
fn ipv6_tcp_layer(ip: &[u8]) -> Option<IpLayer<'_>> {
    let h: &[u8; 40] = ip.get(..40)?.try_into().ok()?;
    if h[0] >> 4 != 6 || h[6] != 6 {
        return None;
    }
    let claimed = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let rest = &ip[40..];
    let payload = if claimed == 0 || rest.len() < claimed { rest } else { &rest[..claimed] };
    let addr = |o: usize| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&h[o..o + 16]);
        IpAddr::V6(Ipv6Addr::from(a))
    };
    Some((IpPair { src: addr(8), dst: addr(24) }, (claimed != 0).then_some(claimed), payload))
}

/// Any IP layer, sliced by etherparse (lax: a header cut by the snaplen still gives its
/// fields): IPv4 with an authentication header, IPv6 with extension headers, fragments.
fn ip_layer(et: u16, ip_off: usize, ip_bytes: &[u8]) -> Result<IpLayer<'_>, NotTcp> {
    let (ip, _ext_err) = LaxIpSlice::from_slice(ip_bytes).map_err(|e| NotTcp::Malformed {
        layer: if et == ETH_IPV6 { "ipv6" } else { "ipv4" },
        offset: ip_off,
        reason: e.to_string(),
    })?;
    let pl = ip.payload();
    if pl.fragmented {
        return Err(NotTcp::IpFragment);
    }
    if pl.ip_number != IpNumber::TCP {
        return Err(NotTcp::OtherIpProtocol { protocol: pl.ip_number.0 });
    }
    let (pair, ip_claimed_payload) = match &ip {
        LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            let pair = IpPair {
                src: IpAddr::V4(Ipv4Addr::from(h.source())),
                dst: IpAddr::V4(Ipv4Addr::from(h.destination())),
            };
            let claimed = match pl.len_source {
                LenSource::Ipv4HeaderTotalLen if h.total_len() != 0 => {
                    Some(usize::from(h.total_len()).saturating_sub(usize::from(h.ihl()) * 4))
                }
                _ if h.total_len() as usize > usize::from(h.ihl()) * 4 => {
                    Some(usize::from(h.total_len()) - usize::from(h.ihl()) * 4)
                }
                _ => None,
            };
            (pair, claimed)
        }
        LaxIpSlice::Ipv6(v6) => {
            let h = v6.header();
            let pair = IpPair {
                src: IpAddr::V6(Ipv6Addr::from(h.source())),
                dst: IpAddr::V6(Ipv6Addr::from(h.destination())),
            };
            let ext_len = v6.extensions().slice().len();
            let claimed = (h.payload_length() != 0).then(|| usize::from(h.payload_length()).saturating_sub(ext_len));
            (pair, claimed)
        }
    };
    Ok((pair, ip_claimed_payload, pl.payload))
}

/// Slices one record down to its TCP segment.
///
/// `origlen` is the record's original length; it gives the payload length when the IP
/// length field is 0 (TSO / BIG TCP captures on the sending host).
#[inline(always)]
pub fn decode_packet(linktype: u32, data: &[u8], origlen: u32) -> Decoded<'_> {
    let (ip_off, et) = link_to_ip_usual(linktype, data)?;
    if et != ETH_IPV4 && et != ETH_IPV6 {
        return Err(NotTcp::NotIp { ethertype: et });
    }
    let ip_bytes = data.get(ip_off..).unwrap_or(&[]);
    // Nested matches: `ipv4_tcp_layer(..).or_else(|| ipv6_tcp_layer(..))` executed 0.65 %
    // more instructions in `decode` of the header-only bench capture.
    let (pair, ip_claimed_payload, tcp_bytes) = match ipv4_tcp_layer(ip_bytes) {
        Some(v4) => v4,
        None => match ipv6_tcp_layer(ip_bytes) {
            Some(v6) => v6,
            None => ip_layer(et, ip_off, ip_bytes)?,
        },
    };
    let tcp_off = tcp_bytes.as_ptr() as usize - data.as_ptr() as usize;
    if tcp_bytes.len() < 20 {
        return Err(short("tcp", tcp_off, 20, tcp_bytes.len()));
    }
    let hdr_len = usize::from(tcp_bytes[12] >> 4) * 4;
    if hdr_len < 20 {
        return Err(NotTcp::Malformed {
            layer: "tcp",
            offset: tcp_off,
            reason: format!("data offset {hdr_len} is below 20"),
        });
    }
    if tcp_bytes.len() < hdr_len {
        return Err(short("tcp", tcp_off, hdr_len, tcp_bytes.len()));
    }
    let tcp = TcpSlice::from_slice(tcp_bytes).map_err(|e| NotTcp::Malformed {
        layer: "tcp",
        offset: tcp_off,
        reason: e.to_string(),
    })?;
    let payload = tcp.payload();
    let captured_total = tcp_bytes.len();
    // The TCP length on the wire: the IP header's claim, else what the record says it had.
    let tcp_len_wire = match ip_claimed_payload {
        Some(n) => n,
        None => (origlen as usize).saturating_sub(tcp_off).max(captured_total),
    };
    let payload_len = tcp_len_wire.saturating_sub(hdr_len).max(payload.len());
    Ok(TcpSegment {
        ip: pair,
        src_port: tcp.source_port(),
        dst_port: tcp.destination_port(),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags: TcpFlags(tcp_bytes[13]),
        window: tcp.window_size(),
        options: &tcp_bytes[20..hdr_len],
        payload,
        payload_len: u32::try_from(payload_len).unwrap_or(u32::MAX),
    })
}

/// An IPv4 address in dotted decimal, the text `Ipv4Addr`'s `Display` gives without a
/// width, written without the formatting machinery: that went through
/// `Formatter::pad_integral` for each octet, ~1,700 instructions an address, most of
/// `lnetcap decode`'s cost per message (a NID and a TCP tuple in every JSON line).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Text {
    buf: [u8; 15],
    len: u8,
}

impl Ipv4Text {
    pub fn new(a: Ipv4Addr) -> Self {
        let mut buf = [0u8; 15];
        let mut n = 0;
        for (i, o) in a.octets().into_iter().enumerate() {
            if i > 0 {
                buf[n] = b'.';
                n += 1;
            }
            if o >= 100 {
                buf[n] = b'0' + o / 100;
                n += 1;
            }
            if o >= 10 {
                buf[n] = b'0' + o / 10 % 10;
                n += 1;
            }
            buf[n] = b'0' + o % 10;
            n += 1;
        }
        Self { buf, len: n as u8 }
    }

    pub fn as_str(&self) -> &str {
        // Digits and dots only: always UTF-8.
        std::str::from_utf8(&self.buf[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Display for Ipv4Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use proptest::test_runner::TestCaseError;

    use super::*;

    #[test]
    fn test_ipv4_text_at_the_octets_edges() {
        for a in ["0.0.0.0", "255.255.255.255", "10.0.1.1", "100.9.10.99", "1.20.199.200"] {
            assert_eq!(Ipv4Text::new(a.parse().unwrap()).as_str(), a);
        }
    }

    proptest::proptest! {
        #[test]
        fn test_ipv4_text_is_std_display(a in proptest::prelude::any::<u32>()) {
            let a = Ipv4Addr::from(a);
            proptest::prop_assert_eq!(Ipv4Text::new(a).to_string(), a.to_string());
        }
    }

    fn ipv4_tcp(payload: &[u8], total_len_override: Option<u16>) -> Vec<u8> {
        let tl = total_len_override.unwrap_or((20 + 20 + payload.len()) as u16);
        let mut p = vec![0x45, 0, (tl >> 8) as u8, tl as u8, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        // TCP: sport 1023, dport 988, seq 1000, ack 2000, doff 5, flags PSH|ACK, win 512
        p.extend_from_slice(&[
            0x03, 0xff, 0x03, 0xdc, 0, 0, 0x03, 0xe8, 0, 0, 0x07, 0xd0, 0x50, 0x18, 0x02, 0x00, 0, 0, 0, 0,
        ]);
        p.extend_from_slice(payload);
        p
    }

    /// A TCP segment from `src`:`sp` to `dst`:`dp` on `linktype` (Ethernet with `vlans`
    /// 802.1Q tags, or raw IP).
    fn tcp_packet(src: IpAddr, sp: u16, dst: IpAddr, dp: u16, ethernet: bool, vlans: usize) -> Vec<u8> {
        let mut p = Vec::new();
        let et: u16 = if src.is_ipv4() { 0x0800 } else { 0x86dd };
        if ethernet {
            p.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
            for _ in 0..vlans {
                p.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
            }
            p.extend_from_slice(&et.to_be_bytes());
        }
        let tcp = [&sp.to_be_bytes()[..], &dp.to_be_bytes(), &[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 1, 0, 0, 0, 0, 0]]
            .concat();
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                p.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                p.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
                p.extend_from_slice(&s.octets());
                p.extend_from_slice(&d.octets());
            }
            _ => unreachable!("one family"),
        }
        p.extend_from_slice(&tcp);
        p
    }

    /// IPv4 headers as captures bring them: every IHL, total lengths around the record's
    /// (exact, with Ethernet padding after, the header alone, 0 for TSO, beyond a cut
    /// record, anything), fragments (MF alone, offsets, DF), TCP or another protocol (AH
    /// among them).
    fn ipv4_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let first = prop_oneof![4 => Just(0x45u8), 2 => 0x40u8..0x50, 1 => any::<u8>()];
        let proto = prop_oneof![4 => Just(6u8), 1 => Just(51u8), 1 => any::<u8>()];
        let frag = prop_oneof![4 => Just(0u16), 1 => Just(0x4000u16), 1 => Just(0x2000u16), 1 => 1u16..0x2000, 1 => any::<u16>()];
        let total = 0u8..6;
        (
            first,
            proto,
            frag,
            total,
            any::<u16>(),
            0usize..8,
            prop::collection::vec(any::<u8>(), 0..80),
            prop::option::weighted(0.25, 0usize..120),
        )
            .prop_map(|(v, proto, frag, how, any_total, k, rest, cut)| {
                let mut b = vec![v, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
                b.extend_from_slice(&rest);
                let len = b.len();
                let total = match how {
                    0 => len,
                    1 => len.saturating_sub(k),
                    2 => usize::from(v & 0x0f) * 4,
                    3 => 0,
                    4 => len + k + 1,
                    _ => usize::from(any_total),
                };
                b[2..4].copy_from_slice(&u16::try_from(total).unwrap_or(u16::MAX).to_be_bytes());
                b[6..8].copy_from_slice(&frag.to_be_bytes());
                if let Some(c) = cut {
                    b.truncate(c);
                }
                b
            })
    }

    /// IPv6 headers as captures bring them: version 6 or not, TCP next or an extension
    /// header (hop-by-hop, routing, fragment, destination options) or another protocol,
    /// payload lengths around the record's (exact, with padding after, 0 as TSO writes,
    /// beyond a cut record, anything), records cut anywhere.
    fn ipv6_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let first = prop_oneof![6 => Just(0x60u8), 1 => any::<u8>()];
        let next = prop_oneof![6 => Just(6u8), 1 => Just(0u8), 1 => Just(43u8), 1 => Just(44u8), 1 => Just(60u8), 1 => any::<u8>()];
        (
            first,
            next,
            0u8..6,
            any::<u16>(),
            0usize..8,
            any::<[u8; 32]>(),
            prop::collection::vec(any::<u8>(), 0..80),
            prop::option::weighted(0.25, 0usize..130),
        )
            .prop_map(|(v, next, how, any_len, k, addrs, rest, cut)| {
                let mut b = vec![v, 0, 0, 0, 0, 0, next, 64];
                b.extend_from_slice(&addrs);
                b.extend_from_slice(&rest);
                let len = rest.len();
                let claimed = match how {
                    0 => len,
                    1 => len.saturating_sub(k),
                    2 => 0,
                    3 => len + k + 1,
                    _ => usize::from(any_len),
                };
                b[4..6].copy_from_slice(&u16::try_from(claimed).unwrap_or(u16::MAX).to_be_bytes());
                if let Some(c) = cut {
                    b.truncate(c);
                }
                b
            })
    }

    /// What an in-place reader made of `b` (if anything) is what etherparse's slicing gives
    /// for ethertype `et`: the same addresses, claimed length and payload, at the same place.
    fn agrees_with_etherparse(b: &[u8], et: u16, read: Option<IpLayer<'_>>) -> Result<(), TestCaseError> {
        if let Some((pair, claimed, payload)) = read {
            let (p2, c2, pl2) = ip_layer(et, 0, b).expect("etherparse slices what was read in place");
            proptest::prop_assert_eq!((pair, claimed), (p2, c2));
            let at = |x: &[u8]| (x.as_ptr() as usize - b.as_ptr() as usize, x.len());
            proptest::prop_assert_eq!(at(payload), at(pl2));
        }
        Ok(())
    }

    proptest::proptest! {
        /// The in-place IPv6 reading gives what etherparse's slicing gives, wherever it
        /// answers.
        #[test]
        fn ipv6_in_place_is_etherparse(b in ipv6_bytes()) {
            agrees_with_etherparse(&b, ETH_IPV6, ipv6_tcp_layer(&b))?;
        }

        /// The in-place IPv4 reading gives what etherparse's slicing gives, wherever it
        /// answers.
        #[test]
        fn ipv4_in_place_is_etherparse(b in ipv4_bytes()) {
            agrees_with_etherparse(&b, ETH_IPV4, ipv4_tcp_layer(&b))?;
        }

        /// The inline Ethernet path answers what the general one answers, for any bytes
        /// and link type.
        #[test]
        fn usual_link_path_is_the_general_one(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            lt in proptest::sample::select(vec![linktype::ETHERNET, linktype::LINUX_SLL, linktype::RAW, 7u32]),
            tag in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x9100, 0x0806]),
        ) {
            let mut data = data;
            if data.len() >= 14 {
                data[12..14].copy_from_slice(&tag.to_be_bytes());
            }
            let show = |r: Result<(usize, u16), NotTcp>| format!("{r:?}");
            proptest::prop_assert_eq!(show(link_to_ip_usual(lt, &data)), show(link_to_ip(lt, &data)));
        }

        /// The routing tuple is the decoded segment's addresses (as `u128::from` gives
        /// them) and ports, on every link and both families.
        #[test]
        fn tcp_tuple_reads_what_decode_packet_decodes(
            a in proptest::prelude::any::<[u8; 16]>(), b in proptest::prelude::any::<[u8; 16]>(),
            sp in 1u16.., dp in 1u16.., v6 in proptest::prelude::any::<bool>(),
            ethernet in proptest::prelude::any::<bool>(), vlans in 0usize..3,
        ) {
            let ip = |x: [u8; 16]| if v6 {
                IpAddr::V6(Ipv6Addr::from(x))
            } else {
                IpAddr::V4(Ipv4Addr::new(x[0], x[1], x[2], x[3]))
            };
            let (src, dst) = (ip(a), ip(b));
            let p = tcp_packet(src, sp, dst, dp, ethernet, vlans);
            let lt = if ethernet { linktype::ETHERNET } else { linktype::RAW };
            let seg = decode_packet(lt, &p, p.len() as u32).unwrap();
            let word = |ip: IpAddr| match ip {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            let t = tcp_tuple(lt, &p).unwrap();
            proptest::prop_assert_eq!(t, TupleWords { src: word(seg.ip.src), dst: word(seg.ip.dst), src_port: seg.src_port, dst_port: seg.dst_port });
            proptest::prop_assert_eq!((seg.ip.src, seg.ip.dst, seg.src_port, seg.dst_port), (src, dst, sp, dp));
        }
    }

    /// The in-place path answers for the usual header (else the speed-up is silently
    /// lost) and leaves AH, fragments and IPv6 to etherparse; the routing tuple follows
    /// IPv4 options and 802.1ad tags, and gives none for AH.
    #[test]
    fn in_place_paths_answer_where_they_should() {
        let src: IpAddr = "10.0.0.2".parse().unwrap();
        let dst: IpAddr = "10.0.0.1".parse().unwrap();
        let p = tcp_packet(src, 1023, dst, 988, false, 0);
        assert!(ipv4_tcp_layer(&p).is_some(), "plain IPv4/TCP read in place");
        let mut frag = p.clone();
        frag[6] = 0x20;
        assert!(ipv4_tcp_layer(&frag).is_none(), "MF: etherparse's");
        let mut ah = p.clone();
        ah[9] = 51;
        assert!(ipv4_tcp_layer(&ah).is_none() && tcp_tuple(linktype::RAW, &ah).is_none(), "AH: decode to know");
        let v6 = tcp_packet("fd00::2".parse().unwrap(), 1023, "fd00::1".parse().unwrap(), 988, false, 0);
        assert!(ipv4_tcp_layer(&v6).is_none());
        assert!(ipv6_tcp_layer(&v6).is_some(), "plain IPv6/TCP read in place");
        let mut hop = v6.clone();
        hop[6] = 0;
        assert!(ipv6_tcp_layer(&hop).is_none(), "an extension header: etherparse's");
        assert!(ipv6_tcp_layer(&p).is_none(), "IPv4 is not read as IPv6");
        // IHL 6 (4 bytes of options) behind an 802.1ad tag: the ports are read after them.
        let mut opt = p[..20].to_vec();
        opt[0] = 0x46;
        opt[2..4].copy_from_slice(&44u16.to_be_bytes());
        opt.extend_from_slice(&[1, 1, 1, 0]);
        opt.extend_from_slice(&p[20..]);
        let mut eth = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xa8, 0, 7, 0x08, 0x00];
        eth.extend_from_slice(&opt);
        let seg = decode_packet(linktype::ETHERNET, &eth, eth.len() as u32).unwrap();
        assert_eq!((seg.src_port, seg.dst_port, seg.ip.src, seg.ip.dst), (1023, 988, src, dst));
        let t = tcp_tuple(linktype::ETHERNET, &eth).unwrap();
        assert_eq!((t.src_port, t.dst_port, t.src, t.dst), (1023, 988, 0x0a00_0002, 0x0a00_0001));
    }

    #[test]
    fn test_raw_ipv4_tcp() {
        let p = ipv4_tcp(b"hello", None);
        let s = decode_packet(linktype::RAW, &p, p.len() as u32).unwrap();
        assert_eq!(s.src_port, 1023);
        assert_eq!(s.dst_port, 988);
        assert_eq!(s.seq, 1000);
        assert_eq!(s.ack, 2000);
        assert_eq!(s.payload, b"hello");
        assert_eq!(s.payload_len, 5);
        assert_eq!(s.window, 512);
        assert!(s.flags.ack() && !s.flags.syn());
        assert_eq!(s.ip.src, "10.0.0.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn test_snaplen_cut_keeps_claimed_length() {
        let p = ipv4_tcp(&[7u8; 1000], None);
        let cut = &p[..100];
        let s = decode_packet(linktype::RAW, cut, p.len() as u32).unwrap();
        assert_eq!(s.payload.len(), 60);
        assert_eq!(s.payload_len, 1000);
    }

    #[test]
    fn test_tso_zero_total_len_uses_origlen() {
        let p = ipv4_tcp(&[7u8; 3000], Some(0));
        let s = decode_packet(linktype::RAW, &p[..200], p.len() as u32).unwrap();
        assert_eq!(s.payload_len, 3000);
    }

    #[test]
    fn test_ethernet_qinq_and_sll2() {
        let ip = ipv4_tcp(b"x", None);
        let mut eth = vec![0u8; 12];
        eth.extend_from_slice(&[0x88, 0xa8, 0, 10, 0x81, 0x00, 0, 20, 0x08, 0x00]);
        eth.extend_from_slice(&ip);
        assert_eq!(decode_packet(linktype::ETHERNET, &eth, eth.len() as u32).unwrap().payload, b"x");
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0];
        sll2.extend_from_slice(&ip);
        assert_eq!(decode_packet(linktype::LINUX_SLL2, &sll2, sll2.len() as u32).unwrap().payload, b"x");
        let mut sll = vec![0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        assert_eq!(decode_packet(linktype::LINUX_SLL, &sll, sll.len() as u32).unwrap().payload, b"x");
        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend_from_slice(&ip);
        assert_eq!(decode_packet(linktype::NULL, &null, null.len() as u32).unwrap().payload, b"x");
    }

    #[test]
    fn test_truncated_headers_never_panic() {
        let p = ipv4_tcp(b"abc", None);
        for n in 0..p.len() {
            let _ = decode_packet(linktype::RAW, &p[..n], p.len() as u32);
            let mut e = vec![0u8; 12];
            e.extend_from_slice(&[0x08, 0]);
            e.extend_from_slice(&p[..n]);
            let _ = decode_packet(linktype::ETHERNET, &e, e.len() as u32);
        }
        assert!(matches!(decode_packet(linktype::RAW, &p[..30], 43), Err(NotTcp::Malformed { layer: "tcp", .. })));
    }

    #[test]
    fn test_non_tcp() {
        let mut p = ipv4_tcp(b"", None);
        p[9] = 17;
        assert_eq!(
            decode_packet(linktype::RAW, &p, p.len() as u32).unwrap_err(),
            NotTcp::OtherIpProtocol { protocol: 17 }
        );
        let arp = [0u8; 12].iter().copied().chain([0x08, 0x06, 0, 0]).collect::<Vec<_>>();
        assert_eq!(decode_packet(linktype::ETHERNET, &arp, 16).unwrap_err(), NotTcp::NotIp { ethertype: 0x0806 });
    }
}
