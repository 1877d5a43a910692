#!/usr/bin/env bash
# Configures (or reconfigures) and builds one build directory.
# usage: scripts/build.sh DIR [meson setup options...]   (CC in the environment picks the compiler)
set -euo pipefail
dir=$1
shift
if [ -f "$dir/build.ninja" ]; then
	meson setup --reconfigure "$dir" "$@" >/dev/null
else
	meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
