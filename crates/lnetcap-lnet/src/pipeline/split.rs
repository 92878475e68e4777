//! The pipeline cut in two for a parallel run. The reader keeps a pipeline for the
//! front of [`Pipeline::push`] over every packet (frame accounting, the clock, the series
//! bound, link decoding, the sweep schedule) and routes each TCP segment by its unordered
//! 4-tuple; each worker keeps a pipeline for the back (flow table, TCP behaviour,
//! framing) over its share, sweeping when told. At the end the reader's pipeline absorbs
//! the workers' tables and decoders, renumbered in the order of first packets, and is the
//! pipeline a single-threaded run would have had.

use lnetcap_capture::{decode_packet, tcp_tuple, NotTcp, Packet};
use lnetcap_tcp::{ConnKey, Endpoint, FlowTable, Stamp};

use super::{Decoder, Pipeline};
use crate::message::LnetEvent;
use crate::pipeline::DecodeConfig;

/// What the reader learned of one packet.
#[derive(Debug)]
pub struct Front {
    /// Its frame and (clock-corrected) time.
    pub stamp: Stamp,
    /// A TCP segment (or what looks like one): the hash of its unordered 4-tuple, by
    /// which it is routed.
    pub route: Option<u64>,
    /// The flow tables sweep before this packet.
    pub sweep: bool,
    /// Why it is not a TCP segment, when it is not other traffic either.
    pub not_decodable: Option<NotTcp>,
}

impl Pipeline {
    /// The reader's part of [`Pipeline::push`] for one packet: frame, clock, series bound,
    /// sweep schedule, and the route. A packet that shows a TCP tuple where
    /// `decode_packet` reads one is routed undecoded (its worker decodes it, and counts it
    /// if it is not TCP after all); any other is decoded here. Inlined into the reading
    /// loop, as [`Pipeline::take_frame`] is.
    #[inline(always)]
    pub fn front(&mut self, pkt: &Packet<'_>) -> Front {
        let (stamp, sweep) = self.take_frame(pkt);
        let mut front = Front { stamp, route: None, sweep, not_decodable: None };
        if let Some(t) = tcp_tuple(pkt.linktype, pkt.data) {
            front.route = Some(ConnKey::route_words(t.src, t.src_port, t.dst, t.dst_port));
            return front;
        }
        match decode_packet(pkt.linktype, pkt.data, pkt.origlen) {
            Ok(seg) => {
                let (src, dst) =
                    (Endpoint { ip: seg.ip.src, port: seg.src_port }, Endpoint { ip: seg.ip.dst, port: seg.dst_port });
                front.route = Some(ConnKey::route(src, dst));
            }
            Err(e) => front.not_decodable = self.count_not_tcp(e),
        }
        front
    }

    /// Decodes a packet: a TCP segment goes through the flow table into the decoder; any
    /// other frame is counted. Returns why it is not decodable, if it is not. Inlined
    /// into its two callers (one a packet each).
    #[inline(always)]
    pub(super) fn decode_and_process(&mut self, pkt: &Packet<'_>, stamp: Stamp) -> Option<NotTcp> {
        // Matched in place: moving the segment out of the result copied it (6 instructions
        // a packet, 1.4 M of `decode` on the budget's header-only capture).
        let decoded = decode_packet(pkt.linktype, pkt.data, pkt.origlen);
        match &decoded {
            Ok(seg) => {
                // Where the captured payload lies in a capture that can be read again: the
                // flow table keeps that place instead of a copy of the bytes.
                let origin = if seg.payload.is_empty() {
                    None
                } else {
                    pkt.origin().zip(payload_at(pkt.data, seg.payload)).map(|(o, d)| o.advanced(d))
                };
                let o = self.table.process_from(seg, origin, stamp, &mut self.dec);
                let st = self.dec.state(o.conn);
                if seg.payload_len > 0 {
                    st.frames_data += 1;
                } else {
                    st.frames_control += 1;
                }
                None
            }
            Err(_) => decoded.err().and_then(|e| self.count_not_tcp(e)),
        }
    }

