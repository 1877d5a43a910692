#!/usr/bin/env python3
"""run.py: sample mode on a CPython process (issue 12), one case per run.

usage: run.py --python EXE --shim LIB --coprof BIN [--asan LIB] CASE

Each CASE runs prog.py on the interpreter EXE under LD_PRELOAD=LIB with
COPROF_MODE=sample, reads the .pstat files it wrote (tests/lib/coprof_test.py's
Profile, which checks the whole-program tree) and asserts what is exact of the Python
frames sampled: keys, which task, thread or process holds which function, stacks,
files, and times only where a bound holds whatever the load (a function that spun
0.3 s of CPU was sampled for at least 0.2 s). The program's output must equal an
unprofiled run's (of the timed programs, a shorter run: their line does not depend on
the time). A case that measures more (shares, waits) returns its figures, printed at
the end: bench/python/accuracy.py runs the same case, at its full length, again and
again and holds them to their tolerances. Cases end in _cpu or _wall, the clock.
Exit status 0: passed; 1: failed (with why).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, "prog.py")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from coprof_test import Profile, check, funcs  # noqa: E402


def task_ct(task, name):
    """The ct of prog.py's `name` in a task's stats (0 when it has none)."""
    return sum(v[3] for _, v in funcs(task["stats"], name, PROG))


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


def split_share(r, clock, out, seconds, **kw):
    """Runs the 2:1 split for `seconds` of CPU at 2,999 Hz (the rate of
    bench/python/accuracy.py's share figures: at 997 Hz the sampled share strayed from
    the measured one by 0.0095 sd, at 2,999 Hz by 0.0028). Both functions are sampled.
    Returns the file (a Profile) and the figures: heavy's sampled share and the share
    the program measured on the same clock."""
    kw.setdefault("COPROF_HZ", 2999)
    side = os.path.join(r.tmp, "measured.json")
    r.run(["split", str(seconds), side], clock, out, base=["split", "0.05"], **kw)
    with open(side) as f:
        measured = json.load(f)[clock]
    prof = Profile(out)
    h, l = prof.ct("heavy", PROG), prof.ct("light", PROG)
    check(h > 0 and l > 0, "heavy %.3f s, light %.3f s" % (h, l))
    return prof, {"share": h / (h + l), "measured": measured}


def case_split(r, clock, seconds=0.3):
    """heavy and light share the CPU 2:1 (`seconds` of it): both are sampled, under
    split, whose ct holds theirs, with the keys trace mode gives them (so `coprof diff`
    compares the two files). Returns the shares (split_share)."""
    out = os.path.join(r.tmp, "split.pstat")
    prof, fig = split_share(r, clock, out, seconds)
    check(prof.extras["mode"] == "sample", "mode %r" % prof.extras["mode"])
    h, l = prof.ct("heavy", PROG), prof.ct("light", PROG)
    split = prof.one("split", PROG)
    check(split[3] >= h + l - 1e-6, "split's ct %r below its callees'" % (split,))
    check(prof.funcs("<module>", PROG), "no <module> of prog.py")
    traced = os.path.join(r.tmp, "traced.pstat")
    r.run(["split", "0.2"], clock, traced, base=["split", "0.05"], COPROF_MODE="trace")
    tprof = Profile(traced)
    for name in ("heavy", "light", "split"):
        sk, tk = [k for k, _ in prof.funcs(name, PROG)], [k for k, _ in tprof.funcs(name, PROG)]
        check(sk == tk, "%s: sampled key %r, traced %r" % (name, sk, tk))
    # The whole comparison, not its first rows: they are sorted by change, and heavy's
    # change (0.2 s traced against 0.3 s sampled, less when load slowed the traced run)
    # fell below fifty C functions of the import machinery seen only by sampling, each
    # a few milliseconds (CI, stop 41, split_wall).
    d = subprocess.run([r.a.coprof, "diff", traced, out, "--format", "csv"],
                       capture_output=True, text=True, timeout=60)
    check(d.returncode in (0, 1), "coprof diff: %s" % d.stderr)
    rows = [l.split(",") for l in d.stdout.splitlines()[1:]]
    heavy = [c for c in rows if c[0] == "heavy" and c[1] == PROG]
    check(len(heavy) == 1, "coprof diff: %d heavy rows of prog.py: %s" % (len(heavy), d.stdout[-1500:]))
    check(float(heavy[0][6]) > 0 and float(heavy[0][7]) > 0,
          "heavy's ttot in the diff, traced and sampled: %r" % heavy[0])
    return fig


def case_native(r, clock, seconds=0.3):
    """--native (COPROF_NATIVE=1): the stacks hold C frames too, every C frame of the
    eval loop replaced by the Python frames it ran; the split's two functions are
    sampled. Returns the shares (split_share)."""
    out = os.path.join(r.tmp, "native.pstat")
    prof, fig = split_share(r, clock, out, seconds, COPROF_NATIVE=1)
    mixed = 0
    for st in prof.extras["stacks"]:
        frames = st[2]
        py = [f for f in frames if f[0] == PROG]
        if not py:
            continue
        names = [f[2] for f in frames]
        check("_PyEval_EvalFrameDefault" not in names, "an eval C frame was left: %r" % names)
        native = [f for f in frames if not f[0].endswith(".py") and not f[0].startswith("<")]
        mixed += bool(native)
    check(mixed, "no stack holds both Python and C frames")
    print("%d mixed stacks" % mixed)
    return fig


def case_threads(r, clock):
    """Each thread is sampled, the one started while sampling ran too, each under its
    own thread id, for at least 0.2 s of the 0.5 s of CPU it spun."""
    out = os.path.join(r.tmp, "threads.pstat")
    r.run(["threads"], clock, out, short=True)
    prof = Profile(out)
    a, b = prof.ct("thread_a", PROG), prof.ct("thread_b", PROG)
    check(a >= 0.2 and b >= 0.2, "thread_a %.3f s, thread_b %.3f s of 0.5 s each" % (a, b))
    tids = {}
    for tid_ctx in prof.extras["stacks"]:
        tid, frames = tid_ctx[1], tid_ctx[2]
        names = {f[2] for f in frames if f[0] == PROG}
        for n in ("thread_a", "thread_b"):
            if n in names:
                tids.setdefault(n, set()).add(tid)
    check(len(tids) == 2 and all(len(t) == 1 for t in tids.values()) and
          tids["thread_a"] != tids["thread_b"], "thread ids of the stacks: %r" % tids)
    print("thread_a %.3f s, thread_b %.3f s" % (a, b))


def window_of_b(r, clock, what):
    """Runs prog.py `what` (phases a, b, c read from stdin) with COPROF_START=0 and
    coprof toggle around phase b; the one file it wrote, a Profile."""
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
    return Profile(files[0])


def case_toggled(r, clock):
    """COPROF_START=0 and coprof toggle: only the window's phase is in the file, for
    at least 0.2 s of the 0.3 s of CPU it spun."""
    prof = window_of_b(r, clock, "phases")
    b = prof.ct("phase_b", PROG)
    check(b >= 0.2, "phase_b has %.3f s of its 0.3 s" % b)
    check(not prof.funcs("phase_a", PROG) and not prof.funcs("phase_c", PROG),
          "phases outside the window were sampled: %r" % sorted(
              k[2] for k in prof.stats if k[2].startswith("phase_")))
    print("window: phase_b %.3f s" % b)


def case_fork(r, clock):
    """os.fork: the child samples itself into its own file, each process's file holds
    its own work (at least 0.2 s of the 0.4 s of CPU it spun) and not the other's."""
    out = os.path.join(r.tmp, "fork.%p.pstat")
    r.run(["fork"], clock, out, short=True)
    files = glob.glob(os.path.join(r.tmp, "fork.*.pstat"))
    check(len(files) == 2, "parent and child files expected: %r" % files)
    seen = {}
    for f in files:
        prof = Profile(f)
        kid = prof.funcs("child_work", PROG)
        mine, other = ("child_work", "parent_work") if kid else ("parent_work", "child_work")
        c = prof.ct(mine, PROG)
        check(c >= 0.2 and not prof.funcs(other, PROG), "%s: %s %.3f s, and %s %r" % (
            f, mine, c, other, prof.funcs(other, PROG)))
        seen["child" if kid else "parent"] = prof.extras["pid"]
    check(len(seen) == 2, "files: %r" % seen)


