#!/usr/bin/env python3
"""bench.py BUILD [-r REPS]: sample mode's overhead against its anchors, side by side.

Two workloads, each run REPS times (default 5) in interleaved order, medians reported:
  cpu   samples/cpu/cpu-split 2: the CPU time (user + sys) the whole process used;
  resp  the RESP server (bench/sample/resp-plain: samples/native/resp.c built without
        -finstrument-functions) under redis-benchmark -t get,set: requests per second.
Variants: unprofiled; coprof COPROF_MODE=sample at 99, 250 and 997 Hz and 10 kHz, cpu
clock (per-thread perf task-clock events); coprof loaded but never started;
gperftools (LD_PRELOAD=libprofiler.so CPUPROFILE=...) asked for 1 kHz, at the rate it
really delivers. Samples are counted from each profile, so the cost per sample is
(profiled - unprofiled CPU) / samples. Prints a markdown table."""
import argparse
import glob
import marshal
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPERF = next(iter(glob.glob("/usr/lib/*/libprofiler.so*") + glob.glob("/usr/lib/libprofiler.so*")), None)


def variants(build, tmp):
    shim = os.path.join(build, "preload", "libcoprof-preload.so")
    out = {"unprofiled": {}}
    for hz in (99, 250, 997, 10000):
        name = f"coprof {hz // 1000} kHz" if hz >= 1000 else f"coprof {hz} Hz"
        out[name] = {
            "LD_PRELOAD": shim, "COPROF_MODE": "sample", "COPROF_CLOCK": "cpu",
            "COPROF_HZ": str(hz), "COPROF_OUT": os.path.join(tmp, f"c{hz}-%p.pstat")}
    # what is left of coprof's cost with no tick at all: the shim, its threads and
    # per-thread clocks, the coroutine switch hooks
    out["coprof loaded, off"] = {
        "LD_PRELOAD": shim, "COPROF_MODE": "sample", "COPROF_CLOCK": "cpu",
        "COPROF_HZ": "250", "COPROF_START": "0", "COPROF_OUT": os.path.join(tmp, "off-%p.pstat")}
    if GPERF:
        out["gperftools 1 kHz"] = {"LD_PRELOAD": GPERF, "CPUPROFILE": os.path.join(tmp, "g.prof"),
                                   "CPUPROFILE_FREQUENCY": "1000"}
    return out


def clean_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPROF_", "CPUPROFILE"))}
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    return env


def samples_of(tmp):
    """Samples in the profile the last run wrote (then removes it)."""
    n = 0
    for f in glob.glob(os.path.join(tmp, "c*.pstat")):
        with open(f, "rb") as fh:
            marshal.load(fh)
            ex = marshal.load(fh)
        n += sum(row[3] for row in ex["stacks"])
        os.unlink(f)
    g = os.path.join(tmp, "g.prof")
    if os.path.exists(g):
        data = open(g, "rb").read()
        os.unlink(g)
        words = struct.unpack(f"<{len(data) // 8}Q", data[: len(data) // 8 * 8])
        i = 2 + words[1]  # header: 0, 3 (words after these two), 0, period in us, 0
        while i + 2 <= len(words):
            count, depth = words[i], words[i + 1]
            if count == 0 and depth == 1:  # the trailer
                break
            n += count
            i += 2 + depth
    return n


def run_cpu(build, env, unit=0):
    """(process CPU s, the main thread's CPU s in its work loop, the work unit). Runs
    given the same `unit` do the same work: only the first, unprofiled, calibrates."""
    exe = os.path.join(build, "samples", "cpu", "cpu-split")
    p = subprocess.Popen([exe, "2", "1", str(unit)], env=clean_env(env),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    m = re.search(r"cpu-split: ([0-9.]+) s CPU .*unit (\d+)", err)
    if status != 0 or not m:
        sys.exit(f"cpu-split failed under {env}: {err}")
    return ru.ru_utime + ru.ru_stime, float(m.group(1)), int(m.group(2))


def run_resp(build, env, requests):
    exe = os.path.join(build, "bench", "sample", "resp-plain")
    p = subprocess.Popen([exe, "0"], env=clean_env(env), stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"port (\d+)", line)
    if not m:
        p.kill()
        sys.exit(f"resp said {line!r}")
    b = subprocess.run(["redis-benchmark", "-p", m.group(1), "-t", "get,set", "-n", str(requests),
                        "-c", "50", "-q"], capture_output=True, text=True, timeout=300)
    p.send_signal(signal.SIGTERM)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    p.stdout.close()
    rps = [float(x) for x in re.findall(r"([0-9.]+) requests per second", b.stdout)]
    if len(rps) != 2:
        sys.exit(f"redis-benchmark said {b.stdout!r} {b.stderr!r}")
    # the server's CPU per request: what sampling costs it, whatever the wakeup latency
    return sum(rps) / 2, (ru.ru_utime + ru.ru_stime) / (2 * requests) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("-n", "--requests", type=int, default=100000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="coprof-bench-sample-")
    vs = variants(os.path.abspath(a.build), tmp)
    cpu = {v: [] for v in vs}
    work = {v: [] for v in vs}
    cpu_n = {v: [] for v in vs}
    rps = {v: [] for v in vs}
    req_us = {v: [] for v in vs}
    unit = run_cpu(a.build, {})[2]
    for rep in range(a.reps):
        for v, env in vs.items():
            c, w, _ = run_cpu(a.build, env, unit)
            cpu[v].append(c)
            work[v].append(w)
            cpu_n[v].append(samples_of(tmp))
        for v, env in vs.items():
            r, us = run_resp(a.build, env, a.requests)
            rps[v].append(r)
            req_us[v].append(us)
            samples_of(tmp)
        print(f"rep {rep + 1}/{a.reps} done", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    base_cpu = statistics.median(cpu["unprofiled"])
    base_work = statistics.median(work["unprofiled"])
    base_rps = statistics.median(rps["unprofiled"])
    base_us = statistics.median(req_us["unprofiled"])
    print("| variant | samples | per CPU s | process CPU | loop CPU | us per sample (loop) | "
          "resp req/s | resp CPU per request |")
    print("|---|---|---|---|---|---|---|---|")
    for v in vs:
        c = statistics.median(cpu[v])
        w = statistics.median(work[v])
        n = statistics.median(cpu_n[v])
        r = statistics.median(rps[v])
        us = statistics.median(req_us[v])
        per = f"{(w - base_work) / n * 1e6:.1f}" if n else "-"
        rate = f"{n / w:.0f}" if n else "-"
        print(f"| {v} | {n:.0f} | {rate} | {c / base_cpu:.3f}x | {w / base_work:.3f}x | {per} | "
              f"{r / base_rps:.2f}x | {us / base_us:.3f}x |")
    print(f"\nanchors: unprofiled cpu-split {base_cpu:.3f} s process CPU, {base_work:.3f} s in "
          f"its loop; resp {base_rps:.0f} req/s, {base_us:.1f} us CPU per request")
    print(f"\nmedians of {a.reps} interleaved runs; resp: mean of GET and SET, "
          f"{a.requests} requests each, 50 clients")


if __name__ == "__main__":
    main()
