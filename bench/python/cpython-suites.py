#!/usr/bin/env python3
"""cpython-suites.py: CPython's own test suites as the judge of the Python adapter.
Runs regression tests of the interpreter's `test` package unprofiled and under the
coprof shim, and compares test by test: the same tests run, with the same outcome.

usage: cpython-suites.py --shim build/preload/libcoprof-preload.so --python EXE [...]
           [--tests test_coroutines test_asyncio ...] [--configs cpu wall ...]
           [--timeout 1800] [--check] [--json FILE] [--jobs N]

Configs: `cpu` and `wall` (COPROF_CLOCK, the version's default backend), `profile`,
`monitoring` (3.12+ only) and `evalframe` (3.10 and 3.11 only) (COPROF_PY_HOOK, cpu
clock), `toggle` (COPROF_START=0, a
SIGUSR2 to the test process every 100 ms, so windows open and close all along),
`sample` (COPROF_MODE=sample, cpu clock, the default rate).
Tests run in one process (`python -m test`, no -j: the toggle signal must reach the
process that runs them), under `nice -n 10`. Every profiled run must also leave a
profile of its own process that pstats reads.

--jobs N runs up to N configs (the unprofiled run among them) at once, each still one
process at a time (tests/python runs four: half their time they wait, in asyncio's
sleeps and timeouts).

A test whose outcome differs is run again, alone (--match), unprofiled and profiled:
only a difference seen again is reported as coprof's (some asyncio and threading tests
depend on timing). Prints a Markdown table; --check exits 1 on any difference, a
crash, a hang or an unreadable profile, and 77 (skipped) when no interpreter ships
the tests (Debian's python3 does not without libpython3.X-testsuite).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

DEFAULT_TESTS = [
    "test_coroutines", "test_generators", "test_asyncgen", "test_contextlib_async",
    "test_asyncio", "test_threading", "test_thread", "test_concurrent_futures",
    "test_weakref", "test_gc", "test_audit", "test_exceptions", "test_sys",
]


# Test names (regrtest's -i) left out of every run, the unprofiled one too.
IGNORE = []


def ignored(tid):
    return any(tid.endswith("." + pat) for pat in IGNORE)


def version(python):
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout
    return tuple(int(x) for x in out.strip().split("."))


def config_env(config, shim, tmp):
    """The environment of one config; None: unprofiled."""
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith("COPROF_")}
    env.pop("PYTHONPATH", None)
    if config == "base":
        return env
    env["LD_PRELOAD"] = shim
    if "libasan" in shim:  # the sanitizer build: CPython itself leaks at exit by design
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env["COPROF_OUT"] = os.path.join(tmp, "prof.%p.%n.pstat")
    env["COPROF_CLOCK"] = "wall" if config == "wall" else "cpu"
    if config in ("profile", "monitoring", "evalframe"):
        env["COPROF_PY_HOOK"] = config
    if config == "toggle":
        env["COPROF_START"] = "0"
    if config == "sample":
        env["COPROF_MODE"] = "sample"
    return env


def outcomes(xml_path):
    """test id -> 'ok', 'fail', 'error' or 'skip', from regrtest's JUnit file."""
    res = {}
    try:
        root = ET.parse(xml_path).getroot()
    except (ET.ParseError, FileNotFoundError):
        return None
    for case in root.iter("testcase"):
        tid = case.get("name", "?")
        if case.get("classname"):
            tid = "%s.%s" % (case.get("classname"), tid)
        kind = "skip" if "skip" in (case.get("status", "") + case.get("result", "")) else "ok"
        for child in case:
            if child.tag in ("failure", "error"):
                kind = "fail" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                kind = "skip"
        res[tid] = kind
    return res


def catches_usr2(pid, python):
    """The process runs `python` (no longer `nice`, which the shim is preloaded into
    too) and has a handler for SIGUSR2 (the shim's, once its constructor ran)."""
    try:
        if os.readlink("/proc/%d/exe" % pid) != os.path.realpath(python):
            return False
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR2 - 1)))
    except OSError:
        pass
    return False


def present(python, test):
    """The interpreter ships this test (module, package, or a module of a package)."""
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('test.' + %r) is None)"
    return subprocess.run([python, "-c", code % test], capture_output=True).returncode == 0


