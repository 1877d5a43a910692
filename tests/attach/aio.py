"""aio.py: an asyncio program for tests/attach/attach.py to attach to while it runs:
two named tasks, each with a CPU function of its own, forever; a line every 0.2 s; a
SIGUSR2 handler of its own (coprof's default toggle signal), which prints "usr2"."""
import asyncio
import signal
import time


def crunch_alpha(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def crunch_beta(n):
    s = 0
    for i in range(n):
        s += i ^ 7
    return s


async def worker(fn, n):
    while True:
        fn(n)
        await asyncio.sleep(0)


async def ticker():
    while True:
        print("tick", time.monotonic(), flush=True)
        await asyncio.sleep(0.2)


async def main():
    asyncio.get_running_loop().add_signal_handler(
        signal.SIGUSR2, lambda: print("usr2", flush=True))
    print("ready", flush=True)
    await asyncio.gather(asyncio.create_task(worker(crunch_alpha, 20000), name="alpha"),
                         asyncio.create_task(worker(crunch_beta, 10000), name="beta"),
                         asyncio.create_task(ticker(), name="ticker"))


asyncio.run(main())
