#!/usr/bin/env python3
"""vs-perf.py BUILD [-r RUNS] [-n REQUESTS] [--perf-hz HZ]: sample mode's shares against
perf's, in one run.

A server runs under coprof (COPROF_MODE=sample, cpu clock, at 99, 250 and 997 Hz) and,
in the same run, under `perf record -e cpu-clock -c PERIOD -g -p PID` at a fixed
reference rate (997 Hz unless --perf-hz; -F gives no samples with -p on this kernel),
while redis-benchmark (loopback, -t get, 50 clients, a bounded request count) loads it.
Two servers: the RESP sample (bench/sample/resp-plain, samples/native/resp.c without
-finstrument-functions) and Debian's redis-server. For each profile, the share of each
function where the CPU was spent: for coprof its own time (tt) over the total; for perf
the share of samples whose first user-space frame is that function (time in a syscall
counts for the wrapper that made it, as coprof charges it; samples inside the shim's
swapcontext hook count for swapcontext, as coprof charges a tick mid-switch).

Prints the three largest libc functions (the syscall wrappers), each with the gap and
the gap's standard error, and the largest gap. Shares are pooled over RUNS runs (each
run weighted by its samples), which halves the noise of a median of three. The lower
rates get requests in proportion to their period (10x at 99 Hz, 3x at 250 Hz), so that
every coprof profile holds about as many samples; a share's standard error is
sqrt(p(1-p)/samples), for coprof counted in ticks (CPU seconds x rate)."""
import argparse
import marshal
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

RATES = (99, 250, 997)


def norm(name):
    """One name for a libc function whichever symbol table named it (write, __write,
    __GI___libc_write, __libc_write all say write)."""
    name = re.sub(r"^(__GI_)?_*(libc_)?_*", "", name)
    return re.sub(r"(_nocancel|64)$", "", name)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"the server exited {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def start_server(kind, build, env, port):
    if kind == "resp":
        exe = os.path.join(build, "bench", "sample", "resp-plain")
        p = subprocess.Popen([exe, str(port)], env=env, stdout=subprocess.DEVNULL)
    else:
        p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--daemonize", "no"],
                             env=env, stdout=subprocess.DEVNULL)
    wait_port(port, p)
    return p


def coprof_shares(path):
    with open(path, "rb") as f:
        stats = marshal.load(f)
    total = sum(v[2] for v in stats.values())
    out = {}
    for k, v in stats.items():
        out[norm(k[2])] = out.get(norm(k[2]), 0.0) + v[2]
    return {k: 100.0 * v / total for k, v in out.items()}, total


def perf_shares(data, tid):
    """{function: % of samples} by first user-space frame, and {function: dso}, of
    thread `tid` only (the server's; coprof's own threads are not in coprof's profile)."""
    p = subprocess.run(["perf", "script", "-i", data, "-F", "tid,ip,sym,dso"],
                       capture_output=True, text=True)
    counts, dsos, n = {}, {}, 0
    for block in p.stdout.split("\n\n"):
        lines = [l.strip() for l in block.strip().splitlines() if l.strip()]
        if not lines or not lines[0].isdigit() or int(lines[0]) != tid:
            continue
        frames = lines[1:]
        n += 1
        user = []
        for fr in frames:
            m = re.match(r"[0-9a-f]+ (.*) \((.*)\)$", fr)
            if m and "kernel" not in m.group(2) and not m.group(2).startswith("["):
                user.append((norm(m.group(1).split("+")[0]), os.path.basename(m.group(2))))
        if not user:
            counts["[kernel only]"] = counts.get("[kernel only]", 0) + 1
            continue
        name, dso = user[0]
        # coprof charges a tick inside its swapcontext hook (the shim's bookkeeping and
        # libc's swapcontext) to swapcontext: count perf's samples there the same way
        for fname, fdso in user:
            if not fdso.startswith(("libcoprof-preload", "libc")):
                break
            if fname == "swapcontext":
                name, dso = "swapcontext", "libc.so.6"
                break
        counts[name] = counts.get(name, 0) + 1
        dsos[name] = dso
    return {k: 100.0 * v / n for k, v in counts.items()}, dsos, n


