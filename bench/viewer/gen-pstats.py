#!/usr/bin/env python3
"""gen-pstats.py OUT [N]: writes a pstats file (marshal, as cProfile's dump_stats) with
N functions (default 100000) spread over N/50 files, each called by 1 to 3 others, so
that pstats, coprof view and coprof report have a realistic large profile to open."""
import marshal
import random
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
rng = random.Random(42)
keys = [("/srv/app/pkg%d/module%d.py" % (i // 1000, i // 50), 10 + (i % 50) * 20,
         "func_%d" % i) for i in range(n)]
stats = {}
for i, k in enumerate(keys):
    callers = {}
    for _ in range(rng.randint(1, 3) if i else 0):
        c = keys[rng.randrange(n)]
        nc = rng.randint(1, 1000)
        tt = rng.random() * 1e-3
        callers[c] = (nc, nc, tt, tt + rng.random() * 1e-3)
    nc = sum(v[0] for v in callers.values()) or 1
    tt = sum(v[2] for v in callers.values()) or 1e-6
    ct = sum(v[3] for v in callers.values()) or 2e-6
    stats[k] = (nc, nc, tt, ct, callers)
with open(out, "wb") as f:
    marshal.dump(stats, f)
