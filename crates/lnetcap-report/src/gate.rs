//! `--fail-if`: a small expression language over the fields of each peer of the JSON
//! report (docs/analyze-json.md), for CI gates.
//!
//! ```text
//! expr    := or
//! or      := and ("or" and)*
//! and     := unary ("and" unary)*
//! unary   := "not" unary | "(" expr ")" | operand OP operand
//! OP      := < <= > >= == !=
//! operand := field | number[unit] | 'text' | "text" | word | null | true | false
//! field   := name("." name)*         a field of the registry (lnetcap_analysis::fields):
//!                                    a key path into the peer object, or an alias
//! ```
//!
//! Every field name is checked against the registry when the gate is parsed (a typo fails
//! at once with the nearest names), and so are types and units: `rtt > 5MB` and
//! `binding_limit > lnet_credits` are parse errors. A gate is checked against every peer
//! of the report and holds when it is true for any of them. A number with a unit is
//! converted to the field's unit (`rtt > 25ms` compares `rtt_us.p50` in µs); a bare number
//! is in the field's own unit, as the JSON writes it. A list compares as its length
//! (`advice > 0`). A comparison with a null (unknown) value, or a field the peer does not
//! have (`rate.*` of a pair with bulk data), is false, except `== null` / `!= null`. A word
//! compared with a text field is text (`binding_limit == lnet_credits`), checked against
//! the words that field takes.

use lnetcap_analysis::fields::{self, Field, Unit};
use serde_json::Value;

/// What a quantity measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// A count, ratio or share.
    Plain,
    /// Seconds.
    Time,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    Rate,
}

impl Dim {
    fn name(self) -> &'static str {
        match self {
            Self::Plain => "a number without unit",
            Self::Time => "a duration",
            Self::Bytes => "a size",
            Self::Rate => "a rate",
        }
    }
}

/// How a field's value compares: (dimension, SI factor of its unit).
fn field_dim(u: Unit) -> (Dim, f64) {
    match u {
        Unit::Bytes => (Dim::Bytes, 1.0),
        Unit::BytesPerS => (Dim::Rate, 1.0),
        u => u.seconds().map_or((Dim::Plain, 1.0), |f| (Dim::Time, f)),
    }
}

/// A literal's unit: (dimension, SI factor).
fn literal_unit(u: &str) -> Option<(Dim, f64)> {
    Some(match u {
        "%" => (Dim::Plain, 0.01),
        "ns" => (Dim::Time, 1e-9),
        "us" | "µs" => (Dim::Time, 1e-6),
        "ms" => (Dim::Time, 1e-3),
        "s" => (Dim::Time, 1.0),
        "B" => (Dim::Bytes, 1.0),
        "kB" | "KB" => (Dim::Bytes, 1e3),
        "MB" => (Dim::Bytes, 1e6),
        "GB" => (Dim::Bytes, 1e9),
        "KiB" => (Dim::Bytes, 1024.0),
        "MiB" => (Dim::Bytes, 1_048_576.0),
        "GiB" => (Dim::Bytes, 1_073_741_824.0),
        _ => return lnetcap_analysis::defaults::rate_unit(u).map(|f| (Dim::Rate, f)),
    })
}

/// Comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Self::Lt => "<",
            Self::Le => "<=",
            Self::Gt => ">",
            Self::Ge => ">=",
            Self::Eq => "==",
            Self::Ne => "!=",
        }
    }
}

/// An operand.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A word: a field if the peer has it (or it is an alias), else text.
    Word(String),
    /// A number, with its unit as written.
    Num(f64, Option<String>),
    /// Quoted text.
    Text(String),
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// `a or b`
    Or(Box<Expr>, Box<Expr>),
    /// `a and b`
    And(Box<Expr>, Box<Expr>),
    /// `not a`
    Not(Box<Expr>),
    /// `x OP y`
    Cmp(Operand, Op, Operand),
}

/// A parse or evaluation error: what and where (character offset in the expression).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateError(pub String);

