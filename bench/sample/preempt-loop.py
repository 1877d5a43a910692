#!/usr/bin/env python3
"""preempt-loop.py: preemptive green threads in sample mode, run after run (issue 19).

Runs tests/native/safety/uc-preempt (two coroutines switched by swapcontext inside a
SIGALRM handler every 2 ms, for 400 ms) under `coprof record --mode sample`, cycling
through cpu and wall, profiling from the start or opened by the program's own SIGUSR2
while the handler switches. Each run must exit 0 within --timeout seconds, print "done"
with no allocation in the handler, and leave a profile pstats reads. A run over time is
killed (by its pid) and counted as a hang. Prints one line per failure and a table;
exits 1 on any failure.

Sampling runs at 997 Hz (--hz): more ticks land mid-switch, and a run that got little
CPU on a loaded machine still has samples (under cpu, a process whose first tick was
its only one saw no event and, by design, writes no file).

usage: preempt-loop.py --build BUILD [--runs 100] [--timeout 30] [--hz 997]
"""
import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--hz", type=int, default=997)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    coprof = os.path.join(build, "viewer", "coprof")
    prog = os.path.join(build, "tests", "native", "uc-preempt")
    tmp = tempfile.mkdtemp(prefix="coprof-preempt-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_") and k != "LD_PRELOAD"}
    shapes = [(clock, toggle) for clock in ("cpu", "wall") for toggle in (False, True)]
    tally = {s: {"runs": 0, "ok": 0, "crash": 0, "hang": 0, "wrong": 0} for s in shapes}
    t0 = time.monotonic()
    for i in range(a.runs):
        clock, toggle = shapes[i % len(shapes)]
        out = os.path.join(tmp, "p.pstat")
        if os.path.exists(out):
            os.remove(out)
        cmd = [coprof, "record", "--mode", "sample", "--hz", str(a.hz), "-c", clock, "-o", out]
        cmd += ["--no-start", "--", prog, "toggle"] if toggle else ["--", prog]
        p = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        t = tally[(clock, toggle)]
        t["runs"] += 1
        what = ""
        try:
            so, se = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            p.kill()  # `coprof record` execs the program: p.pid is uc-preempt itself
            so, se = p.communicate()
            what = "hang"
        if not what and p.returncode != 0:
            what = "crash"
        if not what and ("done" not in so or "allocations in the handler: 0" not in so):
            what = "wrong"
        if not what:
            try:
                pstats.Stats(out)
            except Exception as e:  # noqa: BLE001 (any failure to read is the finding)
                what, se = "wrong", se + "unreadable profile: %s" % e
        if what:
            t[what] += 1
            print("run %d (%s%s): %s, exit %s\n%s%s" % (
                i, clock, " toggle" if toggle else "", what, p.returncode, so,
                se[-1500:]), flush=True)
        else:
            t["ok"] += 1
    print("| clock | start | runs | ok | crash | hang | wrong |")
    print("|---|---|---|---|---|---|---|")
    bad = 0
    for (clock, toggle), t in tally.items():
        print("| %s | %s | %d | %d | %d | %d | %d |" % (
            clock, "by the program's SIGUSR2" if toggle else "at once", t["runs"], t["ok"],
            t["crash"], t["hang"], t["wrong"]))
        bad += t["runs"] - t["ok"]
    print("%d runs in %.0f s" % (a.runs, time.monotonic() - t0))
    subprocess.run(["rm", "-rf", tmp])
    return 1 if bad else 0


sys.exit(main())
