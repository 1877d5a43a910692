"""Busy until a line comes on stdin, in a loop that polls stdin between short bursts of
work: the loop drops and retakes the GIL every half millisecond or so. argv[1] says
where the loop runs: "module" (the main module's own code), "func" (a function the
main module calls) or "thread" (a second thread, which the main thread joins). Says
"ready" first; the test toggles profiling by signal while it runs."""
import select
import sys
import threading


def burn(n):
    s = 0
    for i in range(n):
        s += i
    return s


def loop():
    while not select.select([sys.stdin], [], [], 0)[0]:
        burn(20000)
    sys.stdin.readline()


where = sys.argv[1]
if where == "thread":
    t = threading.Thread(target=loop)
    t.start()
    print("ready", flush=True)
    t.join()
elif where == "func":
    print("ready", flush=True)
    loop()
else:
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        burn(20000)
    sys.stdin.readline()
