#!/usr/bin/env bash
# test-tui.sh: drives `coprof view` in a private tmux server (send-keys, capture-pane)
# and asserts on the screen text: open at 80x24, sort, reverse, filter, into callers
# and callees and back, task and thread views, help, resize, colour and NO_COLOR, and
# a quit that restores the terminal. Env: COPROF, MAKE_PROFILE (set by meson).
set -uo pipefail
: "${COPROF:?}" "${MAKE_PROFILE:?}"
PY=/usr/bin/python3
dir=$(mktemp -d)
nsock=0
sock="coprof-vw-$$-0"
T() { tmux -L "$sock" -f /dev/null "$@"; }
trap 'T kill-server 2>/dev/null; rm -rf "$dir"' EXIT
fails=0
pass() { echo "ok   $*"; }
fail() {
	echo "FAIL $*"
	echo "---- screen:"
	screen
	echo "----"
	fails=$((fails + 1))
}
screen() { T capture-pane -p -t vw 2>&1; }
row() { screen | sed -n "$1p"; } # 1-based screen row
# expect NAME REGEX: waits up to 15 s for the screen to match (extended regex).
expect() {
	local name=$1 re=$2
	for _ in $(seq 150); do
		if screen | grep -Eq -- "$re"; then
			pass "$name"
			return 0
		fi
		sleep 0.1
	done
	fail "$name (wanted /$re/)"
	return 1
}
# expect_row NAME N REGEX: the same for one screen row.
expect_row() {
	local name=$1 n=$2 re=$3
	for _ in $(seq 150); do
		if row "$n" | grep -Eq -- "$re"; then
			pass "$name"
			return 0
		fi
		sleep 0.1
	done
	fail "$name (wanted row $n /$re/)"
	return 1
}
keys() { T send-keys -t vw "$@"; }
# start W H CMD: a fresh session running CMD in a shell that reports how it ended.
# Each session gets its own server: a server being killed cannot take a new session.
start() {
	T kill-server 2>/dev/null
	nsock=$((nsock + 1))
	sock="coprof-vw-$$-$nsock"
	T new-session -d -s vw -x "$1" -y "$2" \
		"$3; echo EXIT=\$?; stty -a | tr ' ;' '\n\n' | grep -Ex -- '-?(icanon|echo)' | tr '\n' ' '; echo STTY; sleep 600"
	T set-option -t vw status off >/dev/null
}

# The workload (work.py) has known counts: fib(12) makes 465 calls, 464 recursive.
cp "$(dirname "$0")/work.py" "$dir/work.py"
$PY -m cProfile -o "$dir/cp.pstat" "$dir/work.py" || fail "cProfile wrote a file"
"$MAKE_PROFILE" "$dir/co.pstat" || fail "make-profile"

# --- open at 80x24 --------------------------------------------------------------------
start 80 24 "TERM=screen $COPROF view $dir/cp.pstat"
expect "opens on the function table" '^ Functions: [0-9]+ of [0-9]+ +sort: ttot'
expect_row "column header" 4 '^ name +file:line +ncall +tsub +ttot +tavg +tsub%$'
expect_row "header says there are no extras" 1 'pstats file without coprof extras'
expect_row "key bar on the last row" 24 '\?:help +Enter:callers/callees'
expect "fib shows nc/cc" '^ fib +[^ ]*work\.py:7 +465/1 '
expect_row "ttot order: exec (1 call) first, long names cut with ~" 5 '^ <built-in method builti~ ~:0 +1 '

# --- sort and reverse ---------------------------------------------------------------------
keys c
expect_row "c sorts by ncall: fib first" 5 '^ fib '
expect "title shows the sort" 'sort: ncall'
keys r
expect "r reverses" 'sort: ncall reversed'
expect_row "reversed: fib last of the rows" 5 '^ [^f]'
keys n
expect_row "n sorts by name: work last" 11 '^ work '
keys s
expect_row "s sorts by tsub: builtins.sum (50 calls) first" 5 '^ <built-in method builti~ ~:0 +50 '