    /// A frame that is not a TCP segment: other traffic, or undecodable (returned).
    fn count_not_tcp(&mut self, e: NotTcp) -> Option<NotTcp> {
        if e.is_other_traffic() {
            self.other_frames += 1;
            return None;
        }
        *self.undecodable.entry(super::undecodable_reason(&e)).or_default() += 1;
        Some(e)
    }

    /// A worker's part of [`Pipeline::push`]: a packet the reader routed here, at the
    /// reader's `stamp`. Returns why it is not decodable, if it is not (it is counted).
    pub fn push_routed(&mut self, pkt: &Packet<'_>, stamp: Stamp, out: &mut Vec<LnetEvent>) -> Option<NotTcp> {
        self.last = stamp;
        let why = self.decode_and_process(pkt, stamp);
        self.drain(out);
        why
    }

    /// A sweep the reader told (its events to `out`).
    pub fn sweep_at(&mut self, now: i64, out: &mut Vec<LnetEvent>) {
        self.table.sweep_at(now, &mut self.dec);
        self.drain(out);
    }

    /// The series interval the reader reached: coarsens to it.
    pub fn follow_series(&mut self, ns: i64) {
        if ns > self.table.series_interval() {
            self.table.coarsen_series(ns);
        }
    }

    /// The end of the input, at the reader's last stamp.
    pub fn finish_at(&mut self, last: Stamp, out: &mut Vec<LnetEvent>) {
        self.last = last;
        self.finish(out);
    }

    /// Frame and time of the latest packet.
    pub fn last_stamp(&self) -> Stamp {
        self.last
    }

    /// Connections opened so far (the next one gets this id).
    pub fn connections_opened(&self) -> usize {
        self.table.len()
    }

    /// The reader's pipeline takes the workers' flow tables and decoders: `ids` maps each
    /// worker's connection ids to the ids of the whole run (order of first packets),
    /// `total` connections in all.
    pub fn absorb(&mut self, parts: Vec<(Pipeline, Vec<u32>)>, total: usize) {
        let mut tables = Vec::new();
        let mut decs = Vec::new();
        for (p, ids) in parts {
            for (k, v) in p.kinds.iter() {
                self.kinds.add(k, v);
            }
            self.other_frames += p.other_frames;
            for (k, v) in p.undecodable {
                *self.undecodable.entry(k).or_default() += v;
            }
            tables.push((p.table, ids.clone()));
            decs.push((p.dec, ids));
        }
        let cfg = self.dec.cfg.clone();
        self.table = FlowTable::merged(tables, total);
        self.dec = Decoder::merged(cfg, decs, total);
    }
}

/// Where `payload` starts in `data`, when it lies within it (as the link decoding's
/// slices do).
#[inline(always)]
fn payload_at(data: &[u8], payload: &[u8]) -> Option<usize> {
    let d = (payload.as_ptr() as usize).checked_sub(data.as_ptr() as usize)?;
    (d.checked_add(payload.len())? <= data.len()).then_some(d)
}

impl Decoder {
    fn merged(cfg: DecodeConfig, parts: Vec<(Decoder, Vec<u32>)>, total: usize) -> Decoder {
        let mut out = Decoder::new(cfg);
        out.conns = (0..total).map(|_| None).collect();
        for (d, ids) in parts {
            for (local, st) in d.conns.into_iter().enumerate() {
                out.conns[ids[local] as usize] = st;
            }
            out.folded.connections += d.folded.connections;
            out.folded.frames_data += d.folded.frames_data;
            out.folded.frames_control += d.folded.frames_control;
            out.folded_other_frames += d.folded_other_frames;
            out.folded_ids.extend(d.folded_ids.iter().map(|&l| ids[l as usize]));
        }
        out.folded_ids.sort_unstable();
        out
    }
}
