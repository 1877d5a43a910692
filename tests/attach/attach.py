#!/usr/bin/env python3
"""attach.py CASE [PYTHON]: one test of `coprof attach` and `coprof detach` on a real
process started without coprof (tests/attach/target.c, or PYTHON running aio.py), or on
a real server under load: Debian's redis-server under redis-benchmark, an aiohttp
server (aioserver.py, in a venv with aiohttp from PyPI) under ab.
`attach.py --make-venv PYTHON BUILD` only makes that venv (tests/lib/make_venvs.py).

Asserts what is exact: exit codes, the one line each refusal says, the files written
and read back (coprof report, and pstats with coprof's extras), which task ran which
function, and that the target runs on untouched: not traced, not stopped, the shim
mapped or not as it should be, its output going on, its double-computed rounds equal
(target.c says MISMATCH when a stop changed a register). Signals go only to processes
this script started, by pid. Exits 77 (skipped) where the machine lacks what a case
needs (a 32-bit toolchain, root for another user or mount namespace)."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from coprof_test import (Profile, base_env, check, control_name, funcs,  # noqa: E402
                         venv_python, wait_for)

BIN = os.environ.get("COPROF_BIN", "")
LIB = os.path.realpath(os.environ.get("COPROF_PRELOAD_LIB", ""))
TARGET = os.environ.get("COPROF_ATTACH_TARGET", "")
STATIC = os.environ.get("COPROF_ATTACH_STATIC", "")
HERE = os.path.dirname(os.path.abspath(__file__))
TMP = tempfile.mkdtemp(prefix="coprof-attach-")
SKIP = 77
started = []  # every process this script started, killed by pid at the end


class Target:
    """A process started without coprof, its stdout in a file."""

    def __init__(self, cmd, ready=True, env=None, orders=False):
        self.out = os.path.join(TMP, "target-%d.out" % len(started))
        with open(self.out, "w") as f:
            self.p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=TMP,
                                      env=env or base_env(),
                                      stdin=subprocess.PIPE if orders else None)
        started.append(self.p)
        self.pid = self.p.pid
        if ready:
            wait_for(lambda: "ready" in self.text() or self.p.poll() is not None, 20,
                     "the target to start")
            check(self.p.poll() is None, "the target exited: %r" % self.text())

    def text(self):
        with open(self.out) as f:
            return f.read()

    def order(self, line):
        """One order on the target's stdin (target.c orders, late.py)."""
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def rounds(self):
        got = re.findall(r"^rounds (\d+)$", self.text(), re.M)
        return int(got[-1]) if got else 0


def status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    return None


def shim_mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return "libcoprof-preload.so" in f.read()


def control_state(pid):
    """The run letter the shim's control thread publishes (R on, S off...), or None."""
    name = control_name(pid)
    return name[8] if name else None


def coprof(*args, env=None, user=None):
    cmd = [BIN] + list(args)
    if user:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=TMP,
                          env=env or base_env())


def runs_on(t, shim=False, busy=True):
    """The target runs as before: not traced, not stopped, the shim as expected, and
    (a busy target) its rounds go on, equal."""
    wait_for(lambda: status(t.pid, "TracerPid") == "0", 5, "the target to be untraced")
    check(t.p.poll() is None, "the target exited: %r" % t.text()[-400:])
    check(status(t.pid, "State")[0] in "RS", "target state %s" % status(t.pid, "State"))
    check(shim_mapped(t.pid) == shim, "shim mapped: %s, expected %s" % (not shim, shim))
    if busy:
        before = t.rounds()
        wait_for(lambda: t.rounds() > before, 5, "the target's rounds to go on")
        check("MISMATCH" not in t.text(), "a register changed: %r" % t.text()[-400:])


def refused(r, words):
    """coprof said one line, holding `words`, and exited 2."""
    lines = r.stderr.strip().split("\n")
    check(r.returncode == 2 and len(lines) == 1 and words in lines[0] and not r.stdout,
          "expected one line with %r and exit 2, got %d: %r %r" % (
              words, r.returncode, r.stderr, r.stdout))


def wrote(stdout):
    m = re.search(r"wrote (\S+)$", stdout, re.M)
    check(m, "no file said in %r" % stdout)
    check(os.path.exists(m.group(1)), "%s was not written" % m.group(1))
    return m.group(1)


def clean(stdout):
    """attach put the padding back to zeros (the trampoline gone from memory)."""
    check("trampoline stays" not in stdout, stdout)


def native_profile(path):
    """The profile of the busy target: its two spinning functions, each sampled."""
    prof = Profile(path)
    for fn in ("spin_inner", "spin_outer"):
        check(prof.nc(fn) > 0, "%s not sampled" % fn)
    r = coprof("report", path)
    check(r.returncode == 0 and "spin_inner" in r.stdout, "report: %r" % r.stderr)
    return prof


def case_sample_native():
    """attach --duration 1 on a busy native program: one window, written, read back."""
    t = Target([TARGET, "busy"])
    r = coprof("attach", "--duration", "1", "-o", "s-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r" % (r.returncode, r.stderr))
    check(re.search(r"^%d: profiling on \(attached through thread %d" % (t.pid, t.pid),
                    r.stdout, re.M), r.stdout)
    path = wrote(r.stdout)
    clean(r.stdout)
    check(path == os.path.join(TMP, "s-%d.pstat" % t.pid), path)
    native_profile(path)
    runs_on(t, shim=True)
    check(control_state(t.pid) == "S", "control thread: %s" % control_state(t.pid))


def case_detach_reattach():
    """attach, detach (the window written), attach again (the loaded shim reused: once
    mapped), then `coprof toggle` on it, which names the attach's file."""
    t = Target([TARGET, "busy"])
    r = coprof("attach", "-o", os.path.join(TMP, "d-%p.pstat"), str(t.pid))
    check(r.returncode == 0 and "profiling on" in r.stdout, "attach: %r" % r.stderr)
    check(control_state(t.pid) == "R", "not on after attach")
    time.sleep(0.5)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and "detached" in r.stdout, "detach: %r %r" % (r.stdout, r.stderr))
    native_profile(wrote(r.stdout))
    runs_on(t, shim=True)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and "not profiling" in r.stdout, "second detach: %r" % r.stdout)
    r = coprof("attach", "--duration", "0.5", str(t.pid))
    check(r.returncode == 0 and "loaded already" in r.stdout, "re-attach: %r %r" % (
        r.stdout, r.stderr))
    check(wrote(r.stdout) == os.path.join(TMP, "d-%d.2.pstat" % t.pid), r.stdout)
    with open("/proc/%d/maps" % t.pid) as f:
        loads = {line.split()[0] for line in f
                 if "libcoprof-preload.so" in line and " r-xp " in line}
    check(len(loads) == 1, "the shim's code is mapped %d times" % len(loads))
    check(coprof("toggle", str(t.pid)).returncode == 0, "toggle on")
    time.sleep(0.3)
    r = coprof("toggle", str(t.pid))
    check(r.returncode == 0, "toggle off: %r" % r.stderr)
    check(wrote(r.stdout) == os.path.join(TMP, "d-%d.3.pstat" % t.pid), r.stdout)
    runs_on(t, shim=True)


