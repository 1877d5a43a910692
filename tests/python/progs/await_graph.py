"""await_graph.py: a known graph of who awaits whom (tests/python/run.py, case_await_graph).

Task-1 (asyncio.run's) awaits the task "main", which awaits, in turn:
- the task "child";
- a gather of "g1", "g2", "g3"; g3 awaits the task "deep", the longest wait of all;
- (3.11+) a TaskGroup of "tg1" and "tg2";
- asyncio.wait() of "w1" and "w2", and wait_for() of "wf" (which awaits the task
  itself from 3.12 on);
- a gather of "a1" and "a2", which both await the task "shared" (two awaiters);
- the task "patient", which waits twice on a shield of the task "long": main cancels
  the first wait; the shield keeps "long" running.
So the critical path of Task-1 is main > g3 > deep. Prints a fixed line.
"""
import asyncio
import sys


async def work(seconds):
    await asyncio.sleep(seconds)


async def relay(name, seconds):
    await asyncio.create_task(work(seconds), name=name)


async def waits_on(task):
    await task


async def patient(task):
    for _ in range(2):
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            pass


async def main():
    await asyncio.create_task(work(0.02), name="child")
    await asyncio.gather(asyncio.create_task(work(0.01), name="g1"),
                         asyncio.create_task(work(0.02), name="g2"),
                         asyncio.create_task(relay("deep", 0.4), name="g3"))
    if sys.version_info >= (3, 11):
        async with asyncio.TaskGroup() as tg:
            tg.create_task(work(0.01), name="tg1")
            tg.create_task(work(0.03), name="tg2")
    await asyncio.wait([asyncio.create_task(work(0.01), name="w1"),
                        asyncio.create_task(work(0.02), name="w2")])
    await asyncio.wait_for(asyncio.create_task(work(0.01), name="wf"), 5)
    shared = asyncio.create_task(work(0.03), name="shared")
    await asyncio.gather(asyncio.create_task(waits_on(shared), name="a1"),
                         asyncio.create_task(waits_on(shared), name="a2"))
    long = asyncio.create_task(work(0.1), name="long")
    p = asyncio.create_task(patient(long), name="patient")
    await asyncio.sleep(0.03)
    p.cancel()
    await p
    assert long.done()


async def top():
    await asyncio.create_task(main(), name="main")


asyncio.run(top())
print("await_graph: done")
