//! A direct-mapped cache in front of the flow table's map for IPv4 segments: the
//! directed 4-tuple as three words → the connection's slot. Finding a segment's
//! connection through the map costs a canonical (sorted) key of two `IpAddr` endpoints,
//! its hash and a probe comparing enums: 6.6 % of a one-thread `analyze` of the
//! header-only bench capture in wall time (`perf record`), where connections interleave
//! and the one-entry `last_key` memo rarely holds. The cache only ever holds what the map
//! says: an entry is written from a map answer and forgotten whenever the map's entry for
//! its connection changes (a new connection on the tuple, a retirement, a rebuild).

use std::net::IpAddr;

use lnetcap_capture::TcpSegment;

use super::{Dir, Endpoint};

/// Entries (a power of two): 16 bytes each, 16 KiB a table.
const ENTRIES: usize = 1024;
/// An entry's slot word when it holds nothing.
const EMPTY: u32 = u32::MAX;

/// The cache: `[source address, destination address, ports, slot × 2 + direction]` per
/// entry (direction 1: from the passive side).
pub(super) struct V4Cache(Box<[[u32; 4]]>);

impl Default for V4Cache {
    fn default() -> Self {
        Self(vec![[0, 0, 0, EMPTY]; ENTRIES].into_boxed_slice())
    }
}

/// A directed IPv4 tuple as three words (None for IPv6 or mixed addresses).
#[inline]
fn words(src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16) -> Option<[u32; 3]> {
    match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            Some([a.to_bits(), b.to_bits(), (u32::from(src_port) << 16) | u32::from(dst_port)])
        }
        _ => None,
    }
}

/// The key of the tuple from `src` to `dst`.
#[inline]
pub(super) fn key(src: Endpoint, dst: Endpoint) -> Option<[u32; 3]> {
    words(src.ip, src.port, dst.ip, dst.port)
}

/// [`key`] of a segment's tuple, read from the segment (no endpoints made first).
#[inline]
pub(super) fn key_of(seg: &TcpSegment<'_>) -> Option<[u32; 3]> {
    words(seg.ip.src, seg.src_port, seg.ip.dst, seg.dst_port)
}

#[inline]
fn index(k: [u32; 3]) -> usize {
    let x = ((u64::from(k[0]) << 32) | u64::from(k[1])) ^ u64::from(k[2]).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95) >> (64 - ENTRIES.trailing_zeros())) as usize
}

impl V4Cache {
    /// The slot and direction cached for the tuple `k`.
    #[inline]
    pub(super) fn get(&self, k: [u32; 3]) -> Option<(u32, Dir)> {
        let e = &self.0[index(k)];
        (e[..3] == k && e[3] != EMPTY)
            .then(|| (e[3] >> 1, if e[3] & 1 == 0 { Dir::FromActive } else { Dir::FromPassive }))
    }

    /// Caches slot `i` and direction `dir` for the tuple `k` (whatever the entry held
    /// goes); a slot number of 2^31 - 1 or more is not cached.
    #[inline]
    pub(super) fn set(&mut self, k: [u32; 3], i: u32, dir: Dir) {
        if i < (EMPTY >> 1) {
            self.0[index(k)] = [k[0], k[1], k[2], (i << 1) | dir.index() as u32];
        }
    }

