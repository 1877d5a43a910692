"""gap.py: the target of bench/attach/stop.py: one thread running Python code in a
tight loop, which notes the longest time between two of its iterations (the time it
did not run: stopped by a tracer, diverted, waiting for the GIL) and prints it every
`period` seconds, then starts again: `gap MS`."""
import sys
import time


def work(x):
    return (x * 1103515245 + 12345) & 0x7FFFFFFF


def main():
    period = float(sys.argv[1]) if len(sys.argv) > 1 else 0.25
    clock = time.perf_counter
    print("ready", flush=True)
    x, worst = 1, 0.0
    last = clock()
    end = last + period
    while True:
        x = work(x)
        now = clock()
        if now - last > worst:
            worst = now - last
        last = now
        if now >= end:
            print("gap %.3f" % (worst * 1e3), flush=True)
            worst = 0.0
            end = now + period
            last = clock()


main()
