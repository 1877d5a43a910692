#!/usr/bin/env bash
# run.sh BUILD_DIR [N]: times opening a large pstats file (N functions, default 100000)
# and drawing the first screen with `coprof view --once`, against loading the same file
# with `python3 -c "import pstats; pstats.Stats(F)"`, run alternately, median of 5.
# Prints both medians and their ratio. Needs nothing but a build and /usr/bin/python3.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [N]}
n=${2:-100000}
here=$(cd "$(dirname "$0")" && pwd)
coprof=$(cd "$build" && pwd)/viewer/coprof
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 "$here/gen-pstats.py" "$out/big.pstat" "$n"
N=$n COPROF=$coprof F=$out/big.pstat /usr/bin/python3 - <<'PY'
import os, resource, statistics, subprocess, time
coprof, f = os.environ["COPROF"], os.environ["F"]
view = [coprof, "view", "--once", f]
pst = ["/usr/bin/python3", "-c", "import pstats, sys; pstats.Stats(sys.argv[1])", f]
env = dict(os.environ, TERM="xterm-256color", COLUMNS="80", LINES="24")
cpu = {}
def run(cmd):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    t = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.setdefault(cmd[1], []).append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return t
run(view); run(pst)  # warm the page cache
cpu.clear()
a, b = [], []
for _ in range(5):
    a.append(run(view))
    b.append(run(pst))
ma, mb = statistics.median(a), statistics.median(b)
ca, cb = statistics.median(cpu["view"]), statistics.median(cpu["-c"])
print("functions: %s  file: %.1f MB  load: %s" % (os.environ["N"],
      os.path.getsize(f) / 1e6, open("/proc/loadavg").read().split()[0]))
print("coprof view --once (open + first screen): median %.3f s  runs %s" % (ma, " ".join("%.3f" % x for x in a)))
print("pstats.Stats (load only):                 median %.3f s  runs %s" % (mb, " ".join("%.3f" % x for x in b)))
print("cpu time (user+sys) medians: coprof %.3f s, pstats %.3f s" % (ca, cb))
print("ratio coprof / pstats: wall %.2f, cpu %.2f" % (ma / mb, ca / cb))
PY
echo "where coprof's time goes (bench/viewer/open-phases, in-process, cpu):"
"$build/bench/viewer/open-phases" "$out/big.pstat"