def case_sleep_kept():
    """A target asleep in nanosleep(1 s) when attached sleeps its full second: the
    system call is restarted as after a debugger's stop, never cut short; and the
    requests after (the window's end, a toggle, detach) go through the shim's control
    pipe, not the toggle signal, so no later sleep is cut short either."""
    t = Target([TARGET, "sleep", "4"])
    time.sleep(1.3)
    r = coprof("attach", "--duration", "0.8", str(t.pid))
    check(r.returncode == 0 and "its system call restarted" in r.stdout,
          "attach: %r %r" % (r.stdout, r.stderr))
    check(coprof("toggle", str(t.pid)).returncode == 0, "toggle")
    check(coprof("detach", str(t.pid)).returncode == 0, "detach")
    check(t.p.wait(10) == 0, "target exit %s" % t.p.returncode)
    slept = re.findall(r"^slept (\d+) ns rc (-?\d+)$", t.text(), re.M)
    check(len(slept) == 4, "sleeps: %r" % t.text())
    for ns, rc in slept:
        check(rc == "0" and int(ns) >= 10**9, "a sleep ended early: %s ns, rc %s" % (ns, rc))


def case_toggle_preloaded_sleep():
    """A preloaded target asleep in nanosleep(1 s), toggled on and off four times: its
    every sleep is whole, rc 0. `coprof toggle` writes to the shim's control pipe: the
    toggle signal's handler, run on the sleeping thread, would end the sleep early
    (nanosleep is never restarted after a handler, SA_RESTART or not)."""
    env = base_env(LD_PRELOAD=LIB, COPROF_MODE="sample", COPROF_START="0",
                   COPROF_OUT=os.path.join(TMP, "tp.%n.pstat"))
    t = Target([TARGET, "sleep", "4"], env=env)
    wait_for(lambda: control_state(t.pid) == "S", 10, "the control thread")
    for i in range(4):
        time.sleep(0.35)
        r = coprof("toggle", str(t.pid))
        check(r.returncode == 0, "toggle %d: %r %r" % (i, r.stdout, r.stderr))
    check(t.p.wait(10) == 0, "target exit %s" % t.p.returncode)
    slept = re.findall(r"^slept (\d+) ns rc (-?\d+)$", t.text(), re.M)
    check(len(slept) == 4, "sleeps: %r" % t.text())
    for ns, rc in slept:
        check(rc == "0" and int(ns) >= 10**9, "a sleep ended early: %s ns, rc %s" % (ns, rc))


def case_fork_child():
    """A program that forks after the attach: the child has its own control pipe, so
    `coprof toggle CHILD` stops the child (writing the child's file) and leaves the
    parent profiling; detach then writes the parent's."""
    t = Target([TARGET, "forks"])
    r = coprof("attach", "-o", "f-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %r" % r.stderr)
    wait_for(lambda: re.search(r"^child \d+$", t.text(), re.M), 10, "the child")
    child = int(re.search(r"^child (\d+)$", t.text(), re.M).group(1))
    started.append(child)
    wait_for(lambda: control_state(child) == "r", 10, "the child's control thread")
    time.sleep(0.3)
    r = coprof("toggle", str(child))
    check(r.returncode == 0, "toggle child: %r" % r.stderr)
    check(wrote(r.stdout) == os.path.join(TMP, "f-%d.pstat" % child), r.stdout)
    check(control_state(t.pid) == "R", "the parent was stopped too")
    r = coprof("detach", str(t.pid))
    check(wrote(r.stdout) == os.path.join(TMP, "f-%d.pstat" % t.pid), r.stdout)
    native_profile(os.path.join(TMP, "f-%d.pstat" % child))


def case_until_signal():
    """attach --until-signal: profiles until coprof gets SIGINT, then writes."""
    t = Target([TARGET, "busy"])
    out = os.path.join(TMP, "u.out")
    with open(out, "w") as f:
        c = subprocess.Popen([BIN, "attach", "--until-signal", "-o", "u-%p.pstat", str(t.pid)],
                             stdout=f, stderr=subprocess.STDOUT, cwd=TMP, env=base_env())
    started.append(c)
    wait_for(lambda: "profiling on" in open(out).read(), 10, "profiling on")
    time.sleep(0.5)
    os.kill(c.pid, signal.SIGINT)
    check(c.wait(30) == 0, "attach exited %d: %r" % (c.returncode, open(out).read()))
    native_profile(wrote(open(out).read()))
    runs_on(t, shim=True)


