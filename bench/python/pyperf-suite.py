#!/usr/bin/env python3
"""pyperf-suite.py: coprof's trace overhead on pyperformance's asynchronous and
call-heavy benchmarks and on seed 002's shapes (bench/python/shapes.py), run with
pyperf's own runner, each profiler wrapped around the worker processes
(bench/python/pyperf-wrap/sitecustomize.py), side by side in one interleaved run.

usage: pyperf-suite.py [--shim LABEL=PATH ...] [--python EXE ...] [--runs 3]
                       [--values 3] [--warmups 1] [--timer wall|cpu] [--bench NAME ...]
                       [--config NAME ...] [--loops N] [--raw FILE]

For each interpreter it makes (once) a virtual environment under build/ with
pyperformance, pyperf and yappi 1.7 from PyPI, and builds the floor there
(bench/python/noop-hook.c: a no-op C hook on coprof's backend). Configurations:
none (unprofiled), floor, floor-eval (3.10/3.11: a no-op frame-evaluation function), cprofile, yappi-cpu, yappi-wall, and per shim `LABEL wall`
and `LABEL cpu` (COPROF_CLOCK; default shim: build/preload/libcoprof-preload.so as
`coprof`). Loops are calibrated once, unprofiled, and fixed for every configuration
(--loops N fixes them instead: with --timer cpu, the sleeping benchmarks, async_tree's
io, memoization and cpu_io_mixed and asyncio_tcp, would calibrate for minutes, as pyperf
raises the loops until a value holds 0.1 s of CPU time);
each run is one worker (-p 1) with --warmups warm-ups and --values values; a figure is the
median over --runs rounds of each run's median, as a ratio to unprofiled. --timer cpu
makes the workers time with their CPU time (time.process_time) instead of the wall
clock, for a machine that others load. Prints
Markdown tables: the ratios, then overheads (ratio - 1) of coprof, cProfile and
yappi relative to the floor's overhead, and coprof's overhead / cProfile's. --raw
keeps each round's value per column (seconds), to read the spread.
"""
import argparse
import glob
import json
import marshal
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CALLBACK_H = os.path.join(ROOT, "preload", "python", "callback.h")  # noop-hook.c's too
WRAP = os.path.join(HERE, "pyperf-wrap")

# name -> (script inside pyperformance's benchmarks, or None for shapes.py; arguments)
BENCHES = {
    "async_tree_none": ("bm_async_tree", ["none"]),
    "async_tree_io": ("bm_async_tree", ["io"]),
    "async_tree_memoization": ("bm_async_tree", ["memoization"]),
    "async_tree_cpu_io_mixed": ("bm_async_tree", ["cpu_io_mixed"]),
    "coroutines": ("bm_coroutines", []),
    "generators": ("bm_generators", []),
    "async_generators": ("bm_async_generators", []),
    "asyncio_tcp": ("bm_asyncio_tcp", []),
    "richards": ("bm_richards", []),
    "shape_plain": (None, ["--shape", "plain"]),
    "shape_await": (None, ["--shape", "await"]),
    "shape_task": (None, ["--shape", "task"]),
    "shape_sleep0": (None, ["--shape", "sleep0"]),
    "shape_gather": (None, ["--shape", "gather"]),
}
BASE_CONFIGS = ["none", "floor", "floor-eval", "cprofile", "yappi-cpu", "yappi-wall"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit("%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout,
                                                   p.stderr))
    return p.stdout


def describe(python):
    """(version, tag, include dir, extension suffix) of an interpreter."""
    code = ("import sys, sysconfig; print(sys.version.split()[0]); "
            "print(sysconfig.get_paths()['include']); "
            "print(sysconfig.get_config_var('EXT_SUFFIX'))")
    ver, inc, ext = run([python, "-c", code]).split("\n")[:3]
    real = os.path.realpath(python)
    tag = ver if ".pyenv" in real or "/versions/" in real else ver + "-system"
    return ver, tag, inc, ext


