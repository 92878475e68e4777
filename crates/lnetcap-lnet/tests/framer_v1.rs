//! Resynchronisation of a V1 (bare LNet, no ksock header) stream at the framer level.
//!
//! A V1 message has no ksock type byte (0xc0/0xc1) to search for, so a lost V1 framer can
//! only find a message that starts exactly where a segment's captured bytes start
//! (`find_resync`). A framer that skipped `find_resync` for segments without a type byte
//! (570a5f9, fixed in 82a6084) never resynced such a stream: these tests hold that.
//! The messages are built with `LnetHdr::emit`, whose layout `tests/roundtrip.rs` holds to
//! the parser and `tests/literals.rs` to hand-checked bytes.

use lnetcap_lnet::framer::{find_resync, Framer};
use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::{LnetDetail, LnetHdr, Wmd, NID4};
use lnetcap_lnet::{Body, FramingEvent, LnetEvent, Proto};
use lnetcap_tcp::{ConnId, Dir, Stamp};

/// A tcp NID (lnd 2 = SOCKLND) of 10.0.0.`host`, as a V1 (nid4) header carries it: no
/// byte 0xc0 (192) in it, unlike a 192.168 address.
fn nid(host: u8) -> Nid {
    let mut addr = [0u8; 16];
    addr[..4].copy_from_slice(&[10, 0, 0, host]);
    Nid { size: 0, lnd: 2, num: 0, addr }
}

/// A bare V1 PUT of `payload` bytes (72-byte nid4 header, then the payload), without a
/// byte that looks like a ksock type (0xc0, 0xc1): what a framer that only looks for those
/// would pass over.
fn v1_put(payload: u32, match_bits: u64) -> Vec<u8> {
    let h = LnetHdr {
        dest_nid: nid(2),
        src_nid: nid(1),
        dest_pid: 12345,
        src_pid: 12345,
        msg_type: 1,
        payload_length: payload,
        detail: Some(LnetDetail::Put {
            ack_wmd: Wmd { interface: 0x1122, object: 0x3344 },
            match_bits,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        }),
        cut: None,
    };
    let mut b = Vec::new();
    h.emit(NID4, &mut b);
    assert_eq!(b.len(), 72, "nid4 LNet header");
    b.extend(std::iter::repeat_n(0x5a, payload as usize));
    assert!(!b.contains(&0xc0) && !b.contains(&0xc1), "a ksock type byte in the V1 message");
    b
}

fn stamp(frame: u64) -> Stamp {
    Stamp { frame, ts_ns: frame as i64 * 1_000 }
}

/// A framer picked up mid-stream (lost from the start) on a V1 connection.
fn lost_v1_framer() -> Framer {
    let mut f = Framer::new(ConnId(0), Dir::FromActive, false);
    f.hint_proto(Proto::V1);
    assert!(f.desynced());
    f
}

/// A decoded message: (stream offset, match bits, payload bytes captured).
type Seen = (u64, u64, u64);

/// Each decoded message, and each resync as (offset, bytes skipped).
fn summary(out: &[LnetEvent]) -> (Vec<Seen>, Vec<(u64, u64)>) {
    let (mut msgs, mut resyncs) = (Vec::new(), Vec::new());
    for ev in out {
        match ev {
            LnetEvent::Message(m) => {
                let Body::Lnet { hdr, .. } = &m.body else { panic!("not an LNet message: {m:?}") };
                let Some(LnetDetail::Put { match_bits, .. }) = hdr.detail else { panic!("not a PUT: {hdr:?}") };
                assert_eq!(m.proto, Some(Proto::V1));
                msgs.push((m.offset, match_bits, m.payload_captured));
            }
            LnetEvent::Framing { event: FramingEvent::Resync { offset, skipped }, .. } => {
                resyncs.push((*offset, *skipped))
            }
            LnetEvent::Framing { .. } => {}
        }
    }
    (msgs, resyncs)
}

#[test]
fn test_find_resync_v1_only_at_the_start() {
    let m = v1_put(100, 7);
    assert_eq!(find_resync(&m, Some(Proto::V1), &[]), Some((0, Proto::V1)));
    // The same message behind other bytes: no type byte to search for, not found.
    let mut behind = vec![0x11; 10];
    behind.extend_from_slice(&m);
    assert_eq!(find_resync(&behind, Some(Proto::V1), &[]), None);
    // Bytes that are no LNet header at the start.
    assert_eq!(find_resync(&[0x11; 200], Some(Proto::V1), &[]), None);
}

#[test]
fn test_lost_v1_framer_resyncs_at_a_segment_start() {
    let mut f = lost_v1_framer();
    let mut out = Vec::new();
    // 50 bytes of the middle of some message: nothing to frame.
    let junk = [0x11u8; 50];
    f.on_data(0, &junk, stamp(1), &mut out);
    assert!(f.desynced(), "junk framed");
    // A segment starting with a whole PUT (72 + 100 bytes), then one with the next.
    let (m1, m2) = (v1_put(100, 7), v1_put(300, 8));
    f.on_data(50, &m1, stamp(2), &mut out);
    assert!(!f.desynced(), "no resync at the segment's start");
    f.on_data(50 + m1.len() as u64, &m2, stamp(3), &mut out);
    let (msgs, resyncs) = summary(&out);
    assert_eq!(resyncs, vec![(50, 50)]);
    assert_eq!(msgs, vec![(50, 7, 100), (50 + 172, 8, 300)]);
    assert_eq!(f.position(), 50 + 172 + 372);
    assert_eq!(f.stats.resyncs, 1);
}

#[test]
fn test_lost_v1_framer_waits_for_a_header_at_a_segment_start() {
    // A header in the middle of a segment is not found (nothing marks it); the next one
    // that starts a segment is.
    let mut f = lost_v1_framer();
    let mut out = Vec::new();
    let mut seg = vec![0x11u8; 10];
    seg.extend_from_slice(&v1_put(40, 5));
    f.on_data(0, &seg, stamp(1), &mut out);
    assert!(f.desynced(), "a V1 header found inside a segment");
    let m = v1_put(64, 6);
    f.on_data(seg.len() as u64, &m, stamp(2), &mut out);
    let (msgs, resyncs) = summary(&out);
    assert_eq!(resyncs, vec![(122, 122)]);
    assert_eq!(msgs, vec![(122, 6, 64)]);
}
