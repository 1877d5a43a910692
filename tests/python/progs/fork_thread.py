"""fork_thread.py: CPython's test_3_join_in_forked_from_thread (test_threading): a
thread forks while the main thread ends the program; in the child, that thread (the
child's only one) starts a thread that joins the parent's main thread, then returns,
which ends the child. Prints "end of main" and "end of thread" (from the child); the
parent exits 0 once the child did."""
import os
import sys
import threading


def joiningfunc(mainthread):
    mainthread.join()
    print("end of thread")
    sys.stdout.flush()


main_thread = threading.current_thread()


def worker():
    childpid = os.fork()
    if childpid != 0:
        _, status = os.waitpid(childpid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            print("child exit %d" % code, flush=True)
        sys.exit(0)
    t = threading.Thread(target=joiningfunc, args=(main_thread,))
    print("end of main")
    t.start()
    t.join()  # must not block: main_thread is stopped in the child


w = threading.Thread(target=worker)
w.start()
