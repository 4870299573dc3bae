#!/usr/bin/env bash
# The test suite on ARM, under qemu-user: aarch64 (64-bit words, the
# aarch64 syscall paths, busy mode's plain-store publish) and armv7
# (32-bit words, for the queue's tagged words); and the clippy matrix of
# the targets that are built but not run here (Android, i686, Apple's,
# FreeBSD, Windows).
#
#   bash scripts/cross-test.sh           # everything below
#   bash scripts/cross-test.sh --quick   # CI's slice: on aarch64 the
#                                        # queue crate's tests and the
#                                        # runtime's core suites; the
#                                        # armv7 queue tests; the whole
#                                        # clippy matrix; no Miri
#
# What it runs:
#   1. aarch64: `cargo test` of the workspace (features hyper, calloop,
#      trace), built with Debian's cross gcc as the linker and run under
#      qemu-aarch64. A test that cannot run under qemu is skipped by name
#      and listed with its reason (EXCLUDED lines). Tests that run their
#      own binary again (a child with another environment) do so under
#      the emulator named by DELILOOP_TEST_RUNNER; tests whose pauses are
#      sized for native speed read DELILOOP_TIME_SCALE.
#   2. aarch64: the queue stress test at full size (release).
#   3. armv7: the queue crate's tests under qemu-arm.
#   4. the clippy matrix, `--lib --examples` with `-D warnings` (no C
#      cross-toolchain here for these, so nothing is linked or run):
#      aarch64-linux-android, armv7-linux-androideabi,
#      i686-unknown-linux-gnu, x86_64-apple-darwin, aarch64-apple-darwin,
#      aarch64-apple-ios and x86_64-unknown-freebsd with features hyper,
#      calloop, trace; x86_64-pc-windows-gnu and x86_64-pc-windows-msvc
#      with hyper, trace (calloop's Looper source is Unix only), and
#      the runtime's tests for x86_64-pc-windows-gnu.
#      examples/portable.rs (runtime, timers, cross-thread posts, TCP) is
#      among the examples, so each target builds the runtime's core.
#   5. Miri on the queue tests with --target aarch64-unknown-linux-gnu
#      (its 64-bit ARM layout; not in --quick).
#
# What it proves: the code runs correctly on ARM instruction sets, word
# sizes, alignment and system-call numbers. qemu-user runs the ARM threads
# on the host's CPUs with the host's (x86-64's) stronger memory ordering,
# so it proves nothing about weak memory: that rests on the loom models
# (the C11 model) and Miri. `membarrier` goes to the host kernel, so busy
# mode's barrier and its fallback run for real, but the barrier orders
# what the emulated threads see only through the host's ordering.
#
# Installs what is missing (rustup targets; Debian's cross gcc, libc and
# qemu-user); prints `SKIP cross-test: <why>` if nothing can run.
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1

part() {
  local start=$SECONDS
  echo "--> $1"
  shift
  "$@"
  local rc=$?
  printf '<-- %d s\n' $((SECONDS - start))
  return $rc
}

