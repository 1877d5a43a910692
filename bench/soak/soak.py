#!/usr/bin/env python3
"""soak.py: a long run of a RESP server under coprof, toggled every second.

Starts the native RESP sample (samples/native/resp) or the Python one
(samples/python/resp_server.py) under `coprof record --no-start -c wall`, keeps
redis-benchmark on it over loopback (bounded: -n requests per run, -c clients, run
after run), and toggles profiling every second with `coprof toggle`, so each window
lasts one second and one stays off. Every second it reads the server's RSS and open
descriptors from /proc. At the end it stops the server with SIGTERM (it must exit 0),
and reads every window back: pstats.Stats must load it, its coprof extras must be
there, and `coprof report` must print it. Prints the figures bench/RESULTS.md keeps,
and exits 1 if a window is missing or unreadable or RSS/fds grew after the first
minute (more than --rss-slack KiB; any descriptor other than the clients' sockets).

usage: soak.py --build BUILD [--python PY] [--seconds 600] {native,python}
"""
import argparse
import glob
import marshal
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def nfds(pid):
    """(all descriptors, those that are not sockets): the clients' connections come and
    go with redis-benchmark's runs; what the server and the shim keep must stay put."""
    d = "/proc/%d/fd" % pid
    links = []
    for n in os.listdir(d):
        try:
            links.append(os.readlink(os.path.join(d, n)))
        except OSError:
            pass
    return len(links), sum(not l.startswith("socket:") for l in links)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("server", choices=["native", "python"])
    ap.add_argument("--build", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--requests", type=int, default=20000, help="per redis-benchmark run")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rss-slack", type=int, default=1024, help="KiB allowed after minute 1")
    ap.add_argument("--signal", default="USR2",
                    help="toggle signal; a real-time one (RTMIN+1) queues, USR2 merges")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    coprof = os.path.join(build, "viewer", "coprof")
    tmp = tempfile.mkdtemp(prefix="coprof-soak-")
    tmpl = os.path.join(tmp, "w.%n.pstat")
    if a.server == "native":
        prog = [os.path.join(build, "samples", "native", "resp"), "0"]
    else:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        prog = [a.python, os.path.join(src, "samples", "python", "resp_server.py"), str(port)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPROF_") and k != "LD_PRELOAD"}
    p = subprocess.Popen([coprof, "record", "--no-start", "-c", "wall", "--signal", a.signal,
                          "-o", tmpl, "--"] + prog,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"port (\d+)|:(\d+)$", line.strip())
    if not m:
        p.kill()
        sys.exit("the server said %r" % line)
    port = m.group(1) or m.group(2)
    time.sleep(0.5)
    bench = None
    runs = 0
    toggles = 0
    samples = []  # (seconds since start, rss KiB, fds)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < a.seconds:
            if bench is None or bench.poll() is not None:
                if bench is not None:
                    runs += bench.returncode == 0
                bench = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t",
                                          "get,set", "-n", str(a.requests), "-c", str(a.clients), "-q"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # read before the toggle: a second after the last one, its dump (and the
            # descriptor of the file it writes) is over
            samples.append((time.monotonic() - t0, rss_kib(p.pid), nfds(p.pid)))
            subprocess.run([coprof, "toggle", "--signal", a.signal, str(p.pid)], check=True,
                           timeout=10)
            toggles += 1
            # until the next toggle, restart redis-benchmark as soon as a run ends: a
            # window with no request records nothing and, by design, writes no file
            while time.monotonic() < t0 + toggles:
                if bench.poll() is not None:
                    runs += bench.returncode == 0
                    bench = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t",
                                              "get,set", "-n", str(a.requests), "-c", str(a.clients),
                                              "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.05)
        if toggles % 2:  # the last window is open: close it
            subprocess.run([coprof, "toggle", "--signal", a.signal, str(p.pid)], check=True,
                           timeout=10)
            toggles += 1
        windows = toggles // 2
        deadline = time.monotonic() + 30
        while len(glob.glob(os.path.join(tmp, "w.*.pstat"))) < windows and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        if bench is not None and bench.poll() is None:
            bench.kill()
            bench.wait()
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
    files = glob.glob(os.path.join(tmp, "w.*.pstat"))
    unreadable = []
    for i in range(1, windows + 1):
        f = tmpl.replace("%n", str(i))
        try:
            stats = pstats.Stats(f).stats
            with open(f, "rb") as fh:
                marshal.load(fh)
                ex = marshal.load(fh)
            r = subprocess.run([coprof, "report", f], capture_output=True, text=True, timeout=60)
            if not stats or ex.get("clock") != "wall" or r.returncode != 0:
                unreadable.append((i, "empty" if not stats else "report exit %d" % r.returncode))
        except Exception as e:  # noqa: BLE001 (any failure to read is the finding)
            unreadable.append((i, repr(e)))
    after = [s for s in samples if s[0] >= 60]
    base = after[0] if after else samples[-1]
    # growth: where it ends against where it was at one minute (the maxima are printed
    # too: a dump in progress holds its file open and its buffers for a moment)
    rss_growth = samples[-1][1] - base[1]
    fd_growth = samples[-1][2][1] - base[2][1]
    # windows that are not ~1 s long, or gaps that are not, show toggles lost (merged)
    spans = []
    for i in range(1, windows + 1):
        try:
            with open(tmpl.replace("%n", str(i)), "rb") as fh:
                marshal.load(fh)
                ex = marshal.load(fh)
            spans.append((ex["start"], ex["stop"]))
        except Exception:  # noqa: BLE001 (counted as unreadable above)
            pass
    odd = sum(not 0.5 <= d[1] - d[0] <= 1.5 for d in spans)
    # an empty window leaves a gap of three seconds between the files around it
    empty = sum(2.5 <= spans[k + 1][0] - spans[k][1] <= 3.5 for k in range(len(spans) - 1))
    print("signal %s; windows not 0.5-1.5 s long: %d of %d (a lost toggle inverts them); "
          "3-s gaps between files (an empty window, no file): %d" % (a.signal, odd, len(spans), empty))
    minutes = [next((s for s in samples if s[0] >= 60 * m), None) for m in range(a.seconds // 60 + 1)]
    print("RSS KiB each minute: %s" % [s[1] for s in minutes if s])
    print("server: %s, %d s, %d toggles, %d windows expected, %d files, %d unreadable %s"
          % (a.server, a.seconds, toggles, windows, len(files), len(unreadable), unreadable[:5]))
    print("redis-benchmark: %d runs of %d GET+SET requests each, %d clients" % (runs, a.requests, a.clients))
    print("RSS KiB: start %d, at 60 s %d, max after 60 s %d, end %d (end - at 60 s: %+d KiB)"
          % (samples[0][1], base[1], max(s[1] for s in after) if after else -1, samples[-1][1], rss_growth))
    print("fds other than sockets: start %d, at 60 s %d, max after 60 s %d, end %d; "
          "all fds (with the clients' sockets): at 60 s %d, max after %d, end %d"
          % (samples[0][2][1], base[2][1], max(s[2][1] for s in after) if after else -1,
             samples[-1][2][1], base[2][0], max(s[2][0] for s in after) if after else -1,
             samples[-1][2][0]))
    print("server exit: %d, said %r; stderr %r" % (p.returncode, out.strip()[-80:], err.strip()[-300:]))
    ok = (len(files) == windows and not unreadable and rss_growth <= a.rss_slack and fd_growth <= 0
          and p.returncode == 0)
    print("soak: %s" % ("ok" if ok else "FAILED"))
    if ok:
        subprocess.run(["rm", "-rf", tmp])
    else:
        print("files kept in", tmp)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
