//! `lnetcap diff base.json new.json`: what changed between two JSON reports of the same
//! captures (a fixture before and after a change, a nightly run against last week's), per
//! peer and metric, and which changes are regressions.
//!
//! Peers are matched by client NID, server NID and the file's name (its last path
//! component, so the same fixture under another directory matches). A metric regresses
//! when it moves the wrong way by more than its tolerance; `--tolerance NAME=5%` (relative)
//! or `NAME=0.02` (absolute, in the field's own unit) replaces a default. A peer missing
//! from the new report, fewer complete RPCs, or another binding limit are regressions too.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::gate::lookup;

use lnetcap_analysis::fields::{self, Field, Unit, PEER_FIELDS};
pub use lnetcap_analysis::fields::{Better, Tolerance};

/// The fields compared by default (those the registry gives a tolerance), in the order
/// of the report.
pub fn default_metrics() -> impl Iterator<Item = &'static Field> {
    PEER_FIELDS.iter().filter(|f| f.diff.is_some())
}

/// Parses `NAME=5%` or `NAME=0.02`. NAME is a field of the registry with one value per
/// peer (an alias or a key path, docs/analyze-json.md); a field compared by default gets
/// another tolerance, any other numeric field is compared too.
pub fn parse_tolerance(s: &str) -> Result<(String, Tolerance), String> {
    let (name, v) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected NAME=VALUE, like throughput=5%"))?;
    let name = name.trim();
    match fields::field(name) {
        Some(f) if f.unit.is_number() && !f.path.contains('*') => {}
        Some(f) => return Err(format!("{s:?}: {name} is {}, not a number to compare", f.unit.name())),
        None => {
            return Err(format!(
                "{s:?}: no metric {name:?}; did you mean {}? (compared by default: {})",
                fields::nearest(name, 3).join(", "),
                default_metrics().map(Field::name).collect::<Vec<_>>().join(", ")
            ))
        }
    }
    let v = v.trim();
    let t = if let Some(p) = v.strip_suffix('%') {
        Tolerance::Relative(p.trim().parse::<f64>().map_err(|_| format!("{s:?}: {p:?} is not a number"))? / 100.0)
    } else {
        Tolerance::Absolute(v.parse::<f64>().map_err(|_| format!("{s:?}: {v:?} is not a number"))?)
    };
    match t {
        Tolerance::Relative(x) | Tolerance::Absolute(x) if !(x >= 0.0 && x.is_finite()) => {
            Err(format!("{s:?}: a tolerance is a finite number ≥ 0"))
        }
        _ => Ok((name.to_string(), t)),
    }
}

/// What a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within tolerance.
    Same,
    /// Moved the right way beyond tolerance.
    Better,
    /// Moved beyond tolerance where no way is better.
    Changed,
    /// Moved the wrong way beyond tolerance (or a peer, RPCs or the limit were lost).
    Regression,
}

/// One compared value.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The peer: `client ↔ server (file name)`.
    pub peer: String,
    /// Metric name.
    pub metric: String,
    /// Base value (JSON, null when absent).
    pub base: Value,
    /// New value.
    pub new: Value,
    /// Relative change (new / base − 1), when both are numbers and base ≠ 0.
    pub change: Option<f64>,
    /// Tolerance applied.
    pub tolerance: Option<String>,
    /// Verdict.
    pub verdict: Verdict,
}

/// The result of a diff.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// Every compared value, peer by peer.
    pub rows: Vec<Row>,
    /// Rows with a regression.
    pub regressions: usize,
}

fn file_name(p: &Value) -> String {
    let f = p.get("file").and_then(Value::as_str).unwrap_or("");
    f.rsplit(['/', '\\']).next().unwrap_or(f).to_string()
}

fn peer_key(p: &Value) -> (String, String, String) {
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    (s("client_nid"), s("server_nid"), file_name(p))
}

fn label(k: &(String, String, String)) -> String {
    format!("{} ↔ {} ({})", k.0, k.1, k.2)
}

fn judge(m: &Field, tol: Tolerance, b: f64, n: f64) -> Verdict {
    let delta = n - b;
    let allowed = match tol {
        Tolerance::Relative(r) => r * b.abs(),
        Tolerance::Absolute(a) => a,
    };
    if delta.abs() <= allowed + 1e-12 * b.abs().max(1.0) {
        return Verdict::Same;
    }
    match (m.better, delta > 0.0) {
        (Better::Neither, _) => Verdict::Changed,
        (Better::Higher, true) | (Better::Lower, false) => Verdict::Better,
        _ => Verdict::Regression,
    }
}

