#!/usr/bin/env python3
"""stop.py: how long `coprof attach` keeps a process from running, against py-spy's
attach (`py-spy dump --pid`), on the same Python program (gap.py: one thread in a
tight loop that reports the longest pause between two of its iterations, every 250
ms).

Each run starts gap.py afresh, lets it settle 1 s, runs the tool once, and takes the
longest pause of the windows while the tool ran (and the next one), against the
longest pause of the windows before it (the machine's own noise, the baseline). coprof
attach also says how long it held its thread in a ptrace stop. Medians of --runs.
coprof attaches in trace mode (its default for Python) and detaches at once; py-spy
dumps the stacks once (it stops the process while it reads them, unless
--nonblocking).

The same for a native program in sample mode (--native: tests/attach/target.c's
`gaps` mode, the same report from a C loop), coprof alone.

usage: stop.py --coprof BIN --python PY --py-spy PYSPY [--native TARGET] [--runs N]"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def gaps(text):
    return [float(x) for x in re.findall(r"^gap ([0-9.]+)$", text, re.M)]


def one(tool_cmd, target, out):
    with open(out, "w") as f:
        p = subprocess.Popen(target, stdout=f, stderr=subprocess.STDOUT)
    try:
        while "ready" not in open(out).read():
            time.sleep(0.01)
        time.sleep(1.0)
        before = len(gaps(open(out).read()))
        t0 = time.monotonic()
        r = subprocess.run([c.replace("PID", str(p.pid)) for c in tool_cmd],
                           capture_output=True, text=True)
        wall = time.monotonic() - t0
        time.sleep(0.6)
        g = gaps(open(out).read())
        if r.returncode != 0:
            sys.exit("%s failed: %s" % (tool_cmd[0], r.stderr))
        return {"base": max(g[1:before]), "during": max(g[before:before + 2 + int(wall / 0.25)]),
                "wall": wall * 1e3, "stdout": r.stdout}
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coprof", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--py-spy", required=True)
    ap.add_argument("--native", help="tests/attach's target, built (build/tests/attach/attach-target)")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    out = "/tmp/coprof-bench-gap.%d.out" % os.getpid()
    tools = {
        "coprof attach + detach": ["sh", "-c", "%s attach -o /tmp/coprof-bench-%%p.pstat PID "
                                   "&& %s detach PID" % (a.coprof, a.coprof)],
        "py-spy dump": [a.py_spy, "dump", "--pid", "PID"],
        "py-spy dump --nonblocking": [a.py_spy, "dump", "--nonblocking", "--pid", "PID"],
    }
    targets = {name: [a.python, os.path.join(HERE, "gap.py")] for name in tools}
    if a.native:
        tools["coprof attach + detach, native (sample)"] = tools["coprof attach + detach"]
        targets["coprof attach + detach, native (sample)"] = [a.native, "gaps"]
    print("| tool | longest pause, ms (baseline) | tool's wall ms | coprof's ptrace stop, ms |")
    print("|---|---|---|---|")
    for name, cmd in tools.items():
        rows = [one(cmd, targets[name], out) for _ in range(a.runs)]
        stops = [float(m) for r in rows for m in
                 re.findall(r"stopped ([0-9.]+) ms", r["stdout"])]
        print("| %s | %.2f (%.2f) | %.1f | %s |" % (
            name, statistics.median(r["during"] for r in rows),
            statistics.median(r["base"] for r in rows),
            statistics.median(r["wall"] for r in rows),
            "%.2f" % statistics.median(stops) if stops else "-"))
        for f in os.listdir("/tmp"):
            if f.startswith("coprof-bench-") and f.endswith(".pstat"):
                os.unlink(os.path.join("/tmp", f))
    os.unlink(out)


if __name__ == "__main__":
    main()
