#!/usr/bin/env bash
# lnetcap against tshark and tcptrace on the same generated captures, in one run: wall time,
# CPU time (user + system), packets/s, GB/s and peak RSS of each whole process (medians of
# RUNS rounds, the tools interleaved in each round; peak RSS of one sampled run), and the ratios to
# tcptrace: the median of the per-round ratios, with their quartiles. Machines are shared
# and noisy: compare the ratios, which come from one run, not absolute times across runs.
#
#   bash benches/compare.sh [--quick]
#
# Environment: PROFILE (cargo profile, default dist), PGO=1 (time the profile-guided dist
# build of benches/pgo.sh instead), TARGET_CPU (`native`, `x86-64-v3`, ...: build for that
# CPU, `-Ctarget-cpu`, in target/cpu-TARGET_CPU; with PGO=1, pgo.sh's build for it), BIN
# (time this binary instead), RUNS (default 5; 3 for the
# full-payload capture), TMPDIR (where the captures
# are written: the full-payload one takes FULL_GB, default 6, GB; removed at exit),
# FULL_GB, HEADER_RPCS (default 130: 1.15 M packets), MANY_CLIENTS (default 200), MANY_RPCS (default 2),
# META_RPCS (default 20000), PAGE_CACHE (disk, the default: each capture dropped from the
# page cache after it is written and read back once, as a capture read from disk is cached;
# tcpdump: rewritten in 4 KiB writes, as a capture tcpdump just wrote is cached; written:
# as synth wrote it; see below), TSHARK_FULL=1 to time tshark on the
# full-payload capture too (minutes), PIN=0 to leave the single-thread runs unpinned (by
# default each round pins them all to one core, the next core the next round, so that a
# ratio never compares two cores; each pinned tool's median on each core is printed).
# --quick: 1 run each, a 0.5 GB full-payload capture.
#
# Captures, written by `lnetcap synth` (deterministic):
#   header-only   --scenario bench --rpcs 130: 4 clients x 2 servers, mixed 1-4 MiB BRW and
#                 metadata, MTU 1500, snaplen 256 (1,149,888 packets, 238 MB)
#   pcapng        the header-only capture written as pcapng (`synth --container pcapng`:
#                 one interface, ns resolution; Wireshark's and dumpcap's format): the
#                 reader's pcapng path (1,149,888 packets, 257 MB)
#   many          the header-only workload from MANY_CLIENTS (default 200) clients,
#                 --rpcs MANY_RPCS (default 2): 1,200 connections interleaved, as an OSS
#                 sees many clients (1,102,800 packets, 228 MB)
#   full-payload  the same workload with snaplen 65535, as many RPCs as make FULL_GB
#   metadata      --scenario metadata --rpcs META_RPCS (default 20,000): one client's
#                 MDS_GETATTR, LDLM_ENQUEUE, MDS_REINT and pings, full payload (85,023
#                 packets, 31 MB): a message in nearly every packet, the RPC tracker's load
# Commands (the page cache is warmed with the file first, so every tool reads from memory; see
# PAGE_CACHE below for the state of its pages):
#   lnetcap decode --threads 1 --format jsonl FILE > /dev/null
#                                                   every message, PtlRPC bodies decoded
#   lnetcap decode --format jsonl FILE > /dev/null  the same on every core (--threads nproc)
#   lnetcap analyze -q --threads 1 --json OUT FILE  decode + TCP behaviour + RPCs + model
#   the two above with LNETCAP_MAP=1               full payload and metadata only (the
#                                                   files the opt-in map maps): its effect
#   lnetcap analyze -q --json OUT FILE              the same on every core (--threads nproc)
#   tshark -r FILE -T fields -e frame.number -e lnet.msg_type -e lnet.msg_dst_match_bits
#          -e lnet.ptl_index -e lnet.payload_length  (Wireshark's LNet dissector)
#   tcptrace -l -r -n FILE                          TCP statistics only, no LNet decoding
#   cat FILE                                        the read alone ("read only"): the
#                                                   kernel's copy of the file out of the
#                                                   page cache, which every tool here pays;
#                                                   its ratio is the most any of them
#                                                   could reach against tcptrace
#   nproc copies of `analyze --threads 1` at once   the ceiling: what the machine's cores
#                                                   give independent work (the parallel
#                                                   run is quoted against it too)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[[ ${1:-} == --quick ]] && quick=1
runs=${RUNS:-5}
full_gb=${FULL_GB:-6}
if ((quick)); then runs=1; full_gb=0.5; fi
for t in tshark tcptrace tcpdump python3; do
  command -v $t >/dev/null || { echo "compare.sh needs $t (apt-get install -y $t)" >&2; exit 1; }