def run_tests(python, tests, config, shim, timeout, match=None):
    """Runs each test module in a `python -m test` of its own under config: (outcomes or
    None, worst exit status, seconds, what went wrong or '', profile files written by
    the test processes)."""
    res, rc, secs, problems, nprof = {}, 0, 0.0, [], 0
    for test in tests:
        r = run_one(python, test, config, shim, timeout, match)
        print("# %s %s %s: %d cases, %.0f s %s" % (python, config, test, len(r[0] or {}),
                                                 r[2], r[3]), file=sys.stderr, flush=True)
        if r[0] is not None:
            res.update(r[0])
        rc = rc or r[1]
        secs += r[2]
        if r[3]:
            problems.append("%s: %s" % (test, r[3]))
        nprof += r[4]
    return (res if res or not problems else None), rc, secs, "; ".join(problems), nprof


def run_one(python, test, config, shim, timeout, match):
    tmp = tempfile.mkdtemp(prefix="coprof-suites-")
    xml = os.path.join(tmp, "junit.xml")
    cmd = ["nice", "-n", "10", python, "-m", "test", "--junit-xml", xml]
    for pat in IGNORE:
        cmd += ["-i", pat]
    if match:
        for m in match:
            cmd += ["-m", m]
    cmd += [test]
    env = config_env(config, shim, tmp)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    stop = threading.Event()
    # `nice` execs the interpreter: p.pid is the test process itself. Toggles start
    # once the shim's handler is there (before, SIGUSR2 would end the process).
    if config == "toggle":
        def toggler():
            while not stop.wait(0.01) and not catches_usr2(p.pid, python):
                pass
            while not stop.wait(0.1):
                try:
                    os.kill(p.pid, signal.SIGUSR2)
                except ProcessLookupError:
                    return
        threading.Thread(target=toggler, daemon=True).start()
    problem = ""
    try:
        out = p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        out = p.communicate()[0]
        problem = "hang (killed after %d s)" % timeout
    stop.set()
    secs = time.monotonic() - t0
    if not problem and p.returncode < 0:
        problem = "killed by signal %d" % -p.returncode
    res = outcomes(xml)
    if res is None and not problem:
        problem = "no JUnit file (exit %d): %s" % (p.returncode,
                                                 out[-800:].decode(errors="replace"))
    profs = glob.glob(os.path.join(tmp, "prof.%d.*.pstat" % p.pid))
    if config != "base" and not problem:
        if not profs and config != "toggle":
            problem = "no profile of the test process"
        for f in profs:
            try:
                pstats.Stats(f)
            except Exception as e:  # noqa: BLE001 (any failure to read is the finding)
                problem = "unreadable profile %s: %s" % (os.path.basename(f), e)
    if problem:
        with open(os.path.join(tmp, "output.txt"), "wb") as f:
            f.write(out)
        problem += " (output in %s)" % tmp
    else:
        subprocess.run(["rm", "-rf", tmp])
    return res, p.returncode, secs, problem, len(profs)


def count(res):
    c = {"ok": 0, "fail": 0, "error": 0, "skip": 0}
    for v in (res or {}).values():
        c[v] += 1
    return c