# --- filter ------------------------------------------------------------------------------
keys / l e a f
expect_row "/ opens the filter prompt" 24 '^filter \(name or file contains\): leaf'
keys Enter
expect "filter keeps one function" '^ Functions: 1 of [0-9]+ +sort: tsub +filter: "leaf"'
expect_row "the row is leaf" 5 '^ leaf '
# --- callers and callees, and back -----------------------------------------------
keys Enter
expect "Enter shows leaf's callers and callees" '^ leaf \(.*work\.py:3\): 1 callers, 1 callees'
expect_row "rel column" 4 '^ rel +name +file:line'
expect_row "caller row" 5 '^ caller +work +.* 50 '
expect_row "self row" 6 '^ self +leaf '
expect_row "callee row" 7 '^ callee +<built-in met'
keys Up Enter
expect "Enter on a caller moves to it" '^ work \(.*work\.py:11\): 1 callers, 2 callees'
expect "work's callees with edge numbers" '^ callee +fib +.* 1 +0\.0'
keys BSpace
expect "Backspace goes back" '^ leaf \(.*\): 1 callers, 1 callees'
keys Escape
expect "Esc goes back to the filtered table" '^ Functions: 1 of'
keys / BSpace BSpace BSpace BSpace Enter
expect "an empty filter shows everything" '^ Functions: ([0-9]+) of \1 +sort: tsub *$'

# --- help ------------------------------------------------------------------------------
keys '?'
expect "? opens help" 'coprof view: keys'
expect "help lists the sort keys" 'n f c s t a +sort by name'
keys x
expect "any key closes help" '^ Functions: '

# --- resize --------------------------------------------------------------------------
T resize-window -t vw -x 120 -y 40
expect_row "wider: key bar on row 40" 40 '\?:help'
expect_row "wider: columns follow" 4 '^ name {40,}file:line'
T resize-window -t vw -x 60 -y 15
expect_row "narrower: key bar on row 15" 15 '\?:help'
T resize-window -t vw -x 80 -y 24
expect_row "back to 80x24" 24 '\?:help'

# --- quit restores the terminal --------------------------------------------------------
keys q
expect "q quits with status 0" '^EXIT=0$'
expect "the tty is back in canonical mode with echo" '^icanon echo STTY'
if screen | grep -q 'coprof  pstats'; then
	fail "the viewer's screen is gone after quit"
else
	pass "the viewer's screen is gone after quit"
fi

# --- a fatal signal restores the terminal too (Ctrl-\ is QUIT; TERM, HUP alike) ---------
for how in quit term hup; do
	start 80 24 "ulimit -c 0; TERM=screen $COPROF view $dir/cp.pstat"
	expect "$how: opens" '^ Functions: [0-9]+ of [0-9]+ +sort: ttot'
	case $how in
	quit) keys C-\\ ;;
	term) kill -TERM "$(T list-panes -t vw -F '#{pane_pid}' | xargs pgrep -P | head -1)" ;;
	hup) kill -HUP "$(T list-panes -t vw -F '#{pane_pid}' | xargs pgrep -P | head -1)" ;;
	esac
	case $how in quit) code=131 ;; term) code=143 ;; hup) code=129 ;; esac
	expect "$how: the viewer died of the signal" "^EXIT=$code\$"
	expect "$how: the tty is back in canonical mode with echo" '^icanon echo STTY'
	if screen | grep -q 'sort: ttot'; then
		fail "$how: the viewer's screen is gone"
	else
		pass "$how: the viewer's screen is gone"
	fi
done

# --- coprof extras: header, tasks, a task's functions, threads ------------------------------
start 80 24 "TERM=screen $COPROF view $dir/co.pstat"
expect_row "header: clock, mode, duration, pid, command" 1 \
	'clock: wall +mode: trace +duration: 0.100 s +pid: 4242 +command: ./sch'
keys T
expect "T opens the task table" '^ Tasks: 2'
expect_row "task columns" 4 '^ +id name +runtime +thread state +resumes +ttot +ready$'
expect_row "tasks by ttot, with their ready time" 5 '^ +1 task-a +ucontext +4243 finished +2 +0.080000 +0.012000$'
keys Enter
expect "Enter on a task shows its own functions" '^ Task 1 task-a: functions: 3 of 3'
expect_row "the task's table" 5 '^ a_root +sched.c:20 +1 0.010000 0.080000'
keys BSpace
expect "back to the tasks" '^ Tasks: 2'
keys H
expect "H opens the thread table" '^ Threads: 1'
expect "thread row: id, name, switches, ttot" '^ +4243 sched-main +4 +0.100000$'
keys F
expect "F goes back to the functions" '^ Functions: 6 of 6'
keys Tab
expect "Tab goes to the tasks" '^ Tasks: 2'
keys S
expect "S opens the stalls" '^ Stalls: 2 steps of 20\.000 ms or more, longest first$'
expect_row "stall columns" 4 '^ +length task +thread +behind stack, innermost first$'
expect_row "the longest first: task-a's, at a_work" 5 '^ +30\.000 ms task-a 1 +4243 +0 a_work < a_root$'
expect_row "then task-b's, where it stopped" 6 '^ +20\.000 ms task-b 2 +4243 +3 b_root$'
keys Enter
expect "Enter on a stall: its innermost function's callers and callees" '^ a_work \(sched\.c:[0-9]+\): 1 callers, 0 callees'
keys BSpace
expect "back to the stalls" '^ Stalls: 2 steps'

