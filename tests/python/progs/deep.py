"""deep.py: coroutines nested N deep, each driven by send() from a plain function
called by the one above (each a task of its own for coprof). Each level calls after()
once its inner level finished."""
import sys


def drive(coro):
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value


def after(n):
    return n


async def level(n):
    if n:
        drive(level(n - 1))
    return after(n)


drive(level(int(sys.argv[1])))
print("done")
