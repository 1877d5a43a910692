#!/usr/bin/env python3
"""many-tasks-share.py: what sampling asyncio tasks costs with many idle tasks (issue 12),
as the share of the profiled process's own perf samples that fall in coprof's code.

usage: many-tasks-share.py --python EXE [--n 1000] [--runs 5] [--clock wall] [--hz 250]
                           SHIM [SHIM...]

Runs bench/python/many-tasks.py N 1500 under `perf record -F 1999` with each shim
(LD_PRELOAD, COPROF_MODE=sample), the shims interleaved run after run, and prints per
run: all of coprof (its three libraries), the adapter's scan (`scan`, `see_wait`,
`see_task`), the engine charging samples (`coprof_sample*`, `cp_samples_add`,
`pl_sampler_wait_record`) and libc's mutex lock and unlock (which the engine took per
sample; the GIL takes them too), then the median of each. A share of the process's own
samples does not move with the machine's load the way a time ratio does. The dump at
exit is in "all of coprof" (a fixed cost, large for a 3-second run). Needs perf.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCAN = {"scan", "see_wait", "see_task"}
ENGINE = {"cp_samples_add", "coprof_sample", "coprof_sample_n", "coprof_sample@plt",
          "coprof_sample_n@plt", "pl_sampler_wait_record"}
MUTEX = {"pthread_mutex_lock@@GLIBC_2.2.5", "__GI___pthread_mutex_unlock_usercnt"}


def shares(data):
    out = subprocess.run(["perf", "report", "-i", data, "--sort", "dso,sym", "--stdio"],
                         capture_output=True, text=True, check=True).stdout
    got = {"all": 0.0, "scan": 0.0, "engine": 0.0, "mutex": 0.0}
    for line in out.splitlines():
        f = line.split()
        if not f or line.startswith("#") or not f[0].endswith("%") or len(f) < 4:
            continue
        pct, dso, sym = float(f[0][:-1]), f[1], f[3]
        ours = "coprof" in dso
        got["all"] += pct if ours else 0
        got["scan"] += pct if ours and sym in SCAN else 0
        got["engine"] += pct if ours and sym in ENGINE else 0
        got["mutex"] += pct if sym in MUTEX else 0
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--n", default="1000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--clock", default="wall")
    ap.add_argument("--hz", default="250")
    ap.add_argument("shims", nargs="+")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="many-tasks-")
    res = {s: [] for s in a.shims}
    for r in range(a.runs):
        for i, shim in enumerate(a.shims):
            data = os.path.join(tmp, "perf.%d.data" % i)
            env = dict(os.environ, LD_PRELOAD=shim, COPROF_MODE="sample",
                       COPROF_CLOCK=a.clock, COPROF_HZ=a.hz,
                       COPROF_OUT=os.path.join(tmp, "m.%d.pstat" % i))
            subprocess.run(["perf", "record", "-q", "-F", "1999", "-o", data, "--", a.python,
                            os.path.join(HERE, "many-tasks.py"), a.n, "1500"], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            s = shares(data)
            res[shim].append(s)
            print("run %d %s: coprof %.2f%% scan %.2f%% engine %.2f%% mutex %.2f%%" %
                  (r + 1, shim, s["all"], s["scan"], s["engine"], s["mutex"]), flush=True)
    print("load average %.1f %.1f %.1f" % os.getloadavg())
    for shim, runs in res.items():
        print("median %s: " % shim + " ".join(
            "%s %.2f%%" % (k, statistics.median(x[k] for x in runs))
            for k in ("all", "scan", "engine", "mutex")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
