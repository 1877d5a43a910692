"""handover_profiler.py DEPTH: a program that profiles itself while coprof's
frame-evaluation backend hands over to the profile function (3.11: a recursion after
the limit was raised far past what the C stack holds at one C frame per call). The
main thread runs cProfile, thread 'own' a sys.setprofile function of its own, thread
'bare' none. Each of the program's profilers must see every call it sees unprofiled,
and sys.getprofile() answer what the program set. Prints one JSON line."""
import cProfile
import json
import pstats
import sys
import threading

DEPTH = int(sys.argv[1])
ready = threading.Barrier(3)
go = threading.Event()
seen = {}


def own_work():
    return 1


def bare_work():
    return 2


def own():
    calls = []

    def count(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "own_work":
            calls.append(frame)

    sys.setprofile(count)
    ready.wait()
    go.wait()
    for _ in range(7):
        own_work()
    seen["own_getprofile"] = sys.getprofile() is count
    sys.setprofile(None)
    seen["own_work"] = len(calls)


def bare():
    ready.wait()
    go.wait()
    for _ in range(50):
        bare_work()


def rec(n):
    return 0 if n == 0 else 1 + rec(n - 1)


def after():
    return sum(range(10))


threads = [threading.Thread(target=own, name="own"), threading.Thread(target=bare, name="bare")]
for t in threads:
    t.start()
ready.wait()
pr = cProfile.Profile()
pr.enable()
sys.setrecursionlimit(1_000_000)
seen["rec_returned"] = rec(DEPTH)
for _ in range(5):
    after()
seen["main_getprofile"] = sys.getprofile() is pr
pr.disable()
go.set()
for t in threads:
    t.join()
calls = {k[2]: v[1] for k, v in pstats.Stats(pr).stats.items()}
seen["rec"] = calls.get("rec")
seen["after"] = calls.get("after")
print(json.dumps(seen, sort_keys=True))
