"""codegen.py: a program that makes code as it runs (exec, as templates, dataclasses and
ORMs do). `alive`: whether a code object outlives its function. `rss N`: N functions
made and called, one at a time, then the peak RSS in KiB. `reuse`: functions of seven
names made and dropped in turn, so new code objects take dead ones' addresses; fnK is
called K + 1 times each time it is made."""
import gc
import resource
import sys
import weakref

mode = sys.argv[1]
if mode == "alive":
    ns = {}
    exec("def f(x):\n    return x\n", ns)
    ns["f"](1)
    r = weakref.ref(ns["f"].__code__)
    del ns
    gc.collect()
    print("code object alive after its function died:", r() is not None)
elif mode == "rss":
    for i in range(int(sys.argv[2])):
        ns = {}
        exec(compile("def f(x):\n    return x + %d\n" % i, "<gen>", "exec"), ns)
        ns["f"](1)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
elif mode == "reuse":
    made = [0] * 7
    for i in range(700):
        k = i % 7
        ns = {}
        exec(compile("def fn%d():\n    return %d\n" % (k, i), "<gen>", "exec"), ns)
        for _ in range(k + 1):
            ns["fn%d" % k]()
        made[k] += 1
        del ns
    print(made)
