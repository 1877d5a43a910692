#!/usr/bin/env python3
"""sample-steps-cost.py: what sample mode's loop steps cost (doc/design.md rule 11,
python/sampling/steps.c: local sys.monitoring events on asyncio's Handle._run on 3.12+,
a C stand-in for it on its class on 3.10 and 3.11).

Runs a hotpath.py workload (pyperformance's async_tree by default) unprofiled and in
sample mode under two shims, interleaved (the order turns each run), and prints each
column's median CPU seconds (time.process_time, the child's own) and after/before.
Timed, not counted: callgrind cannot run sample mode (perf's SIGTRAP ticks stop it).

usage: sample-steps-cost.py --python VENV_PYTHON --before SHIM --after SHIM
                            [--runs 21] [WORKLOAD]
  VENV_PYTHON: a venv made by pyperf-suite.py (it has pyperformance)"""
import argparse
import glob
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("workload", nargs="?", default="tree")
    a = ap.parse_args()
    shims = {"none": None, "before": os.path.abspath(a.before), "after": os.path.abspath(a.after)}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    base.update(PYTHONPATH=os.path.join(HERE, "pyperf-wrap"), PYTHONHASHSEED="0")
    got = {k: [] for k in shims}
    print("load average at start: %.1f %.1f %.1f" % os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="coprof-steps-") as tmp:
        for i in range(a.runs):
            for k in (list(shims) if i % 2 == 0 else list(reversed(list(shims)))):
                env = dict(base)
                if shims[k]:
                    env.update(LD_PRELOAD=shims[k], COPROF_MODE="sample",
                               COPROF_OUT=os.path.join(tmp, "%p.pstat"))
                p = subprocess.run([a.python, os.path.join(HERE, "hotpath.py"), "--child",
                                    a.workload, "1"], env=env, capture_output=True, text=True,
                                   check=True)
                got[k].append(float(p.stdout.split()[-1]))
                for f in glob.glob(os.path.join(tmp, "*.pstat")):
                    os.unlink(f)
    print("load average at end: %.1f %.1f %.1f" % os.getloadavg())
    for k, v in got.items():
        print("%s %s: median %.4f s, min %.4f, max %.4f" % (a.workload, k, statistics.median(v),
                                                            min(v), max(v)))
    print("%s after/before: %.4f" % (a.workload, statistics.median(got["after"]) /
                                     statistics.median(got["before"])))


if __name__ == "__main__":
    main()
