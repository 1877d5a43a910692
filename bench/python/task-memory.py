#!/usr/bin/env python3
"""task-memory.py: what each live asyncio task costs coprof's trace mode in memory and
page faults (issue 16): N tasks, all alive at once, each awaiting asyncio.sleep once
(as pyperformance's async_tree_io's leaves do).

usage: task-memory.py --python EXE [--n 10000 --n 50000] [--sleep 0.001] [--runs 3]
                      [LABEL=]SHIM [[LABEL=]SHIM...]

Runs the workload in a child process unprofiled and under each shim (LD_PRELOAD,
COPROF_CLOCK=cpu, trace mode), the columns interleaved run after run. The child
reads its peak RSS (VmHWM) and its minor faults (getrusage) when asyncio.run returns,
before coprof's dump at exit, so the figures are the run's, not the dump's. Prints
per configuration the medians, and per shim what it adds per task: peak RSS over
unprofiled divided by N (bytes), and minor faults likewise.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import asyncio, os, resource, sys
N = int(sys.argv[1]); S = float(sys.argv[2])
async def leaf():
    await asyncio.sleep(S)
async def main():
    await asyncio.gather(*[leaf() for _ in range(N)])
asyncio.run(main())
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1]) * 1024
print(hwm, resource.getrusage(resource.RUSAGE_SELF).ru_minflt, flush=True)
"""


def once(py, n, sleep, shim, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    if shim:
        env.update(LD_PRELOAD=shim, COPROF_CLOCK="cpu",
                   COPROF_OUT=os.path.join(tmp, "t.pstat"))
    out = subprocess.run([py, "-c", CHILD, str(n), str(sleep)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--n", type=int, action="append")
    ap.add_argument("--sleep", type=float, default=0.001)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("shims", nargs="+")
    args = ap.parse_args()
    shims = []
    for s in args.shims:
        label, eq, path = s.partition("=")
        shims.append((label, os.path.abspath(path)) if eq else (s, os.path.abspath(s)))
    print("| N | config | peak RSS (MB) | minor faults | RSS per task (bytes) | "
          "faults per task |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="coprof-taskmem-") as tmp:
        for n in args.n or [10000, 50000]:
            got = {label: [] for label in ["none"] + [lb for lb, _ in shims]}
            for _ in range(args.runs):
                got["none"].append(once(args.python, n, args.sleep, None, tmp))
                for label, path in shims:
                    got[label].append(once(args.python, n, args.sleep, path, tmp))
            med = {k: (statistics.median(r for r, _ in v), statistics.median(f for _, f in v))
                   for k, v in got.items()}
            for label in got:
                rss, flt = med[label]
                if label == "none":
                    print("| %d | none | %.1f | %d | - | - |" % (n, rss / 1e6, flt))
                    continue
                print("| %d | %s | %.1f | %d | %.0f | %.2f |" % (
                    n, label, rss / 1e6, flt, (rss - med["none"][0]) / n,
                    (flt - med["none"][1]) / n))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
