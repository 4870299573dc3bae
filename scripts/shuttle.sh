#!/usr/bin/env bash
# Randomised schedules under shuttle, and the linearizability histories.
#
#   bash scripts/shuttle.sh            # 20,000 schedules per test and scheduler
#   bash scripts/shuttle.sh 2000       # fewer
#   bash scripts/shuttle.sh --quick    # what CI runs (1,000; 500 histories)
#
# Runs tests/shuttle_runtime.rs (random and PCT schedulers) and
# queue/tests/linearizable.rs twice: under shuttle's schedules (a tenth as many
# histories, each searched exhaustively) and on real threads (100,000
# histories; 2,000 in quick mode). Each part prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--quick" ]]; then
  iterations=1000 lin_shuttle=500 lin_threads=2000
else
  iterations=${1:-20000}
  lin_shuttle=$(( iterations / 10 > 1 ? iterations / 10 : 1 ))
  lin_threads=100000
fi

part() {
  local start=$SECONDS
  "$@"
  printf '<-- %d s\n' $((SECONDS - start))
}

echo "--> shuttle: tests/shuttle_runtime.rs, $iterations schedules per test and scheduler"
part env RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/shuttle" DELILOOP_SHUTTLE_ITERATIONS="$iterations" \
  cargo test --release --quiet --test shuttle_runtime -- --nocapture --test-threads 1
echo "--> shuttle: queue/tests/linearizable.rs, $lin_shuttle histories of 3 x 20 operations"
part env RUSTFLAGS="--cfg shuttle" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/shuttle" DELILOOP_SHUTTLE_ITERATIONS="$lin_shuttle" \
  cargo test --release --quiet -p deliloop-queue --test linearizable -- --nocapture
echo "--> threads: queue/tests/linearizable.rs, $lin_threads histories of 3 x 30 operations"
part env DELILOOP_LIN_HISTORIES="$lin_threads" \
  cargo test --release --quiet -p deliloop-queue --test linearizable -- --nocapture
