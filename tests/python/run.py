#!/usr/bin/env python3
"""run.py: runs one Python program under the coprof shim and checks its profile.

usage: run.py --python EXE --shim LIB [--asan LIB] [--hook auto|profile|monitoring|evalframe]
              CASE

Each CASE runs a program of progs/ (or samples/python/) on the interpreter EXE with
LD_PRELOAD=LIB, reads the .pstat files it wrote (tests/lib/coprof_test.py's Profile,
which checks the whole-program tree) and asserts what is exact: calls, callers, keys,
which task or thread got which function, files, exit codes, and times only where an
inequality holds whatever the load (a wall time is at least what was slept). A case
that measures more returns its figures, printed after "ok": bench/python/accuracy.py
runs the same case again and again and holds them to their tolerances. --hook sets
COPROF_PY_HOOK (the backend). Exit status 0: passed; 1: failed (with a reason).
"""
import argparse
import collections
import glob
import json
import marshal
import os
import pstats
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "progs")
SAMPLES = os.path.join(HERE, "..", "..", "samples", "python")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import coprof_test  # noqa: E402
from coprof_test import check  # noqa: E402


def ours(path):
    """A file of the programs this driver runs (progs/, samples/python/)."""
    return "progs" in path or "samples" in path


class Profile(coprof_test.Profile):
    """coprof_test's Profile, whose lookups (funcs, one, nc, tt, ct) are in ours()
    unless given another `file`."""

    def funcs(self, name, file=None):
        return coprof_test.Profile.funcs(self, name, file or ours)

    def one(self, name, file=None):
        return coprof_test.Profile.one(self, name, file or ours)


