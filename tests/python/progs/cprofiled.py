"""A program that profiles itself with cProfile (sys.monitoring tool 2 on 3.12+)
while coprof profiles it too: both must see every call. Writes cProfile's counts as
JSON to argv[1]."""
import cProfile
import json
import sys


def leaf(i):
    return i * 2


def busy(n):
    return sum(leaf(i) for i in range(n))


def main():
    prof = cProfile.Profile()
    prof.enable()
    busy(300)
    prof.disable()
    prof.create_stats()
    counts = {k[2]: v[1] for k, v in prof.stats.items() if k[2] in ("leaf", "busy")}
    with open(sys.argv[1], "w") as f:
        json.dump(counts, f)


main()
