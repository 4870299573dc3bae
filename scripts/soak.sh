#!/usr/bin/env bash
# The soak: every feature at once for a while (examples/soak.rs says what
# runs). Prints RSS, heap, limbo and backlog every 10 s; fails if the RSS
# or the limbo's floor grows by more than 5% from the end of warm-up (the
# first minute; a third of the run when it is shorter than three minutes)
# to the end, or if any count disagrees (posted = run + cancelled +
# removed + dropped, each against what the posters counted).
#
#   bash scripts/soak.sh          # 600 s
#   bash scripts/soak.sh 45       # what CI runs
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
cargo build --release --quiet --example soak
exec "${CARGO_TARGET_DIR:-target}/release/examples/soak" "$seconds"