class Runner:
    def __init__(self, args, tmp):
        self.python, self.shim, self.asan, self.tmp = args.python, args.shim, args.asan, tmp
        self.hook = args.hook

    def env(self, **kw):
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(p for p in (self.asan, self.shim) if p)
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # CPython itself leaks at exit by design
        env.pop("PYTHONPATH", None)
        if self.hook:
            env["COPROF_PY_HOOK"] = self.hook
        for k, v in kw.items():
            env[k] = str(v)
        return env

    def run(self, prog, args=(), clock="cpu", out=None, preexec=None, **kw):
        out = out or os.path.join(self.tmp, "out.pstat")
        cmd = [self.python, prog] + list(args)
        p = subprocess.run(cmd, env=self.env(COPROF_CLOCK=clock, COPROF_OUT=out, **kw),
                           capture_output=True, text=True, timeout=120, preexec_fn=preexec)
        check(p.returncode == 0, "%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                      p.stderr[-2000:]))
        check("coprof:" not in p.stderr, "the shim complained: " + p.stderr[-2000:])
        return out, p


def case_tasks_cpu(r, clock="cpu", unit=10000):
    """Three asyncio tasks interleave CPU work (progs/tasks_cpu.py, chunks of 1, 2 and 3
    times `unit` iterations; bench/python/accuracy.py runs the program's 60000): each
    spin function
    is called 10 times, each task (asyncio, finished, resumed at least 10 times) holds
    its own spin function and no other's, the main task none of them; under cpu the own
    times add up to at most the thread table's CPU (rule 10: each is a part of it).
    Returns, for bench/python/accuracy.py, each spin's ct and each task's ttot with what
    the program measured on the clock, the sum of own times, the main module's CPU, the
    thread table's and main's ct."""
    side = os.path.join(r.tmp, "measured.json")
    out, _ = r.run(os.path.join(PROGS, "tasks_cpu.py"), [side, str(unit)], clock=clock)
    prof = Profile(out)
    with open(side) as f:
        both = json.load(f)
    measured = both[clock]
    fig = {"main ct": prof.ct("main"), "module cpu": both["module_cpu"]}
    for fn in ("spin_a", "spin_b", "spin_c"):
        check(prof.nc(fn) == 10, "%s nc %d != 10" % (fn, prof.nc(fn)))
        fig["ct " + fn], fig["measured " + fn] = prof.ct(fn), measured[fn]
    spins = {"spin_a", "spin_b", "spin_c"}
    for name, mine in (("A", "spin_a"), ("B", "spin_b"), ("C", "spin_c")):
        t = prof.task(name)
        check(t["runtime"] == "asyncio" and t["state"] == "finished", "task %s: %r" % (
            name, {k: v for k, v in t.items() if k != "stats"}))
        keys = {k[2] for k in t["stats"]}
        check(mine in keys and not ((spins - {mine}) & keys),
              "task %s is charged for %s" % (name, sorted((spins - {mine}) & keys)))
        check(t["resumes"] >= 10, "task %s resumed %d times" % (name, t["resumes"]))
        fig["ttot " + name] = t["ttot"]
    # Rule 9: the driver is not charged for its tasks' work: main's task holds none.
    drivers = [t for t in prof.tasks() if any(ours(k[0]) and k[2] == "main" for k in t["stats"])]
    check(len(drivers) == 1 and not spins & {k[2] for k in drivers[0]["stats"]},
          "main's tasks %s" % [(t["name"], sorted(k[2] for k in t["stats"])) for t in drivers])
    fig["tt sum"] = sum(v[2] for v in prof.stats.values())
    fig["threads cpu"] = sum(t["ttot"] for t in prof.extras["threads"])
    if clock == "cpu":
        check(fig["tt sum"] <= 1.01 * fig["threads cpu"],
              "sum of tt %.4f above the thread table's CPU %.4f" % (fig["tt sum"],
                                                                    fig["threads cpu"]))
    return fig


def case_stalls(r, clock):
    """Stalls (doc/design.md rule 11, progs/stalls.py): blocker's two steps of 0.2 s of
    CPU each are stalls past 100 ms, kept at their longest point (decode, called by
    blocker), on the main thread, longest first; so is the loop callback on_tick's
    0.15 s, as task 0 named on_tick; no other task's stall holds decode, and under cpu
    no quick step is one. `coprof report --stalls` lists them. A stall is at least the
    CPU its decode spun, less 10 ms: coprof's clock may count a few interrupts more than
    the kernel before its next reading, up to 10 ms later, and so start a step that much
    late (doc/design.md, Clocks; on_tick once measured 0.149954 s)."""
    slack = 0.01
    out, p = r.run(os.path.join(PROGS, "stalls.py"), clock=clock, COPROF_STALL_MS=100)
    check(p.stdout == "stalls: done\n", "output %r" % p.stdout)
    prof = Profile(out)
    stalls = prof.extras["stalls"]
    check(prof.extras["stall_threshold"] == 0.1, "threshold %r" % prof.extras["stall_threshold"])
    mine = [s for s in stalls if s[2] == "blocker"]
    check(len(mine) == 2, "blocker's stalls %r" % (stalls,))
    for tid, tid_task, name, seconds, frames, _behind in mine:
        check(seconds >= 0.2 - slack, "a stall of %.3f s for 0.2 s of CPU" % seconds)
        check([k[2] for k in frames] == ["decode", "blocker"] and all(ours(k[0]) for k in frames),
              "blocker's stall stack %r" % (frames,))
        check(tid == prof.task("blocker")["thread"], "stall on thread %d" % tid)
        check(tid_task == prof.task("blocker")["id"], "stall of task id %d" % tid_task)
    callbacks = [s for s in stalls if s[1] == 0]
    check([s[2] for s in callbacks] == ["on_tick"], "callback stalls %r" % (stalls,))
    tid, _, _, seconds, frames, _ = callbacks[0]
    check(seconds >= 0.15 - slack and [k[2] for k in frames[:2]] == ["decode", "on_tick"]
          and tid == prof.task("blocker")["thread"], "on_tick's stall %r" % (callbacks[0],))
    others = [s for s in stalls if s[2] != "blocker" and s[1] != 0]
    check(not any("decode" in [k[2] for k in s[4]] for s in others),
          "another task's stall holds decode: %r" % (others,))
    if clock == "cpu":
        check(not others, "quick steps under cpu are no stalls: %r" % (others,))
    check([s[3] for s in stalls] == sorted((s[3] for s in stalls), reverse=True),
          "stalls not longest first")
    rep = subprocess.run([os.environ["COPROF_BIN"], "report", "--stalls", "--format", "json", out],
                         capture_output=True, text=True, timeout=60)
    check(rep.returncode == 0, "coprof report --stalls: %s" % rep.stderr)
    listed = json.loads(rep.stdout)["stalls"]
    # (the report prints 9 significant digits: a stall of a second or more, which a
    # loaded run made, has nanoseconds past them)
    check([(s["task"], s["seconds"], [f["name"] for f in s["stack"]]) for s in listed] ==
          [(s[2], float("%.9g" % s[3]), [k[2] for k in s[4]]) for s in stalls],
          "report --stalls %r" % listed)


def case_ready(r, clock):
    """Ready time (doc/design.md rule 12, progs/ready.py): blocker's 0.1 s step is a
    stall with the nine requests, whose timers fell due during it, ready behind it;
    each request's longest time ready is its timer's wait, never longer than it
    measured itself (its timer's due time to its resume: coprof's instants fall inside
    that span), and its total adds its first step's wait; blocker sat ready before its
    first step and ran its 0.1 s of CPU. `coprof report --tasks` gives the file's
    numbers. Returns each request's error against its own measure
    (bench/python/ready.py holds it to 2 ms)."""
    side = os.path.join(r.tmp, "truth.json")
    out, p = r.run(os.path.join(PROGS, "ready.py"), [side], clock=clock)
    check(p.stdout == "ready: done\n", "output %r" % p.stdout)
    with open(side) as f:
        truth = json.load(f)
    prof = Profile(out)
    mine = [s for s in prof.extras["stalls"] if s[2] == "blocker"]
    check(len(mine) == 1 and mine[0][5] == 9,
          "blocker's stall, with 9 requests behind it: %r" % (mine,))
    fig = {}
    for i in range(9):
        name = "req-%d" % i
        t = prof.task(name)
        check(0 < t["ready_max"] < t["ready"] and t["ready_max"] <= truth[name] + 50e-6,
              "%s: ready %r, longest %r; it measured %r" % (name, t.get("ready"),
                                                            t.get("ready_max"), truth[name]))
        fig["error " + name] = t["ready_max"] - truth[name]
    b = prof.task("blocker")
    check(b["ready"] > 0, "blocker's first step: ready %r" % b["ready"])
    check(b["run_wall"] >= b["run_cpu"] * 0.99 and b["run_cpu"] >= 0.99 * truth["blocker cpu"],
          "blocker ran %r cpu, %r wall; it measured %r cpu" % (b["run_cpu"], b["run_wall"],
                                                               truth["blocker cpu"]))
    rep = subprocess.run([os.environ["COPROF_BIN"], "report", "--tasks", "--format", "json", out],
                         capture_output=True, text=True)
    check(rep.returncode == 0, "coprof report --tasks: %s" % rep.stderr)
    listed = {t["name"]: t for t in json.loads(rep.stdout)["tasks"]}
    for name in ["blocker"] + ["req-%d" % i for i in range(9)]:
        t = prof.task(name)
        for k in ("run_cpu", "run_wall", "ready", "ready_max", "waiting"):
            check(abs(listed[name][k] - t[k]) < 1e-9, "report --tasks %s %s: %r, file %r" % (
                name, k, listed[name].get(k), t[k]))
    return fig


def case_ready_cpu(r):
    return case_ready(r, "cpu")


def case_ready_wall(r):
    return case_ready(r, "wall")


def case_stalls_cpu(r):
    case_stalls(r, "cpu")


def case_stalls_wall(r):
    case_stalls(r, "wall")


def case_await_graph(r, clock):
    """Who awaits whom (doc/python.md, progs/await_graph.py): the exact edges, kinds and
    counts of a known graph (a task awaited, a gather of 3, a TaskGroup of 2 on 3.11+,
    asyncio.wait() of 2 and wait_for() of one, a task with two awaiters, a shield
    waited on twice), each edge's ids those of the
    task table, edges longest first in the extras; `coprof report --awaits` gives the
    same edges as JSON, Task-1 as the one root, and its critical path the chain of each
    task's longest wait in the edges written, from Task-1 (main > g3 > deep on a quiet
    machine, where deep's 0.4 s is ten times any other wait; a loaded run once stretched
    main's wait for child, a 0.02 s sleep, to 0.45 s)."""
    out, p = r.run(os.path.join(PROGS, "await_graph.py"), clock=clock)
    check(p.stdout == "await_graph: done\n", "output %r" % p.stdout)
    prof = Profile(out)
    edges = prof.extras.get("awaits")
    check(edges is not None, "no 'awaits' in the extras")
    got = collections.Counter()
    for tid, wid, waiter, aid, awaited, kind, count, seconds in edges:
        got[(waiter, awaited, kind)] += count
        check(seconds >= 0, "edge %s > %s: %r s" % (waiter, awaited, seconds))
        for name, i in ((waiter, wid), (awaited, aid)):
            ids = {t["id"] for t in prof.tasks() if t["name"] == name}
            check(not ids or i in ids, "edge %s > %s: task %s has id %d, not %s"
                  % (waiter, awaited, name, i, ids))
    want = {("Task-1", "main", "task"): 1, ("main", "child", "task"): 1,
            ("main", "g1", "gather"): 1, ("main", "g2", "gather"): 1,
            ("main", "g3", "gather"): 1, ("g3", "deep", "task"): 1,
            ("main", "a1", "gather"): 1, ("main", "a2", "gather"): 1,
            ("a1", "shared", "task"): 1, ("a2", "shared", "task"): 1,
            ("main", "patient", "task"): 1, ("patient", "long", "shield"): 2}
    if py_version(r) >= (3, 11):
        want.update({("main", "tg1", "taskgroup"): 1, ("main", "tg2", "taskgroup"): 1})
    want.update({("main", "w1", "wait"): 1, ("main", "w2", "wait"): 1,
                 ("main", "wf", "wait" if py_version(r) < (3, 12) else "task"): 1})
    check(dict(got) == want, "edges %r, expected %r" % (sorted(got.items()), sorted(want.items())))
    check([e[7] for e in edges] == sorted((e[7] for e in edges), reverse=True),
          "edges not longest first")
    deep = [e[7] for e in edges if e[2] == "g3" and e[4] == "deep"][0]
    check(deep >= 0.35, "g3 waited %.3f s on deep, which sleeps 0.4 s" % deep)
    rep = subprocess.run([os.environ["COPROF_BIN"], "report", "--awaits", "--format", "json", out],
                         capture_output=True, text=True, timeout=60)
    check(rep.returncode == 0, "coprof report --awaits: %s" % rep.stderr)
    listed = json.loads(rep.stdout)["awaits"]
    check(sorted((e["waiter"], e["awaited"], e["kind"], e["count"]) for e in listed["edges"]) ==
          sorted((e[2], e[4], e[5], e[6]) for e in edges), "report --awaits edges %r" % listed)
    paths = listed["critical_paths"]
    check([c["root"] for c in paths] == ["Task-1"], "roots %r" % paths)
    # (a task's id is its address, which a later task may have: id and name together)
    longest, at, seen = [], [(t["id"], "Task-1") for t in prof.tasks() if t["name"] == "Task-1"], set()
    while at and at[0] not in seen:
        seen.add(at[0])
        out_of = [e for e in edges if (e[1], e[2]) == at[0]]  # longest first
        at = [(out_of[0][3], out_of[0][4])] if out_of else []
        longest += [out_of[0][4]] if out_of else []
    check(longest[:1] == ["main"] and [s["name"] for s in paths[0]["path"]] == longest,
          "critical path %r, the longest waits %r" % (paths[0], longest))
    text = subprocess.run([os.environ["COPROF_BIN"], "report", "--awaits", out],
                          capture_output=True, text=True, timeout=60)
    check(text.returncode == 0 and "critical path: Task-1 > main" in text.stdout,
          "report --awaits text: %s%s" % (text.stdout, text.stderr))


def case_await_many(r):
    """Bounded (progs/await_many.py): 100,020 await edges keep at most 8,192 in the
    extras, the longest: Task-1's 20 gathers, each waited on once, are all there; a
    wait follows 1,024 of a gather's 5,000 children; the waits let go and the children
    past 1,024 are counted in 'dropped', so that kept and dropped add up to every wait;
    the critical path still runs from Task-1 through a batch."""
    out, p = r.run(os.path.join(PROGS, "await_many.py"), clock="cpu")
    check(p.stdout == "await_many: done\n", "output %r" % p.stdout)
    prof = Profile(out)
    edges = prof.extras["awaits"]
    lost = prof.extras["dropped"]
    check(lost.get("python awaited tasks past a wait's 1024") == 20 * (5000 - 1024),
          "dropped %r: a wait keeps 1024 tasks" % lost)
    dropped = lost.get("await edges past each thread's table", 0) + \
        lost["python awaited tasks past a wait's 1024"]
    check(0 < len(edges) <= 8192, "%d edges kept" % len(edges))
    check(sum(e[6] for e in edges) + dropped == 100020,
          "%d waits kept and %d dropped, not 100,020" % (sum(e[6] for e in edges), dropped))
    top = sorted(e[4] for e in edges if e[2] == "Task-1")
    check(top == sorted("batch-%d" % i for i in range(20)), "Task-1's edges %r" % top)
    rep = subprocess.run([os.environ["COPROF_BIN"], "report", "--awaits", "--format", "json", out],
                         capture_output=True, text=True, timeout=60)
    check(rep.returncode == 0, "coprof report --awaits: %s" % rep.stderr)
    listed = json.loads(rep.stdout)["awaits"]
    check(listed["dropped"] == dropped, "report's dropped %r" % listed["dropped"])
    path = [c for c in listed["critical_paths"] if c["root"] == "Task-1"]
    check(path and path[0]["path"][0]["name"].startswith("batch-"), "critical path %r" % path)


def case_await_toggled(r):
    """Rule 13 (progs/await_toggled.py): a wait under way when profiling stops and
    starts again is not recorded (Task-1 began to await "before" in the first window
    and resumed in the second); one wholly in a window is ("inside", in the second).
    The first window, where no wait ended, has no edge."""
    tmpl = os.path.join(r.tmp, "win.%n.pstat")
    env = r.env(COPROF_CLOCK="wall", COPROF_OUT=tmpl, COPROF_START=0)
    p = subprocess.Popen([r.python, os.path.join(PROGS, "await_toggled.py")], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)

    def send(line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        check(toggle_applied(p.pid) == "R", "window 1 did not start")
        send("arm")
        check(p.stdout.readline().strip() == "waiting", "the program did not arm")
        check(toggle_applied(p.pid) == "S", "window 1 was not written")
        check(toggle_applied(p.pid) == "R", "window 2 did not start")
        send("go")
        check(p.stdout.readline().strip() == "inside done", "the program did not go on")
        check(toggle_applied(p.pid) == "S", "window 2 was not written")
        rest, err = p.communicate("stop\n", timeout=60)
    finally:
        reap(p)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    files = sorted(glob.glob(os.path.join(r.tmp, "win.*.pstat")))
    check(len(files) == 2, "expected 2 windows, got %s" % files)
    first, second = (Profile(f).extras.get("awaits", []) for f in files)
    check(first == [], "window 1's edges %r" % (first,))
    check([(e[2], e[4], e[5], e[6]) for e in second] == [("Task-1", "inside", "task", 1)],
          "window 2's edges %r" % (second,))


def case_await_graph_cpu(r):
    case_await_graph(r, "cpu")


def case_await_graph_wall(r):
    case_await_graph(r, "wall")


def case_tasks_wall(r, unit=10000):
    return case_tasks_cpu(r, "wall", unit)


def case_awaits(r, clock):
    """Counting and waiting (progs/awaits.py): calls of a coroutine awaited three times,
    generators, an async generator and its caller; under wall, rule 5, each wait lands
    in the function that awaited, at least the 0.3 s it waited. Returns waiter's and
    asyncio.sleep's tt and sleeper's ct (bench/python/accuracy.py bounds them)."""
    out, _ = r.run(os.path.join(PROGS, "awaits.py"), clock=clock)
    prof = Profile(out)
    check(prof.nc("inner") == 3, "inner nc %d != 3" % prof.nc("inner"))
    check(prof.one("inner")[0] == 3, "inner cc != 3")
    check(prof.nc("outer") == 1, "outer nc %d != 1" % prof.nc("outer"))
    check(prof.nc("numbers") == 2, "generator numbers nc %d != 2" % prof.nc("numbers"))
    check(prof.nc("ticker") == 1, "async generator ticker nc %d != 1" % prof.nc("ticker"))
    callers = {k[2] for k in prof.one("inner")[4]}
    check(callers == {"outer"}, "inner's callers %s" % callers)
    sleep = prof.one("sleep", os.path.join("asyncio", "tasks.py"))
    if clock == "wall":
        # Rule 5: the wait lands in the tsub of the function that awaited.
        check(prof.tt("waiter") >= 0.27, "waiter tt %.3f" % prof.tt("waiter"))
        check(sleep[2] >= 0.27, "asyncio.sleep tt %.3f" % sleep[2])
        check(prof.ct("sleeper") >= 0.27, "sleeper ct %.3f" % prof.ct("sleeper"))
        check(prof.ct("main") >= 0.27, "main ct %.3f" % prof.ct("main"))
    return {"waiter tt": prof.tt("waiter"), "sleep tt": sleep[2],
            "sleeper ct": prof.ct("sleeper")}


def case_awaits_cpu(r):
    return case_awaits(r, "cpu")


def case_awaits_wall(r):
    return case_awaits(r, "wall")


def case_errors(r):
    out, _ = r.run(os.path.join(PROGS, "errors.py"))
    prof = Profile(out)
    check(prof.nc("raiser") == 2, "raiser nc %d" % prof.nc("raiser"))
    check(prof.nc("catcher") == 1, "catcher nc %d" % prof.nc("catcher"))
    for fn in ("victim", "deep_wait", "cleanup", "echo"):
        check(prof.nc(fn) == 1, "%s nc %d != 1" % (fn, prof.nc(fn)))
    check({k[2] for k in prof.one("cleanup")[4]} == {"victim"}, "cleanup's caller")
    check({k[2] for k in prof.one("deep_wait")[4]} == {"victim"}, "deep_wait's caller")
    members = 4 if "TaskGroup" in open(os.path.join(PROGS, "errors.py")).read() and \
        any("3.1" + m in r.python for m in "123") else None
    if members:
        check(prof.nc("member") in (2, 4), "member nc %d" % prof.nc("member"))
    victim = prof.task("victim")
    check(victim["state"] == "finished", "victim task %s" % victim["state"])
    names = {k[2] for k in victim["stats"]}
    check({"victim", "deep_wait", "cleanup"} <= names, "victim task's functions %s" % names)
    check(all(t["state"] == "finished" for t in prof.tasks()), "unfinished tasks")


def case_deep_drivers(r):
    """Coroutines driven by send() 100 deep: each level is a task of its own, and each
    task has its own after() and no other. The driver stack held 32: a pop too many
    then ran a level in its driver's context."""
    depth = 100
    out, _ = r.run(os.path.join(PROGS, "deep.py"), [str(depth)])
    prof = Profile(out)
    levels = [t for t in prof.tasks() if t["name"].endswith("level")]
    check(len(levels) == depth + 1, "%d level tasks, expected %d" % (len(levels), depth + 1))
    for t in levels:
        afters = [v[1] for k, v in t["stats"].items() if k[2] == "after"]
        check(afters == [1] and t["state"] == "finished", "task %s (%s): after() calls %s" % (
            t["name"], t["state"], afters))
    check(prof.nc("after") == depth + 1, "after nc %d" % prof.nc("after"))


def case_await_chains(r):
    """Two tasks, each an await chain 60 deep suspending 20 times at its innermost
    level, interleaved (progs/chains.py): every level of a task
    is in that task's own context, as each step resumes its chain root first. A
    resumed frame takes the root of the frame that resumed it (preload/python/hook/task-table.c);
    a wrong root would run levels in the other task's context or the driver's."""
    depth, suspends = 60, 20
    out, _ = r.run(os.path.join(PROGS, "chains.py"), [str(depth), str(suspends)])
    prof = Profile(out)
    check(prof.nc("level") == 2 * (depth + 1), "level nc %d" % prof.nc("level"))
    marks = 2 * (depth + 1 + depth // 4)
    check(prof.nc("mark") == marks, "mark nc %d != %d" % (prof.nc("mark"), marks))
    check({k[2] for k in prof.one("mark")[4]} == {"level"}, "mark's callers")
    for name in ("left", "right"):
        t = prof.task(name)
        calls = {k[2]: v[1] for k, v in t["stats"].items() if "chains.py" in k[0]}
        want = {"chain": 1, "level": depth + 1, "mark": depth + 1 + depth // 4, "tick": 1}
        check(calls == want, "task %s: calls %s, expected %s" % (name, calls, want))
        check(t["state"] == "finished", "task %s %s" % (name, t["state"]))
        check(t["resumes"] >= suspends, "task %s resumed %d times" % (name, t["resumes"]))


def case_shapes(r):
    """Coroutine shapes that confused the task bookkeeping (progs/shapes.py): an eager
    task was pushed on its creator's stack, never popped, and named before asyncio
    named it; a coroutine closed by a collection inside another task stayed suspended
    (on 3.13 also one an automatic collection closed, with no event);
    `await` through a generator __await__ split one task in two, and its yield,
    taken for a return, charged the awaited coroutine's later calls to it; on 3.13 an async
    generator finalized with no event left an entry that gave a later one a second
    frame. Each mode ends with after() called at module level, on a clean stack."""
    ver = tuple(int(x) for x in subprocess.run(
        [r.python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
        text=True).stdout.split())
    modes = ["orphan", "orphan_auto", "bridge", "agen"] + (
        ["eager", "factory"] if ver >= (3, 12) else [])
    for mode in modes:
        out, p = r.run(os.path.join(PROGS, "shapes.py"), [mode])
        prof = Profile(out)

        def callers(fn):
            return {k[2].split(".")[-1] for k in prof.one(fn)[4]}

        def tasks_with(fn):
            return [t for t in prof.tasks() if any(k[2] == fn for k in t["stats"])]
        check(callers("after") == {"<module>"}, "%s: after() called from %s" % (
            mode, callers("after")))
        if mode in ("eager", "factory"):
            check(callers("parent_work") == {"parent"}, "%s: parent_work's callers %s" % (
                mode, callers("parent_work")))
            owners = tasks_with("parent_work")
            check(len(owners) == 1 and not any(k[2] == "child" for k in owners[0]["stats"]),
                  "%s: parent_work in tasks %s" % (mode, [t["name"] for t in owners]))
            kids = tasks_with("child_work")
            check(len(kids) == 1 and kids[0] is not owners[0] and kids[0]["state"] == "finished",
                  "%s: child_work in tasks %s" % (mode, [t["name"] for t in kids]))
            if mode == "factory":
                check(owners[0]["name"] == "PARENT", "factory: the parent task is named %r"
                      % owners[0]["name"])
        elif mode in ("orphan", "orphan_auto"):
            if mode == "orphan_auto":
                check("collected" in p.stdout.splitlines(), "orphan_auto: %r" % p.stdout)
            t = prof.task("ORPHAN")
            check(t["state"] == "finished", "%s: the closed task is %s" % (mode, t["state"]))
            check(len(tasks_with("parent_work")) == 1 and
                  tasks_with("parent_work")[0]["name"] != "ORPHAN", "orphan: parent_work's task")
        elif mode == "bridge":
            owners = tasks_with("request")
            check(len(owners) == 1 and any(k[2].endswith("bridged") for k in owners[0]["stats"]),
                  "bridge: request in tasks %s" % [t["name"] for t in owners])
            check(prof.ct("bridged") >= 0.8 * prof.ct("request"), "bridge: bridged ct %.4f, "
                  "request ct %.4f" % (prof.ct("bridged"), prof.ct("request")))
            # The generator's yield is the task's suspension, not a return: request
            # stays on the stack, so its second burn is still its own.
            check(callers("burn") == {"request"} and prof.nc("burn") == 2 and
                  prof.nc("request") == 1 and prof.nc("__await__") == 1,
                  "bridge: burn called %d times from %s; request nc %d, __await__ nc %d" % (
                      prof.nc("burn"), callers("burn"), prof.nc("request"),
                      prof.nc("__await__")))
        elif mode == "agen":
            check(prof.nc("work") == 200 and callers("work") == {"awaits_first"},
                  "agen: work nc %d, callers %s" % (prof.nc("work"), callers("work")))


def case_generators(r):
    """Generator shapes (progs/gens.py), under both clocks, against the counts the
    program kept itself. Rule 6: one call per plain generator, however many runs; each
    run timed inside it (a burn() in a run is inside the generator's ct). Rule 3: a
    generator __await__ and the plain generator it delegates to are links of their
    task's chain, listed in that task. The hook takes whether a generator is a link from
    the events before it when it can (a subtree's end, a start inside a delegating
    frame, a yield passed up): a wrong answer moves calls and time between contexts."""
    for clock in ("cpu", "wall"):
        out, p = r.run(os.path.join(PROGS, "gens.py"), clock=clock)
        prof = Profile(out)
        counts = json.loads(p.stdout)
        for fn, n in counts["made"].items():
            check(prof.nc(fn) == n, "%s: %s nc %d, the program started %d" % (
                clock, fn, prof.nc(fn), n))
        burn = prof.one("burn")
        by = collections.Counter()
        for k, e in burn[4].items():
            by[k[2].split(".")[-1]] += e[1]
        check(by == collections.Counter(counts["burns"]), "%s: burn's callers %s, the "
              "program counted %s" % (clock, dict(by), counts["burns"]))

        def callers(fn):
            return {k[2].split(".")[-1] for k in prof.one(fn)[4]}
        check(callers("inner_wait") == {"__await__"} and callers("__await__") == {"task_body"},
              "%s: link callers %s, %s" % (clock, callers("inner_wait"), callers("__await__")))
        check(callers("__iter__") <= {"__iter__", "plain", "task_body"},
              "%s: __iter__ called from %s" % (clock, callers("__iter__")))
        bodies = [t for t in prof.tasks() if any(k[2] == "task_body" for k in t["stats"])]
        check(len(bodies) == 6 and all(
            {"__await__", "inner_wait", "burn"} <= {k[2].split(".")[-1] for k in t["stats"]}
            for t in bodies), "%s: tasks %s" % (clock, [(t["name"], sorted(
                k[2] for k in t["stats"])) for t in bodies]))
        # A run's burn() is timed inside the run (its edge's ct within the generator's).
        for fn in ("leafy", "__iter__", "inner_wait"):
            inner = sum(e[3] for k, e in burn[4].items() if k[2].split(".")[-1] == fn)
            check(inner > 0 and prof.ct(fn) >= inner, "%s: %s ct %.6f, its burn() calls' ct "
                  "%.6f" % (clock, fn, prof.ct(fn), inner))


def case_orphans(r):
    """Pending tasks whose coroutines automatic collections close (progs/orphans.py),
    the program then idle while 1-s windows are written: a window wholly inside the
    idle time lists none of them as suspended. On 3.13 a collection at a function's
    first instruction made coprof ignore the close, so each window listed them again
    as suspended until the thread ended."""
    tmpl = os.path.join(r.tmp, "win.%n.pstat")
    _, p = r.run(os.path.join(PROGS, "orphans.py"), ["3.5"], out=tmpl, COPROF_INTERVAL=1)
    lines = dict(line.split(" ", 1) for line in p.stdout.splitlines())
    check(lines.get("collected") == "20 of 20", "orphans: %r" % p.stdout)
    idle, end = float(lines["idle"]), float(lines["end"])
    inside, seen = [], 0
    for f in sorted(glob.glob(os.path.join(r.tmp, "win.*.pstat"))):
        # Not Profile(f): its whole-program check fails here in the ASan build
        # (slower), at 87c79fc too: an interval window cut while Task-1 runs gets a
        # root ct under the sum of own times (cpu). Open, not part of this case.
        pstats.Stats(f)
        with open(f, "rb") as fh:
            marshal.load(fh)
            extras = marshal.load(fh)
        orphans = [t for t in extras.get("tasks", []) if t["name"] == "ORPHAN"]
        seen += len(orphans)
        if extras["start"] >= idle and extras["stop"] <= end:
            inside.append((os.path.basename(f), sum(t["state"] == "suspended"
                                                     for t in orphans)))
    check(seen >= 20, "the windows list %d ORPHAN tasks" % seen)
    check(inside, "no window wholly inside the idle time (%.2f-%.2f)" % (idle, end))
    check(all(n == 0 for _, n in inside), "ORPHAN tasks suspended in idle windows: %s"
          % inside)


def case_fork_thread(r):
    """CPython's test_3_join_in_forked_from_thread (progs/fork_thread.py): a thread
    forks while the main thread ends the program. Under coprof the child refused new
    threads (3.12: os.fork's 'before' callback let the GIL go, the main thread marked
    the interpreter finalizing meanwhile, and the child inherited the mark), or aborted
    at exit (3.12: the shim took the GIL after the child's last thread state was gone,
    and CPython made the parent's main thread state again). In trace mode from the
    start, toggled (started off) and sample mode."""
    for kw in ({}, {"COPROF_START": "0"}, {"COPROF_MODE": "sample"}):
        tmpl = os.path.join(r.tmp, "fork.%p.pstat")
        _, p = r.run(os.path.join(PROGS, "fork_thread.py"), out=tmpl, **kw)
        check(p.stdout == "end of main\nend of thread\n" and "Fatal" not in p.stderr,
              "%s: printed %r, stderr %r" % (kw, p.stdout, p.stderr[-400:]))
        files = glob.glob(os.path.join(r.tmp, "fork.*.pstat"))
        if not kw:
            names = {k[2] for f in files for k in Profile(f).stats}
            check(len(files) == 2 and {"worker", "joiningfunc"} <= names,
                  "%s: profiles %s" % (kw, files))
        for f in files:
            os.unlink(f)


def case_raw_thread(r):
    """A thread whose creator lets the GIL go right after starting it runs profiled
    from its first call (progs/raw_thread.py): under the profile function, on 3.12+
    the hook went on the new thread at its creator's next Python event, after
    start_new_thread's return had let the new thread run unprofiled (CPython drops
    the GIL there when asked). Under load, a thread that forked then lost its calls
    before the fork this way (fork_thread)."""
    out, _ = r.run(os.path.join(PROGS, "raw_thread.py"))
    prof = Profile(out)
    for fn in ("child", "inner"):
        check(prof.nc(fn) == 1, "%s nc %d != 1" % (fn, prof.nc(fn)))


def case_getprofile(r):
    """sys.getprofile() answers None, in the main thread and a new one, until the
    program sets its own profile function (progs/getprofile.py): under the profile
    backend it returned coprof's capsule (CPython's test_getprofile_all_threads)."""
    out, p = r.run(os.path.join(PROGS, "getprofile.py"))
    check(p.stdout.strip() == "[None, None, True, None]", "getprofile: %r" % p.stdout)
    check(Profile(out).nc("<lambda>") == 1, "the thread's function was not profiled")


def case_threads(r):
    """Two threads, each running an event loop with a task burning CPU, started after
    profiling began (progs/threads.py): each loop's task is on its own thread, there
    are at least three threads in the table and tasks on at least two. Returns each
    loop's ct with the CPU the program measured (thread_time) for
    bench/python/accuracy.py."""
    side = os.path.join(r.tmp, "threads.json")
    out, _ = r.run(os.path.join(PROGS, "threads.py"), [side])
    prof = Profile(out)
    with open(side) as f:
        real = json.load(f)
    tids = {t["thread"] for t in prof.tasks() if t["name"] != "?"}
    by_name = {}
    for t in prof.tasks():
        for k in t["stats"]:
            if k[2] in ("loop_one", "loop_two"):
                by_name[k[2]] = t["thread"]
    check(len(by_name) == 2 and by_name["loop_one"] != by_name["loop_two"],
          "tasks of the two loops on threads %s" % by_name)
    check(len(prof.extras["threads"]) >= 3, "thread table %s" % prof.extras["threads"])
    check(len(tids) >= 2, "tasks on %d threads" % len(tids))
    return {"ct loop_one": prof.ct("loop_one"), "measured loop_one": real["loop_one"],
            "ct loop_two": prof.ct("loop_two"), "measured loop_two": real["loop_two"]}


def case_toggled(r):
    """An asyncio server under load (progs/toggled.py), toggled by signal: two windows,
    each started and written, in each the server's and the clients' coroutines,
    adopted as they resume (they started before it): time but no call."""
    tmpl = os.path.join(r.tmp, "win.%n.pstat")
    env = r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl, COPROF_START=0)
    p = subprocess.Popen([r.python, os.path.join(PROGS, "toggled.py"), "-"], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the server did not start")
        for n in range(1, 3):
            time.sleep(0.5)
            check(toggle_applied(p.pid) == "R", "window %d did not start" % n)
            time.sleep(0.5)
            check(toggle_applied(p.pid) == "S", "window %d was not written" % n)
        rest, err = p.communicate("stop\n", timeout=60)
    finally:
        reap(p)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    check("requests" in rest, "no requests served")
    files = sorted(glob.glob(os.path.join(r.tmp, "win.*.pstat")))
    check(len(files) == 2, "expected 2 windows, got %s" % files)
    for f in files:
        prof = Profile(f)
        # Both coroutines started before the window: adopted as they resume, so
        # they have time but no call.
        ours = sorted((k[2], v[1], round(v[3], 4)) for k, v in prof.stats.items()
                      if "progs" in k[0])
        for fn in ("handle", "client"):
            found = prof.funcs(fn)
            check(len(found) == 1 and found[0][1][1] == 0 and found[0][1][3] > 0,
                  "%s: %s, in %s" % (f, fn, ours))


def case_slow_stop(r):
    """A stop slow to get the GIL (progs/slow_stop.py; COPROF_TEST_STOP_DELAY_MS holds
    it 0.3 s first, as a loaded machine does): the window ends when the hook is off,
    and the events until then are the window's. The adapter used to start its next
    generation first, so those events adopted each task again, its root pushed a second
    time on its own stack, and the loop's frames went to the task that ran last (3.10
    and 3.11's toggled windows did not add up, a third of them under load)."""
    out = os.path.join(r.tmp, "slow.pstat")
    p = subprocess.Popen([r.python, os.path.join(PROGS, "slow_stop.py")],
                         env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=out,
                                   COPROF_TEST_STOP_DELAY_MS=300),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        check(toggle_applied(p.pid) == "S", "the window was not written")
        rest, err = p.communicate("stop\n", timeout=60)
    finally:
        reap(p)
    check(p.returncode == 0 and err == "", "exit %d: %s" % (p.returncode, err[-2000:]))
    prof = Profile(out)
    loop = {"_run_once", "run_forever", "_run", "select"}
    for name in ("worker-0", "worker-1", "worker-2"):
        stats = prof.task(name)["stats"]
        fns = {k[2].rsplit(".", 1)[-1]: v for k, v in stats.items()}
        root = fns.get("worker")
        check(root is not None and root[1] == 1 and not root[4],
              "%s's worker: %r (one call, no caller)" % (name, root))
        check(not loop & set(fns), "the loop's functions in %s: %s" % (name, sorted(fns)))
    check(prof.funcs("_run_once", "asyncio"), "the loop's _run_once was not recorded")


def case_long_tasks(r):
    """Tasks that outlive profiling windows stay one task each: with three asyncio tasks
    kept suspended across five windows (started and stopped by `coprof toggle`), every
    window lists each live one once, not once more per window (the adapter used to make
    a new engine context each window and leave the old one suspended for good), and a
    task that ended while profiling was off is no longer listed as live."""
    tmpl = os.path.join(r.tmp, "long.%n.pstat")
    env = r.env(COPROF_CLOCK="wall", COPROF_OUT=tmpl, COPROF_START=0)
    p = subprocess.Popen([r.python, os.path.join(PROGS, "long_tasks.py")], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the program did not start")
        for i in range(1, 6):
            if i == 5:  # ended while profiling is off
                p.stdin.write("end\n")
                p.stdin.flush()
                line = p.stdout.readline().strip()
                check(line == "ended keeper-0", "no task ended: %r" % line)
            check(coprof_toggle(p.pid) == "%d: profiling on" % p.pid, "window %d opens" % i)
            time.sleep(0.2)
            out = coprof_toggle(p.pid)
            check(out == "%d: profiling off; wrote %s" % (p.pid, tmpl.replace("%n", str(i))),
                  "window %d closes: %s" % (i, out))
        rest, err = p.communicate(timeout=60)
    finally:
        reap(p)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])
    for i in range(1, 6):
        tasks = Profile(tmpl.replace("%n", str(i))).extras.get("tasks", [])
        keepers = [(t["name"], t["state"]) for t in tasks if t["name"].startswith("keeper-")]
        live = sorted(n for n, st in keepers if st != "finished")
        want = ["keeper-0", "keeper-1", "keeper-2"] if i < 5 else ["keeper-1", "keeper-2"]
        check(live == want and len(keepers) <= 3,
              "window %d: live %s, want %s; all keeper tasks %s" % (i, live, want, keepers))


SAMPLER_NOTE = b"coprof: sample mode samples native stacks"


def reap(p):
    """Kills p if it still runs (a failed check or a timeout left it) and waits for it."""
    if p.poll() is None:
        p.kill()
        p.wait()


def unprofiled(cmd, stdin=b""):
    """What cmd prints without the shim: (stdout, stderr) as bytes."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("COPROF_")}
    env.pop("PYTHONPATH", None)
    p = subprocess.run(cmd, env=env, input=stdin, capture_output=True, timeout=120)
    check(p.returncode == 0, "%s exited %d unprofiled: %s" % (" ".join(cmd), p.returncode,
                                                             p.stderr[-2000:]))
    return p.stdout, p.stderr


def same_output(cmd, base, out, err, mode="trace"):
    """The profiled run printed byte for byte what the unprofiled one did (in sample
    mode, but for the sampler's one-line note about Python frames)."""
    if mode == "sample":
        err = b"".join(l for l in err.splitlines(True) if not l.startswith(SAMPLER_NOTE))
    check((out, err) == base, "%s printed differently under the shim: stdout %r, stderr %r; "
          "unprofiled: stdout %r, stderr %r" % (" ".join(cmd), out[-500:], err[-1500:],
                                                base[0][-500:], base[1][-1500:]))


def case_forked(r, how="os", mode="trace"):
    """Forked children profile themselves into files of their own, and forking prints
    nothing more than it does unprofiled (3.12+ warn about forking a multi-threaded
    process: the shim's threads must not count), with warnings shown or not."""
    tmpl = os.path.join(r.tmp, "proc.%p.pstat")
    for warn in ([], ["-W", "default"]):
        cmd = [r.python] + warn + [os.path.join(PROGS, "forked.py"), how]
        base = unprofiled(cmd)
        for f in glob.glob(os.path.join(r.tmp, "proc.*.pstat")):
            os.remove(f)
        # sample mode at 997 Hz: the default (99 Hz) may not sample a short child
        p = subprocess.run(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl,
                                          COPROF_MODE=mode, COPROF_HZ="997"),
                           capture_output=True, timeout=120)
        check(p.returncode == 0, "%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                      p.stderr[-2000:]))
        same_output(cmd, base, p.stdout, p.stderr, mode)
        files = glob.glob(os.path.join(r.tmp, "proc.*.pstat"))
        check(len(files) == 3, "expected 3 files (parent, 2 children): %s" % files)
        if mode == "sample":
            for f in files:
                check(Profile(f).stats, f + ": an empty profile")
            continue
        kids = 0
        for f in files:
            prof = Profile(f)
            if prof.funcs("child_work"):
                kids += 1
                check(prof.nc("child_work") == 1, f + ": child_work nc")
                check(not prof.funcs("parent_work"), f + ": a child has the parent's work")
            else:
                check(prof.nc("parent_work") == 1, f + ": parent_work nc")
        check(kids == 2, "%d children profiled themselves" % kids)


def case_forked_mp(r):
    case_forked(r, "mp")


def case_forked_sample(r):
    case_forked(r, "os", "sample")


def case_forked_mp_sample(r):
    case_forked(r, "mp", "sample")


def case_dropped(r, mode="trace"):
    """Workers made with os.fork switch to nobody (os.setgroups, os.setgid, os.setuid)
    and work, in a directory only root may write (the test's own, 0700): each still
    gets its file, from coprof-keeper, owned by nobody, holding its own work only;
    the master's holds the master's. Needs root."""
    check(os.geteuid() == 0, "this case drops privileges: run it as root")
    nobody = 65534
    tmpl = os.path.join(r.tmp, "drop.%p.pstat")
    cmd = [r.python, os.path.join(PROGS, "dropper.py"), str(nobody)]
    p = subprocess.run(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl, COPROF_MODE=mode,
                                      COPROF_HZ="997"),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    err = p.stderr
    if mode == "sample":
        err = "".join(l for l in err.splitlines(True) if not l.startswith(SAMPLER_NOTE.decode()))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])
    pids = {}
    for line in p.stdout.splitlines():
        _, i, pid, _, uid = line.split()
        check(int(uid) == nobody, "worker %s runs as uid %s" % (i, uid))
        pids[int(i)] = int(pid)
    check(sorted(pids) == [0, 1, 2, 3], "workers said %r" % p.stdout)
    works = ["work_%d" % i for i in range(4)]
    files = glob.glob(os.path.join(r.tmp, "drop.*.pstat"))
    check(len(files) == 5, "expected 5 files (master, 4 workers): %s" % files)
    check(not [f for f in os.listdir(r.tmp) if ".tmp." in f], "temporary files left")
    for f in files:
        st = os.stat(f)
        pid = int(f.split(".")[-2])
        owner = nobody if pid in pids.values() else 0
        check(st.st_uid == owner and st.st_gid == owner,
              "%s owned by %d:%d, expected %d" % (f, st.st_uid, st.st_gid, owner))
        prof = Profile(f)
        check(prof.stats and prof.extras["pid"] == pid, "%s: empty, or pid %s" % (f, prof.extras["pid"]))
        own = works[[i for i, w in pids.items() if w == pid][0]] if owner else "master_work"
        if mode == "sample" and not prof.funcs("burn"):
            continue  # the sampler does not see Python frames (yet): the pid says whose
        check(prof.funcs(own), "%s: no %s" % (f, own))
        for other in works + ["master_work"]:
            check(other == own or not prof.funcs(other), "%s holds %s too" % (f, other))
        if mode == "trace":
            check(prof.nc(own) == (5 if owner else 1), "%s: %s nc %d" % (f, own, prof.nc(own)))


def case_dropped_sample(r):
    case_dropped(r, "sample")


def case_keepcaps(r):
    """A process that keeps capabilities in its main thread only (PR_SET_KEEPCAPS, a
    raw capset) and then calls os.setresgid with the GIL held: the shim's threads stop
    for the call (releasing the GIL while they do) and start again with the main
    thread's credentials, so glibc does not abort; the file comes from the keeper."""
    check(os.geteuid() == 0, "this case drops privileges: run it as root")
    if os.uname().machine != "x86_64":
        return  # the raw capset number is x86_64's
    cmd = [r.python, os.path.join(PROGS, "keepcaps.py"), "65534"]
    for i in range(3):
        out = os.path.join(r.tmp, "keep.%d.pstat" % i)
        p = subprocess.run(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=out),
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and p.stdout == "ok 65534 65534\n",
              "run %d: exit %d, %r %r" % (i, p.returncode, p.stdout, p.stderr[-2000:]))
        check("coprof:" not in p.stderr, "the shim complained: " + p.stderr[-2000:])
        check(os.stat(out).st_uid == 65534, "%s is not nobody's" % out)
        check(Profile(out).nc("work") == 2, "work: nc %d" % Profile(out).nc("work"))


def case_forked_toggle(r):
    """After os.fork and multiprocessing forks, the toggle signal still opens and closes
    a window in the parent: the control thread, stopped around each fork, is back."""
    tmpl = os.path.join(r.tmp, "win.%p.%n.pstat")
    cmd = [r.python, "-W", "default", os.path.join(PROGS, "forked.py"), "toggle"]
    base = unprofiled(cmd, b"go\n")
    p = subprocess.Popen(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl, COPROF_START=0),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        lines = []
        while not lines or lines[-1] not in (b"ready\n", b""):
            lines.append(p.stdout.readline())
        check(lines[-1] == b"ready\n", "the program did not get ready: %r" % lines)
        time.sleep(0.2)
        check(toggle_applied(p.pid) == "R", "the window did not start")
        time.sleep(0.3)
        check(toggle_applied(p.pid) == "S", "the window was not written")
        time.sleep(0.2)
        out, err = p.communicate(b"go\n", timeout=120)
    finally:
        reap(p)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    same_output(cmd, base, b"".join(lines) + out, err)
    files = glob.glob(os.path.join(r.tmp, "win.*.pstat"))
    mine = glob.glob(os.path.join(r.tmp, "win.%d.*.pstat" % p.pid))
    check(len(files) == 1 and mine == files, "expected one window of the parent: %s" % files)
    prof = Profile(mine[0])
    check(prof.nc("burn") > 0, "the window has no call of burn")
    check(not prof.funcs("child_work"), "the window has the children's work")


def case_toggle_at_exit(r):
    """A stop toggle that reaches the control thread while Python finalizes: Python ends
    any thread that waits for the GIL then, and once ended the control thread holding
    the shim's lock made the exit dump wait forever (every time, with these delays).
    The program must exit, and its window must be written."""
    tmpl = os.path.join(r.tmp, "exit.%p.%n.pstat")
    cmd = [r.python, os.path.join(PROGS, "forked.py"), "toggle"]
    for attempt in range(3):
        p = subprocess.Popen(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl, COPROF_START=0),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            while p.stdout.readline() not in (b"ready\n", b""):
                pass
            time.sleep(0.3)
            check(toggle_applied(p.pid) == "R", "attempt %d: the window did not start"
                  % attempt)
            time.sleep(0.5)
            os.kill(p.pid, signal.SIGUSR2)
            out, err = p.communicate(b"go\n", timeout=60)
        except subprocess.TimeoutExpired:
            check(False, "attempt %d: the program hung at exit" % attempt)
        finally:
            reap(p)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
        # The window is dumped once, by the stop or at exit, whichever comes first.
        files = glob.glob(os.path.join(r.tmp, "exit.%d.*.pstat" % p.pid))
        check(len(files) == 1, "attempt %d: expected one window, got %s" % (attempt, files))
        check(Profile(files[0]).nc("burn") > 0, "attempt %d: the window has no call of burn"
              % attempt)


def case_exec(r):
    """os.execv keeps the window before it: the program's file holds what ran before
    exec, and the new image (the same pid) numbers its own after it."""
    out = os.path.join(r.tmp, "ex.pstat")
    p = subprocess.run([r.python, os.path.join(PROGS, "execs.py")], env=r.env(COPROF_OUT=out),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout == "before exec\nafter exec\n",
          "exit %d: %r %s" % (p.returncode, p.stdout, p.stderr[-2000:]))
    check("coprof:" not in p.stderr, "the shim complained: " + p.stderr[-2000:])
    files = sorted(os.listdir(r.tmp))
    check(files == ["ex.2.pstat", "ex.pstat"], "files %s" % files)
    first, second = Profile(out), Profile(os.path.join(r.tmp, "ex.2.pstat"))
    check(first.nc("before_exec") == 1 and not first.funcs("after_exec"), "the window before exec")
    check(second.nc("after_exec") == 1 and not second.funcs("before_exec"), "the image after exec")


def case_exec_search(r):
    """os.execvp tries each folder of PATH in turn, calling execve in each: the attempts
    that fail write no file and the window goes on, so with COPROF_KEEP=2 the files are
    the program's work (dump 1) and the image after exec (dump 2), as with a PATH that
    finds the interpreter first. They used to write a file each, and COPROF_KEEP then
    removed the program's work."""
    bindir, name = os.path.split(r.python)
    for misses in (0, 3):
        d = os.path.join(r.tmp, "search%d" % misses)
        os.mkdir(d)
        path = ":".join(["/nonexistent%d" % i for i in range(misses)] + [bindir, "/usr/bin", "/bin"])
        p = subprocess.run([r.python, os.path.join(PROGS, "execsearch.py"), name],
                           env=r.env(COPROF_OUT=os.path.join(d, "ex.%n.pstat"), COPROF_KEEP="2", PATH=path),
                           capture_output=True, text=True, timeout=60)
        what = "%d misses" % misses
        check(p.returncode == 0 and p.stdout == "before exec\nafter exec\n",
              "%s: exit %d: %r %s" % (what, p.returncode, p.stdout, p.stderr[-2000:]))
        check("coprof:" not in p.stderr, "%s: the shim complained: %s" % (what, p.stderr[-2000:]))
        files = sorted(os.listdir(d))
        check(files == ["ex.1.pstat", "ex.2.pstat"], "%s: files %s" % (what, files))
        first, second = Profile(os.path.join(d, "ex.1.pstat")), Profile(os.path.join(d, "ex.2.pstat"))
        check(first.nc("work") == 20 and not first.funcs("after_exec"), "%s: the window before exec" % what)
        check(second.nc("after_exec") == 1 and not second.funcs("work"), "%s: the image after exec" % what)


def proc_cpu(pid):
    """The CPU seconds the process has used so far (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_busy_toggle(r, window=0.3, gap=0.1):
    """Windows toggled by signal while a loop polls stdin between short bursts of work:
    that loop drops and retakes the GIL every half millisecond, which kept the control
    thread from getting it for whole windows (no file at all, about half the time),
    wherever the loop ran. Each window (`window` s between its signals, `gap` s apart;
    bench/python/accuracy.py runs 0.5 and 0.2) must be written, with burn in it. Two
    windows in each of six runs: the bug lost about every other window, so twelve catch
    it but for 1 in 4,096. Returns burn's ct in each window and the span between its two signals
    (what the process used under cpu, the time that passed under wall): how much of it
    the window covers is bench/python/accuracy.py's."""
    windows = 2
    fig = {}
    for where in ("module", "func", "thread"):
        for clock in ("cpu", "wall"):
            what = "%s, %s clock" % (where, clock)
            tmpl = os.path.join(r.tmp, "busy.%s.%s.%%n.pstat" % (where, clock))
            p = subprocess.Popen([r.python, os.path.join(PROGS, "busy.py"), where],
                                 env=r.env(COPROF_CLOCK=clock, COPROF_OUT=tmpl,
                                           COPROF_START=0),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
            spans = []
            try:
                check(p.stdout.readline() == b"ready\n", "%s: busy.py did not get ready" % what)
                for _ in range(windows):
                    time.sleep(gap)
                    t0, c0 = time.monotonic(), proc_cpu(p.pid)
                    toggle_delivered(p.pid)
                    time.sleep(window)
                    toggle_delivered(p.pid)
                    t1, c1 = time.monotonic(), proc_cpu(p.pid)
                    spans.append(t1 - t0 if clock == "wall" else c1 - c0)
                time.sleep(gap)
                out, err = p.communicate(b"go\n", timeout=60)
            finally:
                reap(p)
            check(p.returncode == 0, "%s: exit %d: %s" % (what, p.returncode, err[-2000:]))
            check(b"coprof:" not in err, "%s: the shim complained: %s" % (what, err[-2000:]))
            files = sorted(glob.glob(tmpl.replace("%n", "*")))
            check(len(files) == windows, "%s: expected %d windows, got %s"
                  % (what, windows, [os.path.basename(f) for f in files]))
            for n, span in enumerate(spans, 1):
                prof = Profile(tmpl.replace("%n", str(n)))
                found = prof.funcs("burn")
                check(len(found) == 1, "%s, window %d: burn is not in it: %s"
                      % (what, n, sorted(k[2] for k in prof.stats)))
                fig["burn %s %s %d" % (where, clock, n)] = found[0][1][3]
                fig["span %s %s %d" % (where, clock, n)] = span
    return fig


def toggle_delivered(pid):
    """Sends SIGUSR2 and waits until the process has taken it: a second one sent while
    the first is still pending would merge with it (the kernel keeps one of each
    standard signal), and a fork() in progress keeps signals pending for a while."""
    os.kill(pid, signal.SIGUSR2)
    bit = 1 << (signal.SIGUSR2 - 1)
    for _ in range(20000):
        try:
            with open("/proc/%d/status" % pid) as f:
                pending = [int(l.split()[1], 16) for l in f
                           if l.startswith(("ShdPnd:", "SigPnd:"))]
        except (FileNotFoundError, ProcessLookupError):
            return
        if not any(m & bit for m in pending):
            return
        time.sleep(0.0002)


def toggle_applied(pid):
    """Sends the toggle signal and waits, as `coprof toggle` does, until the control
    thread has applied it (its name changed): on a loaded machine it may wait long for
    the GIL, and a stop applied right after its start recorded nothing. Returns the run
    letter: R running, S stopped (a file written), E stopped with nothing recorded.
    The control thread is waited for first: after an os.fork it starts again, and a
    loaded run's toggle came before it had named itself, so that its first name, not
    yet the toggle's, passed for the answer."""
    coprof_test.wait_for(lambda: coprof_test.control_name(pid) is not None, 60,
                         "process %d's control thread" % pid)
    before = coprof_test.control_name(pid)
    toggle_delivered(pid)
    coprof_test.wait_for(lambda: coprof_test.control_name(pid) not in (None, before), 60,
                         "process %d to apply the toggle (control thread %s)" % (pid, before))
    return coprof_test.control_name(pid)[8].upper()


def case_forked_storm(r):
    """Toggle signals rain on a process that forks with os.fork in a loop: nothing
    deadlocks, no toggle is lost (an even number leaves profiling on for final_work;
    each signal is sent once the previous one was taken, so none merge), and the
    program prints what it prints unprofiled."""
    import threading
    tmpl = os.path.join(r.tmp, "storm.%p.%n.pstat")
    cmd = [r.python, "-W", "default", os.path.join(PROGS, "forked.py"), "storm", "150"]
    base = unprofiled(cmd, b"go\n")
    p = subprocess.Popen(cmd, env=r.env(COPROF_CLOCK="wall", COPROF_OUT=tmpl),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    sent = [0]
    done = threading.Event()

    def rain():
        while not done.is_set():
            toggle_delivered(p.pid)
            sent[0] += 1
            time.sleep(0.002)
    try:
        first = p.stdout.readline()
        check(first == b"ready\n", "the program did not get ready: %r" % first)
        sender = threading.Thread(target=rain)
        sender.start()
        second = p.stdout.readline()
        done.set()
        sender.join()
        check(second == b"forked\n", "the program did not fork: %r" % second)
        if sent[0] % 2:
            toggle_delivered(p.pid)
            sent[0] += 1
        time.sleep(1.5)
        out, err = p.communicate(b"go\n", timeout=180)
    finally:
        done.set()
        reap(p)
    check(p.returncode == 0, "exit %d after %d toggles: %s" % (p.returncode, sent[0],
                                                              err[-2000:]))
    same_output(cmd, base, first + second + out, err)
    check(sent[0] >= 4, "only %d toggles were sent during the forks" % sent[0])
    mine = glob.glob(os.path.join(r.tmp, "storm.%d.*.pstat" % p.pid))
    check(mine, "the parent wrote no profile after %d toggles" % sent[0])
    last = max(mine, key=lambda f: int(f.split(".")[-2]))
    check(Profile(last).funcs("final_work"),
          "%d toggles, but profiling was off for final_work (a toggle was lost): %s" % (
              sent[0], last))


def case_worker(r, clock, jobs=40):
    """samples/python/worker.py, `jobs` jobs over 8 workers: decode_payload and save are
    called once a job; under wall, save's ct is at least the 0.05 s each job slept
    (less 10%). Returns decode_payload's, save's and handle's ct: their proportions are
    bench/python/accuracy.py's (which runs 120 jobs)."""
    out, _ = r.run(os.path.join(SAMPLES, "worker.py"), [str(jobs), "8", "0.05"], clock=clock)
    prof = Profile(out)
    decode, save = prof.one("decode_payload"), prof.one("save")
    handle = prof.one("handle")
    check(decode[1] == jobs and save[1] == jobs, "decode/save nc %d/%d" % (decode[1], save[1]))
    if clock == "wall":
        check(save[3] >= jobs * 0.05 * 0.9, "wall: save ct %.3f" % save[3])
    return {"decode ct": decode[3], "save ct": save[3], "handle ct": handle[3]}


def case_worker_cpu(r):
    return case_worker(r, "cpu")


def case_worker_wall(r):
    return case_worker(r, "wall")


def case_builtins(r):
    prog = os.path.join(PROGS, "builtins.py")
    plain = Profile(r.run(prog)[0])
    check(plain.nc("key") == 200, "key nc %d" % plain.nc("key"))
    check({k[2] for k in plain.one("key")[4]} == {"use_sorted"},
          "without builtins, key's caller is its Python caller: %s" % plain.one("key")[4])
    check(not [k for k in plain.stats if k[0] == "~"], "builtins keyed without COPROF_BUILTINS")
    full = Profile(r.run(prog, COPROF_BUILTINS=1)[0])
    for name, caller in (("<built-in method builtins.len>", "use_len"),
                         ("<method 'append' of 'list' objects>", "use_append"),
                         ("<built-in method builtins.sorted>", "use_sorted")):
        entry = full.stats.get(("~", 0, name))
        edges = [v for k, v in (entry[4] if entry else {}).items() if k[2] == caller]
        check(len(edges) == 1 and edges[0][0] == 1, "%s from %s: %r" % (name, caller, entry))
    check({k[2] for k in full.one("key")[4]} == {"<built-in method builtins.sorted>"},
          "with builtins, key's caller is sorted: %s" % full.one("key")[4])


def case_builtins_reused_def(r):
    """A builtin whose PyMethodDef was freed and its memory reused for another one
    (pybind11 allocates one per function) is named for what it is: builtins were
    cached by the def's address alone, so beta_len's calls went to alpha_len."""
    out, _ = r.run(os.path.join(PROGS, "heap_def.py"), COPROF_BUILTINS=1)
    stats = Profile(out).stats
    for name, calls in (("alpha_len", 300), ("beta_len", 2000)):
        found = [v[1] for k, v in stats.items() if k[0] == "~" and name in k[2]]
        check(found == [calls], "%s: calls %s, expected [%d]; builtins %s" % (
            name, found, calls, sorted(k[2] for k in stats if k[0] == "~" and "len" in k[2])))


def case_pyenv_shim(r):
    """Through pyenv's shim (bash scripts that exec the interpreter): the shell
    processes are not touched and write nothing; only Python writes a profile."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(r.python)))  # .../versions
    version = os.path.basename(os.path.dirname(os.path.dirname(r.python)))
    shim = os.path.join(os.path.dirname(root), "shims", "python3")
    check(os.path.exists(shim), "no pyenv shim at " + shim)
    tmpl = os.path.join(r.tmp, "shim.%p.pstat")
    env = r.env(COPROF_OUT=tmpl, PYENV_VERSION=version)
    p = subprocess.run([shim, os.path.join(PROGS, "builtins.py")], env=env,
                       capture_output=True, text=True, timeout=120)
    # The shim's own note that a native program saw no instrumented function is about
    # the shell processes, not the adapter: Python's adapter must say nothing.
    ours = [l for l in p.stderr.splitlines()
            if l.startswith("coprof:") and "-finstrument-functions" not in l]
    check(p.returncode == 0 and not ours, "exit %d: %s" % (p.returncode, ours))
    files = glob.glob(os.path.join(r.tmp, "shim.*.pstat"))
    check(len(files) == 1, "expected one profile (Python's), got %s" % files)
    check(Profile(files[0]).nc("key") == 200, "the profile is not the program's")


def resp_server(r, **env):
    """Starts samples/python/resp_server.py on a free port under the shim: (redis-benchmark,
    port, the server's Popen), once it listens."""
    import shutil
    import socket
    bench = shutil.which("redis-benchmark")
    check(bench is not None, "redis-benchmark is not installed (scripts/setup.sh)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([r.python, os.path.join(SAMPLES, "resp_server.py"), str(port)],
                         env=r.env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if "listening" not in p.stdout.readline():
        reap(p)
        check(False, "the server did not start")
    return bench, port, p


def stop_resp_server(p, bench):
    """Stops redis-benchmark (if started), then the server with SIGINT: its stderr."""
    if bench is not None:
        reap(bench)
    p.send_signal(signal.SIGINT)
    return p.communicate(timeout=60)[1]


def check_clean_exit(p, err):
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])


def case_resp(r):
    """samples/python/resp_server.py under redis-benchmark, stopped with SIGTERM (the
    toggled case stops it with SIGINT): a graceful stop, exit 0."""
    out = os.path.join(r.tmp, "resp.pstat")
    bench, port, p = resp_server(r, COPROF_CLOCK="cpu", COPROF_OUT=out)
    try:
        b = subprocess.run([bench, "-p", str(port), "-t", "set,get", "-n", "2000", "-c", "10",
                            "-q"], capture_output=True, text=True, timeout=120)
        check(b.returncode == 0, "redis-benchmark failed: " + b.stderr[-1000:])
    finally:
        p.send_signal(signal.SIGTERM)
        rest, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "resp_server: stopped" in rest,
          "exit %d: %s %s" % (p.returncode, rest[-500:], err[-2000:]))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])
    prof = Profile(out)
    check(prof.nc("execute") >= 4000, "execute nc %d" % prof.nc("execute"))
    clients = [t for t in prof.tasks() if any(k[2] == "serve_client" for k in t["stats"])]
    check(len(clients) >= 20, "%d connection tasks" % len(clients))


def case_resp_toggled(r, window=0.2):
    """samples/python/resp_server.py under redis-benchmark, toggled by signal: three
    windows of `window` s (bench/python/accuracy.py runs 0.5), each written, each with
    requests served in it (execute called), none after the last. Returns each window's
    calls of execute, the loop thread's ttot and the window's span in the file
    (bench/python/accuracy.py: how much of the window was recorded, and how many
    requests)."""
    tmpl = os.path.join(r.tmp, "resp.%n.pstat")
    bench, port, p = resp_server(r, COPROF_CLOCK="wall", COPROF_OUT=tmpl, COPROF_START=0)
    b = None
    try:
        b = subprocess.Popen([bench, "-p", str(port), "-t", "set,get", "-n", "100000000",
                              "-c", "20", "-q"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for n in range(1, 4):
            check(toggle_applied(p.pid) == "R", "window %d did not start" % n)
            time.sleep(window)
            check(toggle_applied(p.pid) == "S", "window %d was not written" % n)
            time.sleep(0.2)
        check(b.poll() is None, "redis-benchmark stopped early")
    finally:
        if b is not None:
            reap(b)
        p.send_signal(signal.SIGINT)  # connections may still be open: they are closed
        rest, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "resp_server: stopped" in rest,
          "exit %d: %s %s" % (p.returncode, rest[-500:], err[-2000:]))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])
    files = sorted(glob.glob(os.path.join(r.tmp, "resp.*.pstat")))
    check(len(files) == 3, "expected 3 windows, got %s" % [os.path.basename(f) for f in files])
    fig = {}
    for n, f in enumerate(files, 1):
        prof = Profile(f)
        name = os.path.basename(f)
        check(prof.funcs("execute"), "%s: execute was not called" % name)
        wspan = prof.extras["stop"] - prof.extras["start"]
        check(wspan > 0, "%s: the file's window is %.3f s" % (name, wspan))
        fig["execute nc %d" % n] = prof.nc("execute")
        fig["ttot %d" % n] = max(t["ttot"] for t in prof.extras["threads"])
        fig["window %d" % n] = wspan
    return fig