# --- colour, and none under NO_COLOR --------------------------------------------------
if T capture-pane -p -e -t vw | grep -Eq $'\e\\[[0-9;]*4[0-7]m'; then
	pass "colours on a colour terminal"
else
	fail "colours on a colour terminal"
fi
keys q
expect "quit" '^EXIT=0$'
start 80 24 "NO_COLOR=1 TERM=screen $COPROF view $dir/co.pstat"
expect "NO_COLOR: opens" '^ Functions: 6 of 6'
if T capture-pane -p -e -t vw | grep -Eq $'\e\\[[0-9;]*[34][0-7]m'; then
	fail "no colour under NO_COLOR"
else
	pass "no colour under NO_COLOR"
fi
keys q
expect "NO_COLOR: quit" '^EXIT=0$'

# --- the whole-program tree (W): the root snakeviz draws, threads and tasks under it --
start 80 24 "TERM=screen $COPROF view $dir/co.pstat"
expect "the functions do not show the tree's synthetic nodes" '^ Functions: 6 of 6'
keys W
expect "W opens the whole-program tree" '^ Whole-program tree: 7 rows; per call edge, as snakeviz; wall: tasks overlap'
expect_row "tree columns" 4 '^ name +share +file:line +ncall +tsub +ttot ttot%$'
expect_row "the root, open, sums the contexts (wall)" 5 '^ - <whole program> +#{10} ~:0 +1 0\.000000 0\.200000 100\.0$'
expect_row "the thread's node first (largest)" 6 '^   - <thread sched-ma~ #####\.{5} ~:0 +1 0\.000000 0\.100000  50\.0$'
expect_row "under it, main" 7 '^       main +#####\.{5} sched\.c:10 +1 0\.040000 0\.100000  50\.0$'
expect_row "task-a's node" 8 '^   - <task task-a> +####\.{6} ~:0 +1 0\.000000 0\.080000  40\.0$'
expect_row "its root coroutine, closed" 9 '^     \+ a_root +####\.{6} sched\.c:20 +1 0\.010000 0\.080000  40\.0$'
expect_row "task-b's node and root" 11 '^     \+ b_root +#\.{9} sched\.c:50 +1 0\.000000 0\.020000  10\.0$'
expect_row "the tree's key bar" 24 'Enter:open/close +\+:open +-:close/up'
keys Down Down Down Down Enter
expect "Enter opens a_root: its callees, largest first" '^ Whole-program tree: 9 rows'
expect_row "a_root open" 9 '^     - a_root '
expect_row "a_yield first (0.04)" 10 '^         a_yield +##\.{8} sched\.c:40 +1 0\.040000 0\.040000  20\.0$'
expect_row "then a_work (0.03)" 11 '^         a_work +##\.{8} sched\.c:30 +1 0\.030000 0\.030000  15\.0$'
keys Down Enter
expect_row "Enter on a leaf says so" 24 'calls nothing that was profiled'
keys - -
expect "- on a leaf goes up to a_root, - again closes it" '^ Whole-program tree: 7 rows'
keys Home -
expect "- on the root closes the whole tree" '^ Whole-program tree: 1 rows'
keys +
expect "+ opens it again" '^ Whole-program tree: 4 rows'
keys BSpace
expect "back to the functions" '^ Functions: 6 of 6'
keys q
expect "quit after the tree" '^EXIT=0$'
# A cProfile file has no tables: its roots hang from the root itself.
start 80 24 "TERM=screen $COPROF view $dir/cp.pstat"
expect "cProfile file: opens" '^ Functions: [0-9]+ of [0-9]+'
keys 4
expect "4 opens the tree too" '^ Whole-program tree: [0-9]+ rows; per call edge, as snakeviz$'
expect_row "cProfile's root under <whole program>, open" 6 '^   - <built-in method~ +#{10} ~:0 '
expect_row "and below it the module" 7 '^     \+ <module> +#{10} ~/work\.py:1 '
keys q
expect "quit after the cProfile tree" '^EXIT=0$'

# --- several files merge ----------------------------------------------------------------
start 80 24 "TERM=screen $COPROF view $dir/cp.pstat $dir/cp.pstat"
expect "two files merge: fib counts double" '^ fib +[^ ]*work\.py:7 +930/2 '
keys q
expect "quit after merge" '^EXIT=0$'

echo "test-tui: $fails failed"
[ "$fails" -eq 0 ]
