#!/usr/bin/env bash
# test-engine.sh: the reading commands on files the real engine wrote: samples/native
# sched (three ucontext tasks) under the preload shim, traced and sampled. Checks the
# task table, a task's own functions, per-task folded stacks, callgrind and view.
# Env: COPROF, PRELOAD, SCHED, ASAN_RUNTIME (empty unless a sanitizer build).
set -uo pipefail
: "${COPROF:?}" "${PRELOAD:?}" "${SCHED:?}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
check() {
	local name=$1
	shift
	if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
preload=$PRELOAD
[ -n "${ASAN_RUNTIME:-}" ] && preload="$ASAN_RUNTIME:$PRELOAD"

# 3 rounds, 20 ms crunch, 2 ms nap: well under a second.
COPROF_OUT="$dir/trace.pstat" COPROF_CLOCK=wall LD_PRELOAD=$preload "$SCHED" 3 20 2 >/dev/null
check "the engine wrote a traced file" test -s "$dir/trace.pstat"
COPROF_OUT="$dir/sample.pstat" COPROF_MODE=sample COPROF_HZ=997 COPROF_CLOCK=cpu LD_PRELOAD=$preload \
	"$SCHED" 3 30 2 >/dev/null
check "the engine wrote a sampled file" test -s "$dir/sample.pstat"

out=$("$COPROF" report "$dir/trace.pstat" --tasks)
check "report --tasks: two crunch tasks and a sleeper, finished" \
	test "$(grep -Ec '^ +[0-9]+  (crunch|sleeper) +ucontext +[0-9]+  finished ' <<<"$out")" = 3
check "the header names the command" grep -q "^Command: .*sched 3 20 2$" <<<"$out"
out=$("$COPROF" report "$dir/trace.pstat" --task sleeper)
check "--task sleeper: its own functions only" \
	bash -c 'grep -q "^sleeper_work " <<<"$1" && ! grep -q "^crunch_work " <<<"$1"' _ "$out"
out=$("$COPROF" report "$dir/trace.pstat" --callees crunch_work)
check "--callees crunch_work lists burn_cpu" grep -Eq '^burn_cpu +[0-9]+ ' <<<"$out"

"$COPROF" export "$dir/trace.pstat" --format callgrind -o "$dir/trace.cg"
check "callgrind_annotate reads the export" \
	bash -c 'callgrind_annotate "$1" 2>&1 | grep -q "PROGRAM TOTALS"' _ "$dir/trace.cg"
"$COPROF" export "$dir/sample.pstat" --format collapsed -o "$dir/sample.folded"
check "folded stacks split by task" \
	bash -c 'grep -q "^\[tid [0-9]*\];\[task [0-9]* crunch\];.*;crunch_work;burn_cpu" "$1" &&
		grep -q "^\[tid [0-9]*\];\[task [0-9]* sleeper\];" "$1"' _ "$dir/sample.folded"
TERM=xterm "$COPROF" view --once "$dir/trace.pstat" "$dir/sample.pstat" >/dev/null </dev/null
check "view --once opens both files merged" test $? -eq 0

echo "test-engine: $fails failed"
[ "$fails" -eq 0 ]