def cpu_seconds(pid):
    """The CPU time (user and system) of every thread of pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def case_killed():
    """coprof attach SIGKILLed at each step (COPROF_ATTACH_TEST_DIE): 1 seized, 2 the
    thread stopped, 3 the trampoline written, 4 the registers set, and the same for
    the registration of a second thread. The target runs on, untraced, every round
    equal; from step 4 the trampoline runs alone and the shim starts."""
    for step in (1, 2, 3, 4):
        t = Target([TARGET, "busy"])
        r = coprof("attach", "-o", "k-%p.pstat", str(t.pid),
                   env=base_env(COPROF_ATTACH_TEST_DIE=str(step)))
        check(r.returncode == -signal.SIGKILL, "step %d: attach exited %d" % (step, r.returncode))
        if step < 4:
            runs_on(t, shim=False)
            continue
        # The shim starts by itself, but no thread registered with the sampler (that
        # is coprof's next step): the window is empty.
        wait_for(lambda: control_state(t.pid) == "R", 10, "the shim to start by itself")
        runs_on(t, shim=True)
        r = coprof("detach", str(t.pid))
        check(r.returncode == 0 and "nothing was recorded" in r.stdout,
              "detach after step 4: %r %r" % (r.stdout, r.stderr))
    # In sample mode each thread then gets the trampoline in turn to register: killed
    # while the second thread is stopped (10) and once its registers are set (12),
    # the first one (steps 5 to 8) registered and sampled.
    for step in (10, 12):
        t = Target([TARGET, "threads"])
        r = coprof("attach", "-o", "k-%p.pstat", str(t.pid),
                   env=base_env(COPROF_ATTACH_TEST_DIE=str(step)))
        check(r.returncode == -signal.SIGKILL, "step %d: attach exited %d" % (step, r.returncode))
        wait_for(lambda: control_state(t.pid) == "R", 10, "the shim to be on")
        runs_on(t, shim=True)
        # the registered thread is one of three busy ones, sampled at 99 Hz of its CPU
        # time: a loaded run's window gave it no tick before the detach. Its share of
        # 0.6 s of the process's CPU is some 20 ticks.
        cpu = cpu_seconds(t.pid)
        wait_for(lambda: cpu_seconds(t.pid) - cpu >= 0.6, 60, "the target to run 0.6 s of CPU")
        r = coprof("detach", str(t.pid))
        check(r.returncode == 0, "detach after step %d: %r" % (step, r.stderr))
        native_profile(wrote(r.stdout))


def case_threads():
    """A program with three busy threads: each gets the trampoline in turn and is
    sampled (the thread table has each, with samples), every round stays equal, and
    the padding is zero again at the end."""
    t = Target([TARGET, "threads"])
    r = coprof("attach", "--duration", "1", "-o", "t-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %r" % r.stderr)
    check("sampling 3 of its 3 threads\n" in r.stdout, r.stdout)
    clean(r.stdout)
    prof = native_profile(wrote(r.stdout))
    tids = {int(x) for x in os.listdir("/proc/%d/task" % t.pid)}
    rows = prof.extras["threads"]
    check(len(rows) == 3 and all(th.get("tid") in tids and th.get("name") == "attach-target"
                                 for th in rows), "threads in the file: %r" % rows)
    for th in rows:
        check(th.get("ttot", 1) > 0, "thread %r has no time" % th)
    runs_on(t, shim=True)


def attached_window(t, *opts):
    """attach with a window left open (no --duration): 0, said, the padding clean."""
    r = coprof("attach", *opts, "-o", "w-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    clean(r.stdout)
    return os.path.join(TMP, "w-%d.pstat" % t.pid)


def late_thread(t):
    """Orders the target to start a thread, and gives it half a second: its tid."""
    before = set(os.listdir("/proc/%d/task" % t.pid))
    t.order("thread")
    wait_for(lambda: "started" in t.text(), 10, "the late thread to start")
    time.sleep(0.5)
    new = set(os.listdir("/proc/%d/task" % t.pid)) - before
    check(len(new) == 1, "new threads %r" % new)
    return int(new.pop())


def detach_late_sampled(t, path, tid):
    """Detaches from the orders target: the window written to path, late_thread (thread
    tid) sampled, its tid in the file's threads beside the two there before."""
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    prof = native_profile(path)
    check(prof.nc("late_thread") > 0, "late_thread not sampled")
    tids = sorted(th.get("tid") for th in prof.extras["threads"])
    check(len(tids) == 3 and tid in tids, "threads %r, the late one %d" % (tids, tid))
    runs_on(t, shim=True)


def case_late_thread():
    """A thread the program starts after the attach (the bound pthread_create) is
    sampled from its start: its function is in the profile, and its tid in the file's
    threads beside the two there before."""
    t = Target([TARGET, "orders"], orders=True)
    path = attached_window(t)
    tid = late_thread(t)
    detach_late_sampled(t, path, tid)


def case_dlopen_thread():
    """A library the program loads after the attach (target.c's order dlopen, late.c):
    the control thread binds the interposers into it while the window is open, so its
    pthread_create is the shim's (the library sees it: "bound"), and the thread it then
    starts is sampled from its start: late_spin is in the profile."""
    t = Target([TARGET, "orders"], orders=True,
               env=dict(base_env(), ATTACH_LATE_LIB=os.environ["COPROF_ATTACH_LATE_LIB"]))
    path = attached_window(t)
    t.order("dlopen")
    lines = lambda: t.text().splitlines()
    wait_for(lambda: "late started" in lines() or "no library" in lines(), 20, "the library")
    check("bound" in lines() and "late started" in lines(), "the target said %r" % lines())
    time.sleep(1)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    prof = native_profile(path)
    check(prof.nc("late_spin") > 0, "late_spin not sampled")
    runs_on(t, shim=True, busy=False)


