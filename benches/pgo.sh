#!/usr/bin/env bash
# A profile-guided build of the dist binary (LLVM PGO through rustc's -Cprofile-generate /
# -Cprofile-use, the compiler's own mechanism: no build tool beyond rustup's llvm-tools).
#
#   bash benches/pgo.sh        writes target/pgo/lnetcap; prints its path
#
# PGO_PROFILE=release builds from the release profile instead of dist (the binary is then
# target/pgo/lnetcap-release): CI runs that (about 18 minutes here, where dist takes about
# 25) to check the script and the identity of the output; the binary to install or time
# is the dist one.
#
# Three steps: (1) an instrumented `dist` build (target/pgo/gen); (2) a training run of it
# over every committed capture (fixtures/: the lab's real-kernel captures, the public ones,
# the generated ones) and three small generated ones (header-only bench at snaplen 256, the
# same at full payload, metadata RPCs), each through `decode` (text and jsonl) and `analyze`
# at one and two threads: the commands and shapes of traffic users run, none of them the
# captures benches/compare.sh times; (3) `dist` again with the merged profile
# (target/pgo/use), then (4) the same runs with the optimised binary, whose every output
# (decode's text and JSON lines, analyze's JSON report) must be byte-identical to the
# instrumented build's: a profile changes how the code is laid out, never what it does.
#
# TARGET_CPU=CPU (`native`, `x86-64-v3`, ...) builds for that CPU (`-Ctarget-cpu`), both
# steps, in target dirs and a profile of its own; the binary is then target/pgo/lnetcap-CPU.
# A build for the host runs only on CPUs with its instructions: measured 2026-11-29 on the
# Intel VM, 1.03-1.06x the speed of the portable build (README, Speed).
#
# Needs llvm-profdata of the LLVM the compiler uses: `rustup component add llvm-tools`.
# Takes about 25 minutes on 2 cores (the instrumented fat-LTO link is the long part).
# Exit 0 built and identical, 1 an output that differs (the binary is not installed), 2 a
# setup error (no llvm-profdata, a build, generator or training run that failed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata
if [[ ! -x $profdata ]]; then
  echo "pgo.sh: no $profdata: run \`rustup component add llvm-tools\` (its llvm-profdata reads this rustc's profiles)" >&2
  exit 2
fi
out=$root/target/pgo
mkdir -p "$out"
# The raw profiles' directory is named by LLVM_PROFILE_FILE at run time, so the flag (part
# of cargo's fingerprint) stays the same from one run to the next and the instrumented
# build is reused while the code does not change. Only the build scripts the flag
# instruments too write into `unused`.
prof=${PGO_PROFILE:-dist}
# TARGET_CPU: the flag for both builds, and a name for what they write.
cpu=${TARGET_CPU:-}
cpuflag=${cpu:+ -Ctarget-cpu=$cpu}
sfx=${cpu:+-$cpu}
tag=$prof$sfx
# setup WHAT CMD...: runs a build or generator step, its messages kept for a failure,
# which is a setup error (exit 2), not an output that differs (exit 1).
setup() {
  local what=$1 rc=0
  shift
  "$@" 2>"$out/setup.err" || rc=$?
  if ((rc)); then
    echo "pgo.sh: $what failed (exit $rc):" >&2
    cat "$out/setup.err" >&2
    exit 2
  fi
}
setup "the instrumented build" env RUSTFLAGS="-Cprofile-generate=$out/unused$cpuflag" CARGO_TARGET_DIR="$out/gen$sfx" \
  cargo build --profile "$prof" --quiet
gen=$out/gen$sfx/$prof/lnetcap
raw=$out/raw
train=$out/train
rm -rf "$raw" "$train"
mkdir -p "$raw" "$train"
# The generator's own runs are not part of the training (their profiles are dropped).
export LLVM_PROFILE_FILE="$train/synth-%p.profraw"
setup "synth (header-only)" "$gen" synth --scenario bench --rpcs 8 -o "$train/header.pcap" --truth "$train/h.truth"
setup "synth (full payload)" "$gen" synth --scenario bench --rpcs 4 --snaplen 65535 -o "$train/full.pcap" \
  --truth "$train/f.truth"
setup "synth (metadata)" "$gen" synth --scenario metadata --rpcs 3000 -o "$train/metadata.pcap" --truth "$train/m.truth"
rm -f "$train"/synth-*.profraw
mapfile -t caps < <(find fixtures -name '*.pcap*' | sort)
caps+=("$train/header.pcap" "$train/full.pcap" "$train/metadata.pcap")
# %4m: every run merges its counts into one of four files as it exits (online merging):
# tens of megabytes however many runs, where a file a run would be gigabytes.
export LLVM_PROFILE_FILE="$raw/%4m.profraw"
cmds=("analyze -q --threads 1 --json" "analyze -q --threads 2 --json" "decode --threads 1 --format jsonl" "decode --threads 1"
  "decode --threads 2 --format jsonl")
# runs BINARY DIR: every command on every capture; run i's output (analyze's JSON report,
# decode's stdout) to DIR/i. A capture may make analyze or decode exit 1 (a gate, a
# finding) but never 2 or worse.
runs() {
  local bin=$1 dir=$2 i=0 f cmd rc
  mkdir -p "$dir"
  for f in "${caps[@]}"; do
    for cmd in "${cmds[@]}"; do
      rc=0
      if [[ $cmd == analyze* ]]; then
        # shellcheck disable=SC2086
        "$bin" $cmd "$dir/$i" "$f" >/dev/null 2>"$train/err" || rc=$?
      else
        # shellcheck disable=SC2086
        "$bin" $cmd "$f" >"$dir/$i" 2>"$train/err" || rc=$?
      fi
      if ((rc > 1)); then
        echo "pgo.sh: \`$bin $cmd $f\` exited $rc: $(tail -3 "$train/err")" >&2
        exit 2
      fi
      i=$((i + 1))
    done
  done
}
runs "$gen" "$train/gen"
unset LLVM_PROFILE_FILE
# Replaced only when it changed: the optimised build depends on the file, and an
# unchanged profile of unchanged code reuses that build.
setup "llvm-profdata merge" "$profdata" merge -o "$out/new.profdata" "$raw"
if cmp -s "$out/new.profdata" "$out/$tag.profdata"; then
  rm "$out/new.profdata"
else
  mv "$out/new.profdata" "$out/$tag.profdata"
fi
n=$(find "$train/gen" -type f | wc -l)
echo "pgo.sh: trained on ${#caps[@]} captures ($n runs); building with the profile" >&2
setup "the profile-guided build" env RUSTFLAGS="-Cprofile-use=$out/$tag.profdata$cpuflag" \
  CARGO_TARGET_DIR="$out/use$sfx" cargo build --profile "$prof" --quiet
use=$out/use$sfx/$prof/lnetcap
runs "$use" "$train/use"
if ! diff -rq "$train/gen" "$train/use" >&2; then
  echo "pgo.sh: the optimised build's output differs from the instrumented build's (above); not installed" >&2
  exit 1
fi
dest=$out/lnetcap
[[ $tag == dist ]] || dest=$out/lnetcap-${tag#dist-}
cp "$use" "$dest"
echo "pgo.sh: $n outputs byte-identical to the instrumented build's" >&2
echo "$dest"
