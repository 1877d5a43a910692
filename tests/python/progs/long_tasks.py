"""asyncio tasks that outlive profiling windows: three named tasks ("keeper-0".."keeper-2")
wake every 20 ms and go back to sleep, for as long as the program runs. Prints "ready"
once all have run. Each line read on stdin ends one keeper (it prints "ended NAME" once
its coroutine has returned); end of input ends the program."""
import asyncio
import sys
import threading


def work(n):
    return sum(range(n))


async def keeper(stop):
    while not stop.is_set():
        work(2000)
        try:
            await asyncio.wait_for(stop.wait(), 0.02)
        except asyncio.TimeoutError:
            pass


async def main():
    loop = asyncio.get_running_loop()
    stops = [asyncio.Event() for _ in range(3)]
    tasks = [asyncio.create_task(keeper(s), name="keeper-%d" % i) for i, s in enumerate(stops)]
    await asyncio.sleep(0.1)
    print("ready", flush=True)
    done = asyncio.Event()

    def read():
        for _ in sys.stdin:
            loop.call_soon_threadsafe(lambda: end_one())
        loop.call_soon_threadsafe(done.set)

    def end_one():
        i = next(i for i, s in enumerate(stops) if not s.is_set())
        stops[i].set()
        tasks[i].add_done_callback(lambda t: print("ended", t.get_name(), flush=True))

    threading.Thread(target=read, daemon=True).start()
    await done.wait()
    for s in stops:
        s.set()
    await asyncio.gather(*tasks)


asyncio.run(main())
