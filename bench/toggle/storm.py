#!/usr/bin/env python3
"""storm.py: many toggle windows on the RESP samples under redis-benchmark load.

Runs samples/native/resp and samples/python/resp_server.py (on each Python given)
under `coprof record --no-start -c wall`, keeps redis-benchmark running against it,
and opens and closes --windows windows back to back:

- `--how toggle` (default): through `coprof toggle PID`, which returns once the
  program applied the request and says the state it left. Counted: windows whose
  toggles said on then off, files written, empty windows (nothing recorded: no file),
  inversions (a toggle that left the wrong state), and the time a toggle takes.
- `--how kill`: plain `kill -USR2`, two per window, --gap ms apart (what a script
  would do). Two signals that arrive before the first is handled merge into one, so
  windows go missing and the later ones are inverted: counted from the files written
  and the state the program is left in.

usage: python3 bench/toggle/storm.py [--build build] [--windows 500] [--how toggle|kill]
       [--gap 5] [--hold 0] [--python PY]... [--no-native]
--hold keeps each window open that many ms: on a loaded machine a window open only
between two toggles may see no request at all (then no file: the toggle says so).
Prints one line per target; the figures go in bench/RESULTS.md."""
import argparse
import glob
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def state(pid):
    """The run letter the shim's control thread publishes (preload/state/state.h), or None."""
    for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
        try:
            name = open(comm).read().strip()
        except OSError:
            continue
        if name.startswith("coprof") and len(name) == 15:
            return name[8].upper()
    return None


def storm(coprof, cmd, port_of, stop_sig, windows, how, gap, hold, tmp):
    tmpl = os.path.join(tmp, "w.%n.pstat")
    p = subprocess.Popen([coprof, "record", "--no-start", "-c", "wall", "-o", tmpl, "--"] + cmd,
                         cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    port = port_of(line)
    end = time.time() + 20
    while state(p.pid) is None and time.time() < end:
        time.sleep(0.01)
    bench = subprocess.Popen(["redis-benchmark", "-p", str(port), "-t", "set,get", "-n",
                              "1000000000", "-c", "4", "-q", "-l"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    said_written = empty = inversions = 0
    took = []
    try:
        time.sleep(0.3)
        for _ in range(windows):
            if how == "kill":
                os.kill(p.pid, signal.SIGUSR2)
                time.sleep(gap / 1000)
                os.kill(p.pid, signal.SIGUSR2)
                time.sleep(gap / 1000)
                continue
            for want in ("on", "off"):
                t0 = time.perf_counter()
                r = subprocess.run([coprof, "toggle", "--timeout", "60", str(p.pid)],
                                   capture_output=True, text=True)
                took.append(time.perf_counter() - t0)
                out = r.stdout.strip()
                if r.returncode != 0 or not out.startswith(f"{p.pid}: profiling {want}"):
                    inversions += 1
                if want == "on" and hold:
                    time.sleep(hold / 1000)
                if want == "off" and "wrote" in out:
                    said_written += 1
                if want == "off" and "nothing was recorded" in out:
                    empty += 1
        if how == "kill":
            time.sleep(0.5)
        left = state(p.pid)
    finally:
        bench.kill()
        bench.wait()
        p.send_signal(stop_sig)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
    files = glob.glob(os.path.join(tmp, "w.*.pstat"))
    numbers = sorted(int(re.search(r"w\.(\d+)\.pstat$", f).group(1)) for f in files)
    gapless = numbers == list(range(1, len(numbers) + 1))
    res = {"windows": windows, "files": len(files), "gapless": gapless, "left": left}
    if how == "toggle":
        took.sort()
        res.update(said_written=said_written, empty=empty, inversions=inversions,
                   toggle_ms_median=1000 * statistics.median(took),
                   toggle_ms_p99=1000 * took[int(0.99 * (len(took) - 1))])
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--windows", type=int, default=500)
    ap.add_argument("--how", choices=("toggle", "kill"), default="toggle")
    ap.add_argument("--gap", type=float, default=5.0, help="ms between kills (--how kill)")
    ap.add_argument("--hold", type=float, default=0.0,
                    help="ms each window stays open (--how toggle; 0: back to back)")
    ap.add_argument("--python", action="append", default=[])
    ap.add_argument("--no-native", action="store_true")
    a = ap.parse_args()
    coprof = os.path.join(a.build, "viewer", "coprof")
    targets = []
    if not a.no_native:
        targets.append(("native resp", lambda port: [os.path.join(a.build, "samples", "native", "resp"), "0"],
                        lambda line: int(re.search(r"port (\d+)", line).group(1)), signal.SIGTERM))
    for py in a.python or ["/usr/bin/python3"]:
        targets.append((f"python {py}",
                        lambda port, py=py: [py, os.path.join(ROOT, "samples", "python", "resp_server.py"), str(port)],
                        None, signal.SIGINT))
    for name, mk, port_of, stop_sig in targets:
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="coprof-storm-") as tmp:
            res = storm(coprof, mk(port), port_of or (lambda line, port=port: port), stop_sig,
                        a.windows, a.how, a.gap, a.hold, tmp)
        print(f"{name}: {a.how}: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
