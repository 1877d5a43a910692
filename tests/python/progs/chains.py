"""chains.py: two tasks, each an await chain DEPTH deep whose innermost level suspends
SUSPENDS times, run interleaved (gather): each suspension hands the thread to the other
task, and each step resumes a whole chain, root first. Every level calls mark() once
its inner level returned; every fourth level also calls mark() before it awaits."""
import asyncio
import sys

DEPTH, SUSPENDS = int(sys.argv[1]), int(sys.argv[2])


def mark(n):
    return n


async def tick():
    for _ in range(SUSPENDS):
        await asyncio.sleep(0)


async def level(n):
    if n == 0:
        await tick()
    else:
        if n % 4 == 0:
            mark(-n)
        await level(n - 1)
    return mark(n)


async def chain():
    await level(DEPTH)


async def main():
    await asyncio.gather(asyncio.create_task(chain(), name="left"),
                         asyncio.create_task(chain(), name="right"))


asyncio.run(main())
print("done")
