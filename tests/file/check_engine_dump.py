"""Checks the engine's dumps of DESIGN.md's worked example (made by engine-dump with
a fake clock) as every Python's pstats sees them: exact nc, cc, tt, ct and callers.

usage: check_engine_dump.py ENGINE_DUMP
Runs ENGINE_DUMP into a temporary directory, then loads wall.pstat and cpu.pstat.
"""
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import Profile  # noqa: E402

MS = 1000000  # ns per tick

# function: (wall tt, wall ct, cpu tt, cpu ct), in ticks (DESIGN.md's table)
TABLE = {
    "main": (40, 100, 40, 40),
    "a_root": (10, 80, 10, 40),
    "a_work": (30, 30, 30, 30),
    "a_yield": (40, 40, 0, 0),
    "b_root": (0, 20, 0, 20),
    "b_work": (20, 20, 20, 20),
}
LINE = {"main": 10, "a_root": 20, "a_work": 30, "a_yield": 40, "b_root": 50, "b_work": 60}
CALLER = {"a_work": "a_root", "a_yield": "a_root", "b_work": "b_root"}
TASKS = {"A": (80, 40, 2), "B": (20, 20, 1)}  # wall ttot, cpu ttot, resumes


def sec(ticks):
    return ticks * MS / 1e9


def key(name):
    return ("example.c", LINE[name], name)


def fail(msg):
    sys.stderr.write("check_engine_dump (%s): %s\n" % (sys.version.split()[0], msg))
    sys.exit(1)


# The whole-program tree: node -> (its root callee, the root calls' tt and ct ticks).
WHOLE = {
    "wall": {"<task A>": ("a_root", 10, 80), "<task B>": ("b_root", 0, 20),
             "<thread": ("main", 40, 100)},
    "cpu": {"<task A>": ("a_root", 10, 40), "<task B>": ("b_root", 0, 20),
            "<thread": ("main", 40, 40)},
}


def check_whole(stats, nodes, clock):
    """The whole-program tree's nodes (as Profile found them) and its root."""
    if len(nodes) != 3:
        fail("%s: whole-program nodes %r, expected tasks A, B and the thread" % (clock, list(nodes)))
    for prefix, (callee, tt, ct) in WHOLE[clock].items():
        got = [v for n, v in nodes.items() if n == prefix or n.startswith(prefix + " ")]
        want = {key(callee): (1, 1, sec(tt), sec(ct))}
        if len(got) != 1 or got[0] != want:
            fail("%s: node %s calls %r, expected %r" % (clock, prefix, got, want))
    total = sum(v[2] for v in WHOLE[clock].values())
    if abs(stats[("~", 0, "<whole program>")][3] - sec(total)) > 1e-12:
        fail("%s: the root's ct %r, expected %r" % (clock, stats[("~", 0, "<whole program>")][3],
                                                   sec(total)))


def check(path, clock):
    col = 0 if clock == "wall" else 2
    try:
        prof = Profile(path)
    except AssertionError as e:
        fail(str(e))
    out = io.StringIO()
    st = pstats.Stats(path, stream=out)
    ex, own = prof.extras, prof.stats
    check_whole(st.stats, prof.nodes, clock)
    want = {}
    for name, row in TABLE.items():
        callers = {}
        if name in CALLER:
            callers[key(CALLER[name])] = (1, 1, sec(row[col]), sec(row[col + 1]))
        want[key(name)] = (1, 1, sec(row[col]), sec(row[col + 1]), callers)
    if own != want:
        for k in sorted(set(want) | set(own)):
            if own.get(k) != want.get(k):
                sys.stderr.write("  %r: got %r, want %r\n" % (k, own.get(k), want.get(k)))
        fail("%s: pstats numbers differ from the worked example" % clock)
    st.sort_stats("tottime").print_stats()
    st.print_callers()
    st.print_callees()
    if "a_yield" not in out.getvalue() or "{whole program}" not in out.getvalue():
        fail("%s: print_stats lacks a_yield or {whole program}" % clock)
    if ex.get("clock") != clock or ex.get("mode") != "trace":
        fail("%s: extras clock/mode %r/%r" % (clock, ex.get("clock"), ex.get("mode")))
    tasks = {t["name"]: t for t in ex["tasks"]}
    for name, (wall, cpu, resumes) in TASKS.items():
        t = tasks.get(name)
        if t is None:
            fail("%s: no task %s in %r" % (clock, name, list(tasks)))
        if t["ttot"] != sec(wall if clock == "wall" else cpu) or t["resumes"] != resumes:
            fail("%s: task %s ttot %r resumes %r" % (clock, name, t["ttot"], t["resumes"]))
        if t["state"] != "finished" or t["runtime"] != "ucontext":
            fail("%s: task %s state %r runtime %r" % (clock, name, t["state"], t["runtime"]))
        names = sorted(k[2] for k in t["stats"])
        if names != sorted(n for n in TABLE if n[0] == name.lower()):
            fail("%s: task %s functions %r" % (clock, name, names))
    if clock == "cpu":
        total = sum(v[2] for v in own.values())
        if abs(total - sec(100)) > 1e-12:
            fail("cpu: own times sum to %r, not the thread's CPU time" % total)


def main():
    tmp = tempfile.mkdtemp(prefix="coprof-engine-dump-")
    try:
        subprocess.check_call([sys.argv[1], tmp])
        for clock in ("wall", "cpu"):
            check(os.path.join(tmp, clock + ".pstat"), clock)
    finally:
        shutil.rmtree(tmp)
    print("ok %s" % sys.version.split()[0])


main()