def coprof_toggle(pid, *opts):
    """`coprof toggle [OPTS] PID` (it returns once the program has applied it): its
    report line."""
    p = subprocess.run([os.environ["COPROF_BIN"], "toggle", "--timeout", "60"] + list(opts)
                       + [str(pid)], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "coprof toggle: %d %r %r" % (p.returncode, p.stdout, p.stderr))
    return p.stdout.strip()


def case_resp_toggle_cmd(r):
    """samples/python/resp_server.py under redis-benchmark, 100 toggles through `coprof
    toggle`, back to back: each toggle is applied before the next is sent, so none
    merges; each says the state it left (on, then off with the file it wrote, or that
    nothing was recorded), windows are numbered without a gap and every one said
    written is written and readable. Returns how many of the 50 were written (how
    many is bench/python/accuracy.py's)."""
    tmpl = os.path.join(r.tmp, "cmd.%n.pstat")
    bench, port, p = resp_server(r, COPROF_CLOCK="wall", COPROF_OUT=tmpl, COPROF_START=0)
    b = None
    written = 0
    try:
        b = subprocess.Popen([bench, "-p", str(port), "-t", "set,get", "-n", "100000000",
                              "-c", "4", "-q"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        check(coprof_toggle(p.pid, "--stop") == "%d: profiling is already off; nothing sent"
              % p.pid, "--stop when off")
        for i in range(50):
            out = coprof_toggle(p.pid)
            check(out == "%d: profiling on" % p.pid, "window %d opens: %s" % (i, out))
            out = coprof_toggle(p.pid)
            if "wrote" in out:
                written += 1
            check(out == "%d: profiling off; wrote %s" % (p.pid, tmpl.replace("%n", str(written)))
                  or out.endswith("nothing was recorded in that window, so no file"),
                  "window %d closes: %s" % (i, out))
        check(b.poll() is None, "redis-benchmark stopped early")
    finally:
        err = stop_resp_server(p, b)
    check_clean_exit(p, err)
    files = glob.glob(os.path.join(r.tmp, "cmd.*.pstat"))
    check(len(files) == written and written >= 1,
          "%d windows said written, %d files" % (written, len(files)))
    for f in files:
        Profile(f)
    return {"written": written}


FORK_PROG = """
import os, sys, time
def work():
    return sum(range(20000))
pid = os.fork()
if pid == 0:
    print(os.getpid(), flush=True)
    end = time.time() + 30
    while time.time() < end and not os.path.exists(sys.argv[1]):
        work()
        time.sleep(0.005)
    os._exit(0)
os.waitpid(pid, 0)
"""


def case_forked_toggle_cmd(r):
    """coprof toggle on a child made by os.fork: its control thread is started again
    after the fork (by the adapter's after-fork callback), answers, and the file it
    names is the child's."""
    tmpl = os.path.join(r.tmp, "fk.%n.pstat")
    done = os.path.join(r.tmp, "done")
    p = subprocess.Popen([r.python, "-c", FORK_PROG, done],
                         env=r.env(COPROF_START=0, COPROF_OUT=tmpl), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        kid = int(p.stdout.readline())
        end = time.time() + 20
        while time.time() < end and not any(
                open(t).read().startswith("coprof") and not open(t).read().startswith("coprof-")
                for t in glob.glob("/proc/%d/task/*/comm" % kid)):
            time.sleep(0.02)
        check(coprof_toggle(kid) == "%d: profiling on" % kid, "child on")
        time.sleep(0.3)
        out = coprof_toggle(kid)
        want = os.path.join(r.tmp, "fk.1.%d.pstat" % kid)
        check(out == "%d: profiling off; wrote %s" % (kid, want), "child off: " + out)
        check(Profile(want).nc("work", "<string>") >= 1, "the child's window has its work")
        check(coprof_toggle(p.pid, "--stop") == "%d: profiling is already off; nothing sent"
              % p.pid, "the parent is still off")
    finally:
        open(done, "w").close()
        err = p.communicate(timeout=60)[1]
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-2000:]))
    check("coprof:" not in err, "the shim complained: " + err[-2000:])


