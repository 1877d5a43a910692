#!/usr/bin/env python3
"""The test tiers: which of a build's tests the per-change tier runs.

usage: tiers.py change|asan BUILDDIR     prints the tier's test names, one a line

- change (the gcc build): unit, viewer, every native and file test, and one Python
  fully (PRIMARY: its cases under its own backend, sampled, CPython's own suites; under
  the profile function, PY_SUBSET and PY_SUBSET_PROFILE, as that backend's C is the
  same on every version and --all runs its every case on every Python),
  and PRIMARY's pip install (a wheel built and installed in a fresh venv); the
  other Pythons' (`pip install .`) run in --all;
  the other Pythons run PY_SUBSET (PY_SUBSET_PROFILE under the profile function) and
  PYSAMPLE_SUBSET, the cases whose code differs by
  version (the frame-evaluation backend below 3.12, the frame layouts the sampler
  reads, greenlet, fork).
- asan (the AddressSanitizer+UBSan build): unit, every native test but the slow
  ones and coprof attach's (its targets run without the sanitizer), and PRIMARY's and
  ASAN_EVALFRAME's ASAN_PY_SUBSET: the shim's C under the sanitizers, on both Python
  backends' code.

`scripts/test.sh` runs both; `scripts/test.sh --all` runs every test of every build
(tests/meson.build names the suites). A test is in a tier by its name, here only.
"""
import json
import re
import subprocess
import sys

PRIMARY = "3.12"
# the frame-evaluation backend's Python under the sanitizers: 3.11, whose adapter the
# native tests' /usr/bin/python3 needs there anyway (3.10 would add an adapter's 25
# files to compile)
ASAN_EVALFRAME = "3.11"
PY_SUBSET = {
    "tasks_cpu", "awaits_cpu", "errors", "generators", "recursion", "threads", "forked",
    "forked_sample", "exec", "hook_backend", "greenlet_gevent", "greenlet_gevent_sample",
    "slow_stop",  # a stop that waits for the GIL: the window ends with the hook off
    "dropped_sample", "toggle_at_exit", "pyenv_shim", "stalls_cpu", "ready_wall",
    # the frame-evaluation backend (3.10, 3.11) and sys.monitoring's (3.12+)
    "hook_rejected", "handover_profiler", "chained_slot", "deep_recursion",
    "cprofiled", "tool_freed",
    "await_graph_cpu",  # who awaits whom: asyncio's objects, read per version
    # coprof attach: the adapter's late set-up in a live interpreter, per version
    "attach_asyncio",
}
# the profile function's; raw_thread: its hook on a new thread, put on per thread
PY_SUBSET_PROFILE = {"tasks_cpu", "greenlet_gevent", "forked", "raw_thread"}
PYSAMPLE_SUBSET = {"split_cpu", "tasks_wall", "threads_cpu", "afork_cpu", "idle_wall",
                   "stalls_cpu", "stall_timers_cpu", "handles_cpu"}  # Handle._run watched: local events (3.12+),
# a C stand-in before (handles: what the program prints stays the same)
ASAN_PY_SUBSET = {
    "tasks_cpu", "awaits_cpu", "errors", "generators", "threads", "forked", "forked_sample",
    "greenlet_gevent", "greenlet_gevent_sample", "dropped", "code_freed",
    "hook_rejected", "handover_profiler", "cprofiled", "tool_freed",
    "split_cpu", "tasks_wall", "threads_cpu", "ready_wall", "await_graph_cpu",
}
PYTHON = re.compile(r"^(python|pysample)-(system-)?(\d+\.\d+)\.\d+-(\w+?)(-profile)?$")
PIP = re.compile(r"^pip-(system-)?(\d+\.\d+)\.\d+$")  # tests/pip: a wheel per Python


def tests(build):
    out = subprocess.run(["meson", "introspect", "--tests", build], check=True,
                         capture_output=True, text=True).stdout
    return [(t["name"], {s.split(":")[-1] for s in t["suite"]}) for t in json.loads(out)]


def in_change(name, suites):
    pip = PIP.match(name)
    if pip:  # the primary's wheel; the other Pythons' `pip install .` in --all
        return not pip.group(1) and pip.group(2) == PRIMARY
    m = PYTHON.match(name)
    if m is None:
        return not (suites & {"slow"}) or "viewer" in suites
    minor, case = m.group(3), m.group(4)
    if minor == PRIMARY and not m.group(2):
        return not m.group(5) or case in PY_SUBSET | PY_SUBSET_PROFILE
    if m.group(1) == "pysample":
        return case in PYSAMPLE_SUBSET
    if m.group(5):
        return case in PY_SUBSET_PROFILE
    return case in PY_SUBSET and "slow" not in suites


def in_asan(name, suites):
    if suites & {"slow", "hook-other", "pip"}:  # pip builds its own package, not ASan's
        return False
    # coprof attach dlopens the shim into a program started without the sanitizer's
    # runtime, which an instrumented shim needs loaded first
    if name.startswith("attach-") or re.search(r"-attach_\w+$", name):
        return False
    m = PYTHON.match(name)
    if m is None:
        return "python" not in suites or name.startswith("pstats-")
    return (m.group(3) in (PRIMARY, ASAN_EVALFRAME) and not m.group(2)
            and m.group(4) in ASAN_PY_SUBSET and not (m.group(1) == "pysample" and m.group(3) != PRIMARY))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("change", "asan"):
        sys.exit(__doc__.split("\n\n")[1])
    keep = in_change if sys.argv[1] == "change" else in_asan
    for name, suites in tests(sys.argv[2]):
        if keep(name, suites):
            print(name)


if __name__ == "__main__":
    main()
