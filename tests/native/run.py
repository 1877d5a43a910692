#!/usr/bin/env python3
"""run.py CASE: one integration test of the native shim on a real process.

Runs a sample (or a test program) under `coprof record` or LD_PRELOAD, reads the
profile back (coprof_test.Profile: pstats and the coprof extras, the file's second
marshal object) and asserts what is exact: call counts, keys, callers, which task ran
what, files, exit codes, and inequalities that hold whatever the load. How close
times come to what the programs measured is bench/native/accuracy.py's, on these same
workloads at their full size. Paths come from the environment meson sets (COPROF_*)."""
import errno
import glob
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import (ASAN, Profile, base_env, catches, check, funcs, load, one,  # noqa: E402
                         resp_windows, run_cases, sched_measured, toggle, wait_for)

BIN = os.environ["COPROF_BIN"]
LIB = os.environ["COPROF_PRELOAD_LIB"]
SAMPLES = os.environ["COPROF_SAMPLES"]
TESTBIN = os.environ["COPROF_TESTBIN"]
SRC = os.environ["COPROF_SRC"]
TMP = tempfile.mkdtemp(prefix="coprof-native-")
# `coprof toggle`'s wait for the program's answer (10 s by default), for machines
# loaded enough to starve the program's control thread (a sanitizer build under load)
TOGGLE_WAIT = ("--timeout", "25")


def preload_env(**extra):
    env = base_env(**extra)
    env["LD_PRELOAD"] = (ASAN + ":" + LIB) if ASAN else LIB
    return env


