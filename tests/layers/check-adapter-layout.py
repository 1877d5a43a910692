#!/usr/bin/env python3
"""check-adapter-layout.py PYTHON SHIM OTHER_LAYOUT [ASAN_RUNTIME]: the CPython adapter
loads only next to a libcoprof.so built with the layout of the engine structs it
inlines (engine-inline.h). Under the shim alone, a Python program is profiled; with
OTHER_LAYOUT (an engine of another layout, as far as the adapter can tell) preloaded
first, it runs unprofiled, prints what it prints unprofiled, and stderr holds one line
that says why."""
import os
import subprocess
import sys
import tempfile

PROG = "def work(n):\n    return sum(i * i for i in range(n))\n\nprint(work(100000))\n"


def run(python, preload, out):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "PYTHON"))}
    env.update(LD_PRELOAD=" ".join(p for p in preload if p), COPROF_OUT=out,
               ASAN_OPTIONS="detect_leaks=0")  # CPython itself leaks at exit by design
    return subprocess.run([python, "-c", PROG], env=env, capture_output=True, text=True,
                          timeout=120)


def main():
    python, shim, other = sys.argv[1:4]
    asan = sys.argv[4] if len(sys.argv) > 4 else ""
    expect = subprocess.run([python, "-c", PROG], capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.pstat")
        r = run(python, [asan, shim], out)
        if r.returncode != 0 or r.stdout != expect or r.stderr or not os.path.exists(out):
            sys.exit("the shim alone: exit %d, stdout %r, stderr %r, profile %s"
                     % (r.returncode, r.stdout, r.stderr, os.path.exists(out)))
        os.unlink(out)
        r = run(python, [asan, other, shim], out)
        lines = r.stderr.splitlines()
        if r.returncode != 0 or r.stdout != expect:
            sys.exit("another layout: exit %d, stdout %r (unprofiled: %r)"
                     % (r.returncode, r.stdout, expect))
        if len(lines) != 1 or not lines[0].startswith(
                "coprof: the Python adapter was built against another libcoprof.so"):
            sys.exit("another layout: stderr %r, not one line that says why" % r.stderr)
        if os.path.exists(out):
            sys.exit("another layout: Python was profiled all the same")
    print("ok: %s" % lines[0])


main()