def case_stress(r, clock):
    """Frame races at 10 kHz: five threads make and drop code objects as fast as they
    can. The host runs as unprofiled, exec'd functions are sampled, and every one
    carries its own first line: no frame is ever named after another code object.
    Returns how much was sampled (bench/python/accuracy.py)."""
    out = os.path.join(r.tmp, "stress.pstat")
    secs = os.environ.get("PYSAMPLE_STRESS_SECONDS", "3")
    r.run(["stress", secs], clock, out, base=["stress", "0.1"], COPROF_HZ="10000")
    prof = Profile(out)
    churned = [k for k in prof.stats if k[0] == "<churn>"]
    check(churned, "no exec'd function sampled")
    for k in churned:
        check(k[1:] == (1, "<module>") or (k[2].startswith("f") and k[1] == int(k[2][1:]) + 1),
              "mislabelled: %r" % (k,))
    real = r.code_keys()
    for k in prof.stats:
        check(k[0] != PROG or k[1:] in real, "%r names no code object of prog.py" % (k,))
    print("%d exec'd functions sampled, dropped %r" % (len(churned), prof.extras.get("dropped")))
    return {"sampled": sum(v[2] for v in prof.stats.values())}


def task_table(ex):
    """The asyncio tasks of a file's extras, by name: (index, task)."""
    out = {}
    for i, t in enumerate(ex["tasks"]):
        check(t["runtime"] == "asyncio", "task %r: runtime %r" % (t["name"], t["runtime"]))
        out.setdefault(t["name"], []).append((i, t))
    return out


