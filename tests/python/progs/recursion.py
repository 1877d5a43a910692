"""A recursion deeper than the C stack holds with one C frame per Python call: 3.11+
run Python-to-Python calls in one C frame, so it runs unprofiled. In a thread with an
8 MiB stack (whatever ulimit -s says); prints the depth reached. Then a thread started
after it calls leaf() 100 times, and so does the main thread."""
import sys
import threading

DEPTH = int(sys.argv[1])
got = []


def down(n):
    return 0 if n == 0 else down(n - 1) + 1


def run():
    got.append(down(DEPTH))


sys.setrecursionlimit(DEPTH + 1000)
threading.stack_size(8 << 20)
t = threading.Thread(target=run, name="deep")
t.start()
t.join()
print(got[0])


def leaf():
    return 1


def after():
    for _ in range(100):
        leaf()


t = threading.Thread(target=after, name="after")
t.start()
t.join()
after()
