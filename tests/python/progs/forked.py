"""Forks under the shim. argv[1]:
  "os": two children made with os.fork each run child_work (and leave through
        sys.exit); the parent runs parent_work. Each process profiles itself.
  "mp": the same with multiprocessing's fork context (children leave with os._exit).
  "toggle": forks both ways, says "ready", then runs parent_loop until a line comes on
        stdin: the test toggles profiling by signal meanwhile.
  "storm": says "ready", forks argv[2] short-lived children while the test sends toggle
        signals, says "forked", waits for a line on stdin, then runs final_work.
Every mode prints the same lines profiled or not (the test compares both runs)."""
import multiprocessing as mp
import os
import select
import sys


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def child_work(n):
    return burn(n)


def parent_work():
    return burn(100000)


def parent_loop():
    while not select.select([sys.stdin], [], [], 0)[0]:
        burn(20000)
    sys.stdin.readline()


def final_work():
    return burn(50000)


def with_os_fork():
    pids = []
    for _ in range(2):
        pid = os.fork()
        if pid == 0:
            child_work(200000)
            sys.exit(0)
        pids.append(pid)
    parent_work()
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    print("os.fork: 2 children done")


def with_multiprocessing():
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=child_work, args=(200000,)) for _ in range(2)]
    for p in procs:
        p.start()
    parent_work()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    print("multiprocessing: 2 children done")


def storm(n):
    print("ready", flush=True)
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
    print("forked", flush=True)
    sys.stdin.readline()
    final_work()


if __name__ == "__main__":
    how = sys.argv[1]
    if how == "os":
        with_os_fork()
    elif how == "mp":
        with_multiprocessing()
    elif how == "toggle":
        with_os_fork()
        with_multiprocessing()
        print("ready", flush=True)
        parent_loop()
    else:
        storm(int(sys.argv[2]))
