"""Two threads, each running its own asyncio loop with a task burning CPU (loop_one 1
unit, loop_two 2 units), started after profiling began. The main thread waits."""
import asyncio
import threading


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


async def loop_one():
    for _ in range(10):
        burn(100000)
        await asyncio.sleep(0)


async def loop_two():
    for _ in range(10):
        burn(200000)
        await asyncio.sleep(0)


def run(coro_fn):
    asyncio.run(coro_fn())


threads = [threading.Thread(target=run, args=(fn,), name=fn.__name__)
           for fn in (loop_one, loop_two)]
for t in threads:
    t.start()
for t in threads:
    t.join()
