#!/usr/bin/env bash
# The fuzz campaign (docs/fuzzing.md): builds the targets of fuzz/ with cargo-fuzz on the
# nightly toolchain, runs each for SECS seconds (default 600) from the committed corpus and
# the seeds, then merges what it found into a minimised fuzz/corpus/<target>.
#   scripts/fuzz.sh [SECS] [TARGET...]
# Needs: rustup toolchain nightly, cargo install cargo-fuzz. Logs: fuzz/logs/<target>.log
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(capture link wire framer segments analyze)
# Release with debug assertions and overflow checks: an overflow is a finding too. No
# sanitizer: the code under test has no unsafe, and uninstrumented runs go ~2x faster.
cargo +nightly fuzz build -O -a --sanitizer none "${targets[@]/#/}" 2>/dev/null || cargo +nightly fuzz build -O -a --sanitizer none
mkdir -p logs
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  mkdir -p "corpus/$t" "artifacts/$t"
  seeds=()
  case $t in
    capture|analyze) seeds=(seeds/capture) ;;
    wire|link) seeds=(seeds/wire) ;;
  esac
  max_len=4096
  case $t in capture|analyze|segments) max_len=65536 ;; esac
  cargo +nightly fuzz run -O -a --sanitizer none "$t" "$work" "corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$secs" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "logs/$t.log" 2>&1 || echo "$t: findings, see artifacts/$t and logs/$t.log"
  # Minimise: keep the inputs that add coverage, committed as fuzz/corpus/<t>.
  merged=$(mktemp -d)
  cargo +nightly fuzz run -O -a --sanitizer none "$t" "$merged" "corpus/$t" "$work" -- -merge=1 -max_len=$max_len \
    >> "logs/$t.log" 2>&1 || true
  rm -rf "corpus/$t" "$work" && mv "$merged" "corpus/$t"
  echo "$t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "logs/$t.log" | tail -1), $(grep -E '^#[0-9]+.*(DONE|pulse)' "logs/$t.log" | tail -1 | grep -o 'cov: [0-9]* ft: [0-9]*'), corpus $(ls "corpus/$t" | wc -l) files"
done
