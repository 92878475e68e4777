//! lnetcap-synth: deterministic (seeded) scenario captures of socklnd / LNet / PtlRPC
//! traffic, each with a ground-truth file listing every message and every RPC.
//!
//! The same seed and options give the same bytes on every machine ([`rng::Rng`] is
//! SplitMix64, specified here). Bytes on the wire come from `lnetcap_lnet::wire`'s emitters;
//! the truth records are written from the generator's own state (never by decoding the
//! capture), so they are an independent oracle for the decoder.

pub mod attack;
pub mod pcapw;
pub mod rng;
pub mod sim;

pub use pcapw::{Container, Link};
pub use sim::{CaptureAt, Config, Output, Sim, Workload};

/// A named scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name (`lnetcap synth --scenario NAME`).
    pub name: &'static str,
    /// What it shows.
    pub about: &'static str,
}

/// Every scenario, in the order `--help` lists them.
pub const SCENARIOS: &[Scenario] = &[
    Scenario { name: "lst-write", about: "LNet selftest brw write, 1 client, 1 server, 64 KiB, full payload" },
    Scenario { name: "lst-read", about: "LNet selftest brw read, 1 client, 1 server, 64 KiB, full payload" },
    Scenario { name: "ost-write", about: "PtlRPC OST_WRITE of 1-4 MiB (multi-MD bulk), header-only capture (snaplen 256)" },
    Scenario { name: "ost-read", about: "PtlRPC OST_READ of 4 MiB (4 LNet PUTs + LNet ACKs), header-only capture" },
    Scenario { name: "ost-small", about: "PtlRPC OST_READ/OST_WRITE with 32 KiB bulk, full payload" },
    Scenario { name: "metadata", about: "MDS_GETATTR (some -ENOENT), LDLM_ENQUEUE with early replies, MDS_REINT difficult reply + LNet ACK, OBD_PING, LNet ping" },
    Scenario { name: "multi", about: "3 clients x 2 servers, mixed BRW and metadata, header-only" },
    Scenario { name: "hello-versions", about: "4 clients speaking socklnd V1, V2, V3 and V4 (IPv6, nid16)" },
    Scenario { name: "cpp2", about: "conns_per_peer 2: two BULK_IN and two BULK_OUT connections" },
    Scenario { name: "lossy", about: "1 % loss, reordering and duplicates, capture at the client" },
    Scenario { name: "midstream", about: "capture starts in the middle of the run (no SYN, no HELLO)" },
    Scenario { name: "tso", about: "TSO super-segments on the capturing host, pcapng, Linux SLL2" },
    Scenario { name: "ipv6", about: "one IPv6 peer (socklnd V4, connreq v2), full payload" },
    Scenario { name: "wrap", about: "sequence numbers wrapping past 2^32 inside the capture" },
    Scenario { name: "credits", about: "selftest read, 32 RPCs in flight, peer_credits 8, 20 ms RTT, header-only (credit-limited)" },
    Scenario { name: "bench", about: "large header-only capture for benchmarks (hundreds of thousands of packets)" },
];

/// The configuration of a named scenario, or `None` when the name is unknown.
pub fn scenario(name: &str) -> Option<Config> {
    let base = Config::default();
    Some(match name {
        "lst-write" => Config {
            workload: Workload::LstBrw { write: true, size: 64 << 10 },
            rpcs_per_client: 12,
            concurrency: 4,
            ..base
        },
        "lst-read" => Config {
            workload: Workload::LstBrw { write: false, size: 64 << 10 },
            rpcs_per_client: 12,
            concurrency: 4,
            ..base
        },
        "ost-write" => Config {
            workload: Workload::OstBrw { write: true, size: 4 << 20 },
            rpcs_per_client: 12,
            concurrency: 8,
            snaplen: 256,
            mtu: 9000,
            ..base
        },
        "ost-read" => Config {
            workload: Workload::OstBrw { write: false, size: 4 << 20 },
            rpcs_per_client: 12,
            concurrency: 8,
            snaplen: 256,
            mtu: 9000,
            ..base
        },
        "ost-small" => Config {
            workload: Workload::OstBrw { write: false, size: 32 << 10 },
            rpcs_per_client: 10,
            concurrency: 4,
            ..base
        },
        "metadata" => {
            Config { workload: Workload::Metadata, rpcs_per_client: 24, concurrency: 4, service_ns: 400_000, ..base }
        }
        "multi" => Config {
            clients: 3,
            servers: 2,
            workload: Workload::Mixed,
            rpcs_per_client: 10,
            concurrency: 4,
            snaplen: 256,
            mtu: 9000,
            ..base
        },
        _ => return condition_scenario(name),
    })
}

/// Scenarios of one condition each (versions, connections per peer, loss, mid-stream,
/// TSO, IPv6, sequence wrap, credits) and the benchmark's.
fn condition_scenario(name: &str) -> Option<Config> {
    let base = Config::default();
    Some(match name {
        "hello-versions" => Config {
            clients: 4,
            protos: vec![1, 2, 3, 4],
            workload: Workload::LstBrw { write: true, size: 32 << 10 },
            rpcs_per_client: 4,
            concurrency: 2,
            ..base
        },
        "cpp2" => Config {
            conns_per_peer: 2,
            workload: Workload::LstBrw { write: false, size: 1 << 20 },
            rpcs_per_client: 16,
            concurrency: 8,
            snaplen: 256,
            mtu: 9000,
            ..base
        },
        "lossy" => Config {
            workload: Workload::LstBrw { write: true, size: 64 << 10 },
            rpcs_per_client: 12,
            concurrency: 4,
            loss: 0.01,
            reorder: 0.01,
            duplicate: 0.01,
            capture_at: CaptureAt::Client,
            ..base
        },
        "midstream" => Config {
            workload: Workload::OstBrw { write: true, size: 1 << 20 },
            rpcs_per_client: 16,
            concurrency: 4,
            snaplen: 256,
            mtu: 9000,
            midstream: Some(0.4),
            ..base
        },
        "tso" => Config {
            workload: Workload::LstBrw { write: false, size: 1 << 20 },
            rpcs_per_client: 8,
            concurrency: 4,
            snaplen: 256,
            tso: true,
            link: Link::Sll2,
            container: Container::PcapNg,
            ..base
        },
        "ipv6" => Config {
            protos: vec![4],
            workload: Workload::OstBrw { write: true, size: 48 << 10 },
            rpcs_per_client: 8,
            concurrency: 4,
            ..base
        },
        "wrap" => Config {
            workload: Workload::LstBrw { write: true, size: 256 << 10 },
            rpcs_per_client: 12,
            concurrency: 4,
            snaplen: 256,
            isn_near_wrap: true,
            container: Container::PcapNs,
            ..base
        },
        "credits" => Config {
            workload: Workload::LstBrw { write: false, size: 1 << 20 },
            rpcs_per_client: 384,
            concurrency: 32,
            peer_credits: 8,
            rtt_ns: 20_000_000,
            rate_bps: 10e9,
            snaplen: 256,
            mtu: 9000,
            link: Link::Raw,
            ..base
        },
        "bench" => Config {
            clients: 4,
            servers: 2,
            workload: Workload::Mixed,
            rpcs_per_client: 400,
            concurrency: 8,
            snaplen: 256,
            mtu: 1500,
            ..base
        },
        _ => return None,
    })
}

/// Runs a scenario configuration with a seed.
pub fn generate(name: &str, cfg: Config, seed: u64) -> Output {
    Sim::new(cfg, seed).run(name, seed)
}
