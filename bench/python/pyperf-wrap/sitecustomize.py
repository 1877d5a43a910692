"""sitecustomize.py of bench/python/pyperf-suite.py: wraps a profiler around each pyperf
worker process (imported at start-up through PYTHONPATH, which pyperf passes to its
workers). COPROF_BENCH_WRAP picks it: cprofile, yappi-cpu, yappi-wall, floor (a no-op C
hook on coprof's backend: the profile function before 3.12, sys.monitoring after),
floor-eval (3.10/3.11: a no-op PEP 523 frame-evaluation function), or nothing. In pyperf's manager process (no --worker argument), COPROF_BENCH_PRELOAD
becomes LD_PRELOAD, so coprof is preloaded into the workers only. COPROF_BENCH_TIMER=cpu
makes time.perf_counter the process's CPU time in the workers (before pyperf or the
benchmark import it), so that a loaded machine's waits do not count."""
import os
import sys

_keep = None


def _wrap():
    global _keep
    how = os.environ.get("COPROF_BENCH_WRAP", "")
    if "--worker" not in sys.argv:
        if os.environ.get("COPROF_BENCH_PRELOAD"):
            os.environ["LD_PRELOAD"] = os.environ["COPROF_BENCH_PRELOAD"]
        return
    if os.environ.get("COPROF_BENCH_TIMER") == "cpu":
        import time
        time.perf_counter = time.process_time
    if how == "cprofile":
        import cProfile
        _keep = cProfile.Profile()
        _keep.enable()
    elif how in ("yappi-cpu", "yappi-wall"):
        import yappi
        yappi.set_clock_type(how[6:])
        yappi.start()
    elif how == "floor-eval":
        import coprof_noop
        if not hasattr(coprof_noop, "evalframe"):
            raise SystemExit("COPROF_BENCH_WRAP=floor-eval: Python 3.10 and 3.11 only")
        coprof_noop.evalframe()
    elif how == "floor":
        import coprof_noop
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            coprof_noop.profile()
            return
        # coprof's tool id and events (preload/python/hook/backend-monitoring.c, builtins off).
        mon.use_tool_id(3, "coprof-floor")
        mask = 0
        for name in ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD",
                     "PY_UNWIND"):
            bit = getattr(mon.events, name)
            mon.register_callback(3, bit, coprof_noop.nothing)
            mask |= bit
        mon.set_events(3, mask)
    elif how:
        raise SystemExit("COPROF_BENCH_WRAP=%s: unknown" % how)


_wrap()