done
# The dist profile (fat LTO, one codegen unit): the binary one installs. PROFILE=release
# times the test build instead; PGO=1 the profile-guided dist build (benches/pgo.sh, built
# or reused); BIN=PATH a binary built elsewhere.
profile=${PROFILE:-dist}
if [[ -n ${BIN:-} ]]; then
  bin=$(realpath "$BIN") built=given
elif [[ ${PGO:-0} == 1 ]]; then
  bin=$(bash benches/pgo.sh) built="dist, profile-guided${TARGET_CPU:+, -Ctarget-cpu=$TARGET_CPU}"
elif [[ -n ${TARGET_CPU:-} ]]; then
  # A build for one CPU (the host's with `native`): runs only on CPUs with its instructions.
  RUSTFLAGS="${RUSTFLAGS:-} -Ctarget-cpu=$TARGET_CPU" CARGO_TARGET_DIR=$PWD/target/cpu-$TARGET_CPU \
    cargo build --profile "$profile" --quiet
  bin=$PWD/target/cpu-$TARGET_CPU/$profile/lnetcap built="$profile, -Ctarget-cpu=$TARGET_CPU"
else
  cargo build --profile "$profile" --quiet
  bin=$PWD/target/$profile/lnetcap built=$profile
fi
echo "binary: $bin ($built)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Every piece of Python this script runs: none inside bash's quotes (docs/speed-log.md,
# twenty-first session: a double quote in a comment once cut such a block short).
report=$PWD/benches/compare_report.py

# One full-payload bench RPC per client writes about 9.12 MB (measured: --rpcs 120 gives
# 1,094 MB).
"$bin" synth --scenario bench --rpcs "${HEADER_RPCS:-130}" -o "$tmp/header.pcap" --truth "$tmp/h.truth" 2>/dev/null
# pcapng, named .pcap as the others (every tool here knows a format by its content).
"$bin" synth --scenario bench --rpcs "${HEADER_RPCS:-130}" --container pcapng -o "$tmp/pcapng.pcap" \
  --truth "$tmp/n.truth" 2>/dev/null
"$bin" synth --scenario bench --clients "${MANY_CLIENTS:-200}" --rpcs "${MANY_RPCS:-2}" -o "$tmp/many.pcap" \
  --truth "$tmp/c.truth" 2>/dev/null
