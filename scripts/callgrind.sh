#!/usr/bin/env bash
# Instructions per operation, from callgrind: runs each op of benches/ops.rs
# N and 2N times and divides the difference by N (so setup cancels out).
# Repeatable whatever else the machine is doing.
#
#   bash scripts/callgrind.sh [N] [OP ...]
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  echo "SKIP callgrind: valgrind is not installed"
  exit 0
fi
n=${1:-20000}
shift || true
ops=("$@")
if [[ ${#ops[@]} -eq 0 ]]; then
  ops=(post_dispatch post_dispatch_observed post_dispatch_traced timer_churn spawn_local)
fi
cargo bench --bench ops --no-run --quiet 2>/dev/null
bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/ops-* | grep -v '\.d$' | head -1)
ir() {
  local out
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" >/dev/null 2>&1
  awk '/^summary:/ {print $2}' "$out"
  rm -f "$out"
}
for op in "${ops[@]}"; do
  a=$(ir "$op" "$n")
  b=$(ir "$op" $((2 * n)))
  echo "$op: $(( (b - a) / n )) instructions/op"
done
