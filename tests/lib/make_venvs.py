#!/usr/bin/env python3
"""make_venvs.py BUILD [TEST...]: makes the PyPI venvs BUILD's tests (or the TESTs
named) would make on first use
(tests/python's gevent venv per Python, tests/attach's aiohttp venv per Python,
tests/snakeviz's venv-snakeviz), each by the test driver's own code (run.py
--make-venv, attach.py --make-venv, --venv-only), all at once. scripts/test.sh
runs it beside the compiler on a fresh build directory: half of making them is pip
waiting on the network, which otherwise held test slots (the other cases of the same
Python waited on the venv's lock). Where a venv is there already it only checks it.
It judges nothing: a venv it could not make is made (or reported) by the test again.
Prints one line per venv; exits 0."""
import concurrent.futures
import json
import os
import subprocess
import sys


def jobs(build, names):
    """The commands that make each venv, from the tests meson registered in BUILD (those
    named, if any)."""
    tests = json.loads(subprocess.run(["meson", "introspect", "--tests", build],
                                      capture_output=True, text=True, check=True).stdout)
    out = {}
    for t in tests:
        if names and t["name"] not in names:
            continue
        cmd = t["cmd"]
        if any(c.endswith(os.path.join("tests", "python", "run.py")) for c in cmd) and \
                cmd[-1].startswith("greenlet"):
            opt = dict(zip(cmd, cmd[1:]))
            key = ("gevent", opt["--python"])
            out.setdefault(key, cmd[:2] + ["--python", opt["--python"], "--shim", opt["--shim"],
                                           "--make-venv"])
        elif any(c.endswith(os.path.join("tests", "attach", "attach.py")) for c in cmd) and \
                cmd[-2] == "python-aiohttp":
            out.setdefault(("aiohttp", cmd[-1]), cmd[:2] + ["--make-venv", cmd[-1],
                                                            os.path.abspath(build)])
        elif any(c.endswith(os.path.join("tests", "snakeviz", "run.py")) for c in cmd):
            out.setdefault(("snakeviz", ""), cmd[:4] + ["--venv-only"])
    return out


def make(what, cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return "%s %s: %s" % (what[0], what[1] or "-", (p.stdout + p.stderr).strip()[-300:]
                          or "exit %d" % p.returncode)


def main():
    try:
        todo = jobs(sys.argv[1], set(sys.argv[2:]))
    except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
        print("make_venvs: no test list: %s" % e)
        return 0
    with concurrent.futures.ThreadPoolExecutor(max(len(todo), 1)) as pool:
        for line in pool.map(lambda kv: make(*kv), todo.items()):
            print(line, flush=True)
    return 0


sys.exit(main())
