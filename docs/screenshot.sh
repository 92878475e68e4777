#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of the HTML report: the top of
# report.html for fixtures/synth/credits.pcap.zst as headless Chromium renders it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo run --release -q -- analyze fixtures/synth/credits.pcap.zst --out "$out/report" -q
chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --hide-scrollbars --user-data-dir="$out/profile" --window-size=1100,2350 \
  --screenshot=docs/report.png "file://$out/report/report.html" 2>/dev/null