def holders(ex, name):
    """The names of the tasks whose stats hold prog.py's `name`."""
    return sorted(t["name"] for t in ex["tasks"] if funcs(t["stats"], name, PROG))


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


def check_tasks(r, clock, out, prof, suffix="", fns=("big", "small")):
    """The checks of one loop's split_tasks (prog.py) in file `out` (`prof`): tasks
    three<suffix>, one<suffix> and sleeper<suffix>, named by Task.get_name(), each
    once; three and one each sampled in its own function, and neither in the other's;
    their stacks start at worker; under wall sleeper's waits are at fetch;waiter,
    [waiting] in the collapsed export; under cpu nothing waits. Returns the three
    tasks' (index, task) and the figures: three's sampled share, the part of big and
    small sampled in their tasks (the rest went to the thread: the ticks before a
    task's first scan, held for it), and the wait sampled in sleeper and in its
    fetch."""
    ex = prof.extras
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
    check(holders(ex, big) == [names[0]] and holders(ex, small) == [names[1]],
          "%s in tasks %s, %s in %s" % (big, holders(ex, big), small, holders(ex, small)))
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
        c = subprocess.run([r.a.coprof, "export", out, "--format", "collapsed", "-o", "-"],
                           capture_output=True, text=True, timeout=60)
        check(c.returncode == 0, "coprof export: %s" % c.stderr)
        lines = [l for l in c.stdout.splitlines()
                 if " %s];waiter;fetch;" % names[2] in l
                 and l.rsplit(" ", 1)[0].endswith(";[waiting]")]
        check(lines, "no [task N %s];waiter;fetch;...;[waiting] line" % names[2])
    top_b, top_s = prof.ct(big, PROG), prof.ct(small, PROG)
    print("%s/%s outside their tasks: %.1f%%/%.1f%%; elsewhere %s: %s, %s: %s; dropped %r"
          % (big, small, 100 * (1 - b / top_b), 100 * (1 - s / top_s), big,
             elsewhere(ex, big, i3), small, elsewhere(ex, small, i1), ex.get("dropped")))
    fig = {"share": b / (b + s), "in task " + big: b / top_b, "in task " + small: s / top_s,
           "waited": waited, "fetch ct": task_ct(sleeper, "fetch")}
    return ((i3, three), (i1, one), (isl, sleeper)), fig


def run_tasks(r, clock, what, seconds):
    """Runs prog.py's `what` (tasks, tthreads) for `seconds` of CPU: its file, a
    Profile, and the split the tasks measured (prog.py's side file)."""
    out = os.path.join(r.tmp, what + ".pstat")
    side = os.path.join(r.tmp, "measured.json")
    r.run([what, str(seconds), side], clock, out, base=[what, "0.05"])
    with open(side) as f:
        measured = json.load(f)
    return out, Profile(out), measured


