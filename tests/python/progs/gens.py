"""gens.py: generator shapes for rules 6 and 3, as the hook's shortcuts meet them: a
yield-from tree whose subtrees end mid-walk, a generator started by next() then
delegated to, an exception raised up a yield from and caught, a throw() passed down a
chain, and, inside asyncio tasks, a generator __await__ delegating to a plain
generator (links of the task's chain) beside a plain tree the coroutine iterates.
Prints, as JSON, what the program counted itself: generators started per function, and
burn() calls per caller."""
import asyncio
import collections
import json

made = collections.Counter()   # generator function -> generators started
burns = collections.Counter()  # function -> burn() calls it made


def burn(who):
    burns[who] += 1
    s = 0
    for i in range(3000):
        s += i
    return s


class Tree:
    def __init__(self, left, value, right):
        self.left, self.value, self.right = left, value, right

    def __iter__(self):
        made["__iter__"] += 1
        if self.left:
            yield from self.left
        if self.value % 7 == 0:
            burn("__iter__")
        yield self.value
        if self.right:
            yield from self.right


def tree(lo, hi):
    if lo >= hi:
        return None
    mid = (lo + hi) // 2
    return Tree(tree(lo, mid), mid, tree(mid + 1, hi))


def leafy(n):
    made["leafy"] += 1
    for i in range(n):
        burn("leafy")
        yield i


def by_next(n):
    made["by_next"] += 1
    g = leafy(n)
    yield next(g)
    yield from g


def raising():
    made["raising"] += 1
    yield 1
    raise ValueError("up the chain")


def catcher():
    made["catcher"] += 1
    try:
        yield from raising()
    except ValueError:
        burn("catcher")
    yield 2


def thrown():
    made["thrown"] += 1
    try:
        yield from leafy(5)
    except KeyError:
        burn("thrown")
        yield -1


def inner_wait():
    made["inner_wait"] += 1
    burn("inner_wait")
    yield  # a bare yield: the task steps again on the next loop turn
    burn("inner_wait")


class Bridge:
    def __await__(self):
        made["__await__"] += 1
        yield from inner_wait()
        burn("__await__")
        return 1


async def task_body(i):
    burn("task_body")
    await Bridge()
    for _ in tree(0, 20 + i):
        pass
    burn("task_body")


async def tasks():
    await asyncio.gather(*(task_body(i) for i in range(6)))


def plain():
    t = tree(0, 300)
    for _ in range(3):
        for _ in t:
            pass
    for _ in range(4):
        for _ in by_next(4):
            pass
        list(catcher())
        g = thrown()
        next(g)
        next(g)
        g.throw(KeyError)
        g.close()


plain()
asyncio.run(tasks())
print(json.dumps({"made": made, "burns": burns}))
