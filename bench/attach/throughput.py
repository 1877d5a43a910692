#!/usr/bin/env python3
"""throughput.py: a server's throughput under load, unprofiled, preloaded, attached with
`coprof attach` and after `coprof detach`, side by side in one run.

Two servers: Debian's redis-server under `redis-benchmark -t get,set` (coprof in sample
mode; its figure is SET's and GET's requests over their time together), and
tests/attach/aioserver.py, an aiohttp server, under `ab -k -c 8` (trace mode, wall
clock). Each run, for each server, starts it twice, in an order that alternates from
run to run:
- plain: a warm-up load, then the load unprofiled; `coprof attach` and the load again
  (attached); `coprof detach` and the load again (after detach);
- preloaded (`LD_PRELOAD=libcoprof-preload.so COPROF_MODE=... COPROF_START=1`, the same
  mode and clock as the attach): a warm-up load, then the load (preloaded).
Prints a markdown table: requests/s median, min and max of --runs, each median as a
ratio to the unprofiled one, and the median (min-max) of each run's own ratio to the
same run's unprofiled figure, which a machine whose other load comes and goes from run
to run disturbs less; the server's CPU time per request (all its threads, user and
system, from /proc/PID/stat: the profiler's own threads count), which other load on
the machine moves much less than requests/s; and the load average before and after.
With --perf, `perf record -p` samples the server during the attached and the
preloaded loads, and a second table gives the part of those samples in coprof's own
objects (libcoprof*.so, coprof-python*.so): a share of the server's own CPU, which the
machine's other load does not move, so it compares attached with preloaded where
requests/s cannot.

usage: throughput.py --coprof BIN --lib LIBCOPROF_PRELOAD --python PY_WITH_AIOHTTP
                     [--runs N] [--redis-n N] [--ab-n N] [--perf]"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
AIOSERVER = os.path.join(HERE, "..", "..", "tests", "attach", "aioserver.py")
VARIANTS = ("unprofiled", "preloaded", "attached", "after detach")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_text(path, words, p, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        with open(path) as f:
            text = f.read()
        if words in text:
            return text
        if p.poll() is not None:
            break
        time.sleep(0.02)
    sys.exit("the server did not start: %r" % open(path).read()[-400:])


class Redis:
    name = "redis-server 7 (sample)"
    mode = ["--mode", "sample"]
    env = {"COPROF_MODE": "sample"}

    def __init__(self, n):
        self.n = n
        self.requests = 2 * n

    def start(self, tmp, env):
        self.port = free_port()
        log = os.path.join(tmp, "redis.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--daemonize", "no",
                                  "--dir", tmp], stdout=f, stderr=subprocess.STDOUT, env=env,
                                 cwd=tmp)
        wait_text(log, "Ready to accept connections", p)
        return p

    def load(self):
        b = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port),
                            "-t", "get,set", "-n", str(self.n)], capture_output=True, text=True)
        done = re.findall(r"(\d+) requests completed in ([0-9.]+) seconds", b.stdout)
        if b.returncode != 0 or len(done) != 2 or any(int(n) != self.n for n, _ in done):
            sys.exit("redis-benchmark: %d %r" % (b.returncode, b.stdout[-400:] + b.stderr))
        rps = [float(x) for x in re.findall(r"throughput summary: ([0-9.]+) requests per second",
                                            b.stdout)]
        # the two tests' requests over their time together
        return 2 * self.n / sum(self.n / r for r in rps)


class Aiohttp:
    name = "aiohttp server (trace, wall)"
    mode = ["--mode", "trace", "-c", "wall"]
    env = {"COPROF_MODE": "trace", "COPROF_CLOCK": "wall"}

    def __init__(self, python, n):
        self.python, self.n, self.requests = python, n, n

    def start(self, tmp, env):
        out = os.path.join(tmp, "aio.out")
        with open(out, "w") as f:
            p = subprocess.Popen([self.python, AIOSERVER], stdout=f, stderr=subprocess.STDOUT,
                                 env=env, cwd=tmp)
        text = wait_text(out, "ready port", p)
        self.port = int(re.search(r"ready port (\d+)", text).group(1))
        return p

    def load(self):
        b = subprocess.run(["ab", "-k", "-q", "-n", str(self.n), "-c", "8",
                            "http://127.0.0.1:%d/" % self.port], capture_output=True, text=True)
        done = re.search(r"^Complete requests:\s+(\d+)$", b.stdout, re.M)
        failed = re.search(r"^Failed requests:\s+(\d+)$", b.stdout, re.M)
        if (b.returncode != 0 or not done or int(done.group(1)) != self.n or not failed
                or failed.group(1) != "0" or "Non-2xx" in b.stdout):
            sys.exit("ab: %d %r" % (b.returncode, b.stdout[-600:] + b.stderr))
        return float(re.search(r"^Requests per second:\s+([0-9.]+)", b.stdout, re.M).group(1))


def cpu_seconds(pid):
    """The CPU time (user and system) of every thread of pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PERF = None  # --perf: a directory for perf's files


def coprof_share(data):
    """The percentage of perf's samples in data that fell in coprof's objects."""
    r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso",
                        "--stdio"], capture_output=True, text=True)
    share = 0.0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)", line)
        if m and "coprof" in m.group(2):
            share += float(m.group(1))
    return share


