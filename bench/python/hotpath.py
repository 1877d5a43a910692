#!/usr/bin/env python3
"""hotpath.py: the CPU time of small hook-heavy workloads, unprofiled, under the floor,
cProfile and one or more coprof builds, interleaved, median of --runs: the quick A/B
of a hot-path change (bench/RESULTS.md). CPU time (time.process_time), so that a
loaded machine's waits do not count.

--instructions counts instructions instead, each column once under valgrind's
callgrind, the workloads a tenth of their size (calls, coro, await, task): the same
figure at any load, to the instruction, where this VM's timings move by a third
between runs. A column's figure is the run's less an empty workload's in the same
column (start-up, and writing the profile at exit); printed with each profiler's
overhead over cProfile's, in instructions. Instructions are not time (cProfile's hash
lookups miss the cache more than coprof's records do): pyperf-suite.py has the time.

usage: hotpath.py --python VENV_PYTHON --shim LABEL=PATH[,HOOK] [--shim ...] [--runs 7]
                  [--instructions] WORKLOAD...
  HOOK: the column's COPROF_PY_HOOK (default: unset, auto's choice)
  VENV_PYTHON: a venv made by pyperf-suite.py (it has pyperformance and the floor)
  WORKLOAD: calls (1M calls and fib(25)), coro (fib(25) awaited recursively, x3),
            await (500,000 awaits of a coroutine), task (20,000 awaits of
            ensure_future), tree (pyperformance's async_tree 'none'; tree_io,
            tree_memo, tree_mixed: its io, memoization and cpu_io_mixed; tree_tg:
            'none' with TaskGroups, 3.11+), gens
            (pyperformance's generators), agens (pyperformance's async_generators)
"""
import argparse
import asyncio
import marshal
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_module(name):
    import importlib.util
    import pyperformance
    path = os.path.join(os.path.dirname(pyperformance.__file__), "data-files", "benchmarks",
                        "bm_" + name, "run_benchmark.py")
    spec = importlib.util.spec_from_file_location("bm_" + name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def workload(which, scale=1):
    """Runs one workload (calls, coro, await and task at 1/scale of their size); returns
    its CPU time in seconds."""
    fib_n = 25 if scale == 1 else 20
    if which == "empty":
        t0 = time.process_time()
    elif which.startswith("tree"):
        m = bench_module("async_tree")
        cls, groups = {"tree": ("NoneAsyncTree", False), "tree_io": ("IOAsyncTree", False),
                       "tree_memo": ("MemoizationAsyncTree", False),
                       "tree_mixed": ("CpuIoMixedAsyncTree", False),
                       "tree_tg": ("NoneAsyncTree", True)}[which]
        tree = getattr(m, cls)(use_task_groups=True) if groups else getattr(m, cls)()
        t0 = time.process_time()
        asyncio.run(tree.run())
    elif which == "gens":
        m = bench_module("generators")
        t0 = time.process_time()
        m.bench_generators(2)
    elif which == "agens":
        m = bench_module("async_generators")
        t0 = time.process_time()
        asyncio.run(m.bench_async_generators())
    elif which == "calls":
        def f(x):
            return x + 1

        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        t0 = time.process_time()
        s = 0
        for _ in range(1000000 // scale):
            s = f(s)
        fib(fib_n)
    elif which == "coro":
        async def fibonacci(n):
            if n <= 1:
                return n
            return await fibonacci(n - 1) + await fibonacci(n - 2)
        t0 = time.process_time()
        for _ in range(3):
            c = fibonacci(fib_n)
            try:
                while True:
                    c.send(None)
            except StopIteration:
                pass
    elif which == "handle_run":
        # a million asyncio Handle._run calls of a callback that does nothing: what
        # watching each loop step costs (sample-steps-cost.py), per call
        def cb():
            pass

        async def main():
            h = asyncio.events.Handle(cb, (), asyncio.get_running_loop())
            for _ in range(1000000 // scale):
                h._run()
        t0 = time.process_time()
        asyncio.run(main())
    elif which in ("await", "task"):
        async def add(a, b):
            return a + b

        async def main():
            s = 0
            if which == "await":
                for _ in range(500000 // scale):
                    s = await add(s, 1)
            else:
                for _ in range(20000 // scale):
                    s = await asyncio.ensure_future(add(s, 1))
        t0 = time.process_time()
        asyncio.run(main())
    else:
        raise SystemExit("unknown workload %s" % which)
    return time.process_time() - t0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        print("%.6f" % workload(sys.argv[2], int(sys.argv[3])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--shim", action="append", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--instructions", action="store_true",
                    help="instructions under callgrind, one run a column, workloads / 10")
    ap.add_argument("workloads", nargs="+")
    args = ap.parse_args()
    shims = [s.partition("=")[::2] for s in args.shim]
    hooks = {label: path.partition(",")[2] for label, path in shims}
    shims = [(label, path.partition(",")[0]) for label, path in shims]
    cols = ["none", "floor", "floor-eval", "cprofile"] + [label for label, _ in shims]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    print("load average: %.1f %.1f %.1f" % os.getloadavg())
    tmp = tempfile.mkdtemp(prefix="coprof-hotpath-")
    scale = 10 if args.instructions else 1
    if sys_monitoring(args.python):
        cols.remove("floor-eval")  # 3.10 and 3.11 only

    def one(c, w, tries=8):
        """CPU seconds of workload w in column c, or its instructions."""
        env = dict(base, PYTHONPATH=os.path.join(HERE, "pyperf-wrap"))
        argv = [args.python, os.path.abspath(__file__), "--child", w, str(scale)]
        if c in ("floor", "floor-eval", "cprofile"):
            env["COPROF_BENCH_WRAP"] = c
            argv.append("--worker")  # the wrapper profiles workers only
        elif c != "none":
            env.update(LD_PRELOAD=os.path.abspath(dict(shims)[c]),
                       COPROF_OUT=os.path.join(tmp, "%p.pstat"))
            if hooks[c]:
                env["COPROF_PY_HOOK"] = hooks[c]
        if args.instructions:
            argv = ["valgrind", "--tool=callgrind",
                    "--callgrind-out-file=" + os.path.join(tmp, "cg.out")] + argv
        p = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
        clock = [clock_impl(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.endswith(".pstat")]
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        if args.instructions:
            # coprof calibrates the TSC against the kernel's clock at start-up, which
            # callgrind's slowness can fail; it then reads the clock through the vDSO,
            # more instructions: such a run is made again.
            if clock and not all(k.startswith("tsc") for k in clock):
                if tries > 1:
                    return one(c, w, tries - 1)
                raise SystemExit("%s %s: clock %s under callgrind, %d tries" % (c, w, clock, 8))
            return int(re.search(r"Collected : (\d+)", p.stderr).group(1))
        return float(p.stdout.split()[-1])

    if args.instructions:
        empty = {c: one(c, "empty") for c in cols}
        for w in args.workloads:
            n = {c: one(c, w) - empty[c] for c in cols}
            over = {c: n[c] - n["none"] for c in cols}
            print("%s: %s" % (w, "  ".join("%s %.1fM" % (c, n[c] / 1e6) for c in cols)))
            print("%s, overhead / cProfile's: %s" % (w, "  ".join(
                "%s %.2f" % (c, over[c] / over["cprofile"]) for c in cols
                if c not in ("none", "cprofile"))), flush=True)
        os.rmdir(tmp)
        return
    for w in args.workloads:
        times = {c: [] for c in cols}
        for _ in range(args.runs):
            for c in cols:
                times[c].append(one(c, w))
        med = {c: statistics.median(t) for c, t in times.items()}
        print("%s: %s" % (w, "  ".join("%s %.3f s (%.2fx)" % (c, med[c], med[c] / med["none"])
                                        for c in cols)), flush=True)
    os.rmdir(tmp)


def clock_impl(path):
    """The clock implementation a coprof profile names in its notes."""
    with open(path, "rb") as f:
        marshal.load(f)
        notes = marshal.load(f).get("notes", [])
    return next((n.split(": ", 1)[1] for n in notes if n.startswith("clock implementation")),
                "?")


def sys_monitoring(python):
    """The interpreter has sys.monitoring (3.12+), where the floor-eval column (a no-op
    frame-evaluation function, coprof's backend on 3.10 and 3.11) has no meaning."""
    return subprocess.run([python, "-c", "import sys; sys.monitoring"],
                          capture_output=True).returncode == 0


main()
