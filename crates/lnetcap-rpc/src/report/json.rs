//! [`RpcRecord`] as one JSON object (an `analyze --rpcs` line), through the direct writer
//! of [`lnetcap_lnet::jsonw`]: byte for byte what serde_json writes for the derive (an
//! absent value is `null`, as the derive writes it), a fifth of its instructions.

use lnetcap_lnet::json_key as k;
use lnetcap_lnet::jsonw::{float, integer, string, JsonObj};

use super::{Phases, RpcRecord};

impl RpcRecord {
    /// Appends the record as one compact JSON object (no newline): byte for byte what
    /// `serde_json::to_writer(out, self)` writes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = JsonObj::open(out, "\"schema_version\":");
        integer(o.out(), self.schema_version);
        o.int(k!("id"), self.id);
        o.opt_str(k!("file"), self.file.as_deref());
        o.str(k!("client_nid"), &self.client_nid);
        o.str(k!("server_nid"), &self.server_nid);
        o.str(k!("kind"), self.kind.as_str());
        o.hex_or_null(k!("xid"), self.xid.map(|h| h.0));
        o.int_or_null(k!("opc"), self.opc);
        o.str_or_null(k!("opc_name"), self.opc_name.as_deref());
        o.str_or_null(k!("op"), self.op);
        o.int_or_null(k!("portal"), self.portal);
        o.int(k!("bytes"), self.bytes);
        o.int(k!("bulk_messages"), self.bulk_messages);
        o.int_or_null(k!("t_start_ns"), self.t_start_ns);
        o.int_or_null(k!("t_req_end_ns"), self.t_req_end_ns);
        o.int_or_null(k!("t_bulk_start_ns"), self.t_bulk_start_ns);
        o.int_or_null(k!("t_bulk_end_ns"), self.t_bulk_end_ns);
        o.int_or_null(k!("t_reply_ns"), self.t_reply_ns);
        o.int_or_null(k!("t_end_ns"), self.t_end_ns);
        o.int_or_null(k!("t_reply_ack_ns"), self.t_reply_ack_ns);
        o.f64_or_null(k!("latency_us"), self.latency_us);
        o.f64_or_null(k!("client_latency_us"), self.client_latency_us);
        o.key(k!("phases"));
        self.phases.write_json(o.out());
        o.int(k!("early_replies"), self.early_replies);
        o.int(k!("resends"), self.resends);
        o.int_or_null(k!("status"), self.status);
        o.int_or_null(k!("service_time_s"), self.service_time_s);
        o.str_or_null(k!("jobid"), self.jobid.as_deref());
        o.bool(k!("partial"), self.partial);
        o.key(k!("missing"));
        let out = o.out();
        out.push(b'[');
        for (i, m) in self.missing.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(out, m.as_str());
        }
        out.push(b']');
        o.int(k!("first_frame"), self.first_frame);
        o.close();
    }
}

impl Phases {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = JsonObj::open(out, "\"request_us\":");
        float(o.out(), self.request_us);
        o.f64_or_null(k!("server_wait_us"), self.server_wait_us);
        o.f64_or_null(k!("bulk_us"), self.bulk_us);
        o.f64_or_null(k!("server_us"), self.server_us);
        o.f64_or_null(k!("reply_us"), self.reply_us);
        o.close();
    }
}

#[cfg(test)]
mod tests {
    use lnetcap_lnet::record::Hex;
    use proptest::option::of;
    use proptest::prelude::*;

    use super::super::{Missing, RpcKind};
    use super::*;

    fn ours(r: &RpcRecord) -> String {
        let mut v = Vec::new();
        r.write_json(&mut v);
        String::from_utf8(v).unwrap()
    }

