#!/usr/bin/env python3
"""monitoring-cost.py: what sys.monitoring's PY_RESUME and PY_YIELD events cost a
generator-heavy program (3.12+), the events a sampler would need to hear of every task
suspension and resumption without the profile hook (issue 12). The callback is `slice`,
a C callable that takes the events' two or three arguments: about the cheapest a C
callback can be. Best of 3 runs of a loop over a 3,000,000-item generator, off and on.

usage: python3.12 bench/python/monitoring-cost.py
"""
import sys, time
E = sys.monitoring.events
def gen(n):
    for i in range(n):
        yield i
def run():
    c0 = time.process_time()
    s = 0
    for v in gen(3_000_000):
        s += v
    return time.process_time() - c0
base = min(run() for _ in range(3))
sys.monitoring.use_tool_id(3, "cost")
sys.monitoring.register_callback(3, E.PY_RESUME, slice)
sys.monitoring.register_callback(3, E.PY_YIELD, slice)
sys.monitoring.set_events(3, E.PY_RESUME | E.PY_YIELD)
on = min(run() for _ in range(3))
print("3M generator resumes: %.3f s off, %.3f s with PY_RESUME/PY_YIELD (C callable as callback): +%.0f%%, %.0f ns per resume+yield"
      % (base, on, (on / base - 1) * 100, (on - base) / 3e6 * 1e9))