def case_yappi(r, unit=10000):
    """The same programs under yappi 1.4 (CPU clock): the same functions, the same call
    counts for coroutines. Returns, for tasks_cpu.py's spin functions, each profiler's
    ct as a share of the CPU the program measured in its run (bench/python/accuracy.py
    compares them, at tasks_cpu.py's own `unit`)."""
    side = os.path.join(r.tmp, "measured.json")
    fig = {}
    for prog, args, coros in (("awaits.py", [], ("inner", "outer", "waiter", "sleeper")),
                              ("tasks_cpu.py", [side, str(unit)], ("run", "main"))):
        path = os.path.join(PROGS, prog)
        coprofs = Profile(r.run(path, args)[0])
        coprofs_measured = read_measured(side) if args else None
        theirs_out = os.path.join(r.tmp, "yappi.pstat")
        p = subprocess.run([r.python, os.path.join(PROGS, "yappi_run.py"), theirs_out, path]
                           + args, capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "yappi run failed: " + p.stderr[-2000:])
        theirs = pstats.Stats(theirs_out).stats
        theirs_measured = read_measured(side) if args else None

        def mine(stats):
            return {k[2].split(".")[-1]: v for k, v in stats.items()
                    if k[0] == path and k[2] != "<module>"}
        a, b = mine(coprofs.stats), mine(theirs)
        check(set(a) == set(b), "%s: functions differ: coprof only %s, yappi only %s" % (
            prog, sorted(set(a) - set(b)), sorted(set(b) - set(a))))
        for fn in coros:
            check(a[fn][1] == b[fn][1], "%s: %s nc %d, yappi %d" % (prog, fn, a[fn][1],
                                                                      b[fn][1]))
        if prog == "tasks_cpu.py":
            # The two runs are separate processes, whose CPU time for the same work
            # differs on a loaded machine: each profiler's figure as a share of what
            # the program measured itself (thread_time) in that same run.
            for fn in ("spin_a", "spin_b", "spin_c"):
                fig["coprof " + fn] = a[fn][3] / coprofs_measured[fn]
                fig["yappi " + fn] = b[fn][3] / theirs_measured[fn]
    return fig