def run(cmd, env, timeout=60, check=True):
    p = subprocess.run(cmd, env=env, cwd=TMP, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def record(opts, cmd, timeout=60, check=True, env=None):
    return run([BIN, "record"] + opts + ["--"] + cmd, env or base_env(), timeout, check)


def def_line(path, name):
    """The line of a C function's definition in a source file."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if re.match(r"^[A-Za-z_].*\b" + re.escape(name) + r"\(", line) and not line.rstrip().endswith(";"):
                return i
    raise AssertionError(f"{name} not defined in {path}")


def coprof_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("coprof:")]


SCHED_SRC = os.path.join(SRC, "samples/native/sched.c")
# sched's size here: R rounds, crunch 10 ms, nap 5 ms (the sleeper burns crunch/10);
# bench/native/accuracy.py runs it at 5 rounds, 20 ms, 10 ms
R, CRUNCH, NAP = 5, 10, 5
# What a switch's own code may be counted twice for, on both sides of it: ~10 us in all
# for sched's 18 switches here, 5 ms allowed (for a sanitizer build's slower hooks)
SWITCHES_EPS = 0.005


def sched(clock, rounds=R, crunch=CRUNCH, nap=NAP, exe="sched"):
    """`samples/native/EXE ROUNDS CRUNCH NAP` traced under `clock`: (Profile, what the
    program measured (coprof_test.sched_measured), the wall seconds record took)."""
    out = os.path.join(TMP, f"{exe}-{clock}.pstat")
    t0 = time.time()
    p = record(["-c", clock, "-o", out], [os.path.join(SAMPLES, exe), str(rounds), str(crunch), str(nap)])
    elapsed = time.time() - t0
    return Profile(out), sched_measured(p.stdout), elapsed


def check_sched_calls(prof, rounds=R, src=SCHED_SRC):
    want = {"main": 1, "run_scheduler": 1, "crunch": 2, "sleeper": 1, "crunch_work": 2 * rounds,
            "sleeper_work": rounds, "burn_cpu": 3 * rounds, "nap": 3 * rounds, "task_yield": 3 * rounds,
            "spawn": 3}
    for name, n in want.items():
        key, _ = one(prof.stats, name)
        check(prof.nc(name) == n, f"{name}: nc {prof.nc(name)}, expected {n}")
        check(key[0].endswith("samples/native/sched.c") and key[0].startswith("/"), f"{name}: file {key[0]}")
        check(key[1] == def_line(src, name), f"{name}: line {key[1]}, expected {def_line(src, name)}")


def case_sched_cpu():
    """Counts and keys; three finished ucontext tasks on the main thread, resumed R + 1
    times, each holding its own work only; and, by the thread's CPU clock, what cannot
    move with load: sched measured at least the CPU it was asked to burn, a task's time
    holds its entry function's, main holds none of the tasks' (its ct and the tasks'
    ttot add up to no more than the own times), the own times no more than the
    thread's CPU."""
    prof, took, _ = sched("cpu")
    ex = prof.extras
    for name, want in (("crunch_work", 2 * R * CRUNCH / 1e3), ("sleeper_work", R * CRUNCH / 10 / 1e3)):
        check(took[name] >= want, f"sched measured {name} {took[name]:.4f} s, below {want:.4f}")
    check_sched_calls(prof)
    check(ex["clock"] == "cpu" and ex["mode"] == "trace", f"clock/mode {ex['clock']}/{ex['mode']}")
    tasks = ex["tasks"]
    check(sorted(t["name"] for t in tasks) == ["crunch", "crunch", "sleeper"], f"tasks {tasks}")
    for t in tasks:
        check(t["runtime"] == "ucontext" and t["state"] == "finished", f"task {t}")
        check(t["thread"] == ex["pid"], f"task thread {t['thread']} != pid {ex['pid']}")
        check(t["resumes"] == R + 1, f"{t['name']} resumed {t['resumes']} times, expected {R + 1}")
        own, other = ("crunch_work", "sleeper_work") if t["name"] == "crunch" else ("sleeper_work", "crunch_work")
        check(one(t["stats"], own)[1][1] == R and not funcs(t["stats"], other),
              f"{t['name']} stats {sorted(k[2] for k in t['stats'])}")
        check(t["ttot"] >= one(t["stats"], t["name"])[1][3] - 1e-6,
              f"{t['name']} ttot {t['ttot']:.4f} s < its entry's ct")
    # the driver's clock stops while its coroutines run: main's ct and the tasks' time
    # do not overlap but for the switches' few microseconds (main holding the tasks'
    # work would count its 105 ms twice)
    total_tt = sum(v[2] for v in prof.stats.values())
    in_tasks = sum(t["ttot"] for t in tasks)
    check(prof.ct("main") + in_tasks <= total_tt + SWITCHES_EPS,
          f"main ct {prof.ct('main'):.4f} s + tasks {in_tasks:.4f} s > all own time {total_tt:.4f} s")
    # rule 10: own times are the thread's CPU time
    thread = [t for t in ex["threads"] if t["tid"] == ex["pid"]][0]
    check(total_tt <= thread["ttot"] + SWITCHES_EPS,
          f"sum of tt {total_tt:.4f} s > the thread's ttot {thread['ttot']:.4f}")


def case_sched_wall():
    """Counts and keys; by the wall clock, the naps are at least their length: the
    task_yield calls that wait hold them (rule 5), a crunch task's ttot its burns and
    naps; main's ct is no more than the run."""
    prof, _, elapsed = sched("wall")
    check_sched_calls(prof)
    check(prof.extras["clock"] == "wall", "clock")
    waits = (2 * R * NAP + R * 3 * NAP) / 1e3
    check(prof.tt("task_yield") >= 0.9 * waits,
          f"task_yield tt {prof.tt('task_yield'):.3f} s does not hold the waits ({waits:.3f} s)")
    check(prof.ct("main") <= elapsed, f"main ct {prof.ct('main'):.3f} s, the run took {elapsed:.3f} s")
    for t in prof.extras["tasks"]:
        if t["name"] == "crunch":
            check(t["ttot"] >= 0.9 * R * (CRUNCH + NAP) / 1e3, f"crunch wall ttot {t['ttot']:.3f} s misses its naps")


def case_sample_stalls():
    """Stalls in sample mode (doc/design.md rule 11): the ucontext adapter says where
    each step begins and ends, the ticks where its time went. Each of the two crunch
    tasks' 3 steps burns 30 ms of CPU: under cpu, 6 stalls past 20 ms, of those tasks,
    each at burn_cpu called by crunch_work in crunch; the sleeper's 3 ms steps are none;
    the ready tasks behind are not known (-1)."""
    out = os.path.join(TMP, "sample-stalls.pstat")
    record(["--mode", "sample", "-c", "cpu", "--hz", "997", "-o", out],
           [os.path.join(SAMPLES, "sched"), "3", "30", "5"])
    prof = Profile(out)
    ex = prof.extras
    crunch = {t["id"] for t in ex["tasks"] if t["name"] == "crunch"}
    check(ex["stall_threshold"] == 0.02 and len(crunch) == 2, f"threshold {ex['stall_threshold']}, tasks {ex['tasks']}")
    stalls = ex["stalls"]
    check(len(stalls) == 6, f"{len(stalls)} stalls: {stalls}")
    for tid, task_id, name, seconds, frames, behind in stalls:
        outer = [k[2] for k in reversed(frames)]
        # (30 ms by the program's clock; the engine's read 29.9 ms once under load: the
        # threshold is what holds)
        check(name == "crunch" and task_id in crunch and tid == ex["pid"] and seconds >= 0.02,
              f"stall {name} {task_id} on {tid}, {seconds:.4f} s")
        check(outer[:3] == ["crunch", "crunch_work", "burn_cpu"], f"stall stack, outermost first: {outer}")
        check(behind == -1, f"behind {behind}")
    rep = run([BIN, "report", "--stalls", out], base_env())
    check("Stalls: 6 steps of 20.000 ms or more" in rep.stdout, rep.stdout)


def case_trace_stalls():
    """The same stalls in trace mode: the shadow stack gives each its longest point
    (burn_cpu, under crunch_work in crunch), 6 of them, the sleeper's steps none; the
    ucontext adapter never says when a coroutine becomes ready, so the tasks behind
    are not known (-1), not none (0)."""
    out = os.path.join(TMP, "trace-stalls.pstat")
    record(["-c", "cpu", "-o", out], [os.path.join(SAMPLES, "sched"), "3", "30", "5"])
    ex = Profile(out).extras
    crunch = {t["id"] for t in ex["tasks"] if t["name"] == "crunch"}
    stalls = ex["stalls"]
    check(len(stalls) == 6 and len(crunch) == 2, f"{len(stalls)} stalls: {stalls}")
    for tid, task_id, name, seconds, frames, behind in stalls:
        outer = [k[2] for k in reversed(frames)]
        check(name == "crunch" and task_id in crunch and seconds >= 0.02,
              f"stall {name} {task_id}, {seconds:.4f} s")
        check(outer[:3] == ["crunch", "crunch_work", "burn_cpu"], f"stall stack, outermost first: {outer}")
        check(behind == -1, f"behind {behind}")


def case_sched_nopie():
    """A program built without PIE: the same counts, keys and lines."""
    prof, _, _ = sched("cpu", crunch=5, nap=2, exe="sched-nopie")
    check_sched_calls(prof)


def case_record_status():
    p = record([], ["sh", "-c", "exit 3"], check=False)
    check(p.returncode == 3, f"exit status {p.returncode}, expected 3")
    p = run([BIN, "record"], base_env(), check=False)
    check(p.returncode == 2 and "no command" in p.stderr, f"no command: {p.returncode} {p.stderr}")
    p = record(["-c", "cycles"], ["true"], check=False)
    check(p.returncode == 2 and "cycles" in p.stderr, f"bad clock: {p.returncode} {p.stderr}")
    p = record(["--signal", "KILL"], ["true"], check=False)
    check(p.returncode == 2, f"bad signal: {p.returncode}")
    p = record([], [os.path.join(TMP, "no-such-program")], check=False)
    check(p.returncode == 127, f"missing program: {p.returncode}")
    # options reach the program as COPROF_* variables (a library without a constructor
    # stands in for the shim: this checks the launcher only)
    engine = os.path.join(os.path.dirname(os.path.dirname(LIB)), "libprof", "libcoprof.so")
    p = record(["-c", "wall", "--mode", "sample", "--hz", "123", "--no-start", "--signal", "USR1",
                "-o", "x.pstat"], ["sh", "-c", "echo SHELL_PID=$$; env | grep ^COPROF_ | grep -v ^COPROF_PRELOAD= | sort; exit 0"],
               env=base_env(COPROF_PRELOAD=engine))
    got = dict(l.split("=", 1) for l in p.stdout.split())
    # COPROF_PID names the launched process (record execs it): only it says the
    # program lacks -finstrument-functions, not every helper process it runs
    check(got.pop("COPROF_PID", None) == got.pop("SHELL_PID"), f"COPROF_PID in {got}")
    want = {"COPROF_CLOCK": "wall", "COPROF_MODE": "sample", "COPROF_HZ": "123",
            "COPROF_START": "0", "COPROF_SIGNAL": "USR1", "COPROF_OUT": "x.pstat"}
    check(got == want, f"environment {got}")


def case_toggle_windows():
    """Three windows toggled on and off, 0.3 s each: three files, each with crunch_work
    and ucontext tasks, each window at least 0.1 s long and within the two toggles that
    opened and closed it (a toggle returns once the program has done it)."""
    n = 3
    tmpl = os.path.join(TMP, "w.%n.pstat")
    cmd = [BIN, "record", "--no-start", "-o", tmpl, "--", os.path.join(SAMPLES, "sched"), "100000", "3", "2"]
    p = subprocess.Popen(cmd, env=base_env(), cwd=TMP, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    spans = {}
    try:
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 60, "the toggle handler")
        for i in range(1, n + 1):
            before = time.time()
            toggle(p.pid, *TOGGLE_WAIT)
            time.sleep(0.3)
            toggle(p.pid, *TOGGLE_WAIT)
            spans[i] = (before, time.time())
            wait_for(lambda: os.path.exists(tmpl.replace("%n", str(i))), 60, f"window {i}")
        time.sleep(0.3)
        check(p.poll() is None, "the program died")
    finally:
        p.kill()
        p.wait()
    files = sorted(glob.glob(os.path.join(TMP, "w.*.pstat")))
    check(len(files) == n, f"{n} toggles on and off gave {files}")
    for i in range(1, n + 1):
        prof = Profile(tmpl.replace("%n", str(i)))
        ex = prof.extras
        check(prof.nc("crunch_work") >= 1, f"window {i}: crunch_work not seen")
        check(len(ex["tasks"]) >= 1 and all(t["runtime"] == "ucontext" for t in ex["tasks"]),
              f"window {i}: tasks {ex['tasks']}")
        check(ex["stop"] - ex["start"] > 0.1 and spans[i][0] - 1e-3 <= ex["start"] and ex["stop"] <= spans[i][1] + 1e-3,
              f"window {i}: {ex['start']:.3f} to {ex['stop']:.3f}, toggled from {spans[i][0]:.3f} to {spans[i][1]:.3f}")


def case_fork_exec():
    out = os.path.join(TMP, "f.%p.pstat")
    env = preload_env(COPROF_OUT=out)
    p = run([os.path.join(TESTBIN, "forker"), os.path.join(SAMPLES, "sched"), "1", "1", "1"], env)
    kids = [int(x) for x in re.findall(r"child (\d+)", p.stdout)]
    check(len(kids) == 2 and "worker status 0" in p.stdout and "exec status 0" in p.stdout,
          f"output {p.stdout}")
    files = {int(re.search(r"f\.(\d+)\.pstat", f).group(1)) for f in glob.glob(os.path.join(TMP, "f.*.pstat"))}
    check(len(files) == 3 and set(kids) <= files, f"files for pids {files}, children {kids}")
    parent = (files - set(kids)).pop()
    prof = Profile(out.replace("%p", str(parent)))
    check(prof.extras["pid"] == parent and prof.nc("parent_work") == 2, "parent's profile")
    check(not prof.funcs("child_work"), "the parent's profile has the child's work")
    prof = Profile(out.replace("%p", str(kids[0])))
    check(prof.extras["pid"] == kids[0] and prof.nc("child_work") == 3, "child's profile")
    check(not prof.funcs("parent_work"), "the child kept its parent's data")
    prof = Profile(out.replace("%p", str(kids[1])))
    check(prof.nc("crunch_work") == 2, "the exec'd sample profiled itself")
    # no descriptor of the shim survives exec (the image below runs without it)
    p = run([os.path.join(TESTBIN, "forker"), "env", "-u", "LD_PRELOAD", "ls", "-1", "/proc/self/fd"], env)
    fds = {int(l) for l in p.stdout.split("\n") if l.strip().isdigit()}
    check(fds <= {0, 1, 2, 3}, f"descriptors leaked into the exec'd program: {sorted(fds)}")


def case_bad_env():
    sched = [os.path.join(SAMPLES, "sched"), "1", "1", "1"]
    for var, val in [("COPROF_CLOCK", "cycles"), ("COPROF_MODE", "both"), ("COPROF_SIGNAL", "KILL"),
                     ("COPROF_START", "later"), ("COPROF_HZ", "0"), ("COPROF_OUT", "x%y"),
                     ("COPROF_BUILTINS", "many")]:
        p = run(sched, preload_env(**{var: val}))
        lines = coprof_lines(p.stderr)
        check(len(lines) == 1 and var in lines[0] and val in lines[0], f"{var}={val}: stderr {p.stderr!r}")
        check(p.stdout.startswith("sched: 3 tasks"), f"{var}={val}: output {p.stdout!r}")
        check(not glob.glob(os.path.join(TMP, "*.pstat")), f"{var}={val}: a profile was written")


def case_no_instrumentation():
    p = run([os.path.join(TESTBIN, "plain")], preload_env(COPROF_OUT="plain.pstat"))
    lines = coprof_lines(p.stderr)
    check(p.stdout == "plain: hello\n", f"output {p.stdout!r}")
    check(len(lines) == 1 and "-finstrument-functions" in lines[0], f"stderr {p.stderr!r}")
    check(not os.path.exists(os.path.join(TMP, "plain.pstat")), "a profile was written")
    # never toggled on: record --no-start says so (not that the code lacks
    # instrumentation); a bare LD_PRELOAD, as every process of a script has, says nothing
    p = record(["--no-start"], [os.path.join(TESTBIN, "plain")])
    lines = coprof_lines(p.stderr)
    check(len(lines) == 1 and "never started" in lines[0], f"stderr {p.stderr!r}")
    p = run([os.path.join(TESTBIN, "plain")], preload_env(COPROF_START="0"))
    check(coprof_lines(p.stderr) == [], f"stderr {p.stderr!r}")
    # a child of a preloaded process (a shell a Python server runs, say) writes to its
    # host's stderr: it says nothing (CPython's test_subprocess_shell saw the line)
    p = run(["/bin/sh", "-c", os.path.join(TESTBIN, "plain") + "; true"],
            preload_env(COPROF_OUT="sh.%p.pstat"))
    check(p.stdout == "plain: hello\n", f"child: output {p.stdout!r}")
    check(coprof_lines(p.stderr) == [], f"child: stderr {p.stderr!r}")


def case_own_signal():
    for how in ["sigaction", "signal"]:
        out = os.path.join(TMP, f"own-{how}.pstat")
        p = run([os.path.join(TESTBIN, "ownsig"), how], preload_env(COPROF_OUT=out))
        check("ownsig: caught 3" in p.stdout, f"{how}: the program's handler lost: {p.stdout!r}")
        lines = coprof_lines(p.stderr)
        check(len(lines) == 1 and "own handler" in lines[0], f"{how}: stderr {p.stderr!r}")
        prof = Profile(out)
        check(prof.nc("work") == 3 and prof.nc("on_usr2") == 3, f"{how}: profile")
    # another toggle signal: nothing to say
    p = run([os.path.join(TESTBIN, "ownsig")], preload_env(COPROF_SIGNAL="USR1", COPROF_OUT="o.pstat"))
    check("ownsig: caught 3" in p.stdout and coprof_lines(p.stderr) == [], f"USR1: {p.stdout!r} {p.stderr!r}")


# --- coprof toggle: strict pids, checked targets, answers ---------------------------------

SIGNAL_CALLS = "kill,tkill,tgkill,rt_sigqueueinfo,rt_tgsigqueueinfo"


def toggle_traced(args, env=None):
    """`coprof toggle ARGS` under strace, every signal-sending system call failing with
    EPERM (so nothing can be hurt even if one is made): (process, calls made)."""
    log = os.path.join(TMP, "strace.log")
    # LeakSanitizer stops the world with ptrace and signals: not under strace
    env = dict(env or base_env(), ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run(["strace", "-f", "-qq", "-o", log, "-e", "trace=" + SIGNAL_CALLS,
                        "-e", "inject=" + SIGNAL_CALLS + ":error=EPERM", BIN, "toggle"] + args,
                       env=env, cwd=TMP, capture_output=True, text=True, timeout=60)
    with open(log) as f:
        calls = [l for l in f if re.search(r"\b(" + SIGNAL_CALLS.replace(",", "|") + r")\(", l)]
    return p, calls


def case_toggle_pids():
    """Anything but a positive decimal that fits pid_t is 'not a pid', status 2, and no
    signal is sent (2^32-1 used to become kill(-1), 2^32 kill(0))."""
    bad = ["4294967295", "4294967296", "4294967297", "2147483648", "9223372036854775807",
           "18446744073709551615", "99999999999999999999", "-1", "0", "00", "-0", "+12", " 12",
           "12 ", "0x10", "1e3", "12a", "", "1.0"]
    for arg in bad:
        p, calls = toggle_traced([arg])
        check(p.returncode == 2 and f"'{arg}' is not a pid" in p.stderr and p.stderr.count("\n") == 1,
              f"{arg!r}: {p.returncode} {p.stderr!r}")
        check(calls == [], f"{arg!r}: signal calls made: {calls}")
    # one bad pid among good ones: nothing is sent to any
    p, calls = toggle_traced([str(os.getpid()), "4294967295"])
    check(p.returncode == 2 and calls == [], f"mixed: {p.returncode} {calls}")


def start_resp(env, cmd=None):
    """The native RESP sample (it waits for clients), under `env`; returns (process, port)
    once it listens."""
    p = subprocess.Popen(cmd or [os.path.join(SAMPLES, "resp"), "0"], env=env, cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r"port (\d+)", line)
    check(m is not None, f"resp said {line!r}")
    return p, m.group(1)


def stop(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def control_seen(pid):
    """The shim's control thread runs in pid (its name is coprof and its state; the
    shim's other threads are coprof-...)."""
    return any(open(t).read().startswith("coprof") and not open(t).read().startswith("coprof-")
               for t in glob.glob(f"/proc/{pid}/task/*/comm"))


def case_toggle_targets():
    """toggle sends only to a process that runs the shim with that signal armed, and
    checks every argument before it sends anything; otherwise it says why, status 2."""
    procs = []
    try:
        # not under coprof at all: SIGUSR2 would kill it
        plain = subprocess.Popen(["sleep", "100"], cwd=TMP)
        procs.append(plain)
        # under the shim, but without a toggle: COPROF_SIGNAL=none, a bad variable
        none, _ = start_resp(preload_env(COPROF_SIGNAL="none"))
        procs.append(none)
        badvar, _ = start_resp(preload_env(COPROF_CLOCK="cycles"))
        procs.append(badvar)
        # armed on USR1
        usr1, _ = start_resp(preload_env(COPROF_SIGNAL="USR1", COPROF_START="0",
                                         COPROF_OUT=os.path.join(TMP, "u1.%n.pstat")))
        procs.append(usr1)
        # the program took SIGUSR2 over
        own = subprocess.Popen(["/usr/bin/python3", "-c",
                                "import signal, sys, time\n"
                                "signal.signal(signal.SIGUSR2, lambda *a: print('own', flush=True))\n"
                                "print('ready', flush=True)\ntime.sleep(100)"],
                               env=preload_env(COPROF_START="0"), cwd=TMP, stdout=subprocess.PIPE,
                               text=True)
        procs.append(own)
        check(own.stdout.readline() == "ready\n", "python did not start")
        wait_for(lambda: control_seen(usr1.pid) and control_seen(own.pid), 20, "control threads")
        for p, args, why in [
                (plain, [], "does not run under coprof"),
                (none, [], "toggling is off"),
                (badvar, [], "toggling is off"),
                (usr1, ["--signal", "USR2"], "toggles on SIGUSR1, not SIGUSR2"),
                (own, [], "handles its toggle signal itself"),
                (usr1, [str(plain.pid)], "does not run under coprof"),  # one bad target
        ]:
            r, calls = toggle_traced(args + [str(p.pid)])
            check(r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1,
                  f"{args} {p.args}: {r.returncode} {r.stderr!r}")
            check(calls == [], f"{args} {p.args}: signals sent: {calls}")
        # an option after the pid is checked too, before anything is sent
        r, calls = toggle_traced([str(usr1.pid), "--signal", "USR2"])
        check(r.returncode == 2 and "not SIGUSR2" in r.stderr and calls == [],
              f"option after pid: {r.returncode} {r.stderr!r} {calls}")
        r, calls = toggle_traced([str(usr1.pid), "--signal", "INT"])
        check(r.returncode == 2 and "not a signal" in r.stderr and calls == [],
              f"bad option after pid: {r.returncode} {r.stderr!r} {calls}")
        for p in procs:
            check(p.poll() is None, f"{p.args} died")
        # the armed signal is found by itself, or named rightly in every spelling
        check(toggle(usr1.pid) == f"{usr1.pid}: profiling on", "USR1 target on")
        for spelling in (["--signal=USR1"], ["--signal", "SIGUSR1"], ["--signal", "10", "--signal", "10"]):
            out = toggle(usr1.pid, *spelling)
            check(out.startswith(f"{usr1.pid}: profiling o"), f"{spelling}: {out}")
    finally:
        for p in procs:
            stop(p)


def case_toggle_options():
    """Bad options and signals: one line, status 2, nothing sent."""
    for args, why in [(["--signal"], "needs a value"), (["--signal", "INT", "1"], "not a signal coprof may use"),
                      (["--signal", "CHLD", "1"], "not a signal"), (["--signal", "SEGV", "1"], "not a signal"),
                      (["--signal", "none", "1"], "cannot be toggled"), (["--signal", "0", "1"], "cannot be toggled"),
                      (["--signal", "USR1", "--signal", "USR2", "1"], "given twice"),
                      (["--start", "--stop", "1"], "exclude each other"), (["--timeout", "-1", "1"], "seconds"),
                      (["--bogus", "1"], "unknown option"), ([], "usage")]:
        r, calls = toggle_traced(args)
        check(r.returncode == 2 and why in r.stderr and calls == [], f"{args}: {r.returncode} {r.stderr!r} {calls}")
    # the same parser for COPROF_SIGNAL: every signal the host relies on is refused
    for sig in ["INT", "PIPE", "CHLD", "ALRM", "SEGV", "BUS", "FPE", "ILL", "TERM", "HUP", "QUIT",
                "2", "17", "WINCH", "CONT", "TSTP", "KILL", "STOP"]:
        p = run([os.path.join(TESTBIN, "plain")], preload_env(COPROF_SIGNAL=sig))
        lines = coprof_lines(p.stderr)
        check(p.stdout == "plain: hello\n" and len(lines) == 1 and "COPROF_SIGNAL" in lines[0],
              f"COPROF_SIGNAL={sig}: {p.stderr!r}")
        r = record(["--signal", sig], ["true"], check=False)
        check(r.returncode == 2 and r.stderr.count("\n") == 1, f"record --signal {sig}: {r.stderr!r}")
    for sig in ["USR1", "SIGUSR2", "12", "RTMIN+1", "rtmax-2", "none", "0"]:
        p = run([os.path.join(TESTBIN, "plain")], preload_env(COPROF_SIGNAL=sig, COPROF_MODE="sample"))
        check(coprof_lines(p.stderr) == [], f"COPROF_SIGNAL={sig}: {p.stderr!r}")
        r = record(["--signal", sig, "--mode", "sample", "-o", "s.pstat"], ["true"], check=False)
        check(r.returncode == 0, f"record --signal {sig}: {r.returncode} {r.stderr!r}")


def case_toggle_answers():
    """Sequential toggles never merge: each returns once applied and says the state;
    --start and --stop only ever open or close a window."""
    tmpl = os.path.join(TMP, "ans.%n.pstat")
    p, port = start_resp(base_env(), [BIN, "record", "--no-start", "-o", tmpl, "--",
                                      os.path.join(SAMPLES, "resp"), "0"])
    try:
        wait_for(lambda: control_seen(p.pid), 20, "the control thread")
        pid = p.pid
        check(toggle(pid, "--stop", *TOGGLE_WAIT) == f"{pid}: profiling is already off; nothing sent", "stop when off")
        check(toggle(pid, "--start", *TOGGLE_WAIT) == f"{pid}: profiling on", "start")
        check(toggle(pid, "--start", *TOGGLE_WAIT) == f"{pid}: profiling is already on; nothing sent", "start when on")
        bench = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "get,set",
                                "-n", "200", "-c", "2", "-q"], capture_output=True, timeout=60)
        check(bench.returncode == 0, "redis-benchmark")
        check(toggle(pid, "--stop", *TOGGLE_WAIT) == f"{pid}: profiling off; wrote {tmpl.replace('%n', '1')}",
              "stop writes 1")
        # back to back, no pause: 100 toggles give 50 windows, in order, none inverted
        bg = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "get,set",
                               "-n", "100000000", "-c", "4", "-q", "-l"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        written = 1
        try:
            for i in range(50):
                check(toggle(pid, *TOGGLE_WAIT) == f"{pid}: profiling on", f"window {i} opens")
                out = toggle(pid, *TOGGLE_WAIT)
                # a window too short for any request writes nothing and uses no number
                if "wrote" in out:
                    written += 1
                check(out == f"{pid}: profiling off; wrote {tmpl.replace('%n', str(written))}"
                      or out == f"{pid}: profiling off; nothing was recorded in that window, so no file",
                      f"window {i} closes: {out}")
        finally:
            bg.kill()
            bg.wait()
        check(p.poll() is None, "the server died")
    finally:
        stop(p)
    files = glob.glob(os.path.join(TMP, "ans.*.pstat"))
    for f in files:
        load(f)
    check(len(files) == written and written >= 2, f"{written} reported, files {files}")


def case_toggle_fork_child():
    """A forked child gets its own control thread: coprof toggle finds it, and names the
    file the child writes (its pid inserted, the template having no %p). (At 997 Hz, so
    that even a child starved of the CPU is sampled in its half second; the toggles wait
    25 s for an answer: a sanitizer build under load once took more than the default 10.)
    The child's shim waits 0.3 s once its control thread runs
    (COPROF_TEST_CONTROL_DELAY_MS), and the first toggle comes as soon as the thread is
    named: the pipe must be published by then (it was after the thread's start, and a
    toggle in between was lost: 1 child in some 200 under load)."""
    tmpl = os.path.join(TMP, "sub.%n.pstat")
    # bash's ( ... ) is a fork without exec: the child runs the shim's fork path
    p = subprocess.Popen(["bash", "-c", "( while :; do :; done ) & echo $!; wait"],
                         env=preload_env(COPROF_START="0", COPROF_MODE="sample", COPROF_HZ="997",
                                         COPROF_OUT=tmpl, COPROF_TEST_CONTROL_DELAY_MS="300"),
                         cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kid = int(p.stdout.readline())
    try:
        wait_for(lambda: control_seen(kid), 60, "the child's control thread")
        check(toggle(kid, *TOGGLE_WAIT) == f"{kid}: profiling on", "child on")
        time.sleep(0.5)
        out = toggle(kid, *TOGGLE_WAIT)
        want = os.path.join(TMP, f"sub.1.{kid}.pstat")
        check(out == f"{kid}: profiling off; wrote {want}", f"child off: {out}")
        _, ex = load(want)
        check(ex["pid"] == kid, f"the file is the child's: {ex['pid']}")
        check(toggle(p.pid, "--stop", *TOGGLE_WAIT) == f"{p.pid}: profiling is already off; nothing sent",
              "the parent is still off")
    finally:
        if os.path.exists(f"/proc/{kid}"):
            os.kill(kid, signal.SIGKILL)
        stop(p)


def case_record_checks():
    """record refuses up front what would run unprofiled, and exits as a shell would."""
    for opts, why in [(["--hz", "10001"], "1 to 10000"), (["--hz", "0"], "1 to 10000"),
                      (["--no-start", "--signal", "none"], "nothing could ever be recorded")]:
        r = record(opts, ["true"], check=False)
        check(r.returncode == 2 and why in r.stderr, f"{opts}: {r.returncode} {r.stderr!r}")
    script = os.path.join(TMP, "noexec.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o644)
    r = record([], [script], check=False)
    check(r.returncode == 126 and "Permission denied" in r.stderr, f"not executable: {r.returncode} {r.stderr!r}")
    r = record([], [os.path.join(TMP, "no-such-program")], check=False)
    check(r.returncode == 127, f"not found: {r.returncode}")
    r = record([], ["no-such-program-in-path"], check=False)
    check(r.returncode == 127, f"not found in PATH: {r.returncode}")
    # booleans: Y, 01, yes, on, true and their opposites
    for val, start in [("Y", 1), ("01", 1), ("yes", 1), ("ON", 1), ("n", 0), ("00", 0), ("false", 0)]:
        out = os.path.join(TMP, f"bool-{val}.pstat")
        p = run([os.path.join(SAMPLES, "sched"), "1", "1", "1"],
                preload_env(COPROF_START=val, COPROF_BUILTINS=val, COPROF_OUT=out))
        lines = coprof_lines(p.stderr)
        check(os.path.exists(out) == bool(start), f"COPROF_START={val}: file {os.path.exists(out)}")
        check(lines == [], f"COPROF_START={val}: {p.stderr!r}")
    p = run([os.path.join(SAMPLES, "sched"), "1", "1", "1"], preload_env(COPROF_START="0", COPROF_SIGNAL="none"))
    lines = coprof_lines(p.stderr)
    check(len(lines) == 1 and "nothing could ever be recorded" in lines[0], f"START=0 SIGNAL=none: {p.stderr!r}")
    # an uninstrumented parent whose instrumented child was profiled: no 'rebuild' note
    out = os.path.join(TMP, "child.pstat")
    p = record(["-o", out], ["sh", "-c", f"{os.path.join(SAMPLES, 'sched')} 1 1 1; echo done"])
    check("-finstrument-functions" not in p.stderr and os.path.exists(out), f"child: {p.stderr!r}")


def case_threads():
    """Two worker threads, each running a ping and a pong coroutine that burn MS of CPU
    a round: counts, thread names, which thread ran which task, and each task's CPU at
    least its burns (the upper bound is bench/native/accuracy.py's)."""
    rounds, ms = 3, 5
    prof = mt(rounds, ms)
    ex = prof.extras
    check(prof.nc("burn") == 2 * 2 * rounds and prof.nc("yield") == 2 * 2 * rounds, "burn/yield nc")
    check(prof.nc("worker_main") == 2 and prof.nc("ping") == 2, "worker_main/ping nc")
    threads = {t["tid"]: t for t in ex["threads"]}
    workers = {tid: t for tid, t in threads.items() if t["name"].startswith("worker-")}
    check(sorted(t["name"] for t in workers.values()) == ["worker-0", "worker-1"],
          f"thread names {[t['name'] for t in ex['threads']]}")
    tasks = ex["tasks"]
    check(sorted(t["name"] for t in tasks) == ["ping", "ping", "pong", "pong"], f"tasks {tasks}")
    for tid in workers:
        mine = [t for t in tasks if t["thread"] == tid]
        check(sorted(t["name"] for t in mine) == ["ping", "pong"], f"thread {tid} ran {mine}")
    for t in tasks:
        check(0.9 * rounds * ms / 1000 <= t["ttot"], f"task {t['name']} ttot {t['ttot']}")
        check(t["state"] == "finished" and t["resumes"] == rounds + 1, f"task {t}")


def mt(rounds, ms):
    """samples/native/mt: 2 threads, ROUNDS rounds of MS ms of CPU per coroutine; its
    Profile under the cpu clock."""
    out = os.path.join(TMP, "mt.pstat")
    record(["-c", "cpu", "-o", out], [os.path.join(SAMPLES, "mt"), "2", str(rounds), str(ms)])
    return Profile(out)


def case_annotate():
    out = os.path.join(TMP, "an.pstat")
    steps = 4
    record(["-o", out], [os.path.join(SAMPLES, "annotate"), str(steps)])
    prof = Profile(out)
    ex = prof.extras
    check(prof.nc("fetch_step") == steps and prof.nc("run_step") == 2 * steps, "nc")
    tasks = {t["name"]: t for t in ex["tasks"]}
    check(sorted(tasks) == ["fetch", "parse"], f"tasks {ex['tasks']}")
    for name, t in tasks.items():
        check(t["resumes"] == steps and t["state"] == "finished", f"task {t}")
        names = {k[2] for k in t["stats"]}
        check(name + "_step" in names and ("parse" if name == "fetch" else "fetch") + "_step" not in names,
              f"{name} stats {names}")
    # without the shim the API does nothing
    p = run([os.path.join(SAMPLES, "annotate"), "2"], base_env())
    check(p.stdout == "annotate: 2 tasks x 2 steps\n", p.stdout)


def case_longjmp():
    out = os.path.join(TMP, "jump.pstat")
    record(["-o", out], [os.path.join(TESTBIN, "jumper"), "5"])
    prof = Profile(out)
    for name in ["outer", "middle", "inner", "after_jump"]:
        check(prof.nc(name) == 5, f"{name}: nc {prof.nc(name)}")
    # the engine reconciles at outer's return: each outer is called from main again
    callers = {k[2] for k in prof.one("outer")[4]}
    check(callers == {"main"}, f"outer called from {callers}: the stack was not reconciled")
    check(prof.nc("main") == 1 and prof.ct("main") >= prof.ct("outer") >= prof.ct("middle"), "ct")


def case_resp_toggles():
    toggles = 10
    tmpl = os.path.join(TMP, "resp.%n.pstat")
    cmd = [BIN, "record", "--no-start", "-c", "wall", "-o", tmpl, "--", os.path.join(SAMPLES, "resp"), "0"]
    resp_windows(cmd, TMP, tmpl, toggles, requests=300, clients=4)
    files = glob.glob(os.path.join(TMP, "resp.*.pstat"))
    check(len(files) == toggles, f"{toggles} windows gave {len(files)} files")
    for i in range(1, toggles + 1):
        prof = Profile(tmpl.replace("%n", str(i)))
        check(prof.nc("cmd_get") >= 300 and prof.nc("cmd_set") >= 300, f"window {i}: get/set counts")
        check(any(t["name"] == "serve" for t in prof.tasks()), f"window {i}: no serve task")


def case_exec():
    """exec keeps the window before it: each exec function writes the profile so far,
    and the new image, profiling itself, numbers its files after it (same pid)."""
    execer, sched = os.path.join(TESTBIN, "execer"), os.path.join(SAMPLES, "sched")
    for mode in ["execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "fexecve",
                 "execveat"]:
        d = os.path.join(TMP, "exec-" + mode)
        os.mkdir(d)
        out = os.path.join(d, "x.pstat")
        p = run([execer, mode, sched, "1", "1", "1"], preload_env(COPROF_OUT=out))
        check(re.fullmatch(rf"execer: {mode}\nsched: 3 tasks, .*\nsched: CPU ms .*\n", p.stdout), f"{mode}: output {p.stdout!r}")
        check(coprof_lines(p.stderr) == [], f"{mode}: stderr {p.stderr!r}")
        check(sorted(os.listdir(d)) == ["x.2.pstat", "x.pstat"], f"{mode}: files {os.listdir(d)}")
        before, after = Profile(out), Profile(os.path.join(d, "x.2.pstat"))
        check(before.nc("before_exec") == 1 and not before.funcs("crunch_work"), f"{mode}: the window before exec")
        check(after.nc("crunch_work") == 2 and not after.funcs("before_exec"), f"{mode}: the image after exec")
        check(before.extras["pid"] == after.extras["pid"] and before.extras["stop"] <= after.extras["start"],
              f"{mode}: one pid, one window after another")
    # %p: both images share the pid, so the second file is numbered
    tmpl = os.path.join(TMP, "p.%p.pstat")
    run([execer, "execv", sched, "1", "1", "1"], preload_env(COPROF_OUT=tmpl))
    files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(TMP, "p.*.pstat")))
    m = re.fullmatch(r"p\.(\d+)\.2\.pstat", files[0]) if len(files) == 2 else None
    check(m and files[1] == f"p.{m.group(1)}.pstat", f"files {files}")
    # a failed exec: errno is the exec's, and the window goes on as if no exec had been
    # tried: one file, holding the work before and after it
    d = os.path.join(TMP, "exec-fail")
    os.mkdir(d)
    p = run([execer, "fail", sched, "1", "1", "1"], preload_env(COPROF_OUT=os.path.join(d, "x.pstat")))
    check(p.stdout.endswith(f"exec returned -1, {os.strerror(errno.ENOENT)}\n"), f"fail: output {p.stdout!r}")
    check(coprof_lines(p.stderr) == [], f"fail: stderr {p.stderr!r}")
    check(os.listdir(d) == ["x.pstat"], f"fail: files {os.listdir(d)}")
    prof = Profile(os.path.join(d, "x.pstat"))
    check(prof.nc("before_exec") == 1 and prof.nc("after_failed_exec") == 1, "fail: the one window")
    # the hand-over variable never reaches the program after exec
    p = run([execer, "execv", "/bin/sh", "-c", "env", "sh"], preload_env(COPROF_OUT=os.path.join(TMP, "e.pstat")))
    check("COPROF_EXEC_STATE" not in p.stdout and "COPROF_OUT=" in p.stdout, f"environment after exec: {p.stdout!r}")


def case_exec_search():
    """A PATH search that execs in each folder in turn (as os.execvp does): the
    attempts that fail write no file and leave the window going on, so the program's
    work is dump 1 and the image after exec dump 2, with COPROF_KEEP 2 as with a PATH
    that finds the program first; with COPROF_KEEP 1 the image after exec removes dump
    1 (the image before it cannot: its exec might still fail)."""
    execer, sched = os.path.join(TESTBIN, "execer"), os.path.join(SAMPLES, "sched")
    junk = os.path.join(TMP, "junk")  # holds a "sched" the kernel cannot run: ENOEXEC
    os.mkdir(junk)
    with open(os.path.join(junk, "sched"), "w") as f:
        f.write("not a program\n")
    os.chmod(os.path.join(junk, "sched"), 0o755)
    misses = ["/nonexistent1", "/nonexistent2", junk, "/nonexistent3"]
    for keep, left, fails in [("2", ["x.1.pstat", "x.2.pstat"], 4), ("1", ["x.2.pstat"], 4),
                              ("2", ["x.1.pstat", "x.2.pstat"], 0)]:
        d = os.path.join(TMP, f"search-{keep}-{fails}")
        os.mkdir(d)
        path = ":".join(misses[:fails] + [os.path.dirname(sched)])
        p = run([execer, "search", "sched", "1", "1", "1"],
                preload_env(COPROF_OUT=os.path.join(d, "x.%n.pstat"), COPROF_KEEP=keep, PATH=path))
        check(re.fullmatch(r"execer: search\nsched: 3 tasks, .*\nsched: CPU ms .*\n", p.stdout),
              f"keep {keep}: output {p.stdout!r}")
        check(coprof_lines(p.stderr) == [], f"keep {keep}: stderr {p.stderr!r}")
        check(sorted(os.listdir(d)) == left, f"keep {keep}, {fails} misses: files {sorted(os.listdir(d))}")
        if "x.1.pstat" in left:
            prof = Profile(os.path.join(d, "x.1.pstat"))
            after = sum(v[1] for k, v in prof.funcs("after_failed_exec"))
            check(prof.nc("before_exec") == 1 and after == fails and not prof.funcs("crunch_work"),
                  f"{fails} misses: the window before exec (after_failed_exec {after})")
        prof = Profile(os.path.join(d, "x.2.pstat"))
        check(prof.nc("crunch_work") == 2 and not prof.funcs("before_exec") and not prof.funcs("after_failed_exec"),
              f"{fails} misses: the image after exec")

def case_vfork():
    """A vfork child shares the parent's memory and thread until it execs or exits: its
    instrumented calls, exec, _exit and signal changes leave the parent's profile and
    the shim's state (the toggle signal stays the shim's) alone."""
    for opt in ["-O0", "-O1", "-O2"]:
        for clock in ["cpu", "wall"]:
            what = f"{opt} {clock}"
            d = os.path.join(TMP, f"vfork{opt}-{clock}")
            os.mkdir(d)
            out = os.path.join(d, "v.pstat")
            p = record(["-c", clock, "-o", out], [os.path.join(TESTBIN, "vforker" + opt)])
            check(p.stdout == "children: 10 exited 0, 10 exited 127, 0 otherwise\n", f"{what}: output {p.stdout!r}")
            check(os.listdir(d) == ["v.pstat"], f"{what}: files {os.listdir(d)}")
            prof = Profile(out)
            callers = {k[2]: v[:2] for k, v in prof.one("work")[4].items()}
            check(callers == {"main": (1000, 1000)}, f"{what}: work called from {callers}")
            check(prof.nc("work") == 1000 and prof.nc("main") == 1, f"{what}: work/main counts")
            check(not prof.funcs("setup_and_exec") and not prof.funcs("on_usr2"),
                  f"{what}: the children's functions are in the parent's profile: {sorted(k[2] for k in prof.stats)}")
            # the children's signal() went to their own dispositions, not the shim's guard
            check(coprof_lines(p.stderr) == [], f"{what}: stderr {p.stderr!r}")


def case_clone_child():
    """A child made by clone() without fork's handlers has no perf clock page (the
    kernel maps it VM_DONTCOPY): it runs and exits as it does unprofiled, in both modes
    and under both clocks, and writes no profile of its parent's data."""
    cloner = os.path.join(TESTBIN, "cloner")
    for how in ["raw", "exit", "wrapper"]:
        p = run([cloner, how], base_env())
        check(p.stdout == "child exited with status 3\n", f"{how} unprofiled: {p.stdout!r}")
        for mode in ["trace", "sample"]:
            for clock in ["cpu", "wall"]:
                what = f"{how} {mode} {clock}"
                d = os.path.join(TMP, f"clone-{how}-{mode}-{clock}")
                os.mkdir(d)
                # %p: a file the child wrote would have a name of its own
                p = record(["--mode", mode, "-c", clock, "-o", os.path.join(d, "c.%p.pstat")], [cloner, how],
                           check=False)
                check(p.returncode == 0 and p.stdout == "child exited with status 3\n",
                      f"{what}: exit {p.returncode}, output {p.stdout!r}, stderr {p.stderr!r}")
                check(coprof_lines(p.stderr) == [], f"{what}: stderr {p.stderr!r}")
                files = os.listdir(d)
                if mode == "sample":  # too short to be sure of a tick: one file at most
                    check(len(files) <= 1, f"{what}: files {files}")
                    continue
                check(len(files) == 1, f"{what}: files {files}")
                prof = Profile(os.path.join(d, files[0]))
                check(files[0] == f"c.{prof.extras['pid']}.pstat", f"{what}: {files[0]} is not the parent's")
                check(prof.nc("main") == 1 and not prof.funcs("child") and not prof.funcs("child_work"),
                      f"{what}: the parent's profile holds {sorted(k[2] for k in prof.stats)}")


def case_resp_long_connections():
    """Connections that outlive profiling windows stay one task each: every window of a
    server with two open connections lists two serve tasks, not two more per window
    (the adapter used to make a new engine context per window and leave the old one
    suspended for good), and a connection closed while profiling is off is finished."""
    import socket as sk
    tmpl = os.path.join(TMP, "long.%n.pstat")
    cmd = [BIN, "record", "--no-start", "-c", "wall", "-o", tmpl, "--", os.path.join(SAMPLES, "resp"), "0"]
    p = subprocess.Popen(cmd, env=base_env(), cwd=TMP, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    conns = []
    try:
        port = int(re.search(r"port (\d+)", p.stdout.readline()).group(1))
        wait_for(lambda: catches(p.pid, signal.SIGUSR2), 20, "the toggle handler")
        conns = [sk.create_connection(("127.0.0.1", port)) for _ in range(3)]

        def ping_all():
            for c in conns:
                c.sendall(b"PING\r\n")
                check(c.recv(64) == b"+PONG\r\n", "no PONG")
        def taken():  # the toggle signal is no longer pending (two would merge)
            with open(f"/proc/{p.pid}/status") as f:
                masks = [int(l.split()[1], 16) for l in f if l.startswith(("SigPnd:", "ShdPnd:"))]
            return not any(m & (1 << (signal.SIGUSR2 - 1)) for m in masks)
        for i in range(1, 6):
            ping_all()  # profiling off: the connections live on between windows
            if i == 5:
                conns.pop().close()  # closed while off: finished, not left suspended
                time.sleep(0.2)
            toggle(p.pid)
            wait_for(taken, 20, "the toggle taken")
            until = time.monotonic() + 0.5  # the control thread starts it soon after
            while time.monotonic() < until:
                ping_all()
                time.sleep(0.02)
            toggle(p.pid)
            wait_for(lambda: os.path.exists(tmpl.replace("%n", str(i))), 20, f"window {i}")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    finally:
        for c in conns:
            c.close()
        if p.poll() is None:
            p.kill()
            p.wait()
    for i in range(1, 6):
        _, ex = load(tmpl.replace("%n", str(i)))
        serve = [t for t in ex["tasks"] if t["name"] == "serve"]
        live = [t for t in serve if t["state"] != "finished"]
        want = 3 if i < 5 else 2
        check(len(live) == want and len(serve) <= 3,
              f"window {i}: {want} open connections, tasks {[(t['id'], t['state']) for t in serve]}")


def need_root(what):
    """Mounts, mknod and another user need root; without it the case is skipped (77)."""
    if os.geteuid() != 0:
        print(f"SKIP: {what} needs root")
        sys.exit(77)


def public_dir(name):
    """A fresh directory under TMP that an unprivileged user may enter (TMP is 0700)."""
    os.chmod(TMP, 0o755)
    d = os.path.join(TMP, name)
    os.mkdir(d)
    os.chmod(d, 0o755)
    return d


def listing(d):
    """What a directory holds: names with their types, to see that nothing was left."""
    return sorted((n, stat.S_IFMT(os.lstat(os.path.join(d, n)).st_mode)) for n in os.listdir(d))


def check_refused(out, reason, cwd, prefix=(), watch=None):
    """Runs jumper under the shim with COPROF_OUT=out (as `prefix`, e.g. another user):
    its exit status and output must be those of a run without coprof, stderr one coprof
    line naming the path and `reason`, and `watch` (the directory the profile would go
    to) must hold what it held before: no partial or temporary file."""
    cmd = list(prefix) + [os.path.join(TESTBIN, "jumper"), "3"]
    plain = subprocess.run(cmd, env=base_env(), cwd=cwd, capture_output=True, text=True, timeout=60)
    before = listing(watch) if watch else None
    # the shim goes in after the prefix: setpriv sets capabilities on its own thread
    # only, so with the shim's control thread in it its setresgid aborts (glibc's setxid)
    preload = ["env", "LD_PRELOAD=" + preload_env()["LD_PRELOAD"], "COPROF_OUT=" + out]
    p = subprocess.run(list(prefix) + preload + cmd[len(prefix):], env=base_env(), cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    check((p.returncode, p.stdout) == (plain.returncode, plain.stdout),
          f"{out}: the host's status or output changed: {p.returncode} {p.stdout!r}, "
          f"alone {plain.returncode} {plain.stdout!r}; stderr {p.stderr!r}")
    lines = coprof_lines(p.stderr)
    want = f"coprof: cannot write the profile to {out}: {reason}"
    check(len(lines) == 1 and lines[0].startswith(want), f"{out}: stderr {p.stderr!r}, expected {want!r}")
    if watch:
        check(listing(watch) == before, f"{out}: {watch} held {before}, now {listing(watch)}")


def case_out_os_errors():
    need_root("mounting a full and a read-only filesystem, running as nobody")
    base = public_dir("oserr")
    # a missing directory; the same through "~", which no shell expanded
    check_refused(os.path.join(base, "missing", "x.pstat"), os.strerror(errno.ENOENT), base, watch=base)
    check_refused("~/x.pstat", os.strerror(errno.ENOENT) + " (a leading ~ is not expanded", base,
                  watch=base)
    # a name too long for the filesystem: the whole path and the reason, not cut (the
    # line is longer than the 512 bytes that used to end it before the reason)
    check_refused(os.path.join(base, "n" * 600 + ".pstat"), os.strerror(errno.ENAMETOOLONG), base,
                  watch=base)
    # a directory the user may not write to (root may write anywhere: run as nobody)
    ro = os.path.join(base, "ro")
    os.mkdir(ro)
    os.chmod(ro, 0o555)
    check_refused(os.path.join(ro, "x.pstat"), os.strerror(errno.EACCES), base,
                  prefix=["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"], watch=ro)
    # a full disk and a read-only filesystem: small tmpfs mounts, unmounted after
    full, rofs = os.path.join(base, "full"), os.path.join(base, "rofs")
    os.mkdir(full)
    os.mkdir(rofs)
    mounted = []
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "coprof-test", full], check=True)
        mounted.append(full)
        fd = os.open(os.path.join(full, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while os.write(fd, b"x" * 4096) > 0:
                pass
        except OSError as e:
            check(e.errno == errno.ENOSPC, f"filling the tmpfs: {e}")
        finally:
            os.close(fd)
        check_refused(os.path.join(full, "x.pstat"), os.strerror(errno.ENOSPC), base, watch=full)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "coprof-test", rofs], check=True)
        mounted.append(rofs)
        check_refused(os.path.join(rofs, "x.pstat"), os.strerror(errno.EROFS), base, watch=rofs)
    finally:
        for m in mounted:
            subprocess.run(["umount", m], check=False)


def case_out_not_regular():
    need_root("mknod")
    d = os.path.join(TMP, "targets")
    os.mkdir(d)
    dev = os.path.join(d, "null")
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null, never in /dev
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    sock_path = os.path.join(d, "sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sock_path)
    sub = os.path.join(d, "dir")
    os.mkdir(sub)
    os.symlink(dev, os.path.join(d, "to-dev"))
    os.symlink(os.path.join(d, "nothing"), os.path.join(d, "dangling"))
    try:
        device = "it is a device, not a regular file; nothing was written"
        link = "it is a symbolic link to something other than a regular file"
        for name, reason in [("null", device), ("fifo", "it is a FIFO, not a regular file"),
                             ("sock", "it is a socket, not a regular file"),
                             ("dir", os.strerror(errno.EISDIR)), ("to-dev", link), ("dangling", link)]:
            before = os.lstat(os.path.join(d, name))
            check_refused(os.path.join(d, name), reason, TMP, watch=d)
            after = os.lstat(os.path.join(d, name))
            check((after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev),
                  f"{name} was replaced")
        check(os.listdir(sub) == [], f"something was written in the directory: {os.listdir(sub)}")
        # a link to a regular file is written through: the file changes, the link stays
        real = os.path.join(d, "real.pstat")
        with open(real, "w") as f:
            f.write("old")
        os.symlink(real, os.path.join(d, "to-real"))
        run([os.path.join(TESTBIN, "jumper"), "3"], preload_env(COPROF_OUT=os.path.join(d, "to-real")))
        check(os.path.islink(os.path.join(d, "to-real")), "the link was replaced")
        check(Profile(real).nc("outer") == 3, "the profile written through the link")
        check(not [n for n in os.listdir(d) if ".tmp." in n], f"temporary files left: {os.listdir(d)}")
    finally:
        sock.close()
        shutil.rmtree(d)


if __name__ == "__main__":
    run_cases(globals())
