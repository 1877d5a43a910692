#!/usr/bin/env python3
"""bench.py: the CPython adapter's overhead, as ratios against the same workload run
unprofiled, side by side in one run (runs interleaved), median of --runs.

usage: bench.py --shim build/preload/libcoprof-preload.so [--runs 5] [--python EXE ...]

Columns: coprof cpu and wall (LD_PRELOAD, COPROF_CLOCK) through the profile function
(COPROF_PY_HOOK=profile), the same through sys.monitoring (COPROF_PY_HOOK=monitoring,
3.12+ only), cProfile, and yappi cpu and wall where the interpreter has yappi. Prints a
Markdown table.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "workloads.py")


def timed(python, profiler, workload, env):
    p = subprocess.run([python, WORK, profiler, workload], env=env, capture_output=True,
                       text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit("%s %s %s failed: %s" % (python, profiler, workload, p.stderr))
    return float(p.stdout.split()[-1])


def has_yappi(python):
    return subprocess.run([python, "-c", "import yappi"], capture_output=True).returncode == 0


def has_monitoring(python):
    return subprocess.run([python, "-c", "import sys; sys.monitoring"],
                          capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--python", action="append")
    args = ap.parse_args()
    pythons = args.python or (["/usr/bin/python3"] + sorted(
        p for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3"))))
    base = dict(os.environ)
    base.pop("LD_PRELOAD", None)
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "coprof-bench.pstat")
    print("| python | workload | coprof cpu | coprof wall | coprof cpu, monitoring "
          "| coprof wall, monitoring | cProfile | yappi cpu | yappi wall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for py in pythons:
        yappi, mon = has_yappi(py), has_monitoring(py)
        for workload in ("calls", "asyncio"):
            cols = [("none", {})]
            for hook in ("profile", "monitoring"):
                for clock in ("cpu", "wall"):
                    cols.append(("none", {"COPROF_CLOCK": clock, "COPROF_PY_HOOK": hook})
                                if mon or hook == "profile" else None)
            cols.append(("cprofile", {}))
            cols += [("yappi-cpu", {}), ("yappi-wall", {})] if yappi else [None, None]
            times = [[] for _ in cols]
            for _ in range(args.runs):
                for i, col in enumerate(cols):
                    if col is None:
                        continue
                    prof, extra = col
                    env = dict(base)
                    if extra:
                        env.update(extra, LD_PRELOAD=args.shim, COPROF_OUT=out)
                    times[i].append(timed(py, prof, workload, env))
            med = [statistics.median(t) if t else None for t in times]
            ratios = ["%.2fx" % (m / med[0]) if m else "-" for m in med[1:]]
            print("| %s | %s | %s |" % (py, workload, " | ".join(ratios)), flush=True)
    if os.path.exists(out):
        os.unlink(out)


main()