def case_tool_freed(r):
    """3.12+: stopping takes coprof's sys.monitoring tool off (no events, no callbacks,
    the id free for the program), and starting again takes it back."""
    tmpl = os.path.join(r.tmp, "tool.%n.pstat")
    _, p = r.run(os.path.join(PROGS, "tool_freed.py"), out=tmpl, COPROF_PY_HOOK="monitoring",
                 COPROF_BUILTINS=1)
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    check(seen.get("on") in (3, 4), "coprof holds no tool id of its own: %s" % seen)
    check(seen["events_on"] != 0, "no events set: %s" % seen)
    check(seen["freed"], "the tool id is still held after the stop: %s" % seen)
    check(seen["events_off"] == 0 and set(seen["callbacks_off"]) == {"None"},
          "events or callbacks left behind: %s" % seen)
    check(seen["again"], "profiling did not come back on: %s" % seen)
    files = sorted(glob.glob(os.path.join(r.tmp, "tool.*.pstat")))
    check(len(files) == 2, "expected 2 windows, got %s" % files)
    for f in files:
        check(Profile(f).nc("work") == 1, "%s: work nc" % f)


def case_cprofiled(r):
    """3.12+: a program profiling itself with cProfile (tool 2) loses nothing, and
    neither does coprof."""
    side = os.path.join(r.tmp, "cprofile.json")
    out, _ = r.run(os.path.join(PROGS, "cprofiled.py"), [side])
    with open(side) as f:
        theirs = json.load(f)
    check(theirs == {"busy": 1, "leaf": 300}, "cProfile saw %s" % theirs)
    prof = Profile(out)
    check(prof.nc("busy") == 1 and prof.nc("leaf") == 300, "coprof saw busy %d, leaf %d" % (
        prof.nc("busy"), prof.nc("leaf")))


