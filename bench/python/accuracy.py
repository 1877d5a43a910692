#!/usr/bin/env python3
"""accuracy.py: the Python tests' accuracy checks, as a benchmark. Each check runs a
case of tests/python/run.py or tests/pysample/run.py (the same program, at the length
the tolerance was set for) --runs times; the case asserts what is exact, as in the
test, and returns its figures; this script holds them to the tolerance the test used
to, and prints per figure the median, min and max over the runs, the tolerance and
how many runs fell outside it (and how many runs failed an exact check, with why).

usage: accuracy.py [--python EXE] [--shim LIB] [--coprof BIN] [--hook HOOK]
                   [--runs N] [--only WORD]... [--list]

--python defaults to the build's 3.12 (the interpreter of its python-3.12* tests, from
`meson introspect --tests` of --build, default build/), --shim to BUILD/preload's
library, --coprof to BUILD/viewer/coprof. The greenlet checks run gevent's venv of
tests/python/run.py (BUILD/venv-gevent-X.Y, or $COPROF_VENV_DIR's); yappi's check
runs only on an interpreter that imports yappi. --only keeps the checks whose name
holds WORD. Runs one case at a time: figures taken under a load of their own would
measure it.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def driver(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PY = driver("tests/python/run.py", "python_run")
PS = driver("tests/pysample/run.py", "pysample_run")
INF = math.inf


# --- the figures of each check: (label, value, lowest, highest allowed) --------------

def near(label, value, want, rel):
    """The test's near(): value within rel of want, as a ratio."""
    return (label + " / measured", value / want, 1 - rel, 1 + rel)


def tasks_rows(clock):
    def rows(f):
        rel = 0.10 if clock == "cpu" else 0.15
        for fn in ("spin_a", "spin_b", "spin_c"):
            yield near("%s ct" % fn, f["ct " + fn], f["measured " + fn], rel)
        if clock == "wall":
            return
        for name, fn in (("A", "spin_a"), ("B", "spin_b"), ("C", "spin_c")):
            yield near("task %s ttot" % name, f["ttot " + name], f["measured " + fn], 0.25)
        # rule 10: the own times, against the main module's CPU (the program's clock)
        # and the thread table's; rule 9: main is not charged its tasks' CPU
        yield ("own times / main module's CPU", f["tt sum"] / f["module cpu"], 0.93, INF)
        yield ("own times / thread table's CPU", f["tt sum"] / f["threads cpu"], 0, 1.01)
        yield ("main ct / spin_a's CPU", f["main ct"] / f["measured spin_a"], 0, 0.2)
    return rows


def awaits_rows(clock):
    def rows(f):
        if clock == "wall":
            yield ("waiter tt, s", f["waiter tt"], 0.27, 0.6)
            yield ("asyncio.sleep tt, s", f["sleep tt"], 0.27, 0.8)
            yield ("sleeper ct, s", f["sleeper ct"], 0.27, 0.6)
        else:
            yield ("waiter tt, s", f["waiter tt"], 0, 0.05)
            yield ("sleeper ct, s", f["sleeper ct"], 0, 0.05)
    return rows


def ready_rows(f):
    # issue 37: each delayed task's ready time within 2 ms of what it measured itself
    for k in sorted(f):
        yield ("%s (ready - measured), ms" % k.split()[-1], f[k] * 1e3, -2, 2)


def threads_rows(f):
    for fn in ("loop_one", "loop_two"):
        yield near("%s ct" % fn, f["ct " + fn], f["measured " + fn], 0.10)


def busy_rows(f):
    """The least of each run's windows, per loop and clock: burn's time in the window
    against what the process used (cpu) or the time that passed (wall) between its
    two signals."""
    for where in ("module", "func", "thread"):
        for clock in ("cpu", "wall"):
            ratios = [f[k] / f[k.replace("burn", "span", 1)] for k in f
                      if k.startswith("burn %s %s " % (where, clock))]
            yield ("%s, %s: burn / span (least window)" % (where, clock), min(ratios), 0.5, INF)


