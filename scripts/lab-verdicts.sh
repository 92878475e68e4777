#!/usr/bin/env bash
# Rewrites README.md's "Verdicts on the lab captures" table from tests/verdicts.rs: every
# capture of fixtures/lab analysed and checked against its summary.json facts.
set -euo pipefail
cd "$(dirname "$0")/.."
LNETCAP_UPDATE_README=1 cargo test --release --test verdicts