/// Compares two JSON reports.
pub fn diff(base: &Value, new: &Value, tolerances: &BTreeMap<String, Tolerance>) -> Diff {
    let empty = Vec::new();
    let peers = |r: &Value| -> BTreeMap<(String, String, String), Value> {
        r.get("peers").and_then(Value::as_array).unwrap_or(&empty).iter().map(|p| (peer_key(p), p.clone())).collect()
    };
    let (bp, np) = (peers(base), peers(new));
    // The default metrics with their tolerance (or the one given), then the fields given
    // a tolerance that are not compared by default.
    let given = |f: &Field| tolerances.get(f.name()).or_else(|| tolerances.get(f.path)).copied();
    let mut metrics: Vec<(&Field, Tolerance)> =
        default_metrics().map(|f| (f, given(f).or(f.diff).unwrap_or(Tolerance::Absolute(0.0)))).collect();
    for f in PEER_FIELDS.iter().filter(|f| f.diff.is_none()) {
        if let Some(t) = given(f) {
            metrics.push((f, t));
        }
    }
    let mut rows = Vec::new();
    for (k, b) in &bp {
        let Some(n) = np.get(k) else {
            rows.push(Row {
                peer: label(k),
                metric: "peer".into(),
                base: Value::from("present"),
                new: Value::Null,
                change: None,
                tolerance: None,
                verdict: Verdict::Regression,
            });
            continue;
        };
        for (m, tol) in &metrics {
            let (m, tol) = (*m, *tol);
            let (bv, nv) =
                (lookup(b, m.path).cloned().unwrap_or(Value::Null), lookup(n, m.path).cloned().unwrap_or(Value::Null));
            let (verdict, change) = match (bv.as_f64(), nv.as_f64()) {
                (Some(x), Some(y)) => (judge(m, tol, x, y), (x != 0.0).then(|| y / x - 1.0)),
                (None, None) => (Verdict::Same, None),
                // A value that became unknown (or known) is a change, not a number.
                _ => (if m.better == Better::Neither { Verdict::Changed } else { Verdict::Regression }, None),
            };
            rows.push(Row {
                peer: label(k),
                metric: m.name().into(),
                base: bv,
                new: nv,
                change,
                tolerance: Some(tol.to_string()),
                verdict,
            });
        }
        let (bl, nl) = (
            b.get("binding_limit").cloned().unwrap_or(Value::Null),
            n.get("binding_limit").cloned().unwrap_or(Value::Null),
        );
        rows.push(Row {
            peer: label(k),
            metric: "binding_limit".into(),
            verdict: if bl == nl { Verdict::Same } else { Verdict::Regression },
            base: bl,
            new: nl,
            change: None,
            tolerance: None,
        });
        let advice = |p: &Value| -> Value {
            let v: Vec<String> = p
                .get("advice")
                .and_then(Value::as_array)
                .unwrap_or(&empty)
                .iter()
                .map(|a| format!("{}={}", a["setting"].as_str().unwrap_or("?"), a["value"].as_str().unwrap_or("?")))
                .collect();
            Value::from(v.join("; "))
        };
        let (ba, na) = (advice(b), advice(n));
        rows.push(Row {
            peer: label(k),
            metric: "advice".into(),
            verdict: if ba == na { Verdict::Same } else { Verdict::Changed },
            base: ba,
            new: na,
            change: None,
            tolerance: None,
        });
    }
    for k in np.keys().filter(|k| !bp.contains_key(*k)) {
        rows.push(Row {
            peer: label(k),
            metric: "peer".into(),
            base: Value::Null,
            new: Value::from("present"),
            change: None,
            tolerance: None,
            verdict: Verdict::Changed,
        });
    }
    let regressions = rows.iter().filter(|r| r.verdict == Verdict::Regression).count();
    Diff { rows, regressions }
}

/// A value in its metric's unit: rates as MB/s, durations as ms or µs.
fn show(metric: &str, v: &Value) -> String {
    if let (Some(x), Some(f)) = (v.as_f64(), fields::field(metric)) {
        match f.unit {
            Unit::BytesPerS => return format!("{}/s", crate::fmt::bytes(x)),
            Unit::Bytes => return crate::fmt::bytes(x),
            u => {
                if let Some(secs) = u.seconds() {
                    return crate::fmt::ms(Some(x * secs * 1e6));
                }
            }
        }
    }
    match v {
        Value::Null => "-".into(),
        Value::String(s) if s.is_empty() => "none".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(x) if n.is_f64() && x.abs() >= 1e5 => format!("{x:.4e}"),
            Some(x) if n.is_f64() => format!("{x:.4}"),
            _ => n.to_string(),
        },
        v => v.to_string(),
    }
}

