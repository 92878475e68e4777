//! The rules of thumb the verdict rests on, named, with where each number comes from.
//! lnetcap-analysis applies them to what the capture showed; each is unit-tested here.

/// A steady window shorter than this many round trips is dominated by TCP slow start and
/// the first RPCs: its verdict is flagged (`steady_state: false`).
pub const STEADY_MIN_RTTS: f64 = 10.0;

/// Whether a steady window of `window_ns` spans at least [`STEADY_MIN_RTTS`] round trips
/// of `rtt_us`.
pub fn steady_state(window_ns: Option<[i64; 2]>, rtt_us: f64) -> bool {
    window_ns.is_some_and(|[a, b]| rtt_us > 0.0 && (b - a) as f64 >= STEADY_MIN_RTTS * rtt_us * 1000.0)
}

/// A congestion-window estimate that grows by more than this factor from one interval to
/// the next (or over the steady window) is a window still opening: congestion control at
/// work, not a settled window.
pub const WINDOW_OPENING: f64 = 1.1;

/// Whether the window grew from `before` to `after` by more than [`WINDOW_OPENING`].
pub fn window_opening(before: u64, after: u64) -> bool {
    after as f64 > WINDOW_OPENING * before as f64
}

/// Measurement slack between two rates of the same capture (averaging windows differ, so
/// the observed rate can exceed the best 1 s rate or a nominal link rate by a few percent):
/// a rate up to this factor above another is not above it.
pub const RATE_SLACK: f64 = 1.05;

/// Whether `observed` is not above `rate`, within [`RATE_SLACK`].
pub fn within_rate(observed: f64, rate: f64) -> bool {
    observed <= RATE_SLACK * rate
}

/// The largest LNet message (LNET_MTU, 1 MiB): a bulk RPC larger than this moves in
/// several messages, each holding one credit.
pub const LNET_MTU_BYTES: f64 = 1_048_576.0;

/// Bytes one bulk message of an RPC of `rpc_bytes` carries.
pub fn bulk_message_bytes(rpc_bytes: f64) -> f64 {
    rpc_bytes.min(LNET_MTU_BYTES)
}

/// Messages holding credits are on the wire: k of them put about k × their size in flight.
/// Under this share of that, the messages queued behind a slower path instead.
pub const CREDITS_ON_WIRE: f64 = 0.5;

/// Whether `flight` bytes in flight at most shows `k` credits' messages of `msg_bytes`
/// on the wire (at least [`CREDITS_ON_WIRE`] of k × size).
pub fn credits_on_wire(flight: f64, k: f64, msg_bytes: f64) -> bool {
    flight >= CREDITS_ON_WIRE * k * msg_bytes
}

/// A read's reply that leaves within this share of the RTT floor after its bulk (at the
/// quickest RPC; the mean within twice that) follows the data at once: no zero-copy ACK
/// or LNet ACK awaited, so the RPC costs one round trip, not two.
pub const REPLY_BEHIND_BULK: f64 = 0.25;

/// Round trips an RPC costs: 1 for reads whose reply follows the bulk at once
/// (bulk end → reply `server_min_us` under [`REPLY_BEHIND_BULK`] of the floor, the mean
/// `server_mean_us` under twice that), else seed 000's 2 (½ request, 1 bulk, ½ reply).
pub fn round_trips(reads: bool, server_min_us: Option<f64>, server_mean_us: Option<f64>, floor_us: Option<f64>) -> f64 {
    match (server_min_us, server_mean_us, floor_us) {
        (Some(min), Some(mean), Some(floor))
            if reads && min < REPLY_BEHIND_BULK * floor && mean < 2.0 * REPLY_BEHIND_BULK * floor =>
        {
            1.0
        }
        _ => 2.0,
    }
}

/// A read's bulk end → reply of at least this share of the two loops (client and server)
/// waited for the bulk's acknowledgement (the loops' jitter allowed).
pub const ACK_WAIT_SHARE: f64 = 0.8;

/// Whether a bulk end → reply of `after_us` waited for the bulk's acknowledgement over
/// loops `client_loop_us` + `server_loop_us`.
pub fn waited_for_bulk_ack(after_us: f64, client_loop_us: f64, server_loop_us: f64) -> bool {
    after_us >= ACK_WAIT_SHARE * (client_loop_us + server_loop_us)
}

