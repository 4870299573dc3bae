#!/usr/bin/env bash
# Fuzzes the queue's and the Handle's operations against their model
# (fuzz/fuzz_targets/model.rs) with libFuzzer through cargo-fuzz.
#
#   bash scripts/fuzz.sh          # 10 minutes
#   bash scripts/fuzz.sh 60       # what CI runs
#
# Needs a nightly toolchain; installs cargo-fuzz (`cargo install
# cargo-fuzz`) if it is missing and can be installed. Prints a `SKIP fuzz:`
# line and exits 0 when either cannot be had. The corpus stays in
# fuzz/corpus/model between runs; a crash is written to fuzz/artifacts/
# and fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}

if ! rustc +nightly --version >/dev/null 2>&1; then
  echo "SKIP fuzz: no nightly toolchain (rustup toolchain install nightly)"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is missing: cargo install cargo-fuzz"
  if ! cargo install --quiet cargo-fuzz; then
    echo "SKIP fuzz: cargo-fuzz is not installed and could not be installed"
    exit 0
  fi
fi

cd fuzz
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# -O: optimised, with debug assertions; AddressSanitizer is cargo-fuzz's
# default. RSS limit and per-input timeout keep a bad input from hanging.
cargo +nightly fuzz run -O model -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tee "$log" | grep -v '^#[0-9]'
status=${PIPESTATUS[0]}
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [[ $status -ne 0 ]]; then
  echo "fuzz: failed (exit status $status); the input is in fuzz/artifacts/model/"
  exit "$status"
fi
echo "fuzz: ${runs:-?} inputs in ${seconds} s, no failure"