    /// Forgets both directions of the connection between `a` and `b`.
    pub(super) fn forget(&mut self, a: Endpoint, b: Endpoint) {
        for (s, d) in [(a, b), (b, a)] {
            if let Some(k) = key(s, d) {
                let e = &mut self.0[index(k)];
                if e[..3] == k {
                    e[3] = EMPTY;
                }
            }
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.0.fill([0, 0, 0, EMPTY]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ep(a: u32, port: u16) -> Endpoint {
        Endpoint { ip: IpAddr::V4(Ipv4Addr::from_bits(a)), port }
    }

    #[test]
    fn test_cache_answers_only_what_was_set_and_forgets_both_directions() {
        let mut c = V4Cache::default();
        let (a, b) = (ep(0x0a00_0001, 1023), ep(0x0a00_0002, 988));
        let (ka, kb) = (key(a, b).unwrap(), key(b, a).unwrap());
        assert_eq!(c.get(ka), None);
        c.set(ka, 7, Dir::FromActive);
        c.set(kb, 7, Dir::FromPassive);
        assert_eq!((c.get(ka), c.get(kb)), (Some((7, Dir::FromActive)), Some((7, Dir::FromPassive))));
        // Another tuple, even one sharing the entry, is not answered by it.
        assert_eq!(c.get(key(a, ep(0x0a00_0003, 988)).unwrap()), None);
        c.forget(b, a);
        assert_eq!((c.get(ka), c.get(kb)), (None, None));
        c.set(ka, 9, Dir::FromActive);
        // The largest slot numbers are not cached (the word holds the slot twice over).
        c.set(kb, EMPTY >> 1, Dir::FromPassive);
        assert_eq!(c.get(kb), None);
        c.set(kb, (EMPTY >> 1) - 1, Dir::FromPassive);
        assert_eq!(c.get(kb), Some(((EMPTY >> 1) - 1, Dir::FromPassive)));
        c.clear();
        assert_eq!(c.get(ka), None);
        let v6 = Endpoint { ip: "::1".parse().unwrap(), port: 988 };
        assert_eq!(key(a, v6), None);
    }

    #[test]
    fn test_colliding_tuples_evict_each_other_without_answering_for_each_other() {
        let mut c = V4Cache::default();
        let base = key(ep(1, 2), ep(3, 4)).unwrap();
        // Find another tuple with the same entry.
        let other = (5u32..).map(|x| key(ep(x, 2), ep(3, 4)).unwrap()).find(|k| index(*k) == index(base)).unwrap();
        c.set(base, 1, Dir::FromActive);
        c.set(other, 2, Dir::FromActive);
        assert_eq!((c.get(base), c.get(other)), (None, Some((2, Dir::FromActive))));
    }

    /// Events of a table's sink, and whether it folds what the table retires.
    #[derive(Default)]
    struct Log(Vec<(u32, Dir, i64, String)>, bool);

    impl crate::StreamSink for Log {
        fn on_open(&mut self, c: &crate::Connection) -> crate::Verdict {
            self.0.push((c.id.0, Dir::FromActive, 0, format!("open {:?}", c.endpoints)));
            crate::Verdict::Follow
        }
        fn on_event(
            &mut self,
            c: &crate::Connection,
            d: Dir,
            st: crate::Stamp,
            ev: crate::StreamEvent<'_>,
        ) -> crate::Verdict {
            self.0.push((c.id.0, d, st.ts_ns, format!("{ev:?}")));
            crate::Verdict::Follow
        }
        fn on_retire(&mut self, c: &crate::Connection) -> bool {
            self.0.push((c.id.0, Dir::FromActive, 0, "retire".into()));
            self.1
        }
    }

    proptest::proptest! {
        /// The cache never changes an answer: a table whose cache is emptied before every
        /// segment (so that every lookup goes through the map) gives the same connection,
        /// direction and events for any run of segments over a few IPv4 and IPv6 tuples,
        /// with handshakes, port reuse (a fresh SYN on an ended connection), FINs, RSTs
        /// and retirement at the table's limit (8 live connections for 10 tuples).
        #[test]
        fn test_cache_gives_the_maps_answers(
            segs in proptest::collection::vec((0usize..10, proptest::prelude::any::<bool>(), 0usize..5, 0u32..4, 0usize..3), 1..300),
            fold in proptest::prelude::any::<bool>(),
        ) {
            use lnetcap_capture::{IpPair, TcpFlags, TcpSegment};
            let tuple = |i: usize| -> (Endpoint, Endpoint) {
                let ip = |x: u32| if i >= 8 { IpAddr::V6(std::net::Ipv6Addr::from_bits(u128::from(x))) } else { IpAddr::V4(Ipv4Addr::from_bits(x)) };
                (Endpoint { ip: ip(0x0a00_0010 + i as u32 % 3), port: 1021 + (i as u16 % 4) }, Endpoint { ip: ip(0x0a00_0001), port: 988 })
            };
            const FLAGS: [u8; 5] = [TcpFlags::SYN, TcpFlags::SYN | TcpFlags::ACK, TcpFlags::ACK, TcpFlags::FIN | TcpFlags::ACK, TcpFlags::RST];
            let payload = [5u8; 2];
            let mut tables = [super::super::FlowTable::new(&[988]).with_max_open(8), super::super::FlowTable::new(&[988]).with_max_open(8)];
            let mut logs = [Log(Vec::new(), fold), Log(Vec::new(), fold)];
            for (n, &(t, back, f, seq, len)) in segs.iter().enumerate() {
                let (a, b) = tuple(t);
                let (src, dst) = if back { (b, a) } else { (a, b) };
                let seg = TcpSegment {
                    ip: IpPair { src: src.ip, dst: dst.ip },
                    src_port: src.port,
                    dst_port: dst.port,
                    seq: seq * 1000,
                    ack: 1,
                    flags: TcpFlags(FLAGS[f]),
                    window: 100,
                    options: &[],
                    payload: &payload[..len],
                    payload_len: len as u32,
                };
                let stamp = crate::Stamp { frame: n as u64 + 1, ts_ns: n as i64 * 1_000_000 };
                tables[1].v4.clear();
                let [t0, t1] = &mut tables;
                let [l0, l1] = &mut logs;
                let o0 = t0.process(&seg, stamp, l0);
                let o1 = t1.process(&seg, stamp, l1);
                proptest::prop_assert_eq!((o0.conn, o0.dir, o0.ignored), (o1.conn, o1.dir, o1.ignored));
                // The map answers what the lookup answered.
                proptest::prop_assert_eq!(t0.map.get(&super::super::ConnKey::of(src, dst)), Some(&o0.conn.0));
            }
            proptest::prop_assert_eq!(&logs[0].0, &logs[1].0);
        }
    }
}
