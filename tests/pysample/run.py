#!/usr/bin/env python3
"""run.py: sample mode on a CPython process (issue 12), one case per run.

usage: run.py --python EXE --shim LIB --coprof BIN [--asan LIB] CASE

Each CASE runs prog.py on the interpreter EXE under LD_PRELOAD=LIB with
COPROF_MODE=sample, reads the .pstat files it wrote (pstats and marshal) and asserts on
the Python frames sampled; the program's output must equal an unprofiled run's (of
the timed programs, a shorter run: their line does not depend on the time).
Cases end in _cpu or _wall, the clock. Exit status 0: passed; 1: failed (with why).
"""
import argparse
import glob
import json
import marshal
import os
import pstats
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "prog.py")


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def load(path):
    stats = pstats.Stats(path).stats
    with open(path, "rb") as f:
        marshal.load(f)
        extras = marshal.load(f)
    synth = set(extras.get("synthetic", []))
    return {k: v for k, v in stats.items() if k not in synth}, extras


def ours(stats, name):
    """The entry of prog.py's function `name`: (cc, nc, tt, ct, callers)."""
    found = [v for k, v in stats.items() if k[0] == PROG and k[2] == name]
    check(len(found) <= 1, "%s keyed %d times" % (name, len(found)))
    return found[0] if found else None


def ct(stats, name):
    v = ours(stats, name)
    return v[3] if v else 0.0


def report_of(err):
    """What to show of a failed run's stderr: a sanitizer's report from its start (the
    faulting access's stack comes first, and the tail alone lost it once), else the
    tail."""
    at = err.find("ERROR: AddressSanitizer")
    if at < 0:
        at = err.find("runtime error:")
    return err[max(at - 200, 0):at + 4000] if at >= 0 else err[-2000:]


class Runner:
    def __init__(self, args, tmp):
        self.a, self.tmp = args, tmp

    def env(self, clock, **kw):
        env = dict(os.environ)
        env["LD_PRELOAD"] = " ".join(p for p in (self.a.asan, self.a.shim) if p)
        env["ASAN_OPTIONS"] = "detect_leaks=0"  # CPython itself leaks at exit by design
        env.pop("PYTHONPATH", None)
        env.update(COPROF_MODE="sample", COPROF_CLOCK=clock, COPROF_HZ="997")
        env.update({k: str(v) for k, v in kw.items()})
        return env

    def code_keys(self):
        """(first line, name) of every code object in prog.py, as the interpreter under
        test names them (co_qualname, or co_name before 3.11)."""
        src = ("import sys\n"
               "def walk(co):\n"
               "    yield co.co_firstlineno, getattr(co, 'co_qualname', co.co_name)\n"
               "    for c in co.co_consts:\n"
               "        if hasattr(c, 'co_code'): yield from walk(c)\n"
               "co = compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')\n"
               "for line, name in walk(co): print(line, name)\n")
        p = subprocess.run([self.a.python, "-c", src, PROG], capture_output=True, text=True,
                           timeout=60, check=True)
        return {(int(l.split(" ", 1)[0]), l.split(" ", 1)[1]) for l in p.stdout.splitlines()}

    def plain(self, args, stdin=None, short=False):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if short:
            env["PYSAMPLE_SHORT"] = "1"  # prog.py: spins a tenth as long, same line
        p = subprocess.run([self.a.python, PROG] + args, env=env, input=stdin,
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "unprofiled run failed: " + p.stderr[-2000:])
        return p.stdout

    def run(self, args, clock, out, stdin=None, base=None, short=False, **kw):
        """Runs prog.py profiled; its output must be the unprofiled run's. `base`: the
        arguments of that unprofiled run when not `args`: the same program for a
        shorter time, for the timed programs whose line does not depend on it (prog.py:
        split, stress, tasks, tthreads, achurn and tchurn print a fixed line), so the
        check is as strong and the run takes half the time. `short`: the same for the
        programs with fixed spins (threads, fork, afork, idle), which spin a tenth as
        long under PYSAMPLE_SHORT=1."""
        base = self.plain(base or args, stdin, short)
        p = subprocess.run([self.a.python, PROG] + args, input=stdin,
                           env=self.env(clock, COPROF_OUT=out, **kw),
                           capture_output=True, text=True, timeout=240)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, report_of(p.stderr)))
        check("coprof:" not in p.stderr, "the shim said: " + p.stderr[-2000:])
        check(p.stdout == base, "output %r, unprofiled %r" % (p.stdout, base))
        return p


