#!/usr/bin/env python3
"""toggle.py: how much of a toggle window the profile covers, in programs that poll in a
tight loop (tests/python/progs/busy.py: the loop at module level, in a function, in a
second thread), the case where the control thread once waited for the GIL for seconds.

usage: toggle.py --shim build/preload/libcoprof-preload.so [--windows 10] [--python EXE ...]

Each window is opened and closed by SIGUSR2, 0.5 s apart, under the wall clock. What
a window missed is the time between the two signals, as the sender measured it, less
the longest time a thread of the program was recorded in it; a window with no file
missed all of it. Prints a Markdown table: per interpreter, the windows sent, the
windows written, and the median, 90th percentile and largest time missed.
"""
import argparse
import glob
import marshal
import os
import signal
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUSY = os.path.join(HERE, "..", "..", "tests", "python", "progs", "busy.py")
SPAN = 0.5


def recorded(path):
    """The longest time a thread was recorded in the window file at path."""
    with open(path, "rb") as f:
        marshal.load(f)
        extras = marshal.load(f)
    return max(t["ttot"] for t in extras["threads"])


def windows(python, shim, where, n, tmp):
    """Opens n windows in busy.py `where`: [(span, recorded or None)]."""
    tmpl = os.path.join(tmp, "%s.%%n.pstat" % where)
    env = dict(os.environ, LD_PRELOAD=shim, COPROF_CLOCK="wall", COPROF_OUT=tmpl,
               COPROF_START="0")
    p = subprocess.Popen([python, BUSY, where], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    spans = []
    try:
        if p.stdout.readline() != b"ready\n":
            raise SystemExit("%s busy.py %s did not start" % (python, where))
        for _ in range(n):
            time.sleep(0.2)
            t0 = time.monotonic()
            os.kill(p.pid, signal.SIGUSR2)
            time.sleep(SPAN)
            os.kill(p.pid, signal.SIGUSR2)
            spans.append(time.monotonic() - t0)
        time.sleep(0.2)
        p.communicate(b"go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # Files are numbered in the order written; a lost window takes no number, so the
    # written ones are matched to the first spans (what they missed is then a floor).
    files = sorted(glob.glob(tmpl.replace("%n", "*")),
                   key=lambda f: int(f.rsplit(".", 2)[-2]))
    got = [recorded(f) for f in files]
    return [(s, got[i] if i < len(got) else None) for i, s in enumerate(spans)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--windows", type=int, default=10, help="per program and interpreter")
    ap.add_argument("--python", action="append")
    args = ap.parse_args()
    pythons = args.python or (["/usr/bin/python3"] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3"))))
    print("| python | windows sent | written | missed, median | p90 | largest |")
    print("|---|---|---|---|---|---|")
    for py in pythons:
        results = []
        with tempfile.TemporaryDirectory(prefix="coprof-toggle-") as tmp:
            for where in ("module", "func", "thread"):
                results += windows(py, os.path.abspath(args.shim), where, args.windows, tmp)
        missed = sorted((s - r if r is not None else s) * 1000 for s, r in results)
        written = sum(r is not None for _, r in results)
        print("| %s | %d | %d | %.1f ms | %.1f ms | %.1f ms |"
              % (py, len(results), written, statistics.median(missed),
                 missed[int(0.9 * (len(missed) - 1))], missed[-1]), flush=True)


main()
