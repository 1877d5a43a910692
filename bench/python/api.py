#!/usr/bin/env python3
"""api.py VENV [--runs N] [--source DIR]: the Python API (`import coprof`) measured
side by side in one run, in a venv where pip installed coprof and yappi 1.7 (tests/pip
makes one: build/venv-pip-3.12.1):

- overhead on workloads.py's calls and asyncio workloads: unprofiled, coprof's API
  under cpu and wall, the same engine preloaded (`coprof record`), cProfile, yappi cpu
  and wall; each the median of N runs, as a multiple of the unprofiled time, and
  coprof's overhead (time - unprofiled) as a share of yappi's and cProfile's;
- ncall, ttot and tsub against yappi's under wall on yappi's asyncio recipe (sleeps: a
  deterministic workload);
- `import coprof` in a fresh interpreter (median of N), against `import yappi`, and
  coprof's first start() (it loads the shim: the workloads start once before timing);
- installing the wheel into the venv (pip install --force-reinstall --no-deps), and
  with --source, `pip install DIR` into a fresh venv (the whole build).
Prints Markdown for bench/RESULTS.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads.py")

# yappi's asyncio recipe, under yappi and under coprof (tests/pip)
RECIPE = [os.path.join(HERE, "..", "..", "tests", "pip", "recipe_times.py"), None,
          os.path.join(HERE, "..", "..", "tests", "pip", "recipes", "asyncio_wall.py"),
          "foo", "bar", "baz", "sleep"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, **kw).stdout


def timed(py, coprof_cmd, profilers, workload, runs, tmp):
    """The median time of each profiler, the profilers interleaved run by run: a load
    that comes and goes (the machine is shared) weighs on all of them alike."""
    out = {p: [] for p in profilers}
    for _ in range(runs):
        for profiler in profilers:
            if profiler.startswith("preload-"):
                cmd = [coprof_cmd, "record", "-c", profiler[8:], "-o",
                       os.path.join(tmp, "p.pstat"), "--", py, WORKLOADS, "none", workload]
            else:
                cmd = [py, WORKLOADS, profiler, workload]
            out[profiler].append(float(run(cmd).split()[-1]))
    return {p: statistics.median(v) for p, v in out.items()}


FIRST_START = ("import time, coprof; t = time.perf_counter(); coprof.start(); "
               "print(time.perf_counter() - t); coprof.stop()")


def import_ms(py, mod, runs):
    code = "import time; t = time.perf_counter(); import %s; print(time.perf_counter() - t)" % mod
    return statistics.median(float(run([py, "-c", code])) for _ in range(runs)) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("venv")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--source", help="also time `pip install SOURCE` into a fresh venv")
    ap.add_argument("--overhead-only", action="store_true")
    ap.add_argument("--no-overhead", action="store_true")
    a = ap.parse_args()
    py = os.path.join(a.venv, "bin", "python")
    coprof_cmd = os.path.join(a.venv, "bin", "coprof")
    tmp = tempfile.mkdtemp(prefix="coprof-api-bench-")
    version = run([py, "-c", "import platform; print(platform.python_version())"]).strip()
    profilers = ["none", "coprof-cpu", "coprof-wall", "preload-cpu", "preload-wall",
                 "cprofile", "yappi-cpu", "yappi-wall"]
    print("Python %s, median of %d runs, times as multiples of the unprofiled run\n"
          % (version, a.runs))
    print("| workload | " + " | ".join(profilers[1:]) +
          " | API cpu overhead / yappi cpu's | API wall overhead / cProfile's |")
    print("|---" * (len(profilers) + 2) + "|")
    for w in () if a.no_overhead else ("calls", "asyncio"):
        t = timed(py, coprof_cmd, profilers, w, a.runs, tmp)
        base = t["none"]
        over = {p: t[p] - base for p in profilers}
        print("| %s | %s | %.3f | %.2f |" % (
            w, " | ".join("%.2fx" % (t[p] / base) for p in profilers[1:]),
            over["coprof-cpu"] / over["yappi-cpu"], over["coprof-wall"] / over["cprofile"]),
            flush=True)

    if a.overhead_only:
        return
    # Interleaved, the median of each number: the load moves both the same way.
    ys, cs = [], []
    for _ in range(a.runs):
        for who, into in (("yappi", ys), ("coprof", cs)):
            cmd = list(RECIPE)
            cmd[1] = who
            into.append(json.loads(run([py] + cmd).splitlines()[-1]))
    y = {f: [statistics.median(r[f][i] for r in ys) for i in range(3)] for f in ys[0]}
    c = {f: [statistics.median(r[f][i] for r in cs) for i in range(3)] for f in cs[0]}
    print("\nyappi's asyncio recipe under wall (sleeps a tenth as long), median of %d "
          "interleaved runs: yappi, coprof\n" % a.runs)
    print("| function | ncall | ttot | tsub | ttot diff | tsub diff |")
    print("|---|---|---|---|---|---|")
    for f in ("foo", "bar", "baz", "sleep"):
        if f in y and f in c:
            (yn, yt, ys), (cn, ct, cs) = y[f], c[f]
            print("| %s | %d, %d | %.4f, %.4f | %.6f, %.6f | %+.1f%% | %+.1f%% |" % (
                f, yn, cn, yt, ct, ys, cs, 100 * (ct - yt) / yt,
                100 * (cs - ys) / ys if ys else 0.0))

    print("\n| import, fresh interpreter (median of %d) | ms |" % (a.runs * 2))
    print("|---|---|")
    for mod in ("coprof", "yappi"):
        print("| import %s | %.1f |" % (mod, import_ms(py, mod, a.runs * 2)))
    first = statistics.median(float(run([py, "-c", FIRST_START])) for _ in range(a.runs * 2))
    print("| coprof's first start(): loads the shim, attaches the adapter | %.1f |"
          % (first * 1000))

    wheel_dir = os.path.join(os.path.dirname(a.venv), "pip-wheel-" + a.venv.split("venv-pip-")[-1])
    wheel = os.listdir(wheel_dir)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_CACHE_DIR=os.path.join(os.path.dirname(a.venv), "pip-cache"))
    t0 = time.monotonic()
    run([py, "-m", "pip", "-q", "install", "--force-reinstall", "--no-deps",
         os.path.join(wheel_dir, wheel[0])], env=env)
    print("\n| pip | s |\n|---|---|\n| install the wheel | %.1f |" % (time.monotonic() - t0))
    if a.source:
        v = os.path.join(tmp, "venv")
        base_py = run([py, "-c", "import sys; print(sys._base_executable)"]).strip()
        run([base_py, "-m", "venv", v])
        t0 = time.monotonic()
        run([os.path.join(v, "bin", "python"), "-m", "pip", "-q", "install", a.source], env=env)
        print("| pip install . into a fresh venv (build included) | %.1f |"
              % (time.monotonic() - t0))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
