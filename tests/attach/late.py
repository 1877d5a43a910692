"""late.py: a Python program for tests/attach/attach.py that starts a thread once coprof
is attached. The main thread crunches in main_crunch for ever; a thread reads orders on
stdin, a line each: "thread" starts a thread that crunches in late_crunch, and prints
"started"."""
import sys
import threading


def late_crunch():
    s = 0
    while True:
        for i in range(10000):
            s += i * i


def orders():
    for line in sys.stdin:
        if line.strip() == "thread":
            threading.Thread(target=late_crunch, name="late", daemon=True).start()
            print("started", flush=True)


def main_crunch():
    s = 0
    for i in range(10000):
        s ^= i
    return s


threading.Thread(target=orders, daemon=True).start()
print("ready", flush=True)
while True:
    main_crunch()
