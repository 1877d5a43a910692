"""deep_recursion.py DEPTH: a recursion DEPTH calls deep in the main thread, the limit
raised far past it: how deep the C stack lets it go. Prints the depth reached."""
import sys

sys.setrecursionlimit(10_000_000)
DEPTH = int(sys.argv[1])


def rec(n):
    return 0 if n == 0 else 1 + rec(n - 1)


print(rec(DEPTH))
