#!/usr/bin/env bash
# Speed of `lnetcap decode` against tshark and tcptrace on the same generated captures, in
# one run (the machines are shared and noisy: compare the ratios, not the absolute times).
#
#   bash benches/compare.sh [RPCS_PER_CLIENT]
#
# Captures (written to a temporary directory):
#   header-only: `lnetcap synth --scenario bench` (4 clients x 2 servers, mixed 1-4 MiB BRW
#                and metadata, MTU 1500, snaplen 256)
#   full-payload: the same workload captured with snaplen 65535.
# Commands timed:
#   lnetcap decode --format jsonl FILE            (every message, PtlRPC bodies decoded)
#   lnetcap analyze -q --json /dev/null FILE      (decode + TCP analysis + RPCs + model)
#   tshark -r FILE -T fields -e frame.number -e lnet.msg_type -e lnet.msg_dst_match_bits
#          -e lnet.ptl_index -e lnet.payload_length   (the LNet dissector)
#   tcptrace -l -r FILE                           (TCP statistics only, no LNet decoding)
set -euo pipefail
cd "$(dirname "$0")/.."
rpcs=${1:-130}
for t in tshark tcptrace; do command -v $t >/dev/null || { echo "install $t (apt-get install -y $t)"; exit 1; }; done
cargo build --release --quiet
bin=$PWD/target/release/lnetcap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" synth --scenario bench --rpcs "$rpcs" -o "$tmp/header.pcap" 2>/dev/null
"$bin" synth --scenario bench --rpcs $((rpcs / 6)) --snaplen 65535 -o "$tmp/full.pcap" 2>/dev/null

secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc -l; }
printf "%-12s %-9s %10s %9s %12s %10s %14s\n" capture tool packets seconds packets/s MB/s "vs lnetcap"
for cap in header full; do
  f=$tmp/$cap.pcap
  pk=$(tcpdump -r "$f" -nn -q 2>/dev/null | wc -l)
  mb=$(echo "$(stat -c %s "$f") / 1000000" | bc -l)
  tl=$(secs "$bin" decode --format jsonl "$f")
  ta=$(secs "$bin" analyze -q --json /dev/null "$f")
  tt=$(secs tshark -r "$f" -T fields -e frame.number -e lnet.msg_type -e lnet.msg_dst_match_bits -e lnet.ptl_index -e lnet.payload_length)
  tc=$(secs tcptrace -l -r "$f")
  for row in "lnetcap $tl" "analyze $ta" "tshark $tt" "tcptrace $tc"; do
    set -- $row
    printf "%-12s %-9s %10d %9.2f %12.0f %10.0f %13.1fx\n" "$cap" "$1" "$pk" "$2" "$(echo "$pk / $2" | bc -l)" "$(echo "$mb / $2" | bc -l)" "$(echo "$2 / $tl" | bc -l)"
  done
done
