#!/usr/bin/env python3
"""resp_gevent.py: throughput of the two Python RESP samples, asyncio
(samples/python/resp_server.py) and gevent (samples/python/gevent_resp_server.py),
unprofiled and under coprof in trace and sample mode (cpu and wall clocks): seed 004's
asyncio-against-gevent comparison with coprof's cost added.

usage: resp_gevent.py --shim LIB [--python EXE] [--runs N] [-n REQUESTS] [--hz HZ]

Each round starts every (server, configuration) pair in turn, interleaved, runs
`redis-benchmark -t set,get -n REQUESTS -c 20 --csv` against it and stops it with
SIGINT; the figures are the median req/s over the rounds and the server's CPU time
(user + system, from /proc/PID/stat) per request while redis-benchmark ran, each with
its ratio to the same server unprofiled. On a shared machine req/s follows the load;
CPU per request much less. EXE must import gevent (Debian's python3-gevent, or a venv such as
build/venv-gevent-3.12 that tests/python/run.py makes).
"""
import argparse
import csv
import io
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SERVERS = {"asyncio": "resp_server.py", "gevent": "gevent_resp_server.py"}
CONFIGS = [("unprofiled", None), ("trace cpu", ("trace", "cpu")), ("trace wall", ("trace", "wall")),
           ("sample cpu", ("sample", "cpu")), ("sample wall", ("sample", "wall"))]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of process pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(a, server, cfg, tmp):
    port = free_port()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if cfg:
        env.update(LD_PRELOAD=a.shim, COPROF_MODE=cfg[0], COPROF_CLOCK=cfg[1], COPROF_HZ=str(a.hz),
                   COPROF_OUT=os.path.join(tmp, "out.pstat"))
    p = subprocess.Popen([a.python, os.path.join(ROOT, "samples", "python", SERVERS[server]),
                          str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        if "listening" not in p.stdout.readline():
            sys.exit("%s did not start: %s" % (server, p.stderr.read()[-1000:]))
        c0 = cpu_seconds(p.pid)
        b = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(a.n),
                            "-c", "20", "--csv"], capture_output=True, text=True, timeout=600)
        cpu = cpu_seconds(p.pid) - c0
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=120)
    rows = {r[0]: float(r[1]) for r in csv.reader(io.StringIO(b.stdout)) if len(r) > 1
            and r[0] in ("SET", "GET")}
    if len(rows) != 2:
        sys.exit("redis-benchmark said: %r %r" % (b.stdout[-500:], b.stderr[-500:]))
    rows["cpu"] = cpu / (2 * a.n) * 1e6  # us per request, SET and GET together
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--hz", type=int, default=99)
    a = ap.parse_args()
    a.shim = os.path.abspath(a.shim)
    if not shutil.which("redis-benchmark"):
        sys.exit("redis-benchmark is not installed (scripts/setup.sh)")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.runs):
            for server in SERVERS:
                for name, cfg in CONFIGS:
                    r = one_run(a, server, cfg, tmp)
                    for op, v in r.items():
                        res.setdefault((server, name, op), []).append(v)
    print("| server | coprof | SET req/s | GET req/s | vs unprofiled (SET, GET) "
          "| server CPU per request | vs unprofiled |")
    print("|---|---|---|---|---|---|---|")
    ops = ("SET", "GET", "cpu")
    for server in SERVERS:
        base = {op: statistics.median(res[(server, "unprofiled", op)]) for op in ops}
        for name, _ in CONFIGS:
            m = {op: statistics.median(res[(server, name, op)]) for op in ops}
            print("| %s | %s | %.0f | %.0f | %.2f, %.2f | %.1f us | %.2fx |"
                  % (server, name, m["SET"], m["GET"], m["SET"] / base["SET"],
                     m["GET"] / base["GET"], m["cpu"], m["cpu"] / base["cpu"]))


if __name__ == "__main__":
    main()
