//! StreamHalf against an obviously-correct model: a byte array of the original stream.
//! However the stream is cut into segments, reordered (within the out-of-order buffer),
//! duplicated, retransmitted with other cut points, or cut by a snaplen, and wherever the
//! initial sequence number lies (near 2^32 included), the events delivered are the stream
//! in order: captured bytes equal to the original, every other byte in a gap, nothing twice.

use std::sync::Arc;

use lnetcap_capture::{Origin, Reread};
use lnetcap_tcp::limits::{MAX_HOLE_SPAN, MAX_HOLE_WAIT_NS, MAX_OOO_SEGMENTS};
use lnetcap_tcp::{Anomaly, GapReason, Stamp, StreamEvent, StreamHalf};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Seg {
    off: u64,
    len: u64,
    captured: usize,
}

/// A capture of the segments' captured bytes one after the other, and where each lies
/// in it: what the history keeps of a segment by reference instead of a copy.
fn capture_of<'a>(segs: impl Iterator<Item = &'a [u8]>) -> (Arc<Reread>, Vec<u64>) {
    let mut file = vec![0xee; 3];
    let mut at = Vec::new();
    for b in segs {
        at.push(file.len() as u64);
        file.extend_from_slice(b);
        file.push(0xee);
    }
    (Reread::memory(Arc::new(file)), at)
}

/// Replays segments and returns (byte or None for gap, per offset), plus anomalies;
/// `by_ref`: the segments come from a capture that can be read again.
fn replay(data: &[u8], isn: u32, segs: &[Seg], by_ref: bool) -> (Vec<Option<u8>>, Vec<Anomaly>, u64) {
    let captured = |s: &Seg| {
        let bytes = &data[s.off as usize..(s.off + s.len) as usize];
        &bytes[..s.captured.min(bytes.len())]
    };
    let (src, at) = capture_of(segs.iter().map(captured));
    let mut h = StreamHalf::default();
    h.on_syn(isn);
    let mut out: Vec<Option<u8>> = Vec::new();
    let mut anomalies = Vec::new();
    let mut next = 0u64;
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| match ev {
        StreamEvent::Data { offset, bytes, cut } => {
            assert_eq!(offset, next, "data out of order");
            out.extend(bytes.iter().map(|b| Some(*b)));
            out.extend(std::iter::repeat_n(None, cut as usize));
            next += bytes.len() as u64 + cut;
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
        let origin = by_ref.then_some(Origin { src: &src, at: at[i] });
        h.on_data(seq, s.len, captured(s), origin, Stamp { frame: i as u64 + 1, ts_ns: 0 }, &mut emit);
    }
    h.flush(Stamp::default(), &mut emit);
    assert_eq!(src.failures(), 0);
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
        by_ref in any::<bool>(),
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &points).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }).collect();
        for d in dups { let s = segs[d % segs.len()].clone(); let at = (d / 7) % (segs.len() + 1); segs.insert(at, s); }
        for (a, b) in swaps { let n = segs.len(); segs.swap(a % n, b % n); }
        let (out, anomalies, _) = replay(&data, isn, &segs, by_ref);
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
        by_ref in any::<bool>(),
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &points).into_iter().map(|(off, len)| Seg { off, len, captured: snap }).collect();
        if reverse { segs.reverse(); }
        let (out, anomalies, _) = replay(&data, isn, &segs, by_ref);
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
        by_ref in any::<bool>(),
    ) {
        let mut segs: Vec<Seg> = cut(data.len() as u64, &first).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }).collect();
        segs.extend(cut(data.len() as u64, &second).into_iter().map(|(off, len)| Seg { off, len, captured: len as usize }));
        let mut copy = data.clone();
        // The retransmitted copy differs in one byte: the first copy wins, and it is reported.
        let mut d2 = data.clone();
        if corrupt { d2[5] ^= 0xff; }
        let (out, _, _) = replay(&copy, 7, &segs[..segs.len()], by_ref);
        prop_assert_eq!(&out, &copy.iter().map(|b| Some(*b)).collect::<Vec<_>>());
        // Replay with the second half of the segments taken from the corrupted copy.
        let n1 = cut(data.len() as u64, &first).len();
        let bytes_of = |i: usize, s: &Seg| {
            let src = if i < n1 { &data } else { &d2 };
            &src[s.off as usize..(s.off + s.len) as usize]
        };
        let (file, at) = capture_of(segs.iter().enumerate().map(|(i, s)| bytes_of(i, s)));
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
            let origin = by_ref.then_some(Origin { src: &file, at: at[i] });
            h.on_data(8u32.wrapping_add(s.off as u32), s.len, bytes_of(i, s), origin, Stamp::default(), &mut emit);
        }
        h.flush(Stamp::default(), &mut emit);
        prop_assert_eq!(file.failures(), 0);
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
    h.on_data(1001, 40, &data[..40], None, Stamp::default(), &mut emit);
    // Bytes 40..60 never captured; 60..100 arrive and wait.
    h.on_data(1061, 40, &data[60..], None, Stamp::default(), &mut emit);
    assert_eq!(events.borrow().len(), 1);
    // The peer acknowledges everything: the hole was sent and received, not captured.
    h.on_peer_ack(1101, &mut emit);
    let events = events.into_inner();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(events[1].contains("Gap { offset: 40, len: 20, reason: CaptureLoss }"), "{events:?}");
    assert_eq!(h.stats.bytes_lost, 20);
    let _ = GapReason::CaptureLoss;
}

