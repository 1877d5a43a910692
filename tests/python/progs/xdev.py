"""xdev.py: a little of everything coprof hooks (coroutines, tasks, threads, a
generator), for runs under -X dev and PYTHONMALLOC=debug, where memory freed through
another allocator API than the one that made it aborts the process at exit."""
import asyncio
import threading


def numbers(n):
    yield from range(n)


async def work(n):
    await asyncio.sleep(0)
    return sum(numbers(n))


async def main():
    # -X dev turns asyncio's debug mode on, which warns of steps slower than 0.1 s: a
    # matter of the machine's load, not of what is tested here.
    asyncio.get_running_loop().slow_callback_duration = 60
    return sum(await asyncio.gather(*(work(i) for i in range(50))))


t = threading.Thread(target=lambda: sum(numbers(1000)))
t.start()
print(asyncio.run(main()))
t.join()
