"""Exceptions, throw() and cancellation: raiser() fails and is caught by its awaiter;
victim() is cancelled while it awaits (the innermost frame is re-entered first) and
cleans up; a generator gets throw(); gather and (3.11+) TaskGroup run tasks."""
import asyncio
import sys


async def raiser(n):
    await asyncio.sleep(0)
    raise ValueError(n)


async def catcher():
    caught = 0
    for i in range(2):
        try:
            await raiser(i)
        except ValueError:
            caught += 1
    return caught


async def deep_wait():
    await asyncio.sleep(10)


async def victim():
    try:
        await deep_wait()
    except asyncio.CancelledError:
        cleanup()
        raise


def cleanup():
    return sum(range(1000))


def echo():
    while True:
        try:
            yield
        except KeyError:
            pass


async def member(i):
    await asyncio.sleep(0.01 * i)
    return i


async def main():
    assert await catcher() == 2
    t = asyncio.create_task(victim(), name="victim")
    await asyncio.sleep(0.05)
    t.cancel()
    try:
        await t
    except asyncio.CancelledError:
        pass
    g = echo()
    next(g)
    g.throw(KeyError)
    g.close()
    assert await asyncio.gather(member(1), member(2)) == [1, 2]
    if sys.version_info >= (3, 11):
        async with asyncio.TaskGroup() as tg:
            tg.create_task(member(1))
            tg.create_task(member(2))


asyncio.run(main())
