//! [`MessageRecord`] as one JSON object, written straight into a byte vector: the bytes
//! `serde_json::to_writer` writes for the record's derived `Serialize`, without serde's
//! dispatch per field (keys escaped anew, a call and a small copy per fragment). A
//! metadata-heavy capture writes tens of thousands of records a second, and through serde
//! they cost three times the decoding that made them (docs/speed-log.md).
//!
//! The derive stays the schema: the tests hold this writer to serde_json's output on
//! records with every field set, none set, and arbitrary strings.

use super::{HexText, MessageRecord};

/// One JSON object under construction: the fields so far, in the order given.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
}

/// The text before a field's value: `,"name":`. Field names are ASCII letters, digits and
/// underscores, which JSON writes as they are.
macro_rules! k {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

impl<'a> Obj<'a> {
    /// The object, opened with its first field, `schema_version`.
    fn new(out: &'a mut Vec<u8>, schema_version: u32) -> Self {
        // Room for the usual record, so that the appends below seldom grow the vector.
        out.reserve(1024);
        out.extend_from_slice(b"{\"schema_version\":");
        out.extend_from_slice(itoa::Buffer::new().format(schema_version).as_bytes());
        Self { out }
    }

    /// `,"key":`, the whole literal made by [`k!`]: every field but the first
    /// (`schema_version`, always there, written by `new`) follows another. Inlined, so
    /// that the key's copy is a few moves of known length rather than a call.
    #[inline(always)]
    fn key(&mut self, key: &'static str) {
        debug_assert!(key.starts_with(",\"") && key.ends_with("\":"));
        self.out.extend_from_slice(key.as_bytes());
    }

    #[inline(always)]
    fn str(&mut self, key: &'static str, v: &str) {
        self.key(key);
        string(self.out, v);
    }

    #[inline(always)]
    fn opt_str(&mut self, key: &'static str, v: Option<&str>) {
        if let Some(v) = v {
            self.str(key, v);
        }
    }

    #[inline(always)]
    fn int(&mut self, key: &'static str, v: impl itoa::Integer) {
        self.key(key);
        self.out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    #[inline(always)]
    fn opt_int(&mut self, key: &'static str, v: Option<impl itoa::Integer>) {
        if let Some(v) = v {
            self.int(key, v);
        }
    }

    #[inline(always)]
    fn bool(&mut self, key: &'static str, v: bool) {
        self.key(key);
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// A 64-bit identifier as `"0x…"` (at least `min` digits).
    #[inline(always)]
    fn hex(&mut self, key: &'static str, v: Option<u64>, min: usize) {
        if let Some(v) = v {
            self.key(key);
            self.out.push(b'"');
            self.out.extend_from_slice(HexText::new(v, min).as_bytes());
            self.out.push(b'"');
        }
    }

    fn end(self) {
        self.out.push(b'}');
    }
}

/// A JSON string. Text with nothing to escape (no quote, backslash or control
/// character: every NID, tuple and name) is copied as it is; anything else goes through
/// serde_json's own escaping, so that the two never differ.
fn string(out: &mut Vec<u8>, v: &str) {
    if needs_escape(v.as_bytes()) {
        // Writing into a vector cannot fail, and a &str always serialises.
        let _ = serde_json::to_writer(&mut *out, v);
    } else {
        out.push(b'"');
        out.extend_from_slice(v.as_bytes());
        out.push(b'"');
    }
}

/// Whether JSON escapes any of the bytes: a control character (below 0x20), a quote or a
/// backslash. Eight bytes a step: a word has a byte below `n` (n <= 0x80) exactly when
/// `(w - n * ONES) & !w & HIGHS` is not zero, and a byte equal to `c` when `w ^ c * ONES`
/// has a zero byte, which is a byte below 1.
fn needs_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |w: u64, n: u64| w.wrapping_sub(n * ONES) & !w & HIGHS != 0;
    let mut words = b.chunks_exact(8);
    for c in &mut words {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        if below(w, 0x20) || below(w ^ (u64::from(b'"') * ONES), 1) || below(w ^ (u64::from(b'\\') * ONES), 1) {
            return true;
        }
    }
    words.remainder().iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\')
}

impl MessageRecord {
    /// Appends the record as one compact JSON object (no newline): byte for byte what
    /// `serde_json::to_writer(out, self)` writes.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Obj::new(out, self.schema_version);
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
        o.end();
    }

    /// The socklnd and LNet header's fields.
    fn write_lnet(&self, o: &mut Obj<'_>) {
        o.opt_str(k!("src_nid"), self.src_nid.as_deref());
        o.opt_str(k!("dst_nid"), self.dst_nid.as_deref());
        o.opt_int(k!("src_pid"), self.src_pid);
        o.opt_int(k!("dst_pid"), self.dst_pid);
        o.opt_int(k!("connreq_version"), self.connreq_version);
        o.opt_int(k!("hello_version"), self.hello_version);
        o.opt_str(k!("conn_type"), self.conn_type);
        o.hex(k!("incarnation"), self.incarnation.map(|h| h.0), 1);
        o.hex(k!("csum"), self.csum.map(|h| u64::from(h.0)), 8);
        o.hex(k!("zc_req_cookie"), self.zc_req_cookie.map(|h| h.0), 1);
        o.hex(k!("zc_ack_cookie"), self.zc_ack_cookie.map(|h| h.0), 1);
        o.opt_int(k!("payload_length"), self.payload_length);
        o.opt_int(k!("portal"), self.portal);
        o.opt_str(k!("portal_name"), self.portal_name);
        o.hex(k!("match_bits"), self.match_bits.map(|h| h.0), 1);
        o.hex(k!("match_bits_low32"), self.match_bits_low32.map(|h| h.0), 1);
        o.hex(k!("hdr_data"), self.hdr_data.map(|h| h.0), 1);
        o.opt_int(k!("put_offset"), self.put_offset);
        o.opt_str(k!("ack_wmd"), self.ack_wmd.as_deref());
        o.opt_str(k!("return_wmd"), self.return_wmd.as_deref());
        o.opt_str(k!("dst_wmd"), self.dst_wmd.as_deref());
        o.opt_int(k!("sink_length"), self.sink_length);
        o.opt_int(k!("src_offset"), self.src_offset);
        o.opt_int(k!("mlength"), self.mlength);
    }

    /// The PtlRPC, self-test and ping fields.
    fn write_app(&self, o: &mut Obj<'_>) {
        o.opt_str(k!("ptlrpc"), self.ptlrpc);
        o.opt_int(k!("opc"), self.opc);
        o.opt_str(k!("opc_name"), self.opc_name);
        o.opt_int(k!("status"), self.status);
        o.opt_int(k!("service_time"), self.service_time);
        o.hex(k!("pb_mbits"), self.pb_mbits.map(|h| h.0), 1);
        o.opt_str(k!("jobid"), self.jobid.as_deref());
        if let Some(v) = self.early_reply {
            o.bool(k!("early_reply"), v);
        }
        o.opt_str(k!("srpc_type"), self.srpc_type);
        o.hex(k!("rpyid"), self.rpyid.map(|h| h.0), 1);
        o.hex(k!("bulkid"), self.bulkid.map(|h| h.0), 1);
        o.opt_str(k!("brw_rw"), self.brw_rw);
        o.opt_int(k!("brw_len"), self.brw_len);
        o.opt_int(k!("srpc_status"), self.srpc_status);
        if let Some(nids) = &self.ping_nids {
            o.key(k!("ping_nids"));
            o.out.push(b'[');
            for (i, n) in nids.iter().enumerate() {
                if i > 0 {
                    o.out.push(b',');
                }
                string(o.out, n);
            }
            o.out.push(b']');
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

    /// The word-at-a-time test against the byte one: every byte value at every place of
    /// words and tails, among bytes that need no escaping and next to ones above 0x7f.
    #[test]
    fn test_needs_escape_is_exact() {
        let slow = |b: &[u8]| b.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\');
        for len in 1..20 {
            for at in 0..len {
                for fill in [b'a', 0x7f, 0xff, 0x80, b'!'] {
                    for c in 0..=255u8 {
                        let mut b = vec![fill; len];
                        b[at] = c;
                        assert_eq!(needs_escape(&b), slow(&b), "{b:?}");
                    }
                }
            }
        }
        assert!(!needs_escape(b""));
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
