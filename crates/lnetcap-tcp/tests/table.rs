//! FlowTable: a hole in a connection that receives no more segments still expires once
//! capture time (brought by other connections) passes the hole's time bound.

use std::net::{IpAddr, Ipv4Addr};

use lnetcap_capture::{IpPair, TcpFlags, TcpSegment};
use lnetcap_tcp::limits::MAX_HOLE_WAIT_NS;
use lnetcap_tcp::{ConnId, Connection, Dir, FlowTable, GapReason, Stamp, StreamEvent, StreamSink, Verdict};

#[derive(Debug, PartialEq)]
enum Ev {
    Data(u32, Dir, u64, u64),
    Gap(u32, Dir, u64, u64, GapReason),
}

#[derive(Default)]
struct Rec(Vec<Ev>);

impl StreamSink for Rec {
    fn on_open(&mut self, _: &Connection) -> Verdict {
        Verdict::Follow
    }
    fn on_event(&mut self, conn: &Connection, dir: Dir, _: Stamp, ev: StreamEvent<'_>) -> Verdict {
        let cut = ev.cut_gap();
        match ev {
            StreamEvent::Data { offset, bytes, .. } => {
                self.0.push(Ev::Data(conn.id.0, dir, offset, bytes.len() as u64));
                if let Some((offset, len)) = cut {
                    self.0.push(Ev::Gap(conn.id.0, dir, offset, len, GapReason::Snaplen));
                }
            }
            StreamEvent::Gap { offset, len, reason } => self.0.push(Ev::Gap(conn.id.0, dir, offset, len, reason)),
            _ => {}
        }
        Verdict::Follow
    }
}

fn seg(src: (u8, u16), dst: (u8, u16), seq: u32, ack: u32, flags: u8, payload: &[u8]) -> TcpSegment<'_> {
    TcpSegment {
        ip: IpPair { src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, src.0)), dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, dst.0)) },
        src_port: src.1,
        dst_port: dst.1,
        seq,
        ack,
        flags: TcpFlags(flags),
        window: 1000,
        options: &[],
        payload,
        payload_len: payload.len() as u32,
    }
}

fn at(frame: u64, ts_ns: i64) -> Stamp {
    Stamp { frame, ts_ns }
}

#[test]
fn a_hole_of_a_silent_connection_expires_with_capture_time() {
    const ACK: u8 = TcpFlags::ACK;
    let (client, server, other) = ((2u8, 1023u16), (1u8, 988u16), (3u8, 1023u16));
    let data = [7u8; 300];
    let mut t = FlowTable::new(&[988]);
    let mut sink = Rec::default();
    t.process(&seg(client, server, 999, 0, TcpFlags::SYN, &[]), at(1, 0), &mut sink);
    t.process(&seg(server, client, 4999, 1000, TcpFlags::SYN | ACK, &[]), at(2, 10), &mut sink);
    t.process(&seg(client, server, 1000, 5000, ACK, &[]), at(3, 20), &mut sink);
    t.process(&seg(client, server, 1000, 5000, ACK, &data[..100]), at(4, 30), &mut sink);
    // 100..200 was dropped before the capture point: 200..300 waits for it; the receiver's
    // duplicate ACK stays at the hole.
    t.process(&seg(client, server, 1200, 5000, ACK, &data[200..]), at(5, 40), &mut sink);
    t.process(&seg(server, client, 5000, 1100, ACK, &[]), at(6, 50), &mut sink);
    // Another connection's packets bring the capture time on, up to the bound.
    t.process(&seg(other, server, 77, 0, TcpFlags::SYN, &[]), at(7, 40 + MAX_HOLE_WAIT_NS), &mut sink);
    assert_eq!(sink.0, vec![Ev::Data(0, Dir::FromActive, 0, 100)]);
    assert!(t.half(ConnId(0), Dir::FromActive).unwrap().has_pending());
    // Well past it (the table looks at waiting connections every so often).
    t.process(&seg(other, server, 77, 0, TcpFlags::SYN, &[]), at(8, 40 + 2 * MAX_HOLE_WAIT_NS), &mut sink);
    assert_eq!(
        sink.0,
        vec![
            Ev::Data(0, Dir::FromActive, 0, 100),
            Ev::Gap(0, Dir::FromActive, 100, 100, GapReason::CaptureLoss),
            Ev::Data(0, Dir::FromActive, 200, 100),
        ]
    );
    assert!(!t.half(ConnId(0), Dir::FromActive).unwrap().has_pending());
}

