#!/usr/bin/env bash
# ThreadSanitizer over the tests where threads race: the queue's stress
# test, the cross-thread and cancellation tests, the liveness test, the
# blocking pool's and name resolution's tests, the signal streams' test
# (handlers on raising threads against loops on others), the child
# processes' test (the SIGCHLD action, run on any thread, against the
# loops of several test threads), the loop group's test (start-up,
# cross-loop posts and shutdown across its threads), and
# the queue's barrier fault test (busy mode given up while two threads push).
# Needs a nightly toolchain with rust-src (std is rebuilt instrumented, so
# TSan sees std's own atomics and locks).
#
#   bash scripts/tsan.sh            # all of them
#   bash scripts/tsan.sh --quick    # the stress test and the fault test
#
# TSan exits with 66 when it reports a race, yet libtest may still have
# printed "ok": the script fails on either the exit status or a report.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
  if ! rustup +nightly component add rust-src >/dev/null 2>&1; then
    echo "SKIP tsan: no nightly toolchain with rust-src"
    exit 0
  fi
fi

tests=(--test cross_thread --test cancel --test liveness --test blocking --test names --test signal --test process --test group)
if [[ "${1:-}" == "--quick" ]]; then
  tests=()
fi
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
log=$(mktemp)
trap 'rm -f "$log"' EXIT

RUSTFLAGS="-Zsanitizer=thread" \
RUSTDOCFLAGS="-Zsanitizer=thread" \
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
CARGO_TARGET_DIR=target/tsan \
  cargo +nightly test -Zbuild-std --target "$host" -p deliloop-queue --test queue_stress 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [[ $status -eq 0 && ${#tests[@]} -gt 0 ]]; then
  RUSTFLAGS="-Zsanitizer=thread" \
  RUSTDOCFLAGS="-Zsanitizer=thread" \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -Zbuild-std --target "$host" -p deliloop "${tests[@]}" 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
if [[ $status -eq 0 ]]; then
  RUSTFLAGS="-Zsanitizer=thread" \
  RUSTDOCFLAGS="-Zsanitizer=thread" \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  CARGO_TARGET_DIR=target/tsan \
    cargo +nightly test -Zbuild-std --target "$host" -p deliloop-queue --lib busy::tests 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi

if grep -q "WARNING: ThreadSanitizer" "$log"; then
  echo "tsan: ThreadSanitizer reported a race (exit status $status)"
  exit 1
fi
if [[ $status -ne 0 ]]; then
  echo "tsan: tests failed with exit status $status"
  exit "$status"
fi
echo "tsan: clean"
