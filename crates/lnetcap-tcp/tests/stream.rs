//! StreamHalf against an obviously-correct model: a byte array of the original stream.
//! However the stream is cut into segments, reordered (within the out-of-order buffer),
//! duplicated, retransmitted with other cut points, or cut by a snaplen, and wherever the
//! initial sequence number lies (near 2^32 included), the events delivered are the stream
//! in order: captured bytes equal to the original, every other byte in a gap, nothing twice.

use lnetcap_tcp::{Anomaly, GapReason, Stamp, StreamEvent, StreamHalf};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Seg {
    off: u64,
    len: u64,
    captured: usize,
}

/// Replays segments and returns (byte or None for gap, per offset), plus anomalies.
fn replay(data: &[u8], isn: u32, segs: &[Seg]) -> (Vec<Option<u8>>, Vec<Anomaly>, u64) {
    let mut h = StreamHalf::default();
    h.on_syn(isn);
    let mut out: Vec<Option<u8>> = Vec::new();
    let mut anomalies = Vec::new();
    let mut next = 0u64;
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| match ev {
        StreamEvent::Data { offset, bytes } => {
            assert_eq!(offset, next, "data out of order");
            out.extend(bytes.iter().map(|b| Some(*b)));
            next += bytes.len() as u64;
        }
        StreamEvent::Gap { offset, len, .. } => {
            assert_eq!(offset, next, "gap out of order");
            out.extend(std::iter::repeat_n(None, len as usize));
            next += len;
        }
        StreamEvent::Anomaly(a) => anomalies.push(a),
        _ => {}
    };
    for (i, s) in segs.iter().enumerate() {
        let seq = isn.wrapping_add(1).wrapping_add(s.off as u32);
        let bytes = &data[s.off as usize..(s.off + s.len) as usize];
        h.on_data(
            seq,
            s.len,
            &bytes[..s.captured.min(bytes.len())],
            Stamp { frame: i as u64 + 1, ts_ns: 0 },
            &mut emit,
        );
    }
    h.flush(Stamp::default(), &mut emit);
    (out, anomalies, h.stats.bytes_retransmitted)
}

fn cut(len: u64, points: &[u64]) -> Vec<(u64, u64)> {
    let mut p: Vec<u64> = points.iter().map(|x| x % len.max(1)).filter(|x| *x > 0).collect();
    p.push(0);
    p.push(len);
    p.sort_unstable();
    p.dedup();
    p.windows(2).map(|w| (w[0], w[1] - w[0])).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_segmentation_order_and_duplication_gives_the_stream(
        data in prop::collection::vec(any::<u8>(), 1..4000),
        points in prop::collection::vec(any::<u64>(), 0..40),
        swaps in prop::collection::vec((any::<usize>(), any::<usize>()), 0..10),
        dups in prop::collection::vec(any::<usize>(), 0..6),
        isn in prop_oneof![any::<u32>(), (u32::MAX - 5000)..=u32::MAX],
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &points).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }).collect();
        for d in dups { let s = segs[d % segs.len()].clone(); let at = (d / 7) % (segs.len() + 1); segs.insert(at, s); }
        for (a, b) in swaps { let n = segs.len(); segs.swap(a % n, b % n); }
        let (out, anomalies, _) = replay(&data, isn, &segs);
        prop_assert!(anomalies.is_empty(), "{:?}", anomalies);
        prop_assert_eq!(out, data.iter().map(|b| Some(*b)).collect::<Vec<_>>());
    }

    #[test]
    fn snaplen_cut_bytes_are_gaps_in_place(
        data in prop::collection::vec(any::<u8>(), 1..3000),
        points in prop::collection::vec(any::<u64>(), 0..30),
        snap in 0usize..200,
        isn in any::<u32>(),
        reverse in any::<bool>(),
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &points).into_iter().map(|(off, len)| Seg { off, len, captured: snap }).collect();
        if reverse { segs.reverse(); }
        let (out, anomalies, _) = replay(&data, isn, &segs);
        prop_assert!(anomalies.is_empty());
        let mut want = vec![None; data.len()];
        for s in &segs { for k in 0..(s.captured as u64).min(s.len) { want[(s.off + k) as usize] = Some(data[(s.off + k) as usize]); } }
        prop_assert_eq!(out, want);
    }

    #[test]
    fn retransmissions_with_other_cut_points_are_dropped_and_compared(
        data in prop::collection::vec(any::<u8>(), 10..3000),
        first in prop::collection::vec(any::<u64>(), 0..20),
        second in prop::collection::vec(any::<u64>(), 0..20),
        corrupt in any::<bool>(),
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &first).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }).collect();
        segs.extend(cut(data.len() as u64, &second).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }));
        let mut copy = data.clone();
        // The retransmitted copy differs in one byte: the first copy wins, and it is reported.
        let mut d2 = data.clone();
        if corrupt { d2[5] ^= 0xff; }
        let (out, _, _) = replay(&copy, 7, &segs[..segs.len()]);
        prop_assert_eq!(&out, &copy.iter().map(|b| Some(*b)).collect::<Vec<_>>());
        // Replay with the second half of the segments taken from the corrupted copy.
        let n1 = cut(data.len() as u64, &first).len();
        let mut h = StreamHalf::default();
        h.on_syn(7);
        let mut got = Vec::new();
        let mut conflicts = 0u64;
        let mut emit = |_: Stamp, ev: StreamEvent<'_>| match ev {
            StreamEvent::Data { bytes, .. } => got.extend_from_slice(bytes),
            StreamEvent::Anomaly(Anomaly::OverlapConflict { bytes, .. }) => conflicts += bytes,
            _ => {}
        };
        for (i, s) in segs.iter().enumerate() {
            let src = if i < n1 { &data } else { &d2 };
            let b = &src[s.off as usize..(s.off + s.len) as usize];
            h.on_data(8u32.wrapping_add(s.off as u32), s.len, b, Stamp::default(), &mut emit);
        }
        h.flush(Stamp::default(), &mut emit);
        prop_assert_eq!(&got, &data);
        prop_assert_eq!(conflicts, u64::from(corrupt));
        prop_assert_eq!(h.stats.bytes_retransmitted, data.len() as u64);
        copy.clear();
    }
}

#[test]
fn capture_loss_acked_by_peer_becomes_a_gap() {
    let data: Vec<u8> = (0..100u8).collect();
    let mut h = StreamHalf::default();
    h.on_syn(1000);
    let events = std::cell::RefCell::new(Vec::new());
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| events.borrow_mut().push(format!("{ev:?}"));
    h.on_data(1001, 40, &data[..40], Stamp::default(), &mut emit);
    // Bytes 40..60 never captured; 60..100 arrive and wait.
    h.on_data(1061, 40, &data[60..], Stamp::default(), &mut emit);
    assert_eq!(events.borrow().len(), 1);
    // The peer acknowledges everything: the hole was sent and received, not captured.
    h.on_peer_ack(1101, &mut emit);
    let events = events.into_inner();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[1].contains("Gap { offset: 40, len: 20, reason: CaptureLoss }"), "{events:?}");
    assert_eq!(h.stats.bytes_lost, 20);
    let _ = GapReason::CaptureLoss;
}
