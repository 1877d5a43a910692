"""workloads.py: the Python workloads of the overhead benchmark. Prints the seconds the
workload took (perf_counter around it, start-up excluded).

usage: workloads.py PROFILER WORKLOAD
  PROFILER: none (also under coprof, which the caller preloads), cprofile, yappi-cpu,
            yappi-wall, coprof-cpu, coprof-wall (the Python API, `import coprof`:
            bench/python/api.py) (each enabled around the workload only)
  WORKLOAD: calls (tiny functions and recursion) or asyncio (many awaited coroutines
            and tasks)
"""
import asyncio
import sys
import time


def tiny(x):
    return x + 1


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def calls():
    s = 0
    for i in range(600000):
        s = tiny(s)
    return s + fib(24)


async def leaf(i):
    if i % 16 == 0:
        await asyncio.sleep(0)
    return tiny(i)


async def chain(i):
    return await leaf(i) + await leaf(i + 1)


async def worker(n):
    s = 0
    for i in range(n):
        s += await chain(i)
    return s


async def many():
    await asyncio.gather(*(worker(1000) for _ in range(50)))


def run_asyncio():
    asyncio.run(many())


def main():
    profiler, workload = sys.argv[1], sys.argv[2]
    fn = {"calls": calls, "asyncio": run_asyncio}[workload]
    stop = None
    if profiler == "cprofile":
        import cProfile
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        stop = prof.disable
    elif profiler.startswith("yappi") or profiler.startswith("coprof"):
        if profiler.startswith("yappi"):
            import yappi
        else:
            import coprof as yappi
        yappi.set_clock_type(profiler.split("-")[1])
        if profiler.startswith("coprof"):
            # The first start() loads the shim and attaches the adapter, once per
            # process (api.py times it apart): out of the workload's time.
            yappi.start()
            yappi.stop()
            yappi.clear_stats()
        t0 = time.perf_counter()
        yappi.start(builtins=False)
        stop = yappi.stop
    else:
        t0 = time.perf_counter()
    fn()
    if stop:
        stop()
    print("%.6f" % (time.perf_counter() - t0))


main()
