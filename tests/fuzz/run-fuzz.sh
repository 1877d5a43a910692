#!/usr/bin/env bash
# Runs the pstats reader's fuzz target for a bounded time (FUZZ_SECONDS, default 60),
# starting from the corpus kept in the tree (tests/fuzz/corpus, minimized from long
# runs: bench/fuzz/long.sh) and seeded with files made now: a coprof file
# (gen-profile), cProfile's and yappi's (gen_foreign.py). New inputs go to a temporary
# directory, never into the tree. Exits non-zero on a crash, a leak or a timeout; the crashing
# input is kept next to the test's build directory as fuzz-pstat-crash-*.
# usage: run-fuzz.sh FUZZER GEN_PROFILE PYTHON GEN_FOREIGN DICT
set -euo pipefail
fuzzer=$1 gen_profile=$2 python=$3 gen_foreign=$4 dict=$5
work=$(mktemp -d /tmp/coprof-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/seeds"
"$gen_profile" "$work/seeds/coprof"
rm -f "$work/seeds/coprof.json"
"$python" "$gen_foreign" "$work/seeds" >/dev/null
rm -f "$work/seeds/prog_work.py"
ls "$work/seeds"
"$fuzzer" -max_total_time="${FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 \
	-max_len=65536 -print_final_stats=1 -dict="$dict" \
	-artifact_prefix="$PWD/fuzz-pstat-crash-" "$work/corpus" "$work/seeds" \
	"$(dirname "$0")/corpus"
