//! Capture writing: packet bytes (link + IP + TCP) and pcap / pcapng containers.

use std::net::IpAddr;

/// Link layer of the generated capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Ethernet II.
    Ethernet,
    /// Linux cooked v2 (`tcpdump -i any`).
    Sll2,
    /// Raw IP (TUN / IPoIB captures).
    Raw,
}

impl Link {
    fn linktype(self) -> u32 {
        match self {
            Self::Ethernet => 1,
            Self::Sll2 => 276,
            Self::Raw => 101,
        }
    }
}

/// Container of the generated capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// pcap, µs timestamps.
    PcapUs,
    /// pcap, ns timestamps.
    PcapNs,
    /// pcapng, one interface, ns resolution.
    PcapNg,
}

/// One TCP segment to serialise.
#[derive(Debug, Clone)]
pub struct TcpPacket<'a> {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// Flags byte.
    pub flags: u8,
    /// Raw window.
    pub window: u16,
    /// Options (already padded to a multiple of 4).
    pub options: &'a [u8],
    /// Payload.
    pub payload: &'a [u8],
    /// IPv4 identification.
    pub ip_id: u16,
}

fn csum_add(mut sum: u32, b: &[u8]) -> u32 {
    let mut it = b.chunks_exact(2);
    for c in &mut it {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [x] = it.remainder() {
        sum += u32::from(*x) << 8;
    }
    sum
}

fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Serialises a TCP segment with its link and IP headers (checksums filled in).
pub fn build_packet(link: Link, p: &TcpPacket<'_>) -> Vec<u8> {
    let tcp_len = 20 + p.options.len() + p.payload.len();
    let mut tcp = Vec::with_capacity(tcp_len);
    tcp.extend_from_slice(&p.sport.to_be_bytes());
    tcp.extend_from_slice(&p.dport.to_be_bytes());
    tcp.extend_from_slice(&p.seq.to_be_bytes());
    tcp.extend_from_slice(&p.ack.to_be_bytes());
    tcp.push((((20 + p.options.len()) / 4) as u8) << 4);
    tcp.push(p.flags);
    tcp.extend_from_slice(&p.window.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]);
    tcp.extend_from_slice(p.options);
    tcp.extend_from_slice(p.payload);
    let mut out = Vec::with_capacity(tcp_len + 60);
    let ethertype: u16 = if p.src.is_ipv4() { 0x0800 } else { 0x86dd };
    match link {
        Link::Ethernet => {
            out.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02]);
            out.extend_from_slice(&ethertype.to_be_bytes());
        }
        Link::Sll2 => {
            out.extend_from_slice(&ethertype.to_be_bytes());
            // reserved, ifindex 2, ARPHRD_ETHER, PACKET_HOST, addr len 6, address (8 bytes)
            out.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
        }
        Link::Raw => {}
    }
    let tcp_len16 = tcp_len as u16;
    match (p.src, p.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&(20 + tcp_len16).to_be_bytes());
            ip.extend_from_slice(&p.ip_id.to_be_bytes());
            ip.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = csum_fold(csum_add(0, &ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let mut sum = csum_add(0, &s.octets());
            sum = csum_add(sum, &d.octets());
            sum += 6 + u32::from(tcp_len16);
            let c = csum_fold(csum_add(sum, &tcp));
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            out.extend_from_slice(&ip);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&tcp_len16.to_be_bytes());
            ip.extend_from_slice(&[6, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let mut sum = csum_add(0, &s.octets());
            sum = csum_add(sum, &d.octets());
            sum += 6 + tcp_len as u32;
            let c = csum_fold(csum_add(sum, &tcp));
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            out.extend_from_slice(&ip);
        }
        _ => unreachable!("mixed address families"),
    }
    out.extend_from_slice(&tcp);
    out
}

/// Writes a capture file in memory.
pub struct CaptureWriter {
    container: Container,
    link: Link,
    snaplen: u32,
    buf: Vec<u8>,
}

impl CaptureWriter {
    /// Starts a capture.
    pub fn new(container: Container, link: Link, snaplen: u32) -> Self {
        let mut buf = Vec::new();
        match container {
            Container::PcapUs | Container::PcapNs => {
                let magic: u32 = if container == Container::PcapUs { 0xa1b2_c3d4 } else { 0xa1b2_3c4d };
                buf.extend_from_slice(&magic.to_le_bytes());
                buf.extend_from_slice(&2u16.to_le_bytes());
                buf.extend_from_slice(&4u16.to_le_bytes());
                buf.extend_from_slice(&0u32.to_le_bytes());
                buf.extend_from_slice(&0u32.to_le_bytes());
                buf.extend_from_slice(&snaplen.to_le_bytes());
                buf.extend_from_slice(&link.linktype().to_le_bytes());
            }
            Container::PcapNg => {
                // SHB
                buf.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
                buf.extend_from_slice(&28u32.to_le_bytes());
                buf.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
                buf.extend_from_slice(&1u16.to_le_bytes());
                buf.extend_from_slice(&0u16.to_le_bytes());
                buf.extend_from_slice(&(-1i64).to_le_bytes());
                buf.extend_from_slice(&28u32.to_le_bytes());
                // IDB with if_tsresol = 9 (ns)
                buf.extend_from_slice(&1u32.to_le_bytes());
                buf.extend_from_slice(&32u32.to_le_bytes());
                buf.extend_from_slice(&(link.linktype() as u16).to_le_bytes());
                buf.extend_from_slice(&0u16.to_le_bytes());
                buf.extend_from_slice(&snaplen.to_le_bytes());
                buf.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0]);
                buf.extend_from_slice(&[0, 0, 0, 0]);
                buf.extend_from_slice(&32u32.to_le_bytes());
            }
        }
        Self { container, link, snaplen, buf }
    }

    /// Link type in use.
    pub fn link(&self) -> Link {
        self.link
    }

    /// Appends one packet (cut to the snaplen) captured at `ts_ns`.
    pub fn packet(&mut self, ts_ns: i64, data: &[u8]) {
        self.packet_cut(ts_ns, data, self.snaplen as usize);
    }

    /// Appends one packet captured at `ts_ns` of which only the first `keep` bytes (and at
    /// most the snaplen) were captured.
    pub fn packet_cut(&mut self, ts_ns: i64, data: &[u8], keep: usize) {
        let cap = data.len().min(self.snaplen as usize).min(keep);
        let d = &data[..cap];
        match self.container {
            Container::PcapUs | Container::PcapNs => {
                let sec = ts_ns.div_euclid(1_000_000_000) as u32;
                let frac = ts_ns.rem_euclid(1_000_000_000) as u32;
                let frac = if self.container == Container::PcapUs { frac / 1000 } else { frac };
                for x in [sec, frac, cap as u32, data.len() as u32] {
                    self.buf.extend_from_slice(&x.to_le_bytes());
                }
                self.buf.extend_from_slice(d);
            }
            Container::PcapNg => {
                let pad = (4 - cap % 4) % 4;
                let total = 32 + cap + pad;
                let t = ts_ns as u64;
                for x in [6u32, total as u32, 0, (t >> 32) as u32, t as u32, cap as u32, data.len() as u32] {
                    self.buf.extend_from_slice(&x.to_le_bytes());
                }
                self.buf.extend_from_slice(d);
                self.buf.extend(std::iter::repeat_n(0u8, pad));
                self.buf.extend_from_slice(&(total as u32).to_le_bytes());
            }
        }
    }

    /// Bytes written so far and not yet taken.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is waiting to be taken.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Takes the bytes written so far (a capture streamed in pieces: the first piece holds
    /// the file header).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The finished capture bytes.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}
