//! One compact JSON object written straight into a byte vector, for the per-record
//! outputs (`decode --format jsonl`, `analyze --rpcs`): the bytes serde_json writes for a
//! derived `Serialize`, without serde's dispatch per field (keys escaped anew, a call and
//! a small copy per fragment). Tens of thousands of records a second go through it, and
//! through serde they cost more than the decoding that made them (docs/speed-log.md).
//!
//! Each record's writer is held to serde_json's output on the same record by its tests;
//! the derive stays the schema.

/// The text before a field's value: `,"name":`. Field names are ASCII letters, digits and
/// underscores, which JSON writes as they are.
#[macro_export]
macro_rules! json_key {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

/// One JSON object under construction: the fields so far, in the order given.
pub struct JsonObj<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> JsonObj<'a> {
    /// The object, opened with its first field's key: `first` is `"name":`, the first
    /// field of the record's type (always written; its value goes in with [`integer`],
    /// [`float`] or [`string`] on [`JsonObj::out`]); every later key is a [`json_key!`].
    pub fn open(out: &'a mut Vec<u8>, first: &'static str) -> Self {
        debug_assert!(first.starts_with('"') && first.ends_with("\":"));
        // Room for the usual record, so that the appends below seldom grow the vector.
        out.reserve(1024);
        out.push(b'{');
        out.extend_from_slice(first.as_bytes());
        Self { out }
    }

    /// Closes the object.
    pub fn close(self) {
        self.out.push(b'}');
    }

    /// The vector, to write a value the methods here do not (an array, a nested object).
    pub fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// The key, `,"name":` ([`json_key!`]). Inlined, so that the key's copy is a few
    /// moves of known length rather than a call.
    #[inline(always)]
    pub fn key(&mut self, key: &'static str) {
        debug_assert!(key.starts_with(",\"") && key.ends_with("\":"));
        self.out.extend_from_slice(key.as_bytes());
    }

    /// A string field.
    #[inline(always)]
    pub fn str(&mut self, key: &'static str, v: &str) {
        self.key(key);
        string(self.out, v);
    }

    /// A string field, left out when absent.
    #[inline(always)]
    pub fn opt_str(&mut self, key: &'static str, v: Option<&str>) {
        if let Some(v) = v {
            self.str(key, v);
        }
    }

    /// A string field, `null` when absent.
    #[inline(always)]
    pub fn str_or_null(&mut self, key: &'static str, v: Option<&str>) {
        self.key(key);
        match v {
            Some(v) => string(self.out, v),
            None => self.out.extend_from_slice(b"null"),
        }
    }

    /// An integer field.
    #[inline(always)]
    pub fn int(&mut self, key: &'static str, v: impl itoa::Integer) {
        self.key(key);
        integer(self.out, v);
    }

    /// An integer field, left out when absent.
    #[inline(always)]
    pub fn opt_int(&mut self, key: &'static str, v: Option<impl itoa::Integer>) {
        if let Some(v) = v {
            self.int(key, v);
        }
    }

    /// An integer field, `null` when absent.
    #[inline(always)]
    pub fn int_or_null(&mut self, key: &'static str, v: Option<impl itoa::Integer>) {
        match v {
            Some(v) => self.int(key, v),
            None => {
                self.key(key);
                self.out.extend_from_slice(b"null");
            }
        }
    }

    /// A float field, `null` when absent or not finite ([`float`]).
    #[inline(always)]
    pub fn f64_or_null(&mut self, key: &'static str, v: Option<f64>) {
        self.key(key);
        float(self.out, v);
    }

    /// A boolean field.
    #[inline(always)]
    pub fn bool(&mut self, key: &'static str, v: bool) {
        self.key(key);
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
    }

    /// A 64-bit identifier as `"0x…"` (at least `min` digits), left out when absent.
    #[inline(always)]
    pub fn opt_hex(&mut self, key: &'static str, v: Option<u64>, min: usize) {
        if let Some(v) = v {
            self.key(key);
            self.hex_value(v, min);
        }
    }

    /// A 64-bit identifier as `"0x…"`, `null` when absent.
    #[inline(always)]
    pub fn hex_or_null(&mut self, key: &'static str, v: Option<u64>) {
        self.key(key);
        match v {
            Some(v) => self.hex_value(v, 1),
            None => self.out.extend_from_slice(b"null"),
        }
    }

    fn hex_value(&mut self, v: u64, min: usize) {
        self.out.push(b'"');
        self.out.extend_from_slice(HexText::new(v, min).as_bytes());
        self.out.push(b'"');
    }
}

