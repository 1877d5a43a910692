"""multiprocessing with fork: two children each run child_work; the parent runs
parent_work. Each process must profile itself into its own file."""
import multiprocessing as mp


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def child_work(n):
    return burn(n)


def parent_work():
    return burn(100000)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=child_work, args=(200000,)) for _ in range(2)]
    for p in procs:
        p.start()
    parent_work()
    for p in procs:
        p.join()
        assert p.exitcode == 0
