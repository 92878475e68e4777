//! Byte-literal tests: the worked hex examples of shared/design/wire-format.md §11, parsed
//! field by field and emitted back byte for byte. One comment per field.

use lnetcap_lnet::nid::Nid;
use lnetcap_lnet::wire::{conn_type, consts::*, Connreq, Hello, KsockHdr, LnetDetail, LnetHdr, PtlrpcInfo, Wmd, NID4};

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
}

fn nid(s: &str) -> Nid {
    Nid::parse(s).unwrap()
}

#[test]
fn test_connreq_v1() {
    let b = hex("00 71 ce ac  01 00 00 00  01 00 00 0a 00 00 02 00");
    let c = Connreq::parse(&b).unwrap();
    assert_eq!(c.version, 1); // acr_version
    assert_eq!(c.target_nid, nid("10.0.0.1@tcp")); // acr_nid: the passive node wanted
    assert!(!c.flip); // LE sender
    assert_eq!(Connreq::emit(&c.target_nid), b);
}

#[test]
fn test_connreq_v2_ipv6() {
    let b = hex("00 71 ce ac 02 00 00 00 0c 02 00 00 fd 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01");
    let c = Connreq::parse(&b).unwrap();
    assert_eq!(c.version, 2); // LNET_PROTO_ACCEPTOR_VERSION_16
    assert_eq!(c.target_nid, nid("fd00::1@tcp")); // struct lnet_nid, fixed byte order
    assert_eq!(Connreq::emit(&c.target_nid), b);
}

#[test]
fn test_connreq_big_endian_sender() {
    // Same request from a BE host: magic and version byte-swapped, NID in sender order.
    let b = hex("ac ce 71 00  00 00 00 01  00 02 00 00 0a 00 00 01");
    let c = Connreq::parse(&b).unwrap();
    assert!(c.flip);
    assert_eq!(c.target_nid, nid("10.0.0.1@tcp"));
}

