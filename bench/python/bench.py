#!/usr/bin/env python3
"""bench.py: the CPython adapter's overhead, as ratios against the same workload run
unprofiled, side by side in one run (runs interleaved), median of --runs.

usage: bench.py --shim build/preload/libcoprof-preload.so [--runs 5] [--python EXE ...]

Columns: coprof cpu and wall (LD_PRELOAD, COPROF_CLOCK), cProfile, and yappi cpu and
wall where the interpreter has yappi. Prints a Markdown table.
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
    print("| python | workload | coprof cpu | coprof wall | cProfile | yappi cpu | yappi wall |")
    print("|---|---|---|---|---|---|---|")
    for py in pythons:
        yappi = has_yappi(py)
        for workload in ("calls", "asyncio"):
            cols = [("none", {}), ("none", {"COPROF_CLOCK": "cpu"}),
                    ("none", {"COPROF_CLOCK": "wall"}), ("cprofile", {})]
            if yappi:
                cols += [("yappi-cpu", {}), ("yappi-wall", {})]
            times = [[] for _ in cols]
            for _ in range(args.runs):
                for i, (prof, extra) in enumerate(cols):
                    env = dict(base)
                    if extra:
                        env.update(extra, LD_PRELOAD=args.shim, COPROF_OUT=out)
                    times[i].append(timed(py, prof, workload, env))
            med = [statistics.median(t) for t in times]
            ratios = ["%.2fx" % (m / med[0]) for m in med[1:]]
            ratios += ["-"] * (5 - len(ratios))
            print("| %s | %s | %s |" % (py, workload, " | ".join(ratios)), flush=True)
    if os.path.exists(out):
        os.unlink(out)


main()
