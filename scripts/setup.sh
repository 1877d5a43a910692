#!/usr/bin/env bash
# Installs the Debian packages coprof needs.
#
# usage: scripts/setup.sh [--all]
#   (none)  to build, run the demo and the per-change tier of the tests (scripts/test.sh)
#   --all   also what only `scripts/test.sh --all`, bench/ and scripts/screenshots.sh
#           use: clang and its fuzzing runtimes, AFL++, chromium, the anchors
#           (uftrace, gperftools, perf), hyperfine. About 1 GB more on a fresh machine,
#           which CI, running the tier, does not spend.
# Idempotent: packages already present are skipped; apt-get runs only if one is missing.
set -euo pipefail
case "${1:-}" in
--all | "") ;;
*) echo "usage: scripts/setup.sh [--all]" >&2; exit 2 ;;
esac

pkgs=(
	build-essential pkg-config meson ninja-build
	libcriterion-dev libdw-dev libelf-dev libunwind-dev libncurses-dev
	python3 python3-yappi
	redis-tools valgrind tmux procps stress
	python3-venv
	zlib1g-dev golang-go
	strace # tests/native toggle-*: no signal is sent for a refused pid
	redis-server
	nginx apache2-utils # tests/native creds-nginx: workers that drop privileges, under ab
	python3-gevent python3-eventlet # tests/python greenlet_*: gevent, eventlet and greenlet for /usr/bin/python3
	g++ libst-dev libboost-context-dev # tests/native runtimes and samples/native: State Threads, Boost.Context
	gcc-multilib # tests/attach 32bit: a 32-bit process, which coprof attach refuses
)
if [ "${1:-}" = --all ]; then
	pkgs+=(
		clang lld libclang-rt-dev # build-clang, the fuzzers (build-fuzz)
		afl++                     # tests/fuzz
		chromium chromium-driver  # tests/snakeviz (suite slow), scripts/screenshots.sh
		uftrace google-perftools libgoogle-perftools-dev linux-perf hyperfine # bench/
		clang-format              # the code's style (.clang-format)
	)
fi

# CPython's own test package for Debian's python3, which tests/python's cpython_suites
# runs under coprof (pyenv's Pythons ship theirs): libpython3.11-testsuite on Debian 12.
if [ -x /usr/bin/python3 ]; then
	pkgs+=("libpython$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-testsuite")
fi

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
