#!/usr/bin/env bash
# Runs each libFuzzer target for a long time (SECONDS_PER_TARGET, default 1800), one
# at a time, starting from the corpus kept in the tree, then minimizes what it found
# back into that corpus (-merge=1) so that CI's short run starts from it. Prints each
# run's final stats; the crashing inputs, if any, land in the current directory.
# usage: bench/fuzz/long.sh BUILD_FUZZ_DIR    (a build made with -Dfuzz=true, clang)
set -euo pipefail
build=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${SECONDS_PER_TARGET:-1800}
work=$(mktemp -d /tmp/coprof-fuzz-long-XXXXXX)
trap 'rm -rf "$work"' EXIT

# one_target NAME FUZZER CORPUS_IN_TREE [extra libFuzzer options...]
one_target() {
	local name=$1 fuzzer=$2 kept=$3
	shift 3
	mkdir -p "$work/$name" "$kept"
	echo "== $name: $secs s from $(ls "$kept" | wc -l) kept inputs ($(date -u +%H:%M:%S))"
	local status=0
	"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$PWD/$name-crash-" "$@" "$work/$name" "$kept" "$work/seeds-$name" \
		>"$work/$name.log" 2>&1 || status=$?
	grep -E '^(#[0-9]+.*(INITED|DONE)|stat::|==[0-9]+==ERROR|SUMMARY)' "$work/$name.log" || true
	tail -n 3 "$work/$name.log" | grep -v '^stat::' || true
	echo "   exit $status"
	# minimize: the kept corpus becomes the smallest set with the same coverage
	mkdir "$work/$name-min"
	"$fuzzer" -merge=1 "$@" "$work/$name-min" "$kept" "$work/$name" >"$work/$name-merge.log" 2>&1
	rm -f "$kept"/*
	cp "$work/$name-min"/* "$kept"/
	echo "   kept corpus: $(ls "$kept" | wc -l) files, $(du -sk "$kept" | cut -f1) KiB"
}

mkdir -p "$work/seeds-pstat" "$work/seeds-env"
"$build/tests/file/gen-profile" "$work/seeds-pstat/coprof"
rm -f "$work/seeds-pstat/coprof.json"
/usr/bin/python3 "$src/tests/file/gen_foreign.py" "$work/seeds-pstat" >/dev/null
rm -f "$work/seeds-pstat/prog_work.py"
one_target pstat "$build/tests/fuzz/fuzz-pstat" "$src/tests/fuzz/corpus" \
	-max_len=65536 -dict="$src/tests/fuzz/pstat.dict"
one_target env "$build/tests/native/fuzz-env" "$src/tests/native/corpus-env" -max_len=512
