"""stalls.py: one task blocks its event loop, twice (tests/python/run.py, case_stalls).

"blocker" runs decode, 0.2 s of CPU with no await, in each of two steps; three
"quick" tasks wake every millisecond and do next to nothing. A stall threshold of
100 ms (COPROF_STALL_MS) finds blocker's two steps, at decode, and no quick step
under cpu. Prints a fixed line.
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


async def main():
    tasks = [asyncio.create_task(blocker(), name="blocker")]
    tasks += [asyncio.create_task(quick(), name="quick-%d" % i) for i in range(3)]
    await asyncio.gather(*tasks)


asyncio.run(main())
print("stalls: done")
