#!/usr/bin/env python3
"""split-beat.py: how far Python sample mode's share of a 2:1 split lands from the
program's own timing, run after run: the check of tests/pysample (split, native)
repeated, to see a bias that one run hides.

usage: split-beat.py --python EXE [--runs 12] [--jobs 1] [--clock cpu|wall]
                     [--hz 997] [--seconds 1.5] [LABEL=]SHIM...

Each run is tests/pysample/prog.py's `split` (heavy does twice light's work per round,
and the program times each call on both clocks) under the shim in sample mode. --jobs
runs that many copies at once, as a parallel test run does. Per shim, prints each
run's sampled share of heavy (ct of heavy / ct of heavy and light), the share the
program measured on the same clock, and their difference; then the mean and spread of
the differences, the largest, and how many runs are more than 0.03 away (the test's
tolerance). The shims' runs interleave."""
import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROG = os.path.join(ROOT, "tests", "pysample", "prog.py")


def one(args, shim, tmp, k):
    out = os.path.join(tmp, "s%d.pstat" % k)
    side = os.path.join(tmp, "m%d.json" % k)
    env = {n: v for n, v in os.environ.items() if not n.startswith(("COPROF_", "LD_PRELOAD"))}
    env.update(LD_PRELOAD=shim, COPROF_MODE="sample", COPROF_CLOCK=args.clock,
               COPROF_HZ=str(args.hz), COPROF_OUT=out)
    subprocess.run([args.python, PROG, "split", str(args.seconds), side], env=env,
                   check=True, capture_output=True, timeout=300)
    ct = {k[2]: v[3] for k, v in pstats.Stats(out).stats.items() if k[0] == PROG}
    with open(side) as f:
        measured = json.load(f)[args.clock]
    return ct["heavy"] / (ct["heavy"] + ct["light"]), measured


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--hz", type=int, default=997)
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("shims", nargs="+")
    args = ap.parse_args()
    shims = []
    for s in args.shims:
        label, _, path = s.rpartition("=")
        shims.append((label or path, os.path.abspath(path)))
    diffs = {label: [] for label, _ in shims}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        for r in range(args.runs):
            for label, path in shims:
                got = list(pool.map(lambda k: one(args, path, tmp, k), range(args.jobs)))
                for share, measured in got:
                    diffs[label].append(share - measured)
                    print("run %d %s: sampled %.3f, measured %.3f, %+.3f" % (
                        r, label, share, measured, share - measured), flush=True)
    print("\n| shim | runs | mean difference | spread (sd) | largest | more than 0.03 away |")
    print("|---|---|---|---|---|---|")
    for label, d in diffs.items():
        print("| %s | %d | %+.3f | %.3f | %+.3f | %d |" % (
            label, len(d), statistics.mean(d), statistics.pstdev(d), max(d, key=abs),
            sum(abs(x) > 0.03 for x in d)))


if __name__ == "__main__":
    sys.exit(main())