/// Stream events in short form.
#[derive(Debug, PartialEq)]
enum Ev {
    Data(u64, u64),
    Gap(u64, u64, GapReason),
}

/// An event as data and gaps: a data event's cut-off tail is the snaplen gap after it.
fn short(ev: StreamEvent<'_>) -> Vec<Ev> {
    let cut = ev.cut_gap().map(|(offset, len)| Ev::Gap(offset, len, GapReason::Snaplen));
    match ev {
        StreamEvent::Data { offset, bytes, .. } => {
            [Some(Ev::Data(offset, bytes.len() as u64)), cut].into_iter().flatten().collect()
        }
        StreamEvent::Gap { offset, len, reason } => vec![Ev::Gap(offset, len, reason)],
        _ => Vec::new(),
    }
}

fn at(ts_ns: i64) -> Stamp {
    Stamp { frame: 0, ts_ns }
}

const MS: i64 = 1_000_000;

#[test]
fn hole_filled_later_is_delivered_in_order_without_a_gap() {
    let data: Vec<u8> = (0..400u32).map(|i| i as u8).collect();
    let out = std::cell::RefCell::new(Vec::new());
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| out.borrow_mut().extend(short(ev));
    let mut h = StreamHalf::default();
    h.on_syn(999);
    h.on_data(1000, 100, &data[..100], None, at(0), &mut emit);
    // 100..200 was dropped before the capture point; 200..400 arrive first, cut by the
    // snaplen to their first 10 bytes.
    h.on_data(1200, 100, &data[200..210], None, at(MS), &mut emit);
    h.on_data(1300, 100, &data[300..310], None, at(MS + 1), &mut emit);
    // The receiver's duplicate ACKs stay at the hole, and a round trip passes: nothing is
    // declared lost.
    h.on_peer_ack(1100, &mut emit);
    h.on_peer_ack(1100, &mut emit);
    h.expire(31 * MS, &mut emit);
    assert_eq!(*out.borrow(), vec![Ev::Data(0, 100)]);
    assert!(h.has_pending());
    // The sender's retransmission fills the hole: the stream continues as if nothing was lost.
    h.on_data(1100, 100, &data[100..200], None, at(31 * MS), &mut emit);
    assert_eq!(
        *out.borrow(),
        vec![
            Ev::Data(0, 100),
            Ev::Data(100, 100),
            Ev::Data(200, 10),
            Ev::Gap(210, 90, GapReason::Snaplen),
            Ev::Data(300, 10),
            Ev::Gap(310, 90, GapReason::Snaplen),
        ]
    );
    assert!(!h.has_pending());
    assert_eq!(h.next_offset(), 400);
    assert_eq!((h.stats.bytes_lost, h.stats.gaps), (0, 2));
    assert_eq!((h.stats.segments_out_of_order, h.stats.segments_filling_holes), (2, 1));
    assert_eq!((h.stats.bytes_delivered, h.stats.bytes_snaplen), (220, 180));
}