def case_gap_thread():
    """A thread the program starts while the shim sets up, before the binding (the
    set-up held 1.5 s by COPROF_TEST_ATTACH_DELAY_MS), is not in coprof's first listing
    nor seen by the bound pthread_create: coprof gives it the entry once the window is
    open, so it is sampled too (3 of 3 threads)."""
    t = Target([TARGET, "orders"], orders=True,
               env=dict(base_env(), COPROF_TEST_ATTACH_DELAY_MS="1500"))
    path = os.path.join(TMP, "g-%d.pstat" % t.pid)
    a = subprocess.Popen([BIN, "attach", "-o", "g-%p.pstat", str(t.pid)], cwd=TMP,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    tid = late_thread(t)
    out, err = a.communicate(timeout=30)
    check(a.returncode == 0 and "sampling 3 of its 3 threads" in out, "attach: %d %r %r" % (
        a.returncode, out, err))
    time.sleep(0.5)
    detach_late_sampled(t, path, tid)


def case_extra_map():
    """The shim's file mapped again in the process, lower than the shim and at offset 0
    (as libdw maps a file it reads for symbols): coprof finds the shim's variables from
    its executable segment's mapping, so detach names the file the attach's template
    made (it took the lowest mapping at offset 0, read garbage there, and named the
    default template)."""
    t = Target([TARGET, "orders"], orders=True)
    path = attached_window(t)
    t.order("map")
    wait_for(lambda: "mapped" in t.text(), 10, "the target to map the shim's file")
    time.sleep(0.3)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    runs_on(t, shim=True)


def case_coros():
    """ucontext coroutines under the wall clock in sample mode: two made before the
    attach (old_coro), adopted at their first switch after it through the bound
    swapcontext (their stacks walked once name them after their entry), and one made
    after it (new_coro), followed from its makecontext: all three are tasks of runtime
    ucontext, each holding its own function's samples and charged waits while
    suspended at its own frame (the switch tells the sampler where it waits). Ticks on
    an old one before its first switch (it ran at the attach) may make a task of
    runtime stack, named old_coro too."""
    t = Target([TARGET, "coros"], orders=True)
    path = attached_window(t, "-c", "wall")
    t.order("coro")
    wait_for(lambda: "made" in t.text(), 10, "the new coroutine")
    time.sleep(1)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    prof = Profile(path)
    ex = prof.extras
    tasks = [(tk["name"], tk["runtime"]) for tk in ex["tasks"]]
    check(sorted(tk for tk in tasks if tk[1] == "ucontext") ==
          [("new_coro", "ucontext"), ("old_coro", "ucontext"), ("old_coro", "ucontext")] and
          all(tk == ("old_coro", "stack") for tk in tasks if tk[1] != "ucontext"),
          "tasks %r" % tasks)
    uc = [i for i, tk in enumerate(ex["tasks"]) if tk["runtime"] == "ucontext"]
    for i in uc:
        name, other = ex["tasks"][i]["name"], {"old_coro": "new_coro", "new_coro": "old_coro"}
        held = sorted(k[2] for k in ex["tasks"][i]["stats"])
        check(funcs(ex["tasks"][i]["stats"], name) and
              not funcs(ex["tasks"][i]["stats"], other[name]), "%s's task holds %r" % (name, held))
    waits = [st for st in ex["stacks"] if st[4]]
    check(sorted({st[0] for st in waits}) == sorted(uc) and
          all(st[2][0][2] == ex["tasks"][st[0]]["name"] for st in waits),
          "waits %r" % [(st[0], [k[2] for k in st[2]]) for st in waits])
    runs_on(t, shim=True, busy=False)


def case_fibers():
    """Boost.Context fibers made after the attach (fibers.cpp: a new one each round) are
    followed through the bound make_fcontext and jump_fcontext, as under the preload:
    tasks of runtime fcontext, and fiber_spin sampled in them only."""
    t = Target([os.environ["COPROF_ATTACH_FIBERS"]])
    path = attached_window(t)
    time.sleep(1)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    ex = Profile(path).extras
    holding = [(tk["name"], tk["runtime"]) for tk in ex["tasks"] if funcs(tk["stats"], "fiber_spin")]
    check(holding and all(rt == "fcontext" for _, rt in holding),
          "tasks holding fiber_spin %r" % holding[:10])
    runs_on(t, shim=True, busy=False)


def case_old_fibers():
    """Boost.Context fibers made before the attach (fibers.cpp's two that live for
    ever), in sample mode under wall: each is adopted as it first jumps away (its stack
    walked once names it), a task of runtime fcontext from its next run, holding
    old_spin and charged waits while suspended (the jump tells the sampler where it
    waits); ticks before that jump may make a task of runtime stack. The fibers made
    after it are tasks of runtime fcontext too, none holding old_spin."""
    t = Target([os.environ["COPROF_ATTACH_FIBERS"]])
    path = attached_window(t, "-c", "wall")
    time.sleep(1)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    ex = Profile(path).extras
    old = [i for i, tk in enumerate(ex["tasks"]) if funcs(tk["stats"], "old_spin")]
    adopted = [i for i in old if ex["tasks"][i]["runtime"] == "fcontext"]
    check(len(adopted) == 2 and all(ex["tasks"][i]["runtime"] == "stack" for i in old
                                    if i not in adopted) and
          not any(funcs(ex["tasks"][i]["stats"], "fiber_spin") for i in adopted),
          "tasks holding old_spin %r" % [(ex["tasks"][i]["name"], ex["tasks"][i]["runtime"])
                                         for i in old])
    waited = {st[0] for st in ex["stacks"] if st[4]}
    check(set(adopted) <= waited, "waits of %r, adopted %r" % (sorted(waited), adopted))
    runs_on(t, shim=True, busy=False)


def case_trace_native():
    """Trace mode on a native program built with -finstrument-functions: its hooks are
    bound, so from the attach on every call is counted. spin_inner is called only by
    spin_outer, 100 times a call (the window cuts at most one call of spin_outer at each
    end, in each of the two threads that call it: main, and the late one at the end);
    the late thread's function is called once."""
    t = Target([os.environ["COPROF_ATTACH_TARGET_INSTR"], "orders"], orders=True)
    path = attached_window(t, "--mode", "trace")
    late_thread(t)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    prof = Profile(path)
    check(prof.extras["mode"] == "trace", "mode %s" % prof.extras["mode"])
    outer, inner = prof.nc("spin_outer"), prof.nc("spin_inner")
    check(outer > 0 and -200 <= inner - 100 * outer <= 100, "calls %d outer, %d inner" % (
        outer, inner))
    callers = {k[2] for k in prof.one("spin_inner")[4]}
    check(callers == {"spin_outer"}, "spin_inner called by %r" % callers)
    check(prof.nc("late_thread") == 1, "late_thread called %d times" % prof.nc("late_thread"))
    runs_on(t, shim=True)


def case_exec_writes():
    """A program that execs while attached: the window is written first, and the new
    image (env, which prints its environment) sees no variable of coprof's."""
    t = Target([TARGET, "orders"], orders=True)
    path = attached_window(t)
    time.sleep(0.3)
    t.order("exec")
    check(t.p.wait(20) == 0, "exit %s" % t.p.returncode)
    check("PATH=" in t.text() and "COPROF" not in t.text(), t.text()[-600:])
    native_profile(path)


def case_exit_writes():
    """A program that leaves through _exit while attached: the window is written."""
    t = Target([TARGET, "orders"], orders=True)
    path = attached_window(t)
    time.sleep(0.3)
    t.order("_exit")
    check(t.p.wait(20) == 0, "exit %s" % t.p.returncode)
    native_profile(path)


def case_python_late_thread(python):
    """A Python thread started after a sample-mode attach is sampled (the bound
    pthread_create registers it): late_crunch is in the profile, on its own thread."""
    t = Target([python, os.path.join(HERE, "late.py")], orders=True)
    path = attached_window(t, "--mode", "sample")
    tid = late_thread(t)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == path, "detach: %r %r" % (r.stdout, r.stderr))
    prof = Profile(path)
    check(prof.nc("late_crunch") > 0 and prof.nc("main_crunch") > 0, "crunch not sampled")
    tids = [th.get("tid") for th in prof.extras["threads"]]
    check(tid in tids, "threads %r, the late one %d" % (tids, tid))
    check(t.p.poll() is None and "Traceback" not in t.text(), t.text()[-400:])


