"""Writes a large cProfile-shaped pstats file, for the reader's speed check.

usage: gen_big.py OUT.pstat [NFUNCS]
NFUNCS functions (default 100000) over NFUNCS/100 source files, each with 1 to 5
callers, dumped with marshal as cProfile does (so with references for shared keys).
"""
import marshal
import random
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
rnd = random.Random(42)
files = ["/usr/lib/python3/dist-packages/pkg%d/module_%d.py" % (i % 37, i)
         for i in range(max(1, n // 100))]
keys = [(files[i % len(files)], 10 + i, "function_number_%d" % i) for i in range(n)]
stats = {}
for i, k in enumerate(keys):
    callers = {}
    for _ in range(rnd.randint(1, 5)):
        c = keys[rnd.randrange(n)]
        nc = rnd.randint(1, 1000)
        callers[c] = (nc, nc, rnd.random() / 1000, rnd.random() / 100)
    nc = sum(v[0] for v in callers.values())
    stats[k] = (nc, nc, rnd.random() / 100, rnd.random(), callers)
with open(out, "wb") as f:
    marshal.dump(stats, f)
