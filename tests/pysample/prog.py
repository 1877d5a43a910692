"""prog.py: the programs tests/pysample/run.py samples (one per first argument).

split     heavy() and light() share the CPU 2:1, for SECONDS (argv[2]) of CPU
threads   two threads, one started while sampling runs, each with a function of its own
phases    reads a phase name per line on stdin, spins in that phase's function, answers
fork      os.fork(): the child spins in child_work, the parent in parent_work
stress    frame races: threads make and drop functions, lambdas, generators and exec'd
          code objects as fast as they can, for SECONDS (argv[2])
tasks     asyncio: tasks "three" (named by create_task) and "one" (named by set_name)
          share the CPU 3:1 for SECONDS of CPU; "sleeper" awaits fetch(), which waits
          for the split to end (an asyncio.Event) after running for far less than a tick
tthreads  tasks' program in two event loops at once, each in a thread of its own
          (threading.Thread(target=asyncio.run)), the main thread blocked in join():
          SECONDS of each loop thread's CPU; the second's tasks are three_b, one_b and
          sleeper_b, its functions big_b and small_b; writes both splits
atoggle   phases as above, each run in an asyncio task named task_<phase>
achurn    asyncio tasks made and finished for SECONDS, in batches of 40: task t<j> runs
          the exec'd coroutine function f<j> (coroutines reuse dead ones' addresses)
tchurn    achurn in two loops at once, in two threads, the main thread in join()
afork     os.fork() inside a task: the child runs task child_task, the parent
          parent_task
idle      N (argv[2]) tasks named idle<k> wait on one Event while the main task spins
          for a second of its CPU; writes to argv[3] (JSON) how long they waited (until
          the set, and until the last one resumed)
gap       task "gapped" starts with one C call of about 0.12 s (csum: sum over a range),
          which holds the GIL: no scan of tasks can run before it returns
reuse     task reused_a spins 0.05 s of CPU and finishes; then a coroutine of reused_b made at
          its address (looked for among 64) spins as task reused_b until DELAY (argv[2],
          s) + 0.6 s after reused_a began (0.2 s at least); writes to argv[3] (JSON) whether the address
          was reused. Run with COPROF_TEST_SCAN_DELAY_MS=DELAY * 1000, no scan lists
          reused_a: its ticks are held for the scan that finds reused_b there
Each prints a line of its own that the test compares with an unprofiled run; the
timed ones (split, stress, tasks, tthreads, achurn, tchurn) print the same line
whatever SECONDS, so that run may be a shorter one.
"""
import os
import sys
import threading
import time

# PYSAMPLE_SHORT=1 (run.py's unprofiled runs of threads, fork, afork and idle): each
# spin a tenth as long; the line printed is the same.
SCALE = 0.1 if os.environ.get("PYSAMPLE_SHORT") == "1" else 1.0


def spin_for(seconds, fn):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        fn(2000)
        n += 1
    return n