def worker_rows(clock):
    def rows(f):
        if clock == "cpu":
            yield ("decode_payload ct / handle ct", f["decode ct"] / f["handle ct"], 0.7, INF)
            yield ("decode_payload ct / save ct", f["decode ct"] / f["save ct"], 5, INF)
        else:
            yield ("save ct / decode_payload ct", f["save ct"] / f["decode ct"], 2, INF)
    return rows


def windows(f, prefix):
    return [v for k, v in f.items() if k.startswith(prefix)]


def resp_toggled_rows(f):
    yield ("execute calls (least window)", min(windows(f, "execute nc ")), 100, INF)
    yield ("loop thread's ttot / window (least)",
           min(f["ttot %d" % n] / f["window %d" % n] for n in (1, 2, 3)), 0.5, INF)


def resp_cmd_rows(f):
    yield ("windows written of 50", f["written"], 25, INF)


def yappi_rows(f):
    for fn in ("spin_a", "spin_b", "spin_c"):
        yield near("%s: coprof's ct / CPU, yappi's" % fn, f["coprof " + fn], f["yappi " + fn],
                   0.25)


def greenlet_rows(f):
    for k in sorted(f):
        if k.startswith(("ttot ", "ct ")):
            who = k.split(" ", 1)[1]
            yield near("%s %s" % (who, k.split()[0]), f[k], f["measured " + who], 0.10)


def greenlet_threads_rows(f):
    yield near("the four greenlets' ttot", f["ttot"], f["measured"], 0.10)


def greenlet_resp_rows(f):
    if any(k.startswith("execute nc ") for k in f):
        yield ("execute calls (least window)", min(windows(f, "execute nc ")), 100, INF)
        yield ("greenlets that ran execute (least)", min(windows(f, "greenlets ")), 10, INF)
    else:
        yield ("greenlets sampled (least window)", min(windows(f, "greenlets ")), 10, INF)


def split_rows(clock):
    def rows(f):
        yield ("heavy's share - measured", f["share"] - f["measured"], -0.03, 0.03)
        if clock == "cpu":
            yield ("measured share - 2/3", f["measured"] - 2 / 3, -0.03, 0.03)
    return rows


def tasks_split_rows(clock, loops):
    def rows(f):
        for sfx in loops:
            yield ("three%s's share - measured" % sfx, f["share" + sfx] - f["measured" + sfx],
                   -0.05, 0.05)
            if clock == "cpu":
                yield ("measured%s - 3/4" % sfx, f["measured" + sfx] - 0.75, -0.03, 0.03)
            for fn in ("big", "small"):
                yield ("%s%s: part in its task" % (fn, sfx), f["in task %s%s" % (fn, sfx)],
                       0.97, INF)
            if clock == "wall":
                yield ("sleeper%s's wait, s" % sfx, f["waited" + sfx], 0.35, INF)
                yield ("sleeper%s's wait - its await, s" % sfx,
                       f["waited" + sfx] - f["slept" + sfx], -INF, 0.5)
                yield ("fetch ct in sleeper%s, s" % sfx, f["fetch ct" + sfx], 0.35, INF)
    return rows


def stress_rows(f):
    yield ("sampled, s", f["sampled"], 0.5, INF)


def atoggle_rows(f):
    yield ("phase_b in task_b, s", f["phase_b in task_b"], 0.2, INF)


def afork_rows(f):
    for k in sorted(f):
        yield (k + ", s", f[k], 0.15, INF)


def churn_rows(f):
    yield ("tasks sampled in their function", f["named"], 10, INF)


def idle_rows(f):
    # a wait counts from the call that first saw the task (up to 0.2 s late); none is
    # charged more than it waited, give or take a call (until the loop resumed it)
    yield ("shortest wait - measured, s", f["low"] - f["waited"], -0.2, INF)
    yield ("longest wait - until resumed, s", f["high"] - f["resumed"], -INF, 0.1)
    yield ("mean wait / measured", f["mean"] / f["waited"], 0.92, INF)
    yield ("mean wait / until resumed", f["mean"] / f["resumed"], -INF, 1.08)