#[test]
fn hole_never_filled_becomes_capture_loss_after_the_time_bound() {
    let data = [5u8; 400];
    let out = std::cell::RefCell::new(Vec::new());
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| out.borrow_mut().extend(short(ev));
    let t0 = 5_000 * MS;
    let mut h = StreamHalf::default();
    h.on_syn(999);
    h.on_data(1000, 100, &data[..100], None, at(t0), &mut emit);
    h.on_data(1200, 100, &data[200..300], None, at(t0 + 1), &mut emit);
    // Waiting at the bound itself is still waiting, whatever brings the time.
    h.on_data(1300, 100, &data[300..], None, at(t0 + 1 + MAX_HOLE_WAIT_NS), &mut emit);
    h.expire(t0 + 1 + MAX_HOLE_WAIT_NS, &mut emit);
    assert_eq!(*out.borrow(), vec![Ev::Data(0, 100)]);
    // Past it, the hole is lost by the capture and the bytes behind it flow.
    h.expire(t0 + 2 + MAX_HOLE_WAIT_NS, &mut emit);
    assert_eq!(
        *out.borrow(),
        vec![Ev::Data(0, 100), Ev::Gap(100, 100, GapReason::CaptureLoss), Ev::Data(200, 100), Ev::Data(300, 100)]
    );
    assert!(!h.has_pending());
    assert_eq!((h.stats.bytes_lost, h.stats.segments_filling_holes), (100, 0));
    // A late copy of the hole is a repeat now, not a fill.
    h.on_data(1100, 100, &data[100..200], None, at(t0 + 3 + MAX_HOLE_WAIT_NS), &mut emit);
    assert_eq!(out.borrow().len(), 4);
    assert_eq!(h.stats.segments_retransmitted, 1);
}

#[test]
fn hole_never_filled_becomes_capture_loss_a_window_of_bytes_beyond_it() {
    let data = [5u8; 300];
    let out = std::cell::RefCell::new(Vec::new());
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| out.borrow_mut().extend(short(ev));
    let mut h = StreamHalf::default();
    h.on_syn(999);
    h.on_data(1000, 100, &data[..100], None, at(0), &mut emit);
    h.on_data(1200, 100, &data[200..], None, at(1), &mut emit);
    assert_eq!(*out.borrow(), vec![Ev::Data(0, 100)]);
    // Bytes more than the largest TCP window beyond the hole (snaplen 0: nothing captured,
    // nothing copied): the receiver had the hole, the capture missed it.
    let far = 1100u32.wrapping_add(MAX_HOLE_SPAN as u32);
    h.on_data(far, 10, &[], None, at(2), &mut emit);
    assert_eq!(*out.borrow(), vec![Ev::Data(0, 100), Ev::Gap(100, 100, GapReason::CaptureLoss), Ev::Data(200, 100)]);
    // The bytes far ahead still wait (their hole is within a window).
    assert!(h.has_pending());
    assert_eq!(h.stats.bytes_lost, 100);
}

#[test]
fn a_full_buffer_gives_the_hole_up_as_buffer_limit() {
    let out = std::cell::RefCell::new(Vec::new());
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| out.borrow_mut().extend(short(ev));
    let mut h = StreamHalf::default();
    h.on_syn(999);
    h.on_data(1000, 10, &[1; 10], None, at(0), &mut emit);
    // Past a hole at 10..20, one-byte segments with a byte missing between each, until the
    // buffer holds one segment more than its bound.
    for i in 0..=MAX_OOO_SEGMENTS as u32 {
        h.on_data(1020 + 2 * i, 1, &[], None, at(1), &mut emit);
    }
    assert_eq!(
        *out.borrow(),
        vec![Ev::Data(0, 10), Ev::Gap(10, 10, GapReason::BufferLimit), Ev::Gap(20, 1, GapReason::Snaplen)]
    );
    assert_eq!(h.next_offset(), 21);
}

#[test]
fn a_segment_cut_by_the_snaplen_is_one_data_event_that_carries_the_cut() {
    // 100 payload bytes, 10 captured: one event, its 10 bytes and the 90 cut after them
    // (the snaplen gap the consumer folds in); a segment captured whole has none; one
    // with no payload captured at all is a gap of its own.
    let data = vec![7u8; 300];
    let mut h = StreamHalf::default();
    h.on_syn(0);
    let mut raw: Vec<(u64, usize, u64, bool)> = Vec::new();
    let mut emit = |_: Stamp, ev: StreamEvent<'_>| match ev {
        StreamEvent::Data { offset, bytes, cut } => raw.push((offset, bytes.len(), cut, true)),
        StreamEvent::Gap { offset, len, reason } => {
            assert_eq!(reason, GapReason::Snaplen);
            raw.push((offset, 0, len, false))
        }
        _ => {}
    };
    h.on_data(1, 100, &data[..10], None, at(0), &mut emit);
    h.on_data(101, 100, &data[100..200], None, at(1), &mut emit);
    h.on_data(201, 100, &[], None, at(2), &mut emit);
    assert_eq!(raw, vec![(0, 10, 90, true), (100, 100, 0, true), (200, 0, 100, false)]);
    assert_eq!(h.stats.gaps, 2);
    assert_eq!(h.stats.bytes_snaplen, 190);
}
