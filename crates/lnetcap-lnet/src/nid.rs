//! LNet network identifiers: 64-bit `lnet_nid_t` and the 20-byte `struct lnet_nid`, printed
//! the way Lustre prints them (`10.0.0.1@tcp`, `192.168.1.5@o2ib3`, `fd00::1@tcp`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use lnetcap_capture::Ipv4Text;

/// LND type numbers (`nidstr.h`).
pub mod lnd {
    /// socklnd.
    pub const TCP: u8 = 2;
    /// o2iblnd.
    pub const O2IB: u8 = 5;
    /// loopback.
    pub const LO: u8 = 9;
}

/// An LNet NID, large-address capable. Ordered by (size, LND, network number, address
/// bytes), as a derived order would be, compared as two integers: the RPC tracker's
/// indexes keyed by NIDs compare them several dozen times per RPC (and hash them as two
/// integers: as bytes, a NID was four writes and a length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nid {
    /// Address bytes − 4: 0 for IPv4 / 32-bit addresses, 12 for IPv6.
    pub size: u8,
    /// LND type.
    pub lnd: u8,
    /// Network number.
    pub num: u16,
    /// Address, network order; IPv4 / 32-bit addresses use the first 4 bytes.
    pub addr: [u8; 16],
}

impl Ord for Nid {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Big-endian integers order as their bytes do.
        (self.head(), u128::from_be_bytes(self.addr)).cmp(&(other.head(), u128::from_be_bytes(other.addr)))
    }
}

impl std::hash::Hash for Nid {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u32(self.head());
        state.write_u128(u128::from_ne_bytes(self.addr));
    }
}

impl PartialOrd for Nid {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Nid {
    /// Size, LND and network number as one big-endian integer: the first word of the
    /// order and of the hash.
    #[inline]
    fn head(&self) -> u32 {
        let [n0, n1] = self.num.to_be_bytes();
        u32::from_be_bytes([self.size, self.lnd, n0, n1])
    }

    /// `LNET_NID_ANY`.
    pub const ANY: Nid = Nid { size: 0xff, lnd: 0xff, num: 0xffff, addr: [0xff; 16] };

    /// From a 64-bit NID.
    pub fn from_u64(v: u64) -> Self {
        if v == u64::MAX {
            return Self::ANY;
        }
        let mut addr = [0u8; 16];
        addr[..4].copy_from_slice(&(v as u32).to_be_bytes());
        // The top byte should be 0; keep it visible by folding it into `size` if not.
        Nid { size: (v >> 56) as u8, lnd: (v >> 48) as u8, num: (v >> 32) as u16, addr }
    }

    /// The 64-bit form (for nid4-compatible NIDs).
    pub fn to_u64(&self) -> u64 {
        if *self == Self::ANY {
            return u64::MAX;
        }
        (u64::from(self.size) << 56)
            | (u64::from(self.lnd) << 48)
            | (u64::from(self.num) << 32)
            | u64::from(u32::from_be_bytes([self.addr[0], self.addr[1], self.addr[2], self.addr[3]]))
    }

    /// From the 20-byte `struct lnet_nid` (fixed byte order).
    pub fn from_lnet_nid(b: &[u8; 20]) -> Self {
        let mut addr = [0u8; 16];
        addr.copy_from_slice(&b[4..20]);
        Nid { size: b[0], lnd: b[1], num: u16::from_be_bytes([b[2], b[3]]), addr }
    }

    /// The 20-byte `struct lnet_nid`.
    pub fn to_lnet_nid(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0] = self.size;
        b[1] = self.lnd;
        b[2..4].copy_from_slice(&self.num.to_be_bytes());
        b[4..].copy_from_slice(&self.addr);
        b
    }

    /// An IPv4 NID.
    pub fn ipv4(ip: Ipv4Addr, lnd: u8, num: u16) -> Self {
        let mut addr = [0u8; 16];
        addr[..4].copy_from_slice(&ip.octets());
        Nid { size: 0, lnd, num, addr }
    }

    /// An IPv6 NID.
    pub fn ipv6(ip: Ipv6Addr, lnd: u8, num: u16) -> Self {
        Nid { size: 12, lnd, num, addr: ip.octets() }
    }

    /// True when the NID fits the 64-bit form.
    pub fn is_nid4(&self) -> bool {
        self.size == 0 && self.addr[4..] == [0; 12]
    }

    /// The IPv4 address when this is a 4-byte address.
    pub fn ipv4_addr(&self) -> Option<Ipv4Addr> {
        (self.size == 0).then(|| Ipv4Addr::new(self.addr[0], self.addr[1], self.addr[2], self.addr[3]))
    }

