"""Runs a program under yappi (CPU clock) and saves yappi's profile as a pstat file:
yappi_run.py OUT.pstat PROGRAM [ARGS...]"""
import runpy
import sys

import yappi

out, prog = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
yappi.set_clock_type("cpu")
yappi.start(builtins=False)
try:
    runpy.run_path(prog, run_name="__main__")
finally:
    yappi.stop()
    yappi.get_func_stats().save(out, type="pstat")
