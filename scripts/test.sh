#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 or 13 machine, as root: installs what is missing,
# then builds and tests with gcc (every suite), with clang, and with AddressSanitizer
# and UndefinedBehaviorSanitizer (all but 'slow' and 'hook-other'), and runs the fuzzers for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

status=0
rm -f build*/meson-logs/testlog.json
run() {
	echo "== $*"
	"$@" || status=1
}

# The PyPI venvs the gcc build's tests use are made while it compiles (on a fresh
# build directory; else only checked): half of making them is pip on the network.
run env CC=gcc scripts/build.sh --setup-only build
mkdir -p build/meson-logs
python3 tests/lib/make_venvs.py build >build/meson-logs/venvs.txt 2>&1 &
venvs=$!
compile() { ninja -C "$1" >/dev/null; }
run compile build
wait $venvs || true
run meson test -C build --print-errorlogs --num-processes 2

run env CC=clang scripts/build.sh build-clang
run meson test -C build-clang --print-errorlogs --num-processes 2 --suite unit

run env CC=gcc scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false
# The sanitizers run every suite but 'slow' (the timing-heavy repeats of cases the
# other suites already run: longer toggled windows, the RESP servers, the browser)
# and 'hook-other' (the python cases again under the profile function, but on two
# Pythons: tests/python/meson.build), both of which the gcc build runs.
# COPROF_VENV_DIR: the python greenlet cases use the gevent venvs the gcc build's tests
# made (tests/python/run.py) rather than making their own with pip again.
run env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	COPROF_VENV_DIR="$PWD/build" \
	meson test -C build-asan --print-errorlogs --num-processes 2 --no-suite slow \
	--no-suite hook-other

# Configured only: `meson test --suite fuzz` builds the two fuzzers and nothing else
# (the rest of this clang build is build-clang's, which compiles everything).
run env CC=clang scripts/build.sh --setup-only build-fuzz -Dfuzz=true -Dpreload=false
run meson test -C build-fuzz --print-errorlogs --suite fuzz

python3 scripts/test-summary.py build build-clang build-asan build-fuzz
exit $status
