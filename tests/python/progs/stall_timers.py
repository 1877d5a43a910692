"""stall_timers.py: a stall with only timers behind it (tests/pysample/run.py, case
stall_timers). main schedules on_stall 10 ms ahead and starts three sleepers, whose
sleeps fall due 12 ms after their first steps, and a blocker, whose first step blocks
the loop 30 ms (time.sleep: under the threshold). The loop's next iteration moves the
four timers to its ready queue at once, on_stall's first: on_stall runs decode for
0.15 s of CPU, the process's first stall, with the three sleepers' timer handles behind
it in the ready queue and none left scheduled. Prints a fixed line."""
import asyncio
import time


def decode(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def on_stall():
    decode(0.15)


async def sleeper():
    await asyncio.sleep(0.012)


async def blocker():
    time.sleep(0.03)


async def main():
    asyncio.get_running_loop().call_later(0.01, on_stall)
    tasks = [asyncio.create_task(sleeper(), name="sleeper-%d" % i) for i in range(3)]
    tasks.append(asyncio.create_task(blocker(), name="blocker"))
    await asyncio.gather(*tasks)
    await asyncio.sleep(0.2)  # on_stall has run


asyncio.run(main())
print("stall_timers: done")
