#!/usr/bin/env bash
# Runs the environment parser's fuzz target (fuzz-env) for a bounded time
# (FUZZ_SECONDS, default 20), starting from the corpus kept in the tree
# (tests/native/corpus-env, minimized from long runs: bench/fuzz/long.sh). New inputs
# go to a temporary directory, never into the tree; a crashing input is kept next to
# the test's build directory as fuzz-env-crash-*.
# usage: run-fuzz-env.sh FUZZER
set -euo pipefail
fuzzer=$1
work=$(mktemp -d /tmp/coprof-fuzz-env-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$fuzzer" -max_total_time="${FUZZ_SECONDS:-20}" -max_len=512 -error_exitcode=1 -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$PWD/fuzz-env-crash-" \
	"$work" "$(dirname "$0")/corpus-env"
