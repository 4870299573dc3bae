#!/usr/bin/env bash
# Row N of BENCHMARKS.md: the same hyper hello-world HTTP/1.1 service on
# deliloop (examples/http.rs), on tokio current_thread and on smol
# (async-executor + async-io) (examples/http_peers.rs), one server thread
# each, loaded by wrk with keep-alive over loopback. Runs are interleaved
# (deliloop, tokio, smol, deliloop, ...) so drift hits all alike; the table
# gives the median over rounds of requests/s and of wrk's p99 latency.
#
#   bash scripts/http-bench.sh            # 5 rounds of 10 s, 64 connections
#   ROUNDS=3 DURATION=5 CONNS=64 bash scripts/http-bench.sh
#   LOOPS=2 bash scripts/http-bench.sh    # group mode (row N2), below
#
# Group mode (LOOPS=N): examples/http_group.rs on N loops (a
# bind_reuse_port listener each) against hyper on tokio's multi-thread
# runtime with N workers and on N tokio current_thread runtimes with
# SO_REUSEPORT listeners (examples/http_peers.rs). The servers are not
# pinned; wrk runs WRK_THREADS threads (default 1) and shares the CPUs.
#
# The server is pinned to CPU 1 and wrk (one thread) to CPU 0 where the
# machine has two CPUs or more.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}

if ! command -v wrk >/dev/null; then
  if [[ $(id -u) == 0 ]]; then
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
  fi
fi
if ! command -v wrk >/dev/null; then
  echo "SKIP row N: wrk is not installed and cannot be (apt-get install wrk as root)"
  exit 0
fi

cargo build --release --quiet --features hyper --example http --example http_peers --example http_group
target=${CARGO_TARGET_DIR:-target}
bin="$target/release/examples"

pin_server=() pin_wrk=()
if command -v taskset >/dev/null && (( $(nproc) >= 2 )); then
  pin_server=(taskset -c 1) pin_wrk=(taskset -c 0)
fi

# Starts a server, runs wrk against it, stops it; prints "rps p99_us".
run_one() {
  local out addr pid
  out=$(mktemp)
  "${pin_server[@]}" "$@" >"$out" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    addr=$(head -n 1 "$out")
    [[ -n "$addr" ]] && break
    sleep 0.05
  done
  [[ -n "$addr" ]] || { echo "server did not start: $*" >&2; kill "$pid"; exit 1; }
  # Warm up (connections, caches), then measure.
  "${pin_wrk[@]}" wrk -t"${WRK_THREADS:-1}" -c"$CONNS" -d1s "$addr" >/dev/null
  local res
  res=$("${pin_wrk[@]}" wrk -t"${WRK_THREADS:-1}" -c"$CONNS" -d"${DURATION}s" --latency "$addr")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rm -f "$out"
  local rps p99
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$res")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$res")
  if grep -q "Non-2xx\|Socket errors" <<<"$res"; then
    echo "errors against $*:" >&2
    grep "Non-2xx\|Socket errors" <<<"$res" >&2
  fi
  echo "$rps $(to_us "$p99")"
}

# wrk prints latencies as 1.23ms / 456.00us / 1.20s.
to_us() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); print v + 0 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); print v * 1000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); print v * 1000000 }
    else print v }'
}

names=("deliloop" "tokio current_thread" "smol (async-executor + async-io)")
cmds=("$bin/http" "$bin/http_peers --runtime tokio" "$bin/http_peers --runtime smol")
if [[ -n "${LOOPS:-}" ]]; then
  names=("deliloop LoopGroup ($LOOPS loops)" "tokio multi-thread ($LOOPS workers)" "tokio ${LOOPS}x current_thread, SO_REUSEPORT")
  cmds=("$bin/http_group --loops $LOOPS" "$bin/http_peers --runtime tokio-multi --threads $LOOPS" "$bin/http_peers --runtime tokio-reuseport --threads $LOOPS")
  pin_server=()
fi
declare -A rps p99
for r in $(seq "$ROUNDS"); do
  for i in "${!names[@]}"; do
    # shellcheck disable=SC2086
    read -r a b < <(run_one ${cmds[$i]})
    rps[$i]+="$a "
    p99[$i]+="$b "
    echo "round $r ${names[$i]}: $a req/s, p99 $b us" >&2
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo
echo "wrk -t${WRK_THREADS:-1} -c$CONNS -d${DURATION}s --latency, $ROUNDS interleaved rounds, server on ${LOOPS:-one} thread(s); median over rounds"
echo
echo "| server | requests/s | p99 latency | requests/s vs best peer |"
echo "|---|---|---|---|"
best=0
for i in 1 2; do
  m=$(median <<<"${rps[$i]}")
  best=$(awk -v a="$best" -v b="$m" 'BEGIN {print (b > a) ? b : a}')
done
for i in "${!names[@]}"; do
  m=$(median <<<"${rps[$i]}")
  l=$(median <<<"${p99[$i]}")
  ratio=$(awk -v a="$m" -v b="$best" 'BEGIN {printf "%.2fx", a / b}')
  printf '| %s | %.0f | %.0f µs | %s |\n' "${names[$i]}" "$m" "$l" "$ratio"
done
