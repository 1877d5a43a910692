"""await_toggled.py: an await under way when profiling stops and starts again
(tests/python/run.py, case_await_toggled). Task-1 waits for an "arm" line on stdin,
then awaits the task "before", which waits for a "go" line; the test starts a window
before "arm", and writes it and starts another before "go". Task-1 then awaits the task
"inside", wholly in the second window, prints "inside done" and waits for "stop", which
the test sends once that window is written."""
import asyncio
import sys
import threading


def lines(loop, events):
    for line in sys.stdin:
        ev = events.get(line.strip())
        if ev:
            loop.call_soon_threadsafe(ev.set)


async def main():
    events = {k: asyncio.Event() for k in ("arm", "go", "stop")}
    threading.Thread(target=lines, args=(asyncio.get_running_loop(), events), daemon=True).start()
    print("ready", flush=True)
    await events["arm"].wait()
    before = asyncio.create_task(events["go"].wait(), name="before")
    print("waiting", flush=True)
    await before
    await asyncio.create_task(asyncio.sleep(0.05), name="inside")
    print("inside done", flush=True)
    await events["stop"].wait()


asyncio.run(main())
