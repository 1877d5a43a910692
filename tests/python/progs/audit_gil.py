"""audit_gil.py: an audit hook of the program's that drops the GIL while coprof puts
its profile function on a new thread (sys.setprofile's audit event, raised by
_PyEval_SetProfile). `exit`: the new thread exits meanwhile. `stop`: the new thread
sends the toggle signal (a stop) meanwhile (only under coprof, which takes it). Prints the events its hook saw that
coprof could have caused, so that a run under coprof prints what one without does."""
import os
import signal
import sys
import threading
import time

mode = sys.argv[1]
seen = []
armed = [True]


def hook(event, args):
    if event in ("sys.setprofile", "sys.settrace"):
        seen.append(event)
    if event == "_thread.start_new_thread" or event == "_thread.start_joinable_thread":
        seen.append("start")
    if event == "sys.setprofile" and armed[0]:
        armed[0] = False
        time.sleep(0.3)  # the GIL is released: other threads run


sys.addaudithook(hook)
done = threading.Event()


def worker():
    if mode == "stop" and "coprof" in os.environ.get("LD_PRELOAD", ""):
        os.kill(os.getpid(), signal.SIGUSR2)
        done.wait()


def leaf(i):
    return i * 2


t = threading.Thread(target=worker)
t.start()
total = sum(leaf(i) for i in range(2000))
time.sleep(0.1)
done.set()
t.join()
print(mode, total, sorted(set(seen)))
