"""await_many.py: more await edges than a thread keeps (tests/python/run.py,
case_await_many). Task-1 gathers 20 tasks "batch-<i>", each a gather of 5,000 tasks
that await asyncio.sleep(0): 100,020 edges, each waited on once. Prints a fixed line.
"""
import asyncio


async def leaf():
    await asyncio.sleep(0)


async def batch():
    await asyncio.gather(*(leaf() for _ in range(5000)))


async def main():
    await asyncio.gather(*(asyncio.create_task(batch(), name="batch-%d" % i) for i in range(20)))


asyncio.run(main())
print("await_many: done")