full_rpcs=$(python3 "$report" full-rpcs "$full_gb")
"$bin" synth --scenario bench --rpcs "$full_rpcs" --snaplen 65535 -o "$tmp/full.pcap" --truth "$tmp/f.truth" 2>/dev/null
"$bin" synth --scenario metadata --rpcs "${META_RPCS:-20000}" -o "$tmp/metadata.pcap" --truth "$tmp/m.truth" 2>/dev/null
rm -f "$tmp"/*.truth

# The captures' page cache. How a file came into the page cache decides how fast it is
# read from there: on this VM (Linux 6.18, ext4) the header-only file took 11-14 ms to
# read whole when synth had written it (large writes) or after it was read back from
# disk (the kernel's readahead fills the cache in large folios), and 30-39 ms when it
# had been written in 8 KiB writes (a small folio a write); tcpdump writes a capture
# through stdio, whose buffer for a file on ext4 is 4 KiB. Every tool reads the same
# file in the same state, but the state moves the ratios: lnetcap decode ran 1.06x
# (8 KiB writes) to 1.26x (a file hours in the cache, read whole in 32-62 ms) faster on
# the fast file, tcptrace 1.02-1.07x; on a 1 GB full-payload file written in 4 KiB
# writes lnetcap's map ran 0.73x as fast as its read (README Speed).
# PAGE_CACHE picks the state: disk (default): each file written back and dropped from
# the page cache (fsync, posix_fadvise DONTNEED), then read back once before its rounds,
# as a capture read from disk (an archive's) is cached; tcpdump: each file rewritten in
# 4 KiB writes and timed as that left it, as a capture tcpdump just wrote is cached;
# written: as synth wrote it.
page_cache=${PAGE_CACHE:-disk}
case $page_cache in
  disk)
    for f in "$tmp"/*.pcap; do
      python3 "$report" drop "$f"
      # What is left cached of it (fincore, util-linux): ~0 when the drop worked; a tmpfs
      # TMPDIR keeps every page (its pages are memory, not a cache of a disk).
      if command -v fincore >/dev/null; then
        left=$(fincore -nb -o RES "$f" 2>/dev/null | tr -d ' ')
        if [[ -n $left ]] && ((left > $(stat -c %s "$f") / 10)); then
          echo "warning: $f stayed in the page cache ($left bytes): timed as written" >&2
        fi
      fi
    done
    echo "page cache: each capture dropped after it was written and read back once (as read from disk)" ;;
  tcpdump)
    for f in "$tmp"/*.pcap; do
      dd if="$f" of="$f.4k" bs=4k status=none && mv "$f.4k" "$f"
    done
    echo "page cache: each capture rewritten in 4 KiB writes (as tcpdump writes one)" ;;
  written) echo "page cache: each capture as synth wrote it" ;;
  *) echo "PAGE_CACHE is disk, tcpdump or written, not $page_cache" >&2; exit 2 ;;
esac

# rounds RUNS NAME=CMD ... : RUNS rounds of every command, the single-thread ones pinned
# a core a round; per command its median wall time, peak RSS, speed quartiles against the
# first, walls and median CPU time (benches/compare_report.py, `rounds`).
rounds() {
  python3 "$report" rounds "$@"
}

cores=$(nproc)
# The commands of `rounds` that run on every core (the others are pinned, see there).
export UNPINNED="analyzeN decodeN"
printf "%-12s %-22s %9s %8s %7s %12s %7s %10s %12s %s\n" capture tool packets seconds "CPU s" packets/s GB/s "peak RSS" "vs tcptrace" "(per round: q1-q3)"
for cap in header pcapng many full metadata; do
  f=$tmp/$cap.pcap
  cat "$f" >/dev/null
  pk=$(tcpdump -r "$f" -nn -q 2>/dev/null | wc -l)
  bytes=$(stat -c %s "$f")
  r=$runs
  [[ $cap == full ]] && ((r > 3)) && r=3
  declare -A t=() m=() q=() w=() u=()
  # The whole-frame captures are read by default and mapped with LNETCAP_MAP=1 (decode and
  # one-thread analyze): the same two mapped too, so the map's own effect comes from the
  # same rounds. Parallel runs map the full-payload capture by default (its records are
  # large: MAP_THREADED_MIN_MEAN_RECORD), so its N-thread lines set a mapped run against
  # a read one-thread run; the metadata capture's parallel runs read.
  read_cmds=()
  if [[ $cap == full || $cap == metadata ]]; then
    read_cmds=("decodeM=env LNETCAP_MAP=1 $bin decode --threads 1 --format jsonl $f"
      "analyze1M=env LNETCAP_MAP=1 $bin analyze -q --threads 1 --json $tmp/out1m.json $f")
  fi
  by_core=() warned=()
  while read -r line; do
    if [[ $line == "#core "* ]]; then
      by_core+=("${line#\#core }")
      continue
    fi
    if [[ $line == "#warm "* ]]; then
      read -r _ wf wmib <<<"$line"
      warned+=("$wf: $wmib MiB read back into the page cache before timed runs (the host had taken them)")
      continue
    fi
    read -r k wall rss q1 med q3 ws cpu <<<"$line"
    k=${k/\*/x}
    t[$k]=$wall m[$k]=$rss q[$k]="$med $q1 $q3" w[$k]=$ws u[$k]=$cpu
  done < <(rounds "$r" "tcptrace=tcptrace -l -r -n $f" "decode=$bin decode --threads 1 --format jsonl $f" \
    "decodeN=$bin decode --format jsonl $f" "analyze1=$bin analyze -q --threads 1 --json $tmp/out1.json $f" \
    "analyzeN=$bin analyze -q --json $tmp/outN.json $f" \
    "analyze1*$cores=$bin analyze -q --threads 1 --json $tmp/outP{i}.json $f" "readonly=cat $f" "${read_cmds[@]}")
  tools=(decode decodeN analyze1 analyzeN tcptrace readonly)
  ((${#read_cmds[@]})) && tools=(decode decodeM decodeN analyze1 analyze1M analyzeN tcptrace readonly)
  if [[ $cap == header || ${TSHARK_FULL:-0} == 1 ]]; then
    read -r _ t[tshark] m[tshark] _ _ _ _ u[tshark] < <(rounds 1 "tshark=tshark -r $f -T fields -e frame.number -e lnet.msg_type \
      -e lnet.msg_dst_match_bits -e lnet.ptl_index -e lnet.payload_length")
    q[tshark]="$(python3 "$report" ratio "${t[tcptrace]}" "${t[tshark]}") - -"
    tools+=(tshark)
  fi
  for k in "${tools[@]}"; do
    case $k in
      decode) name="lnetcap decode" ;;
      decodeM) name="  mapped (MAP=1)" ;;
      decodeN) name="lnetcap decode ($cores)" ;;
      analyze1) name="lnetcap analyze (1)" ;;
      analyze1M) name="  mapped (MAP=1)" ;;
      analyzeN) name="lnetcap analyze ($cores)" ;;
      readonly) name="read only (cat)" ;;
      *) name=$k ;;
    esac
    read -r med q1 q3 <<<"${q[$k]}"
    spread="$q1-$q3"
    [[ $q1 == - ]] && spread="(one run)"
    python3 "$report" row "$cap" "$name" "$pk" "${t[$k]}" "${u[$k]}" "$bytes" "${m[$k]}" "$med" "$spread"
  done
  # The single-thread runs were pinned, a core a round: each one's median on each core.
  # Cores a tool ran far apart on (over 1.2x: 2026-11-30 on the VM of README Speed,
  # tcptrace 1.285 s on one and 0.818 s on the other) mean the host ran something else on
  # one of them; a disturbance slows tools unequally (that run overstated lnetcap's
  # single-thread ratios), so the run is one to repeat, not to quote.
  for line in "${warned[@]}"; do
    printf '%-12s %-22s %s\n' "$cap" "page cache" "$line"
  done
  for line in "${by_core[@]}"; do
    printf '%-12s %-22s %s\n' "$cap" "by core (pinned)" "$line s"
    # The line: TOOL cpuA MEDIAN cpuB MEDIAN ...
    awk -v cap="$cap" '{ lo = 0; hi = 0
      for (i = 3; i <= NF; i += 2) { v = $i + 0; if (lo == 0 || v < lo) lo = v; if (v > hi) hi = v }
      if (lo > 0 && hi / lo > 1.2)
        printf "%-12s %-22s warning: %s ran %.2fx apart on the cores (over 1.2x): the host disturbed this run; rerun before quoting its single-thread ratios\n", cap, "by core (pinned)", $1, hi / lo }' <<<"$line"
  done
  # The parallel speed-up itself, round by round, against one thread and against the
  # ceiling of $cores one-thread runs at once (compare_report.py, `parallel`).
  python3 "$report" parallel "$cap" "$cores" "${w[analyze1]}" "${w[analyzeN]}" "${w[decode]}" "${w[decodeN]}" \
    "${u[analyze1]}" "${u[analyzeN]}" "${u[decode]}" "${u[decodeN]}" "${w[analyze1x$cores]}"
  if ((${#read_cmds[@]})); then
    # Mapped against read, round by round (LNETCAP_MAP=1's speed over the default's).
    python3 "$report" mapped "$cap" "${w[decodeM]}" "${w[decode]}" "${w[analyze1M]}" "${w[analyze1]}"
  fi
done