def judge(python, tests, config, shim, timeout, base, first=None):
    """Runs one config (unless `first`, run_tests' result of that run, is given) and
    compares it with the unprofiled outcomes `base`."""
    res, rc, secs, problem, nprof = first or run_tests(python, tests, config, shim, timeout)
    diffs = {}
    if res is not None:
        for tid in set(base) | set(res):
            if base.get(tid) != res.get(tid):
                diffs[tid] = (base.get(tid), res.get(tid))
    # Again, alone, both ways: only what differs again is coprof's.
    confirmed, flaky = {}, {}
    if diffs and len(diffs) <= 40:
        names = sorted({tid.rsplit(".", 1)[-1] for tid in diffs})
        mods = sorted({t for t in tests if any(tid.startswith("test." + t) for tid in diffs)})
        mods = mods or list(tests)
        b2 = run_tests(python, mods, "base", shim, timeout, match=names)[0] or {}
        p2 = run_tests(python, mods, config, shim, timeout, match=names)[0] or {}
        for tid, d in diffs.items():
            if b2.get(tid) is not None and b2.get(tid) == p2.get(tid):
                flaky[tid] = d
            else:
                confirmed[tid] = (d, b2.get(tid), p2.get(tid))
    else:
        confirmed = {tid: (d, None, None) for tid, d in diffs.items()}
    return {"config": config, "counts": count(res), "rc": rc, "secs": round(secs, 1),
            "problem": problem, "profiles": nprof, "differs": confirmed, "flaky": flaky}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--asan", default="", help="the sanitizer runtime, preloaded first")
    ap.add_argument("--python", action="append", required=True)
    ap.add_argument("--tests", nargs="+", default=DEFAULT_TESTS)
    ap.add_argument("--configs", nargs="+",
                    default=["cpu", "wall", "profile", "monitoring", "evalframe", "toggle"])
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="run up to N configs at once (the unprofiled run among them)")
    ap.add_argument("--ignore", action="append", default=[], metavar="TEST",
                    help="leave this test method out (regrtest -i), e.g. one that hangs "
                         "unprofiled too")
    ap.add_argument("--base", metavar="DIR",
                    help="keep each Python's unprofiled outcomes in DIR/base-X.Y.json and "
                         "reuse them when there (the unprofiled run is the longest part)")
    args = ap.parse_args()
    IGNORE.extend(args.ignore)
    # Started in the background (`cmd &`, nohup), this script ignores SIGINT (and
    # SIGHUP, SIGQUIT), and the tests would inherit that: test_threading's
    # interrupt_main tests and test_generators' SignalAndYieldFromTest failed both
    # ways, and test_print_exception_gh_102056 recursed for good. Handlers (unlike
    # "ignored") are reset by exec, so the tests start with the defaults.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    shim = " ".join(os.path.abspath(p) for p in (args.asan, args.shim) if p)
    results, bad, judged = [], 0, 0
    print("| Python | config | run | ok | fail | error | skip | s | differs (confirmed) | "
          "flaky | problem |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for python in args.python:
        ver = version(python)
        tests = [t for t in args.tests if present(python, t)]
        missing = sorted(set(args.tests) - set(tests))
        if missing:
            print("| %s | (not shipped: %s) | | | | | | | | | |" % (python, ", ".join(missing)))
        if not tests:
            continue
        judged += 1
        saved = os.path.join(args.base, "base-%d.%d.json" % ver) if args.base else None
        configs = [c for c in args.configs
                   if not (c == "monitoring" and ver < (3, 12))
                   and not (c == "evalframe" and ver >= (3, 12))]
        pool = concurrent.futures.ThreadPoolExecutor(max(args.jobs, 1))
        first = {}
        if args.jobs > 1:  # the first run of each config; judge() reruns what differs
            runs = configs if saved and os.path.exists(saved) else ["base"] + configs
            first = {c: pool.submit(run_tests, python, tests, c, shim, args.timeout)
                     for c in runs}
        if saved and os.path.exists(saved):
            with open(saved) as f:
                d = json.load(f)
            base_res, secs, problem = d["res"], d["secs"], d["problem"]
            base_res = {t: k for t, k in base_res.items()
                        if any(t.startswith("test.%s" % m)
                               for m in tests)} if base_res is not None else None
        else:
            base_res, rc, secs, problem, _ = (first["base"].result() if "base" in first else
                                              run_tests(python, tests, "base", shim,
                                                        args.timeout))
            if saved and base_res is not None and not problem:
                os.makedirs(args.base, exist_ok=True)
                with open(saved, "w") as f:
                    json.dump({"tests": tests, "res": base_res, "secs": secs,
                               "problem": problem}, f)
        if base_res is not None:
            base_res = {t: k for t, k in base_res.items() if not ignored(t)}
        c = count(base_res)
        print("| %s | unprofiled | %d | %d | %d | %d | %d | %.0f | | | %s |" % (
            python, sum(c.values()), c["ok"], c["fail"], c["error"], c["skip"], secs,
            problem), flush=True)
        if base_res is None:
            bad += 1
            pool.shutdown(wait=True)
            continue
        for config in configs:
            r = judge(python, tests, config, shim, args.timeout, base_res,
                      first[config].result() if config in first else None)
            r["python"] = python
            results.append(r)
            c = r["counts"]
            bad += bool(r["differs"] or r["problem"])
            print("| %s | %s | %d | %d | %d | %d | %d | %.0f | %s | %s | %s |" % (
                python, config, sum(c.values()), c["ok"], c["fail"], c["error"], c["skip"],
                r["secs"], ", ".join("%s %s->%s" % (t, d[0][0], d[0][1])
                                     for t, d in sorted(r["differs"].items())) or "none",
                len(r["flaky"]), r["problem"]), flush=True)
        pool.shutdown(wait=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if args.check and not judged:
        print("no interpreter ships these tests (Debian: package libpython3.X-testsuite)")
        return 77  # meson's 'skipped': nothing was judged
    return 1 if args.check and bad else 0


sys.exit(main())