def case_tasks(r, clock, seconds=0.3):
    """Per task: each sample is charged to the asyncio task running, named by
    Task.get_name() (create_task(name=) and set_name): of a 3:1 split between two
    tasks, each task's function in that task only; each task's stacks start at its
    root coroutine; under wall, a task that awaits fetch(), which waits for the split
    to end, has that wait at fetch's stack, ending in [waiting] in the
    collapsed export, and under cpu nothing is waiting (check_tasks). Returns
    check_tasks' figures with the shares the tasks measured and the wall time the
    sleeper's await took."""
    out, prof, measured = run_tasks(r, clock, "tasks", seconds)
    _, fig = check_tasks(r, clock, out, prof)
    fig.update(measured=measured[clock], slept=measured["slept"])
    return fig


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


def case_tthreads(r, clock, seconds=0.3):
    """Two event loops at once in two threads (threading.Thread(target=asyncio.run)),
    the main thread blocked in join(): each loop's tasks are told apart as the main
    thread's are (check_tasks), listed under their own loop's thread, not the main
    one. Returns each loop's figures (as case_tasks), suffixed _a and _b."""
    out, prof, measured = run_tasks(r, clock, "tthreads", seconds)
    tids, fig = [], {}
    for suffix, fns in (("", ("big", "small")), ("_b", ("big_b", "small_b"))):
        found, f = check_tasks(r, clock, out, prof, suffix, fns)
        tids.append(loop_thread(prof.extras, found))
        f.update(measured=measured[suffix][clock], slept=measured[suffix]["slept"])
        f = {k.replace("big_b", "big").replace("small_b", "small"): v for k, v in f.items()}
        fig.update({"%s%s" % (k, suffix or "_a"): v for k, v in f.items()})
    check(tids[0] != tids[1], "both loops' tasks on thread %d" % tids[0])
    return fig


def case_atoggle(r, clock):
    """A toggled window over asyncio tasks: only the window's task is in the file; its
    phase_b was sampled for at least 0.2 s of the 0.3 s of CPU it spun, in task_b and
    no other task. Returns the part of it in task_b (bench/python/accuracy.py)."""
    prof = window_of_b(r, clock, "atoggle")
    tasks = task_table(prof.extras)
    check(len(tasks.get("task_b", [])) == 1, "task_b: tasks %r" % sorted(tasks))
    total, b = prof.ct("phase_b", PROG), task_ct(tasks["task_b"][0][1], "phase_b")
    check(total >= 0.2 and b > 0, "phase_b has %.3f s of its 0.3 s, %.3f s in task_b" % (
        total, b))
    check(holders(prof.extras, "phase_b") == ["task_b"], "phase_b in tasks %s" % holders(
        prof.extras, "phase_b"))
    check(not prof.funcs("phase_a", PROG) and not prof.funcs("phase_c", PROG),
          "phases outside the window were sampled")
    return {"phase_b in task_b": b}


def case_afork(r, clock):
    """os.fork after a task ran: the child's file holds its own task only, the
    parent's file the parent's tasks; each process's work was sampled for at least
    0.15 s of the 0.3 s of CPU it spun, and in its task only. Returns the part in each
    task (bench/python/accuracy.py)."""
    out = os.path.join(r.tmp, "afork.%p.pstat")
    r.run(["afork"], clock, out, short=True)
    files = glob.glob(os.path.join(r.tmp, "afork.*.pstat"))
    check(len(files) == 2, "parent and child files expected: %r" % files)
    fig = {}
    for f in files:
        prof = Profile(f)
        tasks = task_table(prof.extras)
        if "child_task" in tasks:
            check(not {"before_fork", "parent_task"} & set(tasks),
                  "child file tasks %r" % sorted(tasks))
            task, work = "child_task", "child_work"
        else:
            check({"before_fork", "parent_task"} <= set(tasks) and "child_task" not in tasks,
                  "parent file tasks %r" % sorted(tasks))
            task, work = "parent_task", "parent_work"
        mine = task_ct(tasks[task][0][1], work)
        total = sum(task_ct(t, work) for t in prof.extras["tasks"] if t["name"] != "before_fork")
        check(mine > 0 and prof.ct(work, PROG) >= 0.15, "%s %.3f s, %.3f s in %s" % (
            work, prof.ct(work, PROG), mine, task))
        check(total == mine, "%s in tasks %s" % (work, holders(prof.extras, work)))
        fig["%s in %s" % (work, task)] = mine
    check(len(fig) == 2, "files: %r" % files)
    return fig


