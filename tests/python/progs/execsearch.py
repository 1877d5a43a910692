"""execsearch.py: a Python program that calls work() 20 times, then replaces itself
with os.execvp, which tries each folder of PATH in turn (usage: execsearch.py PYTHON
[then]). The image after exec runs this file again with "then": it works in
after_exec and prints. Each failed attempt must leave the window going on: the work
is in the first file, the image after exec in the second."""
import os
import sys


def work():
    return sum(range(20000))


def after_exec():
    return sum(i ^ 7 for i in range(20000))


if sys.argv[2:] == ["then"]:
    after_exec()
    print("after exec", flush=True)
else:
    for _ in range(20):
        work()
    print("before exec", flush=True)
    os.execvp(sys.argv[1], [sys.argv[1], os.path.abspath(__file__), sys.argv[1], "then"])