def make_venv(python, tag, inc, ext):
    """The bench venv of one interpreter (made once): its python, and the folder of
    pyperformance's benchmarks."""
    venv = os.path.join(ROOT, "build", "venv-bench-" + tag)
    vpy = os.path.join(venv, "bin", "python")
    if not os.path.exists(os.path.join(venv, ".ready")):
        shutil.rmtree(venv, ignore_errors=True)
        run([python, "-m", "venv", venv])
        run([vpy, "-m", "pip", "install", "-q", "pyperformance", "pyperf",
             "yappi>=1.7,<1.8"], timeout=900)
        open(os.path.join(venv, ".ready"), "w").close()
    site = run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    so = os.path.join(site, "coprof_noop" + ext)
    src = os.path.join(HERE, "noop-hook.c")
    newest = max(os.path.getmtime(src), os.path.getmtime(CALLBACK_H))
    if not os.path.exists(so) or os.path.getmtime(so) < newest:
        run([os.environ.get("CC", "gcc"), "-shared", "-fPIC", "-O2", "-Wall", "-Werror",
             "-I", inc, src, "-o", so])
    bm = run([vpy, "-c", "import os, pyperformance; print(os.path.join("
              "os.path.dirname(pyperformance.__file__), 'data-files', 'benchmarks'))"])
    return vpy, bm.strip()


def values(path):
    """Every value of a pyperf JSON file (seconds per loop), and its loops."""
    with open(path) as f:
        data = json.load(f)
    vals = []
    loops = data.get("metadata", {}).get("loops")
    for b in data["benchmarks"]:
        loops = b.get("metadata", {}).get("loops", loops)
        for r in b["runs"]:
            vals += r.get("values", [])
            loops = r.get("metadata", {}).get("loops", loops)
    return vals, loops