def churned(r, clock, what):
    """Runs prog.py's `what` (achurn, tchurn) for 2 s at 10 kHz: every task's samples
    are its own coroutine's (task t<j> holds f<j> only), so no context is ever given to
    another task's coroutine; some tasks are sampled in their function. Returns the
    file's extras and how many tasks were."""
    out = os.path.join(r.tmp, what + ".pstat")
    r.run([what, "2"], clock, out, base=[what, "0.1"], COPROF_HZ="10000")
    ex = Profile(out).extras
    named = 0
    for t in ex["tasks"]:
        if not t["name"].startswith("t"):
            continue
        fns = {k[2] for k in t["stats"] if k[0] == "<achurn>"}
        check(fns <= {"f" + t["name"][1:]}, "task %s holds %r" % (t["name"], fns))
        named += bool(fns)
    check(named, "no task sampled with its function")
    print("%d tasks, %d sampled in their own function" % (len(ex["tasks"]), named))
    return ex, {"named": named}


def case_achurn(r, clock):
    """Tasks made and finished by the thousand at 10 kHz, coroutines reusing the
    addresses of dead ones (churned)."""
    return churned(r, clock, "achurn")[1]


def case_tchurn(r, clock):
    """achurn in two loops in two threads at once: each thread's ticks read the task
    table while a scan on another thread frees and refills its slots; every task is
    listed under one of the two loop threads."""
    ex, fig = churned(r, clock, "tchurn")
    tids = {t["thread"] for t in ex["tasks"] if t["name"].startswith("t")}
    check(len(tids) == 2 and ex["pid"] not in tids, "the tasks are on threads %r (main %d)" %
          (sorted(tids), ex["pid"]))
    return fig


def idle_waits(r, clock, **kw):
    """Runs prog.py's idle with 1,000 tasks, all of them in the table and no wait
    dropped on the way (a scan hands over hundreds at once); under wall each idle task
    is charged a wait, at the Event (its stacks end in wait, the coroutine that awaits
    it, at the root), under cpu nothing waits. Returns the figures: under wall each
    idle task's wait in seconds (the shortest, the longest and the mean), with the wait
    the program measured (until the set, and until the last task resumed)."""
    out = os.path.join(r.tmp, "idle.pstat")
    side = os.path.join(r.tmp, "idle.json")
    r.run(["idle", "1000", side], clock, out, short=True, **kw)
    with open(side) as f:
        waited = json.load(f)
    ex = Profile(out).extras
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
        return None
    secs = sorted(t / 997.0 for t in ticks.values())  # ticks at COPROF_HZ
    check(secs[0] > 0, "%d idle tasks were charged no wait" % secs.count(0.0))
    print("1,000 tasks waited %.3f-%.3f s each of %.3f s" % (secs[0], secs[-1], waited["waited"]))
    return {"low": secs[0], "high": secs[-1], "mean": sum(secs) / len(secs),
            "waited": waited["waited"], "resumed": waited["resumed"]}


def case_idle(r, clock):
    """1,000 tasks wait on an Event while another computes a second of its CPU
    (idle_waits); how close each wait is to what the program measured is
    bench/python/accuracy.py's."""
    return idle_waits(r, clock)


def case_idlestarved(r, clock):
    """idle with the scans of a starved folding thread (COPROF_TEST_FOLD_EVERY=13: one
    fold in 13 asks for one, about every 130 ms, as at load 13 on 2 cores), checked as
    idle_waits checks idle. bench/python/accuracy.py holds each task to about the same
    wait: none loses what its slot measured but had not handed over when the program
    ended (before, each slot kept up to ten scans of it, at its own turn: waits of
    0.0-0.9 s for a wait of 1 s). Under wall only (meson.build): cpu has no waits, and
    its listing of the tasks is idle_cpu's."""
    return idle_waits(r, clock, COPROF_TEST_FOLD_EVERY=13)


