"""A root-started master whose forked workers drop their privileges (issue 20).
argv[1]: the uid and gid to switch to (65534). The master makes four children with
os.fork; each calls os.setgroups([]), os.setgid and os.setuid, prints "worker I PID uid
U", then works in a function of its own (work_0 .. work_3) and leaves: even workers
through sys.exit, odd ones through os._exit. The master waits for them, then runs
master_work. Everything it needs is imported before the drop: as nobody, the
interpreter may not be able to read its own library (pyenv's under /root)."""
import os
import sys


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def work_0():
    return burn(300000)


def work_1():
    return burn(300000)


def work_2():
    return burn(300000)


def work_3():
    return burn(300000)


def master_work():
    return burn(300000)


WORKS = [work_0, work_1, work_2, work_3]


def worker(i, uid):
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    # one write(2) per line: the four workers print at once into one pipe
    os.write(1, b"worker %d %d uid %d\n" % (i, os.getpid(), os.getuid()))
    for _ in range(5):
        WORKS[i]()
    if i % 2:
        os._exit(0)
    sys.exit(0)


def main():
    uid = int(sys.argv[1])
    kids = []
    for i in range(4):
        pid = os.fork()
        if pid == 0:
            worker(i, uid)
        kids.append(pid)
    bad = 0
    for pid in kids:
        _, status = os.waitpid(pid, 0)
        bad |= status != 0
    master_work()
    sys.exit(1 if bad else 0)


main()