def idlestarved_rows(f):
    yield ("longest - shortest wait, s", f["high"] - f["low"], -INF, 0.3)
    yield ("shortest wait - measured, s", f["low"] - f["waited"], -0.6, INF)
    yield ("longest wait - until resumed, s", f["high"] - f["resumed"], -INF, 0.15)


def gap_rows(f):
    yield ("csum sampled, s", f["csum"], 0.05, INF)
    yield ("csum: part in gapped", f["in gapped"] / f["csum"], 0.95, INF)


def reuse_rows(f):
    yield ("reused_b: part in its task", f["in its task"] / f["reused_b"], 0.95, INF)


def checks(a):
    """[(name, run(tmp) -> figures, rows(figures))]: every check, in the tests' order."""
    py = PY.Runner(argparse.Namespace(python=a.python, shim=a.shim, asan="", hook=a.hook), None)
    ps = PS.Runner(argparse.Namespace(python=a.python, shim=a.shim, asan="", coprof=a.coprof),
                   None)

    def on(runner, fn, *args, **kw):
        def run(tmp):
            runner.tmp = tmp
            return fn(runner, *args, **kw)
        return run
    out = [
        ("python tasks_cpu", on(py, PY.case_tasks_cpu, "cpu", unit=60000), tasks_rows("cpu")),
        ("python tasks_wall", on(py, PY.case_tasks_cpu, "wall", unit=60000),
         tasks_rows("wall")),
        ("python awaits_cpu", on(py, PY.case_awaits_cpu), awaits_rows("cpu")),
        ("python awaits_wall", on(py, PY.case_awaits_wall), awaits_rows("wall")),
        ("python threads", on(py, PY.case_threads), threads_rows),
        ("python ready_cpu", on(py, PY.case_ready_cpu), ready_rows),
        ("python ready_wall", on(py, PY.case_ready_wall), ready_rows),
        ("python busy_toggle", on(py, PY.case_busy_toggle, window=0.5, gap=0.2), busy_rows),
        ("python worker_cpu", on(py, PY.case_worker, "cpu", jobs=120), worker_rows("cpu")),
        ("python worker_wall", on(py, PY.case_worker, "wall", jobs=120), worker_rows("wall")),
        ("python resp_toggled", on(py, PY.case_resp_toggled, window=0.5), resp_toggled_rows),
        ("python resp_toggle_cmd", on(py, PY.case_resp_toggle_cmd), resp_cmd_rows),
    ]
    if subprocess.run([a.python, "-c", "import yappi"], capture_output=True).returncode == 0:
        out.append(("python yappi", on(py, PY.case_yappi, unit=60000), yappi_rows))
    for mode in ("trace", "sample"):
        sfx = "" if mode == "trace" else "_sample"
        out += [
            ("python greenlet_gevent" + sfx, on(py, PY.case_greenlet_gevent, "cpu", mode,
                                                scale=1), greenlet_rows),
            ("python greenlet_eventlet" + sfx, on(py, PY.case_greenlet_eventlet, mode,
                                                  scale=1), greenlet_rows),
            ("python greenlet_plain" + sfx, on(py, PY.case_greenlet_plain, mode, scale=1),
             greenlet_rows),
        ]
    out += [
        ("python greenlet_asyncio", on(py, PY.case_greenlet_asyncio, scale=1), greenlet_rows),
        ("python greenlet_threads", on(py, PY.case_greenlet_threads, scale=1),
         greenlet_threads_rows),
        ("python greenlet_resp_toggled", on(py, PY.case_greenlet_resp_toggled, window=0.5),
         greenlet_resp_rows),
        ("python greenlet_resp_toggled_sample", on(py, PY.case_greenlet_resp_toggled_sample, window=0.5),
         greenlet_resp_rows),
    ]
    for clock in ("cpu", "wall"):
        out += [
            ("pysample split_" + clock, on(ps, PS.case_split, clock, seconds=1.5),
             split_rows(clock)),
            ("pysample native_" + clock, on(ps, PS.case_native, clock, seconds=1.5),
             split_rows(clock)),
            ("pysample stress_" + clock, on(ps, PS.case_stress, clock), stress_rows),
            ("pysample tasks_" + clock, on(ps, PS.case_tasks, clock, seconds=1.5),
             tasks_split_rows(clock, [""])),
            ("pysample tthreads_" + clock, on(ps, PS.case_tthreads, clock, seconds=1.5),
             tasks_split_rows(clock, ["_a", "_b"])),
            ("pysample atoggle_" + clock, on(ps, PS.case_atoggle, clock), atoggle_rows),
            ("pysample afork_" + clock, on(ps, PS.case_afork, clock), afork_rows),
            ("pysample achurn_" + clock, on(ps, PS.case_achurn, clock), churn_rows),
            ("pysample tchurn_" + clock, on(ps, PS.case_tchurn, clock), churn_rows),
            ("pysample gap_" + clock, on(ps, PS.case_gap, clock), gap_rows),
            ("pysample reuse_" + clock, on(ps, PS.case_reuse, clock), reuse_rows),
        ]
    out += [("pysample idle_wall", on(ps, PS.case_idle, "wall"), idle_rows),
            ("pysample idlestarved_wall", on(ps, PS.case_idlestarved, "wall"),
             idlestarved_rows)]
    return out


