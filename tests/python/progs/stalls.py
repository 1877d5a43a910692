"""stalls.py: one task blocks its event loop, twice (tests/python/run.py, case_stalls).

"blocker" runs decode, 0.2 s of CPU with no await, in each of two steps; three
"quick" tasks wake every millisecond and do next to nothing; and on_tick, a loop
callback (call_later) that is no task's step, runs decode for 0.15 s. A stall
threshold of 100 ms (COPROF_STALL_MS) finds blocker's two steps and on_tick, each at
decode, and no quick step under cpu. Prints a fixed line.
"""
import asyncio
import time


def decode(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def blocker():
    for _ in range(2):
        await asyncio.sleep(0.01)
        decode(0.2)


async def quick():
    for _ in range(20):
        await asyncio.sleep(0.001)


def on_tick():
    decode(0.15)


async def main():
    asyncio.get_running_loop().call_later(0.005, on_tick)
    tasks = [asyncio.create_task(blocker(), name="blocker")]
    tasks += [asyncio.create_task(quick(), name="quick-%d" % i) for i in range(3)]
    await asyncio.gather(*tasks)


asyncio.run(main())
print("stalls: done")
