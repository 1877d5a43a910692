#!/usr/bin/env bash
# Installs every Debian package coprof needs to build, test and benchmark.
# Idempotent: packages already present are skipped; apt-get runs only if one is missing.
set -euo pipefail

pkgs=(
	build-essential clang lld pkg-config meson ninja-build
	libcriterion-dev libdw-dev libelf-dev libunwind-dev libncurses-dev
	libclang-rt-dev
	python3 python3-yappi
	uftrace google-perftools libgoogle-perftools-dev
	redis-tools valgrind tmux hyperfine afl++ procps stress
	chromium chromium-driver python3-venv
	zlib1g-dev golang-go clang-format
	strace # tests/native toggle-*: no signal is sent for a refused pid
	linux-perf redis-server
	nginx apache2-utils # tests/native creds-nginx: workers that drop privileges, under ab
	python3-gevent python3-eventlet # tests/python greenlet_*: gevent, eventlet and greenlet for /usr/bin/python3
	g++ libst-dev libboost-context-dev # tests/native runtimes and samples/native: State Threads, Boost.Context
	gcc-multilib # tests/attach 32bit: a 32-bit process, which coprof attach refuses
)

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
