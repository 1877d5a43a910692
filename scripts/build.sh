#!/usr/bin/env bash
# Configures (or reconfigures) and builds one build directory.
# usage: scripts/build.sh [--setup-only] DIR [meson setup options...]
# (CC in the environment picks the compiler). --setup-only configures and builds
# nothing: `meson test` then builds what the tests it runs need, and only that.
set -euo pipefail
build=1
if [ "${1:-}" = --setup-only ]; then
	build=0
	shift
fi
dir=$1
shift
if [ -f "$dir/build.ninja" ]; then
	meson setup --reconfigure "$dir" "$@" >/dev/null
else
	meson setup "$dir" "$@" >/dev/null
fi
if [ "$build" = 1 ]; then
	ninja -C "$dir" >/dev/null
fi
