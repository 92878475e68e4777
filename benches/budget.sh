#!/usr/bin/env bash
# Instruction budget: counts the instructions `decode` and one-thread `analyze` execute on
# two generated captures, and `decode` of the first written as pcapng (the reader's pcapng
# path), with valgrind's cachegrind (no cache simulation), and fails when one
# is more than BUDGET_TOLERANCE_PCT (default 2) % over the count recorded in
# benches/budget.txt. Counts, not times: on a shared VM wall time moves 10-70 % between
# hours (README, Speed), the least instruction count of three one-thread runs moves by less
# than 0.2 % between runs of one binary, so a change that costs 2 % shows here when no timing
# could show it. A count holds for the compiler and profile it was measured with: under
# another rustc (or PROFILE) the table is printed and not enforced.
#
#   bash benches/budget.sh [--update] [BINARY]
#
# BINARY: the lnetcap to count (default: built with `cargo build --profile $PROFILE` and
# default features; PROFILE default release, the build CI makes). --update writes the
# counts measured into benches/budget.txt (review the diff: a rise needs its reason in the
# commit).
# Exit codes: 0 within budget (or not enforced), 1 over budget, 2 setup error.
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [[ ${1:-} == --update ]]; then update=1; shift; fi
tol=${BUDGET_TOLERANCE_PCT:-2}
profile=${PROFILE:-release}
file=benches/budget.txt
command -v valgrind >/dev/null || { echo "budget.sh needs valgrind (apt-get install -y valgrind)" >&2; exit 2; }
if [[ -n ${1:-} ]]; then
  bin=$(realpath "$1")
else
  cargo build --profile "$profile" --quiet
  bin=$PWD/target/$profile/lnetcap
fi
toolchain="$(rustc --version) profile $profile"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The captures (`lnetcap synth` is deterministic): the header-only bench workload of
# benches/compare.sh at a fifth of its size (--rpcs 26: 236,536 packets, 49 MB, snaplen 256)
# and 2,000 metadata RPCs of one client (8,523 packets, a message in nearly every one);
# the first again as pcapng (`synth --container pcapng`: one interface, ns resolution).
# synth ARGS...: writes a capture; prints its packets (from synth's "(N packets" line).
synth() {
  local out
  out=$("$bin" synth "$@" 2>&1 >/dev/null) || { echo "budget.sh: synth $* failed: $out" >&2; exit 2; }
  echo "$out" | sed -n 's/.*(\([0-9]*\) packets.*/\1/p'
}
declare -A packets
packets[header]=$(synth --scenario bench --rpcs 26 -o "$tmp/header.pcap" --truth "$tmp/h.truth")
packets[metadata]=$(synth --scenario metadata --rpcs 2000 -o "$tmp/metadata.pcap" --truth "$tmp/m.truth")
packets[pcapng]=$(synth --scenario bench --rpcs 26 --container pcapng -o "$tmp/header.pcapng" --truth "$tmp/n.truth")

# count CMD...: the instructions the command executed (cachegrind's "I refs"), the least
# of BUDGET_RUNS (default 3) runs: the hash tables are seeded at random in each process, so
# their probes differ from run to run (the metadata `analyze`, one thread, spread 0.18 % in
# 20 runs, one run in five of the script 0.6 % over). The command's own output goes to
# files under $tmp.
count() {
  local out n least=
  for ((i = 0; i < ${BUDGET_RUNS:-3}; i++)); do
    out=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >"$tmp/stdout") || {
      echo "budget.sh: '$*' failed under valgrind:" >&2
      echo "$out" | tail -5 >&2
      exit 2
    }
    n=$(echo "$out" | awk '/I +refs:/ { gsub(",", "", $NF); print $NF }')
    [[ -n $n ]] || { echo "budget.sh: no instruction count from valgrind for '$*'" >&2; exit 2; }
    if [[ -z $least ]] || ((n < least)); then least=$n; fi
  done
  echo "$least"
}

names=(decode-header analyze1-header decode-metadata analyze1-metadata decode-pcapng)
declare -A measured
measured[decode-header]=$(count "$bin" decode --threads 1 --format jsonl "$tmp/header.pcap")
measured[analyze1-header]=$(count "$bin" analyze -q --threads 1 --json "$tmp/r.json" "$tmp/header.pcap")
measured[decode-metadata]=$(count "$bin" decode --threads 1 --format jsonl "$tmp/metadata.pcap")
measured[analyze1-metadata]=$(count "$bin" analyze -q --threads 1 --json "$tmp/r.json" "$tmp/metadata.pcap")
measured[decode-pcapng]=$(count "$bin" decode --threads 1 --format jsonl "$tmp/header.pcapng")

if ((update)); then
  {
    echo "# Instructions per run, benches/budget.sh (valgrind cachegrind); measured with:"
    echo "# $toolchain"
    for n in "${names[@]}"; do printf '%-18s %s\n' "$n" "${measured[$n]}"; done
  } >"$file"
  echo "budget.sh: wrote $file"
  cat "$file"
  exit 0
fi

[[ -f $file ]] || { echo "budget.sh: no $file (run with --update)" >&2; exit 2; }
recorded=$(sed -n '2s/^# //p' "$file")
enforced=1
if [[ $recorded != "$toolchain" ]]; then
  enforced=0
  echo "budget.sh: $file was measured with '$recorded', this is '$toolchain': counts shown, not enforced"
fi
over=0
printf '%-18s %15s %15s %11s %8s\n' run budget measured "per packet" ratio
for n in "${names[@]}"; do
  b=$(awk -v n="$n" '$1 == n { print $2 }' "$file")
  [[ -n $b ]] || { echo "budget.sh: $file has no line for $n" >&2; exit 2; }
  m=${measured[$n]}
  verdict=$(awk -v m="$m" -v b="$b" -v t="$tol" 'BEGIN {
    r = m / b
    if (r > 1 + t / 100) v = "OVER"; else if (r < 1 - t / 100) v = "under (lower the budget: --update)"; else v = "ok"
    printf "%8.4f %s", r, v }')
  pk=${packets[${n#*-}]}
  printf '%-18s %15s %15s %11s %s\n' "$n" "$b" "$m" "$((m / (pk > 0 ? pk : 1)))" "$verdict"
  [[ $verdict == *OVER* ]] && over=1
done
if ((over && enforced)); then
  echo "budget.sh: over the instruction budget by more than $tol % (a rise that is meant: --update, and say why in the commit)" >&2
  exit 1
fi