impl std::fmt::Display for GateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GateError {}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    LParen,
    RParen,
    Op(Op),
    And,
    Or,
    Not,
    Operand(Operand),
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, GateError> {
    let b: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    let err = |at: usize, what: &str| GateError(format!("{src:?}, at character {}: {what}", at + 1));
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        match c {
            '(' => {
                out.push((start, Tok::LParen));
                i += 1;
            }
            ')' => {
                out.push((start, Tok::RParen));
                i += 1;
            }
            '<' | '>' | '=' | '!' => {
                let two = b.get(i + 1) == Some(&'=');
                let op = match (c, two) {
                    ('<', false) => Op::Lt,
                    ('<', true) => Op::Le,
                    ('>', false) => Op::Gt,
                    ('>', true) => Op::Ge,
                    ('=', true) => Op::Eq,
                    ('!', true) => Op::Ne,
                    _ => return Err(err(start, "expected one of < <= > >= == !=")),
                };
                out.push((start, Tok::Op(op)));
                i += if two { 2 } else { 1 };
            }
            '\'' | '"' => {
                let end = b[i + 1..].iter().position(|&x| x == c).ok_or_else(|| err(start, "unterminated text"))?;
                out.push((start, Tok::Operand(Operand::Text(b[i + 1..i + 1 + end].iter().collect()))));
                i += end + 2;
            }
            c if c.is_ascii_digit() || (c == '-' || c == '.') && b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) => {
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_digit()
                        || b[i] == '.'
                        || (b[i] == 'e' || b[i] == 'E')
                            && b.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == '-' || *d == '+')
                        || (b[i] == '-' || b[i] == '+') && (b[i - 1] == 'e' || b[i - 1] == 'E'))
                {
                    i += 1;
                }
                let num: String = b[start..i].iter().collect();
                let v: f64 = num.parse().map_err(|_| err(start, &format!("{num:?} is not a number")))?;
                let ustart = i;
                while i < b.len() && (b[i].is_alphabetic() || b[i] == '/' || b[i] == '%') {
                    i += 1;
                }
                let unit: String = b[ustart..i].iter().collect();
                if !unit.is_empty() && literal_unit(&unit).is_none() {
                    return Err(err(
                        ustart,
                        &format!("unknown unit {unit:?} (%, ns, us, ms, s, B, kB, MB, GB, KiB, MiB, GiB, B/s, MB/s, GB/s, MiB/s, Mbit, Gbit)"),
                    ));
                }
                out.push((start, Tok::Operand(Operand::Num(v, (!unit.is_empty()).then_some(unit)))));
            }
            c if c.is_alphabetic() || c == '_' => {
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                    i += 1;
                }
                let w: String = b[start..i].iter().collect();
                out.push((
                    start,
                    match w.as_str() {
                        "and" => Tok::And,
                        "or" => Tok::Or,
                        "not" => Tok::Not,
                        "null" => Tok::Operand(Operand::Null),
                        "true" => Tok::Operand(Operand::Bool(true)),
                        "false" => Tok::Operand(Operand::Bool(false)),
                        _ => Tok::Operand(Operand::Word(w)),
                    },
                ));
            }
            _ => return Err(err(start, &format!("unexpected {c:?}"))),
        }
    }
    Ok(out)
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<(usize, Tok)>,
    at: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> GateError {
        match self.toks.get(self.at) {
            Some((pos, _)) => GateError(format!("{:?}, at character {}: {what}", self.src, pos + 1)),
            None => GateError(format!("{:?}, at the end: {what}", self.src)),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.1)
    }

    fn or(&mut self) -> Result<Expr, GateError> {
        let mut e = self.and()?;
        while self.peek() == Some(&Tok::Or) {
            self.at += 1;
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, GateError> {
        let mut e = self.unary()?;
        while self.peek() == Some(&Tok::And) {
            self.at += 1;
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, GateError> {
        match self.peek() {
            Some(Tok::Not) => {
                self.at += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Tok::LParen) => {
                self.at += 1;
                let e = self.or()?;
                if self.peek() != Some(&Tok::RParen) {
                    return Err(self.err("expected )"));
                }
                self.at += 1;
                Ok(e)
            }
            _ => {
                let a = self.operand()?;
                let op = match self.peek() {
                    Some(Tok::Op(op)) => *op,
                    _ => return Err(self.err("expected a comparison: < <= > >= == !=")),
                };
                let at = self.at - 1;
                self.at += 1;
                let b = self.operand()?;
                typecheck(&a, op, &b).map_err(|what| {
                    let p = self.toks[at].0;
                    GateError(format!("{:?}, at character {}: {what}", self.src, p + 1))
                })?;
                Ok(Expr::Cmp(a, op, b))
            }
        }
    }

    fn operand(&mut self) -> Result<Operand, GateError> {
        match self.peek() {
            Some(Tok::Operand(o)) => {
                let o = o.clone();
                self.at += 1;
                Ok(o)
            }
            _ => Err(self.err("expected a field, a number or a text")),
        }
    }
}

/// A parsed `--fail-if` gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The expression as given.
    pub source: String,
    /// Parsed.
    pub expr: Expr,
}

impl Gate {
    /// Parses a gate.
    pub fn parse(src: &str) -> Result<Self, GateError> {
        let toks = lex(src)?;
        if toks.is_empty() {
            return Err(GateError("empty --fail-if expression".into()));
        }
        let mut p = Parser { src, toks, at: 0 };
        let expr = p.or()?;
        if p.at != p.toks.len() {
            return Err(p.err("expected and, or, or the end"));
        }
        Ok(Self { source: src.to_string(), expr })
    }

    /// Evaluates the gate on one peer object; returns whether it holds and the values of
    /// the fields it read (`path = value`), for the message.
    pub fn eval(&self, peer: &Value) -> Result<(bool, Vec<String>), GateError> {
        let mut seen = Vec::new();
        let v = eval(&self.expr, peer, &mut seen)?;
        seen.dedup();
        Ok((v, seen))
    }
}

/// Looks a key path up in an object.
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

#[derive(Debug, Clone)]
enum Val {
    Null,
    Num(f64, Dim, f64),
    Text(String),
    Bool(bool),
}

fn value(o: &Operand, peer: &Value, seen: &mut Vec<String>) -> Result<Val, GateError> {
    Ok(match o {
        Operand::Null => Val::Null,
        Operand::Bool(b) => Val::Bool(*b),
        Operand::Text(t) => Val::Text(t.clone()),
        Operand::Num(v, None) => Val::Num(*v, Dim::Plain, f64::NAN),
        Operand::Num(v, Some(u)) => {
            let (dim, f) = literal_unit(u).unwrap_or((Dim::Plain, 1.0));
            Val::Num(*v * f, dim, 1.0)
        }
        Operand::Word(w) => match fields::field(w) {
            None => Val::Text(w.clone()),
            Some(f) => {
                let path = fields::path_of(w);
                let v = lookup(peer, path).unwrap_or(&Value::Null);
                let shown = match v {
                    Value::Array(a) => format!("{} entries", a.len()),
                    v => v.to_string(),
                };
                seen.push(if path == w { format!("{w} = {shown}") } else { format!("{w} ({path}) = {shown}") });
                let (dim, factor) = field_dim(f.unit);
                match v {
                    Value::Null => Val::Null,
                    Value::Bool(b) => Val::Bool(*b),
                    Value::Number(n) => Val::Num(n.as_f64().unwrap_or(f64::NAN), dim, factor),
                    Value::String(s) => Val::Text(s.clone()),
                    Value::Array(a) => Val::Num(a.len() as f64, Dim::Plain, 1.0),
                    Value::Object(_) => return Err(GateError(format!("{w} is an object in this report"))),
                }
            }
        },
    })
}

/// What an operand is before any report is read.
enum Static {
    Field(&'static Field),
    Num(Option<(Dim, f64)>),
    Text(String),
    Word(String),
    Null,
    Bool,
}

fn static_of(o: &Operand) -> Static {
    match o {
        Operand::Word(w) => fields::field(w).map_or_else(|| Static::Word(w.clone()), Static::Field),
        Operand::Num(_, u) => Static::Num(u.as_deref().and_then(literal_unit)),
        Operand::Text(t) => Static::Text(t.clone()),
        Operand::Null => Static::Null,
        Operand::Bool(_) => Static::Bool,
    }
}

fn unknown_field(w: &str) -> String {
    format!(
        "no field {w:?}; did you mean {}? (docs/analyze-json.md lists every field)",
        fields::nearest(w, 4).join(", ")
    )
}

/// Checks a comparison against the registry: names, types and units.
fn typecheck(a: &Operand, op: Op, b: &Operand) -> Result<(), String> {
    let (x, y) = (static_of(a), static_of(b));
    let ordered = !matches!(op, Op::Eq | Op::Ne);
    let one = |f: &Field, other: &Static| -> Result<(), String> {
        match (f.unit, other) {
            (_, Static::Null) => Ok(()),
            (Unit::Text(values), Static::Word(t) | Static::Text(t)) => {
                if ordered {
                    Err(format!("{} is a text: it compares only with == and !=", f.name()))
                } else if !values.is_empty() && !values.contains(&t.as_str()) {
                    Err(format!("{} is never {t:?}; it is one of: {}", f.name(), values.join(", ")))
                } else {
                    Ok(())
                }
            }
            (_, Static::Word(w)) => Err(unknown_field(w)),
            (Unit::Text(_), _) => Err(format!("{} is a text; compare it with a word or 'text'", f.name())),
            (Unit::Bool, Static::Bool) if !ordered => Ok(()),
            (Unit::Bool, _) => Err(format!("{} is true/false: compare it with == true or == false", f.name())),
            (_, Static::Text(_) | Static::Bool) => Err(format!("{} is a number, not a text or true/false", f.name())),
            (u, Static::Num(Some((dim, _)))) if field_dim(u).0 != *dim => {
                Err(format!("{} is {} ({}), the literal is {}", f.name(), field_dim(u).0.name(), u.name(), dim.name()))
            }
            (u, Static::Field(g)) if field_dim(u).0 != field_dim(g.unit).0 && g.unit.is_number() => Err(format!(
                "{} is {}, {} is {}",
                f.name(),
                field_dim(u).0.name(),
                g.name(),
                field_dim(g.unit).0.name()
            )),
            _ => Ok(()),
        }
    };
    match (&x, &y) {
        (Static::Field(f), other) => one(f, other),
        (other, Static::Field(f)) => one(f, other),
        (Static::Word(w), _) | (_, Static::Word(w)) => Err(unknown_field(w)),
        _ => Err("compare a field of the report with a value".into()),
    }
}

fn eval(e: &Expr, peer: &Value, seen: &mut Vec<String>) -> Result<bool, GateError> {
    Ok(match e {
        Expr::Or(a, b) => {
            let x = eval(a, peer, seen)?;
            eval(b, peer, seen)? || x
        }
        Expr::And(a, b) => {
            let x = eval(a, peer, seen)?;
            eval(b, peer, seen)? && x
        }
        Expr::Not(a) => !eval(a, peer, seen)?,
        Expr::Cmp(a, op, b) => {
            let x = value(a, peer, seen)?;
            let y = value(b, peer, seen)?;
            compare(&x, *op, &y, a, b)?
        }
    })
}

fn compare(x: &Val, op: Op, y: &Val, a: &Operand, b: &Operand) -> Result<bool, GateError> {
    let show = |o: &Operand| match o {
        Operand::Word(w) => w.clone(),
        Operand::Num(v, u) => format!("{v}{}", u.as_deref().unwrap_or("")),
        Operand::Text(t) => format!("{t:?}"),
        Operand::Null => "null".into(),
        Operand::Bool(b) => b.to_string(),
    };
    let ord = |o: std::cmp::Ordering| match op {
        Op::Lt => o.is_lt(),
        Op::Le => o.is_le(),
        Op::Gt => o.is_gt(),
        Op::Ge => o.is_ge(),
        Op::Eq => o.is_eq(),
        Op::Ne => o.is_ne(),
    };
    Ok(match (x, y) {
        (Val::Null, Val::Null) => matches!(op, Op::Eq | Op::Le | Op::Ge),
        (Val::Null, _) | (_, Val::Null) => op == Op::Ne,
        (Val::Num(p, dp, fp), Val::Num(q, dq, fq)) => {
            // A literal with a unit is in SI (factor 1); a bare literal (factor NaN) is in
            // the other side's unit.
            let (p, q) = match (fp.is_nan(), fq.is_nan()) {
                (true, true) => (*p, *q),
                (true, false) => (*p * fq, *q * fq),
                (false, true) => (*p * fp, *q * fp),
                (false, false) => {
                    if dp != dq {
                        return Err(GateError(format!(
                            "{} {} {}: {} is {}, {} is {}",
                            show(a),
                            op.as_str(),
                            show(b),
                            show(a),
                            dp.name(),
                            show(b),
                            dq.name()
                        )));
                    }
                    (*p * fp, *q * fq)
                }
            };
            p.partial_cmp(&q).is_some_and(ord)
        }
        (Val::Text(p), Val::Text(q)) => match op {
            Op::Eq => p == q,
            Op::Ne => p != q,
            _ => {
                return Err(GateError(format!(
                    "{} {} {}: texts compare only with == and !=",
                    show(a),
                    op.as_str(),
                    show(b)
                )))
            }
        },
        (Val::Bool(p), Val::Bool(q)) => match op {
            Op::Eq => p == q,
            Op::Ne => p != q,
            _ => {
                return Err(GateError(format!(
                    "{} {} {}: true/false compare only with == and !=",
                    show(a),
                    op.as_str(),
                    show(b)
                )))
            }
        },
        _ => {
            return Err(GateError(format!(
                "{} {} {}: cannot compare {} with {}",
                show(a),
                op.as_str(),
                show(b),
                kind(x),
                kind(y)
            )))
        }
    })
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::Null => "null",
        Val::Num(..) => "a number",
        Val::Text(_) => "a text",
        Val::Bool(_) => "true/false",
    }
}

/// A gate that held, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The gate as given.
    pub gate: String,
    /// Which peer (`client ↔ server (file)`), or why no peer could be checked.
    pub peer: String,
    /// The values read.
    pub values: Vec<String>,
}

/// Checks gates against every peer of a JSON report. A report without peers fails every
/// gate (there is nothing to vouch for).
pub fn check(gates: &[Gate], report: &Value) -> Result<Vec<Failure>, GateError> {
    let empty = Vec::new();
    let peers = report.get("peers").and_then(Value::as_array).unwrap_or(&empty);
    let mut out = Vec::new();
    for g in gates {
        if peers.is_empty() {
            out.push(Failure {
                gate: g.source.clone(),
                peer: "no peer pair in the report to check".into(),
                values: Vec::new(),
            });
            continue;
        }
        for p in peers {
            let (holds, values) = g.eval(p)?;
            if holds {
                let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("?");
                out.push(Failure {
                    gate: g.source.clone(),
                    peer: format!("{} ↔ {} ({})", s("client_nid"), s("server_nid"), s("file")),
                    values,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn peer() -> Value {
        json!({
            "client_nid": "10.0.0.1@tcp", "server_nid": "10.0.0.2@tcp", "file": "a.pcap",
            "throughput_bytes_per_s": 127e6,
            "binding_limit": "lnet_credits",
            "rtt_us": {"min": 50000.0, "p50": 51000.0},
            "latency_us": {"p99": null},
            "tcp": {"retransmits": 3, "cwnd_estimate_max": 8_000_000},
            "model": {"efficiency": 0.77, "steady_state": true},
            "advice": [{"setting": "x"}],
        })
    }

    fn holds(src: &str) -> bool {
        Gate::parse(src).unwrap().eval(&peer()).unwrap().0
    }

    #[test]
    fn comparisons_units_and_aliases() {
        assert!(holds("efficiency < 0.8"));
        assert!(!holds("efficiency < 0.7"));
        assert!(holds("efficiency < 80%"));
        assert!(holds("binding_limit == lnet_credits"));
        assert!(holds("binding_limit != 'rpc_window'"));
        assert!(holds("throughput < 130MB/s") && !holds("throughput < 1Gbit"));
        assert!(holds("throughput >= 127000000"));
        assert!(holds("rtt > 50ms") && !holds("rtt > 52ms") && holds("rtt_us.p50 == 51000"));
        assert!(holds("rtt_min <= 50000us"));
        assert!(holds("cwnd > 7.9MB") && holds("cwnd < 8MiB"));
        assert!(holds("retransmits > 0 and not steady_state == false"));
        assert!(holds("advice > 0"));
        assert!(holds("(efficiency > 0.9 or retransmits >= 3) and binding_limit == lnet_credits"));
    }

    #[test]
    fn null_is_unknown() {
        assert!(!holds("latency_p99 > 1ms"));
        assert!(!holds("latency_p99 < 1ms"));
        assert!(holds("latency_p99 == null"));
        assert!(holds("latency_p99 != 5"));
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = Gate::parse("efficiency <").unwrap_err().0;
        assert!(e.contains("at the end") && e.contains("expected a field"), "{e}");
        let e = Gate::parse("efficiency ~ 3").unwrap_err().0;
        assert!(e.contains("character 12"), "{e}");
        let e = Gate::parse("rtt > 5 parsecs").unwrap_err().0;
        assert!(e.contains("expected and, or"), "{e}");
        let e = Gate::parse("rtt > 5fortnights").unwrap_err().0;
        assert!(e.contains("unknown unit"), "{e}");
        let e = Gate::parse("efficiency < 0.8 and").unwrap_err().0;
        assert!(e.contains("at the end"), "{e}");
        let e = Gate::parse("effciency < 0.8").unwrap_err().0;
        assert!(e.contains("no field \"effciency\"") && e.contains("did you mean efficiency"), "{e}");
        let e = Gate::parse("rtt_typo > 1ms").unwrap_err().0;
        assert!(e.contains("character 1") && e.contains("did you mean rtt,"), "{e}");
        let e = Gate::parse("efficiency < 0.9 and 1ms < rtt_typo").unwrap_err().0;
        assert!(e.contains("character 22") && e.contains("no field \"rtt_typo\""), "{e}");
        let e = Gate::parse("rtt > 5MB").unwrap_err().0;
        assert!(e.contains("a duration") && e.contains("a size"), "{e}");
        let e = Gate::parse("rtt > throughput").unwrap_err().0;
        assert!(e.contains("a duration") && e.contains("a rate"), "{e}");
        let e = Gate::parse("binding_limit > lnet_credits").unwrap_err().0;
        assert!(e.contains("only with == and !="), "{e}");
        let e = Gate::parse("binding_limit == lnet_credit").unwrap_err().0;
        assert!(e.contains("never \"lnet_credit\"") && e.contains("lnet_credits"), "{e}");
        let e = Gate::parse("steady_state > 1").unwrap_err().0;
        assert!(e.contains("true/false"), "{e}");
        let e = Gate::parse("rtt_us > 3").unwrap_err().0;
        assert!(e.contains("did you mean") && e.contains("rtt_us."), "{e}");
        let e = Gate::parse("3 > 2").unwrap_err().0;
        assert!(e.contains("compare a field"), "{e}");
        // Every name and word the gates of the README and docs use parses.
        for g in [
            "rpcs_by_opcode.OST_WRITE > 0",
            "missing.reply > 0",
            "capture_point.side == client",
            "rate.binding == server",
            "binding_limit == 'none (no bulk traffic)'",
        ] {
            Gate::parse(g).unwrap();
        }
    }

    #[test]
    fn a_field_the_peer_lacks_is_unknown() {
        assert!(!holds("rate.rpcs_per_s > 0") && holds("rate.rpcs_per_s == null"));
        assert!(!holds("rpcs_by_opcode.OST_WRITE > 0"));
    }

    #[test]
    fn check_reports_peer_and_values_and_fails_without_peers() {
        let r = json!({"peers": [peer()]});
        let f = check(&[Gate::parse("efficiency < 0.8").unwrap()], &r).unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].peer, "10.0.0.1@tcp ↔ 10.0.0.2@tcp (a.pcap)");
        assert_eq!(f[0].values, vec!["efficiency (model.efficiency) = 0.77".to_string()]);
        assert!(check(&[Gate::parse("efficiency < 0.5").unwrap()], &r).unwrap().is_empty());
        let f = check(&[Gate::parse("efficiency < 0.5").unwrap()], &json!({"peers": []})).unwrap();
        assert_eq!(f.len(), 1, "no peers: the gate fails");
    }
}
