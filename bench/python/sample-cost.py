#!/usr/bin/env python3
"""sample-cost.py: what Python sample mode costs the program, measured inside it.

usage: sample-cost.py --shim LIB --coprof BIN [--python EXE] [--rates 100,250,997]
                      [--clock cpu] [--rounds 15] [--steps 150] [--idle 0]
                      [--floor build/bench/sample/timer-floor]

One process per rate runs under the shim in sample mode with profiling off at start
(COPROF_START=0). It runs the same block of asyncio work (two tasks sharing the CPU 3:1,
as in sample-vs-pyspy.py, plus --idle tasks waiting on an Event) over and over, and
turns profiling on and off between blocks with `coprof toggle` on its own pid, in the
order off-on, on-off, ...: so profiled and unprofiled blocks alternate in one process
on the same machine load. The overhead is the median over rounds of (the profiled
block's CPU time / the unprofiled one's next to it) - 1, its spread the interquartile
range. Each window's profile is read back for its sample count (so the rate delivered,
and the cost per sample). With --floor, timer-floor's perf line (the kernel's task-clock
interrupt alone, no signal) is run at the same rate for the floor no perf-based sampler
can beat here."""
import argparse
import glob
import marshal
import os
import importlib.util
import statistics
import subprocess
import sys
import tempfile


def _load_workload():
    spec = importlib.util.spec_from_file_location(
        "sample_vs_pyspy", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "sample-vs-pyspy.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.WORKLOAD


# sample-vs-pyspy.py's workload (heavy, light, task_a, task_b, main(steps)), then the
# blocks.
WORKER = _load_workload() + r'''
import os, subprocess

coprof, rounds, steps, idle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


async def block():
    await main(steps)


def toggle():
    p = subprocess.run([coprof, "toggle", str(os.getpid())], capture_output=True, text=True)
    if p.returncode:
        sys.exit("coprof toggle: " + p.stderr)

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
never = asyncio.Event()
waiters = [loop.create_task(never.wait()) for _ in range(idle)]
loop.run_until_complete(block())  # warm-up, unprofiled
for r in range(rounds):
    order = (False, True) if r % 2 == 0 else (True, False)
    times = {}
    for on in order:
        if on:
            toggle()
        t0 = time.thread_time()
        loop.run_until_complete(block())
        times[on] = time.thread_time() - t0
        if on:
            toggle()
    print("round", times[False], times[True], flush=True)
for w in waiters:
    w.cancel()
loop.run_until_complete(asyncio.gather(*waiters, return_exceptions=True))
loop.close()
'''


def samples(path):
    """The sample count of one window's profile (the stacks' counts)."""
    with open(path, "rb") as f:
        marshal.load(f)
        ex = marshal.load(f)
    return sum(st[3] for st in ex.get("stacks", []) if not st[4])


def floor(exe, hz):
    """timer-floor's perf row at hz: its cost and its us per interrupt."""
    p = subprocess.run([exe, str(hz), "7"], capture_output=True, text=True, timeout=600)
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "perf" and len(cells) == 5:
            return f"{cells[3]}, {cells[4]} us"
    return "no perf row from timer-floor"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--coprof", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--rates", default="100,250,997")
    ap.add_argument("--clock", default="cpu")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--idle", type=int, default=0)
    ap.add_argument("--floor")
    args = ap.parse_args()
    print("load average before:", open("/proc/loadavg").read().split()[:3])
    print(f"python {args.python}, clock {args.clock}, {args.idle} idle tasks, "
          f"{args.rounds} rounds of {args.steps} steps\n")
    print("| Hz | CPU per block off (s) | overhead, median | interquartile | samples per CPU s "
          "| us per sample | floor (timer-floor perf row) |")
    print("|---|---|---|---|---|---|---|")
    for hz in [int(h) for h in args.rates.split(",")]:
        tmp = tempfile.mkdtemp(prefix="coprof-cost-")
        env = dict(os.environ, LD_PRELOAD=args.shim, COPROF_MODE="sample", COPROF_START="0",
                   COPROF_HZ=str(hz), COPROF_CLOCK=args.clock,
                   COPROF_OUT=os.path.join(tmp, "w.%n.pstat"))
        p = subprocess.run([args.python, "-c", WORKER, args.coprof, str(args.rounds),
                            str(args.steps), str(args.idle)], env=env, capture_output=True,
                           text=True, timeout=3600)
        if p.returncode:
            sys.exit(f"worker at {hz} Hz exited {p.returncode}: {p.stderr[-2000:]}")
        rounds = [tuple(map(float, l.split()[1:])) for l in p.stdout.splitlines()
                  if l.startswith("round")]
        ratios = sorted(on / off - 1 for off, on in rounds)
        q = statistics.quantiles(ratios, n=4)
        on_cpu = sum(on for _, on in rounds)
        off_cpu = sum(off for off, _ in rounds)
        n = sum(samples(f) for f in glob.glob(os.path.join(tmp, "w.*.pstat")))
        per = (on_cpu - off_cpu) / n * 1e6 if n else float("nan")
        fl = floor(args.floor, hz) if args.floor else "-"
        print(f"| {hz} | {statistics.median(off for off, _ in rounds):.3f} | "
              f"{100 * statistics.median(ratios):+.2f}% | {100 * q[0]:+.2f}% .. {100 * q[2]:+.2f}% | "
              f"{n / on_cpu:.0f} | {per:.1f} | {fl} |", flush=True)
    print("\nload average after:", open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
