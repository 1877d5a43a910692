"""Two forked children each run child_work; the parent runs parent_work. Each process
must profile itself into its own file. argv[1]: "os" (os.fork, the children exit
through sys.exit) or "mp" (multiprocessing's fork context, whose children end with
os._exit)."""
import multiprocessing as mp
import os
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


def with_multiprocessing():
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=child_work, args=(200000,)) for _ in range(2)]
    for p in procs:
        p.start()
    parent_work()
    for p in procs:
        p.join()
        assert p.exitcode == 0


if __name__ == "__main__":
    with_os_fork() if sys.argv[1] == "os" else with_multiprocessing()