/// A flight under this share of what was offered per round trip (by the RPC window, the
/// credits, or the receive window) is the sender's own limit at work, not the offer's:
/// a flight that reaches 85 % of the offer is application-limited (the offer's rounding
/// and the ACK clock keep the flight a little below it).
pub const APP_LIMITED_SHARE: f64 = 0.85;

/// Whether a flight of `flight` bytes stayed below [`APP_LIMITED_SHARE`] of `offered`.
pub fn below_offered(flight: f64, offered: f64) -> bool {
    flight < APP_LIMITED_SHARE * offered
}

/// Bounds within this factor of the smallest are ties: the verdict goes to the link, then
/// the LNet credits, then the RPC window (the setting an admin can act on first).
pub const BOUND_TIE: f64 = 1.05;

/// Below this share of a given `--link-rate`, a path seen full is held by something
/// slower than the link (a hop, a rate limit, the hosts): its best rate is the bound.
pub const FULL_BELOW_LINK: f64 = 0.8;

/// The window over which the best sustained rate is taken, in intervals: 1 s of them, or
/// a third of the active period when that is shorter, at least one.
pub fn best_rate_window(interval_ns: i64, intervals: usize) -> usize {
    let per_s = (1e9 / interval_ns.max(1) as f64).round() as usize;
    per_s.min(intervals / 3).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_needs_ten_round_trips() {
        // 20 ms RTT: 200 ms of steady window is ten round trips, 199 ms is not.
        assert!(steady_state(Some([0, 200_000_000]), 20_000.0));
        assert!(!steady_state(Some([0, 199_000_000]), 20_000.0));
        assert!(!steady_state(None, 20_000.0) && !steady_state(Some([0, 1]), 0.0));
    }

    #[test]
    fn opening_slack_and_mtu() {
        assert!(window_opening(1000, 1101) && !window_opening(1000, 1100));
        assert!(within_rate(105.0, 100.0) && !within_rate(105.1, 100.0));
        assert_eq!(bulk_message_bytes(4.0 * LNET_MTU_BYTES), LNET_MTU_BYTES);
        assert_eq!(bulk_message_bytes(65536.0), 65536.0);
    }

    #[test]
    fn credits_on_the_wire() {
        // 8 credits of 1 MiB: 4 MiB in flight shows them, less does not.
        assert!(credits_on_wire(4.0 * LNET_MTU_BYTES, 8.0, LNET_MTU_BYTES));
        assert!(!credits_on_wire(4.0 * LNET_MTU_BYTES - 1.0, 8.0, LNET_MTU_BYTES));
    }

    #[test]
    fn one_round_trip_only_for_reads_whose_reply_follows_the_bulk() {
        let floor = Some(20_000.0);
        assert_eq!(round_trips(true, Some(100.0), Some(300.0), floor), 1.0);
        assert_eq!(round_trips(false, Some(100.0), Some(300.0), floor), 2.0, "writes: the bulk is acknowledged");
        assert_eq!(round_trips(true, Some(5_000.0), Some(6_000.0), floor), 2.0, "a quarter of the floor");
        assert_eq!(round_trips(true, Some(100.0), Some(10_000.0), floor), 2.0, "the mean at half the floor");
        assert_eq!(round_trips(true, None, Some(300.0), floor), 2.0);
    }

    #[test]
    fn application_limited_below_85_percent() {
        assert!(below_offered(84.9, 100.0) && !below_offered(85.0, 100.0));
    }

    #[test]
    fn ack_wait_and_best_window() {
        assert!(waited_for_bulk_ack(16_000.0, 10_000.0, 10_000.0));
        assert!(!waited_for_bulk_ack(15_999.0, 10_000.0, 10_000.0));
        // 100 ms intervals: 10 per second, or a third of a short capture.
        assert_eq!(best_rate_window(100_000_000, 100), 10);
        assert_eq!(best_rate_window(100_000_000, 12), 4);
        assert_eq!(best_rate_window(100_000_000, 2), 1);
    }
}
