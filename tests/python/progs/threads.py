"""Two threads, each running its own asyncio loop with a task burning CPU (loop_one 1
unit, loop_two 2 units), started after profiling began. The main thread waits.
Writes the CPU each loop's burn calls really took (time.thread_time around each call)
to argv[1] as JSON, since two units need not cost exactly twice one on a shared CPU."""
import asyncio
import json
import sys
import threading
import time

measured = {"loop_one": 0.0, "loop_two": 0.0}


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def timed_burn(name, n):
    t = time.thread_time()
    burn(n)
    measured[name] += time.thread_time() - t


async def loop_one():
    for _ in range(10):
        timed_burn("loop_one", 100000)
        await asyncio.sleep(0)


async def loop_two():
    for _ in range(10):
        timed_burn("loop_two", 200000)
        await asyncio.sleep(0)


def run(coro_fn):
    asyncio.run(coro_fn())


threads = [threading.Thread(target=run, args=(fn,), name=fn.__name__)
           for fn in (loop_one, loop_two)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(measured, f)
