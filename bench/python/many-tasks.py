#!/usr/bin/env python3
"""many-tasks.py: the cost of per-task sampling with many tasks (issue 12).

usage: many-tasks.py N STEPS

Two CPU-bound asyncio tasks share the CPU 3:1 for STEPS rounds while N more tasks wait
on an Event the whole time. Profile it with perf to see what coprof's task table costs:

  perf record -F 1999 -o perf.data -- env LD_PRELOAD=build/preload/libcoprof-preload.so \\
      COPROF_MODE=sample COPROF_CLOCK=wall COPROF_HZ=250 COPROF_OUT=m.pstat \\
      python3 bench/python/many-tasks.py 1000 1500
  perf report -i perf.data --sort dso

Prints "ok" and the process's CPU time.
"""
import asyncio
import sys
import time


def heavy(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


async def idle(ev):
    await ev.wait()


async def worker(k, steps):
    for _ in range(steps):
        heavy(4000 * k)
        await asyncio.sleep(0)


async def main(n, steps):
    ev = asyncio.Event()
    idles = [asyncio.create_task(idle(ev)) for _ in range(n)]
    await asyncio.gather(worker(3, steps), worker(1, steps))
    ev.set()
    await asyncio.gather(*idles)
    print("ok", time.process_time())


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