def build_python(build):
    """The interpreter of the build's python-3.12* tests."""
    p = subprocess.run(["meson", "introspect", "--tests", build], capture_output=True,
                       text=True)
    if p.returncode == 0:
        for t in json.loads(p.stdout):
            if t["name"].startswith("python-3.12") and "--python" in t["cmd"]:
                return t["cmd"][t["cmd"].index("--python") + 1]
    sys.exit("no Python 3.12 in %s's tests (meson introspect: %s): give --python"
             % (build, p.stderr.strip()[-300:]))


def bound(lo, hi):
    if lo == -INF:
        return "<= %g" % hi
    if hi == INF:
        return ">= %g" % lo
    return "%g .. %g" % (lo, hi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python")
    ap.add_argument("--shim")
    ap.add_argument("--coprof")
    ap.add_argument("--hook", choices=("auto", "profile", "monitoring", "evalframe"))
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    a.python = a.python or build_python(a.build)
    a.shim = os.path.abspath(a.shim or os.path.join(a.build, "preload", "libcoprof-preload.so"))
    a.coprof = os.path.abspath(a.coprof or os.path.join(a.build, "viewer", "coprof"))
    os.environ["COPROF_BIN"] = a.coprof  # tests/python/run.py's coprof toggle
    todo = [c for c in checks(a) if not a.only or any(w in c[0] for w in a.only)]
    if a.list:
        print("\n".join(c[0] for c in todo))
        return 0
    print("# %s, %s, %d runs each, load %s at the start" % (
        a.python, a.shim, a.runs, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%-66s %9s %9s %9s  %-14s %s" % ("check: figure", "median", "min", "max",
                                           "tolerance", "outside"))
    for name, run, rows in todo:
        got, failed, t0 = {}, [], time.monotonic()
        for i in range(a.runs):
            with tempfile.TemporaryDirectory(prefix="accuracy-") as tmp:
                try:
                    with contextlib.redirect_stdout(io.StringIO()):  # the cases' notes
                        fig = run(tmp)
                except Exception as e:  # an exact check, or a run that did not finish
                    failed.append("%s: %s" % (type(e).__name__, str(e)[:300]))
                    continue
            # a row's bounds may change from run to run: keep each run's verdict
            for label, value, lo, hi in rows(fig):
                got.setdefault(label, []).append((value, lo <= value <= hi, bound(lo, hi)))
        for label, vals in got.items():
            v = [x[0] for x in vals]
            print("%-66s %9.4g %9.4g %9.4g  %-14s %d of %d" % (
                "%s: %s" % (name, label), statistics.median(v), min(v), max(v), vals[0][2],
                sum(not x[1] for x in vals), len(vals)))
        for why in failed:
            print("%-66s a run failed: %s" % (name, why))
        print("  (%s: %.0f s)" % (name, time.monotonic() - t0), file=sys.stderr, flush=True)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