def case_bad_input():
    """Bad usage: one line, exit 2, nothing attached."""
    t = Target([TARGET, "busy"])
    for args, words in (
            (["--mode", "fast", str(t.pid)], "--mode is trace or sample"),
            (["--duration", "0", str(t.pid)], "--duration '0'"),
            (["--duration", "1", "--until-signal", str(t.pid)], "exclude each other"),
            (["--hz", "0", str(t.pid)], "--hz is a rate"),
            (["-5"], "not a pid"),
            (["--mode", "trace", str(t.pid)], "built with -finstrument-functions"),
            (["x1"], "not a pid")):
        refused(coprof("attach", *args), words)
    r = coprof("detach", str(t.pid))
    refused(r, "not loaded in it")
    runs_on(t, shim=False)


def case_no_such_pid():
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) + 1
    refused(coprof("attach", str(pid)), "%d: no such process" % pid)
    refused(coprof("detach", str(pid)), "%d: no such process" % pid)


def case_not_allowed():
    """A user who may not trace the target: the line names ptrace_scope's file and
    CAP_SYS_PTRACE. Needs root, to run coprof as nobody against root's process."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("SKIP: needs root and setpriv")
        sys.exit(SKIP)
    t = Target([TARGET, "busy"])
    r = coprof("attach", str(t.pid), user=65534)
    refused(r, "not allowed to trace it")
    check("/proc/sys/kernel/yama/ptrace_scope" in r.stderr and "CAP_SYS_PTRACE" in r.stderr,
          r.stderr)
    runs_on(t, shim=False)


def case_same_user():
    """A user without any capability attaches to a process of its own (no Yama here,
    or ptrace_scope 0): the profile is written, as that user. As root, the test runs
    both as nobody; as another user, the other cases run that way already."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("SKIP: needs root and setpriv to become nobody")
        sys.exit(SKIP)
    scope = "/proc/sys/kernel/yama/ptrace_scope"
    if os.path.exists(scope) and open(scope).read().strip() != "0":
        print("SKIP: ptrace_scope is not 0: a user may trace only its descendants")
        sys.exit(SKIP)
    nobody = 65534
    shared = tempfile.mkdtemp(prefix="coprof-attach-nobody-")
    os.chmod(shared, 0o777)
    t = Target(["setpriv", "--reuid=%d" % nobody, "--regid=%d" % nobody, "--clear-groups",
                TARGET, "busy"])
    r = coprof("attach", "--duration", "1", "-o", os.path.join(shared, "n-%p.pstat"),
               str(t.pid), user=nobody)
    check(r.returncode == 0, "attach as nobody: %d %r" % (r.returncode, r.stderr))
    path = wrote(r.stdout)
    check(os.stat(path).st_uid == nobody, "the file is not nobody's")
    native_profile(path)
    runs_on(t, shim=True)
    shutil.rmtree(shared, ignore_errors=True)


