"""sleeper.py: a Python program for tests/attach/attach.py: a thread spinning in
calls, and the main thread sleeping a second three times, printing how long each
sleep took by its own clock."""
import threading
import time


def step(x):
    return x + 1


def spin():
    x = 0
    while True:
        x = step(x)


threading.Thread(target=spin, daemon=True, name="spinner").start()
print("ready", flush=True)
for _ in range(3):
    t0 = time.monotonic()
    time.sleep(1)
    print("slept", time.monotonic() - t0, flush=True)