def one(vpy, script, args, config, shims, tmp, loops, nvalues, warmups=1, timer="wall"):
    """Runs one benchmark under one configuration; (median value, loops)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    env["PYTHONPATH"] = WRAP
    env["COPROF_BENCH_TIMER"] = timer
    inherit = ["COPROF_BENCH_WRAP", "COPROF_BENCH_TIMER"]
    label, _, clock = config.rpartition(" ")
    if label in shims:
        env.update(COPROF_BENCH_PRELOAD=shims[label], COPROF_CLOCK=clock,
                   COPROF_OUT=os.path.join(tmp, "w-%p.pstat"))
        inherit += ["LD_PRELOAD", "COPROF_CLOCK", "COPROF_OUT"]
    else:
        env["COPROF_BENCH_WRAP"] = "" if config == "none" else config
    out = os.path.join(tmp, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    cmd = [vpy, script] + args + ["-p", "1", "-w", str(warmups), "-n", str(nvalues), "--quiet",
                                  "-o", out, "--inherit-environ", ",".join(inherit)]
    if loops:
        cmd += ["--loops", str(loops)]
    run(cmd, env=env, timeout=1800)
    vals, got = values(out)
    dumps = glob.glob(os.path.join(tmp, "w-*.pstat"))
    if label in shims and not any(profiled_python(f) for f in dumps):
        # a shim that profiles nothing times as unprofiled: no figure beats that
        raise SystemExit("%s: no worker's profile holds a Python function (%d files); is "
                         "the shim's python/ folder beside it?" % (config, len(dumps)))
    for f in dumps:
        os.unlink(f)
    return statistics.median(vals), got


def profiled_python(path):
    """Whether the pstats file at `path` holds a function of a .py file."""
    with open(path, "rb") as f:
        stats = marshal.load(f)
    return any(str(k[0]).endswith(".py") for k in stats)


def fmt(x):
    return "-" if x is None else "%.2fx" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", action="append", help="LABEL=PATH of a preload library")
    ap.add_argument("--python", action="append")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--values", type=int, default=3)
    ap.add_argument("--warmups", type=int, default=1)
    ap.add_argument("--timer", choices=("wall", "cpu"), default="wall",
                    help="cpu: the workers time with the process's CPU time")
    ap.add_argument("--bench", action="append", choices=sorted(BENCHES))
    ap.add_argument("--config", action="append")
    ap.add_argument("--loops", type=int, help="loops per value, not calibrated")
    ap.add_argument("--raw", help="also write each round's value per column (JSON) here")
    args = ap.parse_args()
    shims = {}
    for s in args.shim or ["coprof=" + os.path.join(ROOT, "build/preload/libcoprof-preload.so")]:
        label, _, path = s.partition("=")
        shims[label] = os.path.abspath(path)
    pythons = args.python or (["/usr/bin/python3"] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3"))))
    configs = list(BASE_CONFIGS)
    for label in shims:
        configs += [label + " wall", label + " cpu"]
    if args.config:
        configs = ["none"] + [c for c in configs if c in args.config and c != "none"]
    benches = args.bench or list(BENCHES)
    print("timer: %s; load average at start: %.1f %.1f %.1f" % ((args.timer,) + os.getloadavg()),
          flush=True)
    t_start = time.time()
    tables = []
    raw = []
    with tempfile.TemporaryDirectory(prefix="coprof-pyperf-") as tmp:
        for py in pythons:
            ver, tag, inc, ext = describe(py)
            vpy, bmdir = make_venv(py, tag, inc, ext)
            for bench in benches:
                folder, bargs = BENCHES[bench]
                script = (os.path.join(HERE, "shapes.py") if folder is None else
                          os.path.join(bmdir, folder, "run_benchmark.py"))
                loops = args.loops or one(vpy, script, bargs, "none", shims, tmp, None, 1, 1,
                                          args.timer)[1]
                # floor-eval: the frame-evaluation slot's floor, 3.10 and 3.11 only.
                here = [c for c in configs if c != "floor-eval" or
                        tuple(int(x) for x in ver.split(".")[:2]) < (3, 12)]
                times = {c: [] for c in here}
                for _ in range(args.runs):
                    for c in here:
                        times[c].append(one(vpy, script, bargs, c, shims, tmp, loops,
                                            args.values, args.warmups, args.timer)[0])
                raw.append({"python": tag, "bench": bench, "loops": loops, "times": times})
                med = {c: statistics.median(t) for c, t in times.items()}
                ratio = {c: med[c] / med["none"] for c in here}
                tables.append((tag, bench, loops, ratio))
                print("%s %s loops=%s %s" % (tag, bench, loops, " ".join(
                    "%s=%.3f" % (c, r) for c, r in ratio.items())), file=sys.stderr,
                    flush=True)
    if args.raw:
        with open(args.raw, "w") as f:
            json.dump(raw, f, indent=1)
    print("load average at end: %.1f %.1f %.1f; %.0f s" % (os.getloadavg() + (
        time.time() - t_start,)))
    shown = [c for c in configs if c != "none"]
    print()
    print("| python | benchmark | " + " | ".join(shown) + " |")
    print("|---|---|" + "---|" * len(shown))
    for tag, bench, loops, ratio in tables:
        print("| %s | %s | %s |" % (tag, bench, " | ".join(fmt(ratio.get(c)) for c in shown)))
    # Overheads: coprof's to cProfile's (the target: <= 0.75), and each to the floor's.
    coprofs = [c for c in configs if c.rpartition(" ")[0] in shims]
    vs_cp = [c for c in ("floor", "floor-eval") if c in configs] + coprofs
    if "cprofile" in configs and vs_cp:
        print()
        print("Overhead (ratio - 1) of each floor and coprof column over cProfile's, and "
              "over the floor's:")
        print()
        head = ["%s / cProfile" % c for c in vs_cp]
        if "floor" in configs:
            head += ["%s / floor" % c for c in coprofs] + ["cProfile / floor"]
            head += ["%s / floor" % c for c in ("yappi-cpu", "yappi-wall") if c in configs]
        print("| python | benchmark | " + " | ".join(head) + " |")
        print("|---|---|" + "---|" * len(head))
        for tag, bench, loops, ratio in tables:
            over = {c: ratio[c] - 1 for c in ratio}
            cells = ["%.2f" % (over[c] / over["cprofile"]) if over["cprofile"] > 0 and c in over
                     else "-" for c in vs_cp]
            if "floor" in configs:
                fl = over["floor"]
                rel = [c for c in coprofs + ["cprofile", "yappi-cpu", "yappi-wall"]
                       if c in configs]
                cells += ["%.1f" % (over[c] / fl) if fl > 0.005 else "-" for c in rel]
            print("| %s | %s | %s |" % (tag, bench, " | ".join(cells)))


if __name__ == "__main__":
    main()
