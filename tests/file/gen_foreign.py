"""Writes pstats files made by other tools, for the reader's tests and the fuzz corpus.

usage: gen_foreign.py OUTDIR
  cprofile.pstat      python3 -m cProfile -o, on prog_work.py below
  yappi.pstat         yappi (if importable) YFuncStats.save(path, type='pstat')
  marshal-vN.pstat    one small pstats dict dumped with marshal versions 0 to 4
  types.marshal       one object of every plain marshal type (version 4)
Prints the names written. Fails if yappi is missing unless it is told to skip it
(--no-yappi): the caller decides, nothing is skipped silently.
"""
import marshal
import os
import subprocess
import sys

PROG = '''
def leaf(n):
    return n * 2

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def work():
    total = 0
    for i in range(3000):
        total += leaf(i)
    return total + fib(15) + len([1, 2, 3])

def main():
    for _ in range(3):
        work()

main()
'''

PSTATS = {
    ("a.py", 1, "main"): (1, 1, 0.5, 2.0, {}),
    ("a.py", 5, "fib"): (1, 15, 0.25, 1.5,
                         {("a.py", 1, "main"): (1, 1, 0.1, 1.5),
                          ("a.py", 5, "fib"): (14, 0, 0.15, 1.2)}),
    ("~", 0, "<built-in method builtins.len>"): (3, 3, 0.0, 0.0,
                                                {("a.py", 1, "main"): (3, 3, 0.0, 0.0)}),
    ("b\u00e9.py", 2**31 + 5, "big\u4e2d"): (2**33, 2**40, 1e-9, 2.5,
                                           {("a.py", 5, "fib"): (2**40, 2**33, 1e-9, 2.5)}),
}

TYPES = [None, True, False, 0, -1, 2**31 - 1, -2**31, 2**31, 2**63 - 1, 2**63, 2**64 - 1,
         2**64, -2**70, 1.5, -0.0, float("inf"), "", "ascii", "x" * 300, "n\u00f6n",
         "\U0001f680", b"bytes", (), (1,), tuple(range(300)), [1, [2, [3]]], {"k": (1, 2)},
         {1, 2}, frozenset(), frozenset([3]), 1j, Ellipsis, StopIteration]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = []
    prog = os.path.join(out, "prog_work.py")
    with open(prog, "w") as f:
        f.write(PROG)
    subprocess.check_call([sys.executable, "-m", "cProfile", "-o",
                           os.path.join(out, "cprofile.pstat"), prog])
    names.append("cprofile.pstat")
    if "--no-yappi" not in sys.argv:
        import yappi
        ns = {"__name__": "prog_work"}
        code = compile(PROG, prog, "exec")
        yappi.set_clock_type("cpu")
        yappi.start()
        exec(code, ns)
        yappi.stop()
        yappi.get_func_stats().save(os.path.join(out, "yappi.pstat"), type="pstat")
        names.append("yappi.pstat")
    shared = "shared.py"
    stats = dict(PSTATS)
    stats[(shared, 9, "s1")] = (1, 1, 0.0, 0.0, {})
    stats[(shared, 10, "s2")] = (1, 1, 0.0, 0.0, {(shared, 9, "s1"): (1, 1, 0.0, 0.0)})
    for v in range(5):
        name = "marshal-v%d.pstat" % v
        with open(os.path.join(out, name), "wb") as f:
            marshal.dump(stats, f, v)
        names.append(name)
    with open(os.path.join(out, "types.marshal"), "wb") as f:
        marshal.dump(TYPES, f, 4)
    names.append("types.marshal")
    print("\n".join(names))


main()
