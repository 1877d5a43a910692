#!/usr/bin/env bash
# Builds bench-engine (meson's default buildtype for coprof: debugoptimized, -O2) and
# runs it; arguments go to bench-engine (-r ROUNDS, -m MS per measurement). Prints a
# markdown table of ns per clock read and per enter+leave pair, medians over rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-bench}
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$root" -Dpreload=false -Dviewer=disabled -Dtests=disabled >/dev/null
fi
ninja -C "$build" bench/engine/bench-engine >&2
exec "$build/bench/engine/bench-engine" "$@"
