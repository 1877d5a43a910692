"""Three asyncio tasks that run steps without end, each a call of work() and a yield to
the loop, while profiling is stopped from outside. Prints "ready" once all three have
run a step, and ends at a line on stdin."""
import asyncio

from stdin_line import line_on_stdin


def work(n):
    return sum(i * i for i in range(n))


async def worker(started):
    started.release()
    while True:
        work(50)
        await asyncio.sleep(0)


async def main():
    started = asyncio.Semaphore(0)
    workers = [asyncio.create_task(worker(started), name="worker-%d" % i) for i in range(3)]
    for _ in workers:
        await started.acquire()
    print("ready", flush=True)
    await line_on_stdin()
    for w in workers:
        w.cancel()
    await asyncio.gather(*workers, return_exceptions=True)


asyncio.run(main())