def case_hook_rejected(r):
    """3.10 and 3.11: COPROF_PY_HOOK=monitoring is refused in one line on stderr, and the
    program runs on, unprofiled (as for a bad value of any COPROF_* variable)."""
    out = os.path.join(r.tmp, "refused.pstat")
    p = subprocess.run([r.python, os.path.join(PROGS, "builtins.py")],
                       env=r.env(COPROF_OUT=out, COPROF_PY_HOOK="monitoring"),
                       capture_output=True, text=True, timeout=120)
    said = [l for l in p.stderr.splitlines() if l.startswith("coprof:")]
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    check(len(said) == 1 and "COPROF_PY_HOOK=monitoring needs Python 3.12" in said[0],
          "expected one line about COPROF_PY_HOOK: %s" % said)
    check(not os.path.exists(out), "a profile was written")


def py_version(r):
    out = subprocess.run([r.python, "-c", "import sys; print(*sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=60).stdout.split()
    return tuple(int(x) for x in out)


def hook_note(prof):
    notes = [n for n in prof.extras.get("notes", []) if n.startswith("python hook: ")]
    check(len(notes) == 1, "one note names the backend: %s" % prof.extras.get("notes"))
    return notes[0].split()[2]


def build_noop(r):
    """bench/python/noop-hook.c built for r.python into r.tmp (a module with a no-op
    frame-evaluation function, evalframe()); the folder to put on PYTHONPATH."""
    code = ("import sysconfig; print(sysconfig.get_paths()['include']); "
            "print(sysconfig.get_config_var('EXT_SUFFIX'))")
    inc, ext = subprocess.run([r.python, "-c", code], capture_output=True, text=True,
                              timeout=60).stdout.split("\n")[:2]
    d = os.path.join(r.tmp, "noop")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(HERE, "..", "..", "bench", "python", "noop-hook.c")
    cc = os.environ.get("CC", "cc")
    p = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I", inc, src, "-o",
                        os.path.join(d, "coprof_noop" + ext)], capture_output=True, text=True)
    check(p.returncode == 0, "%s could not build noop-hook.c: %s" % (cc, p.stderr[-2000:]))
    with open(os.path.join(d, "sitecustomize.py"), "w") as f:
        f.write("import coprof_noop\ncoprof_noop.evalframe()\n")
    return d


