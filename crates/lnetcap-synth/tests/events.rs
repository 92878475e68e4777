//! The simulator's work stays proportional to the traffic it writes: a link scheduled
//! twice used to multiply its wake-ups until a run of the `bench` scenario stopped at the
//! event limit a third of the way in.

use lnetcap_synth::{generate, scenario};

#[test]
fn events_stay_proportional_to_packets_and_every_rpc_completes() {
    let mut cfg = scenario("bench").unwrap();
    cfg.rpcs_per_client = 12;
    let out = generate("bench", cfg, 1);
    assert_eq!(out.stopped_at_ns, None);
    // A packet costs a send, an arrival and a share of an ACK and a link wake-up.
    assert!(out.events < 6 * out.packets as u64, "{} events for {} packets", out.events, out.packets);
    let rpcs: Vec<_> = out.truth.iter().filter(|r| r["type"] == "rpc").collect();
    assert_eq!(rpcs.len(), 4 * 12, "4 clients × 12 RPCs");
    assert!(rpcs.iter().all(|r| r["completed"] == true));
}
