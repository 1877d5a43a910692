#!/usr/bin/env bash
# The main job on a fresh Debian 12 or 13 machine, as root: installs what is missing, builds,
# profiles the bundled coroutine scheduler sample and prints the report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
CC=${CC:-gcc} scripts/build.sh build
out=${TMPDIR:-/tmp}/coprof-demo.pstat
rm -f "$out"
build/viewer/coprof record -c cpu -o "$out" -- build/samples/native/sched
build/viewer/coprof report "$out" --limit 15
build/viewer/coprof report "$out" --tasks