need_pkgs=()
command -v qemu-aarch64 >/dev/null || need_pkgs+=(qemu-user)
command -v aarch64-linux-gnu-gcc >/dev/null || need_pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v arm-linux-gnueabihf-gcc >/dev/null || need_pkgs+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross)
if ((${#need_pkgs[@]})); then
  if ! { apt-get update -qq >/dev/null 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null 2>&1; }; then
    echo "SKIP cross-test: could not install ${need_pkgs[*]}"
    exit 0
  fi
fi
if ! rustup target add aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf >/dev/null 2>&1; then
  echo "SKIP cross-test: rustup could not add the ARM targets"
  exit 0
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_LINKER=arm-linux-gnueabihf-gcc
export CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUNNER="qemu-arm -L /usr/arm-linux-gnueabihf"
export CC_armv7_unknown_linux_gnueabihf=arm-linux-gnueabihf-gcc
# Timing bounds in the tests that read it are this many times wider.
export DELILOOP_TIME_SCALE=${DELILOOP_TIME_SCALE:-4}

# Tests that cannot run under qemu-user, each with its reason.
excluded=(
  "missing_program_is_not_found_and_the_loop_goes_on|qemu-user reports a failed exec of a child as the child's exit (127), not as a spawn error"
  "Command::spawn|its example spawns a missing program: qemu-user reports the failed exec as the child's exit (127)"
)
skips=()
for e in "${excluded[@]}"; do
  name=${e%%|*}
  echo "EXCLUDED $name: ${e#*|}"
  skips+=(--skip "$name")
done

features="hyper,calloop,trace"
# CI's slice: the queue crate's tests, and these of the runtime.
slice=(cancel cross_thread spawn timer quit android flood faults io busy_mode)
failed=0
if ((quick)); then
  targs=()
  for t in "${slice[@]}"; do targs+=(--test "$t"); done
  part "aarch64: the queue crate's tests under qemu-aarch64" \
    env DELILOOP_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" cargo test --target aarch64-unknown-linux-gnu -p deliloop-queue --tests -- "${skips[@]}" || failed=1
  part "aarch64: the runtime's ${slice[*]} under qemu-aarch64" \
    env DELILOOP_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" cargo test --target aarch64-unknown-linux-gnu -p deliloop --features "$features" "${targs[@]}" -- "${skips[@]}" || failed=1
else
  part "aarch64: cargo test --workspace (features $features) under qemu-aarch64" \
    env DELILOOP_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" cargo test --no-fail-fast --target aarch64-unknown-linux-gnu --workspace --features "$features" -- "${skips[@]}" || failed=1
  part "aarch64: the queue stress test at full size (release)" \
    env DELILOOP_TEST_RUNNER="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER" cargo test --release --target aarch64-unknown-linux-gnu -p deliloop-queue --test queue_stress || failed=1
fi
part "armv7: the queue crate's tests under qemu-arm" \
  env DELILOOP_TEST_RUNNER="$CARGO_TARGET_ARMV7_UNKNOWN_LINUX_GNUEABIHF_RUNNER" cargo test --target armv7-unknown-linux-gnueabihf -p deliloop-queue -- "${skips[@]}" || failed=1
# The clippy matrix: the library and the examples for the targets with no
# linker here (Android's NDK, Apple's SDK, FreeBSD's and Windows' C
# libraries are absent; i686 for 32-bit x86 words). Windows has no
# calloop source (it needs the looper's fd).
clippy_target() {
  local t=$1 feats=$2
  if rustup target add "$t" >/dev/null 2>&1; then
    part "clippy --lib --examples --target $t (features $feats)" \
      cargo clippy --quiet --lib --examples --target "$t" --features "$feats" -- -D warnings || failed=1
  else
    echo "SKIP clippy $t: rustup could not add the target"
  fi
}
for t in aarch64-linux-android armv7-linux-androideabi i686-unknown-linux-gnu \
  x86_64-apple-darwin aarch64-apple-darwin aarch64-apple-ios x86_64-unknown-freebsd; do
  clippy_target "$t" "$features"
done
for t in x86_64-pc-windows-gnu x86_64-pc-windows-msvc; do
  clippy_target "$t" "hyper,trace"
done
# The runtime's tests build for Windows too (those that need Unix say so
# in a `cfg`); the queue crate's busy-mode tests and the benches are
# Linux's.
if rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1; then
  part "clippy -p deliloop --tests --target x86_64-pc-windows-gnu (features hyper,trace)" \
    cargo clippy --quiet -p deliloop --tests --target x86_64-pc-windows-gnu --features hyper,trace -- -D warnings || failed=1
fi
if ((quick == 0)); then
  if rustup +nightly component add miri rust-src >/dev/null 2>&1; then
    part "Miri: the queue tests, --target aarch64-unknown-linux-gnu" \
      env -u CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER MIRIFLAGS="-Zmiri-permissive-provenance" \
      cargo +nightly miri test --target aarch64-unknown-linux-gnu -p deliloop-queue \
      --test queue --test queue_lanes --test queue_model || failed=1
  else
    echo "SKIP miri aarch64: the nightly miri component is not available"
  fi
fi
exit $failed
