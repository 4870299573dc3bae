#!/usr/bin/env bash
# Runs examples/winit_window.rs (a winit window whose counters a Looper
# drives through the wake hook) under Xvfb for a few seconds, takes a PNG
# screenshot of the screen, and checks:
#   - the example exits by itself with status 0;
#   - ticks of its 100 ms deliloop interval arrived (at least 70% of them);
#   - posts from its background thread (every 200 ms) arrived (at least half);
#   - the process used under 5% of one core over an idle stretch (utime +
#     stime from /proc/PID/stat), and by its own getrusage figure too;
#   - the screenshot shows the window: its background colour and white text.
#
#   bash scripts/winit-xvfb.sh            # 5 seconds
#   bash scripts/winit-xvfb.sh 8          # 8 seconds (at least 4)
#
# The screenshot goes to winit-xvfb.png in cargo's target directory
# (WINIT_XVFB_SHOT overrides).
# What it needs (Xvfb, ImageMagick, the X client libraries winit 0.30's X11
# backend and softbuffer load at run time) it installs from Debian's
# packages when run as root with apt-get; if it cannot, it prints one
# "SKIP winit-xvfb: <why>" line and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."

skip() {
  echo "SKIP winit-xvfb: $*"
  exit 0
}
fail() {
  echo "FAIL winit-xvfb: $*"
  exit 1
}

seconds=${1:-5}
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 4 ]] || fail "seconds: a whole number, at least 4 (got '$seconds')"
[[ "$(uname -s)" == Linux ]] || skip "not Linux"

tools=(Xvfb import convert)
# What winit's X11 backend (x11-dl, xkbcommon-dl) and softbuffer (x11rb
# with dl-libxcb) dlopen.
libs=(libX11.so.6 libX11-xcb.so.1 libXcursor.so.1 libXrandr.so.2 libXi.so.6
  libxkbcommon.so.0 libxkbcommon-x11.so.0 libxcb.so.1)
packages=(xvfb x11-utils imagemagick libx11-6 libx11-xcb1 libxcursor1 libxrandr2
  libxi6 libxkbcommon0 libxkbcommon-x11-0 libxcb1)

missing() {
  local m=()
  for t in "${tools[@]}"; do
    command -v "$t" >/dev/null 2>&1 || m+=("$t")
  done
  local have
  # Not on a non-root PATH on Debian.
  have=$({ command -v ldconfig >/dev/null && ldconfig -p; } 2>/dev/null || /sbin/ldconfig -p 2>/dev/null)
  for l in "${libs[@]}"; do
    grep -q "^[[:space:]]*$l " <<<"$have" || m+=("$l")
  done
  echo "${m[*]}"
}

work=$(mktemp -d)
xvfb_pid=""
app_pid=""
cleanup() {
  [[ -n "$app_pid" ]] && kill "$app_pid" 2>/dev/null
  [[ -n "$xvfb_pid" ]] && kill "$xvfb_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

gone=$(missing)
if [[ -n "$gone" ]]; then
  if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    skip "missing $gone, and installing needs root and apt-get"
  fi
  echo "winit-xvfb: installing ${packages[*]}"
  apt-get update -q >"$work/apt.log" 2>&1 || skip "apt-get update failed: $(tail -n 1 "$work/apt.log")"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}" >>"$work/apt.log" 2>&1 ||
    skip "apt-get install failed: $(tail -n 1 "$work/apt.log")"
  gone=$(missing)
  [[ -z "$gone" ]] || skip "still missing after apt-get install: $gone"
fi

echo "winit-xvfb: building the example (release, feature winit-example)"
cargo build --release --quiet --features winit-example --example winit_window ||
  fail "the example does not build"
exe="${CARGO_TARGET_DIR:-target}/release/examples/winit_window"
[[ -x "$exe" ]] || fail "no binary at $exe"

# -displayfd: Xvfb picks a free display and writes its number once it
# accepts clients. -br: a black root, so the window stands out.
Xvfb -displayfd 3 -screen 0 640x360x24 -nolisten tcp -br 3>"$work/display" 2>"$work/xvfb.log" &
xvfb_pid=$!
for _ in $(seq 100); do
  [[ -s "$work/display" ]] && break
  kill -0 "$xvfb_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -s "$work/display" ]] || skip "Xvfb did not start: $(tail -n 1 "$work/xvfb.log")"
export DISPLAY=":$(head -n 1 "$work/display")"

# CPU ticks (utime + stime) of a process; fields after the command name.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK)

"$exe" "$seconds" >"$work/out" 2>"$work/err" &
app_pid=$!
pid=$app_pid
# The idle stretch: from 1.5 s (after the example's warm-up) to 1.5 s
# before its exit.
sleep 1.5
c0=$(cpu_ticks "$app_pid") || fail "the example exited early: $(tail -n 3 "$work/err")"
t0=$(date +%s.%N)
sleep "$((seconds - 3)).0"
c1=$(cpu_ticks "$app_pid") || fail "the example exited early: $(tail -n 3 "$work/err")"
t1=$(date +%s.%N)
shot=${WINIT_XVFB_SHOT:-${CARGO_TARGET_DIR:-target}/winit-xvfb.png}
mkdir -p "$(dirname "$shot")"
import -window root "$shot" 2>"$work/import.log" || fail "screenshot failed: $(tail -n 1 "$work/import.log")"

status=0
timeout "$((seconds + 30))" tail --pid="$app_pid" -f /dev/null || fail "the example did not exit by itself"
wait "$app_pid" || status=$?
app_pid=""
cat "$work/out"
[[ $status -eq 0 ]] || fail "the example exited with status $status: $(tail -n 3 "$work/err")"

ticks=$(sed -n 's/^ticks: \([0-9]*\).*/\1/p' "$work/out")
posts=$(sed -n 's/^posts: \([0-9]*\).*/\1/p' "$work/out")
own_cpu=$(sed -n 's/^idle cpu: \([0-9.]*\)%.*/\1/p' "$work/out")
[[ -n "$ticks" && -n "$posts" && -n "$own_cpu" ]] || fail "the example's report is incomplete"
idle_cpu=$(awk -v c="$((c1 - c0))" -v hz="$hz" -v a="$t0" -v b="$t1" \
  'BEGIN { printf "%.2f", c / hz / (b - a) * 100 }')
echo "winit-xvfb: /proc/$pid/stat over $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s idle: ${idle_cpu}% of one core"

min_ticks=$((seconds * 10 * 7 / 10))
min_posts=$((seconds * 5 / 2))
((ticks >= min_ticks)) || fail "$ticks ticks, expected at least $min_ticks"
((posts >= min_posts)) || fail "$posts cross-thread posts, expected at least $min_posts"
awk -v x="$idle_cpu" 'BEGIN { exit !(x < 5) }' || fail "idle CPU ${idle_cpu}% of one core, limit 5%"
awk -v x="$own_cpu" 'BEGIN { exit !(x < 5) }' || fail "the example's own idle CPU figure is ${own_cpu}%, limit 5%"

# The window's background (examples/winit_window.rs, BACKGROUND) and its
# white text must both be on screen.
colours=$(convert "$shot" -format %c histogram:info:- 2>/dev/null)
grep -qi "#1E3A5F" <<<"$colours" || fail "the screenshot ($shot) does not show the window's background"
grep -qi "#FFFFFF" <<<"$colours" || fail "the screenshot ($shot) shows no text"

echo "winit-xvfb: ok: $ticks ticks, $posts cross-thread posts, idle CPU ${idle_cpu}% of one core; screenshot $shot"
