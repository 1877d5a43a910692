"""execs.py: a Python program that works, prints, then replaces itself with os.execv
(usage: execs.py [then]). The image after exec runs this file again with "then": it
works in another function and prints. Each image's window must be in its own file."""
import os
import sys


def before_exec():
    return sum(i * i for i in range(20000))


def after_exec():
    return sum(i ^ 7 for i in range(20000))


if sys.argv[1:] == ["then"]:
    after_exec()
    print("after exec", flush=True)
else:
    before_exec()
    print("before exec", flush=True)
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "then"])