    /// Every field given (no `..Default`: a field added to the record fails to compile
    /// here until it is added, and then the comparison fails until the writer has it).
    fn record(s: &str, n: u64, f: Option<f64>, missing: Vec<Missing>) -> RpcRecord {
        let t = Some(n as i64);
        RpcRecord {
            schema_version: 1,
            id: n,
            file: Some(format!("{s}.pcap")),
            client_nid: s.into(),
            server_nid: "10.0.2.1@o2ib".into(),
            kind: RpcKind::LstBrw,
            xid: Some(Hex(n)),
            opc: Some(4),
            opc_name: Some(s.to_string().into()),
            op: Some("write"),
            portal: Some(6),
            bytes: n,
            bulk_messages: 3,
            t_start_ns: t,
            t_req_end_ns: t.map(|x| -x),
            t_bulk_start_ns: Some(i64::MIN),
            t_bulk_end_ns: Some(i64::MAX),
            t_reply_ns: t,
            t_end_ns: t,
            t_reply_ack_ns: t,
            latency_us: f,
            client_latency_us: f.map(|x| x * 3.0),
            phases: Phases {
                request_us: f,
                server_wait_us: Some(0.5),
                bulk_us: f.map(|x| -x),
                server_us: Some(1e300),
                reply_us: Some(f64::NAN),
            },
            early_replies: 1,
            resends: 2,
            status: Some(-110),
            service_time_s: Some(9),
            jobid: Some(s.to_string()),
            partial: true,
            missing,
            first_frame: n,
        }
    }

    /// Every field that can be absent, absent.
    fn bare(mut r: RpcRecord) -> RpcRecord {
        r.file = None;
        r.xid = None;
        r.opc = None;
        r.opc_name = None;
        r.op = None;
        r.portal = None;
        (r.t_start_ns, r.t_req_end_ns, r.t_bulk_start_ns, r.t_bulk_end_ns) = (None, None, None, None);
        (r.t_reply_ns, r.t_end_ns, r.t_reply_ack_ns) = (None, None, None);
        (r.latency_us, r.client_latency_us) = (None, None);
        r.phases = Phases::default();
        (r.status, r.service_time_s, r.jobid) = (None, None, None);
        r.missing.clear();
        r
    }

    #[test]
    fn test_rpc_json_matches_serde_on_full_and_bare_records() {
        let all = vec![Missing::Bulk, Missing::ReplyAck, Missing::XidHighBits, Missing::Timeout];
        for r in [record("10.0.1.1@tcp", 42, Some(1234.5), all.clone()), bare(record("x", 0, None, all))] {
            assert_eq!(ours(&r), serde_json::to_string(&r).unwrap());
        }
    }

    fn kinds() -> impl Strategy<Value = RpcKind> {
        proptest::sample::select(vec![
            RpcKind::Ptlrpc,
            RpcKind::LstBrw,
            RpcKind::LstPing,
            RpcKind::LstFramework,
            RpcKind::LnetPing,
        ])
    }

    fn missing() -> impl Strategy<Value = Vec<Missing>> {
        let one = proptest::sample::select(vec![
            Missing::Bulk,
            Missing::BulkHeader,
            Missing::BulkUnknown,
            Missing::Evicted,
            Missing::Reply,
            Missing::ReplyAck,
            Missing::Request,
            Missing::RequestBody,
            Missing::Timeout,
            Missing::XidHighBits,
        ]);
        proptest::collection::vec(one, 0..4)
    }

    proptest! {
        #[test]
        fn test_rpc_json_matches_serde(
            s in ".{0,16}",
            n in any::<u64>(),
            f in of(any::<f64>()),
            kind in kinds(),
            missing in missing(),
            is_bare in any::<bool>(),
            jobid in of(".{0,12}"),
            status in of(any::<i32>()),
        ) {
            let mut r = record(&s, n, f, missing);
            r.kind = kind;
            r.jobid = jobid;
            r.status = status;
            if is_bare {
                r = bare(r);
            }
            prop_assert_eq!(ours(&r), serde_json::to_string(&r).unwrap());
        }
    }
}