def one_run(kind, build, rate, perf_hz, requests, tmp):
    shim = os.path.join(build, "preload", "libcoprof-preload.so")
    coprof = os.path.join(build, "viewer", "coprof")
    out = os.path.join(tmp, "c.%n.pstat")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_")}
    env.update({"LD_PRELOAD": shim, "COPROF_MODE": "sample", "COPROF_CLOCK": "cpu",
                "COPROF_HZ": str(rate), "COPROF_START": "0", "COPROF_OUT": out})
    port = free_port()
    srv = start_server(kind, build, env, port)
    data = os.path.join(tmp, "perf.data")
    try:
        subprocess.run([coprof, "toggle", str(srv.pid)], check=True)
        # perf starts disabled and says when it is enabled (its start-up takes seconds
        # on a loaded machine: a fixed sleep may miss the whole load)
        ctl, ack = os.path.join(tmp, "ctl"), os.path.join(tmp, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-c", str(10**9 // perf_hz),
                                 "-g", "-D", "-1", "--control", f"fifo:{ctl},{ack}",
                                 "-p", str(srv.pid), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(ctl, "w") as c, open(ack) as k:
            c.write("enable\n")
            c.flush()
            k.readline()
        subprocess.run(["redis-benchmark", "-p", str(port), "-t", "get", "-c", "50", "-n",
                        str(requests), "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True, timeout=300)
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
        subprocess.run([coprof, "toggle", str(srv.pid)], check=True)
        path = out.replace("%n", "1")
        end = time.time() + 20
        while not os.path.exists(path) and time.time() < end:
            time.sleep(0.05)
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=30)
    c, ctotal = coprof_shares(path)
    pf, dsos, pn = perf_shares(data, srv.pid)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    return c, pf, dsos, ctotal, pn


def pooled(runs, share, weight):
    """{function: share %} over runs, each run weighted by its samples."""
    total = sum(weight(r) for r in runs)
    funcs = {f for r in runs for f in share(r)}
    return {f: sum(share(r).get(f, 0.0) * weight(r) for r in runs) / total for f in funcs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("-r", "--runs", type=int, default=3)
    ap.add_argument("-n", "--requests", type=int, default=100000)
    ap.add_argument("--perf-hz", type=int, default=997)
    ap.add_argument("--servers", default="resp,redis")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="coprof-vs-perf-")
    print("| server | Hz | function | coprof % | perf % | gap (points) | standard error |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for kind in a.servers.split(","):
        for rate in RATES:
            # as many samples at every rate: the requests scale with the period
            n = a.requests * (997 // rate)
            runs = [one_run(kind, build, rate, a.perf_hz, n, tmp) for _ in range(a.runs)]
            dsos = {}
            for r in runs:
                dsos.update(r[2])
            cop = pooled(runs, lambda r: r[0], lambda r: r[3])
            prf = pooled(runs, lambda r: r[1], lambda r: r[4])
            ticks = sum(r[3] for r in runs) * rate
            psamples = sum(r[4] for r in runs)
            # the three largest libc functions by perf's share
            funcs = [f for f in prf if dsos.get(f, "").startswith("libc")]
            for f in sorted(funcs, key=lambda f: -prf[f])[:3]:
                c, p = cop.get(f, 0.0), prf[f]
                q = p / 100.0
                se = 100.0 * (q * (1 - q) / ticks + q * (1 - q) / psamples) ** 0.5
                worst = max(worst, abs(c - p))
                print(f"| {kind} | {rate} | {f} | {c:.1f} | {p:.1f} | {c - p:+.1f} | {se:.1f} |")
            print(f"| {kind} | {rate} | (coprof {ticks / rate:.3f} s sampled, about {ticks:.0f} "
                  f"ticks; perf {psamples} samples at {a.perf_hz} Hz; {n} requests a run) | | | | |")
            sys.stdout.flush()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nlargest gap: {worst:.1f} points; pooled over {a.runs} runs, "
          f"{a.requests} GET requests (x 997/Hz), 50 clients, loopback")


if __name__ == "__main__":
    main()
