"""workload.py yappi|coprof: the same program under yappi 1.7 and under coprof's API
(cpu clock), printing as JSON each of this file's functions' first line with its
ncall and nactualcall: the test compares the two. Plain functions, recursion (direct
and mutual), methods, coroutines that await and suspend, tasks, a thread."""
import asyncio
import json
import sys
import threading


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def even(n):
    return True if n == 0 else odd(n - 1)


def odd(n):
    return False if n == 0 else even(n - 1)


class Box:
    def __init__(self, v):
        self.v = v

    def twice(self):
        return self.add(self.v)

    def add(self, w):
        return self.v + w


async def leaf(i):
    await asyncio.sleep(0.001 * (i % 3))
    return fib(8)


async def middle(i):
    total = 0
    for j in range(3):
        total += await leaf(i + j)
    return total


async def spawner():
    return sum(await asyncio.gather(*[middle(i) for i in range(5)]))


def in_thread():
    for i in range(4):
        Box(i).twice()
    even(20)


def main():
    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    for i in range(10):
        Box(i).twice()
    even(31)
    fib(12)
    asyncio.run(spawner())


if __name__ == "__main__":
    if sys.argv[1] == "yappi":
        import yappi
    else:
        import coprof as yappi
    yappi.set_clock_type("cpu")
    yappi.start()
    main()
    yappi.stop()
    mine = __file__
    out = {s.lineno: [s.ncall, s.nactualcall] for s in yappi.get_func_stats()
           if s.module == mine and s.name != "<module>"}
    print(json.dumps(out, sort_keys=True))
