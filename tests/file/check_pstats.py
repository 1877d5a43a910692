"""Checks a .pstat file against the JSON of what was written into it.

usage: check_pstats.py FILE.pstat FILE.json
Run by every Python 3 on the machine (3.6+): pstats.Stats must load the file, hold
exactly the expected numbers and callers (caller tuples in cProfile's (nc, cc, tt, ct)
order), and print_stats/print_callers/print_callees must run. The coprof extras, the
file's second marshal object, must load too and match. The file is loaded as every
test loads one (coprof_test.Profile, which checks the whole-program tree), so
coprof_test and whole.py must import on Python 3.6.
"""
import io
import json
import marshal
import os
import pstats
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import Profile  # noqa: E402
from whole import root_calls, split, task_kinds, task_node  # noqa: E402


def key(d):
    return (d["file"], d["line"], d["name"])


def fail(msg):
    sys.stderr.write("check_pstats (%s): %s\n" % (sys.version.split()[0], msg))
    sys.exit(1)


def check_stats(stats, expected, where):
    exp = {key(f): f for f in expected}
    if set(stats) != set(exp):
        fail("%s: keys differ: missing %r, extra %r"
             % (where, sorted(set(exp) - set(stats)), sorted(set(stats) - set(exp))))
    for k, f in exp.items():
        value = stats[k]
        if type(value) is not tuple or len(value) != 5:
            fail("%s %r: value %r is not a 5-tuple" % (where, k, value))
        cc, nc, tt, ct, callers = value
        if not all(type(x) is int for x in (cc, nc)) or not all(type(x) is float for x in (tt, ct)):
            fail("%s %r: wrong types in %r" % (where, k, value[:4]))
        if (cc, nc, tt, ct) != (f["cc"], f["nc"], f["tt"], f["ct"]):
            fail("%s %r: %r != expected %r"
                 % (where, k, (cc, nc, tt, ct), (f["cc"], f["nc"], f["tt"], f["ct"])))
        want = {key(c): (c["nc"], c["cc"], c["tt"], c["ct"]) for c in f["callers"]}
        if callers != want:
            fail("%s %r: callers %r != expected %r" % (where, k, callers, want))
        for ck, cv in callers.items():
            if ck not in stats:
                fail("%s: caller %r is not a top-level key" % (where, ck))
            if type(cv) is not tuple or [type(x) for x in cv] != [int, int, float, float]:
                fail("%s: caller value %r is not (int, int, float, float)" % (where, cv))


def check_extras(ex, exp):
    for name in ("coprof", "clock", "mode", "pid", "argv", "start", "stop", "hz",
                 "overflow", "dropped", "notes"):
        got = ex.get(name)
        if isinstance(got, list):
            got = list(got)
        if got != exp[name]:
            fail("extras %r: %r != expected %r" % (name, got, exp[name]))
    if len(ex["tasks"]) != len(exp["tasks"]):
        fail("extras: %d tasks, expected %d" % (len(ex["tasks"]), len(exp["tasks"])))
    for t, et in zip(ex["tasks"], exp["tasks"]):
        for name in ("id", "name", "runtime", "thread", "ttot", "resumes", "state",
                     "run_cpu", "run_wall", "ready", "ready_max", "waiting"):
            if t.get(name) != et.get(name):
                fail("task %r: %r != expected %r" % (name, t[name], et[name]))
        check_stats(t["stats"], et["stats"], "task %r" % t["name"])
    if [dict(t) for t in ex["threads"]] != exp["threads"]:
        fail("threads %r != expected %r" % (ex["threads"], exp["threads"]))
    stacks = [{"task": s[0], "thread": s[1], "frames": [k for k in s[2]], "count": s[3],
               "waiting": s[4]} for s in ex["stacks"]]
    want = [dict(s, frames=[key(k) for k in s["frames"]]) for s in exp["stacks"]]
    if stacks != want:
        fail("stacks %r != expected %r" % (stacks, want))


def check_whole(nodes, stats, extras, exp):
    """Each node of tasks (of the whole-program tree Profile checked) calls only its
    tasks' roots, no more often than they made root calls (the sample's task tables
    claim more than its top-level dict holds); tasks of one root coroutine share a node
    (whole.task_kinds, read off the file; the JSON's tasks are the file's)."""
    want = {t["name"]: root_calls({key(f): (f["cc"], f["nc"], f["tt"], f["ct"],
                                           {key(c): (c["nc"], c["cc"], c["tt"], c["ct"])
                                            for c in f["callers"]}) for f in t["stats"]})
            for t in exp["extras"]["tasks"]}
    kinds = task_kinds(stats, extras)
    for kind, tasks in kinds:
        found = task_node(nodes, tasks[0]["name"], kind, len(tasks))
        names = [t["name"] for t in tasks]
        if len(found) != 1:
            fail("whole program: tasks %r have %d nodes" % (names, len(found)))
        for k, e in found[0].items():
            mine = [want[n][k] for n in names if k in want[n]]
            if not mine or e[0] > sum(m[0] for m in mine) or \
                    e[3] > sum(m[1] for m in mine) + 1e-9:
                fail("whole program: the node of tasks %r calls %r %r, their roots are %r"
                     % (names, k, e, [want[n] for n in names]))
    if len(nodes) != len(kinds) + len(exp["extras"]["threads"]):
        fail("whole program: %d nodes for %d kinds of task and %d threads" % (
            len(nodes), len(kinds), len(exp["extras"]["threads"])))


def main():
    path, jpath = sys.argv[1], sys.argv[2]
    with io.open(jpath, encoding="utf-8") as f:
        exp = json.load(f)
    with open(path, "rb") as f:
        first = marshal.load(f)
        extras = marshal.load(f)
        rest = f.read()
    try:
        prof = Profile(path)
    except AssertionError as e:
        fail(str(e))
    # The program's own functions, exactly; then the whole-program tree around them.
    check_stats(prof.stats, exp["stats"], "pstats")
    check_whole(prof.nodes, first, extras, exp)
    out = io.StringIO()
    st = pstats.Stats(path, stream=out)
    st.strip_dirs().sort_stats("cumulative").print_stats()
    st.print_callers()
    st.print_callees()
    text = out.getvalue()
    for f in exp["stats"]:
        if f["name"].strip("<>")[:40] not in text:
            fail("print_stats output lacks %r" % f["name"])
    if "function calls" not in text:
        fail("print_stats printed no summary")

    if rest:
        fail("%d bytes after the extras" % len(rest))
    check_stats(split(first, extras)[0], exp["stats"], "marshal")
    check_extras(extras, exp["extras"])
    print("ok %s: %d functions" % (sys.version.split()[0], len(first)))


main()
