"""Three asyncio tasks interleave known CPU work (spin_a, spin_b, spin_c: 1, 2 and 3
units per chunk, a unit argv[2] iterations, 60000 by default), yielding to each other
between chunks. Writes the CPU and wall time each spin function really took
(time.thread_time and time.perf_counter around each call) to argv[1] as JSON, and the
thread CPU time the main module took ("module_cpu": everything in it runs inside some
frame)."""
import time

module_start = time.thread_time()
import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

measured = {"cpu": {"spin_a": 0.0, "spin_b": 0.0, "spin_c": 0.0},
            "wall": {"spin_a": 0.0, "spin_b": 0.0, "spin_c": 0.0}}
UNIT = int(sys.argv[2]) if len(sys.argv) > 2 else 60000


def burn(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def spin_a():
    return burn(UNIT)


def spin_b():
    return burn(2 * UNIT)


def spin_c():
    return burn(3 * UNIT)


async def run(fn, chunks):
    for _ in range(chunks):
        t0, w0 = time.thread_time(), time.perf_counter()
        fn()
        measured["cpu"][fn.__name__] += time.thread_time() - t0
        measured["wall"][fn.__name__] += time.perf_counter() - w0
        await asyncio.sleep(0)


async def main():
    tasks = [asyncio.create_task(run(fn, 10), name=name)
             for fn, name in ((spin_a, "A"), (spin_b, "B"), (spin_c, "C"))]
    await asyncio.gather(*tasks)


asyncio.run(main())
measured["module_cpu"] = time.thread_time() - module_start
with open(sys.argv[1], "w") as f:
    json.dump(measured, f)
