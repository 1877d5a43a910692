#!/usr/bin/env python3
"""sample-vs-pyspy.py: coprof's Python sampling against py-spy and Austin, side by side
in one run (runs interleaved, median of --runs): overhead and accuracy at each rate.

usage: sample-vs-pyspy.py --shim build/preload/libcoprof-preload.so [--python EXE]
                          [--rates 100,250,997] [--runs 3] [--venv build/venv-pyspy]

The program is a CPU-bound asyncio workload with known splits: heavy() does twice the
work of light() (2:1, share 0.667), and task a runs three rounds for each of task b's
(3:1, share 0.75). Overhead is the program's wall time and its CPU time (measured inside
it, around its work) against the unprofiled runs', minus 1: py-spy and Austin read from
another process (their cost shows in wall time: py-spy stops the program at each sample
unless --nonblocking), coprof's handler runs in the program (its cost is CPU time). Accuracy is heavy's share of heavy+light
and task a's share of a+b in each profiler's output (from the stacks for every tool;
for coprof also from its per-task tables, the contexts of tasks "a" and "b"). py-spy (`record --rate N`, with and
without --nonblocking) and Austin (`austin -i 1e6/N`, austin-dist) are installed from
PyPI into a venv this script makes (--venv). Prints a Markdown table and the load
average before and after.
"""
import argparse
import marshal
import os
import statistics
import subprocess
import sys
import tempfile

# The workload, shared with sample-cost.py: heavy:light 2:1, task a:task b 3:1.
WORKLOAD = r'''
import asyncio, sys, time

def heavy(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

def light(n):
    x = 0
    for i in range(n):
        x += i * i
    return x

def round_():
    heavy(4000)
    light(2000)

async def task_a(steps):
    for _ in range(steps):
        for _ in range(3):
            round_()
        await asyncio.sleep(0)

async def task_b(steps):
    for _ in range(steps):
        round_()
        await asyncio.sleep(0)

async def main(steps):
    await asyncio.gather(asyncio.create_task(task_a(steps), name="a"),
                         asyncio.create_task(task_b(steps), name="b"))

'''

PROG = WORKLOAD + r'''
steps = int(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
asyncio.run(main(steps))
print("elapsed", time.perf_counter() - t0, time.process_time() - c0)
'''


def venv_tools(venv, python):
    """py-spy and austin in a venv of their own (made and filled on first use)."""
    if not os.path.exists(os.path.join(venv, "bin", "pip")):
        subprocess.run([python, "-m", "venv", venv], check=True)
    pip = os.path.join(venv, "bin", "pip")
    tools = {}
    for pkg, exe in (("py-spy", "py-spy"), ("austin-dist<3.7", "austin")):
        path = os.path.join(venv, "bin", exe)
        if not os.path.exists(path):
            # austin-dist 3.7+ needs glibc 2.38 (Debian 13); 3.6 runs on Debian 12
            subprocess.run([pip, "install", "-q", pkg], check=False)
        if os.path.exists(path):
            tools[exe] = path
    return tools


def shares_from_stacks(rows):
    """rows: (frames innermost-last as names, weight). heavy/(heavy+light), a/(a+b)."""
    h = l = a = b = 0.0
    for names, w in rows:
        if "heavy" in names:
            h += w
        if "light" in names:
            l += w
        if "task_a" in names:
            a += w
        if "task_b" in names:
            b += w
    return (h / (h + l) if h + l else float("nan"), a / (a + b) if a + b else float("nan"))


def shares_coprof(path):
    """The shares from the stacks, plus task a's share from the per-task tables (the
    tasks' contexts, named "a" and "b": sampling per asyncio task)."""
    with open(path, "rb") as f:
        marshal.load(f)
        ex = marshal.load(f)
    rows = []
    for st in ex["stacks"]:
        frames, count = st[2], st[3]
        rows.append(({fr[2].split(".")[-1] for fr in frames}, count))
    ttot = {t["name"]: t["ttot"] for t in ex.get("tasks", [])}
    a, b = ttot.get("a", 0.0), ttot.get("b", 0.0)
    return shares_from_stacks(rows) + (a / (a + b) if a + b else float("nan"),)


def shares_pyspy(path):
    rows = []
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            names = {fr.split(" (")[0].split(".")[-1] for fr in stack.split(";")}
            rows.append((names, float(count)))
    return shares_from_stacks(rows)


