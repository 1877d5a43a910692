#!/usr/bin/env bash
# test-cli.sh: coprof report, export and diff on files written by cProfile (every
# Python found), yappi and coprof (make-profile), checked against pstats; callgrind
# output read back by callgrind_annotate; bad files give one line and status 2.
# Env: COPROF, MAKE_PROFILE (set by meson).
set -uo pipefail
: "${COPROF:?}" "${MAKE_PROFILE:?}"
PY=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { # check NAME CMD...: passes when CMD succeeds
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

# The workload (work.py) has known counts: fib(12) makes 465 calls, 464 recursive.
cp "$(dirname "$0")/work.py" "$dir/work.py"
$PY -m cProfile -o "$dir/cp.pstat" "$dir/work.py" || fail "cProfile wrote a file"
$PY - "$dir" <<'EOF' || fail "yappi wrote a file"
import sys, yappi
sys.path.insert(0, sys.argv[1])
yappi.set_clock_type("cpu")
yappi.start()
import work
yappi.stop()
yappi.get_func_stats().save(sys.argv[1] + "/yappi.pstat", type="pstat")
EOF
"$MAKE_PROFILE" "$dir/co.pstat" || fail "make-profile (trace)"
"$MAKE_PROFILE" "$dir/co2.pstat" --scale 2 || fail "make-profile (scaled)"
"$MAKE_PROFILE" "$dir/cs.pstat" --sample || fail "make-profile (sample)"

# --- report, text --------------------------------------------------------------
out=$("$COPROF" report "$dir/cp.pstat")
check "report exits 0" test $? -eq 0
check "report shows fib as nc/cc" grep -Eq '^fib +465/1 ' <<<"$out"
check "report shows leaf 50 calls" grep -Eq '^leaf +50 ' <<<"$out"
check "report has yappi columns" grep -Eq '^name +ncall +tsub +ttot +tavg' <<<"$out"
out=$("$COPROF" report "$dir/cp.pstat" --sort ncall --limit 1)
check "--sort ncall puts fib first, --limit 1 shows one row" \
	test "$(grep -Ec '^[^ ]+ +[0-9/]+ +[0-9.]+ ' <<<"$out")" = 1 -a -n "$(grep -E '^fib ' <<<"$out")"
out=$("$COPROF" report "$dir/cp.pstat" --sort name --filter work.py)
check "--filter by file keeps the three functions" \
	test "$(grep -Ec '^(fib|leaf|work|<module>) ' <<<"$out")" = 4
out=$("$COPROF" report "$dir/cp.pstat" --callers fib --callees work)
check "--callers fib lists work and fib itself" \
	bash -c 'grep -Eq "^Callers of fib" <<<"$1" && grep -Eq "^work +1 " <<<"$1" && grep -Eq "^fib +464/2 " <<<"$1"' _ "$out"
check "--callees work lists leaf and fib" \
	bash -c 'grep -Eq "^Callees of work" <<<"$1" && grep -Eq "^leaf +50 " <<<"$1"' _ "$out"
"$COPROF" report "$dir/cp.pstat" --callers no_such_function >/dev/null 2>&1
check "--callers of an unknown name exits 2" test $? -eq 2

# --- report, csv and json agree with pstats -------------------------------------
"$COPROF" report "$dir/cp.pstat" --format json >"$dir/cp.json" || fail "report --format json"
"$COPROF" report "$dir/cp.pstat" --format csv >"$dir/cp.csv" || fail "report --format csv"
check "json and csv match pstats.Stats exactly" $PY - "$dir" <<'EOF'
import csv, json, pstats, sys
d = sys.argv[1]
st = pstats.Stats(d + "/cp.pstat").stats
js = json.load(open(d + "/cp.json"))
rows = list(csv.DictReader(open(d + "/cp.csv")))
assert len(js["functions"]) == len(st) == len(rows), (len(js["functions"]), len(st))
for f in js["functions"]:
    cc, nc, tt, ct, _ = st[(f["file"], f["line"], f["name"])]
    assert (f["cc"], f["nc"]) == (cc, nc)
    assert abs(f["tsub"] - tt) <= 1e-9 * max(1, tt) and abs(f["ttot"] - ct) <= 1e-9 * max(1, ct)
for r in rows:
    cc, nc, tt, ct, _ = st[(r["file"], int(r["line"]), r["name"])]
    assert int(r["nc"]) == nc and int(r["cc"]) == cc
assert js["total_calls"] == sum(v[1] for v in st.values())
EOF

# --- several files merge as pstats.add -----------------------------------------
"$COPROF" report "$dir/cp.pstat" "$dir/cp.pstat" --format json >"$dir/two.json"
check "two files merge as pstats.add" $PY - "$dir" <<'EOF'
import json, pstats, sys
d = sys.argv[1]
st = pstats.Stats(d + "/cp.pstat")
st.add(d + "/cp.pstat")
js = json.load(open(d + "/two.json"))
assert len(js["functions"]) == len(st.stats)
for f in js["functions"]:
    cc, nc, tt, ct, _ = st.stats[(f["file"], f["line"], f["name"])]
    assert (f["cc"], f["nc"]) == (cc, nc), f
    assert abs(f["ttot"] - ct) <= 1e-9 * max(1, ct)
EOF

# --- yappi's file ---------------------------------------------------------------
out=$("$COPROF" report "$dir/yappi.pstat" --filter work.py --sort name)
check "a yappi file reports fib 465/1" grep -Eq '^fib +465/1 ' <<<"$out"

# --- every Python's cProfile file -------------------------------------------------
npy=0
for py in /usr/bin/python3 /root/.pyenv/versions/*/bin/python3; do
	[ -x "$py" ] || continue
	ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	"$py" -m cProfile -o "$dir/cp-$ver.pstat" "$dir/work.py" || { fail "cProfile $ver"; continue; }
	out=$("$COPROF" report "$dir/cp-$ver.pstat" --filter fib)
	check "cProfile file of Python $ver" grep -Eq '^fib +465/1 ' <<<"$out"
	npy=$((npy + 1))
done
check "found at least two Pythons (found $npy)" test "$npy" -ge 2

# --- coprof extras: tasks, threads, a task's own functions -------------------------
out=$("$COPROF" report "$dir/co.pstat")
check "header shows clock, mode, pid, command" \
	grep -q 'Clock: wall   Mode: trace   Duration: 0.100000 s   Pid: 4242' <<<"$out"
check "header shows the command line" grep -q '^Command: ./sched --demo$' <<<"$out"
out=$("$COPROF" report "$dir/co.pstat" --tasks --threads)
check "--tasks lists both tasks" \
	bash -c 'grep -Eq "^ +1  task-a +ucontext +4243  finished +2  +0.080000 " <<<"$1" && grep -q "task-b" <<<"$1"' _ "$out"
check "--tasks: run cpu, run wall, waiting, ready, longest ready (rule 12)" \
	grep -Eq "^ +1  task-a .* 0\.080000  +0\.030000  +0\.050000  +0\.018000  +0\.012000  +0\.009000$" <<<"$out"
check "--tasks: a sampled file has no ready time" bash -c \
	'! grep -q "run cpu" <<<"$("$1" report "$2" --tasks)"' _ "$COPROF" "$dir/cs.pstat"
check "--threads lists the thread" grep -Eq '^ +4243  sched-main +4  +0.100000$' <<<"$out"
out=$("$COPROF" report "$dir/co.pstat" --stalls)
check "--stalls: the threshold and the count" \
	grep -q '^Stalls: 2 steps of 20.000 ms or more, longest first, each at its longest point: 2 shown$' <<<"$out"
check "--stalls: task-a's first, with its stack" bash -c \
	'grep -EA2 "^ +1\. +30\.000 ms  task 1 \(task-a\)  thread 4243$" <<<"$1" | grep -Eq "^        a_root +sched\.c:[0-9]+$"' _ "$out"
check "--stalls: task-b's with the 3 tasks ready behind it" \
	grep -Eq "^ +2\. +20\.000 ms  task 2 \(task-b\)  thread 4243  3 ready behind it$" <<<"$out"
check "--stalls --limit 1 shows one" bash -c \
	'[ "$(grep -c " ms  task " <<<"$("$1" report "$2" --stalls --limit 1)")" = 1 ]' _ "$COPROF" "$dir/co.pstat"
check "--stalls --format csv" bash -c \
	'grep -Eq "^0\.03,1,task-a,4243,0,a_work \(sched\.c:[0-9]+\);a_root \(sched\.c:[0-9]+\)," <<<"$("$1" report "$2" --stalls --format csv)"' _ "$COPROF" "$dir/co.pstat"
check "--stalls on a sampled file: not measured" bash -c \
	'grep -q "^Stalls: not measured" <<<"$("$1" report "$2" --stalls)"' _ "$COPROF" "$dir/cs.pstat"
out=$("$COPROF" report "$dir/co.pstat" --awaits)
check "--awaits: the edge under its root, and the critical path" bash -c \
	'grep -Eq "^  task-b +gather +2x +0\.050 s$" <<<"$1" && grep -q "^  critical path: task-a > task-b 0.050 s$" <<<"$1"' _ "$out"
check "--awaits --format csv" bash -c \
	'grep -Eq "^1,task-a,2,task-b,gather,2,0\.05,4243," <<<"$("$1" report "$2" --awaits --format csv)"' _ "$COPROF" "$dir/co.pstat"
check "--awaits --format json" bash -c \
	'"$1" report "$2" --awaits --format json | python3 -c "import json, sys; a = json.load(sys.stdin)[\"awaits\"]; assert [e[\"awaited\"] for e in a[\"edges\"]] == [\"task-b\"] and [s[\"name\"] for s in a[\"critical_paths\"][0][\"path\"]] == [\"task-b\"]"' _ "$COPROF" "$dir/co.pstat"
check "--awaits on a sampled file: none" bash -c \
	'grep -q "^Awaits: 0 edges" <<<"$("$1" report "$2" --awaits)"' _ "$COPROF" "$dir/cs.pstat"
out=$("$COPROF" report "$dir/co.pstat" --task task-b)
check "--task shows only that task's functions" \
	bash -c 'grep -q "^b_work " <<<"$1" && ! grep -q "^a_work " <<<"$1"' _ "$out"
"$COPROF" report "$dir/co.pstat" --tasks --threads --format json >"$dir/co.json"
check "json tasks and threads" $PY -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert [t["name"] for t in j["tasks"]] == ["task-a", "task-b"]
assert j["tasks"][0]["resumes"] == 2 and abs(j["tasks"][0]["ttot"] - 0.08) < 1e-12
assert j["threads"][0]["tid"] == 4243 and j["clock"] == "wall" and j["pid"] == 4242
' "$dir/co.json"

# --- export callgrind, read back by callgrind_annotate ------------------------------
"$COPROF" export "$dir/cp.pstat" --format callgrind -o "$dir/cp.callgrind"
check "export callgrind exits 0" test $? -eq 0
ann=$(callgrind_annotate --inclusive=yes "$dir/cp.callgrind" 2>&1)
check "callgrind_annotate reads it" grep -q 'PROGRAM TOTALS' <<<"$ann"
check "callgrind totals and inclusive costs match pstats (ns)" $PY - "$dir" "$ann" <<'EOF'
import pstats, re, sys
st = pstats.Stats(sys.argv[1] + "/cp.pstat").stats
ann = sys.argv[2]
total = int(re.search(r"^ *([\d,]+) .*PROGRAM TOTALS", ann, re.M).group(1).replace(",", ""))
want = sum(round(v[2] * 1e9) for v in st.values())
assert abs(total - want) <= len(st), (total, want)
for name in ("work", "leaf", "fib"):
    m = re.search(r"^ *([\d,]+) .*:%s$" % name, ann, re.M)
    incl = int(m.group(1).replace(",", ""))
    ct = [v[3] for k, v in st.items() if k[2] == name][0]
    assert abs(incl - ct * 1e9) <= 2 + 1e-6 * ct * 1e9, (name, incl, ct)
EOF
ann=$(callgrind_annotate --inclusive=no "$dir/cp.callgrind" 2>&1)
check "callgrind self cost of builtins.sum" $PY - "$dir" "$ann" <<'EOF'
import pstats, re, sys
st = pstats.Stats(sys.argv[1] + "/cp.pstat").stats
tt = [v[2] for k, v in st.items() if "builtins.sum" in k[2]][0]
m = re.search(r"^ *([\d,]+) .*builtins\.sum", sys.argv[2], re.M)
assert abs(int(m.group(1).replace(",", "")) - tt * 1e9) <= 1, m.group(0)
EOF

# --- export collapsed -------------------------------------------------------------
"$COPROF" export "$dir/cs.pstat" --format collapsed -o "$dir/cs.folded"
check "collapsed from a sampled file" diff -u - "$dir/cs.folded" <<'EOF'
[tid 4243];[thread];main 40
[tid 4243];[task 1 task-a];a_root;a_work 30
[tid 4243];[task 1 task-a];a_root 10
[tid 4243];[task 1 task-a];a_root;a_yield;[waiting] 40
[tid 4243];[task 2 task-b];b_root;b_work 20
EOF
err=$("$COPROF" export "$dir/co.pstat" --format collapsed -o "$dir/co.folded" 2>&1)
check "collapsed from a traced file is refused with status 2" test $? -eq 2
check "...saying it needs a sampled profile" grep -q 'need a sampled profile' <<<"$err"
"$COPROF" export "$dir/co.pstat" --format collapsed --from-edges -o "$dir/co.folded" 2>/dev/null
# each task's own table under its frame; main, in no task's table, is the thread's
check "--from-edges writes caller;callee pairs in us under their task's frame" \
	diff -u - "$dir/co.folded" <<'EOF'
[task 1 task-a];a_root 10000
[task 1 task-a];a_root;a_work 30000
[task 1 task-a];a_root;a_yield 40000
[task 2 task-b];b_root;b_work 20000
[thread];main 40000
EOF
"$COPROF" export "$dir/co.pstat" --format collapsed --from-edges --no-tasks -o - 2>/dev/null |
	sort >"$dir/co-nt.folded"
check "--from-edges --no-tasks: the same lines without the task frames" \
	diff -u - "$dir/co-nt.folded" <<'EOF'
a_root 10000
a_root;a_work 30000
a_root;a_yield 40000
b_root;b_work 20000
main 40000
EOF
"$COPROF" export "$dir/co.pstat" "$dir/co2.pstat" --format collapsed --from-edges -o - 2>/dev/null |
	$PY -c 'import sys; print(sum(int(l.rsplit(" ", 1)[1]) for l in sys.stdin))' >"$dir/sum"
check "--from-edges over two files: every us of their tsub (0.14 s + 0.28 s)" \
	test "$(cat "$dir/sum")" = 420000
# the same file without its task table after it: all its time is the thread's, none
# taken away for the first file's tasks
$PY - "$dir/co.pstat" "$dir/co-untasked.pstat" <<'EOF'
import marshal, sys
with open(sys.argv[1], "rb") as f:
    stats, extras = marshal.load(f), marshal.load(f)
extras["tasks"] = []
with open(sys.argv[2], "wb") as f:
    marshal.dump(stats, f)
    marshal.dump(extras, f)
EOF
"$COPROF" export "$dir/co.pstat" "$dir/co-untasked.pstat" --format collapsed --from-edges -o - \
	2>/dev/null | sort >"$dir/two.folded"
check "--from-edges: a file without tasks after one with tasks keeps all its time" \
	diff -u - "$dir/two.folded" <<'EOF'
[task 1 task-a];a_root 10000
[task 1 task-a];a_root;a_work 30000
[task 1 task-a];a_root;a_yield 40000
[task 2 task-b];b_root;b_work 20000
[thread];a_root 10000
[thread];a_root;a_work 30000
[thread];a_root;a_yield 40000
[thread];b_root;b_work 20000
[thread];main 40000
[thread];main 40000
EOF
"$COPROF" export "$dir/cs.pstat" --format collapsed --no-tasks -o "$dir/cs-nt.folded"
check "--no-tasks leaves out the thread and task frames of sampled stacks" \
	diff -u - "$dir/cs-nt.folded" <<'EOF'
main 40
a_root;a_work 30
a_root 10
a_root;a_yield;[waiting] 40
b_root;b_work 20
EOF
# make-profile's stalls: task-b's 20 ms step at b_root, task-a's 30 ms at a_work
"$COPROF" export "$dir/co.pstat" "$dir/co2.pstat" --format collapsed --stalls -o "$dir/st.folded"
check "--stalls: one line per stall, longest first, its length in us" \
	diff -u - "$dir/st.folded" <<'EOF'
[tid 4243];[task 1 task-a];a_root;a_work 60000
[tid 4243];[task 2 task-b];b_root 40000
[tid 4243];[task 1 task-a];a_root;a_work 30000
[tid 4243];[task 2 task-b];b_root 20000
EOF
check "--stalls --no-tasks" diff -u - <("$COPROF" export "$dir/co.pstat" --format collapsed \
	--stalls --no-tasks -o -) <<'EOF'
a_root;a_work 30000
b_root 20000
EOF
err=$("$COPROF" export "$dir/cs.pstat" --format collapsed --stalls -o "$dir/x" 2>&1)
check "--stalls on a file that measured none: status 2, one line" \
	test $? -eq 2 -a "$(wc -l <<<"$err")" -eq 1 -a -z "${err##*no stalls*}"
for opts in "--format pprof --stalls" "--format callgrind --no-tasks" \
	"--format pprof --from-edges" "--format collapsed --stalls --from-edges"; do
	err=$("$COPROF" export "$dir/co.pstat" $opts -o "$dir/x" 2>&1)
	check "export $opts: status 2, one line" test $? -eq 2 -a "$(wc -l <<<"$err")" -eq 1
done

# --- diff ---------------------------------------------------------------------------
out=$("$COPROF" diff "$dir/co.pstat" "$dir/co2.pstat")
check "diff of different profiles exits 1" test $? -eq 1
check "diff sorts by the largest change (main: ttot +0.1 s)" \
	bash -c 'sed -n "/^name /{n;p;q}" <<<"$1" | grep -Eq "^main +0.040000 +0.080000 +\+0.040000 +0.100000 +0.200000 +\+0.100000 +1 +1 +\+0 +2.00x slower"' _ "$out"
check "diff totals like pyperf compare_to" grep -q 'Total tsub: 0.140000 s -> 0.280000 s: 2.00x slower' <<<"$out"
"$COPROF" diff "$dir/co.pstat" "$dir/co.pstat" >/dev/null
check "diff of a file with itself exits 0" test $? -eq 0
"$COPROF" diff "$dir/co.pstat" "$dir/cp.pstat" --format csv >"$dir/d.csv"
check "diff csv marks new and gone functions" $PY -c '
import csv, sys
rows = {r["name"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert rows["fib"]["ncall_a"] == "0" and rows["fib"]["ncall_b"] == "465"
assert rows["main"]["ncall_b"] == "0" and rows["main"]["ncall_delta"] == "-1"
' "$dir/d.csv"

# --- bad files: one line on stderr, status 2, no crash ------------------------------
: >"$dir/empty.pstat"
head -c 100 "$dir/cp.pstat" >"$dir/trunc.pstat"
printf 'this is not a profile\n' >"$dir/junk.pstat"
head -c 3000 /dev/urandom >"$dir/random.pstat"
# refused FILE [WORD]: every reading command on FILE gives status 2 and one line on
# stderr (holding WORD), at once (a command that waits is killed after 10 s)
refused() {
	local f=$1 word=${2:-} cmd err rc
	for cmd in "report" "report --format json" "export --format callgrind -o $dir/x.cg" \
		"diff $dir/cp.pstat" "view --once"; do
		err=$(timeout 10 "$COPROF" $cmd "$f" 2>&1 >/dev/null </dev/null)
		rc=$?
		check "$cmd on $(basename "$f"): status 2, one line${word:+ with '$word'}" \
			test "$rc" -eq 2 -a "$(wc -l <<<"$err")" -eq 1 -a -n "$err" -a -z "${err##*"$word"*}"
	done
}
for f in missing empty trunc junk random; do
	refused "$dir/$f.pstat"
done
# --- files that are not regular files: refused at once, never waited on -----------------
mkfifo "$dir/fifo.pstat"
nodes="fifo"
# a device node, made only inside the temporary directory (root only; else untested)
if mknod "$dir/null.pstat" c 1 3 2>/dev/null; then nodes="$nodes null"; else echo "skip device node (mknod needs root)"; fi
mkdir "$dir/dir.pstat"
nodes="$nodes dir"
for f in $nodes; do
	refused "$dir/$f.pstat" "not a regular file"
done

# --- write errors: /dev/full as the output gives one line and status 2 -------------------
for cmd in "report" "report --format csv" "report --format json" "report --tasks" \
	"report --threads" "diff $dir/cp.pstat" "export --format callgrind -o -" \
	"export --format collapsed --from-edges -o -" "export --format collapsed --stalls -o -"; do
	err=$("$COPROF" $cmd "$dir/co.pstat" 2>&1 >/dev/full)
	rc=$?
	check "$cmd to /dev/full: status 2, one line" \
		test "$rc" -eq 2 -a "$(grep -c 'No space left' <<<"$err")" -eq 1
done
"$COPROF" export "$dir/co.pstat" --format callgrind -o /dev/full 2>"$dir/err"
check "export -o /dev/full: status 2" test $? -eq 2 -a "$(wc -l <"$dir/err")" -eq 1

# --- bad numbers: refused with the entry named; never shown, never written ---------------
badnum() { # badnum NAME CC NC TT CT [EDGE_TT]: a hand-made pstats file
	$PY - "$dir/$1.pstat" "$2" "$3" "$4" "$5" "${6:-0.25}" <<'EOF'
import marshal, sys
cc, nc, tt, ct, et = (eval(a, {"inf": float("inf"), "nan": float("nan")}) for a in sys.argv[2:])
d = {("w.py", 3, "victim"): (cc, nc, tt, ct, {("w.py", 1, "caller"): (1, 1, et, 0.5)}),
     ("w.py", 1, "caller"): (1, 1, 0.5, 1.0, {})}
open(sys.argv[1], "wb").write(marshal.dumps(d))
EOF
}
badnum nan 1 1 nan 1 && badnum inf 1 1 1 inf && badnum ninf 1 1 -inf 1 && badnum neg 1 1 -2.5 1
badnum huge 1 1 1e308 1e308 && badnum bigcount '2**63-1' '2**63-1' 1 1
badnum negcount -3 1 1 1 && badnum edgenan 1 1 1 1 nan && badnum count53 '2**53+1' '2**53+1' 1 1
for f in nan inf ninf neg huge bigcount negcount edgenan count53; do
	refused "$dir/$f.pstat" victim # the entry is named
done
"$COPROF" diff "$dir/inf.pstat" "$dir/nan.pstat" >/dev/null 2>&1
check "diff of an inf file and a NaN file is status 2, not 'same'" test $? -eq 2
badnum tiny 1 1 -1e-9 1
out=$("$COPROF" report --format json "$dir/tiny.pstat")
check "a time a hair below 0 (clock rounding) reads as 0" \
	$PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert [f["tsub"] for f in d["functions"] if f["name"]=="victim"]==[0]' "$out"
badnum edge53 '2**52' '2**52' 1e8 1e8
out=$("$COPROF" report --format json "$dir/edge53.pstat")
check "counts up to 2^53 and times up to 1e9 s give JSON that json.load reads" \
	$PY -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["total_calls"]==2**52+1' "$out"
"$COPROF" export "$dir/edge53.pstat" --format callgrind -o "$dir/e.cg"
check "... and callgrind with 64-bit costs" grep -qx 'summary: 100000000500000000' "$dir/e.cg"

# --- control characters in names are escaped: text report, callgrind, diff --------------
$PY - "$dir/ctl.pstat" <<'EOF'
import marshal, sys
bad = "evil\x1b[2J\nfn=(9) forged"
d = {("w\x07.py", 1, bad): (1, 1, 0.5, 1.0, {("w.py", 2, "caller"): (1, 1, 0.5, 1.0)}),
     ("w.py", 2, "caller"): (1, 1, 0.5, 1.5, {})}
open(sys.argv[1], "wb").write(marshal.dumps(d))
EOF
for cmd in "report" "report --callees caller" "diff $dir/cp.pstat" "export --format callgrind -o -" \
	"export --format collapsed --from-edges -o -"; do
	out=$("$COPROF" $cmd "$dir/ctl.pstat" 2>/dev/null)
	check "$cmd: no control character reaches the output" \
		test "$(tr -d '\n\t' <<<"$out" | LC_ALL=C tr -cd '\000-\037\177' | wc -c)" -eq 0
	check "$cmd: the name stays on one line" test -z "$(grep -x 'fn=(9) forged' <<<"$out")"
done
check "text report shows \\x1b for ESC" grep -qF 'evil\x1b[2J\x0afn=(9)' <<<"$("$COPROF" report "$dir/ctl.pstat")"
"$COPROF" export "$dir/ctl.pstat" --format callgrind -o "$dir/ctl.cg"
if command -v callgrind_annotate >/dev/null; then
	check "callgrind_annotate reads the escaped file" callgrind_annotate "$dir/ctl.cg" >/dev/null 2>&1
fi

"$COPROF" report "$dir/cp.pstat" --sort bogus >/dev/null 2>&1
check "an unknown --sort is status 2" test $? -eq 2

echo "test-cli: $fails failed"
[ "$fails" -eq 0 ]
