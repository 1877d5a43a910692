"""orphans.py: pending asyncio tasks whose coroutines automatic collections close,
then argv[1] seconds idle in the loop, while COPROF_INTERVAL writes windows. A
collection may run at a function's first instruction (3.13 checks for it there), with
that frame, still starting, under the coroutine it closes: coprof once took that frame
for one that awaits, ignored the close, and listed the task as suspended in every
window until the thread ended. Prints when the idle time starts and ends (time.time())."""
import asyncio
import gc
import sys
import time
import weakref


async def orphan():
    await asyncio.get_running_loop().create_future()  # pending forever


async def main(idle):
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda loop, ctx: None)  # "Task was destroyed ..."
    refs = []
    for _ in range(20):
        t = loop.create_task(orphan(), name="ORPHAN")
        await asyncio.sleep(0)  # it starts and suspends
        refs.append(weakref.ref(t.get_coro()))
        del t
        # The next allocation (the coroutine asyncio.sleep makes) asks for a
        # collection, which runs at that coroutine's first instruction.
        old = gc.get_threshold()
        gc.set_threshold(1)
        await asyncio.sleep(0)
        gc.set_threshold(*old)
    print("collected", sum(r() is None for r in refs), "of", len(refs))
    gc.collect()
    # Coroutines never started take the memory of those closed: no later task starts
    # at a closed one's address (which would tell coprof that one is gone).
    fillers = [orphan() for _ in range(100)]
    print("idle", time.time(), flush=True)
    end = time.monotonic() + idle
    while time.monotonic() < end:
        await asyncio.sleep(0.05)
    print("end", time.time(), flush=True)
    for c in fillers:
        c.close()


asyncio.run(main(float(sys.argv[1])))
