"""The reader is no slower than pstats: times cp_profile_read (bench-read, median of
5) and pstats.Stats (median of 3) on one 100,000-function file made by gen_big.py,
side by side, and fails unless the reader wins. Prints both figures.

usage: check_read_speed.py BENCH_READ GEN_BIG
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import pstats


def main():
    bench, gen = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="coprof-read-speed-")
    try:
        path = os.path.join(tmp, "big.pstat")
        subprocess.check_call([sys.executable, gen, path, "100000"])
        ours = float(subprocess.check_output([bench, path, "5"]).decode().strip())
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            st = pstats.Stats(path)
            times.append(time.perf_counter() - t0)
        theirs = sorted(times)[1]
        print("100000 functions, %d bytes: cp_profile_read %.3f s, pstats.Stats %.3f s "
              "(ratio %.2f)" % (os.path.getsize(path), ours, theirs, ours / theirs))
        if len(st.stats) != 100000:
            sys.exit("pstats saw %d functions" % len(st.stats))
        if ours > theirs:
            sys.exit("cp_profile_read is slower than pstats.Stats")
    finally:
        shutil.rmtree(tmp)


main()
