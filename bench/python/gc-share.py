#!/usr/bin/env python3
"""gc-share.py: how much of a profiler's cost on pyperformance's async_tree_io (6 levels
of gather, 6 wide, each of the 46,656 leaves sleeping 50 ms once) is the host's own
garbage collector, which takes over half of an unprofiled pass on 3.10 (issue 16).

usage: gc-share.py --python EXE [--rounds 3] [--passes 3] [--cprofile] [--clock cpu|wall]
                   [LABEL=]SHIM...

Each configuration (unprofiled, cProfile with --cprofile, each shim with
COPROF_CLOCK=--clock, cpu by default) is a child process that runs the tree --passes times with
asyncio.run, timing each pass and, through gc.callbacks, the collections within it;
the configurations interleave, round after round. Prints per configuration the
medians over every pass: the pass, the collector's part, the rest, and the
collections per generation; then each profiler's overhead over unprofiled, in all
and outside the collector, and as a share of cProfile's when it ran.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import asyncio, gc, sys, time
class Tree:
    async def io(self):
        await asyncio.sleep(0.05)
    async def leaf(self):
        await self.io()
    async def recurse(self, level):
        if level == 0:
            await self.leaf()
            return
        await asyncio.gather(*[self.recurse(level - 1) for _ in range(6)])
spent = [0.0]
began = [0.0]
def watch(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - began[0]
gc.callbacks.append(watch)
for _ in range(int(sys.argv[1])):
    spent[0] = 0.0
    before = [s["collections"] for s in gc.get_stats()]
    t0 = time.perf_counter()
    asyncio.run(Tree().recurse(6))
    took = time.perf_counter() - t0
    after = [s["collections"] for s in gc.get_stats()]
    print(took, spent[0], *[b - a for a, b in zip(before, after)], flush=True)
"""

CPROFILE = "import cProfile; _p = cProfile.Profile(); _p.enable()\n"


def child(py, passes, prelude, shim, tmp, clock):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "LD_PRELOAD"))}
    if shim:
        env.update(LD_PRELOAD=shim, COPROF_CLOCK=clock,
                   COPROF_OUT=os.path.join(tmp, "out.pstat"))
    p = subprocess.run([py, "-c", prelude + CHILD, str(passes)], env=env,
                       capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit("%s: exit %d\n%s" % (shim or "unprofiled", p.returncode, p.stderr))
    return [tuple(float(x) for x in line.split()) for line in p.stdout.split("\n") if line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("shims", nargs="*")
    args = ap.parse_args()
    configs = [("none", "", None)] + ([("cProfile", CPROFILE, None)] if args.cprofile else [])
    for s in args.shims:
        label, _, path = s.rpartition("=")
        configs.append((label or path, "", os.path.abspath(path)))
    rows = {c[0]: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for label, prelude, shim in configs:
                rows[label] += child(args.python, args.passes, prelude, shim, tmp, args.clock)
    med = {}
    print("| configuration | passes | pass (s) | collector (s) | rest (s) | collections |")
    print("|---|---|---|---|---|---|")
    for label, r in rows.items():
        m = [statistics.median(x[i] for x in r) for i in range(len(r[0]))]
        rest = statistics.median(x[0] - x[1] for x in r)
        med[label] = (m[0], rest)
        print("| %s | %d | %.3f | %.3f | %.3f | %s |" % (
            label, len(r), m[0], m[1], rest, " / ".join("%g" % c for c in m[2:])))
    base = med["none"]
    ref = med.get("cProfile")
    print("\n| profiler | overhead (s) | outside the collector (s) | share of cProfile's |")
    print("|---|---|---|---|")
    for label, (total, rest) in med.items():
        if label == "none":
            continue
        over, over_rest = total - base[0], rest - base[1]
        share = ""
        if ref and label != "cProfile":
            share = "%.2f, %.2f" % (over / (ref[0] - base[0]), over_rest / (ref[1] - base[1]))
        print("| %s | %.3f | %.3f | %s |" % (label, over, over_rest, share))


if __name__ == "__main__":
    sys.exit(main())