def run_said(r, prog, out, **kw):
    """Runs prog under the shim with env kw; (its lines 'coprof: ...' on stderr)."""
    p = subprocess.run([r.python, prog], env=r.env(COPROF_OUT=out, **kw),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    return [l for l in p.stderr.splitlines() if l.startswith("coprof:")]


def case_hook_backend(r):
    """The backend in use is the one COPROF_PY_HOOK and COPROF_BUILTINS pick, named in
    the profile's notes: auto is the frame-evaluation function on 3.10 and 3.11 (the
    profile function with builtins on, which it cannot see, or when another
    frame-evaluation function is installed, left in place), sys.monitoring on 3.12+.
    COPROF_PY_HOOK=evalframe where it cannot be had says so in one line on stderr, and
    the program is profiled all the same, with the same call counts."""
    ver = py_version(r)
    prog = os.path.join(PROGS, "builtins.py")
    out = os.path.join(r.tmp, "b.pstat")
    hook = r.hook or "auto"
    said = run_said(r, prog, out, COPROF_BUILTINS=0)
    check(not said, "the shim complained: %s" % said)
    want = {"auto": "evalframe" if ver < (3, 12) else "monitoring"}.get(hook, hook)
    prof = Profile(out)
    check(hook_note(prof) == want, "COPROF_PY_HOOK=%s: the notes name %s, not %s" % (
        hook, hook_note(prof), want))
    check(prof.nc("key") == 200 and prof.nc("use_sorted") == 1, "key %d, use_sorted %d" % (
        prof.nc("key"), prof.nc("use_sorted")))
    # Builtins on: never the frame-evaluation function.
    said = run_said(r, prog, out, COPROF_BUILTINS=1)
    check(not said, "the shim complained: %s" % said)
    prof = Profile(out)
    check(hook_note(prof) != "evalframe", "builtins on, under %s" % hook_note(prof))
    check(any(k[2] == "<built-in method builtins.sorted>" for k in prof.stats),
          "sorted is not in the profile")
    # Asked for by name where it cannot be had: one line, another backend, same counts.
    cases = [({"COPROF_BUILTINS": 1}, "does not see C builtins", "profile")]
    if ver >= (3, 12):
        cases = [({}, "is for Python 3.10 and 3.11", "monitoring")]
    else:
        cases.append(({"PYTHONPATH": build_noop(r)}, "another frame-evaluation function",
                      "profile"))
    for env, words, backend in cases:
        said = run_said(r, prog, out, COPROF_PY_HOOK="evalframe", **env)
        check(len(said) == 1 and "COPROF_PY_HOOK=evalframe" in said[0] and words in said[0],
              "%s: expected one line saying '%s': %s" % (env, words, said))
        prof = Profile(out)
        check(hook_note(prof) == backend, "%s: under %s" % (env, hook_note(prof)))
        check(prof.nc("key") == 200, "%s: key nc %d" % (env, prof.nc("key")))
    if ver < (3, 12) and hook == "auto":
        # auto leaves another frame-evaluation function alone, without a word.
        said = run_said(r, prog, out, PYTHONPATH=build_noop(r))
        check(not said, "auto complained: %s" % said)
        prof = Profile(out)
        check(hook_note(prof) == "profile", "auto took %s" % hook_note(prof))
        check(prof.nc("key") == 200, "key nc %d" % prof.nc("key"))


def case_recursion(r):
    """A recursion of 50000 calls (10000 on 3.10, which needs a C frame per call even
    unprofiled) runs to its end and is counted whole. The frame-evaluation backend on
    3.11 adds a C frame per call: it hands over to the profile function before the
    C stack runs out (counted as dropped, 'python evalframe stack'), for the rest of
    the window: a thread started after it is hooked once, and every call is counted
    once."""
    ver = py_version(r)
    depth = 50000 if ver >= (3, 11) else 10000
    out, p = r.run(os.path.join(PROGS, "recursion.py"), [str(depth)])
    check(p.stdout.strip() == str(depth), "printed %r" % p.stdout[-200:])
    prof = Profile(out)
    check(prof.nc("down") == depth + 1, "down nc %d, not %d" % (prof.nc("down"), depth + 1))
    check(prof.nc("leaf") == 200, "leaf nc %d, not 200" % prof.nc("leaf"))
    handed = prof.extras.get("dropped", {}).get("python evalframe stack", 0)
    if hook_note(prof) == "evalframe" and ver >= (3, 11):
        check(handed == 1, "no hand-over to the profile function: %s" % prof.extras.get(
            "dropped"))
    else:
        check(handed == 0, "a hand-over under %s" % hook_note(prof))


def stack_8mib():
    """preexec_fn: the main thread's C stack is 8 MiB (ulimit -s 8192), whatever the
    test runner's, so that how deep a recursion goes is the same from run to run."""
    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    want = 8 << 20
    resource.setrlimit(resource.RLIMIT_STACK, (want if hard == resource.RLIM_INFINITY
                                               else min(want, hard), hard))


def evalframe_python(r):
    """The version of r.python, which must have the frame-evaluation backend (3.10 and
    3.11: meson registers these cases there only)."""
    ver = py_version(r)
    check(ver < (3, 12), "a case for Python 3.10 and 3.11 (the frame-evaluation backend)")
    return ver


def case_handover_profiler(r):
    """3.10 and 3.11: the program's own profilers keep working beside the
    frame-evaluation backend, also when it hands over to the profile function (3.11: a
    recursion after the limit was raised far past what the C stack holds at a C frame
    per call; 3.10 never hands over): cProfile on the main thread and a sys.setprofile
    function on thread 'own' see every call, and sys.getprofile() answers what the
    program set. coprof profiles thread 'bare', which had none; the threads that kept
    their own are counted as dropped and said in the notes. (The hand-over used to put
    coprof's profile function over the program's on every thread: cProfile saw a third
    of the calls, and after() not at all.)"""
    ver = evalframe_python(r)
    depth = 12000 if ver < (3, 11) else 40000
    out, p = r.run(os.path.join(PROGS, "handover_profiler.py"), [str(depth)], preexec=stack_8mib)
    seen = json.loads(p.stdout)
    want = {"rec_returned": depth, "rec": depth + 1, "after": 5, "main_getprofile": True,
            "own_work": 7, "own_getprofile": True}
    check(seen == want, "the program's profilers saw %s, not %s" % (seen, want))
    prof = Profile(out)
    check(prof.nc("bare_work") == 50, "bare_work nc %d, not 50" % prof.nc("bare_work"))
    dropped = prof.extras.get("dropped", {})
    kept_note = [n for n in prof.extras.get("notes", [])
                 if n.startswith("python evalframe stack: a thread that ran a profile")]
    backend = hook_note(prof)
    if backend == "evalframe" and ver >= (3, 11):
        check(dropped.get("python evalframe stack") == 1 and
              dropped.get("python threads kept their profiler") == 2,
              "expected a hand-over, two threads keeping their profiler: %s" % dropped)
        check(len(kept_note) == 1, "the notes do not say so: %s" % prof.extras.get("notes"))
        # Not profiled by coprof after it: the main thread and 'own'.
        check(not prof.funcs("after") and not prof.funcs("own_work"),
              "coprof profiled a thread that kept the program's profiler")
    else:
        check("python evalframe stack" not in dropped and not kept_note,
              "a hand-over under %s on %s: %s" % (backend, ver, dropped))
    if backend == "evalframe" and ver < (3, 11):
        # The slot sees every thread's calls, beside the program's profilers.
        for fn, n in (("rec", depth + 1), ("after", 5), ("own_work", 7)):
            check(prof.nc(fn) == n, "%s nc %d, not %d" % (fn, prof.nc(fn), n))


def case_chained_slot(r):
    """3.10 and 3.11: a PEP 523 user (chain523.c) that chains to coprof's
    frame-evaluation function and later puts it back ('chain'), or keeps its own in the
    slot ('held'), leaves coprof's next window with the counts of a program without it
    ('plain'): work 100 calls, leaf 1000, each counted once, by one backend (the slot's
    own function when it is back, else the profile function). (coprof took its own
    function for a foreign one, added the profile function, and counted every call
    twice.)"""
    evalframe_python(r)
    check(os.path.exists(os.environ.get("CHAIN523", "")),
          "no chain523 module built: CHAIN523=%r" % os.environ.get("CHAIN523"))
    slot = r.hook != "profile"  # the frame-evaluation backend, when the slot is free
    slots = {"plain": "default other default" if slot else "default default default",
             "chain": "mine other default" if slot else "mine default default",
             "held": "mine mine mine"}
    for mode in ("plain", "chain", "held"):
        tmpl = os.path.join(r.tmp, mode + ".%n.pstat")
        _, p = r.run(os.path.join(PROGS, "chained_slot.py"), [mode], out=tmpl)
        files = sorted(glob.glob(os.path.join(r.tmp, mode + ".*.pstat")))
        check(len(files) == 2, "%s: expected 2 windows, got %s" % (mode, files))
        prof = Profile(files[1])
        work, leaf = prof.one("work"), prof.one("leaf")
        check(work[:2] == (100, 100) and leaf[:2] == (1000, 1000),
              "%s: work %d/%d, leaf %d/%d calls (primitive/all), not 100 and 1000" % (
                  mode, work[0], work[1], leaf[0], leaf[1]))
        callers = sorted(k[2] for k in leaf[4])
        check(callers == ["work"], "%s: leaf called by %s" % (mode, callers))
        check(p.stdout.strip() == slots[mode], "%s: the slot held %r, not %r" % (
            mode, p.stdout.strip(), slots[mode]))
        # Window 2 goes through the profile function while chain523's function holds
        # the slot, and says so.
        want = ["evalframe" if slot else "profile"] * 2
        if mode == "held":
            want[1] = "profile"
        notes = [hook_note(Profile(f)) for f in files]
        check(notes == want, "%s: the windows' notes name %s, not %s" % (mode, notes, want))


def case_deep_recursion(r):
    """3.10 and 3.11: a recursion in the main thread (8 MiB of C stack) that runs to
    its end unprofiled runs to its end under coprof, and is counted whole. 3.10 makes
    a C frame per call anyway, and coprof's frame-evaluation function adds 16 bytes to
    each (32 built with clang; the profile function, as cProfile, a C frame of the
    interpreter's): so on 3.10 the depth is found unprofiled by bisection, and coprof
    must reach 90% of it (96% measured, clang 93%; 85% before), 78% under the profile
    function (81% measured). 3.11
    runs Python calls in one C frame unprofiled: 60000 calls, where the
    frame-evaluation backend hands over to the profile function at the start."""
    ver = evalframe_python(r)
    prog = os.path.join(PROGS, "deep_recursion.py")
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("COPROF_")}
    env.pop("PYTHONPATH", None)

    def passes(n):
        p = subprocess.run([r.python, prog, str(n)], env=env, capture_output=True, text=True,
                           timeout=120, preexec_fn=stack_8mib)
        return p.returncode == 0 and p.stdout.strip() == str(n)

    if ver < (3, 11):
        lo, hi = 1000, 100000
        check(passes(lo) and not passes(hi), "unprofiled: %d does not pass, or %d does" % (
            lo, hi))
        while hi - lo > 50:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if passes(mid) else (lo, mid)
        depth = int(lo * (0.78 if r.hook == "profile" else 0.90))
    else:
        depth = 60000
        check(passes(depth), "unprofiled: %d does not pass" % depth)
    out, p = r.run(prog, [str(depth)], preexec=stack_8mib)
    check(p.stdout.strip() == str(depth), "printed %r" % p.stdout[-200:])
    prof = Profile(out)
    check(prof.nc("rec") == depth + 1, "rec nc %d, not %d" % (prof.nc("rec"), depth + 1))
    handed = prof.extras.get("dropped", {}).get("python evalframe stack", 0)
    want = 1 if hook_note(prof) == "evalframe" and ver >= (3, 11) else 0
    check(handed == want, "%d hand-overs under %s, not %d" % (handed, hook_note(prof), want))


def case_debug_alloc(r):
    """Under -X dev and PYTHONMALLOC=debug, Python checks that each block is freed
    through the allocator API that made it: the audit hook's entry, made in the shim's
    constructor before Python chose its allocators, aborted every such run at exit.
    Each run exits 0, prints what it prints unprofiled, and writes its profile."""
    prog = os.path.join(PROGS, "xdev.py")
    for how, extra, env in ((["-X", "dev"], {}, {}), ([], {"PYTHONMALLOC": "debug"}, {}),
                            (["-X", "dev"], {"COPROF_BUILTINS": 1}, {})):
        cmd = [r.python] + how + [prog]
        base_env = {k: v for k, v in os.environ.items()
                    if k != "LD_PRELOAD" and not k.startswith("COPROF_")}
        base_env.pop("PYTHONPATH", None)
        base_env.update({k: str(v) for k, v in extra.items() if not k.startswith("COPROF_")})
        b = subprocess.run(cmd, env=base_env, capture_output=True, timeout=120)
        check(b.returncode == 0, "%s exited %d unprofiled" % (" ".join(cmd), b.returncode))
        out = os.path.join(r.tmp, "dev.pstat")
        p = subprocess.run(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=out, **extra),
                           capture_output=True, timeout=120)
        what = "%s %s" % (" ".join(how + [prog]), extra)
        check(p.returncode == 0, "%s exited %d: %s" % (what, p.returncode, p.stderr[-1500:]))
        same_output(cmd, (b.stdout, b.stderr), p.stdout, p.stderr)
        check(Profile(out).nc("work") == 50, "%s: work nc" % what)


def case_audit_gil(r):
    """An audit hook of the program's drops the GIL on sys.setprofile, which coprof's
    putting its hook on a new thread raised: the new thread exited under coprof's loop
    over the thread states (a segfault), or a stop toggle freed the running thread's
    state under its event (a segfault). Each run exits 0 and prints what it prints
    unprofiled (the program's hooks do not see coprof's own sys.setprofile)."""
    prog = os.path.join(PROGS, "audit_gil.py")
    for mode in ("exit", "stop"):
        for builtins in (0, 1):
            cmd = [r.python, prog, mode]
            base = unprofiled(cmd)
            tmpl = os.path.join(r.tmp, "audit.%n.pstat")
            p = subprocess.run(cmd, env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl,
                                              COPROF_BUILTINS=builtins),
                               capture_output=True, timeout=120)
            what = "%s builtins=%d" % (mode, builtins)
            check(p.returncode == 0, "%s: exit %d: %s" % (what, p.returncode,
                                                         p.stderr[-1500:]))
            same_output(cmd, base, p.stdout, p.stderr)
            files = glob.glob(os.path.join(r.tmp, "audit.*.pstat"))
            check(len(files) == 1, "%s: expected one profile, got %s" % (what, files))
            if mode == "exit":
                check(Profile(files[0]).nc("leaf") == 2000, "%s: leaf nc" % what)
            os.remove(files[0])


def case_gc_quiet(r):
    """coprof's weak reference to each task that suspends is out of the host's collector's
    sight: the collector cannot see it (gc.get_objects) and collects exactly as often as
    unprofiled, generation by generation (7000 tracked references made 9 more young
    collections). The profile function on 3.11+ is the exception for the counts: CPython
    makes a frame object for every call it reports, for coprof as for cProfile."""
    prog = os.path.join(PROGS, "gc_quiet.py")
    base = json.loads(unprofiled([r.python, prog])[0])
    out, p = r.run(prog)
    got = json.loads(p.stdout)
    prof = Profile(out)
    waits = [t for t in prof.tasks() if t["name"].startswith("Task-")]
    folded = prof.extras.get("dropped", {}).get("finished tasks past each thread's newest kept", 0)
    check(len(waits) + folded >= 7000, "the 7000 tasks are in the task table (%d) or folded "
          "into the totals (%d)" % (len(waits), folded))
    check(got["seen"] == base["seen"], "the collector sees %d weak references to "
          "coroutines profiled, %d unprofiled" % (got["seen"], base["seen"]))
    if r.hook != "profile" or py_version(r) < (3, 11):
        check(got["collections"] == base["collections"], "collections per generation: "
              "%s profiled, %s unprofiled" % (got["collections"], base["collections"]))


def case_code_freed(r):
    """Code objects die with their functions while profiling: every code object seen
    was kept alive (100k exec'd functions took 150 MiB). A dead code object's address
    taken by a new one gets the new one's name."""
    prog = os.path.join(PROGS, "codegen.py")
    cmd = [r.python, prog, "alive"]
    base = unprofiled(cmd)
    out, p = r.run(prog, ["alive"])
    check(p.stdout.strip().endswith("False"), "a code object outlived its function: "
          + p.stdout)
    check((p.stdout.encode(), p.stderr.encode()) == base, "printed differently")
    n = 30000
    plain = int(unprofiled([r.python, prog, "rss", str(n)])[0])
    _, p = r.run(prog, ["rss", str(n)])
    profiled = int(p.stdout)
    # The leak grew by about 1.5 KiB a function (45 MiB here); without it the peak is
    # the program's own plus the shim's tables.
    # (not under the sanitizer, whose own allocator and shadow memory are the profiled
    # run's alone: there RSS says nothing about the adapter)
    check(r.asan or profiled - plain < 12 * 1024, "peak RSS %d KiB profiled, %d KiB "
          "unprofiled, for %d exec'd functions" % (profiled, plain, n))
    out, _ = r.run(prog, ["reuse"])
    prof = Profile(out)
    for k in range(7):
        found = [v for key, v in prof.stats.items() if key[2] == "fn%d" % k]
        calls = sum(v[1] for v in found)
        check(calls == 100 * (k + 1), "fn%d: %d calls, expected %d" % (k, calls,
                                                                     100 * (k + 1)))


# --- greenlet and gevent ---------------------------------------------------------------

GEVENT_PACKAGES = ["gevent", "greenlet", "eventlet"]


def gevent_python(r):
    """An interpreter that imports gevent and eventlet for r.python: Debian's own
    (python3-gevent, python3-eventlet, scripts/setup.sh) for /usr/bin/python3, else
    BUILD/venv-gevent-X.Y with gevent, greenlet and eventlet from PyPI
    (coprof_test.venv_python), BUILD the build directory or $COPROF_VENV_DIR."""
    if r.python.startswith("/usr/bin/"):
        probe = [r.python, "-c", "import importlib.util as u, sys; "
                 "sys.exit(not all(u.find_spec(m) for m in %r))" % GEVENT_PACKAGES]
        p = subprocess.run(probe, capture_output=True, text=True)
        check(p.returncode == 0, "%s has no gevent or eventlet (python3-gevent, "
              "python3-eventlet, scripts/setup.sh): %s"
              % (r.python, p.stderr[-500:]))
        return r.python
    build = os.path.dirname(os.path.dirname(os.path.abspath(r.shim)))
    return coprof_test.venv_python(r.python, "gevent", GEVENT_PACKAGES, build)


def greenlet_run(r, kind, clock, mode, scale):
    """progs/greenlets.py KIND on gevent_python(r), its burns `scale` times its own
    (the tests' 0.4 keeps each longer than the hub's 1-ms sleeps;
    bench/python/accuracy.py runs 1): (the profile, what it measured)."""
    py = gevent_python(r)
    side = os.path.join(r.tmp, "measured.json")
    out = os.path.join(r.tmp, "gl.pstat")
    cmd = [py, os.path.join(PROGS, "greenlets.py"), kind, side, str(scale)]
    env = r.env(COPROF_CLOCK=clock, COPROF_OUT=out, COPROF_MODE=mode, COPROF_HZ=997)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr[-2000:]))
    ours = [l for l in p.stderr.splitlines() if l.startswith("coprof:")
            and "Python frames are not sampled" not in l]
    check(not ours, "the shim complained: %s" % ours)
    with open(side) as f:
        return Profile(out), json.load(f)