/// Past `with_max_open` live connections the table retires one per connection it opens:
/// the least recently active of the candidates it chose (the idlest eighth), skipping a
/// candidate that carried a packet after it was chosen.
#[test]
fn a_full_table_retires_the_idlest_one_at_a_time() {
    let mut t = FlowTable::new(&[988]).with_max_open(16);
    let mut sink = Rec::default();
    let server = (1u8, 988u16);
    let client = |i: u16| (2u8, 2000 + i);
    let mut frame = 0;
    let mut send = |t: &mut FlowTable, sink: &mut Rec, i: u16| {
        frame += 1;
        t.process(&seg(client(i), server, 1, 0, TcpFlags::SYN, &[]), at(frame, frame as i64 * 1000), sink);
    };
    for i in 0..16 {
        send(&mut t, &mut sink, i);
    }
    assert_eq!((t.live(), t.retirements().retired), (16, 0));
    // Connection 0 speaks again: 1 and 2 are now the idlest.
    send(&mut t, &mut sink, 0);
    // The 17th connection: the candidates are the idlest eighth (1, 2); 1 goes.
    send(&mut t, &mut sink, 16);
    assert_eq!((t.live(), t.retirements().retired), (16, 1));
    let live = |t: &FlowTable, id: u32| t.half(ConnId(id), Dir::FromActive).is_some();
    assert!(live(&t, 0) && !live(&t, 1) && live(&t, 2));
    // 2, the candidate left, speaks before the next connection opens: it is passed over
    // and the next choice (3, 4) gives 3.
    send(&mut t, &mut sink, 2);
    send(&mut t, &mut sink, 17);
    assert_eq!((t.live(), t.retirements().retired), (16, 2));
    assert!(live(&t, 2) && !live(&t, 3) && live(&t, 4));
    // Then 4, still a candidate, without choosing again.
    send(&mut t, &mut sink, 18);
    assert_eq!((t.live(), t.retirements().retired), (16, 3));
    assert!(!live(&t, 4) && live(&t, 5));
    // A retired connection's record is kept (the sink did not fold it).
    assert!(t.connection(ConnId(1)).is_some());
}

/// The limit is kept per partition of the connections (by the hash of the 4-tuple,
/// `partition_of`): a full partition retires its own idlest, whatever the others hold,
/// so that a parallel run, whose shares hold whole partitions, retires the same ones.
#[test]
fn a_full_partition_retires_its_own_idlest() {
    use lnetcap_tcp::limits::{CONNECTION_PARTITIONS, MAX_OPEN_CONNECTIONS};
    use lnetcap_tcp::{partition_of, ConnKey, Endpoint};
    let per = MAX_OPEN_CONNECTIONS / CONNECTION_PARTITIONS;
    let server = (1u8, 988u16);
    let ep = |(h, port): (u8, u16)| Endpoint { ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, h)), port };
    let in_part = |p: usize| (1024u16..).filter(move |&c| partition_of(ConnKey::route(ep((2, c)), ep(server))) == p);
    // Partition 0 gets its limit and 8 more, partition 1 a few; partition 0 first.
    let zero: Vec<u16> = in_part(0).take(per + 8).collect();
    let one: Vec<u16> = in_part(1).take(10).collect();
    let mut t = FlowTable::new(&[988]);
    let mut sink = Rec::default();
    let mut frame = 0u64;
    let mut ids = std::collections::HashMap::new();
    for &c in zero[..per].iter().chain(&one).chain(&zero[per..]) {
        frame += 1;
        let o = t.process(&seg((2, c), server, 1, 0, TcpFlags::SYN, &[]), at(frame, frame as i64 * 1000), &mut sink);
        ids.insert(c, o.conn);
    }
    assert_eq!((t.live(), t.retirements().retired), (per + 10, 8));
    let live = |t: &FlowTable, c: u16| t.half(ids[&c], Dir::FromActive).is_some();
    // The 8 retired are partition 0's first (its idlest); partition 1 kept every one.
    assert!(zero[..8].iter().all(|&c| !live(&t, c)));
    assert!(zero[8..].iter().all(|&c| live(&t, c)));
    assert!(one.iter().all(|&c| live(&t, c)));
}