def case_traced():
    """A target under strace: refused, strace's trace going on."""
    if not shutil.which("strace"):
        print("SKIP: no strace")
        sys.exit(SKIP)
    log = os.path.join(TMP, "strace.log")
    tracer = subprocess.Popen(["strace", "-f", "-o", log, TARGET, "sleep", "3"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started.append(tracer)
    kids = []

    def child():
        """strace's child that runs the target (strace forks short-lived children of
        its own first, to test what ptrace can do)."""
        try:
            with open("/proc/%d/task/%d/children" % (tracer.pid, tracer.pid)) as f:
                pids = [int(x) for x in f.read().split()]
            kids[:] = [p for p in pids if "ready" in open(log).read() and
                       open("/proc/%d/cmdline" % p, "rb").read().split(b"\0")[:2]
                       == [TARGET.encode(), b"sleep"]]
            return kids and status(kids[0], "TracerPid") == str(tracer.pid)
        except OSError:
            return False
    wait_for(child, 10, "strace's child")
    pid = kids[0]
    refused(coprof("attach", str(pid)), "traced already, by process %d" % tracer.pid)
    check(status(pid, "TracerPid") == str(tracer.pid), "strace lost its tracee")
    check(not shim_mapped(pid), "shim mapped")
    check(tracer.wait(20) == 0, "strace (and its target) exited %d" % tracer.returncode)


def case_zombie():
    p = subprocess.Popen([TARGET, "no-such-mode"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    started.append(p)
    wait_for(lambda: status(p.pid, "State")[0] == "Z", 10, "a zombie")
    refused(coprof("attach", str(p.pid)), "it is a zombie")
    check(p.wait() == 2, "exit status")


def case_kernel_thread():
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[6]) & 0x00200000:  # PF_KTHREAD
            pid = int(stat.split("/")[2])
            refused(coprof("attach", str(pid)), "it is a kernel thread")
            return
    print("SKIP: no kernel thread visible in this pid namespace")
    sys.exit(SKIP)


def case_main_exited():
    """A process whose main thread left by pthread_exit (a zombie leader, others
    running): its own line, not the zombie's."""
    t = Target([TARGET, "main-exits"])
    wait_for(lambda: status(t.pid, "State")[0] == "Z", 5, "the main thread's exit")
    refused(coprof("attach", str(t.pid)), "its main thread has exited")
    check(t.p.poll() is None and status(t.pid, "TracerPid") == "0", "the process changed")


def case_stopped():
    """A target stopped by SIGSTOP: refused (it would not run the trampoline)."""
    t = Target([TARGET, "busy"])
    os.kill(t.pid, signal.SIGSTOP)
    wait_for(lambda: status(t.pid, "State")[0] == "T", 5, "the stop")
    refused(coprof("attach", str(t.pid)), "it is stopped")
    os.kill(t.pid, signal.SIGCONT)
    runs_on(t, shim=False)


def case_seccomp():
    """A process under a seccomp filter: refused (a filter may kill it for dlopen's
    system calls), as sample mode refuses it under the preload."""
    t = Target([TARGET, "seccomp"])
    check(status(t.pid, "Seccomp") == "2", "not filtered")
    refused(coprof("attach", str(t.pid)), "it runs under a seccomp filter")
    runs_on(t, shim=False)


def case_32bit():
    cc = os.environ.get("CC", "cc")
    exe = os.path.join(TMP, "target32")
    made = subprocess.run([cc, "-m32", "-O1", "-pthread", os.path.join(HERE, "target.c"),
                           "-o", exe], capture_output=True)
    if made.returncode != 0:
        print("SKIP: %s -m32 cannot build here" % cc)
        sys.exit(SKIP)
    t = Target([exe, "busy"])
    refused(coprof("attach", str(t.pid)), "it is a 32-bit program")
    runs_on(t, shim=False)


def case_static():
    if not STATIC:
        print("SKIP: no static build of the target (no static libc)")
        sys.exit(SKIP)
    t = Target([STATIC, "busy"])
    refused(coprof("attach", str(t.pid)), "it is statically linked")
    runs_on(t, shim=False)


def case_python_no_adapter():
    """Pythons without an adapter: a real one older than 3.10 when installed (pyenv,
    /usr/bin), and 3.14 as the check reads it (an executable named python3.14: no 3.14
    here), whose line points to sys.remote_exec."""
    old = sorted(p for p in glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.?"))
                 + glob.glob("/usr/bin/python3.?") if re.search(r"python3\.[0-9]$", p))
    named = os.path.join(TMP, "python3.14")
    shutil.copy(TARGET, named)
    t = Target([named, "busy"])
    refused(coprof("attach", str(t.pid)), "sys.remote_exec")
    runs_on(t, shim=False)
    if not old:
        print("no Python older than 3.10 here: only the 3.14 line was checked")
        return
    t = Target([old[0], "-c", "import time; print('ready', flush=True); time.sleep(60)"])
    refused(coprof("attach", str(t.pid)), "has no coprof adapter (3.10 to 3.13 have)")
    runs_on(t, shim=False, busy=False)


def case_mount_ns():
    """A target in a mount namespace where the shim's folder is hidden (a tmpfs over
    it): refused, naming the path as the target sees it."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("SKIP: needs root and unshare")
        sys.exit(SKIP)
    script = "mount -t tmpfs none %s && exec %s busy" % (os.path.dirname(LIB), TARGET)
    t = Target(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    r = coprof("attach", str(t.pid))
    refused(r, "is not there in its mount namespace")
    check("/proc/%d/root%s" % (t.pid, LIB) in r.stderr, r.stderr)
    runs_on(t, shim=False)


def case_getattr_held():
    """A thread blocked in a read inside pthread_getattr_np holds its own thread's lock
    (target getattr: the main thread), which the shim's entries take on the thread they
    run on: coprof gives it no trampoline (there it waited for ever on its own lock).
    attach goes through another thread, samples the two others, and puts the padding
    back; the main thread, released, goes on."""
    if os.geteuid() != 0:
        print("SKIP: needs root for a mount namespace")
        sys.exit(SKIP)
    fifo = os.path.join(TMP, "maps.fifo")
    os.mkfifo(fifo)
    t = Target([TARGET, "getattr", fifo], orders=True)
    r = coprof("attach", "-o", "w-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    clean(r.stdout)
    through = re.search(r"attached through thread (\d+)", r.stdout)
    check(through and int(through.group(1)) != t.pid and
          "sampling 2 of its 3 threads" in r.stdout, r.stdout)
    t.order("release")
    wait_for(lambda: "main free" in t.text(), 10, "the main thread to go on")
    time.sleep(1)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and wrote(r.stdout) == os.path.join(TMP, "w-%d.pstat" % t.pid),
          "detach: %r %r" % (r.stdout, r.stderr))
    runs_on(t, shim=True)


def case_python_asyncio(python, mode="trace"):
    """A running asyncio program (aio.py), attached in trace mode (or sample mode): each
    task holds its own function and not the other's; the program runs on; the padding
    is zero again."""
    t = Target([python, os.path.join(HERE, "aio.py")])
    r = coprof("attach", "--mode", mode, "--duration", "1", "-o", "py-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    clean(r.stdout)
    prof = Profile(wrote(r.stdout))
    for name, mine, other in (("alpha", "crunch_alpha", "crunch_beta"),
                              ("beta", "crunch_beta", "crunch_alpha")):
        keys = {k[2] for k in prof.task(name)["stats"]}
        check(mine in keys and other not in keys, "task %s holds %s" % (name, sorted(keys)))
    check(prof.nc("crunch_alpha") > 0 and prof.nc("crunch_beta") > 0, "calls")
    check(prof.extras["mode"] == mode, "mode %s" % prof.extras["mode"])
    before = t.text().count("\n")
    wait_for(lambda: t.text().count("\n") > before, 10, "the program's output to go on")
    check(t.p.poll() is None and "Traceback" not in t.text(), t.text()[-400:])
    check(control_state(t.pid) == "S", "control thread %s" % control_state(t.pid))
    # the program's own SIGUSR2 handler is its own still, and the shim said nothing
    os.kill(t.pid, signal.SIGUSR2)
    wait_for(lambda: "usr2" in t.text(), 10, "the program's SIGUSR2 handler")
    check("coprof" not in t.text(), "the shim printed: %r" % t.text()[-400:])


def case_python_sample(python):
    """The same in sample mode: the tick handler reads the frames through the adapter,
    and the program's thread registers through the trampoline's second call."""
    case_python_asyncio(python, "sample")


def case_python_sleep(python):
    """A Python asleep in time.sleep(1) when attached (its main thread is the one
    stopped: a thread spins in calls) sleeps its whole second; the spinning thread's
    calls are in the profile (the adapter hooks every thread)."""
    t = Target([python, os.path.join(HERE, "sleeper.py")])
    time.sleep(1.3)
    r = coprof("attach", "-o", "ps-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    check("attached through thread %d" % t.pid in r.stdout
          and "its system call restarted" in r.stdout, r.stdout)
    check(t.p.wait(20) == 0, "exit %s: %r" % (t.p.returncode, t.text()))
    slept = [float(x) for x in re.findall(r"^slept ([0-9.]+)$", t.text(), re.M)]
    check(len(slept) == 3 and min(slept) >= 1.0, "sleeps %r" % slept)
    check(Profile(os.path.join(TMP, "ps-%d.pstat" % t.pid)).nc("step") > 0, "step not seen")


def case_python_gil_held(python):
    """A Python that holds its GIL past coprof's 10 s wait: attach says so (exit 1) and
    tells the shim not to start later; the program finishes, its 12 s call whole, and
    no profile is ever written."""
    t = Target([python, os.path.join(HERE, "gilhog.py")])
    r = coprof("attach", "-o", "g-%p.pstat", str(t.pid))
    check(r.returncode == 1 and "will not start later" in r.stderr, "attach: %d %r" % (
        r.returncode, r.stderr))
    check(t.p.wait(30) == 0, "exit %s: %r" % (t.p.returncode, t.text()))
    held = float(re.search(r"^held ([0-9.]+)$", t.text(), re.M).group(1))
    check(held >= 12.0 and "end" in t.text(), t.text())
    check(not os.path.exists(os.path.join(TMP, "g-%d.pstat" % t.pid)), "a profile was written")

# --- real servers under load: attached, detached, serving on ---------------------------

def free_port():
    """A port free now on 127.0.0.1 (the system's pick for a socket bound to port 0)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def thread_ids(pid):
    return {int(x) for x in os.listdir("/proc/%d/task" % pid)}


REDIS_LOG_PREFIX = re.compile(r"^\d+:[A-Za-z] \d+ \w+ \d+ [0-9:.]+ ")


def redis_log_kinds(lines):
    """redis-server's log lines without their pid, role and time: what each line says."""
    return [REDIS_LOG_PREFIX.sub("", line) for line in lines]


def redis_bench(port, n):
    """redis-benchmark's SET and GET, n requests each over its 50 connections: exit 0,
    each test's every request completed. Returns {test: requests per second}."""
    b = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "get,set",
                        "-n", str(n)], capture_output=True, text=True, timeout=120)
    check(b.returncode == 0, "redis-benchmark: %d %r" % (b.returncode, b.stderr[-400:]))
    rps = {}
    for test in ("SET", "GET"):
        m = re.search(r"====== %s ======\s+(\d+) requests completed in [0-9.]+ seconds.*?"
                      r"throughput summary: ([0-9.]+) requests per second" % test, b.stdout, re.S)
        check(m and int(m.group(1)) == n, "redis-benchmark %s: %r" % (test, b.stdout[-600:]))
        rps[test] = float(m.group(2))
    return rps


def case_redis():
    """Debian's redis-server, unmodified, under redis-benchmark before the attach, while
    attached in sample mode and after the detach: every request of each run completed,
    it answers PING after, its log has no line of a kind it had not printed before it
    was attached (no coprof line, no warning), the profile holds its event loop and
    every thread it had, and it is left untraced; it then shuts down cleanly on SIGTERM."""
    server, bench = shutil.which("redis-server"), shutil.which("redis-benchmark")
    if not server or not bench or not shutil.which("redis-cli"):
        print("SKIP: needs redis-server, redis-benchmark and redis-cli (scripts/setup.sh)")
        sys.exit(SKIP)
    port, n = free_port(), 100000
    t = Target([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", TMP], ready=False)
    wait_for(lambda: "Ready to accept connections" in t.text() or t.p.poll() is not None, 20,
             "redis-server to start")
    check(t.p.poll() is None, "redis-server exited: %r" % t.text()[-600:])
    redis_bench(port, n)
    before = t.text().splitlines()
    tids = thread_ids(t.pid)
    r = coprof("attach", "--mode", "sample", "-o", "redis-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    # (and the threads it started meanwhile: jemalloc starts a background thread for the
    # arena of the shim's set-up thread)
    m = re.search(r"sampling (\d+) of its (\d+) threads\n", r.stdout)
    check(m and m.group(1) == m.group(2) and int(m.group(1)) >= len(tids), r.stdout)
    redis_bench(port, n)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and "detached" in r.stdout, "detach: %r %r" % (r.stdout, r.stderr))
    path = wrote(r.stdout)
    check(path == os.path.join(TMP, "redis-%d.pstat" % t.pid), path)
    runs_on(t, shim=True, busy=False)
    check(control_state(t.pid) == "S", "control thread: %s" % control_state(t.pid))
    redis_bench(port, n)
    ping = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "ping"],
                          capture_output=True, text=True, timeout=30)
    check(ping.returncode == 0 and ping.stdout.strip() == "PONG", "PING: %r" % ping.stdout)
    after = t.text().splitlines()
    check(after[:len(before)] == before, "the log changed")
    new = [line for line, kind in zip(after[len(before):], redis_log_kinds(after[len(before):]))
           if kind not in redis_log_kinds(before) or "coprof" in line]
    check(not new, "redis-server printed new kinds of line: %r" % new)
    prof = Profile(path)
    check(prof.extras["mode"] == "sample" and prof.extras["pid"] == t.pid, "mode, pid")
    exe = os.path.realpath(server)  # Debian's redis-server is a link to redis-check-rdb
    check(prof.nc("aeMain", exe) > 0, "redis' event loop not sampled")
    rows = {th["tid"]: th for th in prof.extras["threads"]}
    check(tids <= set(rows), "threads %s, not all of %s" % (sorted(rows), sorted(tids)))
    check(rows[t.pid]["ttot"] > 0, "the main thread has no time: %r" % rows[t.pid])
    os.kill(t.pid, signal.SIGTERM)
    check(t.p.wait(30) == 0, "redis-server exited %d: %r" % (t.p.returncode, t.text()[-600:]))


def case_resp_sample():
    """The bundled RESP sample (samples/native/resp: a ucontext coroutine per
    connection, started without coprof) under redis-benchmark before the attach, while
    attached in sample mode and after the detach: every request completed each time,
    it printed nothing more, its one thread sampled; each connection made while
    attached (50 for SET, 50 for GET) is a coroutine of runtime ucontext, from its
    makecontext on (bound), named serve (its entry), and what was sampled in them is
    serve's (or, for a tick in the switch into one, the shim's swapcontext); left
    untraced."""
    if not shutil.which("redis-benchmark"):
        print("SKIP: needs redis-benchmark (scripts/setup.sh)")
        sys.exit(SKIP)
    t = Target([os.environ["COPROF_RESP"], "0"], ready=False)
    wait_for(lambda: "listening on port" in t.text() or t.p.poll() is not None, 20, "resp")
    port = int(re.search(r"listening on port (\d+)", t.text()).group(1))
    n = 20000
    redis_bench(port, n)
    said = t.text()
    r = coprof("attach", "--mode", "sample", "-o", "resp-%p.pstat", str(t.pid))
    check(r.returncode == 0 and "sampling 1 of its 1 threads\n" in r.stdout,
          "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    redis_bench(port, n)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and "detached" in r.stdout, "detach: %r %r" % (r.stdout, r.stderr))
    path = wrote(r.stdout)
    runs_on(t, shim=True, busy=False)
    redis_bench(port, n)
    check(t.text() == said, "resp printed: %r" % t.text()[len(said):])
    prof = Profile(path)
    tasks = prof.extras["tasks"]
    check(prof.extras["mode"] == "sample" and prof.nc("serve") > 0, "serve not sampled")
    check(len(tasks) >= 100 and all(tk["runtime"] == "ucontext" and tk["name"] == "serve"
                                    for tk in tasks),
          "tasks %r" % [(tk["name"], tk["runtime"]) for tk in tasks])
    ran = [tk for tk in tasks if tk["stats"]]
    check(any(funcs(tk["stats"], "serve") for tk in ran) and
          all(funcs(tk["stats"], "serve") or {k[2] for k in tk["stats"]} == {"swapcontext"}
              for tk in ran),
          "tasks sampled %r" % [sorted(k[2] for k in tk["stats"]) for tk in ran])
    os.kill(t.pid, signal.SIGTERM)
    check(t.p.wait(30) == 0, "resp exited %d: %r" % (t.p.returncode, t.text()[-400:]))


def aiohttp_python(python, build=None):
    """BUILD/venv-aiohttp-X.Y: a venv of `python` with aiohttp from PyPI (venv_python),
    BUILD the build directory (coprof's, from COPROF_BIN) or $COPROF_VENV_DIR."""
    return venv_python(python, "aiohttp", ["aiohttp"],
                       build or os.path.dirname(os.path.dirname(os.path.abspath(BIN))))


def ab_load(port, n):
    """ab, n GETs of / over 8 kept-alive connections: every one complete, none failed
    and none answered other than 2xx."""
    b = subprocess.run(["ab", "-k", "-q", "-n", str(n), "-c", "8", "http://127.0.0.1:%d/" % port],
                       capture_output=True, text=True, timeout=120)
    check(b.returncode == 0, "ab: %d %r" % (b.returncode, b.stderr[-400:]))
    done = re.search(r"^Complete requests:\s+(\d+)$", b.stdout, re.M)
    failed = re.search(r"^Failed requests:\s+(\d+)$", b.stdout, re.M)
    other = re.search(r"^Non-2xx responses:\s+(\d+)$", b.stdout, re.M)
    check(done and int(done.group(1)) == n and failed and failed.group(1) == "0"
          and (not other or other.group(1) == "0"), "ab: %r" % b.stdout[-800:])


def case_python_aiohttp(python):
    """An aiohttp server (aioserver.py) under ab before the attach, while attached in
    trace mode by the wall clock, and after the detach: every request answered, 2xx;
    the server prints nothing from the attach to its exit but its own count, which is
    every request; in the profile, its handler called once per request of the attached
    run, each call in a task of its own (aiohttp runs each request's handler in a task),
    every task kept; and it is left untraced."""
    if not shutil.which("ab"):
        print("SKIP: needs ab (apache2-utils, scripts/setup.sh)")
        sys.exit(SKIP)
    n = 3000
    t = Target([aiohttp_python(python), os.path.join(HERE, "aioserver.py")])
    port = int(re.search(r"^ready port (\d+)$", t.text(), re.M).group(1))
    ab_load(port, n)
    said = t.text()
    r = coprof("attach", "--mode", "trace", "-c", "wall", "-o", "aio-%p.pstat", str(t.pid))
    check(r.returncode == 0, "attach: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    ab_load(port, n)
    r = coprof("detach", str(t.pid))
    check(r.returncode == 0 and "detached" in r.stdout, "detach: %r %r" % (r.stdout, r.stderr))
    path = wrote(r.stdout)
    runs_on(t, shim=True, busy=False)
    check(control_state(t.pid) == "S", "control thread: %s" % control_state(t.pid))
    ab_load(port, n)
    check(t.text() == said, "the server printed: %r" % t.text()[len(said):][-400:])
    os.kill(t.pid, signal.SIGTERM)
    check(t.p.wait(30) == 0, "the server exited %d: %r" % (t.p.returncode, t.text()[-400:]))
    check(t.text() == said + "served %d\n" % (3 * n), "the server said %r" % t.text()[-400:])
    prof = Profile(path)
    check(prof.extras["mode"] == "trace" and prof.extras["clock"] == "wall", "mode, clock")
    check(prof.nc("handle_hello") == n, "handle_hello: %d calls, %d requests" % (
        prof.nc("handle_hello"), n))
    check(not prof.extras["dropped"], "dropped: %r" % prof.extras["dropped"])
    handlers = [task for task in prof.tasks()
                if any(k[2] == "handle_hello" for k in task["stats"])]
    check(len(handlers) == n, "%d tasks hold handle_hello, %d requests" % (len(handlers), n))
    for task in handlers:
        calls = {k[2]: v[1] for k, v in task["stats"].items() if k[2] in ("handle_hello", "digest")}
        check(task["runtime"] == "asyncio" and task["state"] == "finished"
              and calls == {"handle_hello": 1, "digest": 1}, "task %r: %r" % (task["name"], calls))



def main():
    cases = {n[5:].replace("_", "-"): f for n, f in globals().items() if n.startswith("case_")}
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name == "--make-venv" and len(sys.argv) == 4:
        try:
            print(aiohttp_python(sys.argv[2], sys.argv[3]))
        except AssertionError as e:
            print("no aiohttp venv for %s: %s" % (sys.argv[2], e))
        shutil.rmtree(TMP, ignore_errors=True)
        return
    if name not in cases:
        sys.exit("usage: attach.py {%s} [PYTHON]" % ",".join(cases))
    try:
        cases[name](*sys.argv[2:])
        print("ok", name)
    except AssertionError as e:
        print("FAIL %s: %s" % (name, e))
        sys.exit(1)
    finally:
        for p in started:
            if isinstance(p, int):  # a child of a process started here, by its pid
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            elif p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
