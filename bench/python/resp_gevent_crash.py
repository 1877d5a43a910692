#!/usr/bin/env python3
"""resp_gevent_crash.py: the long loops behind issue 13's gevent crash (a tick that read
a greenlet's half-copied C stack as Python frames, SIGSEGV): how often the gevent RESP
server survives sample mode under redis-benchmark.

usage: resp_gevent_crash.py --shim LIB --python EXE [--asan RT] test N
       resp_gevent_crash.py --shim LIB --python EXE [--asan RT] stress N [--seconds S] [--hz HZ]

`test N` runs tests/python/run.py's greenlet_resp_toggled_sample N times (the server
started off, toggled three times, stopped by SIGINT). `stress N` starts the server N
times sampling from its first instruction at HZ (default 5000, the reproducer: 3 of 4
20-s runs died before the fix), drives it with redis-benchmark for S seconds and stops
it with SIGINT. Both print one line per run and a total; the exit status is 1 when any
run failed. EXE must import gevent (a build/venv-gevent-X.Y made by the tests, or
Debian's python3 with python3-gevent). With --asan, the ASan runtime is preloaded first
(an ASan build's shim). Run it under `nice -n 10` on a shared machine.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_test(a):
    env = dict(os.environ, COPROF_BIN=a.coprof)
    cmd = [sys.executable, os.path.join(ROOT, "tests", "python", "run.py"), "--python", a.python,
           "--shim", a.shim, "--asan", a.asan, "greenlet_resp_toggled_sample"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return p.returncode == 0, last if p.returncode == 0 else (p.stdout + p.stderr)[-1500:]


def run_stress(a, tmp):
    port = free_port()
    env = dict(os.environ, COPROF_MODE="sample", COPROF_CLOCK="cpu", COPROF_HZ=str(a.hz),
               COPROF_START="1", COPROF_OUT=os.path.join(tmp, "out.%n.pstat"))
    env.pop("PYTHONPATH", None)
    env["LD_PRELOAD"] = (a.asan + " " if a.asan else "") + a.shim
    if a.asan:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    p = subprocess.Popen([a.python, os.path.join(ROOT, "samples", "python",
                                                 "gevent_resp_server.py"), str(port)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = None
    try:
        if "listening" not in p.stdout.readline():
            p.wait(timeout=60)
            return False, "did not start, exit %r: %s" % (p.returncode, p.stderr.read()[-1000:])
        b = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set,get", "-n",
                              "100000000", "-c", "20", "-q"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        end = time.monotonic() + a.seconds
        while time.monotonic() < end and p.poll() is None:
            time.sleep(0.2)
    finally:
        if b is not None:
            b.kill()
            b.wait()
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    ok = p.returncode == 0 and "gevent_resp_server: stopped" in out
    return ok, "exit %d" % p.returncode if ok else "exit %d: %s" % (p.returncode, err[-1500:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--asan", default="")
    ap.add_argument("--coprof", help="the coprof CLI (default: beside the shim's build)")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--hz", type=int, default=5000)
    ap.add_argument("kind", choices=("test", "stress"))
    ap.add_argument("n", type=int)
    a = ap.parse_args()
    a.shim = os.path.abspath(a.shim)
    if not a.coprof:
        a.coprof = os.path.join(os.path.dirname(os.path.dirname(a.shim)), "viewer", "coprof")
    good = 0
    with tempfile.TemporaryDirectory(prefix="coprof-gcrash-") as tmp:
        for i in range(a.n):
            ok, said = run_test(a) if a.kind == "test" else run_stress(a, tmp)
            good += ok
            print("%3d %s %s" % (i + 1, "ok  " if ok else "FAIL", said), flush=True)
    print("%s %s on %s: %d of %d ok" % (a.kind, os.path.basename(a.shim), a.python, good, a.n))
    return 0 if good == a.n else 1


sys.exit(main())
