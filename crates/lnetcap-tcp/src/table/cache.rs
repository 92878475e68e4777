//! Direct-mapped caches in front of the flow table's map: a segment's directed 4-tuple
//! (IPv4: three 32-bit words; IPv6: each address as two 64-bit words, and the ports) →
//! the connection's slot. Finding a
//! segment's connection through the map costs a canonical (sorted) key of two `IpAddr`
//! endpoints, its hash and a probe comparing enums: 6.6 % of a one-thread `analyze` of
//! the header-only bench capture in wall time (`perf record`), where connections
//! interleave and the one-entry `last_key` memo rarely holds; on IPv6, 155 instructions
//! a segment (7 % of `analyze`). A cache only ever holds what the map says: an entry is
//! written from a map answer and forgotten whenever the map's entry for its connection
//! changes (a new connection on the tuple, a retirement, a rebuild).

use std::net::IpAddr;

use lnetcap_capture::TcpSegment;

use super::{Dir, Endpoint};

/// Entries of each table (a power of two): 16 KiB for IPv4 (16 bytes an entry), 48 KiB
/// for IPv6 (48 bytes: each address as two `u64`, not a `u128`, whose 16-byte alignment
/// would pad an entry to 64).
const ENTRIES: usize = 1024;
/// An entry's slot word when it holds nothing.
const EMPTY: u32 = u32::MAX;

/// A directed IPv4 tuple: source address, destination address, both ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct V4Key([u32; 3]);

/// A directed IPv6 tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct V6Key {
    /// Source address, high then low 64 bits.
    src: [u64; 2],
    /// Destination address, the same way.
    dst: [u64; 2],
    ports: u32,
}

/// A directed tuple of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    /// IPv4.
    V4(V4Key),
    /// IPv6.
    V6(V6Key),
}

/// What a table needs of its key.
trait TupleKey: Copy + Eq {
    /// The key of an empty entry (its slot word says it is empty).
    const ZERO: Self;
    /// The key's entry (below [`ENTRIES`]).
    fn index(&self) -> usize;
}

/// The top bits of a mixed word: an entry index.
#[inline]
fn spread(x: u64) -> usize {
    (x.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95) >> (64 - ENTRIES.trailing_zeros())) as usize
}

