#!/usr/bin/env python3
"""runtime-repeat.py PROG [-c cpu|wall] [-n RUNS] [--hz HZ] [--keep DIR]: the runtime
tests' sample-mode case (tests/native/runtimes.py) again and again, to read how far the
light coroutine's task time falls from the program's own count of its work.

PROG is one of the runtime test programs (asm, st, fiber, asm-plain, st-plain,
fiber-plain). Each run profiles `rt-PROG 6 20 5` as the test does and compares each
coroutine's task ttot with the CPU time its work took by the program's clock
(CLOCK_THREAD_CPUTIME_ID, printed by the program). Prints one line per run whose light
coroutine is more than 10% off (the test's bound) or whose tasks are not the two
coroutines (a third one, a wrong name), then the spread (sd of the relative
error), the largest errors, and the largest work the program counted (above the nominal
30 and 120 ms when the VM's host took the CPU inside a burn). --keep copies the
profiles of those runs to DIR. Needs a build: COPROF_BIN and COPROF_TESTBIN default to
build/viewer/coprof and build/tests/native."""
import argparse
import os
import shutil
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("COPROF_BIN", os.path.join(ROOT, "build", "viewer", "coprof"))
os.environ.setdefault("COPROF_TESTBIN", os.path.join(ROOT, "build", "tests", "native"))
sys.path.insert(0, os.path.join(ROOT, "tests", "native"))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import runtimes as rt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prog", choices=sorted(rt.RUNTIME))
    ap.add_argument("-c", "--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("-n", "--runs", type=int, default=100)
    ap.add_argument("--hz", type=int, default=rt.HZ)
    ap.add_argument("--keep", help="copy the profiles of runs past 10%% here")
    args = ap.parse_args()
    rt.HZ = args.hz
    rel, work, bad_tasks = [], [], 0
    for i in range(args.runs):
        stats, ex = rt.profile(args.prog, "sample", args.clock)
        try:
            tasks = rt.tasks_by_work(args.prog, ex)
        except AssertionError as e:  # a third task, a task named wrong
            bad_tasks += 1
            print("run %d: %s" % (i, e), flush=True)
            continue
        w = ex["work"]
        err = {k: tasks[k]["ttot"] - w[k] for k in ("light", "heavy")}
        rel.append(err["light"] / w["light"])
        work.append(w)
        if abs(rel[-1]) > 0.10:
            print("run %d: light %+.2f ms, heavy %+.2f ms; work %.2f / %.2f ms" % (
                i, err["light"] * 1e3, err["heavy"] * 1e3, w["light"] * 1e3, w["heavy"] * 1e3),
                flush=True)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copy(os.path.join(rt.TMP, f"{args.prog}-sample-{args.clock}.pstat"),
                            os.path.join(args.keep, f"{args.prog}-{args.clock}-{i}.pstat"))
    print("%s %s at %d Hz, %d runs: %d with tasks wrong; light's error sd %.1f%%, from %+.1f%% to"
          " %+.1f%%, %d past 10%%; work up to %.1f ms (light) and %.1f ms (heavy)" % (
              args.prog, args.clock, args.hz, args.runs, bad_tasks, 100 * statistics.pstdev(rel),
              100 * min(rel), 100 * max(rel), sum(abs(r) > 0.10 for r in rel),
              1e3 * max(w["light"] for w in work), 1e3 * max(w["heavy"] for w in work)))
    shutil.rmtree(rt.TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
