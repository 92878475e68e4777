//! Property tests of the wire layer: emit → parse is the identity, and every truncation of
//! a structure is an exact `Truncated` error (never a panic, never a wrong value).

use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::{hello_size, Connreq, Hello, LnetDetail, LnetHdr, WireError, Wmd, NID16, NID4};
use proptest::prelude::*;

fn nid4() -> impl Strategy<Value = Nid> {
    (any::<[u8; 4]>(), prop::sample::select(vec![2u8, 5, 13]), 0u16..4).prop_map(|(a, lnd, num)| {
        let mut addr = [0u8; 16];
        addr[..4].copy_from_slice(&a);
        Nid { size: 0, lnd, num, addr }
    })
}

fn nid16() -> impl Strategy<Value = Nid> {
    prop_oneof![nid4(), (any::<[u8; 16]>(), 0u16..4).prop_map(|(a, num)| Nid { size: 12, lnd: 2, num, addr: a })]
}

fn wmd() -> impl Strategy<Value = Wmd> {
    (any::<u64>(), any::<u64>()).prop_map(|(interface, object)| Wmd { interface, object })
}

fn detail() -> impl Strategy<Value = (u32, LnetDetail, u32)> {
    prop_oneof![
        (wmd(), any::<u64>(), 0u32..=(1 << 20)).prop_map(|(w, mb, ml)| (
            0,
            LnetDetail::Ack { dst_wmd: w, match_bits: mb, mlength: ml },
            0
        )),
        (wmd(), any::<u64>(), any::<u64>(), 0u32..64, any::<u32>(), 0u32..=(1 << 20)).prop_map(
            |(w, mb, hd, p, o, pl)| (
                1,
                LnetDetail::Put { ack_wmd: w, match_bits: mb, hdr_data: hd, ptl_index: p, offset: o },
                pl
            )
        ),
        (wmd(), any::<u64>(), 0u32..64, any::<u32>(), 0u32..=(1 << 20)).prop_map(|(w, mb, p, so, sl)| (
            2,
            LnetDetail::Get { return_wmd: w, match_bits: mb, ptl_index: p, src_offset: so, sink_length: sl },
            0
        )),
        (wmd(), 0u32..=(1 << 20)).prop_map(|(w, pl)| (3, LnetDetail::Reply { dst_wmd: w }, pl)),
    ]
}

proptest! {
    #[test]
    fn lnet_header_roundtrip(src in nid16(), dst in nid16(), pids in any::<(u32, u32)>(), d in detail(), v4 in any::<bool>()) {
        let (t, detail, pl) = d;
        let layout = if v4 { NID16 } else { NID4 };
        let (src, dst) = if v4 { (src, dst) } else { (Nid { size: 0, addr: { let mut a = [0; 16]; a[..4].copy_from_slice(&src.addr[..4]); a }, ..src }, Nid { size: 0, addr: { let mut a = [0; 16]; a[..4].copy_from_slice(&dst.addr[..4]); a }, ..dst }) };
        let h = LnetHdr { dest_nid: dst, src_nid: src, dest_pid: pids.0, src_pid: pids.1, msg_type: t, payload_length: pl, detail: Some(detail), cut: None };
        let mut b = Vec::new();
        h.emit(layout, &mut b);
        prop_assert_eq!(b.len(), layout.len);
        prop_assert_eq!(LnetHdr::parse(&b, layout).unwrap(), h);
        // A header cut after payload_length still gives the common fields; the union whole
        // once the bytes its type uses are in (the rest is padding), else what the cut shows:
        // the first handle from 16 union bytes, the match bits' low half from 20.
        let used = lnetcap_lnet::wire::union_used(t);
        for n in layout.plen_off + 4..layout.len {
            let p = LnetHdr::parse(&b[..n], layout).unwrap();
            let seen = n - layout.union_off.min(n);
            prop_assert_eq!(p.payload_length, pl);
            prop_assert_eq!((p.dest_nid, p.src_nid, p.msg_type), (dst, src, t));
            if seen >= used {
                prop_assert_eq!(p.detail, Some(detail));
                prop_assert_eq!(p.cut, None);
                continue;
            }
            prop_assert_eq!(p.detail, None);
            let (w, mb) = match detail {
                LnetDetail::Put { ack_wmd, match_bits, .. } => (Some(ack_wmd), Some(match_bits)),
                LnetDetail::Get { return_wmd, match_bits, .. } => (Some(return_wmd), Some(match_bits)),
                LnetDetail::Ack { dst_wmd, match_bits, .. } => (Some(dst_wmd), Some(match_bits)),
                _ => (None, None),
            };
            let c = p.cut;
            prop_assert_eq!(c.is_some(), seen > 0);
            let c = c.unwrap_or_default();
            prop_assert_eq!(c.wmd, w.filter(|_| seen >= 16));
            prop_assert_eq!(c.match_bits_lo, mb.filter(|_| seen >= 20).map(|m| m as u32));
        }
        for n in 0..layout.plen_off + 4 {
            prop_assert_eq!(LnetHdr::parse(&b[..n], layout), Err(WireError::Truncated { structure: "lnet_hdr", needed: layout.plen_off + 4, got: n }));
        }
    }

    #[test]
    fn hello_roundtrip(version in 1u32..=4, src in nid4(), dst in nid4(), pid in any::<u32>(), inc in any::<u64>(), ct in 0u32..4, nips in 0usize..4) {
        let (src, dst) = if version == 4 { (Nid { size: 12, ..src }, Nid { size: 12, ..dst }) } else { (src, dst) };
        let h = Hello {
            version, flip: false, src_nid: src, dst_nid: (version > 1).then_some(dst), src_pid: pid, dst_pid: 0,
            src_incarnation: inc, dst_incarnation: 0, conn_type: ct,
            ips: if version == 4 { vec![] } else { (0..nips as u32).map(|i| 0x0a00_0001 + i).collect() },
        };
        let b = h.emit();
        prop_assert_eq!(hello_size(&b).unwrap(), Some(b.len()));
        prop_assert_eq!(Hello::parse(&b).unwrap(), h);
        for n in 0..b.len() {
            // Every prefix either needs more bytes or is an exact truncation error.
            match Hello::parse(&b[..n]) {
                Err(WireError::Truncated { got, .. }) => prop_assert_eq!(got, n),
                other => panic!("prefix {n} of {} parsed as {other:?}", b.len()),
            }
        }
    }

    #[test]
    fn connreq_roundtrip(target in nid16()) {
        let b = Connreq::emit(&target);
        let c = Connreq::parse(&b).unwrap();
        prop_assert_eq!(c.target_nid, target);
        prop_assert_eq!(c.version, if target.is_nid4() { 1 } else { 2 });
        for n in 0..b.len() {
            let truncated = matches!(Connreq::parse(&b[..n]), Err(WireError::Truncated { .. }));
            prop_assert!(truncated, "prefix {} not a truncation error", n);
        }
    }

    #[test]
    fn parsers_never_panic_on_random_bytes(b in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Connreq::parse(&b);
        let _ = Hello::parse(&b);
        let _ = hello_size(&b);
        let _ = LnetHdr::parse(&b, NID4);
        let _ = LnetHdr::parse(&b, NID16);
        let _ = lnetcap_lnet::wire::PtlrpcInfo::parse(&b);
        let _ = lnetcap_lnet::wire::SrpcInfo::parse(&b);
        let _ = lnetcap_lnet::wire::PingInfo::parse(&b);
        let _ = lnetcap_lnet::framer::find_resync(&b, None, &[]);
        let _ = lnetcap_lnet::framer::looks_like_lnet(&b, true);
    }
}