def stalls_run(r, clock, name):
    """The profile of tests/python/progs/NAME.py in sample mode, a stall threshold of 100
    ms, after it printed its fixed line ("NAME: done") and coprof nothing."""
    out = os.path.join(r.tmp, name + ".pstat")
    prog = os.path.join(HERE, "..", "python", "progs", name + ".py")
    p = subprocess.run([r.a.python, prog], env=r.env(clock, COPROF_OUT=out, COPROF_STALL_MS=100),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and p.stdout == name + ": done\n" and "coprof:" not in p.stderr,
          "exit %d %r: %s" % (p.returncode, p.stdout, report_of(p.stderr)))
    return Profile(out)


def case_stalls(r, clock):
    """Stalls in sample mode (doc/design.md rule 11; tests/python/progs/stalls.py, a
    threshold of 100 ms), on every Python: Handle._run says when each loop step begins
    and ends (local events on its code on 3.12+, a C stand-in on its class before):
    blocker's two 0.2 s steps and the callback on_tick's
    0.15 s, each at its longest point by the ticks (decode, under blocker or on_tick),
    blocker's under its id in the task table, with the tasks behind it counted from
    the loop's queues at its end (some of the other four: the quick tasks' timers fell
    due during it); under cpu nothing else (under wall a loaded machine may stretch another
    step past 100 ms: it may not hold decode)."""
    ex = stalls_run(r, clock, "stalls").extras
    check(ex["stall_threshold"] == 0.1, "threshold %r" % ex["stall_threshold"])
    blocker = [t["id"] for t in ex["tasks"] if t["name"] == "blocker"]
    mine = [s for s in ex["stalls"] if s[2] in ("blocker", "on_tick")]
    got = sorted((s[2], s[1] if s[1] == 0 else "blocker's" if [s[1]] == blocker else s[1])
                 for s in mine)
    check(got == [("blocker", "blocker's"), ("blocker", "blocker's"), ("on_tick", 0)],
          "stalls %r (blocker's id %r)" % ([(s[1], s[2], s[3]) for s in ex["stalls"]], blocker))
    others = [s for s in ex["stalls"] if s not in mine]
    check(not others if clock == "cpu" else
          not any("decode" in [k[2] for k in s[4]] for s in others), "other stalls %r" % others)
    for tid, task_id, name, seconds, frames, behind in mine:
        outer = [k[2] for k in reversed(frames)]
        check(seconds >= (0.15 if task_id == 0 else 0.2) and 1 <= behind <= 4,
              "%s: %.3f s, behind %d" % (name, seconds, behind))
        at = outer.index("decode") if "decode" in outer else -1
        check(at > 0 and outer[at - 1] == ("on_tick" if task_id == 0 else "blocker"),
              "%s's stack, outermost first: %r" % (name, outer))
    return None


def case_stall_timers(r, clock):
    """The tasks behind a stall counted from timers the loop has moved to its ready queue
    (tests/python/progs/stall_timers.py): on_stall, the process's first stall, has the
    three sleepers' timer handles behind it there and none scheduled, so 3. A count
    that knew a timer handle only from the scheduled ones found none of them (0): the
    loaded runs' stalls_wall, once in some 40 runs."""
    stalls = stalls_run(r, clock, "stall_timers").extras["stalls"]
    mine = [(s[1], s[5]) for s in stalls if s[2] == "on_stall"]
    check(mine == [(0, 3)], "on_stall's stalls (task, behind) %r of %r"
          % (mine, [(s[2], s[5]) for s in stalls]))
    return None


def case_handles(r, clock):
    """Watching Handle._run for the loop's steps changes nothing the program prints: a
    callback's stack, the traceback of a callback that raises and of a task's, the
    method as the class shows it (the same as unprofiled, r.run)."""
    out = os.path.join(r.tmp, "handles.pstat")
    p = r.run(["handles"], clock, out)
    check("ValueError: callback failed" in p.stdout and "handles done" in p.stdout, p.stdout)


