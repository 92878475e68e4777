//! [`MessageRecord`] as one JSON object (`decode --format jsonl`), through the direct
//! writer of [`crate::jsonw`]: byte for byte what serde_json writes for the derive.

use super::MessageRecord;
use crate::json_key as k;
use crate::jsonw::{integer, string, JsonObj};

impl MessageRecord {
    /// Appends the record as one compact JSON object (no newline): byte for byte what
    /// `serde_json::to_writer(out, self)` writes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = JsonObj::open(out, "\"schema_version\":");
        integer(o.out(), self.schema_version);
        o.opt_str(k!("file"), self.file.as_deref());
        o.int(k!("frame"), self.frame);
        o.int(k!("frame_last"), self.frame_last);
        o.int(k!("ts_ns"), self.ts_ns);
        o.int(k!("ts_last_ns"), self.ts_last_ns);
        o.int(k!("conn"), self.conn);
        o.str(k!("tcp"), &self.tcp);
        o.str(k!("kind"), self.kind);
        o.opt_int(k!("proto"), self.proto);
        o.int(k!("stream_offset"), self.stream_offset);
        o.int(k!("wire_len"), self.wire_len);
        o.bool(k!("header_complete"), self.header_complete);
        o.int(k!("payload_captured"), self.payload_captured);
        if self.inferred {
            o.bool(k!("inferred"), true);
        }
        self.write_lnet(&mut o);
        self.write_app(&mut o);
        o.close();
    }

    /// The socklnd and LNet header's fields.
    fn write_lnet(&self, o: &mut JsonObj<'_>) {
        o.opt_str(k!("src_nid"), self.src_nid.as_deref());
        o.opt_str(k!("dst_nid"), self.dst_nid.as_deref());
        o.opt_int(k!("src_pid"), self.src_pid);
        o.opt_int(k!("dst_pid"), self.dst_pid);
        o.opt_int(k!("connreq_version"), self.connreq_version);
        o.opt_int(k!("hello_version"), self.hello_version);
        o.opt_str(k!("conn_type"), self.conn_type);
        o.opt_hex(k!("incarnation"), self.incarnation.map(|h| h.0), 1);
        o.opt_hex(k!("csum"), self.csum.map(|h| u64::from(h.0)), 8);
        o.opt_hex(k!("zc_req_cookie"), self.zc_req_cookie.map(|h| h.0), 1);
        o.opt_hex(k!("zc_ack_cookie"), self.zc_ack_cookie.map(|h| h.0), 1);
        o.opt_int(k!("payload_length"), self.payload_length);
        o.opt_int(k!("portal"), self.portal);
        o.opt_str(k!("portal_name"), self.portal_name);
        o.opt_hex(k!("match_bits"), self.match_bits.map(|h| h.0), 1);
        o.opt_hex(k!("match_bits_low32"), self.match_bits_low32.map(|h| h.0), 1);
        o.opt_hex(k!("hdr_data"), self.hdr_data.map(|h| h.0), 1);
        o.opt_int(k!("put_offset"), self.put_offset);
        o.opt_str(k!("ack_wmd"), self.ack_wmd.as_deref());
        o.opt_str(k!("return_wmd"), self.return_wmd.as_deref());
        o.opt_str(k!("dst_wmd"), self.dst_wmd.as_deref());
        o.opt_int(k!("sink_length"), self.sink_length);
        o.opt_int(k!("src_offset"), self.src_offset);
        o.opt_int(k!("mlength"), self.mlength);
    }

    /// The PtlRPC, self-test and ping fields.
    fn write_app(&self, o: &mut JsonObj<'_>) {
        o.opt_str(k!("ptlrpc"), self.ptlrpc);
        o.opt_int(k!("opc"), self.opc);
        o.opt_str(k!("opc_name"), self.opc_name);
        o.opt_int(k!("status"), self.status);
        o.opt_int(k!("service_time"), self.service_time);
        o.opt_hex(k!("pb_mbits"), self.pb_mbits.map(|h| h.0), 1);
        o.opt_str(k!("jobid"), self.jobid.as_deref());
        if let Some(v) = self.early_reply {
            o.bool(k!("early_reply"), v);
        }
        o.opt_str(k!("srpc_type"), self.srpc_type);
        o.opt_hex(k!("rpyid"), self.rpyid.map(|h| h.0), 1);
        o.opt_hex(k!("bulkid"), self.bulkid.map(|h| h.0), 1);
        o.opt_str(k!("brw_rw"), self.brw_rw);
        o.opt_int(k!("brw_len"), self.brw_len);
        o.opt_int(k!("srpc_status"), self.srpc_status);
        if let Some(nids) = &self.ping_nids {
            o.key(k!("ping_nids"));
            let out = o.out();
            out.push(b'[');
            for (i, n) in nids.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(out, n);
            }
            out.push(b']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{arb_record, full_record};
    use super::*;
    use proptest::prelude::*;

    fn serde_bytes(r: &MessageRecord) -> Vec<u8> {
        serde_json::to_vec(r).unwrap()
    }

    fn ours(r: &MessageRecord) -> Vec<u8> {
        let mut v = Vec::new();
        r.write_json(&mut v);
        v
    }

    #[test]
    fn test_json_matches_serde_on_full_and_empty_records() {
        for r in [full_record("10.0.1.1:1023->10.0.2.1:988", 42), MessageRecord::default()] {
            assert_eq!(String::from_utf8(ours(&r)).unwrap(), String::from_utf8(serde_bytes(&r)).unwrap());
        }
        // Strings that need escaping take serde_json's path.
        let r = full_record("job\"id\\\n\u{1}\u{7f}é\t\u{2028}", 0);
        assert_eq!(String::from_utf8(ours(&r)).unwrap(), String::from_utf8(serde_bytes(&r)).unwrap());
    }

    proptest! {
        #[test]
        fn test_json_matches_serde(r in arb_record()) {
            prop_assert_eq!(ours(&r), serde_bytes(&r));
        }
    }
}