def heavy(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def light(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def split(seconds, side=None):
    """heavy does twice light's work per round. The program also times each call on
    both clocks and writes the shares it measured to `side` (JSON): on a loaded machine
    a thread's waits for a CPU land where it resumes, so the wall split of a run is
    only 2:1 on average, and the test compares the samples with what this run did."""
    end = time.process_time() + seconds
    rounds = 0
    spent = {"heavy": [0.0, 0.0], "light": [0.0, 0.0]}
    while time.process_time() < end:
        for fn, n in ((heavy, 40000), (light, 20000)):
            w, c = time.perf_counter(), time.thread_time()
            fn(n)
            s = spent[fn.__name__]
            s[0] += time.perf_counter() - w
            s[1] += time.thread_time() - c
        rounds += 1
    if side:
        import json
        with open(side, "w") as f:
            json.dump({clock: spent["heavy"][i] / (spent["heavy"][i] + spent["light"][i])
                       for i, clock in enumerate(("wall", "cpu"))}, f)
    print("split done", rounds > 0)


def thread_a(n):
    return heavy(n)


def thread_b(n):
    return light(n)


def threads():
    a = threading.Thread(target=spin_for, args=(0.5 * SCALE, thread_a), name="early")
    a.start()
    time.sleep(0.1)  # the second thread starts while the first is being sampled
    b = threading.Thread(target=spin_for, args=(0.5 * SCALE, thread_b), name="late")
    b.start()
    a.join()
    b.join()
    print("threads done")


def phase_a(n):
    return heavy(n)


def phase_b(n):
    return heavy(n)


def phase_c(n):
    return heavy(n)


def phases():
    fns = {"a": phase_a, "b": phase_b, "c": phase_c}
    print("ready", flush=True)
    for line in sys.stdin:
        name = line.strip()
        spin_for(0.3, fns[name])
        print("done", name, flush=True)


def child_work(n):
    return heavy(n)


def parent_work(n):
    return heavy(n)


def fork():
    pid = os.fork()
    if pid == 0:
        spin_for(0.4 * SCALE, child_work)
        sys.stdout.flush()
        os._exit(0)
    spin_for(0.4 * SCALE, parent_work)
    _, status = os.waitpid(pid, 0)
    print("fork done", status)


def churn(seconds, k):
    """Makes and drops code: exec'd functions named f<i> whose first line is i + 1 (the
    test checks every sampled one against that), lambdas, closures, generators."""
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        j = (i * 7 + k) % 40
        ns = {}
        exec(compile("\n" * j + "def f%d(n):\n    return sum(range(n))\n" % j, "<churn>",
                     "exec"), ns)
        ns["f%d" % j](50)
        f = lambda x: x + 1  # noqa: E731
        f(i)

        def gen(n):
            for v in range(n):
                yield v
        sum(gen(20))

        def outer():
            def inner():
                return i
            return inner()
        outer()
        i += 1


def stress(seconds):
    ts = [threading.Thread(target=churn, args=(seconds, k)) for k in range(4)]
    for t in ts:
        t.start()
    churn(seconds, 4)
    for t in ts:
        t.join()
    print("stress done")


async def big(n):
    return heavy(n)


async def small(n):
    return light(n)


async def worker(fn, n, spent):
    """Runs fn(n) round after round, yielding to the loop between rounds; adds the CPU
    and wall time of each round to spent."""
    import asyncio
    while True:
        w, c = time.perf_counter(), time.thread_time()
        await fn(n)
        spent[0] += time.perf_counter() - w
        spent[1] += time.thread_time() - c
        await asyncio.sleep(0)


async def fetch(done):
    """Waits until the split is over (`done`, an asyncio.Event); returns the wall time the
    await took. Not a fixed sleep: on a loaded machine the first scan of the tasks came
    after a 0.5 s sleep had ended, and no wait was sampled at all."""
    t0 = time.perf_counter()
    await done.wait()
    return time.perf_counter() - t0


async def waiter(done):
    return await fetch(done)


async def big_b(n):
    return heavy(n)


async def small_b(n):
    return light(n)


async def split_tasks(seconds, cpu_clock, suffix="", fns=(big, small)):
    """The 3:1 split between tasks three<suffix> and one<suffix> (each measures its own
    time on both clocks) for `seconds` on cpu_clock, beside sleeper<suffix>, which
    mostly waits. Returns three's share on each clock, and the line to print (the
    caller prints it: two threads' prints may interleave)."""
    import asyncio
    spent = {"three": [0.0, 0.0], "one": [0.0, 0.0]}
    done = asyncio.Event()
    sleeper = asyncio.create_task(waiter(done), name="sleeper" + suffix)
    a = asyncio.create_task(worker(fns[0], 30000, spent["three"]), name="three" + suffix)
    b = asyncio.create_task(worker(fns[1], 10000, spent["one"]))
    b.set_name("one" + suffix)
    end = cpu_clock() + seconds
    while cpu_clock() < end:
        await asyncio.sleep(0.02)
    done.set()
    a.cancel()
    b.cancel()
    await asyncio.gather(a, b, sleeper, return_exceptions=True)
    shares = {clock: spent["three"][i] / (spent["three"][i] + spent["one"][i])
              for i, clock in enumerate(("wall", "cpu"))}
    shares["slept"] = sleeper.result()
    return shares, "tasks%s done %s %s" % (suffix, a.cancelled(), b.cancelled())


def write_side(side, measured):
    if side:
        import json
        with open(side, "w") as f:
            json.dump(measured, f)


def tasks(seconds, side=None):
    """The 3:1 split between two tasks (each measures its own time on both clocks and
    writes its share to `side`, JSON), and a task that mostly waits."""
    import asyncio
    measured, line = asyncio.run(split_tasks(seconds, time.process_time))
    print(line)
    write_side(side, measured)


def tthreads(seconds, side=None):
    """Two loops at once, in two threads; the main thread waits in join()."""
    import asyncio
    out = {}

    def run(suffix, fns):
        out[suffix] = asyncio.run(split_tasks(seconds, time.thread_time, suffix, fns))
    ts = [threading.Thread(target=run, args=("", (big, small)), name="loop_a"),
          threading.Thread(target=run, args=("_b", (big_b, small_b)), name="loop_b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(out[""][1], out["_b"][1])
    write_side(side, {k: v[0] for k, v in out.items()})


def atoggle():
    import asyncio
    fns = {"a": phase_a, "b": phase_b, "c": phase_c}

    async def run(fn):
        spin_for(0.3, fn)

    async def main():
        print("ready", flush=True)
        for line in sys.stdin:
            name = line.strip()
            await asyncio.create_task(run(fns[name]), name="task_" + name)
            print("done", name, flush=True)
    asyncio.run(main())


def afork():
    """A task runs and ends, then os.fork(): the child and the parent each run a task
    of their own in a loop of their own."""
    import asyncio

    async def work(fn, name):
        await asyncio.create_task(spin(fn), name=name)

    async def spin(fn):
        spin_for(0.3 * SCALE, fn)

    asyncio.run(work(parent_work, "before_fork"))
    pid = os.fork()
    if pid == 0:
        asyncio.run(work(child_work, "child_task"))
        sys.stdout.flush()
        os._exit(0)
    asyncio.run(work(parent_work, "parent_task"))
    _, status = os.waitpid(pid, 0)
    print("afork done", status)


def achurn(seconds, threads=0):
    """Tasks made and finished for `seconds`, in the main thread's loop, or with
    `threads` set in as many loops in threads of their own at once (the main thread in
    join())."""
    import asyncio
    src = ("async def f%d(n):\n    import asyncio\n    x = 0\n    for r in range(20):\n"
           "        for i in range(n):\n            x += i\n"
           "        await asyncio.sleep(0)\n    return x\n")
    fns = []
    for j in range(40):
        ns = {}
        exec(compile(src % j, "<achurn>", "exec"), ns)
        fns.append(ns["f%d" % j])

    async def main():
        end = time.monotonic() + seconds
        i = batches = 0
        while time.monotonic() < end:
            await asyncio.gather(*[asyncio.create_task(fns[(i + k) % 40](300),
                                                       name="t%d" % ((i + k) % 40))
                                   for k in range(40)])
            i += 7
            batches += 1
        return batches > 0
    if not threads:
        print("achurn done", asyncio.run(main()))
        return
    done = []
    ts = [threading.Thread(target=lambda: done.append(asyncio.run(main())))
          for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("achurn done", len(done) == threads and all(done))


def idle(n, side):
    """n tasks wait on one Event while the main task computes for a second of its CPU
    (wall time measured from the moment they all wait to the moment they are let go):
    of CPU, so that under the cpu clock as many ticks ask for scans of the tasks
    whatever the load (a second of wall time at load 4 gave too few to list them all)."""
    import asyncio
    import json

    resumed = []

    async def wait(ev):
        await ev.wait()
        resumed.append(time.perf_counter())

    async def main():
        ev = asyncio.Event()
        tasks = [asyncio.create_task(wait(ev), name="idle%d" % k) for k in range(n)]
        await asyncio.sleep(0)  # every task runs up to its wait
        t0, c0 = time.perf_counter(), time.thread_time()
        while time.thread_time() - c0 < 1.0 * SCALE:
            heavy(20000)
            await asyncio.sleep(0)
        waited = time.perf_counter() - t0
        ev.set()
        await asyncio.gather(*tasks)
        with open(side, "w") as f:
            # the last task resumes after the set, once the loop runs it (late on a
            # loaded machine): it waited that long
            json.dump({"waited": waited, "resumed": max(resumed) - t0}, f)
        print("idle done", len(tasks))
    asyncio.run(main())


def csum(n):
    """One C call: it holds the GIL throughout, so no pending call (no scan of tasks)
    runs before it returns."""
    return sum(range(n))


async def gapped(n):
    csum(n)
    import asyncio
    await asyncio.sleep(0.05)  # alive when the scan its ticks asked for runs


def gap():
    import asyncio
    best = 1.0
    for _ in range(3):  # the fastest of three: a run slowed by a busy core gave 0.05 s
        t0 = time.thread_time()  # CPU time
        sum(range(10 ** 6))  # not in csum: none of csum runs outside the task
        best = min(best, time.thread_time() - t0)
    n = int(10 ** 6 * 0.12 * SCALE / max(best, 1e-4))

    async def main():
        await asyncio.sleep(0.1)  # the main task is listed first
        await asyncio.create_task(gapped(n), name="gapped")
    asyncio.run(main())
    print("gap done")


def spin_wall(until):
    x = 0
    while time.perf_counter() < until:
        x += 1
    return x


def spin_cpu(seconds):
    """Spins `seconds` of the thread's CPU time (sampled on either clock)."""
    end, x = time.thread_time() + seconds, 0
    while time.thread_time() < end:
        x += 1
    return x


# reused_a and reused_b have the same shape: their coroutines are of one size, so one
# may be made where the other was.
async def reused_a(seconds):
    return spin_cpu(seconds)


async def reused_b(until):
    return spin_wall(until)


def reuse(delay, side):
    import asyncio
    import json

    async def main():
        # The main task is listed first: the scan it asks for runs once a thread runs
        # bytecode after the delay (a main thread asleep in the loop's select does not).
        t0 = time.perf_counter()
        while time.perf_counter() < t0 + delay + 0.3:
            await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        ta = asyncio.create_task(reused_a(0.05), name="reused_a")
        await ta
        await asyncio.sleep(0)
        at = id(ta.get_coro())
        del ta  # frees reused_a's coroutine
        until = max(t0 + delay + 0.6, time.perf_counter() + 0.2)
        spare, cb = [], None
        for _ in range(64):
            c = reused_b(until)
            if id(c) == at:
                cb = c
                break
            spare.append(c)
        for c in spare:
            c.close()
        if cb is None:
            cb = reused_b(until)
        await asyncio.create_task(cb, name="reused_b")
        with open(side, "w") as f:
            json.dump({"reused": id(cb) == at}, f)
    asyncio.run(main())
    print("reuse done")


def handles():
    """What a program prints of asyncio's Handle._run, which sample mode watches (on
    3.10 and 3.11 by a stand-in on its class): the stack a callback sees, the traceback
    of a callback that raises (through the loop's exception handler), a task's, and how
    the class shows the method."""
    import asyncio
    import traceback

    def show_stack():
        print("".join(traceback.format_stack()[-4:]).replace(sys.prefix, "PREFIX"))

    def fail():
        raise ValueError("callback failed")

    async def failing_task():
        await asyncio.sleep(0)
        raise KeyError("task failed")

    def on_error(loop, context):
        e = context.get("exception")
        print("handler:", context["message"])
        print("".join(traceback.format_exception(type(e), e, e.__traceback__)))

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(on_error)
        loop.call_soon(show_stack)
        loop.call_soon(fail)
        await asyncio.sleep(0.01)
        try:
            await asyncio.create_task(failing_task())
        except KeyError:
            traceback.print_exc(file=sys.stdout)
        h = asyncio.events.Handle(show_stack, (), loop)
        h._run()
        print(callable(asyncio.events.Handle._run), repr(h).split(" ")[0])
    asyncio.run(main())
    print("handles done")


if __name__ == "__main__":
    what = sys.argv[1]
    arg = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    {"split": lambda: split(arg, sys.argv[3] if len(sys.argv) > 3 else None),
     "threads": threads, "phases": phases, "fork": fork,
     "stress": lambda: stress(arg),
     "tasks": lambda: tasks(arg, sys.argv[3] if len(sys.argv) > 3 else None),
     "tthreads": lambda: tthreads(arg, sys.argv[3] if len(sys.argv) > 3 else None),
     "atoggle": atoggle, "afork": afork, "achurn": lambda: achurn(arg),
     "tchurn": lambda: achurn(arg, 2),
     "idle": lambda: idle(int(arg), sys.argv[3]), "gap": gap,
     "reuse": lambda: reuse(arg, sys.argv[3]), "handles": handles}[what]()
