#!/usr/bin/env bash
# The per-change tier again and again on a loaded machine: each run starts
# `stress --cpu 2` (two CPU hogs), runs the tier's tests of build/ and build-asan/ as
# scripts/test.sh does, and stops its hog by pid. Run scripts/test.sh first: this
# builds nothing.
#
# usage: tests/loaded.sh [RUNS]     (default 30)
# Prints one line per run ('run K: N passed, N failed, N skipped' and the failures) and
# a closing 'passed R of RUNS'; the logs of a failed run stay in
# build*/meson-logs/loaded-K/.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-30}
passed=0
for k in $(seq 1 "$runs"); do
	stress --cpu 2 >/dev/null 2>&1 &
	hog=$!
	ok=1
	rm -f build/meson-logs/testlog.json build-asan/meson-logs/testlog.json
	mapfile -t change < <(python3 tests/tiers.py change build)
	COPROF_VENV_DIR="$PWD/build" meson test -C build --num-processes 3 "${change[@]}" \
		>/dev/null 2>&1 || ok=0
	mapfile -t asan < <(python3 tests/tiers.py asan build-asan)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		COPROF_VENV_DIR="$PWD/build" meson test -C build-asan --num-processes 3 "${asan[@]}" \
		>/dev/null 2>&1 || ok=0
	kill "$hog"
	wait "$hog" 2>/dev/null
	echo "run $k: $(python3 scripts/test-summary.py build build-asan | tail -1)"
	if [ "$ok" = 1 ]; then
		passed=$((passed + 1))
	else
		python3 scripts/test-summary.py build build-asan | sed '$d'
		for d in build build-asan; do
			mkdir -p "$d/meson-logs/loaded-$k"
			cp "$d"/meson-logs/testlog.* "$d/meson-logs/loaded-$k/"
		done
	fi
done
echo "passed $passed of $runs"
[ "$passed" = "$runs" ]