def case_gap(r, clock):
    """The first-scan gap: task gapped's first 0.12 s is one C call that holds the GIL,
    so the scan its first tick asked for runs only after it; those ticks are held and
    charged to gapped once that scan finds it (without that, to the thread's own
    context: all of csum). csum is sampled, in gapped (one task) and in no other task.
    Returns csum's sampled time and the part of it in gapped (bench/python/accuracy.py:
    all of it)."""
    out = os.path.join(r.tmp, "gap.pstat")
    r.run(["gap"], clock, out, short=True)
    prof = Profile(out)
    ex = prof.extras
    # By its root, not its name: a scan that ran between Task() and create_task's
    # set_name lists it as Task-2 until the next rename, 200 ms on.
    found = [(i, t) for i, t in enumerate(ex["tasks"]) if task_ct(t, "gapped") > 0]
    check(len(found) == 1, "tasks holding gapped: %r" % [t["name"] for _, t in found])
    i, task = found[0]
    total, mine = prof.ct("csum", PROG), task_ct(task, "csum")
    check(mine > 0, "csum %.3f s, none in gapped; elsewhere %s" % (
        total, elsewhere(ex, "csum", i)))
    check(holders(ex, "csum") == [task["name"]], "csum in tasks %s" % holders(ex, "csum"))
    print("csum %.3f s of %.3f s in gapped" % (mine, total))
    return {"csum": total, "in gapped": mine}


def case_reuse(r, clock):
    """A held tick goes to no other coroutine at its address: reused_a runs and
    finishes before any scan (COPROF_TEST_SCAN_DELAY_MS holds them), reused_b's
    coroutine is made at its address; the scan finds reused_b there, and takes
    reused_b's held ticks (some of them in its task), not reused_a's (another code,
    sampled: none in reused_b's task): those stay with the thread. Returns reused_b's
    sampled time and the part in its task (bench/python/accuracy.py: all of it)."""
    out = os.path.join(r.tmp, "reuse.pstat")
    side = os.path.join(r.tmp, "reuse.json")
    # A loaded machine may run reused_a for longer than the delay (its 0.05 s of CPU),
    # or hold the main task's first tick or the folding thread long enough that the
    # delayed scan falls in reused_a, or run it after reused_b's end: a scan then lists
    # reused_a, or none reused_b, and the run tests nothing. It is run again with the
    # delay doubled (a loaded tier run failed all three at 0.6 s).
    for attempt in range(3):
        delay = 0.6 * 2 ** attempt
        r.run(["reuse", str(delay), side], clock, out, base=["reuse", "0", side],
              COPROF_TEST_SCAN_DELAY_MS=int(delay * 1000))
        with open(side) as f:
            check(json.load(f)["reused"], "reused_b's coroutine not made at reused_a's address")
        prof = Profile(out)
        tasks = task_table(prof.extras)
        if "reused_a" not in tasks and "reused_b" in tasks:
            break
    check("reused_a" not in tasks, "a scan listed reused_a in 3 runs: the knob did not hold it")
    check(len(tasks.get("reused_b", [])) == 1, "task reused_b: tasks %r" % sorted(tasks))
    i, task = tasks["reused_b"][0]
    a, b = prof.ct("reused_a", PROG), task_ct(task, "reused_b")
    check(a >= 0.02, "reused_a sampled %.3f s" % a)
    check(task_ct(task, "reused_a") == 0, "reused_b holds reused_a's %.3f s of %.3f s" % (
        task_ct(task, "reused_a"), a))
    check(b > 0, "reused_b %.3f s, none in its task; elsewhere %s" % (
        prof.ct("reused_b", PROG), elsewhere(prof.extras, "reused_b", i)))
    print("reused_a %.3f s with the thread, reused_b %.3f s in its task" % (a, b))
    return {"reused_b": prof.ct("reused_b", PROG), "in its task": b}


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
            fig = fn(Runner(args, tmp), clock)
        except AssertionError as e:
            print("%s: FAILED: %s" % (args.case, e))
            return 1
    print("%s: passed in %.1f s" % (args.case, time.monotonic() - t))
    if fig:  # for the log: what bench/python/accuracy.py holds to its tolerances
        print("figures: " + ", ".join("%s %.4g" % kv for kv in sorted(fig.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
