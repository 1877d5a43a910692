#!/usr/bin/env python3
"""runtimes.py BUILD [BEFORE_PRELOAD] [RUNS]: the cost of following stacks no adapter
knows, and the State Threads sample's throughput.

1. With BEFORE_PRELOAD (a libcoprof-preload.so built from the commit before the stack
   check, e.g. `git archive bf00ff3`): the per-call cost of the __cyg hooks (one
   enter+leave pair) on bench/native/fib, that library against BUILD's, both clocks,
   side by side in one run, the variants interleaved; CPU time (user + system) of the
   whole process, so other load on the machine counts less. ns/call = (t - t_unprofiled)
   / calls.
2. samples/native/st-resp (State Threads, one st thread per connection) under
   `redis-benchmark -t get,set -n 50000 -c 20`: requests per second unprofiled, and
   under coprof trace and sample mode with both clocks.
Each figure is the median of RUNS (default 7) runs."""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import resp  # bench/native/resp.py

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
BEFORE = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "-" else None
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 7
COPROF = os.path.join(BUILD, "viewer/coprof")
AFTER = os.path.join(BUILD, "preload/libcoprof-preload.so")
FIB = os.path.join(BUILD, "bench/native/fib")
ST_RESP = os.path.join(BUILD, "samples/native/st-resp")
N = 32
CALLS = 2 * 3524578 - 1  # 2*fib(33)-1
TMP = tempfile.mkdtemp(prefix="coprof-bench-rt-")


def cpu_of(cmd, env):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=TMP, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def hook_cost():
    variants = {"unprofiled": None}
    for clock in ("cpu", "wall"):
        variants[f"before {clock}"] = (BEFORE, clock)
        variants[f"after {clock}"] = (AFTER, clock)
    got = {k: [] for k in variants}
    for _ in range(RUNS):
        for k, v in variants.items():
            env = dict(os.environ)
            if v:
                env.update(LD_PRELOAD=v[0], COPROF_CLOCK=v[1], COPROF_OUT=os.path.join(TMP, "fib.pstat"))
            got[k].append(cpu_of([FIB, str(N)], env))
    # the median, and the fastest run (the one other load disturbed least)
    med = {k: statistics.median(v) for k, v in got.items()}
    low = {k: min(v) for k, v in got.items()}
    per = {k: (med[k] - med["unprofiled"]) / CALLS * 1e9 for k in variants}
    perl = {k: (low[k] - low["unprofiled"]) / CALLS * 1e9 for k in variants}
    print(f"fib({N}): {CALLS} enter+leave pairs, CPU s, {RUNS} runs")
    print(f"{'variant':12} {'median s':>9} {'ns/call':>8} {'min s':>8} {'ns/call':>8}")
    for k in variants:
        print(f"{k:12} {med[k]:9.3f} {per[k]:8.2f} {low[k]:8.3f} {perl[k]:8.2f}")
    for clock in ("cpu", "wall"):
        a, b = f"after {clock}", f"before {clock}"
        print(f"after - before, {clock} clock: {per[a] - per[b]:+.2f} ns/call (medians), "
              f"{perl[a] - perl[b]:+.2f} (minimums)")


def throughput():
    variants = {"unprofiled": []}
    for mode in ("trace", "sample"):
        for clock in ("cpu", "wall"):
            variants[f"{mode} {clock}"] = [COPROF, "record", "--mode", mode, "-c", clock,
                                           "-o", os.path.join(TMP, f"st-{mode}-{clock}.pstat"), "--"]
    got = {k: {"SET": [], "GET": []} for k in variants}
    for _ in range(RUNS):
        for k, prefix in variants.items():
            for cmd, v in resp.rps(prefix, ST_RESP, str.strip, TMP).items():
                got[k][cmd].append(v)
            time.sleep(0.2)
    print(f"\nst-resp under redis-benchmark -t get,set -n 50000 -c 20, median of {RUNS} runs")
    print(f"{'variant':14} {'SET rps':>10} {'GET rps':>10} {'vs unprofiled':>14}")
    base = statistics.median(got["unprofiled"]["SET"] + got["unprofiled"]["GET"])
    for k, d in got.items():
        s, g = statistics.median(d["SET"]), statistics.median(d["GET"])
        both = statistics.median(d["SET"] + d["GET"])
        print(f"{k:14} {s:10.0f} {g:10.0f} {both / base:14.2f}")


if __name__ == "__main__":
    if BEFORE:
        hook_cost()
    if os.environ.get("HOOKS_ONLY"):
        sys.exit(0)
    if shutil.which("redis-benchmark") and os.path.exists(ST_RESP):
        throughput()
    shutil.rmtree(TMP, ignore_errors=True)
