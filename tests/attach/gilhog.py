"""gilhog.py: a Python program that holds its GIL for 12 s (a C call through
ctypes.PyDLL keeps it), for tests/attach/attach.py: coprof attach gives up after 10 s,
and the profiler must then never start. Prints how long the call took."""
import ctypes
import time

print("ready", flush=True)
t0 = time.monotonic()
ctypes.PyDLL(None).sleep(12)
print("held %.3f" % (time.monotonic() - t0), flush=True)
time.sleep(1)
print("end", flush=True)