/// An integer value (for a record's first field, after [`JsonObj::open`]).
#[inline(always)]
pub fn integer(out: &mut Vec<u8>, v: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A float value, `null` when absent or not finite: serde_json writes a finite number in
/// zmij's shortest form and the others as `null`.
#[inline(always)]
pub fn float(out: &mut Vec<u8>, v: Option<f64>) {
    match v.filter(|x| x.is_finite()) {
        Some(x) => out.extend_from_slice(zmij::Buffer::new().format_finite(x).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON string. Text with nothing to escape (no quote, backslash or control
/// character: every NID, tuple and name) is copied as it is; anything else goes through
/// serde_json's own escaping, so that the two never differ.
pub fn string(out: &mut Vec<u8>, v: &str) {
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
/// has a zero byte, which is a byte below 1. The last word overlaps the one before it
/// (a byte tested twice is no harm), so that only text shorter than a word goes byte by
/// byte.
fn needs_escape(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |w: u64, n: u64| w.wrapping_sub(n * ONES) & !w;
    let special = |c: &[u8]| {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let hits = below(w, 0x20) | below(w ^ (u64::from(b'"') * ONES), 1) | below(w ^ (u64::from(b'\\') * ONES), 1);
        hits & HIGHS != 0
    };
    if b.len() < 8 {
        return b.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\');
    }
    b.chunks_exact(8).any(special) || special(&b[b.len() - 8..])
}

/// `0x` and the hex digits of a value, at least `min` (≤ 16) of them: the text of
/// `format!("0x{v:0min$x}")` without the formatting machinery, which cost a few hundred
/// instructions an identifier (several in every message `decode` writes).
pub(crate) struct HexText {
    /// The 16 digits at 2..18, "0x" just before the ones written.
    buf: [u8; 18],
    start: u8,
}

/// The two hex digits of every byte value.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let digits = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [digits[i >> 4], digits[i & 0xf]];
        i += 1;
    }
    t
};

impl HexText {
    /// All 16 digits a byte pair at a time, then "0x" over the leading ones not written.
    pub(crate) fn new(v: u64, min: usize) -> Self {
        let digits = (16 - (v.leading_zeros() / 4) as usize).max(min.min(16)).max(1);
        let mut buf = [0u8; 18];
        for (i, b) in v.to_be_bytes().into_iter().enumerate() {
            let [hi, lo] = HEX_PAIRS[usize::from(b)];
            buf[2 + 2 * i] = hi;
            buf[3 + 2 * i] = lo;
        }
        let start = 16 - digits;
        buf[start] = b'0';
        buf[start + 1] = b'x';
        Self { buf, start: start as u8 }
    }

    pub(crate) fn len(&self) -> usize {
        18 - usize::from(self.start)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[usize::from(self.start)..]
    }

    pub(crate) fn as_str(&self) -> &str {
        // "0x" and hex digits only: always UTF-8.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// The same fields as a derived `Serialize`: what serde_json writes is the oracle.
    #[derive(serde::Serialize)]
    struct Fields {
        s: String,
        f: f64,
        g: f64,
        h: Option<f64>,
        i: i64,
        u: Option<u64>,
        n: Option<u32>,
        t: Option<String>,
        z: Option<String>,
        x: Option<crate::record::Hex>,
        y: Option<crate::record::Hex>,
        b: bool,
    }

    proptest! {
        /// Every kind of value against serde_json's bytes: strings of any characters,
        /// floats of every class (NaN and infinities become null), integers at their
        /// extremes, absent values as null.
        #[test]
        fn test_values_match_serde(
            s in ".{0,20}",
            f in any::<f64>(),
            special in proptest::sample::select(vec![0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e21, 1e-7, 0.1, 5e-324]),
            i in any::<i64>(),
            u in any::<u64>(),
        ) {
            let mut ours = Vec::new();
            let mut o = JsonObj::open(&mut ours, "\"s\":");
            string(o.out(), &s);
            o.f64_or_null(json_key!("f"), Some(f));
            o.f64_or_null(json_key!("g"), Some(special));
            o.f64_or_null(json_key!("h"), None);
            o.int(json_key!("i"), i);
            o.int_or_null(json_key!("u"), Some(u));
            o.int_or_null(json_key!("n"), None::<u32>);
            o.str_or_null(json_key!("t"), Some(&s));
            o.str_or_null(json_key!("z"), None);
            o.hex_or_null(json_key!("x"), Some(u));
            o.hex_or_null(json_key!("y"), None);
            o.bool(json_key!("b"), i < 0);
            o.close();
            let want = Fields {
                s: s.clone(), f, g: special, h: None, i, u: Some(u), n: None, t: Some(s), z: None,
                x: Some(crate::record::Hex(u)), y: None, b: i < 0,
            };
            prop_assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&want).unwrap());
        }
    }
}
