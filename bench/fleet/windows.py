#!/usr/bin/env python3
"""bench/fleet/windows.py BUILD [-r RUNS] [-n REQUESTS]: what writing a window every
second costs a server. resp-10k (the RESP sample plus 10,000 generated functions
called every 100 ms, so each window is a 10,000-function profile) runs under
`coprof record` in trace mode, with and without `--interval 1`, and unprofiled, in
interleaved rounds; each run serves `redis-benchmark -t get,set -n REQUESTS -c 20
--csv` and reports requests per second and p99 latency. Medians over the runs, and
what the windows were (count, size, functions), and the server's own CPU per request
(user + system time from /proc at the end of the load, over the requests served): on a
machine shared with other work, throughput and p99 follow the neighbours' load, but
the CPU a request costs the server does not. That CPU is every thread's but the sweep
thread's (named "sweep"): the serving thread's and coprof's, which writes the windows.
Builds resp-10k first (ninja; not built by default). Prints a Markdown table."""
import argparse
import glob
import marshal
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile


def run(build, variant, requests, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    exe = os.path.join(build, "bench", "fleet", "resp-10k")
    coprof = os.path.join(build, "viewer", "coprof")
    if variant == "unprofiled":
        cmd = [exe, "0"]
    else:
        cmd = [coprof, "record", "-c", "cpu", "-o", os.path.join(d, "w.%n.pstat")]
        if variant == "interval 1 s":
            cmd += ["--interval", "1"]
        cmd += ["--", exe, "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_")}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        m = re.search(r"port (\d+)", p.stdout.readline())
        if not m:
            sys.exit(f"resp-10k did not start: {p.stderr.read()}")
        b = subprocess.run(["redis-benchmark", "-p", m.group(1), "-t", "set,get", "-n",
                            str(requests), "-c", "20", "--csv"], capture_output=True, text=True,
                           timeout=600)
        cpu = 0
        for task in os.listdir(f"/proc/{p.pid}/task"):
            with open(f"/proc/{p.pid}/task/{task}/stat") as fh:
                head, tail = fh.read().rsplit(")", 1)
            if head.split("(", 1)[1] != "sweep":
                fields = tail.split()
                cpu += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    if p.returncode != 0 or "coprof" in err:
        sys.exit(f"{variant}: exit {p.returncode}: {err}")
    rows = {}
    for line in b.stdout.splitlines()[1:]:
        f = [x.strip('"') for x in line.split(",")]
        rows[f[0]] = (float(f[1]), float(f[6]))  # rps, p99 ms
    files = glob.glob(os.path.join(d, "w.*.pstat"))
    nfuncs = []
    for path in files:
        with open(path, "rb") as fh:
            nfuncs.append(len(marshal.load(fh)))
    size = sum(os.path.getsize(f) for f in files)
    shutil.rmtree(d)
    return rows, len(files), size, nfuncs, 1e6 * cpu / (2 * requests)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("-n", "--requests", type=int, default=200000)
    a = ap.parse_args()
    # resp-10k is not built by default (bench/fleet/meson.build): build it now
    b = subprocess.run(["ninja", "-C", a.build, "bench/fleet/resp-10k"], capture_output=True,
                       text=True)
    if b.returncode != 0:
        sys.exit(f"cannot build resp-10k: {b.stdout[-2000:]}{b.stderr[-2000:]}")
    variants = ["unprofiled", "no intervals", "interval 1 s"]
    res = {v: [] for v in variants}
    tmp = tempfile.mkdtemp(prefix="coprof-fleet-")
    try:
        for r in range(a.runs):
            for v in variants:
                res[v].append(run(a.build, v, a.requests, tmp))
                rows, n, size, nf, cpu = res[v][-1]
                print(f"run {r + 1} {v}: {rows} cpu/request {cpu:.1f} us, files {n} ({size} bytes), functions per "
                      f"file {sorted(nf)[:1]}..{sorted(nf)[-1:]}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| variant | SET req/s | GET req/s | SET p99 ms | GET p99 ms | server CPU us per "
          "request | files per run | functions per window | bytes per window |")
    print("|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        med = lambda t, i: statistics.median(x[0][t][i] for x in res[v])  # noqa: E731
        files = statistics.median(x[1] for x in res[v])
        nf = [n for x in res[v] for n in x[3]]
        per = statistics.median(x[2] / x[1] for x in res[v] if x[1]) if files else 0
        print(f"| {v} | {med('SET', 0):.0f} | {med('GET', 0):.0f} | {med('SET', 1):.3f} | "
              f"{med('GET', 1):.3f} | {statistics.median(x[4] for x in res[v]):.1f} | {files:g} | "
              f"{(str(min(nf)) + '-' + str(max(nf))) if nf else '-'} | {per:.0f} |")


if __name__ == "__main__":
    main()
