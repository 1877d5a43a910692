#!/usr/bin/env python3
"""stack-check.py BUILD [ROUNDS] [N]: what the __cyg hooks' stack check costs per
enter+leave pair (issue 13: at most 3 ns), timed.

Two preload libraries from the same tree: BUILD's, and one built with
-DPL_NO_STACK_CHECK (the check's two compares compiled out, nothing else changed; built
into BUILD-nocheck when missing). bench/native/fib N runs under each (LD_PRELOAD, trace
mode), once per clock, ROUNDS rounds (default 41), the two variants back to back in each
round, their order alternating from round to round. A run's cost is the process's CPU
time (user + system), which time spent waiting for a CPU on a shared machine does not
move. As both libraries do the same fixed work (start, symbols at the dump), the
difference of a round's two runs divided by the calls is the check's cost per pair; the
figure is the median over the rounds, with its quartiles and a 95% confidence interval
of the median (order statistics). With RAW set, the rounds' differences go to that file
as JSON lines (one per clock), to pool runs."""
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 41
N = int(sys.argv[3]) if len(sys.argv) > 3 else 32
NOCHECK = BUILD.rstrip("/") + "-nocheck"
FIB = os.path.join(BUILD, "bench/native/fib")
TMP = tempfile.mkdtemp(prefix="coprof-bench-check-")


def calls(n):
    a, b = 0, 1  # fib(n) makes 2 * fib(n + 1) - 1 calls of fib
    for _ in range(n + 1):
        a, b = b, a + b
    return 2 * a - 1


def build_nocheck():
    if not os.path.exists(os.path.join(NOCHECK, "build.ninja")):
        subprocess.run(["meson", "setup", NOCHECK, ROOT, "-Dc_args=-DPL_NO_STACK_CHECK",
                        "-Dtests=disabled", "-Dviewer=disabled", "-Dpython=disabled"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", NOCHECK, "preload/libcoprof-preload.so"], check=True,
                   stdout=subprocess.DEVNULL)


def cpu_of(lib, clock):
    env = dict(os.environ, LD_PRELOAD=lib, COPROF_CLOCK=clock, COPROF_MODE="trace",
               COPROF_OUT=os.path.join(TMP, "fib.pstat"))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([FIB, str(N)], check=True, stdout=subprocess.DEVNULL, cwd=TMP, env=env)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def median_ci(xs):
    """The ranks of a 95% confidence interval of the median (normal approximation of
    the binomial), as values."""
    xs = sorted(xs)
    n = len(xs)
    k = max(0, int(math.floor(n / 2 - 1.96 * math.sqrt(n) / 2)))
    return xs[k], xs[min(n - 1, n - 1 - k)]


def main():
    build_nocheck()
    libs = {"check": os.path.join(BUILD, "preload/libcoprof-preload.so"),
            "nocheck": os.path.join(NOCHECK, "preload/libcoprof-preload.so")}
    pairs = calls(N)
    print(f"fib({N}): {pairs} enter+leave pairs per run, {ROUNDS} rounds, CPU time")
    print("| clock | with check, ns/pair | without, ns/pair | difference: median | quartiles "
          "| 95% CI of the median |")
    print("|---|---|---|---|---|---|")
    for clock in ("cpu", "wall"):
        got = {"check": [], "nocheck": []}
        diffs = []
        for r in range(ROUNDS):
            order = ("check", "nocheck") if r % 2 == 0 else ("nocheck", "check")
            t = {k: cpu_of(libs[k], clock) for k in order}
            for k in t:
                got[k].append(t[k])
            diffs.append((t["check"] - t["nocheck"]) / pairs * 1e9)
        q = statistics.quantiles(diffs, n=4)
        lo, hi = median_ci(diffs)
        per = {k: statistics.median(v) / pairs * 1e9 for k, v in got.items()}
        print(f"| {clock} | {per['check']:.2f} | {per['nocheck']:.2f} | "
              f"{statistics.median(diffs):+.2f} | {q[0]:+.2f} .. {q[2]:+.2f} | "
              f"{lo:+.2f} .. {hi:+.2f} |", flush=True)
        if os.environ.get("RAW"):
            with open(os.environ["RAW"], "a") as f:
                f.write(json.dumps({"n": N, "clock": clock, "diffs": diffs}) + "\n")


if __name__ == "__main__":
    main()