def shares_austin(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            stack, _, metric = line.rstrip("\n").rpartition(" ")
            names = set()
            for fr in stack.split(";"):
                parts = fr.split(":")
                if len(parts) >= 3:
                    names.add(parts[-2].split(".")[-1])
            try:
                rows.append((names, float(metric.split(",")[0])))
            except ValueError:
                pass
    return shares_from_stacks(rows)


def common_args(runs):
    """The options this script shares with sample-resp.py."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--rates", default="100,250,997")
    ap.add_argument("--runs", type=int, default=runs)
    ap.add_argument("--venv", default=os.path.join("build", "venv-pyspy"))
    return ap


def main():
    ap = common_args(3)
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args()
    tools = venv_tools(args.venv, sys.executable)
    rates = [int(r) for r in args.rates.split(",")]
    tmp = tempfile.mkdtemp(prefix="pysample-bench-")
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write(PROG)

    def run(kind, rate):
        out = os.path.join(tmp, "out")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        cmd = [args.python, prog, str(args.steps)]
        if kind == "coprof":
            env.update(LD_PRELOAD=args.shim, COPROF_MODE="sample", COPROF_HZ=str(rate),
                       COPROF_CLOCK="cpu", COPROF_OUT=out + ".pstat")
        elif kind.startswith("py-spy"):
            cmd = [tools["py-spy"], "record", "--rate", str(rate), "--format", "raw",
                   "-o", out + ".txt"] + (["--nonblocking"] if "nb" in kind else []) + \
                  ["--"] + cmd
        elif kind == "austin":
            cmd = [tools["austin"], "-i", str(1000000 // rate), "-o", out + ".austin"] + cmd
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        # austin 3.6 attaches to a static python3 before the interpreter is mapped in
        # about half of its starts and exits 32 having sampled nothing ("not a Python
        # process"); such a start is retried, and counted on stderr.
        for _ in range(10):
            if kind != "austin" or p.returncode != 32:
                break
            print("austin: start not recognised, retried", file=sys.stderr)
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit("%s failed: %s" % (kind, p.stderr[-1500:]))
        line = [l for l in p.stdout.splitlines() if l.startswith("elapsed")][-1].split()
        sh = (float("nan"), float("nan"), float("nan"))
        if kind == "coprof":
            sh = shares_coprof(out + ".pstat")
        elif kind.startswith("py-spy"):
            sh = shares_pyspy(out + ".txt") + (float("nan"),)
        elif kind == "austin":
            sh = shares_austin(out + ".austin") + (float("nan"),)
        return (float(line[1]), float(line[2])), sh

    kinds = ["coprof", "py-spy", "py-spy-nb"] + (["austin"] if "austin" in tools else [])
    load0 = os.getloadavg()
    rows = []
    for rate in rates:
        times = {k: [] for k in ["none"] + kinds}
        shares = {k: [] for k in kinds}
        for _ in range(args.runs):
            for k in ["none"] + kinds:
                t, sh = run(k, rate)
                times[k].append(t)
                if k != "none":
                    shares[k].append(sh)
        base = statistics.median(t[0] for t in times["none"])
        cbase = statistics.median(t[1] for t in times["none"])
        for k in kinds:
            t = statistics.median(x[0] for x in times[k])
            c = statistics.median(x[1] for x in times[k])
            fs = statistics.median(s[0] for s in shares[k])
            ts = statistics.median(s[1] for s in shares[k])
            tt = statistics.median(s[2] for s in shares[k])
            rows.append((rate, k, base, t, t / base - 1, c / cbase - 1, fs, ts, tt))
    load1 = os.getloadavg()
    print("python %s, %d runs each, load average %.1f before, %.1f after" %
          (args.python, args.runs, load0[0], load1[0]))
    print()
    print("| Hz | profiler | unprofiled s | profiled s | wall overhead | CPU overhead "
          "| heavy share (0.667) | task a share (0.750) | task a, task table |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, k, base, t, ov, cov, fs, ts, tt in rows:
        print("| %d | %s | %.3f | %.3f | %+.1f%% | %+.1f%% | %.3f | %.3f | %s |" %
              (rate, k, base, t, ov * 100, cov * 100, fs, ts,
               "-" if tt != tt else "%.3f" % tt))


if __name__ == "__main__":
    main()
