#!/usr/bin/env bash
# Miri over the queue's tests and the runtime's behaviour tests, with
# freed addresses reused at once, over several seeds (each seed changes
# Miri's thread schedule, its weak-memory choices and address reuse).
#
#   bash scripts/miri.sh             # seeds 0..4 (0, 1, 2, 3)
#   bash scripts/miri.sh --quick     # seed 0 (what CI runs)
#   bash scripts/miri.sh --seeds 10  # seeds 0..10
#
# Permissive provenance, because queue links are rebuilt from exposed
# provenance (src/queue/node.rs says why). Under Miri the loop parks
# without a timerfd, which Miri lacks (src/runtime/park.rs); the tests
# shrink their loops under cfg(miri), and the ones Miri cannot run are
# marked `#[cfg_attr(miri, ignore = "why")]`: libtest prints each with its
# reason. Test binaries left out entirely, each with its reason, are
# printed as SKIP lines below.
set -uo pipefail
cd "$(dirname "$0")/.."

seeds=4
case "${1:-}" in
  --quick) seeds=1 ;;
  --seeds) seeds=${2:?--seeds N} ;;
  "") ;;
  *) echo "usage: $0 [--quick | --seeds N]"; exit 2 ;;
esac

if ! err=$(rustup +nightly component add miri rust-src 2>&1); then
  echo "SKIP miri: $(echo "$err" | tail -n 1)"
  exit 0
fi

# The queue crate's tests (queue/tests/) and the root package's.
queue_tests=(queue queue_lanes queue_model queue_stress linearizable)
runtime_tests=(android cancel cross_thread embed fairness faults flood liveness observe panic
  paused post_alloc pressure quit spawn timer trace)
echo "SKIP miri io, io_fd_limit, compat: Miri has no TCP or UDP sockets, and no ioctl(FIONBIO) on a socketpair"
echo "SKIP miri looper_fd_limit: Miri has no setrlimit"
echo "SKIP miri embed_latency, pressure_memdelay: they measure latencies to the millisecond, and Miri's clock advances as it interprets"
echo "SKIP miri hyper, embed_calloop, embed_glib: optional features (and hyper needs TCP)"
echo "SKIP miri loom models: they run with --cfg loom"

args=()
for t in "${runtime_tests[@]}"; do args+=(--test "$t"); done
qargs=()
for t in "${queue_tests[@]}"; do qargs+=(--test "$t"); done
count=$((${#queue_tests[@]} + ${#runtime_tests[@]}))
base="-Zmiri-permissive-provenance -Zmiri-address-reuse-rate=1.0 -Zmiri-address-reuse-cross-thread-rate=1.0"

# Build once (the flags above do not change the build).
MIRIFLAGS="$base" cargo +nightly miri test --quiet --no-run -p deliloop "${args[@]}" || exit 1
MIRIFLAGS="$base" cargo +nightly miri test --quiet --no-run -p deliloop-queue "${qargs[@]}" || exit 1
# Of the libraries' own unit tests, the ones over unsafe code of their own
# (a posted closure stored inline in its node, src/runtime/posted.rs; a
# lane's blocks, queue/src/lane.rs; the registry of lanes,
# queue/src/registry.rs; the thread-local lookup of lanes,
# queue/src/local.rs; the pick across lanes, queue/src/pick.rs), under
# strict provenance: that code exposes no address.
lib_filters=(runtime::posted)
queue_lib_filters=(lane:: registry:: local:: pick::)

failed=()
for ((seed = 0; seed < seeds; seed++)); do
  start=$SECONDS
  if MIRIFLAGS="$base -Zmiri-seed=$seed" cargo +nightly miri test --no-fail-fast -p deliloop-queue "${qargs[@]}" &&
    MIRIFLAGS="$base -Zmiri-seed=$seed" cargo +nightly miri test --no-fail-fast -p deliloop "${args[@]}" &&
    MIRIFLAGS="-Zmiri-strict-provenance -Zmiri-seed=$seed" cargo +nightly miri test --quiet -p deliloop --lib -- "${lib_filters[@]}" &&
    MIRIFLAGS="-Zmiri-strict-provenance -Zmiri-seed=$seed" cargo +nightly miri test --quiet -p deliloop-queue --lib -- "${queue_lib_filters[@]}"; then
    printf 'miri seed %d: ok (%d s)\n' "$seed" $((SECONDS - start))
  else
    printf 'miri seed %d: FAILED (%d s)\n' "$seed" $((SECONDS - start))
    failed+=("$seed")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "miri: failed with seeds ${failed[*]}"
  exit 1
fi
echo "miri: clean with seeds 0..$seeds over $count test binaries and the libraries' ${lib_filters[*]} ${queue_lib_filters[*]} tests"