def measure(server, pid, sampled=False):
    """One load: (requests/s, the server's CPU microseconds per request), and with
    --perf, for a profiled server (sampled), coprof's share of its samples."""
    rec = None
    if PERF and sampled:
        data = os.path.join(PERF, "perf.data")
        rec = subprocess.Popen(["perf", "record", "-q", "-F", "999", "-p", str(pid), "-o",
                                data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)  # perf is sampling before the load starts
    before = cpu_seconds(pid)
    rps = server.load()
    cpu = (cpu_seconds(pid) - before) * 1e6 / server.requests
    if rec is None:
        return rps, cpu
    rec.send_signal(signal.SIGINT)
    rec.wait()
    return rps, cpu, coprof_share(data)


def clean_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_")}
    env.pop("LD_PRELOAD", None)
    return env


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def plain(server, coprof, tmp):
    """unprofiled, attached and after detach, in one process."""
    p = server.start(tmp, clean_env())
    try:
        server.load()  # warm-up
        got = {"unprofiled": measure(server, p.pid)}
        out = os.path.join(tmp, "a-%p.pstat")
        r = subprocess.run([coprof, "attach"] + server.mode + ["-o", out, str(p.pid)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("coprof attach: %r" % r.stderr)
        got["attached"] = measure(server, p.pid, sampled=True)
        r = subprocess.run([coprof, "detach", str(p.pid)], capture_output=True, text=True)
        if r.returncode != 0 or "wrote" not in r.stdout:
            sys.exit("coprof detach: %r %r" % (r.stdout, r.stderr))
        got["after detach"] = measure(server, p.pid)
        return got
    finally:
        stop(p)


def preloaded(server, lib, tmp):
    env = clean_env()
    env.update(server.env, LD_PRELOAD=lib, COPROF_START="1",
               COPROF_OUT=os.path.join(tmp, "p-%p.pstat"))
    p = server.start(tmp, env)
    try:
        server.load()  # warm-up
        got = {"preloaded": measure(server, p.pid, sampled=True)}
    finally:
        stop(p)
    # the shim profiled all along: it writes its file as the server exits
    if not os.path.exists(os.path.join(tmp, "p-%d.pstat" % p.pid)):
        sys.exit("the preloaded server wrote no profile: %r" % os.listdir(tmp))
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coprof", required=True)
    ap.add_argument("--lib", required=True, help="build/preload/libcoprof-preload.so")
    ap.add_argument("--python", required=True, help="a Python that imports aiohttp")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--redis-n", type=int, default=100000)
    ap.add_argument("--ab-n", type=int, default=4000)
    ap.add_argument("--perf", action="store_true",
                    help="also coprof's share of the server's samples (perf record)")
    a = ap.parse_args()
    global PERF
    for tool in ("redis-server", "redis-benchmark", "ab") + (("perf",) if a.perf else ()):
        if not shutil.which(tool):
            sys.exit("%s is not installed (scripts/setup.sh)" % tool)
    lib = os.path.realpath(a.lib)
    if a.perf:
        PERF = tempfile.mkdtemp(prefix="coprof-bench-perf-")
    servers = [Redis(a.redis_n), Aiohttp(os.path.abspath(a.python), a.ab_n)]
    rows = {(s.name, v): [] for s in servers for v in VARIANTS}
    load_before = os.getloadavg()
    for run in range(a.runs):
        for s in servers:
            tmp = tempfile.mkdtemp(prefix="coprof-bench-tp-")
            try:
                order = [plain, preloaded] if run % 2 == 0 else [preloaded, plain]
                for f in order:
                    got = f(s, a.coprof if f is plain else lib, tmp)
                    for v, fig in got.items():
                        rows[(s.name, v)].append(fig)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        print("run %d of %d done" % (run + 1, a.runs), file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print("| server | variant | requests/s median (min-max) | / unprofiled's | each run's ratio: "
          "median (min-max) | server CPU µs/request median (min-max) | / unprofiled's |")
    print("|---|---|---|---|---|---|---|")
    for s in servers:
        unprof = rows[(s.name, "unprofiled")]
        base = statistics.median(f[0] for f in unprof)
        cpu_base = statistics.median(f[1] for f in unprof)
        for v in VARIANTS:
            rps = [f[0] for f in rows[(s.name, v)]]
            cpu = [f[1] for f in rows[(s.name, v)]]
            own = [r / u[0] for r, u in zip(rps, unprof)]
            print(("| %s | %s | %.0f (%.0f-%.0f) | %.3f | %.3f (%.3f-%.3f) "
                   "| %.1f (%.1f-%.1f) | %.3f |")
                  % (s.name, v, statistics.median(rps), min(rps), max(rps),
                     statistics.median(rps) / base, statistics.median(own), min(own), max(own),
                     statistics.median(cpu), min(cpu), max(cpu), statistics.median(cpu) / cpu_base))
    if PERF:
        print()
        print("| server | variant | coprof's share of the server's perf samples, %: "
              "median (min-max) |")
        print("|---|---|---|")
        for s in servers:
            for v in ("preloaded", "attached"):
                sh = [f[2] for f in rows[(s.name, v)]]
                print("| %s | %s | %.2f (%.2f-%.2f) |" % (s.name, v, statistics.median(sh),
                                                         min(sh), max(sh)))
        shutil.rmtree(PERF, ignore_errors=True)
    print()
    print("%d runs; load average (1, 5, 15 min) before %.2f %.2f %.2f, after %.2f %.2f %.2f; "
          "%s UTC" % ((a.runs,) + load_before + load_after
                      + (time.strftime("%H:%M", time.gmtime()),)))


if __name__ == "__main__":
    main()