def split_share(r, clock, out, **kw):
    """Runs the 2:1 split; heavy's sampled share must be within 3 points of the share
    the program measured on the same clock (under cpu, itself within 3 points of 2/3;
    under wall the waits for a CPU on a loaded machine move it, see prog.py)."""
    # at 2,999 Hz, not the runner's 997: there the sampled share strayed from the
    # measured one by 0.0095 (sd, 40 runs a clock), so 3 points was 3 sd and one of the
    # ~20 such checks in a CI run failed now and then (a run read 0.033); at 2,999 Hz
    # the sd is 0.0028 wall, 0.0025 cpu (30 runs each, the widest 0.011), where a
    # dithered period's own floor is about 0.0075 at 997 Hz for this 1.5 s
    kw.setdefault("COPROF_HZ", 2999)
    side = os.path.join(r.tmp, "measured.json")
    r.run(["split", "1.5", side], clock, out, base=["split", "0.05"], **kw)
    with open(side) as f:
        measured = json.load(f)[clock]
    stats, _ = load(out)
    h, l = ct(stats, "heavy"), ct(stats, "light")
    check(h > 0 and l > 0, "heavy %.3f s, light %.3f s" % (h, l))
    share = h / (h + l)
    if clock == "cpu":
        check(abs(measured - 2 / 3) <= 0.03, "the program measured %.3f, not 2/3" % measured)
    check(abs(share - measured) <= 0.03, "heavy's share %.3f, the program measured %.3f "
          "(+- 0.03)" % (share, measured))
    return share


def case_split(r, clock):
    """heavy and light share the CPU 2:1: the samples say so within 3 points, with the
    keys trace mode gives them (so `coprof diff` compares the two files)."""
    out = os.path.join(r.tmp, "split.pstat")
    share = split_share(r, clock, out)
    stats, ex = load(out)
    check(ex["mode"] == "sample", "mode %r" % ex["mode"])
    h, l = ct(stats, "heavy"), ct(stats, "light")
    split = ours(stats, "split")
    check(split and split[3] >= h + l - 1e-6, "split's ct %r below its callees'" % (split,))
    check(any(k[2] == "<module>" and k[0] == PROG for k in stats), "no <module> of prog.py")
    traced = os.path.join(r.tmp, "traced.pstat")
    r.run(["split", "0.2"], clock, traced, base=["split", "0.05"], COPROF_MODE="trace")
    tstats, _ = load(traced)
    for name in ("heavy", "light", "split"):
        sk = [k for k in stats if k[0] == PROG and k[2] == name]
        tk = [k for k in tstats if k[0] == PROG and k[2] == name]
        check(sk == tk, "%s: sampled key %r, traced %r" % (name, sk, tk))
    d = subprocess.run([r.a.coprof, "diff", traced, out, "--limit", "50"], capture_output=True,
                       text=True, timeout=60)
    check(d.returncode in (0, 1), "coprof diff: %s" % d.stderr)
    rows = [l for l in d.stdout.splitlines() if " heavy " in " %s " % l or "heavy" in l.split()]
    check(rows, "coprof diff shows no heavy row: %s" % d.stdout[-1500:])
    print("heavy share %.3f (%.3f s / %.3f s)" % (share, h, l))


def case_native(r, clock):
    """--native (COPROF_NATIVE=1): the stacks hold C frames too, every C frame of the
    eval loop replaced by the Python frames it ran, and the split still reads 2:1."""
    out = os.path.join(r.tmp, "native.pstat")
    share = split_share(r, clock, out, COPROF_NATIVE=1)
    stats, ex = load(out)
    mixed = 0
    for st in ex["stacks"]:
        frames = st[2]
        py = [f for f in frames if f[0] == PROG]
        if not py:
            continue
        names = [f[2] for f in frames]
        check("_PyEval_EvalFrameDefault" not in names, "an eval C frame was left: %r" % names)
        native = [f for f in frames if not f[0].endswith(".py") and not f[0].startswith("<")]
        mixed += bool(native)
    check(mixed, "no stack holds both Python and C frames")
    print("heavy share %.3f, %d mixed stacks" % (share, mixed))