def greenlet_tasks(prof, names):
    """The task of each greenlet named in `names`, checked to be a greenlet's."""
    tasks = {}
    for name in names:
        t = prof.task(name)
        check(t["runtime"] == "greenlet", "task %s: runtime %r" % (name, t["runtime"]))
        tasks[name] = t
    return tasks


def check_greenlet_own(prof, workers):
    """Exact in trace and in sample mode: no greenlet holds a worker's function but
    that worker's own greenlet, the hub included. A tick that lands as greenlet
    restores another greenlet's frames, before its tracer says so, is dropped, not
    charged to the greenlet switched from (greenlet/suspended.c)."""
    for t in prof.tasks():
        if t["runtime"] != "greenlet":
            continue
        held = (set(workers) - {t["name"]}) & {k[2] for k in t["stats"]}
        check(not held, "greenlet %s holds %s" % (t["name"], sorted(held)))


def check_greenlet_cpu(prof, measured, workers, mode):
    """Under cpu: each worker's greenlet is a context of its own (runtime greenlet,
    resumed at least once a round); no greenlet holds another worker's function
    (check_greenlet_own); in trace mode one call per worker (a switch is not a
    return), in its own context. Returns each greenlet's ttot, in trace mode its
    function's ct in it, and the CPU its worker burned (bench/python/accuracy.py holds
    them to it: no cross-charging)."""
    tasks = greenlet_tasks(prof, workers)
    check_greenlet_own(prof, workers)
    fig = {}
    for name, t in tasks.items():
        check(t["resumes"] >= 10, "greenlet %s resumed %d times" % (name, t["resumes"]))
        fig["ttot " + name], fig["measured " + name] = t["ttot"], measured["cpu"][name]
        if mode != "trace":
            continue
        check(prof.nc(name) == 1, "%s nc %d != 1" % (name, prof.nc(name)))
        fn = [v for k, v in t["stats"].items() if k[2] == name]
        check(len(fn) == 1 and fn[0][1] == 1, "task %s has its function once: %s" % (name, fn))
        fig["ct " + name] = fn[0][3]
    if mode == "trace":
        check(prof.nc("work") == 10 * len(workers), "work nc %d" % prof.nc("work"))
    return fig


def case_greenlet_gevent(r, clock="cpu", mode="trace", scale=0.4):
    """Two gevent greenlets burning 20 and 5 ms (times `scale`) per round through
    gevent.sleep, with a greenlet tracer of the program's own set: it keeps working
    (it sees every switch, and greenlet.settrace gives it back); the hub is a
    greenlet's context. Under cpu as check_greenlet_cpu says (its figures returned);
    under wall each greenlet's ttot holds at least its work and the other's work while
    it slept, and in trace mode that wait is in its gevent.sleep's tt."""
    prof, measured = greenlet_run(r, "gevent", clock, mode, scale)
    check(measured["tracer_back"], "greenlet.gettrace() is not the program's tracer")
    check(measured["switches"] >= 4 * 10, "the program's tracer saw %d switches"
          % measured["switches"])
    hubs = [t for t in prof.tasks() if t["name"] == "Hub.run"]
    check(len(hubs) == 1 and hubs[0]["runtime"] == "greenlet", "the hub: %s" % hubs)
    if clock == "cpu":
        return check_greenlet_cpu(prof, measured, ("heavy", "light"), mode)
    tasks = greenlet_tasks(prof, ("heavy", "light"))
    check_greenlet_own(prof, ("heavy", "light"))
    # Under wall a greenlet's ttot runs from its start to its end, waits included.
    # heavy starts first: it waits through each of light's rounds, light through all
    # of heavy's but the first (done before light started).
    rounds = measured["rounds"]
    waited = {"heavy": sum(rounds["light"]), "light": sum(rounds["heavy"][1:])}
    for name, t in tasks.items():
        lived = sum(rounds[name]) + waited[name]
        check(t["ttot"] >= 0.95 * lived, "greenlet %s wall ttot %.3f < its work and its "
              "waits %.3f" % (name, t["ttot"], lived))
    if mode != "trace":
        return
    # Rule 5: the wait lands in the function that yielded: gevent.sleep (gevent/hub.py,
    # the innermost Python frame when the greenlet switched away), in its own context.
    for name, other in (("heavy", "light"), ("light", "heavy")):
        sleep = [v for k, v in tasks[name]["stats"].items()
                 if k[2] == "sleep" and k[0].endswith(os.path.join("gevent", "hub.py"))]
        check(len(sleep) == 1, "%s: gevent.sleep in its task: %d" % (name, len(sleep)))
        check(sleep[0][2] >= 0.95 * waited[name],
              "%s: gevent.sleep tt %.3f < %s's work meanwhile %.3f"
              % (name, sleep[0][2], other, waited[name]))
        check(prof.nc(name) == 1, "%s nc %d != 1" % (name, prof.nc(name)))


def case_greenlet_gevent_wall(r):
    return case_greenlet_gevent(r, "wall")


def case_greenlet_gevent_sample(r):
    return case_greenlet_gevent(r, "cpu", "sample")


def case_greenlet_gevent_sample_wall(r):
    return case_greenlet_gevent(r, "wall", "sample")


def case_greenlet_eventlet(r, mode="trace", scale=0.4):
    """Two eventlet green threads burning 20 and 5 ms (times `scale`) of CPU per round
    through eventlet.sleep: separate contexts (runtime greenlet), named after the
    functions given to eventlet.spawn (not eventlet's GreenThread.main, which runs them
    all), as check_greenlet_cpu says."""
    prof, measured = greenlet_run(r, "eventlet", "cpu", mode, scale)
    mains = [t["name"] for t in prof.tasks() if "GreenThread" in t["name"]]
    check(not mains, "green threads named after eventlet's main: %s" % mains)
    return check_greenlet_cpu(prof, measured, ("heavy", "light"), mode)


def case_greenlet_eventlet_sample(r):
    return case_greenlet_eventlet(r, "sample")


def case_greenlet_plain(r, mode="trace", scale=0.4):
    """Raw greenlets switching with switch(): named after their run functions, as
    check_greenlet_cpu says."""
    prof, measured = greenlet_run(r, "plain", "cpu", mode, scale)
    return check_greenlet_cpu(prof, measured, ("ping", "pong"), mode)


def case_greenlet_plain_sample(r):
    return case_greenlet_plain(r, "sample")


def case_greenlet_threads(r, scale=0.4):
    """Raw greenlets in two threads started after greenlet was imported: each thread's
    greenlets are contexts on that thread, resumed at least once a round; work is
    called 10 times by each. Returns the four greenlets' ttot and their work's CPU
    (bench/python/accuracy.py: charged their own work)."""
    prof, measured = greenlet_run(r, "threads", "cpu", "trace", scale)
    tids = {}
    for t in prof.tasks():
        if t["runtime"] == "greenlet":
            tids.setdefault(t["name"].split(".")[-1], []).append(t)
    for side in ("left", "right"):
        ts = tids.get(side, [])
        check(len(ts) == 2 and ts[0]["thread"] != ts[1]["thread"],
              "greenlet %s: %d tasks on threads %s" % (side, len(ts), [t["thread"] for t in ts]))
        for t in ts:
            check(t["resumes"] >= 10, "%s resumed %d times" % (side, t["resumes"]))
    check(prof.nc("work") == 40, "work nc %d" % prof.nc("work"))
    return {"ttot": sum(t["ttot"] for ts in tids.values() for t in ts),
            "measured": sum(measured["cpu"].values())}


def case_greenlet_asyncio(r, scale=0.4):
    """An event loop in a greenlet, one of whose tasks switches into another greenlet
    and back: tasks task-x and task-y (asyncio) and greenlet helper each call work 10
    times, in their own context; loop_main (a greenlet) calls it in none. Returns each
    one's ttot and work's ct in it, with the CPU its work burned
    (bench/python/accuracy.py: each charged its own work only)."""
    prof, measured = greenlet_run(r, "asyncio", "cpu", "trace", scale)
    owners = {"task-x": "x", "task-y": "y", "helper": "b"}
    fig = {}
    for name, who in owners.items():
        t = prof.task(name)
        check(t["runtime"] == ("greenlet" if name == "helper" else "asyncio"),
              "task %s: runtime %r" % (name, t["runtime"]))
        work = [v for k, v in t["stats"].items() if k[2] == "work"]
        check(len(work) == 1 and work[0][1] == 10, "%s: work %s" % (name, work))
        fig["ttot " + name], fig["ct " + name] = t["ttot"], work[0][3]
        fig["measured " + name] = measured["cpu"][who]
    loop = prof.task("loop_main")
    check(loop["runtime"] == "greenlet", "loop_main: %r" % loop["runtime"])
    check(not any(k[2] == "work" for k in loop["stats"]), "loop_main is charged its tasks' work")
    return fig


def case_greenlet_resp_toggled(r, mode="trace", window=0.2):
    """samples/python/gevent_resp_server.py (gevent's StreamServer, a greenlet per
    connection) under redis-benchmark, started off and toggled three times with `coprof
    toggle`, windows of `window` s (bench/python/accuracy.py runs 0.5): each window is
    written, holds requests served (execute called), in the connections' greenlets
    (runtime greenlet) and nowhere else (sample mode: greenlets sampled), and the
    server stops cleanly. Returns each window's calls of execute and
    greenlets that ran it (sample mode: greenlets sampled): how many is
    bench/python/accuracy.py's."""
    import shutil
    import socket
    py = gevent_python(r)
    bench = shutil.which("redis-benchmark")
    check(bench is not None, "redis-benchmark is not installed (scripts/setup.sh)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmpl = os.path.join(r.tmp, "gresp.%n.pstat")
    p = subprocess.Popen([py, os.path.join(SAMPLES, "gevent_resp_server.py"), str(port)],
                         env=r.env(COPROF_CLOCK="cpu", COPROF_OUT=tmpl, COPROF_START=0,
                                   COPROF_MODE=mode, COPROF_HZ=997),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = None
    try:
        check("listening" in p.stdout.readline(), "the server did not start")
        b = subprocess.Popen([bench, "-p", str(port), "-t", "set,get", "-n", "100000000",
                              "-c", "20", "-q"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for i in range(3):
            check("on" in coprof_toggle(p.pid), "window %d did not open" % (i + 1))
            time.sleep(window)
            said = coprof_toggle(p.pid)
            check("gresp.%d.pstat" % (i + 1) in said, "window %d: %r" % (i + 1, said))
            time.sleep(0.2)
        check(b.poll() is None, "redis-benchmark stopped early")
    except AssertionError as e:
        # what the server said, when it was a crash the toggle ran into
        if b is not None:
            reap(b)
            b = None
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=60)
        raise AssertionError("%s; the server exited %r: %s %s" % (e, p.returncode, rest[-500:],
                                                       err[-3000:]))
    finally:
        if b is not None:
            reap(b)
        if p.returncode is None:
            p.send_signal(signal.SIGINT)
            rest, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "gevent_resp_server: stopped" in rest,
          "exit %d: %s %s" % (p.returncode, rest[-500:], err[-2000:]))
    ours = [l for l in err.splitlines() if l.startswith("coprof:")
            and "Python frames are not sampled" not in l]
    check(not ours, "the shim complained: %s" % ours)
    files = sorted(glob.glob(os.path.join(r.tmp, "gresp.*.pstat")))
    check(len(files) == 3, "expected 3 windows, got %s" % [os.path.basename(f) for f in files])
    fig = {}
    for n, f in enumerate(files, 1):
        prof = Profile(f)
        name = os.path.basename(f)
        glets = [t for t in prof.tasks() if t["runtime"] == "greenlet"]
        if mode == "trace":
            check(prof.funcs("execute"), "%s: execute was not called" % name)
            conns = [t for t in glets if any(k[2] == "execute" for k in t["stats"])]
            check(conns, "%s: no connection greenlet ran execute" % name)
            check(not any(k[2] == "execute" for t in prof.tasks() if t["runtime"] != "greenlet"
                          for k in t["stats"]), "%s: execute outside a greenlet" % name)
            fig["execute nc %d" % n], fig["greenlets %d" % n] = prof.nc("execute"), len(conns)
        else:
            busy = [t for t in glets if t["ttot"] > 0]
            check(busy, "%s: no greenlet was sampled" % name)
            fig["greenlets %d" % n] = len(busy)
    return fig


def case_greenlet_resp_toggled_sample(r, window=0.2):
    return case_greenlet_resp_toggled(r, "sample", window)


def read_measured(path):
    with open(path) as f:
        return json.load(f)["cpu"]


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")
         and name not in ("case_awaits", "case_worker")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--asan", default="")
    ap.add_argument("--hook", choices=("auto", "profile", "monitoring", "evalframe"))
    ap.add_argument("--make-venv", action="store_true",
                    help="only make the gevent venv of --python (gevent_python) and exit: "
                         "scripts/test.sh has them made while the build compiles")
    ap.add_argument("case", choices=sorted(CASES), nargs="?")
    args = ap.parse_args()
    if args.make_venv or not args.case:
        if not args.make_venv:
            ap.error("a case is needed")
        try:
            print(gevent_python(Runner(args, None)))
        except AssertionError as e:
            print("no gevent venv for %s: %s" % (args.python, e))
            return 1
        return 0
    hook = " (COPROF_PY_HOOK=%s)" % args.hook if args.hook else ""
    with tempfile.TemporaryDirectory(prefix="coprof-py-") as tmp:
        try:
            fig = CASES[args.case](Runner(args, tmp))
        except AssertionError as e:
            print("FAIL %s on %s%s: %s" % (args.case, args.python, hook, e))
            return 1
    print("ok %s on %s%s" % (args.case, args.python, hook))
    if fig:  # for the log: what bench/python/accuracy.py holds to its tolerances
        print("figures: " + ", ".join("%s %.4g" % kv for kv in sorted(fig.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
