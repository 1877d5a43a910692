#!/usr/bin/env python3
"""sample-resp.py: what Python sampling costs a server, coprof against py-spy and Austin,
side by side in one run (configurations interleaved, median of --runs).

usage: sample-resp.py --shim build/preload/libcoprof-preload.so [--python EXE]
                      [--rates 100,250,997] [--runs 5] [--requests 60000]
                      [--venv build/venv-pyspy] [--floor-us 43.7]

The server is the RESP sample (samples/python/resp_server.py: asyncio streams, a task
per connection), loaded by redis-benchmark (loopback, GET and SET, 50 clients, a fixed
number of requests). Each configuration starts a fresh server: unprofiled; coprof
(COPROF_MODE=sample, cpu clock, at the rate); py-spy attached to the server
(`record --pid --rate N`, with and without --nonblocking); Austin attached
(`austin -i 1e6/N -p PID`). For each it reads redis-benchmark's requests per second
and the server's own CPU time per request (/proc/PID/stat around the benchmark), and,
for the tools that sample from outside, the profiler process's CPU per request (its
rusage when it exits). The overheads are each median against the unprofiled median:
throughput lost, and server CPU per request added. The floor column is what the
timer interrupts alone cost a thread sampled at that rate on its CPU time
(rate x --floor-us, the interrupt's cost measured by build/bench/sample/timer-floor).
py-spy and Austin come from PyPI into --venv (sample-vs-pyspy.py's venv_tools).
"""
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "..", "samples", "python", "resp_server.py")


def load_bench(rel):
    """Another bench script (a file name with dashes, so not importable by name)."""
    path = os.path.join(HERE, "..", rel)
    spec = importlib.util.spec_from_file_location(os.path.basename(rel)[:-3].replace("-", "_"),
                                                  path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VS_PERF = load_bench("sample/vs-perf.py")  # free_port
MANY_TASKS_SHARE = load_bench("python/many-tasks-share.py")  # shares of a perf.data


def proc_cpu(pid):
    """utime + stime of pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rps(out):
    """Requests per second summed over the tests redis-benchmark -q printed."""
    vals = [float(m) for m in re.findall(r"([0-9.]+) requests per second", out)]
    if not vals:
        raise SystemExit("redis-benchmark printed no rate: %r" % out[-500:])
    return sum(vals) / len(vals)


def run_one(args, tools, tmp, kind, rate):
    port = VS_PERF.free_port()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = os.path.join(tmp, "out")
    if kind == "coprof":
        env.update(LD_PRELOAD=args.shim, COPROF_MODE="sample", COPROF_HZ=str(rate),
                   COPROF_CLOCK="cpu", COPROF_OUT=out + ".pstat")
    srv = subprocess.Popen([args.python, SERVER, str(port)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    prof = None
    try:
        line = srv.stdout.readline()
        if not line.startswith("listening"):
            raise SystemExit("%s: the server did not start: %s" % (kind, srv.stderr.read()))
        if kind.startswith("py-spy"):
            prof = subprocess.Popen([tools["py-spy"], "record", "--rate", str(rate),
                                     "--format", "raw", "-o", out + ".txt", "--pid",
                                     str(srv.pid)] + (["--nonblocking"] if kind.endswith("nb")
                                                      else []),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elif kind == "austin":
            prof = subprocess.Popen([tools["austin"], "-i", str(1000000 // rate), "-o",
                                     out + ".austin", "-p", str(srv.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if prof is not None:
            time.sleep(1.0)  # attached and sampling before the load starts
            if prof.poll() is not None:
                raise SystemExit("%s did not attach: %s" % (kind, prof.stderr.read()[-800:]))
        perf = None
        if kind == "coprof" and args.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-p", str(srv.pid),
                                     "-o", out + ".perf"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        c0 = proc_cpu(srv.pid)
        b = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "get,set", "-c", "50",
                            "-n", str(args.requests), "-q"], capture_output=True, text=True,
                           timeout=600, check=True)
        c1 = proc_cpu(srv.pid)
        share = float("nan")
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
            share = MANY_TASKS_SHARE.shares(out + ".perf")["all"]
        ext = float("nan")
        if prof is not None:
            prof.send_signal(signal.SIGINT)
            _, _, ru = os.wait4(prof.pid, 0)
            prof.returncode = 0
            ext = (ru.ru_utime + ru.ru_stime) / (2 * args.requests)
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=60)
        if srv.returncode != 0:
            raise SystemExit("%s: the server exited %d: %s" % (kind, srv.returncode,
                                                                srv.stderr.read()[-800:]))
        if kind == "coprof" and not os.path.exists(out + ".pstat"):
            raise SystemExit("coprof wrote no profile")
        return rps(b.stdout), (c1 - c0) / (2 * args.requests), ext, share
    finally:
        for p in (prof, srv):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def main():
    pyspy = load_bench("python/sample-vs-pyspy.py")
    ap = pyspy.common_args(5)
    ap.add_argument("--requests", type=int, default=60000)
    ap.add_argument("--floor-us", type=float, default=43.7)
    ap.add_argument("--perf", action="store_true",
                    help="also perf record -F 1999 each coprof server: coprof's share of its samples")
    ap.add_argument("--kinds", default="coprof,py-spy,py-spy-nb,austin",
                    help="which profilers, beside the unprofiled runs")
    args = ap.parse_args()
    tools = pyspy.venv_tools(args.venv, sys.executable)
    kinds = [k for k in args.kinds.split(",") if k == "coprof" or tools.get(k.replace("-nb", ""))]
    tmp = tempfile.mkdtemp(prefix="pysample-resp-")
    load0 = os.getloadavg()
    rows = []
    for rate in [int(r) for r in args.rates.split(",")]:
        got = {k: [] for k in ["none"] + kinds}
        for _ in range(args.runs):
            for k in ["none"] + kinds:
                got[k].append(run_one(args, tools, tmp, k, rate))
        base_rps = statistics.median(g[0] for g in got["none"])
        base_cpu = statistics.median(g[1] for g in got["none"])
        for k in kinds:
            r = statistics.median(g[0] for g in got[k])
            c = statistics.median(g[1] for g in got[k])
            cs = sorted(g[1] / base_cpu - 1 for g in got[k])
            e = statistics.median(g[2] for g in got[k])
            sh = [g[3] for g in got[k] if g[3] == g[3]]
            rows.append((rate, k, base_rps, r, 1 - r / base_rps, c / base_cpu - 1, cs[0],
                         cs[-1], e, base_cpu, sh))
    load1 = os.getloadavg()
    print("python %s, %d requests (GET and SET), %d runs each, load average %.1f before, "
          "%.1f after" % (args.python, args.requests, args.runs, load0[0], load1[0]))
    print()
    print("| Hz | profiler | unprofiled req/s | profiled req/s | throughput lost "
          "| server CPU per request added (min .. max) | timer floor | profiler's own CPU "
          "per request | coprof's share of the server's perf samples (runs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, k, b, r, lost, cpu, lo, hi, e, base_cpu, sh in rows:
        print("| %d | %s | %.0f | %.0f | %+.1f%% | %+.1f%% (%+.1f .. %+.1f) | %.1f%% | %s | %s |" %
              (rate, k, b, r, lost * 100, cpu * 100, lo * 100, hi * 100,
               rate * args.floor_us * 1e-4,
               "-" if e != e else "%.1f us (%.0f%% of the server's)" %
               (e * 1e6, e / base_cpu * 100),
               "%.2f%% (%s)" % (statistics.median(sh), ", ".join("%.2f" % x for x in sh))
               if sh else "-"))


if __name__ == "__main__":
    main()
