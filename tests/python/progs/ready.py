"""ready.py: nine requests wait behind one blocking call (tests/python/run.py,
case_ready; bench/python/ready.py).

Nine "req-N" tasks sleep until timers due 5, 10, ... 45 ms after they began; then
"blocker" spins 0.1 s of CPU with no await, so each timer falls due while the loop
is blocked. Each request measures its own ready time, from its timer's due time to
its resume (loop.time()), and the times go to the JSON file argv[1]. Prints a fixed
line.
"""
import asyncio
import json
import sys
import time


def decode(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def request(i, truth):
    loop = asyncio.get_running_loop()
    delay = 0.005 * (i + 1)
    due = loop.time() + delay
    await asyncio.sleep(delay)
    truth["req-%d" % i] = loop.time() - due


async def blocker(truth):
    begin = time.thread_time()
    decode(0.1)
    truth["blocker cpu"] = time.thread_time() - begin


async def main(out):
    truth = {}
    reqs = [asyncio.create_task(request(i, truth), name="req-%d" % i) for i in range(9)]
    await asyncio.sleep(0)  # every request starts, and sleeps
    await asyncio.gather(asyncio.create_task(blocker(truth), name="blocker"), *reqs)
    with open(out, "w") as f:
        json.dump(truth, f)


asyncio.run(main(sys.argv[1]))
print("ready: done")