    /// The IPv6 address when this is a 16-byte address.
    pub fn ipv6_addr(&self) -> Option<Ipv6Addr> {
        (self.size == 12).then(|| Ipv6Addr::from(self.addr))
    }

    /// Parses `ADDR@NETNUM` (as printed by [`Display`](fmt::Display)).
    pub fn parse(s: &str) -> Option<Self> {
        let (addr, net) = s.rsplit_once('@')?;
        // The network number is the trailing digits ("o2ib3" is o2ib, network 3).
        let split = net.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (name, num) = net.split_at(split);
        let num: u16 = if num.is_empty() { 0 } else { num.parse().ok()? };
        let lnd = match name {
            "tcp" => 2,
            "o2ib" => 5,
            "lo" => 9,
            "gni" => 13,
            "gip" => 14,
            "ptlf" => 15,
            "kfi" => 16,
            "efa" => 18,
            "bxi3f" => 19,
            _ => return None,
        };
        if let Ok(v4) = addr.parse::<Ipv4Addr>() {
            return Some(Self::ipv4(v4, lnd, num));
        }
        if let Ok(v6) = addr.parse::<Ipv6Addr>() {
            return Some(Self::ipv6(v6, lnd, num));
        }
        let n: u32 = addr.parse().ok()?;
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&n.to_be_bytes());
        Some(Nid { size: 0, lnd, num, addr: a })
    }
}

fn lnd_name(t: u8) -> Option<&'static str> {
    Some(match t {
        1 => "elan",
        2 => "tcp",
        3 => "gm",
        4 => "ptl",
        5 => "o2ib",
        9 => "lo",
        10 => "ra",
        12 => "mx",
        13 => "gni",
        14 => "gip",
        15 => "ptlf",
        16 => "kfi",
        18 => "efa",
        19 => "bxi3f",
        _ => return None,
    })
}

/// LNDs whose addresses print as dotted IP.
fn lnd_is_ip(t: u8) -> bool {
    matches!(t, 2 | 5 | 14 | 18)
}

impl Nid {
    /// `a.b.c.d@netN` of an IPv4 NID on an IP LND (nearly every NID a capture holds),
    /// built on the stack and written once: through `write!` a NID cost about 900
    /// instructions, and `decode` writes two a message.
    fn fmt_ipv4(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = Ipv4Text::new(Ipv4Addr::new(self.addr[0], self.addr[1], self.addr[2], self.addr[3]));
        let mut digits = itoa::Buffer::new();
        let num = if self.num == 0 { "" } else { digits.format(self.num) };
        // 15 (address) + '@' + a name (at most 5) + 5 digits.
        let mut buf = [0u8; 32];
        let mut n = 0;
        for part in [ip.as_str(), "@", name, num] {
            buf[n..n + part.len()].copy_from_slice(part.as_bytes());
            n += part.len();
        }
        // Digits, dots, '@' and an ASCII name: always UTF-8.
        f.write_str(std::str::from_utf8(&buf[..n]).unwrap_or_default())
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::ANY {
            return f.write_str("<?>");
        }
        if self.size == 0 && lnd_is_ip(self.lnd) {
            if let Some(name) = lnd_name(self.lnd) {
                return self.fmt_ipv4(name, f);
            }
        }
        let net = |f: &mut fmt::Formatter<'_>| -> fmt::Result {
            match lnd_name(self.lnd) {
                Some(n) if self.num == 0 => write!(f, "{n}"),
                Some(n) => write!(f, "{n}{}", self.num),
                None => write!(f, "<{}:{}>", self.lnd, self.num),
            }
        };
        match self.size {
            12 => write!(f, "{}@", Ipv6Addr::from(self.addr))?,
            0 => {
                let a = u32::from_be_bytes([self.addr[0], self.addr[1], self.addr[2], self.addr[3]]);
                if self.lnd == lnd::LO {
                    write!(f, "{a}@")?;
                } else if lnd_is_ip(self.lnd) {
                    write!(f, "{}@", Ipv4Text::new(Ipv4Addr::from(a)))?;
                } else if lnd_name(self.lnd).is_some() {
                    write!(f, "{a}@")?;
                } else {
                    write!(f, "{a:x}@")?;
                }
            }
            _ => {
                for b in &self.addr {
                    write!(f, "{b:02x}")?;
                }
                write!(f, "/{}@", self.size)?;
            }
        }
        net(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The integer comparison orders NIDs as comparing their fields in declaration
        /// order would (sizes, LNDs, network numbers and address bytes drawn from a few
        /// values each so that ties come up at every field).
        #[test]
        fn test_order_is_by_fields(
            a in (0u8..3, 0u8..3, 0u16..3, proptest::array::uniform16(0u8..3)),
            b in (0u8..3, 0u8..3, 0u16..3, proptest::array::uniform16(0u8..3)),
            big in proptest::bool::ANY,
        ) {
            let widen = |n: u16| if big { n << 7 | n } else { n };
            let nid = |(size, lnd, num, addr): (u8, u8, u16, [u8; 16])| Nid { size, lnd, num: widen(num), addr };
            let (x, y) = (nid(a), nid(b));
            let fields = |n: &Nid| (n.size, n.lnd, n.num, n.addr);
            proptest::prop_assert_eq!(x.cmp(&y), fields(&x).cmp(&fields(&y)));
            proptest::prop_assert_eq!(x.partial_cmp(&y), Some(fields(&x).cmp(&fields(&y))));
            // Every field is hashed: NIDs hash alike exactly when they are equal (a fixed
            // 64-bit hasher: a collision has a chance of 2^-64).
            let hash = |n: &Nid| {
                use std::hash::{Hash, Hasher};
                let mut h = std::hash::DefaultHasher::new();
                n.hash(&mut h);
                h.finish()
            };
            proptest::prop_assert_eq!(hash(&x) == hash(&y), x == y);
            let mut one_off = [x; 5];
            one_off[0].size ^= 1;
            one_off[1].lnd ^= 1;
            one_off[2].num ^= 0x100;
            one_off[3].addr[0] ^= 1;
            one_off[4].addr[15] ^= 1;
            for z in one_off {
                proptest::prop_assert_ne!(hash(&x), hash(&z));
            }
        }
    }

