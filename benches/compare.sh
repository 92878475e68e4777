#!/usr/bin/env bash
# lnetcap against tshark and tcptrace on the same generated captures, in one run: wall time,
# packets/s, GB/s and peak RSS of each whole process (median wall time of RUNS runs, the
# largest peak RSS of them), and the ratios to tcptrace. Machines are shared and noisy:
# compare the ratios, which come from one run, not absolute times across runs.
#
#   bash benches/compare.sh [--quick]
#
# Environment: PROFILE (cargo profile, default dist), RUNS (default 5; 3 for the
# full-payload capture), TMPDIR (where the captures
# are written: the full-payload one takes FULL_GB, default 6, GB; removed at exit),
# FULL_GB, HEADER_RPCS (default 130: 1.15 M packets), TSHARK_FULL=1 to time tshark on the
# full-payload capture too (minutes). --quick: 1 run each, a 0.5 GB full-payload capture.
#
# Captures, written by `lnetcap synth` (deterministic):
#   header-only   --scenario bench --rpcs 130: 4 clients x 2 servers, mixed 1-4 MiB BRW and
#                 metadata, MTU 1500, snaplen 256 (1,149,888 packets, 238 MB)
#   full-payload  the same workload with snaplen 65535, as many RPCs as make FULL_GB
# Commands (the page cache is warmed with the file first, so every tool reads from memory):
#   lnetcap decode --format jsonl FILE > /dev/null  every message, PtlRPC bodies decoded
#   lnetcap analyze -q --threads 1 --json OUT FILE  decode + TCP behaviour + RPCs + model
#   lnetcap analyze -q --json OUT FILE              the same on every core (--threads nproc)
#   tshark -r FILE -T fields -e frame.number -e lnet.msg_type -e lnet.msg_dst_match_bits
#          -e lnet.ptl_index -e lnet.payload_length  (Wireshark's LNet dissector)
#   tcptrace -l -r -n FILE                          TCP statistics only, no LNet decoding
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[[ ${1:-} == --quick ]] && quick=1
runs=${RUNS:-5}
full_gb=${FULL_GB:-6}
if ((quick)); then runs=1; full_gb=0.5; fi
for t in tshark tcptrace python3; do
  command -v $t >/dev/null || { echo "compare.sh needs $t (apt-get install -y $t)" >&2; exit 1; }
done
# The dist profile (fat LTO, one codegen unit): the binary one installs. PROFILE=release
# times the test build instead.
profile=${PROFILE:-dist}
cargo build --profile "$profile" --quiet
bin=$PWD/target/$profile/lnetcap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One full-payload bench RPC per client writes about 9.12 MB (measured: --rpcs 120 gives
# 1,094 MB).
"$bin" synth --scenario bench --rpcs "${HEADER_RPCS:-130}" -o "$tmp/header.pcap" --truth "$tmp/h.truth" 2>/dev/null
full_rpcs=$(python3 -c "print(max(1, round($full_gb * 1e9 / 9.12e6)))")
"$bin" synth --scenario bench --rpcs "$full_rpcs" --snaplen 65535 -o "$tmp/full.pcap" --truth "$tmp/f.truth" 2>/dev/null
rm -f "$tmp"/*.truth

# measure RUNS CMD...: prints "median_wall_s peak_rss_kib": RUNS timed runs, then one run
# whose VmHWM (/proc/PID/status) is sampled every 2 ms. Not getrusage: a child's ru_maxrss
# starts with the forked parent's (Python's ~14 MiB) before exec.
measure() {
  python3 - "$@" <<'PY'
import os, subprocess, sys, time
runs = int(sys.argv[1]); cmd = sys.argv[2:]
def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(l.split()[1]) for l in f if l.startswith("VmHWM:")), 0)
    except OSError:
        return 0
walls = []
with open(os.devnull, "wb") as null:
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=null, stderr=null)
        walls.append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}")
    p = subprocess.Popen(cmd, stdout=null, stderr=null)
    time.sleep(0.001)
    rss = 0
    while p.poll() is None:
        rss = max(rss, hwm(p.pid))
        time.sleep(0.002)
walls.sort()
print(f"{walls[len(walls) // 2]:.4f} {rss}")
PY
}

cores=$(nproc)
printf "%-12s %-22s %9s %8s %12s %7s %10s %9s\n" capture tool packets seconds packets/s GB/s "peak RSS" "vs tcptrace"
for cap in header full; do
  f=$tmp/$cap.pcap
  cat "$f" >/dev/null
  pk=$(tcpdump -r "$f" -nn -q 2>/dev/null | wc -l)
  bytes=$(stat -c %s "$f")
  r=$runs
  [[ $cap == full ]] && ((r > 3)) && r=3
  declare -A t=() m=()
  read -r t[tcptrace] m[tcptrace] < <(measure "$r" tcptrace -l -r -n "$f")
  read -r t[decode] m[decode] < <(measure "$r" "$bin" decode --format jsonl "$f")
  read -r t[analyze1] m[analyze1] < <(measure "$r" "$bin" analyze -q --threads 1 --json "$tmp/out.json" "$f")
  read -r t[analyzeN] m[analyzeN] < <(measure "$r" "$bin" analyze -q --json "$tmp/out.json" "$f")
  tools=(decode analyze1 analyzeN tcptrace)
  if [[ $cap == header || ${TSHARK_FULL:-0} == 1 ]]; then
    read -r t[tshark] m[tshark] < <(measure 1 tshark -r "$f" -T fields -e frame.number -e lnet.msg_type \
      -e lnet.msg_dst_match_bits -e lnet.ptl_index -e lnet.payload_length)
    tools+=(tshark)
  fi
  for k in "${tools[@]}"; do
    case $k in
      decode) name="lnetcap decode" ;;
      analyze1) name="lnetcap analyze (1)" ;;
      analyzeN) name="lnetcap analyze ($cores)" ;;
      *) name=$k ;;
    esac
    python3 -c "
s, pk, b, rss, tc = ${t[$k]}, $pk, $bytes, ${m[$k]}, ${t[tcptrace]}
print(f'%-12s %-22s %9d %8.3f %12.0f %7.2f %7.0f MiB %10.2fx' % ('$cap', '$name', pk, s, pk / s, b / s / 1e9, rss / 1024, tc / s))"
  done
done
