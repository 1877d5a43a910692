#!/usr/bin/env python3
"""run.py BUILD [RUNS]: the native benchmarks, side by side in one run.

1. Per-call overhead on bench/native/fib (instrumented, 2*fib(N+1)-1 calls): the
   unprofiled run (glibc's no-op hooks) is the baseline; coprof wall, coprof cpu and
   `uftrace record` run the same binary; overhead per call = (t - t_base) / calls.
2. The RESP sample under `redis-benchmark -t get,set` (loopback): requests per second
   unprofiled, and under coprof cpu and wall.
Each figure is the median of RUNS (default 5) runs, the variants interleaved."""
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import resp  # bench/native/resp.py

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
COPROF = os.path.join(BUILD, "viewer/coprof")
FIB = os.path.join(BUILD, "bench/native/fib")
RESP = os.path.join(BUILD, "samples/native/resp")
N = 30
CALLS = 2 * 1346269 - 1  # 2*fib(31)-1
TMP = tempfile.mkdtemp(prefix="coprof-bench-")


def timed(cmd):
    """(wall s, CPU s: user + system of the command and its threads)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=TMP)
    t = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return t, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def per_call():
    variants = {
        "unprofiled": [FIB, str(N)],
        "coprof wall": [COPROF, "record", "-c", "wall", "-o", "w.pstat", "--", FIB, str(N)],
        "coprof cpu": [COPROF, "record", "-c", "cpu", "-o", "c.pstat", "--", FIB, str(N)],
    }
    if shutil.which("uftrace"):
        variants["uftrace record"] = ["uftrace", "record", "-d", os.path.join(TMP, "uftrace.data"), FIB, str(N)]
    walls = {k: [] for k in variants}
    cpus = {k: [] for k in variants}
    for _ in range(RUNS):
        for k, cmd in variants.items():
            w, c = timed(cmd)
            walls[k].append(w)
            cpus[k].append(c)
    mw = {k: statistics.median(v) for k, v in walls.items()}
    mc = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"fib({N}): {CALLS} calls, median of {RUNS} runs; overhead per call against the unprofiled run")
    print(f"{'variant':16} {'wall s':>8} {'ns/call':>8} {'cpu s':>8} {'ns/call':>8}")
    nw, nc = {}, {}
    for k in variants:
        nw[k] = (mw[k] - mw["unprofiled"]) / CALLS * 1e9
        nc[k] = (mc[k] - mc["unprofiled"]) / CALLS * 1e9
        print(f"{k:16} {mw[k]:8.3f} {nw[k]:8.1f} {mc[k]:8.3f} {nc[k]:8.1f}")
    if "uftrace record" in nw:
        for k in ["coprof wall", "coprof cpu"]:
            print(f"{k} / uftrace: {nw[k] / nw['uftrace record']:.2f} (wall), "
                  f"{nc[k] / nc['uftrace record']:.2f} (cpu)")


def resp_port(line):
    """resp prints '... port N' first."""
    return re.search(r"port (\d+)", line).group(1)


def throughput():
    variants = {
        "unprofiled": [],
        "coprof cpu": [COPROF, "record", "-c", "cpu", "-o", "rc.pstat", "--"],
        "coprof wall": [COPROF, "record", "-c", "wall", "-o", "rw.pstat", "--"],
    }
    got = {k: {"SET": [], "GET": []} for k in variants}
    for _ in range(RUNS):
        for k, prefix in variants.items():
            for cmd, v in resp.rps(prefix, RESP, resp_port, TMP).items():
                got[k][cmd].append(v)
    print(f"\nresp under redis-benchmark -t get,set -n 50000 -c 20, median of {RUNS} runs")
    print(f"{'variant':16} {'SET rps':>10} {'GET rps':>10} {'vs unprofiled':>14}")
    base = statistics.median(got["unprofiled"]["SET"] + got["unprofiled"]["GET"])
    for k, d in got.items():
        s, g = statistics.median(d["SET"]), statistics.median(d["GET"])
        both = statistics.median(d["SET"] + d["GET"])
        print(f"{k:16} {s:10.0f} {g:10.0f} {both / base:14.2f}")


if __name__ == "__main__":
    per_call()
    if shutil.which("redis-benchmark"):
        throughput()
    shutil.rmtree(TMP, ignore_errors=True)