def case_threads(r, clock):
    """Each thread is sampled, the one started while sampling ran too, each under its
    own thread id."""
    out = os.path.join(r.tmp, "threads.pstat")
    r.run(["threads"], clock, out, short=True)
    stats, ex = load(out)
    a, b = ct(stats, "thread_a"), ct(stats, "thread_b")
    check(a >= 0.2 and b >= 0.2, "thread_a %.3f s, thread_b %.3f s of 0.5 s each" % (a, b))
    tids = {}
    for tid_ctx in ex["stacks"]:
        ctx, tid, frames = tid_ctx[0], tid_ctx[1], tid_ctx[2]
        names = {f[2] for f in frames if f[0] == PROG}
        for n in ("thread_a", "thread_b"):
            if n in names:
                tids.setdefault(n, set()).add(tid)
    check(len(tids) == 2 and all(len(t) == 1 for t in tids.values()) and
          tids["thread_a"] != tids["thread_b"], "thread ids of the stacks: %r" % tids)
    print("thread_a %.3f s, thread_b %.3f s" % (a, b))


def window_of_b(r, clock, what):
    """Runs prog.py `what` (phases a, b, c read from stdin) with COPROF_START=0 and
    coprof toggle around phase b; the one file it wrote, loaded."""
    out = os.path.join(r.tmp, "win.%n.pstat")
    p = subprocess.Popen([r.a.python, PROG, what], env=r.env(clock, COPROF_OUT=out,
                                                            COPROF_START=0),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline() == "ready\n", "the program did not start")

        def phase(name):
            p.stdin.write(name + "\n")
            p.stdin.flush()
            line = p.stdout.readline()
            check(line == "done %s\n" % name, "phase %s: %r" % (name, line))

        def toggle():
            t = subprocess.run([r.a.coprof, "toggle", str(p.pid)], capture_output=True,
                               text=True, timeout=60)
            check(t.returncode == 0, "coprof toggle: %s %s" % (t.stdout, t.stderr))
        phase("a")
        toggle()
        phase("b")
        toggle()
        phase("c")
        p.stdin.close()
        err = p.stderr.read()
        check(p.wait(timeout=60) == 0, "exit %d: %s" % (p.returncode, err))
        check("coprof:" not in err, "the shim said: " + err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    files = sorted(glob.glob(os.path.join(r.tmp, "win.*.pstat")))
    check(len(files) == 1, "one window expected: %r" % files)
    return load(files[0])


def case_toggled(r, clock):
    """COPROF_START=0 and coprof toggle: only the window's phase is in the file."""
    stats, _ = window_of_b(r, clock, "phases")
    b = ct(stats, "phase_b")
    check(b >= 0.2, "phase_b has %.3f s of its 0.3 s" % b)
    check(ct(stats, "phase_a") == 0 and ct(stats, "phase_c") == 0,
          "phases outside the window were sampled: a %.3f, c %.3f" %
          (ct(stats, "phase_a"), ct(stats, "phase_c")))
    print("window: phase_b %.3f s" % b)


def case_fork(r, clock):
    """os.fork: the child samples itself into its own file."""
    out = os.path.join(r.tmp, "fork.%p.pstat")
    r.run(["fork"], clock, out, short=True)
    files = glob.glob(os.path.join(r.tmp, "fork.*.pstat"))
    check(len(files) == 2, "parent and child files expected: %r" % files)
    seen = {}
    for f in files:
        stats, ex = load(f)
        c, p = ct(stats, "child_work"), ct(stats, "parent_work")
        check((c >= 0.2) != (p >= 0.2), "%s: child_work %.3f s, parent_work %.3f s" % (f, c, p))
        seen["child" if c >= 0.2 else "parent"] = ex["pid"]
        check(min(c, p) == 0, "%s holds the other process's function" % f)
    check(len(seen) == 2, "files: %r" % seen)


def case_stress(r, clock):
    """Frame races at 10 kHz: five threads make and drop code objects as fast as they
    can. The host runs as unprofiled, and every sampled exec'd function carries its own
    first line: no frame is ever named after another code object."""
    out = os.path.join(r.tmp, "stress.pstat")
    secs = os.environ.get("PYSAMPLE_STRESS_SECONDS", "3")
    r.run(["stress", secs], clock, out, base=["stress", "0.1"], COPROF_HZ="10000")
    stats, ex = load(out)
    churned = [k for k in stats if k[0] == "<churn>"]
    check(churned, "no exec'd function sampled")
    for k in churned:
        check(k[1:] == (1, "<module>") or (k[2].startswith("f") and k[1] == int(k[2][1:]) + 1),
              "mislabelled: %r" % (k,))
    real = r.code_keys()
    for k in stats:
        check(k[0] != PROG or k[1:] in real, "%r names no code object of prog.py" % (k,))
    total = sum(v[2] for v in stats.values())
    check(total > 0.5, "%.3f s sampled" % total)
    print("%d exec'd functions sampled, dropped %r" % (len(churned), ex.get("dropped")))


def task_table(ex):
    """The asyncio tasks of a file's extras, by name: (index, task)."""
    out = {}
    for i, t in enumerate(ex["tasks"]):
        check(t["runtime"] == "asyncio", "task %r: runtime %r" % (t["name"], t["runtime"]))
        out.setdefault(t["name"], []).append((i, t))
    return out


def task_ct(task, name):
    v = [v for k, v in task["stats"].items() if k[0] == PROG and k[2] == name]
    return v[0][3] if v else 0.0


def elsewhere(ex, name, task):
    """Where the samples of prog.py's `name` outside task index `task` went, for a
    failure's message: seconds per context (a task's name, or [thread]) and thread,
    most first, and the stack that weighed most."""
    ns = ex.get("stack_ns", [])
    where, top = {}, (0, None)
    for i, st in enumerate(ex["stacks"]):
        if st[0] == task or not any(f[0] == PROG and f[2] == name for f in st[2]):
            continue
        w = ns[i] if i < len(ns) else 0
        key = (ex["tasks"][st[0]]["name"] if st[0] >= 0 else "[thread]", st[1])
        where[key] = where.get(key, 0) + w
        top = max(top, (w, [f[2] for f in st[2]][:4]), key=lambda x: x[0])
    if not where:
        return "nowhere"
    return "%s (heaviest %r, %.3f s)" % (", ".join(
        "%s on %d %.3f s" % (k[0], k[1], v / 1e9) for k, v in
        sorted(where.items(), key=lambda kv: -kv[1])), top[1], top[0] / 1e9)


def check_tasks(r, clock, out, stats, ex, measured, suffix="", fns=("big", "small"), slept=0.5):
    """The checks of one loop's split_tasks (prog.py) in file `out`: tasks three<suffix>,
    one<suffix> and sleeper<suffix>, named by Task.get_name(), each once; three's share
    of the two within 5 points of what the tasks measured on the same clock; each holds
    its own function only, its stacks start at worker; under wall sleeper waits at
    fetch;waiter, [waiting] in the collapsed export, as long as its await took (`slept`,
    the wall time the program measured: more than its 0.5 s when the loaded machine
    resumed it late); under cpu nothing waits. Returns the three tasks' (index, task)
    and three's share."""
    tasks = task_table(ex)
    names = [n + suffix for n in ("three", "one", "sleeper")]
    for name in names:
        check(len(tasks.get(name, [])) == 1, "task %s: %r (tasks %r)" % (
            name, tasks.get(name), sorted(tasks)))
    (i3, three), (i1, one), (isl, sleeper) = [tasks[n][0] for n in names]
    big, small = fns
    b, s = task_ct(three, big), task_ct(one, small)
    check(b > 0 and s > 0, "%s %.3f s in %s, %s %.3f s in %s" % (big, b, names[0], small, s,
                                                             names[1]))
    check(task_ct(three, small) == 0 and task_ct(one, big) == 0,
          "a task holds the other's function")
    share = b / (b + s)
    if clock == "cpu":
        check(abs(measured - 0.75) <= 0.03, "the tasks measured %.3f, not 3/4" % measured)
    check(abs(share - measured) <= 0.05, "%s's share %.3f, the tasks measured %.3f "
          "(+- 0.05)" % (names[0], share, measured))
    # the thread's own context holds the loop, not the tasks' functions: but for the
    # ticks before a task's first scan, all of big and small is in the tasks. Those
    # ticks span the scan's latency (from the tick that met the task to the end of the
    # scan: the next fold, then a thread with the GIL runs the call), 3-60 ms here
    # under load, and what big and small lost to the thread tracked it (within ~15 ms); a
    # CI run lost 18% of big, about 0.37 s: that latency is not bounded under load
    top_b, top_s = ct(stats, big), ct(stats, small)
    check(b >= 0.97 * top_b and s >= 0.97 * top_s,
          "%s/%s in their tasks: %.3f/%.3f of %.3f/%.3f; elsewhere %s: %s, %s: %s; dropped %r"
          % (big, small, b, s, top_b, top_s, big, elsewhere(ex, big, i3), small,
             elsewhere(ex, small, i1), ex.get("dropped")))
    print("%s/%s outside their tasks: %.1f%%/%.1f%%" % (big, small, 100 * (1 - b / top_b),
                                                       100 * (1 - s / top_s)))
    waited = 0.0
    for st in ex["stacks"]:
        task, frames, waiting = st[0], st[2], st[4]
        fn = [f[2] for f in frames]
        if task in (i3, i1) and not waiting:
            check(fn[-1] == "worker", "task %s stack %r does not start at worker" %
                  (ex["tasks"][task]["name"], fn))
        if waiting:
            check(clock == "wall", "a waiting stack under cpu: %r" % fn)
        if task == isl and waiting:
            check(fn[1:] == ["fetch", "waiter"], "%s waits at %r" % (names[2], fn))
            waited += st[3] / 997.0  # ticks at COPROF_HZ
    if clock == "wall":
        check(0.35 <= waited <= slept + 0.5, "%s waited %.3f s of its %.3f s" % (
            names[2], waited, slept))
        check(task_ct(sleeper, "fetch") >= 0.35, "fetch's ct in %s %.3f s" %
              (names[2], task_ct(sleeper, "fetch")))
        c = subprocess.run([r.a.coprof, "export", out, "--format", "collapsed", "-o", "-"],
                           capture_output=True, text=True, timeout=60)
        check(c.returncode == 0, "coprof export: %s" % c.stderr)
        lines = [l for l in c.stdout.splitlines()
                 if " %s];waiter;fetch;" % names[2] in l
                 and l.rsplit(" ", 1)[0].endswith(";[waiting]")]
        check(lines, "no [task N %s];waiter;fetch;...;[waiting] line" % names[2])
    return ((i3, three), (i1, one), (isl, sleeper)), share, waited


def run_tasks(r, clock, what):
    """Runs prog.py's `what` (tasks, tthreads) for 1.5 s: its file's stats and
    extras, and the split the tasks measured (prog.py's side file)."""
    out = os.path.join(r.tmp, what + ".pstat")
    side = os.path.join(r.tmp, "measured.json")
    r.run([what, "1.5", side], clock, out, base=[what, "0.05"])
    with open(side) as f:
        measured = json.load(f)
    stats, ex = load(out)
    return out, stats, ex, measured


def case_tasks(r, clock):
    """Per task: each sample is charged to the asyncio task running, named by
    Task.get_name() (create_task(name=) and set_name); the 3:1 split between two tasks
    reads within 5 points of what the tasks measured on the same clock; each task's
    stacks start at its root coroutine; under wall, a task that awaits fetch(), which
    awaits asyncio.sleep(0.5), has that wait at fetch's stack, ending in [waiting] in the
    collapsed export, and under cpu nothing is waiting."""
    out, stats, ex, measured = run_tasks(r, clock, "tasks")
    slept = measured["slept"]
    measured = measured[clock]
    _, share, waited = check_tasks(r, clock, out, stats, ex, measured, slept=slept)
    print("three's share %.3f (measured %.3f), sleeper waited %.3f s" % (share, measured, waited))


def loop_thread(ex, found):
    """The thread the tasks `found` (check_tasks) are listed under: one thread, not the
    main one, and the thread of every stack sampled in them."""
    tids = {t["thread"] for _, t in found}
    check(len(tids) == 1, "the tasks are on threads %r" % sorted(tids))
    tid = tids.pop()
    check(tid != ex["pid"], "the tasks are on the main thread %d" % tid)
    idx = {i for i, _ in found}
    other = {st[1] for st in ex["stacks"] if st[0] in idx} - {tid}
    check(not other, "the tasks' stacks were sampled on threads %r too" % sorted(other))
    return tid


def case_tthreads(r, clock):
    """Two event loops at once in two threads (threading.Thread(target=asyncio.run)),
    the main thread blocked in join(): each loop's tasks are told apart as the main
    thread's are (check_tasks: names, the 3:1 split, waits under wall), listed under
    their own loop's thread, not the main one."""
    out, stats, ex, measured = run_tasks(r, clock, "tthreads")
    tids = []
    for suffix, fns in (("", ("big", "small")), ("_b", ("big_b", "small_b"))):
        found, share, waited = check_tasks(r, clock, out, stats, ex, measured[suffix][clock],
                                           suffix, fns, measured[suffix]["slept"])
        tids.append(loop_thread(ex, found))
        print("loop %r on %d: three's share %.3f (measured %.3f), sleeper waited %.3f s" %
              (suffix, tids[-1], share, measured[suffix][clock], waited))
    check(tids[0] != tids[1], "both loops' tasks on thread %d" % tids[0])


def case_atoggle(r, clock):
    """A toggled window over asyncio tasks: only the window's task is in the file."""
    stats, ex = window_of_b(r, clock, "atoggle")
    tasks = task_table(ex)
    check(len(tasks.get("task_b", [])) == 1, "task_b: tasks %r" % sorted(tasks))
    b = task_ct(tasks["task_b"][0][1], "phase_b")
    check(b >= 0.2, "phase_b has %.3f s of its 0.3 s in task_b" % b)
    check(ct(stats, "phase_a") == 0 and ct(stats, "phase_c") == 0,
          "phases outside the window were sampled")
    print("window: phase_b %.3f s in task_b" % b)


def case_afork(r, clock):
    """os.fork after a task ran: the child's file holds its own task only, the
    parent's file the parent's tasks."""
    out = os.path.join(r.tmp, "afork.%p.pstat")
    r.run(["afork"], clock, out, short=True)
    files = glob.glob(os.path.join(r.tmp, "afork.*.pstat"))
    check(len(files) == 2, "parent and child files expected: %r" % files)
    seen = set()
    for f in files:
        stats, ex = load(f)
        tasks = task_table(ex)
        if "child_task" in tasks:
            check(not {"before_fork", "parent_task"} & set(tasks),
                  "child file tasks %r" % sorted(tasks))
            c = task_ct(tasks["child_task"][0][1], "child_work")
            check(c >= 0.15, "child_work %.3f s in child_task" % c)
            seen.add("child")
        else:
            check({"before_fork", "parent_task"} <= set(tasks) and "child_task" not in tasks,
                  "parent file tasks %r" % sorted(tasks))
            p = task_ct(tasks["parent_task"][0][1], "parent_work")
            check(p >= 0.15, "parent_work %.3f s in parent_task" % p)
            seen.add("parent")
    check(seen == {"child", "parent"}, "files: %r" % seen)


def churned(r, clock, what):
    """Runs prog.py's `what` (achurn, tchurn) for 2 s at 10 kHz: every task's samples
    are its own coroutine's (task t<j> holds f<j> only), so no context is ever given to
    another task's coroutine. Returns the file's extras."""
    out = os.path.join(r.tmp, what + ".pstat")
    r.run([what, "2"], clock, out, base=[what, "0.1"], COPROF_HZ="10000")
    stats, ex = load(out)
    named = 0
    for t in ex["tasks"]:
        if not t["name"].startswith("t"):
            continue
        funcs = {k[2] for k in t["stats"] if k[0] == "<achurn>"}
        check(funcs <= {"f" + t["name"][1:]}, "task %s holds %r" % (t["name"], funcs))
        named += bool(funcs)
    check(named >= 10, "%d tasks sampled with their function" % named)
    print("%d tasks, %d sampled in their own function" % (len(ex["tasks"]), named))
    return ex


def case_achurn(r, clock):
    """Tasks made and finished by the thousand at 10 kHz, coroutines reusing the
    addresses of dead ones (churned)."""
    churned(r, clock, "achurn")


def case_tchurn(r, clock):
    """achurn in two loops in two threads at once: each thread's ticks read the task
    table while a scan on another thread frees and refills its slots; every task is
    listed under one of the two loop threads."""
    ex = churned(r, clock, "tchurn")
    tids = {t["thread"] for t in ex["tasks"] if t["name"].startswith("t")}
    check(len(tids) == 2 and ex["pid"] not in tids, "the tasks are on threads %r (main %d)" %
          (sorted(tids), ex["pid"]))


def idle_waits(r, clock, **kw):
    """Runs prog.py's idle with 1,000 tasks: (the wait the program measured, each idle
    task's wait in seconds, sorted; None under cpu, where it checks nothing waits)."""
    out = os.path.join(r.tmp, "idle.pstat")
    side = os.path.join(r.tmp, "idle.json")
    r.run(["idle", "1000", side], clock, out, short=True, **kw)
    with open(side) as f:
        waited = json.load(f)
    _, ex = load(out)
    dropped = ex.get("dropped") or {}
    check(not any("buffer full" in k for k in dropped), "dropped: %r" % dropped)
    idle = {i for i, t in enumerate(ex["tasks"]) if t["name"].startswith("idle")}
    check(len(idle) == 1000, "%d idle tasks in the table" % len(idle))
    ticks = dict.fromkeys(idle, 0)
    for st in ex["stacks"]:
        task, frames, count, waiting = st[0], st[2], st[3], st[4]
        if waiting:
            check(clock == "wall", "a waiting stack under cpu: %r" % (frames,))
            if task in ticks:
                check(frames[-1][0] == PROG and frames[-1][2].split(".")[-1] == "wait",
                      "idle task waits at %r" % (frames,))
                ticks[task] += count
    if clock == "cpu":
        print("no waits under cpu")
        return waited, None
    return waited, sorted(t / 997.0 for t in ticks.values())  # ticks at COPROF_HZ


def case_idle(r, clock):
    """1,000 tasks wait on an Event for about a second while another computes: under
    wall each is charged its wait at the Event (ending in wait, the coroutine that
    awaits it, at the root), close to what the program measured (below), and no wait is
    dropped on the way (a scan hands over hundreds at once); under cpu nothing waits."""
    w, secs = idle_waits(r, clock)
    if secs is None:
        return
    waited, resumed = w["waited"], w["resumed"]
    low, high, mean = secs[0], secs[-1], sum(secs) / len(secs)
    # A wait counts from the call that first saw the task (every 5th call makes new
    # tasks' slots, and a busy machine delays the calls), so a task may lose the
    # first 0.1-0.2 s; none is charged more than it waited, give or take a call: until
    # the loop resumed it, after the set (on a loaded machine 0.1 s later, and a call
    # that came before it resumed saw it waiting still).
    check(waited - 0.2 <= low and high <= resumed + 0.1 and
          0.92 * waited <= mean <= 1.08 * resumed,
          "waits %.3f-%.3f s (mean %.3f), the tasks waited %.3f s (the last resumed at "
          "%.3f s)" % (low, high, mean, waited, resumed))
    print("1,000 tasks waited %.3f-%.3f s each (mean %.3f) of %.3f s" % (low, high, mean, waited))


def case_idlestarved(r, clock):
    """idle with the scans of a starved folding thread (COPROF_TEST_FOLD_EVERY=13: one
    fold in 13 asks for one, about every 130 ms, as at load 13 on 2 cores): each task
    waited about as long, and none loses what its slot measured but had not handed over
    when the program ended (before, each slot kept up to ten scans of it, at its own
    turn: waits of 0.0-0.9 s for a wait of 1 s). Scans that far apart miss the start of the
    wait (until the scan that first sees a task waiting) and its end (after the last
    one): a few of them."""
    w, secs = idle_waits(r, clock, COPROF_TEST_FOLD_EVERY=13)
    if secs is None:
        return
    waited = w["waited"]
    low, high, mean = secs[0], secs[-1], sum(secs) / len(secs)
    # A call that comes while the loop resumes the tasks one by one (late on a loaded
    # machine) sees those not resumed yet waiting still: they differ by up to a call.
    check(high - low <= 0.3 and waited - 0.6 <= low and high <= w["resumed"] + 0.15,
          "waits %.3f-%.3f s (mean %.3f), the tasks waited %.3f s" % (low, high, mean, waited))
    print("1,000 tasks waited %.3f-%.3f s each (mean %.3f) of %.3f s" % (low, high, mean, waited))


def case_gap(r, clock):
    """The first-scan gap: task gapped's first 0.12 s is one C call that holds the GIL,
    so the scan its first tick asked for runs only after it; those ticks are held and
    charged to gapped once that scan finds it (without that, to the thread's own
    context: all of csum)."""
    out = os.path.join(r.tmp, "gap.pstat")
    r.run(["gap"], clock, out, short=True)
    stats, ex = load(out)
    # By its root, not its name: a scan that ran between Task() and create_task's
    # set_name lists it as Task-2 until the next rename, 200 ms on.
    found = [(i, t) for i, t in enumerate(ex["tasks"]) if task_ct(t, "gapped") > 0]
    check(len(found) == 1, "tasks holding gapped: %r" % [t["name"] for _, t in found])
    i, task = found[0]
    total, mine = ct(stats, "csum"), task_ct(task, "csum")
    check(total >= 0.05, "csum sampled %.3f s" % total)
    check(mine >= 0.95 * total, "csum %.3f s of %.3f s in gapped; elsewhere %s" % (
        mine, total, elsewhere(ex, "csum", i)))
    print("csum %.3f s of %.3f s in gapped" % (mine, total))


def case_reuse(r, clock):
    """A held tick goes to no other coroutine at its address: reused_a runs and
    finishes before any scan (COPROF_TEST_SCAN_DELAY_MS holds them), reused_b's
    coroutine is made at its address; the scan finds reused_b there, and takes
    reused_b's held ticks, not reused_a's (another code): those stay with the
    thread."""
    out = os.path.join(r.tmp, "reuse.pstat")
    side = os.path.join(r.tmp, "reuse.json")
    delay = 0.6
    # A loaded machine may run reused_a for longer than the delay (its 0.05 s of CPU),
    # or run the delayed scan after reused_b's end: a scan then lists reused_a, or none
    # reused_b, and the run tests nothing; it is run again.
    for attempt in range(3):
        r.run(["reuse", str(delay), side], clock, out, base=["reuse", "0", side],
              COPROF_TEST_SCAN_DELAY_MS=int(delay * 1000))
        with open(side) as f:
            check(json.load(f)["reused"], "reused_b's coroutine not made at reused_a's address")
        stats, ex = load(out)
        tasks = task_table(ex)
        if "reused_a" not in tasks and "reused_b" in tasks:
            break
    check("reused_a" not in tasks, "a scan listed reused_a in 3 runs: the knob did not hold it")
    check(len(tasks.get("reused_b", [])) == 1, "task reused_b: tasks %r" % sorted(tasks))
    i, task = tasks["reused_b"][0]
    a, b = ct(stats, "reused_a"), task_ct(task, "reused_b")
    check(a >= 0.02, "reused_a sampled %.3f s" % a)
    check(task_ct(task, "reused_a") == 0, "reused_b holds reused_a's %.3f s of %.3f s" % (
        task_ct(task, "reused_a"), a))
    check(b >= 0.95 * ct(stats, "reused_b"), "reused_b %.3f s of %.3f s in its task; "
          "elsewhere %s" % (b, ct(stats, "reused_b"), elsewhere(ex, "reused_b", i)))
    print("reused_a %.3f s with the thread, reused_b %.3f s in its task" % (a, b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--coprof", required=True)
    ap.add_argument("--asan", default="")
    ap.add_argument("case")
    args = ap.parse_args()
    name, _, clock = args.case.rpartition("_")
    fn = globals().get("case_" + name)
    if not fn or clock not in ("cpu", "wall"):
        print("unknown case %s" % args.case)
        return 2
    with tempfile.TemporaryDirectory(prefix="pysample-") as tmp:
        try:
            t = time.monotonic()
            fn(Runner(args, tmp), clock)
            print("%s: passed in %.1f s" % (args.case, time.monotonic() - t))
            return 0
        except Failed as e:
            print("%s: FAILED: %s" % (args.case, e))
            return 1


if __name__ == "__main__":
    sys.exit(main())
