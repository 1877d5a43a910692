#!/usr/bin/env python3
"""lineno-cost.py: what finding a frame's line number costs in CPython (issue 12: line
numbers per sample). frame.f_lineno walks the code's line table from its start, so the
cost grows with the offset in the function: a 3-line function against a frame at the
end of a 400-line one, minus the cost of reading an attribute (f_back).

usage: python3 bench/python/lineno-cost.py
"""
import sys, timeit
src = "def big():\n" + "".join("    x%d = %d\n" % (i, i) for i in range(400)) + "    return sys._getframe()\n"
ns = {"sys": sys}
exec(compile(src, "big", "exec"), ns)
def small():
    return sys._getframe()
for name, fn in (("small", small), ("big (400 lines, leaf at the end)", ns["big"])):
    f = fn()
    n = 200000
    t_line = timeit.timeit(lambda: f.f_lineno, number=n) / n
    t_base = timeit.timeit(lambda: f.f_back, number=n) / n
    print("%-34s f_lineno %.0f ns, attribute baseline %.0f ns -> %.0f ns for the line lookup" % (name, t_line * 1e9, t_base * 1e9, (t_line - t_base) * 1e9))