/// The diff as text: changed rows (all rows with `all`), then a verdict line.
pub fn write_text(out: &mut impl std::io::Write, d: &Diff, all: bool) -> std::io::Result<()> {
    let mut last_peer = "";
    let mut shown = 0;
    for r in &d.rows {
        if !all && r.verdict == Verdict::Same {
            continue;
        }
        if r.peer != last_peer {
            writeln!(out, "peer {}", r.peer)?;
            last_peer = &r.peer;
        }
        let verdict = match r.verdict {
            Verdict::Same => "same",
            Verdict::Better => "better",
            Verdict::Changed => "changed",
            Verdict::Regression => "REGRESSION",
        };
        writeln!(
            out,
            "  {:<14} {:>14} -> {:<14} {:>8}  {verdict}{}",
            r.metric,
            show(&r.metric, &r.base),
            show(&r.metric, &r.new),
            r.change.map_or(String::new(), |c| format!("{:+.1}%", c * 100.0)),
            r.tolerance.as_ref().map_or(String::new(), |t| format!(" (tolerance {t})"))
        )?;
        shown += 1;
    }
    if shown == 0 {
        writeln!(out, "no change beyond the tolerances ({} values compared)", d.rows.len())?;
    }
    if d.regressions > 0 {
        writeln!(out, "{} regression{}", d.regressions, if d.regressions == 1 { "" } else { "s" })?;
    } else {
        writeln!(out, "no regression")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(thr: f64, eff: f64, rpcs: u64, limit: &str, file: &str) -> Value {
        json!({"peers": [{
            "client_nid": "c@tcp", "server_nid": "s@tcp", "file": file,
            "throughput_bytes_per_s": thr, "rpcs": rpcs, "rpcs_partial": 0,
            "latency_us": {"p50": 1000.0, "p99": 2000.0},
            "rtt_us": {"p50": 20000.0}, "rpcs_in_flight": {"steady_mean": 8.0},
            "tcp": {"retransmits": 0}, "model": {"efficiency": eff, "t_model_bytes_per_s": 2e8},
            "binding_limit": limit, "advice": []
        }]})
    }

    fn verdict(d: &Diff, metric: &str) -> Verdict {
        d.rows.iter().find(|r| r.metric == metric).unwrap().verdict
    }

    #[test]
    fn tolerances_and_directions() {
        let none = BTreeMap::new();
        let base = report(100e6, 0.9, 100, "rpc_window", "fixtures/a.pcap");
        // Same capture under another directory: matched by file name.
        let d = diff(&base, &report(96e6, 0.9, 100, "rpc_window", "/tmp/x/a.pcap"), &none);
        assert_eq!(verdict(&d, "throughput"), Verdict::Same, "-4 % within 5 %");
        assert_eq!(d.regressions, 0);
        let d = diff(&base, &report(94e6, 0.9, 100, "rpc_window", "a.pcap"), &none);
        assert_eq!(verdict(&d, "throughput"), Verdict::Regression, "-6 %");
        assert_eq!(d.regressions, 1);
        let d = diff(&base, &report(110e6, 0.96, 100, "rpc_window", "a.pcap"), &none);
        assert_eq!((verdict(&d, "throughput"), verdict(&d, "efficiency")), (Verdict::Better, Verdict::Better));
        let d = diff(&base, &report(100e6, 0.9, 99, "lnet_credits", "a.pcap"), &none);
        assert_eq!((verdict(&d, "rpcs"), verdict(&d, "binding_limit")), (Verdict::Regression, Verdict::Regression));
        let tol: BTreeMap<String, Tolerance> = [parse_tolerance("throughput=10%").unwrap()].into_iter().collect();
        let d = diff(&base, &report(94e6, 0.9, 100, "rpc_window", "a.pcap"), &tol);
        assert_eq!(verdict(&d, "throughput"), Verdict::Same, "-6 % within 10 %");
        let d = diff(&base, &json!({"peers": []}), &none);
        assert_eq!((verdict(&d, "peer"), d.regressions), (Verdict::Regression, 1), "a lost peer");
    }

    #[test]
    fn tolerance_parsing() {
        assert_eq!(parse_tolerance("throughput=5%").unwrap().1, Tolerance::Relative(0.05));
        assert_eq!(parse_tolerance("efficiency=0.02").unwrap().1, Tolerance::Absolute(0.02));
        let e = parse_tolerance("thruput=5%").unwrap_err();
        assert!(e.contains("no metric") && e.contains("did you mean throughput"), "{e}");
        assert_eq!(parse_tolerance("tcp.dup_acks=3").unwrap().0, "tcp.dup_acks");
        assert!(parse_tolerance("binding_limit=1").unwrap_err().contains("not a number"));
        assert!(parse_tolerance("throughput").unwrap_err().contains("NAME=VALUE"));
        assert!(parse_tolerance("throughput=-1").is_err());
    }
}
