#!/usr/bin/env python3
"""greenlet_switch.py: what coprof adds to a greenlet switch.

usage: greenlet_switch.py --shim LIB [--python EXE] [--runs N] [--switches N]

A greenlet and the main one switch back and forth SWITCHES times (the loop has one
Python call per round trip, so trace mode's per-call cost is in the figures too). Each
configuration runs in its own process, interleaved, RUNS rounds; the figure is the
median of the loop's own wall time per switch. Anchors in the same run: unprofiled,
and a greenlet.settrace tracer written in Python that does nothing (what a program's
own tracer costs). EXE must import greenlet.
"""
import argparse
import os
import statistics
import subprocess
import sys

PROG = r'''
import sys, time, greenlet
n = int(sys.argv[1])
def tick():
    pass
def other():
    main = greenlet.getcurrent().parent
    while True:
        main.switch()
g = greenlet.greenlet(other)
if sys.argv[2] == "pytracer":
    greenlet.settrace(lambda event, args: None)
t0 = time.perf_counter()
for _ in range(n // 2):
    tick()
    g.switch()
print(time.perf_counter() - t0)
'''
CONFIGS = [("unprofiled", {}), ("Python tracer, no coprof", {}),
           ("coprof trace cpu", {"COPROF_MODE": "trace", "COPROF_CLOCK": "cpu"}),
           ("coprof trace wall", {"COPROF_MODE": "trace", "COPROF_CLOCK": "wall"}),
           ("coprof sample cpu", {"COPROF_MODE": "sample", "COPROF_CLOCK": "cpu"})]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--switches", type=int, default=400000)
    a = ap.parse_args()
    res = {}
    for _ in range(a.runs):
        for name, extra in CONFIGS:
            env = dict(os.environ, COPROF_OUT="/dev/null/none")
            env.pop("PYTHONPATH", None)
            if extra:
                env.update(extra, LD_PRELOAD=os.path.abspath(a.shim),
                           COPROF_OUT=os.path.join("/tmp", "greenlet_switch.%p.pstat"))
            p = subprocess.run([a.python, "-c", PROG, str(a.switches),
                                "pytracer" if name.startswith("Python") else "-"],
                               env=env, capture_output=True, text=True, check=True)
            res.setdefault(name, []).append(float(p.stdout.split()[-1]) / a.switches * 1e9)
            for f in os.listdir("/tmp"):
                if f.startswith("greenlet_switch.") and f.endswith(".pstat"):
                    os.unlink(os.path.join("/tmp", f))
    base = statistics.median(res["unprofiled"])
    print("| %s | ns per switch | vs unprofiled |" % a.python)
    print("|---|---|---|")
    for name, _ in CONFIGS:
        m = statistics.median(res[name])
        print("| %s | %.0f | %.2fx |" % (name, m, m / base))


if __name__ == "__main__":
    sys.exit(main())
