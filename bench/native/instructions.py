#!/usr/bin/env python3
"""instructions.py BUILD LABEL=SHIM...: the shim's trace-mode cost in instructions
under valgrind's callgrind, the same figure at any load (this VM's timings move by a
third between runs): the A/B of a change that must not move the hot paths.

Two fixed workloads, each run unprofiled and under each SHIM (COPROF_CLOCK=cpu):
- fib: bench/native/fib 22, 2*fib(23)-1 = 57313 instrumented calls;
- sched: samples/native/sched 2000 0 0, 2000 rounds of three ucontext tasks that do no
  work, so 12000 swapcontext calls and the calls around them.
A figure is the run's instructions less the same program's empty run (fib 1, sched 0)
in the same column, less the unprofiled run's: what the shim adds per workload, which
leaves out start-up and the dump at exit. Printed per fib call and per sched round.
BUILD gives the programs; SHIM is a libcoprof-preload.so (of BUILD or another build)."""
import marshal
import os
import re
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1])
SHIMS = [a.partition("=")[::2] for a in sys.argv[2:]]
FIB_CALLS = 2 * 28657 - 1
ROUNDS = 2000
WORK = {
    "fib": ([os.path.join(BUILD, "bench/native/fib"), "22"],
            [os.path.join(BUILD, "bench/native/fib"), "1"], FIB_CALLS, "call"),
    "sched": ([os.path.join(BUILD, "samples/native/sched"), str(ROUNDS), "0", "0"],
              [os.path.join(BUILD, "samples/native/sched"), "0", "0", "0"], ROUNDS, "round"),
}
TMP = tempfile.mkdtemp(prefix="coprof-instr-")


def clock_impl(path):
    """The clock implementation a profile names in its notes."""
    with open(path, "rb") as f:
        marshal.load(f)
        notes = marshal.load(f).get("notes", [])
    return next((n.split(": ", 1)[1] for n in notes if n.startswith("clock implementation")), "?")


def instructions(argv, shim, tries=8):
    """The instructions callgrind collects for argv, under shim if one is given. coprof
    calibrates the TSC at start-up, which callgrind's slowness can fail; it then reads
    the kernel's clock, more instructions: such a run is made again."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    if shim:
        env.update(LD_PRELOAD=os.path.abspath(shim), COPROF_CLOCK="cpu",
                   COPROF_OUT=os.path.join(TMP, "%p.pstat"))
    p = subprocess.run(["valgrind", "--tool=callgrind",
                        "--callgrind-out-file=" + os.path.join(TMP, "cg.out")] + argv,
                       env=env, capture_output=True, text=True, check=True)
    clocks = [clock_impl(os.path.join(TMP, f)) for f in os.listdir(TMP) if f.endswith(".pstat")]
    for f in os.listdir(TMP):
        os.unlink(os.path.join(TMP, f))
    if clocks and not all(c.startswith("tsc") for c in clocks):
        if tries > 1:
            return instructions(argv, shim, tries - 1)
        raise SystemExit("%s: clock %s under callgrind, %d tries" % (argv, clocks, 8))
    return int(re.search(r"Collected : (\d+)", p.stderr).group(1))


def main():
    cols = [("unprofiled", "")] + SHIMS
    for name, (full, empty, n, unit) in WORK.items():
        added = {label: instructions(full, shim) - instructions(empty, shim) for label, shim in cols}
        print("%s: %s" % (name, "  ".join(
            "%s %.1f/%s" % (label, (added[label] - added["unprofiled"]) / n, unit)
            for label, _ in SHIMS)), flush=True)
    os.rmdir(TMP)


main()
