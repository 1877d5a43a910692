"""raw_thread.py: a thread started with _thread.start_new_thread while its creator's
next step is a C call that lets the GIL go (a lock it waits on), so the new thread runs
all its Python code before the creator runs any more of its own. The new thread calls
child(), which calls inner() once; the main thread waits until the thread is gone."""
import _thread
import time


def inner():
    return sum(range(1000))


def child(lock):
    inner()
    lock.release()


lock = _thread.allocate_lock()
lock.acquire()
_thread.start_new_thread(child, (lock,))
lock.acquire()
while _thread._count():
    time.sleep(0.001)
