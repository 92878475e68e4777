//! [`MessageRecord`] as one line of `decode --format text`: written straight into a
//! byte vector, without `format!` and `Display` for every field (a metadata-heavy capture writes
//! tens of thousands of lines a second). The tests hold it to the `format!` form.

use super::MessageRecord;
use crate::jsonw::HexText;

/// Text into the line.
#[inline(always)]
fn put(s: &mut Vec<u8>, t: &str) {
    s.extend_from_slice(t.as_bytes());
}

/// Decimal digits.
#[inline(always)]
fn int(s: &mut Vec<u8>, v: impl itoa::Integer) {
    put(s, itoa::Buffer::new().format(v));
}

// The helpers below take the whole ` key=` (a literal) and are inlined into the one
// writer: each key is then a copy of a length the compiler knows, a few moves, where
// pushing ` `, the key and `=` in turn (a call of `memcpy` for the key) was a fifth of
// a metadata capture's text line.

/// ` key=`, `k` with its space and `=`.
#[inline(always)]
fn key(s: &mut Vec<u8>, k: &'static str) {
    debug_assert!(k.starts_with(' ') && k.ends_with('='));
    put(s, k);
}

#[inline(always)]
fn hex(s: &mut Vec<u8>, k: &'static str, v: Option<u64>) {
    if let Some(v) = v {
        key(s, k);
        s.extend_from_slice(HexText::new(v, 1).as_bytes());
    }
}

#[inline(always)]
fn num(s: &mut Vec<u8>, k: &'static str, v: Option<impl itoa::Integer>) {
    if let Some(v) = v {
        key(s, k);
        int(s, v);
    }
}

#[inline(always)]
fn text(s: &mut Vec<u8>, k: &'static str, v: Option<&str>) {
    if let Some(v) = v {
        key(s, k);
        put(s, v);
    }
}

/// `n` copies of the one ASCII character `unit` repeats, up to its length at a time: a copy,
/// not a character pushed at a time.
#[inline(always)]
fn fill(s: &mut Vec<u8>, unit: &'static str, mut n: usize) {
    while n > 0 {
        let k = n.min(unit.len());
        put(s, &unit[..k]);
        n -= k;
    }
}

const SPACES: &str = "        ";
const ZEROS: &str = "000000000";

/// `v` padded with spaces to `width` characters, on the left (`right`) or the right.
#[inline(always)]
fn padded(s: &mut Vec<u8>, v: &str, width: usize, right: bool) {
    let pad = width.saturating_sub(v.chars().count());
    if !right {
        put(s, v);
    }
    fill(s, SPACES, pad);
    if right {
        put(s, v);
    }
}