    proptest::proptest! {
        /// An IPv4 NID on every IP LND prints as std's dotted quad, '@', the LND's name and
        /// the network number when it is not 0 (the stack-built path against `format!`).
        #[test]
        fn test_ipv4_nid_prints_as_format_would(
            addr in proptest::array::uniform4(proptest::num::u8::ANY),
            lnd in proptest::sample::select(vec![2u8, 5, 14, 18]),
            num in proptest::prop_oneof![0u16..12, proptest::num::u16::ANY],
        ) {
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&addr);
            let nid = Nid { size: 0, lnd, num, addr: a };
            let name = lnd_name(lnd).unwrap();
            let net = if num == 0 { name.to_string() } else { format!("{name}{num}") };
            proptest::prop_assert_eq!(nid.to_string(), format!("{}@{net}", Ipv4Addr::from(addr)));
        }
    }

    #[test]
    fn test_print_like_lustre() {
        assert_eq!(Nid::from_u64(0x0002_0000_0A00_0001).to_string(), "10.0.0.1@tcp");
        assert_eq!(Nid::from_u64(0x0005_0003_C0A8_0105).to_string(), "192.168.1.5@o2ib3");
        assert_eq!(Nid::from_u64(0x0002_0001_0A00_0001).to_string(), "10.0.0.1@tcp1");
        assert_eq!(Nid::from_u64(0x0002_FFFF_FFFF_FFFF).to_string(), "255.255.255.255@tcp65535");
        assert_eq!(Nid::from_u64(0x0012_000A_0000_0000).to_string(), "0.0.0.0@efa10");
        assert_eq!(Nid::from_u64(u64::MAX).to_string(), "<?>");
        assert_eq!(Nid::from_u64(0x0009_0000_0000_0000).to_string(), "0@lo");
        assert_eq!(Nid::from_u64(0x000d_0000_0000_0010).to_string(), "16@gni");
        assert_eq!(Nid::from_u64(0x0063_0000_0000_00ff).to_string(), "ff@<99:0>");
        assert_eq!(Nid::ipv6("fd00::1".parse().unwrap(), 2, 0).to_string(), "fd00::1@tcp");
    }

    #[test]
    fn test_lnet_nid_bytes() {
        // wire-format.md §4.4: 10.0.0.1@tcp as struct lnet_nid starts 00 02 00 00 0a 00 00 01.
        let n = Nid::parse("10.0.0.1@tcp").unwrap();
        assert_eq!(&n.to_lnet_nid()[..8], &[0, 2, 0, 0, 0x0a, 0, 0, 1]);
        assert_eq!(n.to_u64(), 0x0002_0000_0A00_0001);
        let v6 = Nid::parse("fd00::2@tcp").unwrap();
        let b = v6.to_lnet_nid();
        assert_eq!(&b[..4], &[0x0c, 0x02, 0, 0]);
        assert_eq!(Nid::from_lnet_nid(&b), v6);
        assert_eq!(Nid::parse("192.168.1.5@o2ib3").unwrap().to_u64(), 0x0005_0003_C0A8_0105);
    }
}
