"""shapes.py: coroutine shapes that once confused coprof's task bookkeeping, one per
mode. eager: a task started eagerly (Task(eager_start=True), 3.12+) by the coroutine
that creates it. factory: eager_task_factory, the created task named PARENT (3.12+).
orphan: a pending task whose coroutine a collection closes inside another task.
orphan_auto: the same, closed by an automatic collection (3.13 closes it without an
event).
bridge: `await` through a generator-function __await__ (aiohttp's context managers).
agen: async generators finalized while suspended at a value yield, with no asyncio
hooks, then others made (likely at the same addresses) and resumed after an await."""
import asyncio
import gc
import sys
import types
import weakref


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def parent_work():
    return burn(300000)


def child_work():
    return burn(10000)


async def child():
    child_work()
    await asyncio.sleep(0.01)
    child_work()


async def parent():
    if mode == "eager":
        t = asyncio.Task(child(), loop=asyncio.get_running_loop(), eager_start=True)
    else:
        t = asyncio.get_running_loop().create_task(child())
    parent_work()
    await t


async def orphan():
    await asyncio.Event().wait()


async def keeper():
    t = asyncio.get_running_loop().create_task(orphan(), name="ORPHAN")
    await asyncio.sleep(0)
    del t
    gc.collect()
    parent_work()


async def keeper_auto():
    t = asyncio.get_running_loop().create_task(orphan(), name="ORPHAN")
    await asyncio.sleep(0)
    gone = weakref.ref(t.get_coro())
    del t
    old = gc.get_threshold()
    gc.set_threshold(50)
    junk = []
    for i in range(20000):  # allocations trigger the collections
        junk.append([i])
        if i % 1000 == 0:
            await asyncio.sleep(0)
    gc.set_threshold(*old)
    print("collected" if gone() is None else "not collected")
    parent_work()


async def request():
    burn(100000)
    await asyncio.sleep(0.01)
    burn(100000)


class Context:
    def __init__(self, coro):
        self.coro = coro

    def __await__(self):
        return (yield from self.coro.__await__())


async def bridged():
    await Context(request())


async def value_only():
    yield 1


@types.coroutine
def raw():
    yield "raw"


def work():
    return 1


async def awaits_first():
    await raw()
    work()
    yield 2


def agens(n):
    for _ in range(n):
        a = value_only()
        try:
            a.asend(None).send(None)
        except StopIteration:
            pass
        del a  # finalized at a value yield: no event on 3.13
        b = awaits_first()
        step = b.asend(None)
        step.send(None)  # to the await
        try:
            step.send(None)  # resumed after the await, to the value yield
        except StopIteration:
            pass
        del step, b


def after():
    return 0


async def main():
    if mode == "factory":
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        await asyncio.get_running_loop().create_task(parent(), name="PARENT")
    elif mode == "eager":
        await parent()
    elif mode == "orphan":
        await keeper()
    elif mode == "orphan_auto":
        await keeper_auto()
    elif mode == "bridge":
        await bridged()


mode = sys.argv[1]
if mode == "agen":
    agens(200)
else:
    asyncio.run(main())
after()
print("done")
