"""Greenlets switching under coprof (tests/python/run.py, cases greenlet_*).

usage: greenlets.py gevent|eventlet|plain|asyncio|threads OUT.json [SCALE]

gevent: two gevent greenlets, "heavy" and "light", burn 20 ms and 5 ms of CPU per
round, 10 rounds, switching through gevent.sleep; the program sets a greenlet tracer of
its own, which must keep seeing every switch. eventlet: the same two workers as eventlet
green threads (eventlet.spawn), switching through eventlet.sleep. plain: two raw greenlets (named from
their run functions) ping-pong through switch(). asyncio: a greenlet runs an event loop
whose task x switches into another greenlet (helper) and back, beside task y.
threads: two threads, each with a pair of raw greenlets.
Every burn is SCALE (default 1) times the time said here. Writes the CPU and wall time
each worker really burned, and what its tracer saw, to OUT.json."""
import json
import sys
import time

import greenlet

ROUNDS = 10
SCALE = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
measured = {"cpu": {}, "wall": {}, "rounds": {}, "switches": 0, "tracer_back": False}


def burn(sec):
    t0 = time.thread_time()
    while time.thread_time() - t0 < sec * SCALE:
        pass


def work(who, sec):
    t0, w0 = time.thread_time(), time.perf_counter()
    burn(sec)
    measured["cpu"][who] = measured["cpu"].get(who, 0.0) + time.thread_time() - t0
    wall = time.perf_counter() - w0
    measured["wall"][who] = measured["wall"].get(who, 0.0) + wall
    measured["rounds"].setdefault(who, []).append(wall)


def yield_to_hub():
    """gevent.sleep, or eventlet.sleep under the eventlet kind."""
    if "eventlet" in sys.modules:
        sys.modules["eventlet"].sleep(0.001)
    else:
        import gevent
        gevent.sleep(0.001)


def heavy():
    for _ in range(ROUNDS):
        work("heavy", 0.020)
        yield_to_hub()


def light():
    for _ in range(ROUNDS):
        work("light", 0.005)
        yield_to_hub()


def run_gevent():
    import gevent

    def tracer(event, args):
        measured["switches"] += 1

    greenlet.settrace(tracer)
    measured["tracer_back"] = greenlet.gettrace() is tracer
    gs = []
    for fn in (heavy, light):
        g = gevent.Greenlet(fn)
        g.name = fn.__name__
        g.start()
        gs.append(g)
    gevent.joinall(gs)
    measured["tracer_back"] = measured["tracer_back"] and greenlet.settrace(None) is tracer


def ping():
    for _ in range(ROUNDS):
        work("ping", 0.020)
        pong_g.switch()


def pong():
    for _ in range(ROUNDS):
        work("pong", 0.005)
        ping_g.switch()


def run_plain():
    global ping_g, pong_g
    main = greenlet.getcurrent()
    ping_g = greenlet.greenlet(ping, parent=main)
    pong_g = greenlet.greenlet(pong, parent=main)
    ping_g.switch()
    while not (ping_g.dead and pong_g.dead):
        (pong_g if ping_g.dead else ping_g).switch()


def helper():
    """A plain greenlet that an asyncio task switches into and out of (as SQLAlchemy's
    asyncio layer does)."""
    for _ in range(ROUNDS):
        work("b", 0.010)
        greenlet.getcurrent().parent.switch()


async def task_x():
    import asyncio
    for _ in range(ROUNDS):
        work("x", 0.020)
        helper_g.switch()  # leaves this task's greenlet in the middle of the task
        await asyncio.sleep(0)


async def task_y():
    import asyncio
    for _ in range(ROUNDS):
        work("y", 0.005)
        await asyncio.sleep(0)


def loop_main():
    """Runs an event loop inside a greenlet: its tasks run in this greenlet."""
    import asyncio

    async def top():
        await asyncio.gather(asyncio.create_task(task_x(), name="task-x"),
                             asyncio.create_task(task_y(), name="task-y"))

    asyncio.run(top())


def run_asyncio():
    global helper_g
    loop_g = greenlet.greenlet(loop_main)
    helper_g = greenlet.greenlet(helper, parent=loop_g)
    loop_g.switch()


def run_threads():
    """Two threads, each with its own pair of raw greenlets, started after greenlet was
    imported: each thread's greenlets are its own contexts."""
    import threading

    def pair(tag, sec):
        def left():
            for _ in range(ROUNDS):
                work(tag + "-left", sec)
                right_g.switch()

        def right():
            for _ in range(ROUNDS):
                work(tag + "-right", sec / 4)
                left_g.switch()

        left_g, right_g = greenlet.greenlet(left), greenlet.greenlet(right)
        left_g.switch()
        while not (left_g.dead and right_g.dead):
            (right_g if left_g.dead else left_g).switch()

    ts = [threading.Thread(target=pair, args=(tag, 0.010)) for tag in ("t1", "t2")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def run_eventlet():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eventlet says it is deprecated
        import eventlet
    gs = [eventlet.spawn(fn) for fn in (heavy, light)]
    for g in gs:
        g.wait()


{"gevent": run_gevent, "eventlet": run_eventlet, "plain": run_plain, "asyncio": run_asyncio,
 "threads": run_threads}[sys.argv[1]]()
with open(sys.argv[2], "w") as f:
    json.dump(measured, f)
