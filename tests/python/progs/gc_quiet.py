"""Runs 7000 asyncio tasks that each suspend once and prints, as JSON, the collections
the garbage collector made meanwhile (per generation), and how many weak references
to coroutines it could see while the tasks were suspended. coprof holds one to each
task that suspends (preload/python/weakref.c): neither number may change under it."""
import asyncio
import gc
import json
import weakref

N = 7000


async def wait(fut):
    await fut


def visible_refs():
    return sum(1 for o in gc.get_objects()
               if type(o) is weakref.ref and asyncio.iscoroutine(o()))


async def main():
    loop = asyncio.get_running_loop()
    futs = [loop.create_future() for _ in range(N)]
    tasks = [loop.create_task(wait(f)) for f in futs]
    await asyncio.sleep(0)  # each task runs to its await and suspends there
    seen = visible_refs()
    for f in futs:
        f.set_result(None)
    await asyncio.gather(*tasks)
    return seen


gc.collect()
before = [s["collections"] for s in gc.get_stats()]
seen = asyncio.run(main())
after = [s["collections"] for s in gc.get_stats()]
print(json.dumps({"collections": [b - a for a, b in zip(before, after)], "seen": seen}))
