#!/usr/bin/env bash
# The test suite on a fresh Debian 12 or 13 machine, as root: installs what is missing,
# builds, and runs a tier of the tests.
#
# usage: scripts/test.sh [--all]
#   (none)  the per-change tier, what CI runs: the gcc build's unit, viewer, native and
#           file tests and one Python fully, the other Pythons on a subset, and the
#           AddressSanitizer+UBSan build on a subset (tests/tiers.py says which).
#   --all   every test: the gcc build's every suite, clang's unit suite, the sanitizer
#           build's all but 'slow' and 'hook-other', and the fuzzers for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
case "${1:-}" in
--all) all=1 ;;
"") ;;
*) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
# How long each step took, printed last ('times: ...'): what CI's time is made of.
times=()
last=$SECONDS
mark() {
	times+=("$1 $((SECONDS - last)) s")
	last=$SECONDS
}
scripts/setup.sh $([ "$all" = 0 ] || echo --all)
mark set-up

status=0
rm -f build*/meson-logs/testlog.json
run() {
	echo "== $*"
	"$@" || status=1
}
# The tests of a tier by name (tests/tiers.py), or every test with --all. Three at once:
# most of them wait on their programs more than they compute, and each is made to pass
# on a loaded machine.
tier_test() {
	local dir=$1 tier=$2
	shift 2
	if [ "$all" = 1 ]; then
		run meson test -C "$dir" --print-errorlogs --num-processes 3 "$@"
	else
		mapfile -t names < <(python3 tests/tiers.py "$tier" "$dir")
		echo "== meson test -C $dir: the ${#names[@]} tests of tier $tier (tests/tiers.py)"
		meson test -C "$dir" --print-errorlogs --num-processes 3 "${names[@]}" || status=1
	fi
}

# The PyPI venvs the gcc build's tests use are made while it compiles (on a fresh
# build directory; else only checked): half of making them is pip on the network.
run env CC=gcc scripts/build.sh --setup-only build
mkdir -p build/meson-logs
# (the tier's alone, unless --all: snakeviz's is only --all's)
mapfile -t venv_tests < <([ "$all" = 1 ] || python3 tests/tiers.py change build)
python3 tests/lib/make_venvs.py build "${venv_tests[@]}" >build/meson-logs/venvs.txt 2>&1 &
venvs=$!
compile() { ninja -C "$1" >/dev/null; }
run compile build
wait $venvs || true
mark "gcc build and venvs"
tier_test build change
mark "gcc tests"
builds=(build)

if [ "$all" = 1 ]; then
	run env CC=clang scripts/build.sh build-clang
	run meson test -C build-clang --print-errorlogs --num-processes 2 --suite unit
	builds+=(build-clang)
	mark "clang build and tests"
fi

# Per change, configured only: `meson test` then builds what the tier's tests need.
# At -O1, which AddressSanitizer's documentation advises: it compiles in three quarters
# of -O2's CPU time (the whole tree: 115 against 157 s), and CI's two cores are busy.
run env CC=gcc scripts/build.sh $([ "$all" = 1 ] || echo --setup-only) build-asan \
	-Db_sanitize=address,undefined -Db_lundef=false -Doptimization=1
# The sanitizers never run 'slow' (the timing-heavy repeats of cases the other suites
# already run: longer toggled windows, the RESP servers, the browser) nor 'hook-other'
# (the python cases again under the profile function, but on two Pythons:
# tests/python/meson.build), both of which the gcc build runs.
# COPROF_VENV_DIR: the python greenlet cases use the gevent venvs the gcc build's tests
# made (tests/python/run.py) rather than making their own with pip again.
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	COPROF_VENV_DIR="$PWD/build"
tier_test build-asan asan --no-suite slow --no-suite hook-other
mark "sanitizer build and tests"
unset ASAN_OPTIONS UBSAN_OPTIONS COPROF_VENV_DIR
builds+=(build-asan)

if [ "$all" = 1 ]; then
	# Configured only: `meson test --suite fuzz` builds the two fuzzers and nothing else
	# (the rest of this clang build is build-clang's, which compiles everything).
	run env CC=clang scripts/build.sh --setup-only build-fuzz -Dfuzz=true -Dpreload=false
	run meson test -C build-fuzz --print-errorlogs --suite fuzz
	builds+=(build-fuzz)
	mark fuzzers
fi

python3 scripts/test-summary.py "${builds[@]}"
IFS=, && echo "times:${times[*]/#/ }; in all $SECONDS s"
exit $status