impl TupleKey for V4Key {
    const ZERO: Self = Self([0; 3]);
    #[inline]
    fn index(&self) -> usize {
        let k = &self.0;
        spread(((u64::from(k[0]) << 32) | u64::from(k[1])) ^ u64::from(k[2]).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
}

impl TupleKey for V6Key {
    const ZERO: Self = Self { src: [0; 2], dst: [0; 2], ports: 0 };
    /// Each 32-bit word of the addresses lands at its own rotation (0, 32, 17, 49 for the
    /// source; 23, 55, 40, 8 for the destination): a rotation of the destination by a
    /// multiple of 32 would line its words up with the source's, and tuples differing
    /// by the same value in a word of each would share an entry.
    #[inline]
    fn index(&self) -> usize {
        let fold = |a: [u64; 2]| a[1] ^ a[0].rotate_left(17);
        spread(
            fold(self.src) ^ fold(self.dst).rotate_left(23) ^ u64::from(self.ports).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        )
    }
}

impl V6Key {
    fn new(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, ports: u32) -> Self {
        let halves = |a: std::net::Ipv6Addr| {
            let b = a.to_bits();
            [(b >> 64) as u64, b as u64]
        };
        Self { src: halves(src), dst: halves(dst), ports }
    }
}

/// One table's entry: its key and `slot × 2 + direction` (direction 1: from the
/// passive side).
#[derive(Clone, Copy)]
struct Entry<K> {
    key: K,
    slot: u32,
}

struct Table<K>(Box<[Entry<K>]>);

impl<K: TupleKey> Default for Table<K> {
    fn default() -> Self {
        Self(vec![Entry { key: K::ZERO, slot: EMPTY }; ENTRIES].into_boxed_slice())
    }
}

impl<K: TupleKey> Table<K> {
    #[inline]
    fn get(&self, k: &K) -> Option<(u32, Dir)> {
        let e = &self.0[k.index()];
        if e.key != *k || e.slot == EMPTY {
            return None;
        }
        Some((e.slot >> 1, if e.slot & 1 == 0 { Dir::FromActive } else { Dir::FromPassive }))
    }

    #[inline]
    fn set(&mut self, k: &K, i: u32, dir: Dir) {
        if i < (EMPTY >> 1) {
            self.0[k.index()] = Entry { key: *k, slot: (i << 1) | dir.index() as u32 };
        }
    }

    fn forget(&mut self, k: &K) {
        let e = &mut self.0[k.index()];
        if e.key == *k {
            e.slot = EMPTY;
        }
    }

    fn clear(&mut self) {
        self.0.fill(Entry { key: K::ZERO, slot: EMPTY });
    }
}

/// The caches of both address families.
#[derive(Default)]
pub(super) struct TupleCache {
    v4: Table<V4Key>,
    v6: Table<V6Key>,
}

/// A directed tuple's two ports in one word: the source's in the high half.
#[inline]
fn ports(src_port: u16, dst_port: u16) -> u32 {
    (u32::from(src_port) << 16) | u32::from(dst_port)
}

/// The key of the tuple from `src` to `dst` (None for mixed address families).
#[inline]
fn words(src: IpAddr, src_port: u16, dst: IpAddr, dst_port: u16) -> Option<Key> {
    let ports = ports(src_port, dst_port);
    match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => Some(Key::V4(V4Key([a.to_bits(), b.to_bits(), ports]))),
        (IpAddr::V6(a), IpAddr::V6(b)) => Some(Key::V6(V6Key::new(a, b, ports))),
        _ => None,
    }
}

/// The key of the tuple from `src` to `dst`.
#[inline]
pub(super) fn key(src: Endpoint, dst: Endpoint) -> Option<Key> {
    words(src.ip, src.port, dst.ip, dst.port)
}

/// [`key`] of a segment's tuple, read from the segment (no endpoints made first).
#[inline]
pub(super) fn key_of(seg: &TcpSegment<'_>) -> Option<Key> {
    words(seg.ip.src, seg.src_port, seg.ip.dst, seg.dst_port)
}

/// The IPv6 key of a segment's tuple (None for any other: IPv4, mixed families).
#[inline]
pub(super) fn v6_key_of(seg: &TcpSegment<'_>) -> Option<V6Key> {
    match (seg.ip.src, seg.ip.dst) {
        (IpAddr::V6(a), IpAddr::V6(b)) => Some(V6Key::new(a, b, ports(seg.src_port, seg.dst_port))),
        _ => None,
    }
}

impl TupleCache {
    /// The slot and direction cached for an IPv4 segment's tuple (None for IPv6: see
    /// [`TupleCache::get_v6`], asked only when this one misses). No [`Key`] is made:
    /// one made for every segment and matched again cost IPv4 segments 1.2 % of
    /// `decode`'s instructions.
    #[inline]
    pub(super) fn get_v4_of(&self, seg: &TcpSegment<'_>) -> Option<(u32, Dir)> {
        match (seg.ip.src, seg.ip.dst) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                self.v4.get(&V4Key([a.to_bits(), b.to_bits(), ports(seg.src_port, seg.dst_port)]))
            }
            _ => None,
        }
    }

    /// The slot and direction cached for an IPv6 tuple ([`v6_key_of`] a segment).
    #[inline]
    pub(super) fn get_v6(&self, k: &V6Key) -> Option<(u32, Dir)> {
        self.v6.get(k)
    }

    /// The slot and direction cached for the tuple `k`.
    #[cfg(test)]
    fn get(&self, k: &Key) -> Option<(u32, Dir)> {
        match k {
            Key::V4(k) => self.v4.get(k),
            Key::V6(k) => self.v6.get(k),
        }
    }

    /// Caches slot `i` and direction `dir` for the tuple `k` (whatever the entry held
    /// goes); a slot number of 2^31 - 1 or more is not cached.
    #[inline]
    pub(super) fn set(&mut self, k: &Key, i: u32, dir: Dir) {
        match k {
            Key::V4(k) => self.v4.set(k, i, dir),
            Key::V6(k) => self.v6.set(k, i, dir),
        }
    }

    /// Forgets both directions of the connection between `a` and `b`.
    pub(super) fn forget(&mut self, a: Endpoint, b: Endpoint) {
        for (s, d) in [(a, b), (b, a)] {
            match key(s, d) {
                Some(Key::V4(k)) => self.v4.forget(&k),
                Some(Key::V6(k)) => self.v6.forget(&k),
                None => {}
            }
        }
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.v4.clear();
        self.v6.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ep(a: u32, port: u16) -> Endpoint {
        Endpoint { ip: IpAddr::V4(Ipv4Addr::from_bits(a)), port }
    }

    fn ep6(a: u128, port: u16) -> Endpoint {
        Endpoint { ip: IpAddr::V6(std::net::Ipv6Addr::from_bits(a)), port }
    }

    /// The table's entry index of a key.
    fn index(k: &Key) -> usize {
        match k {
            Key::V4(k) => k.index(),
            Key::V6(k) => k.index(),
        }
    }

    #[test]
    fn test_cache_answers_only_what_was_set_and_forgets_both_directions() {
        let pairs = [
            (ep(0x0a00_0001, 1023), ep(0x0a00_0002, 988), ep(0x0a00_0003, 988)),
            (ep6(0xfd00 << 112 | 1, 1023), ep6(0xfd00 << 112 | 2, 988), ep6(0xfd00 << 112 | 3 << 64 | 2, 988)),
        ];
        for (a, b, other) in pairs {
            let mut c = TupleCache::default();
            let (ka, kb) = (key(a, b).unwrap(), key(b, a).unwrap());
            assert_eq!(c.get(&ka), None);
            c.set(&ka, 7, Dir::FromActive);
            c.set(&kb, 7, Dir::FromPassive);
            assert_eq!((c.get(&ka), c.get(&kb)), (Some((7, Dir::FromActive)), Some((7, Dir::FromPassive))));
            // Another tuple, even one sharing the entry, is not answered by it.
            assert_eq!(c.get(&key(a, other).unwrap()), None);
            c.forget(b, a);
            assert_eq!((c.get(&ka), c.get(&kb)), (None, None));
            c.set(&ka, 9, Dir::FromActive);
            // The largest slot numbers are not cached (the word holds the slot twice over).
            c.set(&kb, EMPTY >> 1, Dir::FromPassive);
            assert_eq!(c.get(&kb), None);
            c.set(&kb, (EMPTY >> 1) - 1, Dir::FromPassive);
            assert_eq!(c.get(&kb), Some(((EMPTY >> 1) - 1, Dir::FromPassive)));
            c.clear();
            assert_eq!(c.get(&ka), None);
        }
        // Mixed families have no key; an IPv4 address and the IPv6 address mapped from
        // it are different keys in different tables.
        assert_eq!(key(ep(1, 988), ep6(1, 988)), None);
        let mut c = TupleCache::default();
        c.set(&key(ep(1, 2), ep(3, 4)).unwrap(), 5, Dir::FromActive);
        let mapped = |x: u128| ep6(0xffff << 32 | x, 0);
        assert_eq!(c.get(&key(Endpoint { port: 2, ..mapped(1) }, Endpoint { port: 4, ..mapped(3) }).unwrap()), None);
    }

    #[test]
    fn test_colliding_tuples_evict_each_other_without_answering_for_each_other() {
        let bases = [key(ep(1, 2), ep(3, 4)).unwrap(), key(ep6(1, 2), ep6(3, 4)).unwrap()];
        for (n, base) in bases.into_iter().enumerate() {
            let mut c = TupleCache::default();
            // Find another tuple of the same family with the same entry.
            let of =
                |x: u32| if n == 0 { key(ep(x, 2), ep(3, 4)) } else { key(ep6(u128::from(x) << 64, 2), ep6(3, 4)) };
            let other = (5u32..).map(|x| of(x).unwrap()).find(|k| index(k) == index(&base)).unwrap();
            c.set(&base, 1, Dir::FromActive);
            c.set(&other, 2, Dir::FromActive);
            assert_eq!((c.get(&base), c.get(&other)), (None, Some((2, Dir::FromActive))));
        }
    }

    /// The IPv6 index spreads tuples that differ in any one 32-bit word of an address or
    /// in a port, or by the same value in a word of each address.
    #[test]
    fn test_ipv6_index_uses_every_word() {
        let base = V6Key { src: [0x2001_0db8 << 32, 1], dst: [0x2001_0db8 << 32, 2], ports: 1023 << 16 | 988 };
        let flip = |k: &mut V6Key, w: usize, x: u32| match w {
            0..4 => k.src[w / 2] ^= u64::from(x) << (32 * (w % 2)),
            4..8 => k.dst[(w - 4) / 2] ^= u64::from(x) << (32 * (w % 2)),
            _ => k.ports ^= x,
        };
        let same = |ws: &[usize]| {
            (1u32..=64)
                .filter(|&x| {
                    let mut k = base;
                    ws.iter().for_each(|&w| flip(&mut k, w, x));
                    k.index() == base.index()
                })
                .count()
        };
        for w in 0..9 {
            assert!(same(&[w]) <= 1, "word {w}");
        }
        for a in 0..4 {
            for b in 4..8 {
                assert!(same(&[a, b]) <= 1, "words {a} and {b}");
            }
        }
    }

    #[test]
    fn test_entries_are_as_small_as_documented() {
        assert_eq!((size_of::<Entry<V4Key>>(), size_of::<Entry<V6Key>>()), (16, 48));
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

    /// The tuples of [`test_cache_gives_the_maps_answers`]: ten distinct ones, five IPv4
    /// and five IPv6 (three clients, four client ports, one server).
    fn spread_tuples() -> Vec<(Endpoint, Endpoint)> {
        (0..10usize)
            .map(|i| {
                let ip = |x: u32| {
                    if i >= 5 {
                        IpAddr::V6(std::net::Ipv6Addr::from_bits(u128::from(x)))
                    } else {
                        IpAddr::V4(Ipv4Addr::from_bits(x))
                    }
                };
                let client = Endpoint { ip: ip(0x0a00_0010 + i as u32 % 3), port: 1021 + (i as u16 % 4) };
                (client, Endpoint { ip: ip(0x0a00_0001), port: 988 })
            })
            .collect()
    }

    /// Ten tuples of which five IPv4 ones share one cache entry from the client and five
    /// IPv6 ones share another: live connections that evict each other's entries.
    fn colliding_tuples() -> Vec<(Endpoint, Endpoint)> {
        let server4 = ep(0x0a00_0001, 988);
        let server6 = ep6(0xfd00 << 112 | 1, 988);
        let clients4 = (2u32..).map(|x| (ep(0x0a00_0000 | x, 1023), server4));
        let clients6 = (2u128..).map(|x| (ep6(0xfd00 << 112 | x << 64 | 2, 1023), server6));
        let entry = |t: &(Endpoint, Endpoint)| index(&key(t.0, t.1).unwrap());
        let (first4, first6) =
            (entry(&(ep(0x0a00_0002, 1023), server4)), entry(&(ep6(0xfd00 << 112 | 2 << 64 | 2, 1023), server6)));
        let mut out: Vec<_> = clients4.filter(|t| entry(t) == first4).take(5).collect();
        out.extend(clients6.filter(|t| entry(t) == first6).take(5));
        out
    }

    /// Runs segments over `tuples` through two tables, the second with its cache emptied
    /// before every segment (every lookup through the map), and holds them to the same
    /// connection, direction and events.
    fn same_as_the_map(
        tuples: &[(Endpoint, Endpoint)],
        segs: &[(usize, bool, usize, u32, usize)],
        fold: bool,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        use lnetcap_capture::{IpPair, TcpFlags, TcpSegment};
        const FLAGS: [u8; 5] =
            [TcpFlags::SYN, TcpFlags::SYN | TcpFlags::ACK, TcpFlags::ACK, TcpFlags::FIN | TcpFlags::ACK, TcpFlags::RST];
        let payload = [5u8; 2];
        let table = || super::super::FlowTable::new(&[988]).with_max_open(8);
        let mut tables = [table(), table()];
        let mut logs = [Log(Vec::new(), fold), Log(Vec::new(), fold)];
        for (n, &(t, back, f, seq, len)) in segs.iter().enumerate() {
            let (a, b) = tuples[t % tuples.len()];
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
            tables[1].cache.clear();
            let [t0, t1] = &mut tables;
            let [l0, l1] = &mut logs;
            let o0 = t0.process(&seg, stamp, l0);
            let o1 = t1.process(&seg, stamp, l1);
            proptest::prop_assert_eq!((o0.conn, o0.dir, o0.ignored), (o1.conn, o1.dir, o1.ignored));
            // The map answers what the lookup answered.
            proptest::prop_assert_eq!(t0.map.get(&super::super::ConnKey::of(src, dst)), Some(&o0.conn.0));
        }
        proptest::prop_assert_eq!(&logs[0].0, &logs[1].0);
        Ok(())
    }

    #[test]
    fn test_colliding_tuples_are_found() {
        let t = colliding_tuples();
        assert_eq!(t.len(), 10);
        let entry = |i: usize| index(&key(t[i].0, t[i].1).unwrap());
        assert!((1..5).all(|i| entry(i) == entry(0)) && (6..10).all(|i| entry(i) == entry(5)));
    }

    proptest::proptest! {
        /// The cache never changes an answer, for any run of segments over a few IPv4 and
        /// IPv6 tuples, with handshakes, port reuse (a fresh SYN on an ended connection),
        /// FINs, RSTs and retirement at the table's limit (8 live connections for 10
        /// tuples).
        #[test]
        fn test_cache_gives_the_maps_answers(
            segs in proptest::collection::vec((0usize..10, proptest::prelude::any::<bool>(), 0usize..5, 0u32..4, 0usize..3), 1..300),
            fold in proptest::prelude::any::<bool>(),
        ) {
            same_as_the_map(&spread_tuples(), &segs, fold)?;
        }

        /// The same over tuples that share cache entries: five IPv4 connections on one
        /// entry and five IPv6 ones on another, live at once and evicting each other.
        #[test]
        fn test_cache_gives_the_maps_answers_when_tuples_collide(
            segs in proptest::collection::vec((0usize..10, proptest::prelude::any::<bool>(), 0usize..5, 0u32..4, 0usize..3), 1..300),
            fold in proptest::prelude::any::<bool>(),
        ) {
            same_as_the_map(&colliding_tuples(), &segs, fold)?;
        }
    }
}