#[test]
fn test_hello_v3() {
    let b = hex("63 69 72 45 03 00 00 00 02 00 00 0a 00 00 02 00
         01 00 00 0a 00 00 02 00 39 30 00 00 00 00 00 00
         00 00 f0 e1 d2 c3 a5 17 00 00 00 00 00 00 00 00
         01 00 00 00 00 00 00 00");
    let h = Hello::parse(&b).unwrap();
    assert_eq!(h.version, 3); // kshm_version
    assert_eq!(h.src_nid, nid("10.0.0.2@tcp")); // kshm_src_nid
    assert_eq!(h.dst_nid, Some(nid("10.0.0.1@tcp"))); // kshm_dst_nid
    assert_eq!(h.src_pid, PID_LUSTRE); // kshm_src_pid 12345
    assert_eq!(h.dst_pid, 0); // kshm_dst_pid, unused
    assert_eq!(h.src_incarnation, 0x17A5_C3D2_E1F0_0000); // kshm_src_incarnation
    assert_eq!(h.dst_incarnation, 0); // unused
    assert_eq!(h.conn_type, conn_type::CONTROL); // kshm_ctype
    assert!(h.ips.is_empty()); // kshm_nips 0
    assert_eq!(h.emit(), b);
}

#[test]
fn test_hello_v1() {
    let b = hex("ed 0d bc ee 01 00 00 00 02 00 00 0a 00 00 02 00
         00 00 00 00 39 30 00 00 04 00 00 00 00 00 00 00
         11 11 00 00 00 00 00 00 01 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00");
    let h = Hello::parse(&b).unwrap();
    assert_eq!(h.version, 1); // TCP magic, major 1 minor 0
    assert_eq!(h.src_nid, nid("10.0.0.2@tcp")); // src_nid at +8
    assert_eq!(h.dst_pid, 0); // dest_pid at +16
    assert_eq!(h.src_pid, PID_LUSTRE); // src_pid at +20
    assert_eq!(h.src_incarnation, 0x1111); // msg.hello.incarnation at +32
    assert_eq!(h.conn_type, conn_type::CONTROL); // msg.hello.type at +40
    assert_eq!(h.dst_nid, None); // V1 has no dst_nid
    assert_eq!(h.emit(), b);
}

#[test]
fn test_hello_v4() {
    let b = hex("63 69 72 45 04 00 00 00 0c 02 00 00 fd 00 00 00
         00 00 00 00 00 00 00 00 00 00 00 02 0c 02 00 00
         fd 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01
         39 30 00 00 00 00 00 00 11 11 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00");
    let h = Hello::parse(&b).unwrap();
    assert_eq!(h.version, 4); // KSOCK_PROTO_V4
    assert_eq!(h.src_nid, nid("fd00::2@tcp")); // struct lnet_nid at +8
    assert_eq!(h.dst_nid, Some(nid("fd00::1@tcp"))); // struct lnet_nid at +28
    assert_eq!(h.src_pid, PID_LUSTRE); // +48
    assert_eq!(h.src_incarnation, 0x1111); // +56
    assert_eq!(h.conn_type, conn_type::CONTROL); // +72
    assert_eq!(h.emit(), b);
}

#[test]
fn test_ksock_lnet_put_obd_ping() {
    let hdr = hex("c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
         00 00 00 00 00 00 00 00 01 00 00 0a 00 00 02 00
         02 00 00 0a 00 00 02 00 39 30 00 00 39 30 00 00
         01 00 00 00 e0 00 00 00 ff ff ff ff ff ff ff ff
         ff ff ff ff ff ff ff ff 00 10 00 00 00 56 06 00
         00 00 00 00 00 00 00 00 1c 00 00 00 00 00 00 00");
    let k = KsockHdr::parse(&hdr, false).unwrap();
    assert_eq!(k.msg_type, KSOCK_LNET); // ksm_type 0xC1
    assert_eq!(k.csum, 0); // ksm_csum
    assert_eq!(k.zc_req_cookie, 0); // cookie0
    assert_eq!(k.zc_ack_cookie, 0); // cookie1
    let h = LnetHdr::parse(&hdr[24..], NID4).unwrap();
    assert_eq!(h.dest_nid, nid("10.0.0.1@tcp")); // dest_nid
    assert_eq!(h.src_nid, nid("10.0.0.2@tcp")); // src_nid
    assert_eq!((h.dest_pid, h.src_pid), (PID_LUSTRE, PID_LUSTRE)); // pids
    assert_eq!(h.msg_type, LNET_PUT); // type PUT
    assert_eq!(h.payload_length, 224); // payload_length
    assert_eq!(
        h.detail,
        Some(LnetDetail::Put {
            ack_wmd: Wmd::NONE,                // no ACK wanted
            match_bits: 0x0006_5600_0000_1000, // = XID
            hdr_data: 0,                       // hdr_data
            ptl_index: 28,                     // OST_REQUEST_PORTAL
            offset: 0,                         // offset
        })
    );
    let mut back = Vec::new();
    k.emit(&mut back);
    h.emit(NID4, &mut back);
    assert_eq!(back, hdr);

    let payload = hex("01 00 00 00 00 00 00 00 d3 0b d0 0b 00 04 00 00
         00 00 00 00 03 00 00 00 00 00 00 00 00 00 00 00
         b8 00 00 00 00 00 00 00");
    let mut p = payload.clone();
    // ptlrpc_body at 40: pb_type 4711 at +8, pb_version 0x00010003 at +12, pb_opc 400 at +16.
    p.resize(40 + 184, 0);
    p[48..52].copy_from_slice(&[0x67, 0x12, 0, 0]);
    p[52..56].copy_from_slice(&0x0001_0003u32.to_le_bytes());
    p[56..60].copy_from_slice(&[0x90, 0x01, 0, 0]);
    let r = PtlrpcInfo::parse(&p).unwrap();
    assert_eq!(r.bufcount, 1); // lm_bufcount
    assert_eq!(r.secflvr, 0); // null flavour
    assert_eq!(r.lm_flags, 3); // AT_SUPPORT | CKSUM_INCOMPAT18
    assert_eq!(r.body_len, Some(184)); // lm_buflens[0]
    assert_eq!(r.pb_type, Some(PTL_RPC_MSG_REQUEST));
    assert_eq!(r.pb_version, Some(0x0001_0003));
    assert_eq!(r.opc, Some(400)); // OBD_PING
    assert_eq!(lnetcap_lnet::names::opc_name(400), Some("OBD_PING"));
}

#[test]
fn test_noops() {
    let keepalive = hex("c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00");
    let k = KsockHdr::parse(&keepalive, false).unwrap();
    assert_eq!(k.msg_type, KSOCK_NOOP);
    assert_eq!(k.zc_ack_cookie, 1); // SOCKNAL_KEEPALIVE_PING
    let zc = hex("c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00");
    let k = KsockHdr::parse(&zc, false).unwrap();
    assert_eq!(k.acked_cookies(), vec![5]); // one cookie
                                            // A range 4..6 and a pair (A > B).
    let range = KsockHdr { msg_type: KSOCK_NOOP, csum: 0, zc_req_cookie: 4, zc_ack_cookie: 6 };
    assert_eq!(range.acked_cookies(), vec![4, 5, 6]);
    let pair = KsockHdr { msg_type: KSOCK_NOOP, csum: 0, zc_req_cookie: 9, zc_ack_cookie: 7 };
    assert_eq!(pair.acked_cookies(), vec![7, 9]);
    let mut back = Vec::new();
    k.emit(&mut back);
    assert_eq!(back, zc);
}

#[test]
fn test_truncation_is_an_exact_error() {
    let put = {
        let mut v = Vec::new();
        KsockHdr { msg_type: KSOCK_LNET, csum: 0, zc_req_cookie: 0, zc_ack_cookie: 0 }.emit(&mut v);
        v
    };
    for n in 0..24 {
        assert_eq!(
            KsockHdr::parse(&put[..n], false),
            Err(lnetcap_lnet::wire::WireError::Truncated { structure: "ksock_msg_hdr", needed: 24, got: n })
        );
    }
    let c = Connreq::emit(&nid("10.0.0.1@tcp"));
    for n in 8..16 {
        assert_eq!(
            Connreq::parse(&c[..n]),
            Err(lnetcap_lnet::wire::WireError::Truncated { structure: "acceptor connreq", needed: 16, got: n })
        );
    }
}

/// The first 76 payload bytes of a selftest BRW request PUT at snaplen 128 (raw IP link,
/// 20-byte IP and 32-byte TCP headers with timestamps), as tcpdump -X shows them in
/// fixtures/lab/lst_write_rtt10_c8_pc8_snap128 (frame of 00:19:41.573336, stream offset 73).
const CUT_PUT: &str = "c1 00 00 00  00 00 00 00  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
    01 02 63 0a 00 00 02 00  01 01 63 0a 00 00 02 00  39 30 00 00  39 30 00 00  01 00 00 00  a0 00 00 00
    ff ff ff ff ff ff ff ff  ff ff ff ff ff ff ff ff  0b 00 00 00";

#[test]
fn test_lnet_header_cut_at_snaplen_128() {
    let b = hex(CUT_PUT);
    assert_eq!(b.len(), 76);
    let k = KsockHdr::parse(&b, false).unwrap();
    assert_eq!(k.msg_type, KSOCK_LNET); // c1 00 00 00
    assert_eq!((k.csum, k.zc_req_cookie, k.zc_ack_cookie), (0, 0, 0));
    let h = LnetHdr::parse(&b[24..], NID4).unwrap();
    assert_eq!(h.dest_nid, nid("10.99.2.1@tcp")); // 01 02 63 0a, net 0, lnd 2 (tcp)
    assert_eq!(h.src_nid, nid("10.99.1.1@tcp"));
    assert_eq!((h.dest_pid, h.src_pid), (12345, 12345)); // 0x3039: LNET_PID_LUSTRE
    assert_eq!(h.msg_type, LNET_PUT);
    assert_eq!(h.payload_length, 160); // a0: srpc_msg of a BRW request
                                       // PUT uses 40 union bytes; 20 were captured: no detail, but the handle and half the
                                       // match bits (11 = SRPC_SERVICE_BRW, the request portal's match bits).
    assert_eq!(h.detail, None);
    let cut = h.cut.unwrap();
    assert_eq!(cut.seen, 20);
    assert_eq!(cut.wmd, Some(Wmd { interface: u64::MAX, object: u64::MAX })); // no ACK wanted
    assert_eq!(cut.match_bits_lo, Some(11));
    // A REPLY's union is its 16-byte handle: 76 bytes hold it whole.
    let mut r = b.clone();
    r[48..52].copy_from_slice(&LNET_REPLY.to_le_bytes());
    let h = LnetHdr::parse(&r[24..], NID4).unwrap();
    assert_eq!(h.detail, Some(LnetDetail::Reply { dst_wmd: Wmd { interface: u64::MAX, object: u64::MAX } }));
    assert_eq!(h.cut, None);
    // One byte short of the payload length: not an LNet header at all.
    assert!(LnetHdr::parse(&b[24..55], NID4).is_err());
}

/// At snaplen 128 a header that starts mid-segment is past the captured bytes: framing is
/// lost there and found again at the next segment that starts with a header, even though
/// only 76 bytes of that header were captured (its NIDs must be ones the connection named).
#[test]
fn test_framer_resyncs_on_a_cut_header() {
    use lnetcap_lnet::framer::Framer;
    use lnetcap_lnet::message::{Body, LnetEvent};
    use lnetcap_tcp::{ConnId, Dir, Stamp};
    let b = hex(CUT_PUT);
    let whole = 24 + 72 + 160u64;
    let st = |frame| Stamp { frame, ts_ns: frame as i64 * 1000 };
    let mut f = Framer::new(ConnId(0), Dir::FromActive, false);
    let mut out = Vec::new();
    // Without known NIDs a cut header is too little evidence.
    f.on_data(0, &b, st(1), &mut out);
    assert_eq!(f.stats.resyncs, 0);
    f.on_gap(76, whole - 76, st(1), &mut out);
    f.known_nids = vec![nid("10.99.2.1@tcp"), nid("10.99.1.1@tcp")];
    // Now: message 1 at `whole`, cut; message 2 lost inside a gap; message 3 at a segment start.
    f.on_data(whole, &b, st(2), &mut out);
    assert_eq!(f.stats.resyncs, 1);
    f.on_gap(whole + 76, 2 * whole - 76, st(2), &mut out);
    f.on_data(3 * whole, &b, st(3), &mut out);
    f.on_gap(3 * whole + 76, whole - 76, st(3), &mut out);
    assert_eq!(f.stats.desyncs, 1); // message 2: its header in the gap (a mid-stream start is no desync)
    assert_eq!(f.stats.resyncs, 2);
    let msgs: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            LnetEvent::Message(m) => Some(m),
            _ => None,
        })
        .collect();
    // Messages 1 and 3 decoded from their cut headers, message 2 inferred between them.
    assert_eq!(
        msgs.iter().map(|m| (m.offset, m.inferred)).collect::<Vec<_>>(),
        vec![(whole, false), (2 * whole, true), (3 * whole, false)]
    );
    for m in &msgs {
        let Body::Lnet { hdr, .. } = &m.body else { panic!("not LNet") };
        assert_eq!((hdr.msg_type, hdr.payload_length, hdr.detail), (LNET_PUT, 160, None));
        assert_eq!(hdr.cut.unwrap().match_bits_lo, if m.inferred { None } else { Some(11) });
    }
}