impl MessageRecord {
    /// One human-readable line (the `--format text` output), without its newline.
    pub fn text_line(&self) -> String {
        let mut s = Vec::with_capacity(192);
        self.write_text(&mut s);
        // Text pieces only: always UTF-8.
        String::from_utf8(s).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Appends [`MessageRecord::text_line`] to `s`, as bytes: the hex digits and numbers go
    /// in without the check of a `String` that they are UTF-8 (a tenth of a line).
    pub fn write_text(&self, s: &mut Vec<u8>) {
        padded(s, itoa::Buffer::new().format(self.frame), 8, true);
        s.push(b' ');
        int(s, self.ts_ns.div_euclid(1_000_000_000));
        s.push(b'.');
        let mut digits = itoa::Buffer::new();
        let ns = digits.format(self.ts_ns.rem_euclid(1_000_000_000));
        fill(s, ZEROS, 9usize.saturating_sub(ns.len()));
        put(s, ns);
        put(s, " c");
        int(s, self.conn);
        s.push(b' ');
        put(s, &self.tcp);
        s.push(b' ');
        padded(s, self.kind, 7, false);
        self.write_text_fields(s);
    }

    /// The fields after the kind, each ` key=value`.
    fn write_text_fields(&self, s: &mut Vec<u8>) {
        if let (Some(a), Some(b)) = (&self.src_nid, &self.dst_nid) {
            key(s, " nids=");
            put(s, a);
            put(s, "->");
            put(s, b);
        } else {
            text(s, " target=", self.dst_nid.as_deref());
        }
        num(s, " version=", self.connreq_version);
        num(s, " version=", self.hello_version);
        text(s, " type=", self.conn_type);
        num(s, " ptl=", self.portal);
        hex(s, " mb=", self.match_bits.map(|h| h.0));
        hex(s, " mb_low32=", self.match_bits_low32.map(|h| h.0));
        num(s, " len=", self.payload_length);
        num(s, " sink=", self.sink_length);
        num(s, " mlen=", self.mlength);
        hex(s, " zc_req=", self.zc_req_cookie.map(|h| h.0));
        hex(s, " zc_ack=", self.zc_ack_cookie.map(|h| h.0));
        if let Some(name) = self.opc_name {
            text(s, " opc=", Some(name));
        } else if let Some(o) = self.opc {
            key(s, " opc=");
            put(s, "opc");
            int(s, o);
        }
        text(s, " rpc=", self.ptlrpc);
        num(s, " status=", self.status.filter(|v| *v != 0));
        if self.early_reply == Some(true) {
            text(s, " early=", Some("true"));
        }
        text(s, " srpc=", self.srpc_type);
        hex(s, " rpyid=", self.rpyid.map(|h| h.0));
        hex(s, " bulkid=", self.bulkid.map(|h| h.0));
        if let Some(v) = &self.ping_nids {
            key(s, " ping=");
            for (i, n) in v.iter().enumerate() {
                if i > 0 {
                    s.push(b',');
                }
                put(s, n);
            }
        }
        if self.inferred {
            text(s, " inferred=", Some("true"));
        } else if !self.header_complete {
            text(s, " header=", Some("partial"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{arb_record, full_record};
    use super::*;
    use proptest::prelude::*;

    /// The text line as it was written before the direct writer: `format!` and
    /// `Display`, plain to read; the writer must give the same bytes.
    fn reference(this: &MessageRecord) -> String {
        use std::fmt::Write;
        let ts = format!("{}.{:09}", this.ts_ns.div_euclid(1_000_000_000), this.ts_ns.rem_euclid(1_000_000_000));
        let mut s = format!("{:>8} {} c{} {} {:<7}", this.frame, ts, this.conn, this.tcp, this.kind);
        let mut kv = |k: &str, v: &dyn std::fmt::Display| {
            let _ = write!(s, " {k}={v}");
        };
        if let (Some(a), Some(b)) = (&this.src_nid, &this.dst_nid) {
            kv("nids", &format_args!("{a}->{b}"));
        } else if let Some(b) = &this.dst_nid {
            kv("target", b);
        }
        if let Some(v) = this.connreq_version {
            kv("version", &v);
        }
        if let Some(v) = this.hello_version {
            kv("version", &v);
        }
        if let Some(v) = this.conn_type {
            kv("type", &v);
        }
        if let Some(v) = this.portal {
            kv("ptl", &v);
        }
        if let Some(v) = &this.match_bits {
            kv("mb", v);
        }
        if let Some(v) = &this.match_bits_low32 {
            kv("mb_low32", v);
        }
        if let Some(v) = this.payload_length {
            kv("len", &v);
        }
        if let Some(v) = this.sink_length {
            kv("sink", &v);
        }
        if let Some(v) = this.mlength {
            kv("mlen", &v);
        }
        if let Some(v) = &this.zc_req_cookie {
            kv("zc_req", v);
        }
        if let Some(v) = &this.zc_ack_cookie {
            kv("zc_ack", v);
        }
        if let Some(v) = this.opc_name.map(str::to_string).or_else(|| this.opc.map(|o| format!("opc{o}"))) {
            kv("opc", &v);
        }
        if let Some(v) = this.ptlrpc {
            kv("rpc", &v);
        }
        if let Some(v) = this.status.filter(|s| *s != 0) {
            kv("status", &v);
        }
        if this.early_reply == Some(true) {
            kv("early", &true);
        }
        if let Some(v) = this.srpc_type {
            kv("srpc", &v);
        }
        if let Some(v) = &this.rpyid {
            kv("rpyid", v);
        }
        if let Some(v) = &this.bulkid {
            kv("bulkid", v);
        }
        if let Some(v) = &this.ping_nids {
            kv("ping", &v.join(","));
        }
        if this.inferred {
            kv("inferred", &true);
        } else if !this.header_complete {
            kv("header", &"partial");
        }
        s
    }

    #[test]
    fn test_text_matches_format_on_full_and_empty_records() {
        for r in [full_record("10.0.1.1:1023->10.0.2.1:988", 42), MessageRecord::default()] {
            assert_eq!(r.text_line(), reference(&r));
        }
        let mut r = full_record("é", 1_795_300_000_064_380_000);
        r.kind = "HELLO";
        r.opc_name = None;
        r.status = Some(0);
        assert_eq!(r.text_line(), reference(&r));
    }

    proptest! {
        #[test]
        fn test_text_matches_format(r in arb_record()) {
            prop_assert_eq!(r.text_line(), reference(&r));
        }
    }
}
