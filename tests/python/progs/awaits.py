"""Counting and waiting: inner() is awaited 3 times and suspends twice each time; a
generator is run twice; an async generator yields 3 values with an await between each;
waiter() awaits a future resolved 0.3 s later; sleeper() awaits asyncio.sleep(0.3)."""
import asyncio


async def inner():
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return 1


async def outer():
    total = 0
    for _ in range(3):
        total += await inner()
    return total


def numbers(n):
    for i in range(n):
        yield i


async def ticker():
    for i in range(3):
        await asyncio.sleep(0)
        yield i


async def waiter(loop):
    fut = loop.create_future()
    loop.call_later(0.3, fut.set_result, None)
    await fut


async def sleeper():
    await asyncio.sleep(0.3)


async def main():
    loop = asyncio.get_running_loop()
    assert await outer() == 3
    assert sum(numbers(5)) + sum(numbers(5)) == 20
    assert [i async for i in ticker()] == [0, 1, 2]
    await asyncio.gather(waiter(loop), sleeper())


asyncio.run(main())
